package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// AMQP filter expressions on classic and quorum queue consumers: a filtered
// consumer gets only the messages its filters match; the others stay in the
// queue, in order, for the other consumers.

const sqlFilterCode = 0x120

func sqlFilter(expr string) amqp.LinkFilter {
	return amqp.NewLinkFilter("sql-filter", sqlFilterCode, expr)
}

// publishColours publishes one message per body with application property
// colour and subject = body's first word.
func publishColours(t *testing.T, snd *amqp.Sender, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		m := msg(b)
		colour, _, _ := strings.Cut(b, "-")
		m.ApplicationProperties = map[string]any{"colour": colour, "n": int64(len(b))}
		m.Properties = &amqp.MessageProperties{Subject: &colour}
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, m))
	}
}

// recvAll receives n messages, accepting each, and returns their bodies.
func recvAll(t *testing.T, r *amqp.Receiver, n int) []string {
	t.Helper()
	var got []string
	for range n {
		m := recv(t, r)
		got = append(got, body(m))
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	return got
}

// filtered attaches a receiver with manual credit (so that a drain can
// prove nothing more comes) and grants it 10.
func filtered(t *testing.T, s *amqp.Session, source string, filters ...amqp.LinkFilter) *amqp.Receiver {
	t.Helper()
	r := receiver(t, s, source, &amqp.ReceiverOptions{Credit: -1, Filters: filters})
	require.NoError(t, r.IssueCredit(10))
	return r
}

// assertNothingMore checks that r gets no more message: it drains r's
// credit, which the broker answers only after handing over all it had for
// r, then grants 10 again.
func assertNothingMore(t *testing.T, r *amqp.Receiver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.DrainCredit(ctx, nil))
	if m := r.Prefetched(); m != nil {
		t.Fatalf("unexpected message %q", body(m))
	}
	require.NoError(t, r.IssueCredit(10))
}

func TestFilterExpressionsOnQueues(t *testing.T) {
	for _, typ := range []router.QueueType{router.Classic, router.Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, nil)
			s := session(t, dial(t, b, nil))
			publishColours(t, sender(t, s, "/queues/q", nil), "red-1", "blue-1", "red-22", "green-1", "blue-22", "red-333")

			// SQL, with a selector and a stream filter beside it that are
			// not applied: the reply echoes exactly the SQL filter.
			sql := "colour = 'red' AND n > 5"
			r := filtered(t, s, "/queues/q", sqlFilter(sql), amqp.NewSelectorFilter("colour = 'blue'"),
				amqp.NewLinkFilter("rabbitmq:stream-filter", 0, "red"))
			assert.Equal(t, sql, r.LinkSourceFilterValue("sql-filter"))
			assert.Nil(t, r.LinkSourceFilterValue("apache.org:selector-filter:string"))
			assert.Nil(t, r.LinkSourceFilterValue("rabbitmq:stream-filter"))
			assert.Equal(t, []string{"red-22", "red-333"}, recvAll(t, r, 2))
			assertNothingMore(t, r)

			// A properties filter (a prefix modifier on subject) and an
			// application-properties filter, both in force: both must match.
			both := filtered(t, s, "/queues/q",
				amqp.NewLinkFilter("amqp:properties-filter", 0, map[amqp.Symbol]any{"subject": "&p:bl"}),
				amqp.NewLinkFilter("amqp:application-properties-filter", 0, map[string]any{"n": int64(7)}))
			assert.NotNil(t, both.LinkSourceFilterValue("amqp:properties-filter"))
			assert.NotNil(t, both.LinkSourceFilterValue("amqp:application-properties-filter"))
			assert.Equal(t, []string{"blue-22"}, recvAll(t, both, 1))
			assertNothingMore(t, both)

			// What no filter took stays, in order, for an unfiltered consumer.
			plain := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 10})
			assert.Equal(t, []string{"red-1", "blue-1", "green-1"}, recvAll(t, plain, 3))
			assert.Equal(t, 0, queueLen(t, b, "q"))

			// New messages reach the filtered consumers as they arrive.
			publishColours(t, sender(t, s, "/queues/q", nil), "red-4444", "blue-22", "green-4444")
			assert.Equal(t, []string{"red-4444"}, recvAll(t, r, 1))
			assert.Equal(t, []string{"blue-22"}, recvAll(t, both, 1))
			assert.Equal(t, []string{"green-4444"}, recvAll(t, plain, 1))
		})
	}
}

