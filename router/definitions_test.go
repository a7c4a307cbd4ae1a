package router

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// rabbitHash computes base64(salt ++ H(salt ++ password)) independently of users.go.
func rabbitHash(h hash.Hash, salt []byte, password string) string {
	h.Write(salt)
	h.Write([]byte(password))
	return base64.StdEncoding.EncodeToString(append(append([]byte{}, salt...), h.Sum(nil)...))
}

func TestDefaultGuest(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	assert.True(t, b.Authenticate("guest", "guest"))
	assert.False(t, b.Authenticate("guest", "nope"))
	assert.False(t, b.Authenticate("other", "guest"))
	assert.False(t, b.CanAccessVHost("guest", "/"), "no permission before the first-start default")
	b.SeedDefaults()
	assert.True(t, b.CanAccessVHost("guest", "/"))
	assert.False(t, b.CanAccessVHost("guest", "missing"))
	require.NoError(t, b.DeletePermission("guest", "/"))
	b.SeedDefaults()
	assert.False(t, b.CanAccessVHost("guest", "/"), "the default is seeded once: a revoked default stays revoked")

	require.NoError(t, b.PutUser(User{Name: "alice", PasswordHash: rabbitHash(sha256.New(), []byte{1, 2, 3, 4}, "pw")}))
	assert.False(t, b.Authenticate("guest", "guest"), "guest only exists while no users are defined")
	assert.True(t, b.Authenticate("alice", "pw"))

	empty, err := HashPasswordWithSalt(HashSHA256, [4]byte{5, 6, 7, 8}, "")
	require.NoError(t, err)
	require.NoError(t, b.PutUser(User{Name: "blank", PasswordHash: empty}))
	assert.False(t, b.Authenticate("blank", ""), "a blank password never logs in")
}

func TestPasswordHashing(t *testing.T) {
	salt := [4]byte{0xde, 0xad, 0xbe, 0xef}
	for alg, h := range map[string]func() hash.Hash{HashSHA256: sha256.New, HashSHA512: sha512.New, HashMD5: md5.New, "": sha256.New} {
		got, err := HashPasswordWithSalt(alg, salt, "s3cret")
		require.NoError(t, err)
		assert.Equal(t, rabbitHash(h(), salt[:], "s3cret"), got, alg)

		random, err := HashPassword(alg, "s3cret")
		require.NoError(t, err)
		b := New(Options{})
		require.NoError(t, b.PutUser(User{Name: "u", PasswordHash: random, HashingAlgorithm: alg}))
		assert.True(t, b.Authenticate("u", "s3cret"), alg)
		assert.False(t, b.Authenticate("u", "s3cre"), alg)
		b.Close()
	}
	_, err := HashPassword("rabbit_password_hashing_rot13", "x")
	require.ErrorIs(t, err, ErrInvalidArgument)

	b := New(Options{})
	defer b.Close()
	require.ErrorIs(t, b.PutUser(User{Name: "u", PasswordHash: "!!notbase64"}), ErrInvalidArgument)
	require.ErrorIs(t, b.PutUser(User{Name: "u", PasswordHash: base64.StdEncoding.EncodeToString([]byte("short"))}), ErrInvalidArgument)
	require.NoError(t, b.PutUser(User{Name: "nopw"}))
	assert.False(t, b.Authenticate("nopw", ""))
}

