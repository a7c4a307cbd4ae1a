// Package auth holds the broker's users, their permissions and password
// hashing, and decides authorization: who may log in, use a vhost, and
// configure, write or read a queue or an exchange, as RabbitMQ's internal
// backend does.
//
// A Registry owns this state. It sits above the router: it asks the router
// whether a vhost exists, keeps its records in the router's metadata store
// (Broker.CommitMeta, read back by Recover), and is told by the router, through
// router.Accounts, when a vhost is deleted (its permissions go in the same
// store batch) and when a definitions document's users and permissions are
// loaded or exported. The router itself knows nothing of users. The front
// ends (link, management) check access here before they call the router.
//
// Lock order: Registry.mu before the router's locks (a Registry asks the
// router about vhosts while holding it); the router never calls a Registry
// while holding one of its own locks.
package auth

import (
	"crypto/md5" // RabbitMQ's legacy rabbit_password_hashing_md5
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
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

// Registry is the broker's users and permissions. Create it with New.
type Registry struct {
	b   *router.Broker
	log *slog.Logger

	// brake slows failed logins down; replaced only before serving
	// (SetLoginBrake).
	brake *LoginBrake

	// tokens validates OAuth 2 tokens; nil when OAuth is off.
	tokens atomic.Pointer[TokenValidator]

	mu     sync.RWMutex
	users  map[string]*User
	perms  map[string]map[string]Permission // user → vhost → permission
	seeded bool                             // the first-start defaults were decided (SeedDefaults)
}

// New returns an empty registry for b and registers it as b's accounts
// (router.Broker.SetAccounts). With a store, call Recover before serving.
func New(b *router.Broker) *Registry {
	r := &Registry{b: b, log: b.Logger(), users: map[string]*User{}, perms: map[string]map[string]Permission{},
		brake: NewLoginBrake(DefaultLoginFailureDelay, DefaultLoginFailureSources, nil)}
	b.SetAccounts(r)
	return r
}

// SetLoginBrake replaces the failed-login brake (the defaults: a 3 s delay,
// 10,000 sources). Call it before serving.
func (r *Registry) SetLoginBrake(b *LoginBrake) { r.brake = b }

// LoginFailed records a failed authentication from src and returns how long
// to wait before answering it (LoginBrake.Failed).
func (r *Registry) LoginFailed(src netip.Addr) time.Duration { return r.brake.Failed(src) }

// LoginFailures is the number of failed authentications since start.
func (r *Registry) LoginFailures() uint64 { return r.brake.Failures() }

func newHash(alg string) (func() hash.Hash, error) {
	switch alg {
	case HashSHA256, "":
		return sha256.New, nil
	case HashSHA512:
		return sha512.New, nil
	case HashMD5:
		return md5.New, nil
	}
	return nil, fmt.Errorf("%w: unknown hashing algorithm '%s'", router.ErrInvalidArgument, alg)
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
		return fmt.Errorf("%w: user name is empty", router.ErrInvalidArgument)
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
		return fmt.Errorf("%w: user '%s': password_hash is not base64: %w", router.ErrInvalidArgument, u.Name, err)
	}
	if len(raw) != 4+h().Size() {
		return fmt.Errorf("%w: user '%s': password_hash has %d bytes, want %d for %s", router.ErrInvalidArgument, u.Name, len(raw), 4+h().Size(), u.HashingAlgorithm)
	}
	return nil
}

// PutUser adds or replaces a user. Once any user exists, the default
// guest/guest user no longer does.
func (r *Registry) PutUser(u User) error {
	if err := validateUser(u); err != nil {
		return err
	}
	if u.HashingAlgorithm == "" {
		u.HashingAlgorithm = HashSHA256
	}
	u.Tags = slices.Clone(u.Tags)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users[u.Name] = &u
	r.b.CommitMeta(new(store.Batch).PutMeta(userKey(u.Name), encodeUser(&u)))
	return nil
}

// DeleteUser removes a user and its permissions.
func (r *Registry) DeleteUser(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.users[name]; !ok {
		return fmt.Errorf("%w: no user '%s'", router.ErrNotFound, name)
	}
	delete(r.users, name)
	mb := new(store.Batch).DeleteMeta(userKey(name))
	for vh := range r.perms[name] {
		mb.DeleteMeta(permissionKey(name, vh))
	}
	r.b.CommitMeta(mb)
	delete(r.perms, name)
	return nil
}

// User returns a user.
func (r *Registry) User(name string) (User, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	u, ok := r.users[name]
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
func (r *Registry) UserExists(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.users) == 0 {
		return name == "guest"
	}
	_, ok := r.users[name]
	return ok
}