// The reason this exists: a dead-letter-queue reader that takes only the
// deaths it can handle, selected by their history, and leaves the others
// for another reader.
func TestFilterOnDeadLetterQueueByDeathReason(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "orders.dlq", router.Classic, nil)
	declareQueue(t, b, "orders", router.Quorum, amqp10.Map{
		{Key: "x-dead-letter-exchange", Value: ""}, {Key: "x-dead-letter-routing-key", Value: "orders.dlq"}})
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/orders", nil)

	expiring := msg("e1")
	expiring.Header = &amqp.MessageHeader{TTL: time.Millisecond}
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, expiring))
	eventually(t, "e1 expired into the DLQ", func() bool { return queueLen(t, b, "orders.dlq") == 1 })

	for _, bd := range []string{"r1", "r2", "r3"} {
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg(bd)))
	}
	work := receiver(t, s, "/queues/orders", &amqp.ReceiverOptions{Credit: 3})
	for _, cond := range []amqp.ErrCond{"app:invalid", "app:timeout", "app:invalid"} {
		m := recv(t, work)
		require.NoError(t, work.RejectMessage(ctxT(t), m, &amqp.Error{Condition: cond, Description: "no such product"}))
	}
	eventually(t, "three rejected into the DLQ", func() bool { return queueLen(t, b, "orders.dlq") == 4 })

	invalid := filtered(t, s, "/queues/orders.dlq",
		sqlFilter("m.[x-last-death-reason] = 'rejected' AND m.[x-last-death-error-condition] = 'app:invalid'"))
	var got []string
	for range 2 {
		m := recv(t, invalid)
		got = append(got, body(m))
		assert.Equal(t, "rejected", m.Annotations["x-last-death-reason"])
		assert.Equal(t, "app:invalid", m.Annotations["x-last-death-error-condition"])
		require.NoError(t, invalid.AcceptMessage(ctxT(t), m))
	}
	assert.Equal(t, []string{"r1", "r3"}, got)
	assertNothingMore(t, invalid)

	expired := filtered(t, s, "/queues/orders.dlq",
		sqlFilter("x-opt-deaths.reason = 'expired' AND x-opt-deaths.queue = 'orders' AND x-opt-deaths.count = 1"))
	assert.Equal(t, []string{"e1"}, recvAll(t, expired, 1))
	assertNothingMore(t, expired)

	rest := receiver(t, s, "/queues/orders.dlq", &amqp.ReceiverOptions{Credit: 10})
	m := recv(t, rest)
	assert.Equal(t, "r2", body(m))
	assert.Equal(t, "app:timeout", m.Annotations["x-last-death-error-condition"])
	require.NoError(t, rest.AcceptMessage(ctxT(t), m))
	assert.Equal(t, 0, queueLen(t, b, "orders.dlq"))
}

// A malformed filter expression is refused at attach with
// amqp:invalid-field and a description naming the filter; the session and
// the queue are unaffected.
func TestFilterMalformedRefusedAtAttach(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	publishColours(t, sender(t, s, "/queues/q", nil), "red-1")
	for _, tc := range []struct {
		name   string
		filter amqp.LinkFilter
		want   string
	}{
		{"syntax", sqlFilter("colour = = 'red'"), "sql-filter"},
		{"too deep", sqlFilter(strings.Repeat("(", 70) + "a" + strings.Repeat(")", 70)), "nested more than 64"},
		{"too long", sqlFilter(strings.Repeat("x", 5000) + " IS NULL"), "more than 4096"},
		{"unknown field", sqlFilter("p.colour = 'red'"), "unknown field"},
		{"sql not a string", amqp.NewLinkFilter("sql-filter", sqlFilterCode, int64(1)), "not a string"},
		{"property key not a symbol", amqp.NewLinkFilter("props", 0x173, map[string]any{"subject": "red"}), "props"},
		{"unknown property", amqp.NewLinkFilter("amqp:properties-filter", 0, map[amqp.Symbol]any{"colour": "red"}), "unknown property"},
		{"bad modifier", amqp.NewLinkFilter("amqp:application-properties-filter", 0, map[string]any{"colour": "&x:red"}), "modifier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.NewReceiver(ctxT(t), "/queues/q", &amqp.ReceiverOptions{Filters: []amqp.LinkFilter{tc.filter}})
			require.Error(t, err)
			e := amqpErr(t, err)
			assert.Equal(t, amqp.ErrCondInvalidField, e.Condition)
			assert.Contains(t, e.Description, tc.want)
		})
	}
	r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 1})
	assert.Equal(t, []string{"red-1"}, recvAll(t, r, 1))
}

