package amqpnode

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
)

// testEnv is a router with its default vhost and a management node.
type testEnv struct {
	rt    *router.Broker
	users *auth.Registry
	vh    *router.VHost
	node  *Node
	user  string
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	rt := router.New(router.Options{})
	t.Cleanup(rt.Close)
	users := auth.New(rt)
	users.SeedDefaults() // guest on "/", as at a broker's first start
	vh, ok := rt.VHost("/")
	require.True(t, ok)
	return &testEnv{rt: rt, users: users, vh: vh, node: New(Options{Router: rt, Auth: users, Node: "epitaph@test"}), user: "guest"}
}

// testResp is a decoded response.
type testResp struct {
	status   string
	corr     any
	appProps amqp10.Map
	body     any
}

// testRequest encodes a request as the official client does:
// message-id, to, subject, reply-to "$me" and an amqp-value body.
func testRequest(t *testing.T, id any, method, path string, body any) *amqp10.Message {
	t.Helper()
	replyTo := "$me"
	b, err := amqp10.AppendProperties(nil, &amqp10.Properties{MessageID: id, To: &path, Subject: &method, ReplyTo: &replyTo})
	require.NoError(t, err)
	b, err = amqp10.AppendAMQPValue(b, body)
	require.NoError(t, err)
	m, err := amqp10.ParseMessage(b)
	require.NoError(t, err)
	return m
}

func decodeTestResp(t *testing.T, raw []byte) testResp {
	t.Helper()
	m, err := amqp10.ParseMessage(raw)
	require.NoError(t, err)
	p, err := m.Properties()
	require.NoError(t, err)
	require.NotNil(t, p)
	require.NotNil(t, p.Subject, "the subject (status) must always be set")
	ap, err := m.ApplicationProperties()
	require.NoError(t, err)
	sec, err := m.Body()
	require.NoError(t, err)
	v, rest, err := amqp10.ReadValue(sec)
	require.NoError(t, err)
	require.Empty(t, rest, "one body section")
	d, ok := v.(*amqp10.Described)
	require.True(t, ok, "body is %T", v)
	require.Equal(t, amqp10.DescAMQPValue, d.Descriptor)
	return testResp{status: *p.Subject, corr: p.CorrelationID, appProps: ap, body: d.Value}
}

func (e *testEnv) do(t *testing.T, method, path string, body any) testResp {
	t.Helper()
	r := decodeTestResp(t, e.node.Request(nil, e.user, e.vh, testRequest(t, "req-1", method, path, body)))
	require.Equal(t, "req-1", r.corr)
	return r
}

// requireError requires status and a utf8 explanation (never a map).
func requireError(t *testing.T, r testResp, status string) string {
	t.Helper()
	require.Equal(t, status, r.status, "body: %v", r.body)
	s, ok := r.body.(string)
	require.True(t, ok, "error body is %T, want utf8", r.body)
	require.NotEmpty(t, s)
	return s
}

func get(t *testing.T, m amqp10.Map, key string) any {
	t.Helper()
	v, ok := m.Get(key)
	require.True(t, ok, "key %q missing in %v", key, m)
	return v
}

func queueBodyMap(args amqp10.Map) amqp10.Map {
	return amqp10.Map{
		{Key: "durable", Value: true},
		{Key: "auto_delete", Value: false},
		{Key: "exclusive", Value: false},
		{Key: "arguments", Value: args},
	}
}

func enqueue(t *testing.T, vh *router.VHost, queue string, n int) {
	t.Helper()
	q, ok := vh.Queue(queue)
	require.True(t, ok)
	for range n {
		w, err := amqp10.ParseMessage(amqp10.AppendData(nil, []byte("x")))
		require.NoError(t, err)
		m := router.NewAMQP10Message(w)
		m.RoutingKeys = []string{queue}
		q.Enqueue(m)
	}
}

