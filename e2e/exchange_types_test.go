package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/router"
)

// mgmtCall sends one request to the /management node over go-amqp and
// returns the reply's status (its subject) and body.
func mgmtCall(t *testing.T, b *epitaph.Broker, method, path string, body any) (string, any) {
	t.Helper()
	s := session(t, dial(t, b, nil))
	ctx := ctxT(t)
	snd, err := s.NewSender(ctx, "/management", &amqp.SenderOptions{Name: "mgmt", SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
	require.NoError(t, err)
	rcv, err := s.NewReceiver(ctx, "/management", &amqp.ReceiverOptions{Name: "mgmt", SettlementMode: amqp.ReceiverSettleModeFirst.Ptr()})
	require.NoError(t, err)
	m := &amqp.Message{Value: body, Properties: &amqp.MessageProperties{MessageID: "1", To: &path, Subject: &method, ReplyTo: ptr("$me")}}
	require.NoError(t, snd.Send(ctx, m, nil))
	reply, err := rcv.Receive(ctx, nil)
	require.NoError(t, err)
	require.NotNil(t, reply.Properties)
	require.NotNil(t, reply.Properties.Subject)
	return *reply.Properties.Subject, reply.Value
}

// rmqDeadLetterOne declares the queue spec names (one with a dead-letter
// exchange), publishes one message to it and discards it, so that it is
// dead-lettered with the queue's name as routing key.
func rmqDeadLetterOne(t *testing.T, conn *rmq.AmqpConnection, spec rmq.IQueueSpecification) {
	t.Helper()
	ctx := ctxT(t)
	qi, err := conn.Management().DeclareQueue(ctx, spec)
	require.NoError(t, err)
	wp, err := conn.NewPublisher(ctx, &rmq.QueueAddress{Queue: qi.Name()}, nil)
	require.NoError(t, err)
	rmqPublish(t, wp, "dead")
	cons, err := conn.NewConsumer(ctx, qi.Name(), nil)
	require.NoError(t, err)
	require.NoError(t, rmqReceive(t, cons).Discard(ctx, nil))
}

// x-local-random, declared by the official client as its own suite does
// (a custom exchange type with an argument RabbitMQ ignores), routes each
// message to one of its bound classic queues; bindings it cannot have are
// refused; and it works as a dead-letter exchange.
func TestRabbitMQClientLocalRandomExchange(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()
	ctx := ctxT(t)

	xi, err := m.DeclareExchange(ctx, &rmq.CustomExchangeSpecification{Name: "lr", ExchangeTypeName: "x-local-random",
		Arguments: map[string]any{"x-delayed-type": "direct"}})
	require.NoError(t, err)
	assert.Equal(t, "lr", xi.Name())
	info, ok := rootVHost(t, b).Exchange("lr")
	require.True(t, ok)
	assert.Equal(t, router.ExchangeLocalRandom, info.Type)

	queues := []string{"lr-a", "lr-b"}
	for _, q := range queues {
		_, err = m.DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: q})
		require.NoError(t, err)
		_, err = m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "lr", DestinationQueue: q})
		require.NoError(t, err)
	}
	_, err = m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: "lr-quorum"})
	require.NoError(t, err)
	_, err = m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "lr", DestinationQueue: "lr-quorum"})
	require.ErrorContains(t, err, "400", "a quorum queue cannot be bound")
	_, err = m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "lr", DestinationQueue: "lr-a", BindingKey: "k"})
	require.ErrorContains(t, err, "400", "a non-empty key cannot be bound")
	status, body := mgmtCall(t, b, "POST", "/bindings", map[string]any{"source": "lr", "destination_queue": "lr-quorum",
		"binding_key": "", "arguments": map[string]any{}})
	assert.Equal(t, "400", status)
	assert.Equal(t, "Queue type rabbit_quorum_queue not valid for this exchange type", body)

	pub, err := conn.NewPublisher(ctx, &rmq.ExchangeAddress{Exchange: "lr", Key: "any"}, nil)
	require.NoError(t, err)
	const n = 200
	for range n {
		rmqPublish(t, pub, "m")
	}
	total := 0
	for _, q := range queues {
		got := queueLen(t, b, q)
		// A queue is missed by all 200 picks with probability 2^-200.
		assert.Positive(t, got, "queue %s never picked", q)
		total += got
	}
	assert.Equal(t, n, total, "each message in exactly one queue")
	assert.Zero(t, queueLen(t, b, "lr-quorum"))

	// As a dead-letter exchange: the rejected message lands in one bound queue.
	for _, q := range queues {
		_, err = m.PurgeQueue(ctx, q)
		require.NoError(t, err)
	}
	rmqDeadLetterOne(t, conn, &rmq.ClassicQueueSpecification{Name: "work", DeadLetterExchange: "lr"})
	eventually(t, "dead letter in a bound queue", func() bool {
		return queueLen(t, b, "lr-a")+queueLen(t, b, "lr-b") == 1
	})
}