// Users returns the defined users sorted by name (empty while only the
// default guest user exists).
func (r *Registry) Users() []User {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]User, 0, len(r.users))
	for _, n := range slices.Sorted(maps.Keys(r.users)) {
		c := *r.users[n]
		c.Tags = slices.Clone(c.Tags)
		out = append(out, c)
	}
	return out
}

// Authenticate checks a user's password. With no users defined the default
// guest/guest user exists.
func (r *Registry) Authenticate(user, password string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.users) == 0 {
		return subtle.ConstantTimeCompare([]byte(user), []byte("guest")) == 1 &&
			subtle.ConstantTimeCompare([]byte(password), []byte("guest")) == 1
	}
	u, ok := r.users[user]
	// An empty password never logs in, whatever hash is stored for it (a
	// definitions user with "password": "" gets a hash of ""), as
	// RabbitMQ's internal backend refuses blank passwords.
	return ok && password != "" && u.PasswordHash != "" && checkPassword(u, password)
}

// vhostExists asks the router; it takes the router's lock, so it may be
// called with r.mu held (lock order: r.mu, then the router's).
func (r *Registry) vhostExists(name string) bool {
	_, ok := r.b.VHost(name)
	return ok
}

// SetPermission grants p.User access to p.VHost (replacing an earlier grant).
// An empty pattern grants nothing, as in RabbitMQ; the user and the vhost
// must exist.
func (r *Registry) SetPermission(p Permission) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Checked under r.mu: a vhost deleted after this check has its
	// permissions removed by VHostDeleted, which waits for r.mu.
	if !r.vhostExists(p.VHost) {
		return fmt.Errorf("%w: permission for user '%s': no vhost '%s'", router.ErrNotFound, p.User, p.VHost)
	}
	if _, ok := r.users[p.User]; !ok && !(len(r.users) == 0 && p.User == "guest") {
		return fmt.Errorf("%w: permission for vhost '%s': no user '%s'", router.ErrNotFound, p.VHost, p.User)
	}
	if r.perms[p.User] == nil {
		r.perms[p.User] = map[string]Permission{}
	}
	r.perms[p.User][p.VHost] = p
	r.b.CommitMeta(new(store.Batch).PutMeta(permissionKey(p.User, p.VHost), encodePermission(p)))
	return nil
}

// DeletePermission revokes user's access to vhost.
func (r *Registry) DeletePermission(user, vhost string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.perms[user][vhost]; !ok {
		return fmt.Errorf("%w: no permission for user '%s' in vhost '%s'", router.ErrNotFound, user, vhost)
	}
	delete(r.perms[user], vhost)
	r.b.CommitMeta(new(store.Batch).DeleteMeta(permissionKey(user, vhost)))
	if len(r.perms[user]) == 0 {
		delete(r.perms, user)
	}
	return nil
}

// Permission returns user's permission in vhost.
func (r *Registry) Permission(user, vhost string) (Permission, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.perms[user][vhost]
	return p, ok
}

// Permissions lists every permission, sorted by user then vhost.
func (r *Registry) Permissions() []Permission {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Permission
	for _, u := range slices.Sorted(maps.Keys(r.perms)) {
		for _, v := range slices.Sorted(maps.Keys(r.perms[u])) {
			out = append(out, r.perms[u][v])
		}
	}
	return out
}

// VHostDeleted drops the permissions of a deleted vhost, adding the deletion
// of their records to mb, the router's batch that deletes the vhost, so that
// both are one atomic store write (router.Accounts).
func (r *Registry) VHostDeleted(vhost string, mb *store.Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, pv := range r.perms {
		if _, ok := pv[vhost]; ok {
			mb.DeleteMeta(permissionKey(u, vhost))
		}
		delete(pv, vhost)
	}
}

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
func (r *Registry) SeedDefaults() {
	r.mu.RLock()
	seeded := r.seeded
	users, perms := len(r.users), len(r.perms)
	r.mu.RUnlock()
	if seeded {
		return
	}
	if users == 0 && perms == 0 {
		if err := r.SetPermission(Permission{User: "guest", VHost: router.DefaultVHost, Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
			r.log.Error("default permission for guest not granted", "err", err)
		}
	} else if perms == 0 {
		r.log.Warn("no permissions are defined: no user may use any vhost until one is granted")
	}
	r.mu.Lock()
	r.seeded = true
	r.mu.Unlock()
	r.b.CommitMeta(new(store.Batch).PutMeta(seededKey, []byte{1}))
}