func TestDeclareQuorumQueueExactTypes(t *testing.T) {
	e := newTestEnv(t)
	args := amqp10.Map{
		{Key: "x-queue-type", Value: "quorum"},
		{Key: "x-dead-letter-exchange", Value: "dlx"},
		{Key: "x-delivery-limit", Value: int64(3)},
		{Key: "x-single-active-consumer", Value: true},
	}
	r := e.do(t, "PUT", "/queues/work", queueBodyMap(args))
	require.Equal(t, "201", r.status, "body: %v", r.body)
	require.Equal(t, amqp10.Map{{Key: "http:response", Value: "1.1"}}, r.appProps)
	m, ok := r.body.(amqp10.Map)
	require.True(t, ok, "body is %T", r.body)
	for _, kv := range m {
		require.IsType(t, "", kv.Key, "keys are utf8")
	}
	assert.Equal(t, "work", get(t, m, "name"))
	assert.Equal(t, "/", get(t, m, "vhost"))
	assert.Equal(t, true, get(t, m, "durable"))
	assert.Equal(t, false, get(t, m, "auto_delete"))
	assert.Equal(t, false, get(t, m, "exclusive"))
	assert.Equal(t, "quorum", get(t, m, "type"))
	assert.Equal(t, "epitaph@test", get(t, m, "leader"))
	assert.Equal(t, uint32(0), get(t, m, "consumer_count"))
	assert.Equal(t, uint64(0), get(t, m, "message_count"))
	assert.Equal(t, &amqp10.Array{Type: amqp10.TypeStr32, Elems: []any{"epitaph@test"}}, get(t, m, "replicas"))
	qa, ok := get(t, m, "arguments").(amqp10.Map)
	require.True(t, ok)
	assert.Equal(t, "quorum", get(t, qa, "x-queue-type"))
	assert.Equal(t, "dlx", get(t, qa, "x-dead-letter-exchange"))
	assert.Equal(t, int64(3), get(t, qa, "x-delivery-limit"))
	assert.Equal(t, true, get(t, qa, "x-single-active-consumer"))

	q, ok := e.vh.Queue("work")
	require.True(t, ok)
	assert.Equal(t, router.Quorum, q.Type())
	assert.Equal(t, int64(3), q.DeliveryLimit())

	// an equivalent redeclare: 200 with the counts
	enqueue(t, e.vh, "work", 2)
	r = e.do(t, "PUT", "/queues/work", queueBodyMap(args))
	require.Equal(t, "200", r.status)
	assert.Equal(t, uint64(2), get(t, r.body.(amqp10.Map), "message_count"))

	// different arguments: 409 with a string
	args2 := amqp10.Map{{Key: "x-queue-type", Value: "quorum"}, {Key: "x-delivery-limit", Value: int64(5)}}
	msg := requireError(t, e.do(t, "PUT", "/queues/work", queueBodyMap(args2)), "409")
	assert.Contains(t, msg, "inequivalent arg")
	assert.NotContains(t, msg, "router:")
	// a different type: 409
	requireError(t, e.do(t, "PUT", "/queues/work", queueBodyMap(amqp10.Map{{Key: "x-queue-type", Value: "classic"}})), "409")
}

func TestClassicQueueArgumentsAlwaysCarryType(t *testing.T) {
	e := newTestEnv(t)
	// the client's DefaultQueueSpecification sends no x-queue-type and an empty map
	r := e.do(t, "PUT", "/queues/plain", queueBodyMap(amqp10.Map{}))
	require.Equal(t, "201", r.status)
	m := r.body.(amqp10.Map)
	assert.Equal(t, "classic", get(t, m, "type"))
	assert.Equal(t, amqp10.Map{{Key: "x-queue-type", Value: "classic"}}, get(t, m, "arguments"))

	// omitted properties take RabbitMQ's defaults (durable true)
	r = e.do(t, "PUT", "/queues/defaults", amqp10.Map{})
	require.Equal(t, "201", r.status)
	assert.Equal(t, true, get(t, r.body.(amqp10.Map), "durable"))

	// an existing quorum queue redeclared without a type is equivalent
	require.Equal(t, "201", e.do(t, "PUT", "/queues/qq", queueBodyMap(amqp10.Map{{Key: "x-queue-type", Value: "quorum"}})).status)
	r = e.do(t, "PUT", "/queues/qq", queueBodyMap(amqp10.Map{}))
	require.Equal(t, "200", r.status)
	assert.Equal(t, "quorum", get(t, r.body.(amqp10.Map), "type"))
}

