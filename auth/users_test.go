package auth

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
)

// rabbitHash computes base64(salt ++ H(salt ++ password)) independently of users.go.
func rabbitHash(h hash.Hash, salt []byte, password string) string {
	h.Write(salt)
	h.Write([]byte(password))
	return base64.StdEncoding.EncodeToString(append(append([]byte{}, salt...), h.Sum(nil)...))
}

// newRegistry returns a registry over a new broker (with st as its store,
// nil for none), closed at the end of the test.
func newRegistry(t *testing.T, st store.Store) (*Registry, *router.Broker) {
	t.Helper()
	b := router.New(router.Options{Store: st})
	t.Cleanup(b.Close)
	require.NoError(t, b.Recover())
	r := New(b)
	require.NoError(t, r.Recover())
	return r, b
}

func TestDefaultGuest(t *testing.T) {
	r, _ := newRegistry(t, nil)
	assert.True(t, r.Authenticate("guest", "guest"))
	assert.False(t, r.Authenticate("guest", "nope"))
	assert.False(t, r.Authenticate("other", "guest"))
	assert.False(t, r.CanAccessVHost("guest", "/"), "no permission before the first-start default")
	r.SeedDefaults()
	assert.True(t, r.CanAccessVHost("guest", "/"))
	assert.False(t, r.CanAccessVHost("guest", "missing"))
	require.NoError(t, r.DeletePermission("guest", "/"))
	r.SeedDefaults()
	assert.False(t, r.CanAccessVHost("guest", "/"), "the default is seeded once: a revoked default stays revoked")

	require.NoError(t, r.PutUser(User{Name: "alice", PasswordHash: rabbitHash(sha256.New(), []byte{1, 2, 3, 4}, "pw")}))
	assert.False(t, r.Authenticate("guest", "guest"), "guest only exists while no users are defined")
	assert.True(t, r.Authenticate("alice", "pw"))

	empty, err := HashPasswordWithSalt(HashSHA256, [4]byte{5, 6, 7, 8}, "")
	require.NoError(t, err)
	require.NoError(t, r.PutUser(User{Name: "blank", PasswordHash: empty}))
	assert.False(t, r.Authenticate("blank", ""), "a blank password never logs in")
}

func TestPasswordHashing(t *testing.T) {
	salt := [4]byte{0xde, 0xad, 0xbe, 0xef}
	for alg, h := range map[string]func() hash.Hash{HashSHA256: sha256.New, HashSHA512: sha512.New, HashMD5: md5.New, "": sha256.New} {
		got, err := HashPasswordWithSalt(alg, salt, "s3cret")
		require.NoError(t, err)
		assert.Equal(t, rabbitHash(h(), salt[:], "s3cret"), got, alg)

		random, err := HashPassword(alg, "s3cret")
		require.NoError(t, err)
		r, _ := newRegistry(t, nil)
		require.NoError(t, r.PutUser(User{Name: "u", PasswordHash: random, HashingAlgorithm: alg}))
		assert.True(t, r.Authenticate("u", "s3cret"), alg)
		assert.False(t, r.Authenticate("u", "s3cre"), alg)
	}
	_, err := HashPassword("rabbit_password_hashing_rot13", "x")
	require.ErrorIs(t, err, router.ErrInvalidArgument)

	r, _ := newRegistry(t, nil)
	require.ErrorIs(t, r.PutUser(User{Name: "u", PasswordHash: "!!notbase64"}), router.ErrInvalidArgument)
	require.ErrorIs(t, r.PutUser(User{Name: "u", PasswordHash: base64.StdEncoding.EncodeToString([]byte("short"))}), router.ErrInvalidArgument)
	require.NoError(t, r.PutUser(User{Name: "nopw"}))
	assert.False(t, r.Authenticate("nopw", ""))
}