// x-modulus-hash, declared by the official client, sends each message to
// the queue RabbitMQ 4.3 picks: bindings sorted by destination (q-a, q-b,
// q-c), index erlang:phash2([Key], 2^27) mod 3, with Erlang's values:
// "a" 53691870 -> 0, "abcd" 79744603 -> 1, "orders" 12008111 -> 2. It works
// as a dead-letter exchange (the dead letter keeps its routing key).
func TestRabbitMQClientModulusHashExchange(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()
	ctx := ctxT(t)
	_, err := m.DeclareExchange(ctx, &rmq.CustomExchangeSpecification{Name: "mh", ExchangeTypeName: "x-modulus-hash"})
	require.NoError(t, err)
	for _, q := range []string{"q-c", "q-a", "q-b"} {
		_, err = m.DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: q})
		require.NoError(t, err)
		_, err = m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "mh", DestinationQueue: q, BindingKey: "ignored-" + q})
		require.NoError(t, err)
	}
	want := map[string]int{"q-a": 0, "q-b": 0, "q-c": 0}
	for key, q := range map[string]string{"a": "q-a", "abcd": "q-b", "orders": "q-c"} {
		pub, err := conn.NewPublisher(ctx, &rmq.ExchangeAddress{Exchange: "mh", Key: key}, nil)
		require.NoError(t, err)
		rmqPublish(t, pub, key, key)
		require.NoError(t, pub.Close(ctx))
		want[q] += 2
	}
	for q, n := range want {
		assert.Equal(t, n, queueLen(t, b, q), q)
	}

	rmqDeadLetterOne(t, conn, &rmq.QuorumQueueSpecification{Name: "work", DeadLetterExchange: "mh"})
	// The dead letter's routing key is "work": 26994695 mod 3 = 2, q-c.
	eventually(t, "dead letter in q-c", func() bool { return queueLen(t, b, "q-c") == want["q-c"]+1 })
	assert.Equal(t, want["q-a"], queueLen(t, b, "q-a"))
	assert.Equal(t, want["q-b"], queueLen(t, b, "q-b"))
}

// An unknown exchange type (here the plugin types epitaph does not have)
// is refused at declare, with RabbitMQ's status and text naming the type,
// over /management, the HTTP API and a definitions import alike.
func TestUnknownExchangeTypeRefusedAtDeclare(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	for _, typ := range []string{"x-consistent-hash", "x-random", "x-no-such-type"} {
		want := "unknown exchange type '" + typ + "'"

		status, body := mgmtCall(t, b, "PUT", "/exchanges/x1", map[string]any{"type": typ, "durable": true,
			"auto_delete": false, "internal": false, "arguments": map[string]any{}})
		assert.Equal(t, "400", status, typ)
		assert.Equal(t, want, body, typ)

		out := api(t, base, "PUT", "/api/exchanges/%2F/x2", map[string]any{"type": typ}, http.StatusBadRequest)
		assert.Equal(t, map[string]string{"error": "bad_request", "reason": want}, apiJSON[map[string]string](t, out))

		out = api(t, base, "POST", "/api/definitions", `{"exchanges": [{"name": "x3", "vhost": "/", "type": "`+typ+`",
			"durable": true, "auto_delete": false, "internal": false, "arguments": {}}]}`, http.StatusBadRequest)
		reason := apiJSON[map[string]string](t, out)["reason"]
		assert.Contains(t, reason, "exchange 'x3'")
		assert.Contains(t, reason, want)

		for _, x := range []string{"x1", "x2", "x3"} {
			assert.False(t, rootVHost(t, b).HasExchange(x), x)
		}
	}
	// The HTTP API's bindings of an x-local-random exchange follow its rules.
	api(t, base, "PUT", "/api/exchanges/%2F/lr", map[string]any{"type": "x-local-random"}, http.StatusCreated)
	api(t, base, "PUT", "/api/queues/%2F/q", map[string]any{"durable": true}, http.StatusCreated)
	out := api(t, base, "POST", "/api/bindings/%2F/e/lr/q/q", map[string]any{"routing_key": "k"}, http.StatusBadRequest)
	assert.Contains(t, apiJSON[map[string]string](t, out)["reason"], "Non empty binding 'k' key not permitted")
	api(t, base, "POST", "/api/bindings/%2F/e/lr/q/q", map[string]any{"routing_key": ""}, http.StatusCreated)
}