func TestCorrelationIDKeepsItsType(t *testing.T) {
	e := newTestEnv(t)
	for _, id := range []any{"5f0c6a2e-uuid-string", []byte{1, 2, 3}, uint64(42), amqp10.UUID{1, 2, 3}} {
		raw := e.node.Request(nil, "guest", e.vh, testRequest(t, id, "GET", "/queues/missing", nil))
		r := decodeTestResp(t, raw)
		assert.Equal(t, id, r.corr)
		requireError(t, r, "404")
	}
	// without a message-id the response still has a subject
	raw := e.node.Request(nil, "guest", e.vh, testRequest(t, nil, "GET", "/queues/missing", nil))
	r := decodeTestResp(t, raw)
	assert.Nil(t, r.corr)
	assert.Equal(t, "404", r.status)
}

func TestQueueDeclareErrors(t *testing.T) {
	e := newTestEnv(t)
	for _, tc := range []struct {
		name, path string
		body       any
		status     string
	}{
		{"empty name", "/queues/", queueBodyMap(nil), "400"},
		{"line feed", "/queues/a%0Ab", queueBodyMap(nil), "400"},
		{"carriage return", "/queues/a%0Db", queueBodyMap(nil), "400"},
		{"amq prefix", "/queues/amq.mine", queueBodyMap(nil), "403"},
		{"body not a map", "/queues/q", "durable", "400"},
		{"null body", "/queues/q", nil, "400"},
		{"unknown property", "/queues/q", amqp10.Map{{Key: "passive", Value: true}}, "400"},
		{"durable not a boolean", "/queues/q", amqp10.Map{{Key: "durable", Value: "yes"}}, "400"},
		{"arguments not a map", "/queues/q", amqp10.Map{{Key: "arguments", Value: "x"}}, "400"},
		{"argument key not a string", "/queues/q", amqp10.Map{{Key: "arguments", Value: amqp10.Map{{Key: int64(1), Value: "x"}}}}, "400"},
		{"dlx of the wrong type", "/queues/q", queueBodyMap(amqp10.Map{{Key: "x-dead-letter-exchange", Value: int64(1)}}), "400"},
		// invalid arguments are precondition failures: 409
		{"dlrk without dlx", "/queues/q", queueBodyMap(amqp10.Map{{Key: "x-dead-letter-routing-key", Value: "k"}}), "409"},
		{"strategy foo", "/queues/q", queueBodyMap(amqp10.Map{{Key: "x-queue-type", Value: "quorum"}, {Key: "x-dead-letter-strategy", Value: "foo"}}), "409"},
		{"overflow bar", "/queues/q", queueBodyMap(amqp10.Map{{Key: "x-overflow", Value: "bar"}}), "409"},
		{"CQ with a delivery limit", "/queues/q", queueBodyMap(amqp10.Map{{Key: "x-delivery-limit", Value: int64(2)}}), "409"},
		{"CQ with a strategy", "/queues/q", queueBodyMap(amqp10.Map{{Key: "x-dead-letter-strategy", Value: "at-most-once"}}), "409"},
		{"non-durable quorum", "/queues/q", amqp10.Map{{Key: "durable", Value: false}, {Key: "arguments", Value: amqp10.Map{{Key: "x-queue-type", Value: "quorum"}}}}, "409"},
		{"exclusive without a connection", "/queues/q", amqp10.Map{{Key: "exclusive", Value: true}}, "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireError(t, e.do(t, "PUT", tc.path, tc.body), tc.status)
		})
	}
	_, ok := e.vh.Queue("q")
	assert.False(t, ok, "no failed declare created the queue")

	// a DLX that does not exist is fine
	r := e.do(t, "PUT", "/queues/q", queueBodyMap(amqp10.Map{{Key: "x-dead-letter-exchange", Value: "nowhere"}}))
	assert.Equal(t, "201", r.status)
	// symbol argument keys and values are accepted
	r = e.do(t, "PUT", "/queues/sym", queueBodyMap(amqp10.Map{{Key: amqp10.Symbol("x-dead-letter-exchange"), Value: amqp10.Symbol("dlx")}}))
	require.Equal(t, "201", r.status)
	assert.Equal(t, "dlx", get(t, get(t, r.body.(amqp10.Map), "arguments").(amqp10.Map), "x-dead-letter-exchange"))
}