func TestUsersAndPermissions(t *testing.T) {
	r, b := newRegistry(t, nil)
	b.AddVHost("v")
	require.ErrorIs(t, r.SetPermission(Permission{User: "carol", VHost: "v"}), router.ErrNotFound)
	require.ErrorIs(t, r.SetPermission(Permission{User: "guest", VHost: "nope"}), router.ErrNotFound)
	require.NoError(t, r.SetPermission(Permission{User: "guest", VHost: "v"}), "the default guest user")
	assert.True(t, r.CanAccessVHost("guest", "v"))
	assert.False(t, r.CanAccessVHost("guest", "/"), "no entry for /")
	require.NoError(t, r.DeletePermission("guest", "v"))
	require.ErrorIs(t, r.DeletePermission("guest", "v"), router.ErrNotFound)
	assert.False(t, r.CanAccessVHost("guest", "v"), "an empty permission table grants nothing")
	require.ErrorIs(t, r.Authorize("guest", "v", ResourceQueue, "q", Read), router.ErrAccessRefused)

	h, err := HashPassword(HashSHA512, "pw")
	require.NoError(t, err)
	require.NoError(t, r.PutUser(User{Name: "carol", PasswordHash: h, HashingAlgorithm: HashSHA512, Tags: []string{"management"}}))
	require.NoError(t, r.SetPermission(Permission{User: "carol", VHost: "v", Read: "^r"}))
	assert.Len(t, r.Permissions(), 1)
	assert.Len(t, r.Users(), 1)
	require.NoError(t, r.DeleteUser("carol"))
	assert.Empty(t, r.Permissions())
	require.ErrorIs(t, r.DeleteUser("carol"), router.ErrNotFound)

	// Deleting a vhost (a router operation) drops its permissions here.
	require.NoError(t, r.PutUser(User{Name: "carol", PasswordHash: h, HashingAlgorithm: HashSHA512}))
	require.NoError(t, r.SetPermission(Permission{User: "carol", VHost: "v", Read: "^r"}))
	require.NoError(t, r.SetPermission(Permission{User: "carol", VHost: "/", Read: "^r"}))
	require.NoError(t, b.DeleteVHost("v"))
	require.ErrorIs(t, b.DeleteVHost("v"), router.ErrNotFound)
	assert.Equal(t, []Permission{{User: "carol", VHost: "/", Read: "^r"}}, r.Permissions())
	b.AddVHost("v")
	assert.False(t, r.CanAccessVHost("carol", "v"), "a recreated vhost grants nothing")
}

func TestAuthorize(t *testing.T) {
	r, b := newRegistry(t, nil)
	b.AddVHost("v")
	require.NoError(t, r.PutUser(User{Name: "u"}))
	require.NoError(t, r.SetPermission(Permission{User: "u", VHost: "v", Configure: "^c", Write: "^w|amq\\.default", Read: "("}))
	require.NoError(t, r.Authorize("u", "v", ResourceQueue, "cq", Configure))
	require.NoError(t, r.Authorize("u", "v", ResourceExchange, "wx", Write))
	require.NoError(t, r.Authorize("u", "v", ResourceExchange, "", Write), "the default exchange is amq.default")
	err := r.Authorize("u", "v", ResourceQueue, "xq", Configure)
	require.ErrorIs(t, err, router.ErrAccessRefused)
	require.EqualError(t, err, "router: access refused: configure access to queue 'xq' in vhost 'v' refused for user 'u'")
	require.ErrorIs(t, r.Authorize("u", "v", ResourceQueue, "(", Read), router.ErrAccessRefused, "an invalid pattern grants nothing")
	require.ErrorIs(t, r.Authorize("u", "/", ResourceQueue, "cq", Configure), router.ErrAccessRefused, "no entry for /")
	require.NoError(t, b.DeleteVHost("v"))
	require.ErrorIs(t, r.Authorize("u", "v", ResourceQueue, "cq", Configure), router.ErrAccessRefused)
}

// The registry's records are the ones the router wrote before users moved
// out of it, byte for byte, so that existing data directories recover.
func TestRecordsUnchanged(t *testing.T) {
	st := store.NewMemory()
	r, b := newRegistry(t, st)
	b.AddVHost("v2")
	h, err := HashPasswordWithSalt(HashSHA512, [4]byte{1, 2, 3, 4}, "pw")
	require.NoError(t, err)
	require.NoError(t, r.PutUser(User{Name: "alice", PasswordHash: h, HashingAlgorithm: HashSHA512, Tags: []string{"administrator", "monitoring"}}))
	require.NoError(t, r.PutUser(User{Name: "bob"}))
	require.NoError(t, r.SetPermission(Permission{User: "alice", VHost: "v2", Configure: ".*", Write: "^w", Read: ""}))
	r.SeedDefaults()
	b.Close()
	got := map[string]string{}
	require.NoError(t, st.Meta(func(k string, v []byte) error { got[k] = string(v); return nil }))
	// Written by the router's users.go before the move.
	want := map[string]string{
		"P/alice\x00v2":     "\xc0\v\x03\xa1\x02.*\xa1\x02^w\xa1\x00",
		"d/defaults-seeded": "\x01",
		"u/alice":           "\xc0\x9d\x03\xa1\\AQIDBFEKgg91QUjXOoEuIijrYjDJqmh1G3gQJEpEZS2FiDEOS23JGoN2eht5cR6qAC4KAE7kqph8wGA/9reOn6y+bcw=\xa1\x1erabbit_password_hashing_sha512\xc0\x1c\x02\xa1\radministrator\xa1\nmonitoring",
		"u/bob":             "\xc0$\x03\xa1\x00\xa1\x1erabbit_password_hashing_sha256E",
		"v/v2":              "",
	}
	assert.Equal(t, want, got)
}

func TestRecoveredAfterRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Registry, *router.Broker, *store.Pebble) {
		st, err := store.OpenPebble(dir, store.PebbleOptions{})
		require.NoError(t, err)
		r, b := newRegistry(t, st)
		return r, b, st
	}
	r, b, st := open()
	b.AddVHost("v2")
	b.AddVHost("gone")
	h, err := HashPassword("", "pw")
	require.NoError(t, err)
	require.NoError(t, r.PutUser(User{Name: "alice", PasswordHash: h, Tags: []string{"administrator"}}))
	require.NoError(t, r.PutUser(User{Name: "bob", PasswordHash: h}))
	require.NoError(t, r.SetPermission(Permission{User: "alice", VHost: "v2", Configure: ".*", Write: ".*", Read: "^r"}))
	require.NoError(t, r.SetPermission(Permission{User: "alice", VHost: "gone", Configure: ".*", Write: ".*", Read: ".*"}))
	require.NoError(t, r.SetPermission(Permission{User: "bob", VHost: "v2", Configure: ".*", Write: ".*", Read: ".*"}))
	require.NoError(t, r.DeleteUser("bob"))
	require.NoError(t, b.DeleteVHost("gone"))
	r.SeedDefaults()
	b.Close()
	require.NoError(t, st.Close())

	r, _, st = open()
	defer func() { require.NoError(t, st.Close()) }()
	require.True(t, r.Authenticate("alice", "pw"))
	u, _ := r.User("alice")
	require.Equal(t, []string{"administrator"}, u.Tags)
	p, ok := r.Permission("alice", "v2")
	require.True(t, ok)
	require.Equal(t, "^r", p.Read)
	require.Equal(t, []Permission{p}, r.Permissions(), "bob's and the deleted vhost's permissions stay deleted")
	_, ok = r.User("bob")
	require.False(t, ok)
	r.SeedDefaults()
	require.False(t, r.CanAccessVHost("guest", "/"), "seeded once per store")
}

func TestRecoverCorruptRecord(t *testing.T) {
	for _, key := range []string{"u/x", "P/x\x00/", "P/no-separator"} {
		st := store.NewMemory()
		done := make(chan error, 1)
		value := []byte{0xc0, 0x01}
		if key == "P/no-separator" {
			value = encodePermission(Permission{})
		}
		st.PutMeta(key, value, func(err error) { done <- err })
		require.NoError(t, <-done)
		b := router.New(router.Options{Store: st})
		require.NoError(t, b.Recover(), "the router leaves the registry's records alone")
		err := New(b).Recover()
		require.ErrorIs(t, err, store.ErrCorrupt, key)
		b.Close()
	}
}

// An anonymous-relay publisher is authorized per message: a granted check
// allocates nothing.
func TestAuthorizeGrantedAllocatesNothing(t *testing.T) {
	r, _ := newRegistry(t, nil)
	r.SeedDefaults()
	require.NoError(t, r.Authorize("guest", "/", ResourceExchange, "amq.topic", Write))
	require.Zero(t, testing.AllocsPerRun(100, func() {
		_ = r.Authorize("guest", "/", ResourceExchange, "amq.topic", Write)
	}))
}

// A permission granted while its vhost is being deleted never outlives the
// vhost: SetPermission checks the vhost under the registry's lock, and the
// router's DeleteVHost drops the vhost's permissions under the same lock
// after the vhost is gone.
func TestPermissionNeverOutlivesItsVHost(t *testing.T) {
	r, b := newRegistry(t, store.NewMemory())
	require.NoError(t, r.PutUser(User{Name: "u"}))
	for i := range 50 {
		b.AddVHost("v")
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 20 {
				_ = r.SetPermission(Permission{User: "u", VHost: "v", Read: ".*"})
			}
		}()
		if i%2 == 0 {
			runtime.Gosched()
		}
		require.NoError(t, b.DeleteVHost("v"))
		<-done
		for _, p := range r.Permissions() {
			_, ok := b.VHost(p.VHost)
			require.True(t, ok, "permission %+v for a deleted vhost", p)
		}
	}
}

// The default pattern ".*", matched without a regexp, grants what the
// regexp ^(?:.*) grants: every name, the empty one and names with a
// newline (which `.` does not match) included; other patterns still go
// through their regexp.
func TestPermMatchDefaultPatternAsRegexp(t *testing.T) {
	for _, name := range []string{"", "q", "amq.default", "a\nb", "\n", "ü"} {
		assert.True(t, permMatch(".*", name), "%q", name)
		assert.True(t, permMatch("(?:.*)", name), "%q through the regexp", name)
	}
	assert.True(t, permMatch("q.*", "q1"))
	assert.False(t, permMatch("q.*", "p1"))
	assert.False(t, permMatch("", "q"))
}