func rabbitExport(t *testing.T, aliceHash string) []byte {
	t.Helper()
	doc := fmt.Sprintf(`{
  "rabbit_version": "4.3.0",
  "rabbitmq_version": "4.3.0",
  "product_name": "RabbitMQ",
  "product_version": "4.3.0",
  "users": [
    {"name": "alice", "password_hash": %q, "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"], "limits": {}},
    {"name": "bob", "password": "bobpw", "tags": "management,monitoring"}
  ],
  "vhosts": [
    {"name": "/", "description": "Default virtual host", "tags": [], "metadata": {"description": "", "tags": []}},
    {"name": "prod", "limits": [], "metadata": {}}
  ],
  "permissions": [
    {"user": "alice", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "bob", "vhost": "prod", "configure": "", "write": "^out", "read": ".*"}
  ],
  "topic_permissions": [],
  "parameters": [],
  "global_parameters": [{"name": "cluster_name", "value": "rabbit@host"}],
  "policies": [
    {"vhost": "/", "name": "dlx", "pattern": "^orders", "apply-to": "queues", "definition": {"dead-letter-exchange": "dlx", "message-ttl": 60000}, "priority": 5}
  ],
  "queues": [
    {"name": "orders", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "quorum", "x-delivery-limit": 5, "x-dead-letter-exchange": "dlx"}},
    {"name": "orders.dlq", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {"x-message-ttl": 60000}},
    {"name": "events", "vhost": "prod", "durable": true, "auto_delete": false, "arguments": {}}
  ],
  "exchanges": [
    {"name": "dlx", "vhost": "/", "type": "fanout", "durable": true, "auto_delete": false, "internal": false, "arguments": {}},
    {"name": "ingress", "vhost": "/", "type": "topic", "durable": true, "auto_delete": false, "internal": false, "arguments": {"alternate-exchange": "dlx"}},
    {"name": "fwd", "vhost": "/", "type": "headers", "durable": true, "auto_delete": false, "internal": true, "arguments": {}}
  ],
  "bindings": [
    {"source": "dlx", "vhost": "/", "destination": "orders.dlq", "destination_type": "queue", "routing_key": "", "arguments": {}},
    {"source": "ingress", "vhost": "/", "destination": "orders", "destination_type": "queue", "routing_key": "orders.#", "arguments": {}},
    {"source": "ingress", "vhost": "/", "destination": "fwd", "destination_type": "exchange", "routing_key": "fwd.*", "arguments": {}},
    {"source": "fwd", "vhost": "/", "destination": "orders", "destination_type": "queue", "routing_key": "", "arguments": {"x-match": "any", "n": 1}}
  ]
}`, aliceHash)
	require.True(t, json.Valid([]byte(doc)))
	return []byte(doc)
}