func TestPathSegmentsArePercentDecoded(t *testing.T) {
	e := newTestEnv(t)
	// the client's encodePathSegments: url.QueryEscape with + → %20
	r := e.do(t, "PUT", "/queues/a%2Fb%20c%C3%A9", queueBodyMap(nil))
	require.Equal(t, "201", r.status)
	assert.Equal(t, "a/b cé", get(t, r.body.(amqp10.Map), "name"))
	_, ok := e.vh.Queue("a/b cé")
	assert.True(t, ok)
	requireError(t, e.do(t, "GET", "/queues/a%ZZ", nil), "400")
}

func TestGetDeletePurgeQueue(t *testing.T) {
	e := newTestEnv(t)
	require.Equal(t, "201", e.do(t, "PUT", "/queues/q", queueBodyMap(nil)).status)
	enqueue(t, e.vh, "q", 3)

	r := e.do(t, "GET", "/queues/q", nil)
	require.Equal(t, "200", r.status)
	m := r.body.(amqp10.Map)
	assert.Equal(t, uint64(3), get(t, m, "message_count"))
	assert.Equal(t, uint32(0), get(t, m, "consumer_count"))

	requireError(t, e.do(t, "GET", "/queues/nope", nil), "404")

	r = e.do(t, "DELETE", "/queues/q/messages", nil)
	require.Equal(t, "200", r.status)
	assert.Equal(t, amqp10.Map{{Key: "message_count", Value: uint64(3)}}, r.body)
	assert.Equal(t, 0, mustQueue(t, e.vh, "q").Len())
	requireError(t, e.do(t, "DELETE", "/queues/nope/messages", nil), "400")

	enqueue(t, e.vh, "q", 2)
	r = e.do(t, "DELETE", "/queues/q", nil)
	require.Equal(t, "200", r.status)
	assert.Equal(t, amqp10.Map{{Key: "message_count", Value: uint64(2)}}, r.body)
	_, ok := e.vh.Queue("q")
	assert.False(t, ok)
	// deleting a missing queue is idempotent
	r = e.do(t, "DELETE", "/queues/q", nil)
	require.Equal(t, "200", r.status)
	assert.Equal(t, amqp10.Map{{Key: "message_count", Value: uint64(0)}}, r.body)
}

func mustQueue(t *testing.T, vh *router.VHost, name string) *router.Queue {
	t.Helper()
	q, ok := vh.Queue(name)
	require.True(t, ok, "queue %q", name)
	return q
}

func TestExclusiveQueues(t *testing.T) {
	e := newTestEnv(t)
	type conn struct{ id int }
	c1, c2 := &conn{1}, &conn{2}
	req := func(owner any, method, path string, body any) testResp {
		return decodeTestResp(t, e.node.Request(owner, "guest", e.vh, testRequest(t, "x", method, path, body)))
	}
	body := amqp10.Map{{Key: "exclusive", Value: true}, {Key: "auto_delete", Value: false}, {Key: "durable", Value: false}}
	r := req(c1, "PUT", "/queues/mine", body)
	require.Equal(t, "201", r.status, "body %v", r.body)
	assert.Equal(t, true, get(t, r.body.(amqp10.Map), "exclusive"))
	assert.Equal(t, c1, mustQueue(t, e.vh, "mine").Owner())
	require.Equal(t, "200", req(c1, "PUT", "/queues/mine", body).status)
	// another connection (or one the node does not know) finds it locked
	requireError(t, req(c2, "PUT", "/queues/mine", body), "400")
	requireError(t, req(c2, "DELETE", "/queues/mine/messages", nil), "400")
	requireError(t, req(nil, "DELETE", "/queues/mine", nil), "400")
	require.Equal(t, "200", req(c1, "DELETE", "/queues/mine", nil).status)
}