// The official RabbitMQ Go client sends filter expressions in its stream
// consumer options; against a classic queue they are applied the same way
// (its offset specification is a stream filter, not applied to a queue).
func TestRabbitMQClientFilterExpressionsOnQueue(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	ctx := ctxT(t)
	_, err := conn.Management().DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: "jobs"})
	require.NoError(t, err)
	pub, err := conn.NewPublisher(ctx, &rmq.QueueAddress{Queue: "jobs"}, nil)
	require.NoError(t, err)
	for _, kind := range []string{"email", "sms", "email", "push"} {
		m := amqp.NewMessage([]byte(kind))
		m.ApplicationProperties = map[string]any{"kind": kind}
		subject := "job." + kind
		m.Properties = &amqp.MessageProperties{Subject: &subject}
		res, err := pub.Publish(ctx, m)
		require.NoError(t, err)
		require.IsType(t, &rmq.StateAccepted{}, res.Outcome)
	}

	sqlCons, err := conn.NewConsumer(ctx, "jobs", &rmq.StreamConsumerOptions{InitialCredits: 10, Offset: &rmq.OffsetFirst{},
		StreamFilterOptions: &rmq.StreamFilterOptions{SQL: "kind = 'email' AND p.subject LIKE 'job.%'"}})
	require.NoError(t, err)
	for range 2 {
		dc := rmqReceive(t, sqlCons)
		assert.Equal(t, "email", rmqBody(dc))
		require.NoError(t, dc.Accept(ctx))
	}

	subject := "job.push"
	propCons, err := conn.NewConsumer(ctx, "jobs", &rmq.StreamConsumerOptions{InitialCredits: 10, Offset: &rmq.OffsetFirst{},
		StreamFilterOptions: &rmq.StreamFilterOptions{Properties: &amqp.MessageProperties{Subject: &subject},
			ApplicationProperties: map[string]any{"kind": "push"}}})
	require.NoError(t, err)
	dc := rmqReceive(t, propCons)
	assert.Equal(t, "push", rmqBody(dc))
	require.NoError(t, dc.Accept(ctx))

	plain, err := conn.NewConsumer(ctx, "jobs", nil)
	require.NoError(t, err)
	dc = rmqReceive(t, plain)
	assert.Equal(t, "sms", rmqBody(dc))
	require.NoError(t, dc.Accept(ctx))
	eventually(t, "jobs empty", func() bool { return queueLen(t, b, "jobs") == 0 })
}

// The filter limits are settings: each refuses the attach one beyond it,
// and accepts one at it.
func TestFilterLimitsAreSettings(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.FilterSQLMaxLength, o.FilterSQLMaxTokens, o.FilterSQLMaxDepth, o.FilterMaxFields = 24, 7, 2, 2
	})
	declareQueue(t, b, "q", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	props := func(n int) amqp.LinkFilter {
		m := map[string]any{}
		for i := range n {
			m[string(rune('a'+i))] = int64(i)
		}
		return amqp.NewLinkFilter("amqp:application-properties-filter", 0, m)
	}
	for _, tc := range []struct {
		name   string
		filter amqp.LinkFilter
		want   string // "" accepted
	}{
		{"length at the limit", sqlFilter("colour = 'abcdefghijklm'"), ""},
		{"length beyond", sqlFilter("colour = 'abcdefghijklmn'"), "more than 24"},
		{"tokens at the limit", sqlFilter("a = 1 AND b = 2"), ""},
		{"tokens beyond", sqlFilter("a = 1 AND b = 2 OR c"), "more than 7 tokens"},
		{"depth at the limit", sqlFilter("((a))"), ""},
		{"depth beyond", sqlFilter("(((a)))"), "nested more than 2"},
		{"fields at the limit", props(2), ""},
		{"fields beyond", props(3), "1 to 2 allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := s.NewReceiver(ctxT(t), "/queues/q", &amqp.ReceiverOptions{Filters: []amqp.LinkFilter{tc.filter}})
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, r.Close(ctxT(t)))
				return
			}
			require.Error(t, err)
			e := amqpErr(t, err)
			assert.Equal(t, amqp.ErrCondInvalidField, e.Condition)
			assert.Contains(t, e.Description, tc.want)
		})
	}
}