func TestLoadDefinitions(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	salt := []byte{0x90, 0x8d, 0xc6, 0x0a}
	require.NoError(t, b.LoadDefinitions(rabbitExport(t, rabbitHash(sha256.New(), salt, "alicepw"))))

	assert.True(t, b.Authenticate("alice", "alicepw"))
	assert.False(t, b.Authenticate("alice", "wrong"))
	assert.True(t, b.Authenticate("bob", "bobpw"))
	assert.False(t, b.Authenticate("guest", "guest"))
	bob, ok := b.User("bob")
	require.True(t, ok)
	assert.Equal(t, []string{"management", "monitoring"}, bob.Tags)

	assert.Equal(t, []string{"/", "prod"}, b.VHosts())
	assert.True(t, b.CanAccessVHost("alice", "/"))
	assert.False(t, b.CanAccessVHost("alice", "prod"))
	assert.True(t, b.CanAccessVHost("bob", "prod"))
	p, ok := b.Permission("bob", "prod")
	require.True(t, ok)
	assert.Equal(t, Permission{User: "bob", VHost: "prod", Configure: "", Write: "^out", Read: ".*"}, p)
	// An empty pattern grants nothing, as in RabbitMQ.
	assert.ErrorIs(t, b.Authorize("bob", "prod", ResourceQueue, "q", Configure), ErrAccessRefused)
	assert.NoError(t, b.Authorize("bob", "prod", ResourceExchange, "outbox", Write))

	v, _ := b.VHost("/")
	orders, ok := v.Queue("orders")
	require.True(t, ok)
	assert.Equal(t, Quorum, orders.Type())
	assert.Equal(t, int64(5), orders.DeliveryLimit())
	dlq, _ := v.Queue("orders.dlq")
	assert.Equal(t, int64(60000), ann(value.Map{{Key: value.Symbol("x-message-ttl"), Value: mustGet(dlq.Arguments(), "x-message-ttl")}}, "x-message-ttl"))
	prod, _ := b.VHost("prod")
	_, ok = prod.Queue("events")
	assert.True(t, ok)

	x, ok := v.Exchange("fwd")
	require.True(t, ok)
	assert.True(t, x.Internal)

	// The topology routes.
	assert.Equal(t, Accepted, mustPublish(t, v, "ingress", msg("a", "orders.eu")))
	assert.Equal(t, 1, orders.Len())
	assert.Equal(t, Accepted, mustPublish(t, v, "ingress", msg("b", "nothing")), "alternate exchange")
	assert.Equal(t, 1, dlq.Len())
	m := wireMsg(t, value.Map{{Key: "n", Value: int32(1)}}, nil, "fwd.x")
	assert.Equal(t, Accepted, mustPublish(t, v, "ingress", m), "headers binding with a JSON number")
	assert.Equal(t, 2, orders.Len())

	pol, ok := v.Policy("dlx")
	require.True(t, ok)
	assert.Equal(t, 5, pol.Priority)
	assert.Equal(t, ApplyToQueues, pol.ApplyTo)
	assert.Equal(t, value.Map{{Key: "dead-letter-exchange", Value: "dlx"}, {Key: "message-ttl", Value: int64(60000)}}, pol.Definition)
	eff, ok := v.EffectivePolicy("orders", false, Quorum)
	require.True(t, ok)
	assert.Equal(t, "dlx", eff.Name)
	_, ok = v.EffectivePolicy("other", false, Quorum)
	assert.False(t, ok)
	_, ok = v.EffectivePolicy("orders", true, "")
	assert.False(t, ok, "apply-to queues")

	// Loading the same document again is idempotent.
	require.NoError(t, b.LoadDefinitions(rabbitExport(t, rabbitHash(sha256.New(), salt, "alicepw"))))

	// Export and re-import into a fresh broker.
	out, err := b.ExportDefinitions()
	require.NoError(t, err)
	b2 := New(Options{})
	defer b2.Close()
	require.NoError(t, b2.LoadDefinitions(out))
	assert.True(t, b2.Authenticate("alice", "alicepw"))
	v2, _ := b2.VHost("/")
	o2, ok := v2.Queue("orders")
	require.True(t, ok)
	assert.Equal(t, Quorum, o2.Type())
	assert.Len(t, v2.Bindings(), len(v.Bindings()))
}

func mustGet(m value.Map, k string) any {
	v, _ := lookupKey(m, k)
	return v
}

func mustPublish(t *testing.T, v *VHost, x string, m *Message) OutcomeKind {
	t.Helper()
	res, err := v.Publish(Publish{Exchange: x, Msg: m})
	st := res.Outcome
	require.NoError(t, err)
	return st.Kind
}

func TestLoadDefinitionsErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
		is              error
	}{
		{"bad json", `{"queues": [}`, "definitions", ErrInvalidArgument},
		{"bad queue arg", `{"queues": [{"name": "q1", "vhost": "/", "durable": true, "arguments": {"x-overflow": "bar"}}]}`, "queue 'q1' in vhost '/'", ErrPreconditionFailed},
		{"missing vhost", `{"queues": [{"name": "q2", "vhost": "nope", "durable": true}]}`, "queue 'q2' in vhost 'nope'", ErrNotFound},
		{"bad exchange type", `{"exchanges": [{"name": "x1", "vhost": "/", "type": "weird"}]}`, "exchange 'x1'", ErrInvalidArgument},
		{"binding to nothing", `{"bindings": [{"source": "amq.direct", "vhost": "/", "destination": "ghost", "destination_type": "queue", "routing_key": "k"}]}`, "ghost", ErrNotFound},
		{"bad destination type", `{"bindings": [{"source": "amq.direct", "vhost": "/", "destination": "q", "destination_type": "stream"}]}`, "destination_type", ErrInvalidArgument},
		{"bad algorithm", `{"users": [{"name": "u1", "password_hash": "", "hashing_algorithm": "rot13"}]}`, "user 'u1'", ErrInvalidArgument},
		{"permission for unknown user", `{"users": [{"name": "u2", "password": "p"}], "permissions": [{"user": "ghost", "vhost": "/"}]}`, "user 'ghost'", ErrNotFound},
		{"bad policy pattern", `{"policies": [{"vhost": "/", "name": "p1", "pattern": "(", "definition": {"max-length": 1}}]}`, "policy 'p1'", ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(Options{})
			defer b.Close()
			err := b.LoadDefinitions([]byte(tt.doc))
			require.ErrorIs(t, err, tt.is)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestPolicies(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	require.NoError(t, b.PutPolicy(Policy{Name: "low", Pattern: ".*", Priority: 1, Definition: value.Map{{Key: "max-length", Value: int64(10)}}}))
	require.NoError(t, b.PutPolicy(Policy{Name: "high", Pattern: "^q", ApplyTo: ApplyToQuorumQueues, Priority: 2, Definition: value.Map{{Key: value.Symbol("delivery-limit"), Value: int64(3)}}}))
	v, _ := b.VHost("/")
	p, ok := v.EffectivePolicy("q1", false, Quorum)
	require.True(t, ok)
	assert.Equal(t, "high", p.Name)
	assert.Equal(t, value.Map{{Key: "delivery-limit", Value: int64(3)}}, p.Definition)
	p, _ = v.EffectivePolicy("q1", false, Classic)
	assert.Equal(t, "low", p.Name)
	assert.Len(t, b.Policies(), 2)
	require.NoError(t, b.DeletePolicy("/", "high"))
	require.ErrorIs(t, b.DeletePolicy("/", "high"), ErrNotFound)
	require.ErrorIs(t, b.PutPolicy(Policy{Name: "x", Pattern: ".*", ApplyTo: "everything", Definition: value.Map{{Key: "a", Value: 1}}}), ErrInvalidArgument)
	require.ErrorIs(t, b.PutPolicy(Policy{VHost: "nope", Name: "x", Pattern: ".*"}), ErrNotFound)
}

func TestUsersAndPermissions(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	b.AddVHost("v")
	require.ErrorIs(t, b.SetPermission(Permission{User: "carol", VHost: "v"}), ErrNotFound)
	require.NoError(t, b.SetPermission(Permission{User: "guest", VHost: "v"}), "the default guest user")
	assert.True(t, b.CanAccessVHost("guest", "v"))
	assert.False(t, b.CanAccessVHost("guest", "/"), "no entry for /")
	require.NoError(t, b.DeletePermission("guest", "v"))
	assert.False(t, b.CanAccessVHost("guest", "v"), "an empty permission table grants nothing")
	require.ErrorIs(t, b.Authorize("guest", "v", ResourceQueue, "q", Read), ErrAccessRefused)

	h, err := HashPassword(HashSHA512, "pw")
	require.NoError(t, err)
	require.NoError(t, b.PutUser(User{Name: "carol", PasswordHash: h, HashingAlgorithm: HashSHA512, Tags: []string{"management"}}))
	require.NoError(t, b.SetPermission(Permission{User: "carol", VHost: "v", Read: "^r"}))
	assert.Len(t, b.Permissions(), 1)
	assert.Len(t, b.Users(), 1)
	require.NoError(t, b.DeleteUser("carol"))
	assert.Empty(t, b.Permissions())
	require.ErrorIs(t, b.DeleteUser("carol"), ErrNotFound)

	require.NoError(t, b.DeleteVHost("v"))
	require.ErrorIs(t, b.DeleteVHost("v"), ErrNotFound)
}