func TestExchanges(t *testing.T) {
	e := newTestEnv(t)
	xbody := func(typ string, autoDelete bool) amqp10.Map {
		return amqp10.Map{{Key: "auto_delete", Value: autoDelete}, {Key: "durable", Value: true}, {Key: "type", Value: typ}}
	}
	r := e.do(t, "PUT", "/exchanges/dlx", xbody("fanout", false))
	require.Equal(t, "204", r.status, "body %v", r.body)
	assert.Nil(t, r.body)
	info, ok := e.vh.Exchange("dlx")
	require.True(t, ok)
	assert.Equal(t, "fanout", info.Type)

	assert.Equal(t, "204", e.do(t, "PUT", "/exchanges/dlx", xbody("fanout", false)).status)
	requireError(t, e.do(t, "PUT", "/exchanges/dlx", xbody("direct", false)), "409")
	requireError(t, e.do(t, "PUT", "/exchanges/dlx", xbody("fanout", true)), "409")
	// default type direct
	require.Equal(t, "204", e.do(t, "PUT", "/exchanges/d", amqp10.Map{}).status)
	info, _ = e.vh.Exchange("d")
	assert.Equal(t, "direct", info.Type)
	// arguments
	require.Equal(t, "204", e.do(t, "PUT", "/exchanges/withae", amqp10.Map{{Key: "type", Value: "headers"},
		{Key: "arguments", Value: amqp10.Map{{Key: "alternate-exchange", Value: "ae"}}}}).status)

	requireError(t, e.do(t, "PUT", "/exchanges/", xbody("direct", false)), "403")
	requireError(t, e.do(t, "PUT", "/exchanges/amq.mine", xbody("direct", false)), "403")
	assert.Equal(t, "204", e.do(t, "PUT", "/exchanges/amq.direct", xbody("direct", false)).status)
	requireError(t, e.do(t, "PUT", "/exchanges/amq.direct", xbody("fanout", false)), "409")
	requireError(t, e.do(t, "PUT", "/exchanges/bad", xbody("x-nope", false)), "400")
	requireError(t, e.do(t, "PUT", "/exchanges/bad", amqp10.Map{{Key: "type", Value: int64(1)}}), "400")
	requireError(t, e.do(t, "PUT", "/exchanges/a%0Ab", xbody("direct", false)), "400")

	r = e.do(t, "DELETE", "/exchanges/dlx", nil)
	require.Equal(t, "204", r.status)
	assert.Nil(t, r.body)
	assert.False(t, e.vh.HasExchange("dlx"))
	assert.Equal(t, "204", e.do(t, "DELETE", "/exchanges/dlx", nil).status, "idempotent")
	requireError(t, e.do(t, "DELETE", "/exchanges/amq.direct", nil), "403")
	requireError(t, e.do(t, "DELETE", "/exchanges/", nil), "403")
}

