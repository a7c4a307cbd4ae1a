package router

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// rabbitExport is a RabbitMQ export without users and permissions (those
// belong to package auth, whose tests load the full document).
func rabbitExport(t *testing.T) []byte {
	t.Helper()
	doc := `{
  "rabbit_version": "4.3.0",
  "rabbitmq_version": "4.3.0",
  "product_name": "RabbitMQ",
  "product_version": "4.3.0",
  "vhosts": [
    {"name": "/", "description": "Default virtual host", "tags": [], "metadata": {"description": "", "tags": []}},
    {"name": "prod", "limits": [], "metadata": {}}
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
}`
	require.True(t, json.Valid([]byte(doc)))
	return []byte(doc)
}

func TestLoadDefinitions(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	require.NoError(t, b.LoadDefinitions(rabbitExport(t)))

	assert.Equal(t, []string{"/", "prod"}, b.VHosts())

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
	require.NoError(t, b.LoadDefinitions(rabbitExport(t)))

	// Export and re-import into a fresh broker.
	out, err := b.ExportDefinitions()
	require.NoError(t, err)
	b2 := New(Options{})
	defer b2.Close()
	require.NoError(t, b2.LoadDefinitions(out))
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

// Users and permissions belong to the Accounts (package auth): a document
// that has some fails on a broker without them, before anything is applied;
// empty sections are fine.
func TestLoadDefinitionsWithoutAccounts(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	for _, doc := range []string{
		`{"vhosts": [{"name": "v1"}], "users": [{"name": "u", "password": "p"}]}`,
		`{"vhosts": [{"name": "v1"}], "permissions": [{"user": "guest", "vhost": "/"}]}`,
	} {
		require.ErrorIs(t, b.LoadDefinitions([]byte(doc)), ErrInvalidArgument, doc)
		_, ok := b.VHost("v1")
		require.False(t, ok, "nothing applied: %s", doc)
	}
	require.NoError(t, b.LoadDefinitions([]byte(`{"vhosts": [{"name": "v1"}], "users": [], "permissions": null}`)))
	_, ok := b.VHost("v1")
	require.True(t, ok)
	out, err := b.ExportDefinitions()
	require.NoError(t, err)
	assert.Contains(t, string(out), "\"users\": [],")
	assert.Contains(t, string(out), "\"permissions\": [],")
}

func TestDeleteVHost(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	b.AddVHost("v")
	require.NoError(t, b.DeleteVHost("v"))
	require.ErrorIs(t, b.DeleteVHost("v"), ErrNotFound)
}