// The attach reply's source carries only the filters in force (AMQP 1.0
// section 3.5.3). A JMS selector (as Proton and Qpid JMS send it), a stream
// filter and a filter of unknown name are not applied on queues, so they
// all come back absent, and the consumer gets every message. (The filter
// expressions epitaph applies are in filters_test.go.)
func TestAttachReplyCarriesOnlyFiltersInForce(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	for _, body := range []string{"red", "blue"} {
		m := msg(body)
		m.ApplicationProperties = map[string]any{"colour": body}
		require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/queues/q", nil), m))
	}
	filters := map[string]amqp.LinkFilter{
		"apache.org:selector-filter:string": amqp.NewSelectorFilter("colour = 'red'"),
		"rabbitmq:stream-filter":            amqp.NewLinkFilter("rabbitmq:stream-filter", 0, "red"),
		"mine":                              amqp.NewLinkFilter("mine", 0x0000_468C_0000_00FF, "whatever"),
	}
	var opts amqp.ReceiverOptions
	for _, f := range filters {
		opts.Filters = append(opts.Filters, f)
	}
	r := receiver(t, s, "/queues/q", &opts)
	for name := range filters {
		assert.Nil(t, r.LinkSourceFilterValue(name), "filter %s echoed but not in force", name)
	}
	var got []string
	for range 2 {
		m := recv(t, r)
		got = append(got, body(m))
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	assert.Equal(t, []string{"red", "blue"}, got, "no filter applied")

	// A dynamic queue's reply is built the same way.
	dr, err := s.NewReceiver(ctxT(t), "", &amqp.ReceiverOptions{DynamicAddress: true,
		Filters: []amqp.LinkFilter{amqp.NewSelectorFilter("a = 1")}})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(dr.Address(), "/queues/"), dr.Address())
	assert.Nil(t, dr.LinkSourceFilterValue("apache.org:selector-filter:string"))

	// And the /management node's reply link.
	mr, err := s.NewReceiver(ctxT(t), "/management", &amqp.ReceiverOptions{Name: "mgmt",
		Filters: []amqp.LinkFilter{amqp.NewSelectorFilter("a = 1")}})
	require.NoError(t, err)
	assert.Nil(t, mr.LinkSourceFilterValue("apache.org:selector-filter:string"))
}

// The HTTP API's overview lists the exchange types as RabbitMQ 4.3's does:
// its built-in ones, sorted by name, with RabbitMQ's descriptions.
func TestHTTPOverviewListsExchangeTypes(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	out := api(t, apiServer(t, b), "GET", "/api/overview", nil, http.StatusOK)
	type exchangeType struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Enabled     bool   `json:"enabled"`
	}
	got := apiJSON[struct {
		ExchangeTypes []exchangeType `json:"exchange_types"`
	}](t, out).ExchangeTypes
	assert.Equal(t, []exchangeType{
		{"direct", "AMQP direct exchange, as per the AMQP specification", true},
		{"fanout", "AMQP fanout exchange, as per the AMQP specification", true},
		{"headers", "AMQP headers exchange, as per the AMQP specification", true},
		{"topic", "AMQP topic exchange, as per the AMQP specification", true},
		{"x-local-random", "Picks one random local binding (queue) to route via (to).", true},
		{"x-modulus-hash", "Modulus Hashing Exchange", true},
	}, got)
}