// The HTTP API shows a consumer's filters in force as RabbitMQ 4.3 does
// (a session's outgoing_links[].filter).
func TestFilterShownInSessionLinks(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	declareQueue(t, b, "q", router.Classic, nil)
	c, name := dialAs(t, b, "guest", "/", nil)
	s := session(t, c)
	filtered(t, s, "/queues/q", sqlFilter("colour = 'red'"), amqp.NewSelectorFilter("a = 1"),
		amqp.NewLinkFilter("amqp:application-properties-filter", 0, map[string]any{"colour": "&p:bl"}))
	var link map[string]any
	eventually(t, "the filtered link", func() bool {
		st, out := apiCallAs(t, base, "guest", "guest", "GET", "/api/connections/"+url.PathEscape(name)+"/sessions", "")
		require.Equal(t, http.StatusOK, st, "%s", out)
		sessions := apiJSON[[]map[string]any](t, out)
		if len(sessions) != 1 {
			return false
		}
		links, _ := sessions[0]["outgoing_links"].([]any)
		if len(links) != 1 {
			return false
		}
		link = links[0].(map[string]any)
		return true
	})
	filters := map[string]any{}
	for _, f := range link["filter"].([]any) {
		m := f.(map[string]any)
		filters[m["name"].(string)] = m
	}
	assert.Len(t, filters, 2, "the selector is not in force: %v", link["filter"])
	assert.Equal(t, map[string]any{"name": "sql-filter", "descriptor": float64(sqlFilterCode), "value": "colour = 'red'"}, filters["sql-filter"])
	assert.Equal(t, map[string]any{"name": "amqp:application-properties-filter", "descriptor": "amqp:application-properties-filter",
		"value": []any{map[string]any{"key": "colour", "value": "&p:bl"}}}, filters["amqp:application-properties-filter"])
}

// With the official client: a dead-letter queue read by the error each
// message was discarded with, the rest left for an unfiltered reader.
func TestRabbitMQClientFilterDeadLetterQueueByError(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()
	ctx := ctxT(t)
	_, err := m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: "work.dlq"})
	require.NoError(t, err)
	_, err = m.DeclareExchange(ctx, &rmq.FanOutExchangeSpecification{Name: "dlx"})
	require.NoError(t, err)
	_, err = m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "dlx", DestinationQueue: "work.dlq"})
	require.NoError(t, err)
	_, err = m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: "work", DeadLetterExchange: "dlx"})
	require.NoError(t, err)
	pub, err := conn.NewPublisher(ctx, &rmq.QueueAddress{Queue: "work"}, nil)
	require.NoError(t, err)
	rmqPublish(t, pub, "m1", "m2", "m3", "m4")
	cons, err := conn.NewConsumer(ctx, "work", nil)
	require.NoError(t, err)
	for _, cond := range []amqp.ErrCond{"app:invalid", "app:timeout", "app:invalid", "app:timeout"} {
		dc := rmqReceive(t, cons)
		require.NoError(t, dc.Discard(ctx, &amqp.Error{Condition: cond, Description: "failed " + rmqBody(dc)}))
	}
	rmqWaitCount(t, m, "work.dlq", 4)

	invalid, err := conn.NewConsumer(ctx, "work.dlq", &rmq.StreamConsumerOptions{InitialCredits: 10, Offset: &rmq.OffsetFirst{},
		StreamFilterOptions: &rmq.StreamFilterOptions{
			SQL: "m.[x-last-death-error-condition] = 'app:invalid' AND x-opt-deaths.queue = 'work' AND x-opt-deaths.reason = 'rejected'"}})
	require.NoError(t, err)
	for _, want := range []string{"m1", "m3"} {
		dc := rmqReceive(t, invalid)
		assert.Equal(t, want, rmqBody(dc))
		assert.Equal(t, "failed "+want, dc.Message().Annotations["x-last-death-error-description"])
		require.NoError(t, dc.Accept(ctx))
	}
	rest, err := conn.NewConsumer(ctx, "work.dlq", nil)
	require.NoError(t, err)
	for _, want := range []string{"m2", "m4"} {
		dc := rmqReceive(t, rest)
		assert.Equal(t, want, rmqBody(dc))
		require.NoError(t, dc.Accept(ctx))
	}
	rmqWaitCount(t, m, "work.dlq", 0)
}
