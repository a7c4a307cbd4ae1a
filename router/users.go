package router

import (
	"crypto/md5" // RabbitMQ's legacy rabbit_password_hashing_md5
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"maps"
	"slices"

	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// Password hashing algorithms (RabbitMQ's hashing_algorithm values).
const (
	HashSHA256 = "rabbit_password_hashing_sha256"
	HashSHA512 = "rabbit_password_hashing_sha512"
	HashMD5    = "rabbit_password_hashing_md5"
)

// User is a broker user. PasswordHash is RabbitMQ's format:
// base64(salt ++ H(salt ++ utf8 password)) with a 4-byte salt.
type User struct {
	Name             string
	PasswordHash     string
	HashingAlgorithm string // "" means HashSHA256
	Tags             []string
}

// Permission grants a user access to a vhost. Configure, Write and Read
// are regular expressions over resource names, as in RabbitMQ.
type Permission struct {
	User      string
	VHost     string
	Configure string
	Write     string
	Read      string
}

func newHash(alg string) (func() hash.Hash, error) {
	switch alg {
	case HashSHA256, "":
		return sha256.New, nil
	case HashSHA512:
		return sha512.New, nil
	case HashMD5:
		return md5.New, nil
	}
	return nil, fmt.Errorf("%w: unknown hashing algorithm '%s'", ErrInvalidArgument, alg)
}

// HashPassword returns a RabbitMQ password hash of password with a random
// 4-byte salt: base64(salt ++ H(salt ++ password)). alg "" means SHA-256.
func HashPassword(alg, password string) (string, error) {
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	return HashPasswordWithSalt(alg, salt, password)
}

// HashPasswordWithSalt is HashPassword with a chosen salt (for tests and
// reproducible definitions).
func HashPasswordWithSalt(alg string, salt [4]byte, password string) (string, error) {
	h, err := newHash(alg)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(saltedHash(h, salt[:], password)), nil
}

func saltedHash(h func() hash.Hash, salt []byte, password string) []byte {
	d := h()
	d.Write(salt)
	d.Write([]byte(password))
	return append(slices.Clip(salt), d.Sum(nil)...)
}

// checkPassword verifies password against a stored hash.
func checkPassword(u *User, password string) bool {
	h, err := newHash(u.HashingAlgorithm)
	if err != nil {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(u.PasswordHash)
	if err != nil || len(raw) < 4 {
		return false
	}
	want := saltedHash(h, raw[:4], password)
	return subtle.ConstantTimeCompare(raw, want) == 1
}

func validateUser(u User) error {
	if u.Name == "" {
		return fmt.Errorf("%w: user name is empty", ErrInvalidArgument)
	}
	h, err := newHash(u.HashingAlgorithm)
	if err != nil {
		return fmt.Errorf("user '%s': %w", u.Name, err)
	}
	if u.PasswordHash == "" {
		return nil // no password: cannot log in with one
	}
	raw, err := base64.StdEncoding.DecodeString(u.PasswordHash)
	if err != nil {
		return fmt.Errorf("%w: user '%s': password_hash is not base64: %w", ErrInvalidArgument, u.Name, err)
	}
	if len(raw) != 4+h().Size() {
		return fmt.Errorf("%w: user '%s': password_hash has %d bytes, want %d for %s", ErrInvalidArgument, u.Name, len(raw), 4+h().Size(), u.HashingAlgorithm)
	}
	return nil
}

// PutUser adds or replaces a user. Once any user exists, the default
// guest/guest user no longer does.
func (b *Broker) PutUser(u User) error {
	if err := validateUser(u); err != nil {
		return err
	}
	if u.HashingAlgorithm == "" {
		u.HashingAlgorithm = HashSHA256
	}
	u.Tags = slices.Clone(u.Tags)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.users[u.Name] = &u
	tags := make(value.List, len(u.Tags))
	for i, t := range u.Tags {
		tags[i] = t
	}
	b.putMeta(metaUser+u.Name, encodeList(value.List{u.PasswordHash, u.HashingAlgorithm, tags}))
	return nil
}

// DeleteUser removes a user and its permissions.
func (b *Broker) DeleteUser(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.users[name]; !ok {
		return fmt.Errorf("%w: no user '%s'", ErrNotFound, name)
	}
	delete(b.users, name)
	if b.metaOn() {
		mb := new(store.Batch).DeleteMeta(metaUser + name)
		for vh := range b.perms[name] {
			mb.DeleteMeta(joinKey(metaPermission, name, vh))
		}
		b.st.Commit(mb, b.logStoreErr)
	}
	delete(b.perms, name)
	return nil
}

// User returns a user.
func (b *Broker) User(name string) (User, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	u, ok := b.users[name]
	if !ok {
		return User{}, false
	}
	c := *u
	c.Tags = slices.Clone(u.Tags)
	return c, true
}

// UserExists reports whether a user may log in by name alone, as with a
// client certificate (SASL EXTERNAL): a defined user, or guest while no
// users are defined.
func (b *Broker) UserExists(name string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(b.users) == 0 {
		return name == "guest"
	}
	_, ok := b.users[name]
	return ok
}

// Users returns the defined users sorted by name (empty while only the
// default guest user exists).
func (b *Broker) Users() []User {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]User, 0, len(b.users))
	for _, n := range slices.Sorted(maps.Keys(b.users)) {
		c := *b.users[n]
		c.Tags = slices.Clone(c.Tags)
		out = append(out, c)
	}
	return out
}

