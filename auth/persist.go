package auth

import (
	"fmt"
	"strings"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router/store"
)

// The registry's records in the broker's metadata store. The keys and the
// values (AMQP-encoded lists) are the ones the router wrote when it held
// users and permissions, so that existing data directories recover; the
// router leaves these prefixes alone.
const (
	userPrefix       = "u/"                // u/<name> → [hash, algorithm, tags]
	permissionPrefix = "P/"                // P/<user>\0<vhost> → [configure, write, read]
	seededKey        = "d/defaults-seeded" // the first-start defaults were decided (SeedDefaults)
)

func userKey(name string) string { return userPrefix + name }

// permissionKey joins the names with NUL, which AMQP names may not contain
// in practice (RabbitMQ refuses it too).
func permissionKey(user, vhost string) string { return permissionPrefix + user + "\x00" + vhost }

func encodeUser(u *User) []byte {
	tags := make(amqp10.List, len(u.Tags))
	for i, t := range u.Tags {
		tags[i] = t
	}
	return encodeList(amqp10.List{u.PasswordHash, u.HashingAlgorithm, tags})
}

func encodePermission(p Permission) []byte {
	return encodeList(amqp10.List{p.Configure, p.Write, p.Read})
}

func encodeList(l amqp10.List) []byte {
	b, err := amqp10.AppendList(nil, l)
	if err != nil {
		panic(fmt.Sprintf("auth: encoding metadata: %v", err)) // strings only: cannot fail
	}
	return b
}

func decodeList(b []byte, n int) (amqp10.List, error) {
	l, _, err := amqp10.ReadList(b)
	if err != nil {
		return nil, err
	}
	if len(l) < n {
		return nil, fmt.Errorf("metadata list has %d fields, want %d", len(l), n)
	}
	return l, nil
}

func listStr(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case amqp10.Symbol:
		return string(s)
	}
	return ""
}

// Recover reads the registry's records back from the broker's store. Call
// it once, after router.Broker.Recover and before serving; without a store
// it does nothing. A record that cannot be decoded fails it (wrapping
// store.ErrCorrupt): nothing is served silently.
func (r *Registry) Recover() error {
	st := r.b.Store()
	if st == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := st.Meta(func(key string, value []byte) error {
		switch {
		case key == seededKey:
			r.seeded = true
		case strings.HasPrefix(key, userPrefix):
			l, err := decodeList(value, 3)
			if err != nil {
				return fmt.Errorf("%w: auth: bad user metadata %q: %v", store.ErrCorrupt, key, err)
			}
			u := &User{Name: key[len(userPrefix):], PasswordHash: listStr(l[0]), HashingAlgorithm: listStr(l[1])}
			if tags, ok := l[2].(amqp10.List); ok {
				for _, t := range tags {
					u.Tags = append(u.Tags, listStr(t))
				}
			}
			r.users[u.Name] = u
		case strings.HasPrefix(key, permissionPrefix):
			user, vh, ok := strings.Cut(key[len(permissionPrefix):], "\x00")
			l, err := decodeList(value, 3)
			if !ok || err != nil {
				return fmt.Errorf("%w: auth: bad permission metadata %q: %v", store.ErrCorrupt, key, err)
			}
			if r.perms[user] == nil {
				r.perms[user] = map[string]Permission{}
			}
			r.perms[user][vh] = Permission{User: user, VHost: vh, Configure: listStr(l[0]), Write: listStr(l[1]), Read: listStr(l[2])}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("auth: recovering users and permissions: %w", err)
	}
	return nil
}