func TestBindings(t *testing.T) {
	e := newTestEnv(t)
	require.Equal(t, "204", e.do(t, "PUT", "/exchanges/x", amqp10.Map{{Key: "type", Value: "direct"}}).status)
	require.Equal(t, "204", e.do(t, "PUT", "/exchanges/x2", amqp10.Map{{Key: "type", Value: "fanout"}}).status)
	require.Equal(t, "201", e.do(t, "PUT", "/queues/q", queueBodyMap(nil)).status)
	bindBody := func(dstKey, dst, key string, args amqp10.Map) amqp10.Map {
		return amqp10.Map{{Key: "binding_key", Value: key}, {Key: "source", Value: "x"}, {Key: dstKey, Value: dst}, {Key: "arguments", Value: args}}
	}
	r := e.do(t, "POST", "/bindings", bindBody("destination_queue", "q", "k", amqp10.Map{}))
	require.Equal(t, "204", r.status, "body %v", r.body)
	assert.Nil(t, r.body)
	require.Equal(t, "204", e.do(t, "POST", "/bindings", bindBody("destination_queue", "q", "k", amqp10.Map{{Key: "a", Value: "b"}})).status)
	require.Equal(t, "204", e.do(t, "POST", "/bindings", bindBody("destination_queue", "q", "other", amqp10.Map{})).status)
	require.Equal(t, "204", e.do(t, "POST", "/bindings", bindBody("destination_exchange", "x2", "k", amqp10.Map{})).status)

	r = e.do(t, "GET", "/bindings?src=x&dstq=q&key=k", nil)
	require.Equal(t, "200", r.status)
	list, ok := r.body.(amqp10.List)
	require.True(t, ok, "body %T", r.body)
	require.Len(t, list, 2)
	first := list[0].(amqp10.Map)
	assert.Equal(t, "x", get(t, first, "source"))
	assert.Equal(t, "q", get(t, first, "destination_queue"))
	assert.Equal(t, "k", get(t, first, "binding_key"))
	assert.Equal(t, amqp10.Map{}, get(t, first, "arguments"))
	assert.Equal(t, "/bindings/src=x;dstq=q;key=k;args=", get(t, first, "location"))
	withArgs := list[1].(amqp10.Map)
	loc := get(t, withArgs, "location").(string)
	assert.Regexp(t, `^/bindings/src=x;dstq=q;key=k;args=[0-9A-Za-z\-_]+$`, loc)
	requireError(t, e.do(t, "GET", "/bindings?src=x&key=k", nil), "400")

	// deleting by a location with an args hash removes only that binding
	require.Equal(t, "204", e.do(t, "DELETE", loc, nil).status)
	r = e.do(t, "GET", "/bindings?src=x&dstq=q&key=k", nil)
	require.Len(t, r.body.(amqp10.List), 1)

	// the client's args= (always empty) removes the key's bindings whatever their arguments
	require.Equal(t, "204", e.do(t, "POST", "/bindings", bindBody("destination_queue", "q", "k", amqp10.Map{{Key: "a", Value: "b"}})).status)
	require.Equal(t, "204", e.do(t, "DELETE", "/bindings/src=x;dstq=q;key=k;args=", nil).status)
	r = e.do(t, "GET", "/bindings?src=x&dstq=q&key=k", nil)
	assert.Empty(t, r.body.(amqp10.List))
	r = e.do(t, "GET", "/bindings?src=x&dstq=q&key=other", nil)
	assert.Len(t, r.body.(amqp10.List), 1, "other keys stay")
	// nothing matched, missing resources: still 204
	assert.Equal(t, "204", e.do(t, "DELETE", "/bindings/src=x;dstq=q;key=k;args=", nil).status)
	assert.Equal(t, "204", e.do(t, "DELETE", "/bindings/src=nope;dstq=nope;key=;args=", nil).status)
	// exchange destination
	require.Equal(t, "204", e.do(t, "DELETE", "/bindings/src=x;dste=x2;key=k;args=", nil).status)
	r = e.do(t, "GET", "/bindings?src=x&dste=x2&key=k", nil)
	assert.Empty(t, r.body.(amqp10.List))

	requireError(t, e.do(t, "DELETE", "/bindings/src=x;dstz=q;key=k;args=", nil), "400")
	requireError(t, e.do(t, "POST", "/bindings", bindBody("destination_queue", "missing", "k", nil)), "400")
	requireError(t, e.do(t, "POST", "/bindings", amqp10.Map{{Key: "source", Value: "x"}}), "400")
	requireError(t, e.do(t, "POST", "/bindings", amqp10.Map{{Key: "source", Value: ""}, {Key: "destination_queue", Value: "q"}}), "403")
	requireError(t, e.do(t, "POST", "/bindings", amqp10.Map{{Key: "source", Value: "x"}, {Key: "destination_queue", Value: "q"}, {Key: "routing_key", Value: "k"}}), "400")

	// percent-encoded names in the unbind path
	require.Equal(t, "201", e.do(t, "PUT", "/queues/a%2Fb", queueBodyMap(nil)).status)
	require.Equal(t, "204", e.do(t, "POST", "/bindings", amqp10.Map{{Key: "source", Value: "x"}, {Key: "destination_queue", Value: "a/b"}, {Key: "binding_key", Value: "k k"}}).status)
	r = e.do(t, "GET", "/bindings?src=x&dstq=a%2Fb&key=k%20k", nil)
	require.Len(t, r.body.(amqp10.List), 1)
	assert.Equal(t, "/bindings/src=x;dstq=a%2Fb;key=k%20k;args=", get(t, r.body.(amqp10.List)[0].(amqp10.Map), "location"))
	require.Equal(t, "204", e.do(t, "DELETE", "/bindings/src=x;dstq=a%2Fb;key=k%20k;args=", nil).status)
	r = e.do(t, "GET", "/bindings?src=x&dstq=a%2Fb&key=k%20k", nil)
	assert.Empty(t, r.body.(amqp10.List))
}