// Authenticate checks a user's password. With no users defined the default
// guest/guest user exists.
func (b *Broker) Authenticate(user, password string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(b.users) == 0 {
		return subtle.ConstantTimeCompare([]byte(user), []byte("guest")) == 1 &&
			subtle.ConstantTimeCompare([]byte(password), []byte("guest")) == 1
	}
	u, ok := b.users[user]
	// An empty password never logs in, whatever hash is stored for it (a
	// definitions user with "password": "" gets a hash of ""), as
	// RabbitMQ's internal backend refuses blank passwords.
	return ok && password != "" && u.PasswordHash != "" && checkPassword(u, password)
}

// SetPermission grants p.User access to p.VHost (replacing an earlier grant).
// An empty pattern grants nothing, as in RabbitMQ; the user and the vhost
// must exist.
func (b *Broker) SetPermission(p Permission) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.vhosts[p.VHost]; !ok {
		return fmt.Errorf("%w: permission for user '%s': no vhost '%s'", ErrNotFound, p.User, p.VHost)
	}
	if _, ok := b.users[p.User]; !ok && !(len(b.users) == 0 && p.User == "guest") {
		return fmt.Errorf("%w: permission for vhost '%s': no user '%s'", ErrNotFound, p.VHost, p.User)
	}
	if b.perms[p.User] == nil {
		b.perms[p.User] = map[string]Permission{}
	}
	b.perms[p.User][p.VHost] = p
	b.putMeta(joinKey(metaPermission, p.User, p.VHost), encodeList(value.List{p.Configure, p.Write, p.Read}))
	return nil
}

// DeletePermission revokes user's access to vhost.
func (b *Broker) DeletePermission(user, vhost string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.perms[user][vhost]; !ok {
		return fmt.Errorf("%w: no permission for user '%s' in vhost '%s'", ErrNotFound, user, vhost)
	}
	delete(b.perms[user], vhost)
	if b.metaOn() {
		b.st.DeleteMeta(joinKey(metaPermission, user, vhost), b.logStoreErr)
	}
	if len(b.perms[user]) == 0 {
		delete(b.perms, user)
	}
	return nil
}

// Permission returns user's permission in vhost.
func (b *Broker) Permission(user, vhost string) (Permission, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	p, ok := b.perms[user][vhost]
	return p, ok
}

// Permissions lists every permission, sorted by user then vhost.
func (b *Broker) Permissions() []Permission {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []Permission
	for _, u := range slices.Sorted(maps.Keys(b.perms)) {
		for _, v := range slices.Sorted(maps.Keys(b.perms[u])) {
			out = append(out, b.perms[u][v])
		}
	}
	return out
}

// CanAccessVHost reports whether user may use vhost: the user has a
// permission entry for it. No entry grants nothing, even when the
// permission table is empty (the first-start default is a real entry:
// SeedDefaults).
func (b *Broker) CanAccessVHost(user, vhost string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if _, ok := b.vhosts[vhost]; !ok {
		return false
	}
	_, ok := b.perms[user][vhost]
	return ok
}

// metaSeeded marks a store whose first-start defaults were decided, so
// that a default the operator removed stays removed.
const metaSeeded = "d/defaults-seeded"

// SeedDefaults applies the first-start defaults once per store (every start
// without a store): while no user is defined (only the implicit guest
// exists) and no permission either, guest gets full permissions on the
// default vhost "/", as RabbitMQ seeds its default user at first start. It
// is a stored permission like any other, so it can be revoked. Call it
// after Recover and after the start-up definitions: definitions that
// define users replace guest, and then nothing is granted but what they
// list (RabbitMQ does not seed when it has definitions to load). A store
// written before this marker existed is treated the same way; there, users
// without any permission keep none, which is logged.
func (b *Broker) SeedDefaults() {
	b.mu.RLock()
	seeded := b.seeded
	users, perms := len(b.users), len(b.perms)
	b.mu.RUnlock()
	if seeded {
		return
	}
	if users == 0 && perms == 0 {
		if err := b.SetPermission(Permission{User: "guest", VHost: DefaultVHost, Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
			b.log.Error("default permission for guest not granted", "err", err)
		}
	} else if perms == 0 {
		b.log.Warn("no permissions are defined: no user may use any vhost until one is granted")
	}
	b.mu.Lock()
	b.seeded = true
	b.mu.Unlock()
	b.putMeta(metaSeeded, []byte{1})
}