func TestUnknownRequests(t *testing.T) {
	e := newTestEnv(t)
	requireError(t, e.do(t, "GET", "/nothing", nil), "400")
	requireError(t, e.do(t, "GET", "/queues/q/extra", nil), "400")
	requireError(t, e.do(t, "POST", "/queues/q", nil), "405")
	requireError(t, e.do(t, "GET", "/exchanges/x", nil), "405")
	requireError(t, e.do(t, "PATCH", "/bindings", nil), "405")
	requireError(t, e.do(t, "GET", "/queues/q/messages", nil), "405")
	requireError(t, e.do(t, "PUT", "/auth/tokens", []byte("token")), "400")
	requireError(t, e.do(t, "GET", "queues/q", nil), "400")

	// reply-to other than $me, or no path
	b, err := amqp10.AppendProperties(nil, &amqp10.Properties{MessageID: "i", To: ptr("/queues/q"), Subject: ptr("GET"), ReplyTo: ptr("/queues/elsewhere")})
	require.NoError(t, err)
	m, err := amqp10.ParseMessage(b)
	require.NoError(t, err)
	r := decodeTestResp(t, e.node.Request(nil, "guest", e.vh, m))
	assert.Equal(t, "i", r.corr)
	requireError(t, r, "400")
	b, err = amqp10.AppendProperties(nil, &amqp10.Properties{MessageID: "j", Subject: ptr("GET")})
	require.NoError(t, err)
	m, err = amqp10.ParseMessage(b)
	require.NoError(t, err)
	r = decodeTestResp(t, e.node.Request(nil, "guest", e.vh, m))
	assert.Equal(t, "j", r.corr)
	requireError(t, r, "400")
	// no properties at all
	m, err = amqp10.ParseMessage(amqp10.AppendData(nil, []byte("x")))
	require.NoError(t, err)
	requireError(t, decodeTestResp(t, e.node.Request(nil, "guest", e.vh, m)), "400")
	// a data body where a map is expected
	b, err = amqp10.AppendProperties(nil, &amqp10.Properties{MessageID: "k", To: ptr("/queues/q"), Subject: ptr("PUT")})
	require.NoError(t, err)
	m, err = amqp10.ParseMessage(amqp10.AppendData(b, []byte("{}")))
	require.NoError(t, err)
	requireError(t, decodeTestResp(t, e.node.Request(nil, "guest", e.vh, m)), "400")
}

func ptr[T any](v T) *T { return &v }

func TestPermissions(t *testing.T) {
	e := newTestEnv(t)
	hash, err := auth.HashPassword("", "pw")
	require.NoError(t, err)
	for _, u := range []string{"admin", "u"} {
		require.NoError(t, e.users.PutUser(auth.User{Name: u, PasswordHash: hash}))
	}
	require.NoError(t, e.users.SetPermission(auth.Permission{User: "admin", VHost: "/", Configure: ".*", Write: ".*", Read: ".*"}))
	set := func(c, w, r string) {
		t.Helper()
		require.NoError(t, e.users.SetPermission(auth.Permission{User: "u", VHost: "/", Configure: c, Write: w, Read: r}))
	}
	as := func(user, method, path string, body any) testResp {
		t.Helper()
		return decodeTestResp(t, e.node.Request(nil, user, e.vh, testRequest(t, "p", method, path, body)))
	}
	const none = "^$"
	dlq := queueBodyMap(amqp10.Map{{Key: "x-dead-letter-exchange", Value: "dlx"}})
	require.Equal(t, "204", as("admin", "PUT", "/exchanges/dlx", amqp10.Map{{Key: "type", Value: "fanout"}}).status)

	// declare: configure on the queue
	set(none, ".*", ".*")
	requireError(t, as("u", "PUT", "/queues/q1", queueBodyMap(nil)), "403")
	set("q.*", none, none)
	require.Equal(t, "201", as("u", "PUT", "/queues/q1", queueBodyMap(nil)).status)

	// the DLX rule: configure + read on the queue + write on the DLX
	set("q.*", ".*", none)
	requireError(t, as("u", "PUT", "/queues/q2", dlq), "403")
	set("q.*", none, "q.*")
	msg := requireError(t, as("u", "PUT", "/queues/q2", dlq), "403")
	assert.Contains(t, msg, "dlx")
	set("q.*", "dl.*", "q.*")
	require.Equal(t, "201", as("u", "PUT", "/queues/q2", dlq).status)
	// redeclaring an existing queue checks configure only
	set("q.*", none, none)
	require.Equal(t, "200", as("u", "PUT", "/queues/q2", dlq).status)
	_, ok := e.vh.Queue("q2")
	require.True(t, ok)

	// bind: write on the queue, read on the exchange
	require.Equal(t, "204", as("admin", "PUT", "/exchanges/x", amqp10.Map{}).status)
	bind := amqp10.Map{{Key: "source", Value: "x"}, {Key: "destination_queue", Value: "q1"}, {Key: "binding_key", Value: "k"}}
	set(".*", none, ".*")
	requireError(t, as("u", "POST", "/bindings", bind), "403")
	set(".*", ".*", "q.*")
	requireError(t, as("u", "POST", "/bindings", bind), "403")
	set(none, "q.*", "x")
	require.Equal(t, "204", as("u", "POST", "/bindings", bind).status)
	// listing bindings: read on the source and on the destination
	requireError(t, as("u", "GET", "/bindings?src=x&dstq=q1&key=k", nil), "403")
	set(none, none, "x|q1")
	require.Equal(t, "200", as("u", "GET", "/bindings?src=x&dstq=q1&key=k", nil).status)
	set(none, ".*", none)
	requireError(t, as("u", "DELETE", "/bindings/src=x;dstq=q1;key=k;args=", nil), "403")
	requireError(t, as("u", "GET", "/bindings?src=x&dstq=q1&key=k", nil), "403")
	set(none, "q.*", "x")
	require.Equal(t, "204", as("u", "DELETE", "/bindings/src=x;dstq=q1;key=k;args=", nil).status)

	// purge: read; delete: configure; exchanges: configure
	set(".*", ".*", none)
	requireError(t, as("u", "DELETE", "/queues/q1/messages", nil), "403")
	set(none, none, "q1")
	require.Equal(t, "200", as("u", "DELETE", "/queues/q1/messages", nil).status)
	requireError(t, as("u", "DELETE", "/queues/q1", nil), "403")
	requireError(t, as("u", "PUT", "/exchanges/mine", amqp10.Map{}), "403")
	requireError(t, as("u", "DELETE", "/exchanges/x", nil), "403")
	// GET needs only access to the vhost
	require.Equal(t, "200", as("u", "GET", "/queues/q1", nil).status)
	requireError(t, as("stranger", "GET", "/queues/q1", nil), "403")
	set("q1|mine|x", none, none)
	require.Equal(t, "200", as("u", "DELETE", "/queues/q1", nil).status)
	require.Equal(t, "204", as("u", "PUT", "/exchanges/mine", amqp10.Map{}).status)
	require.Equal(t, "204", as("u", "DELETE", "/exchanges/x", nil).status)
}

func TestAnswersInRequestOrderConcurrently(t *testing.T) {
	// the node has no per-request state: concurrent requests on different
	// links are safe (race detector) and each answer matches its request
	e := newTestEnv(t)
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range 20 {
				id := uint64(i*100 + j)
				raw := e.node.Request(nil, "guest", e.vh, testRequest(t, id, "PUT", "/queues/c", queueBodyMap(nil)))
				m, err := amqp10.ParseMessage(raw)
				if !assert.NoError(t, err) {
					return
				}
				p, err := m.Properties()
				if assert.NoError(t, err) {
					assert.Equal(t, id, p.CorrelationID)
					assert.Contains(t, []string{"200", "201"}, *p.Subject)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}

// The management node refuses queue and exchange names that are not at
// most 255 bytes of valid UTF-8 without NUL (400), and creates nothing.
func TestNamesValidated(t *testing.T) {
	e := newTestEnv(t)
	req := func(method, path string, body any) testResp {
		return decodeTestResp(t, e.node.Request(nil, "guest", e.vh, testRequest(t, "x", method, path, body)))
	}
	for _, path := range []string{"/queues/a%00b", "/queues/%FF", "/queues/" + strings.Repeat("q", 256)} {
		requireError(t, req("PUT", path, queueBodyMap(nil)), "400")
	}
	xBody := amqp10.Map{{Key: "type", Value: "direct"}, {Key: "durable", Value: true}, {Key: "auto_delete", Value: false},
		{Key: "internal", Value: false}, {Key: "arguments", Value: amqp10.Map{}}}
	requireError(t, req("PUT", "/exchanges/x%00", xBody), "400")
	require.Empty(t, e.vh.Queues())
}
