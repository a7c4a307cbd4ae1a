package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// RabbitMQ 4.3's quorum-queue delayed retry and x-opt-delivery-time over
// real connections. The delays are short; each check is a lower bound
// (a message must not come back early) with a generous upper one.

// retryMin is the delay of most tests; a return that is not delayed must
// come back within retryMin-immediateSlack (generous for a loaded machine).
const (
	retryMin       = 600 * time.Millisecond
	immediateSlack = 150 * time.Millisecond
)

func retryArgs(typ string, extra ...amqp10.KV) amqp10.Map {
	m := amqp10.Map{kv("x-delayed-retry-type", typ), kv("x-delayed-retry-min", retryMin.Milliseconds())}
	return append(m, extra...)
}

// recvAfter receives the next message and requires that it came no sooner
// than min after since.
func recvAfter(t *testing.T, r *amqp.Receiver, since time.Time, min time.Duration) *amqp.Message {
	t.Helper()
	m := recv(t, r)
	assert.GreaterOrEqual(t, time.Since(since), min-20*time.Millisecond, "redelivered too early")
	return m
}

// recvAtOnce receives the next message and requires that it was not delayed.
func recvAtOnce(t *testing.T, r *amqp.Receiver, since time.Time) *amqp.Message {
	t.Helper()
	m := recv(t, r)
	assert.Less(t, time.Since(since), retryMin-immediateSlack, "delayed, but should not be")
	return m
}

// Which AMQP 1.0 outcomes each type delays (the spec's table): released and
// modified(delivery-failed=false) are returns, modified(delivery-failed=true)
// a failure, rejected and modified(undeliverable-here) dead-letter.
func TestDelayedRetryAMQP10Outcomes(t *testing.T) {
	type settle func(t *testing.T, r *amqp.Receiver, m *amqp.Message)
	release := func(t *testing.T, r *amqp.Receiver, m *amqp.Message) {
		require.NoError(t, r.ReleaseMessage(ctxT(t), m))
	}
	returned := func(t *testing.T, r *amqp.Receiver, m *amqp.Message) { modify(t, r, m, false, false, nil) }
	failed := func(t *testing.T, r *amqp.Receiver, m *amqp.Message) { modify(t, r, m, true, false, nil) }
	for _, tc := range []struct {
		typ       string
		delayed   []settle
		immediate []settle
	}{
		{"all", []settle{release, returned, failed}, nil},
		{"failed", []settle{failed}, []settle{release, returned}},
		{"returned", []settle{release, returned}, []settle{failed}},
		{"disabled", nil, []settle{release, returned, failed}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", router.Quorum, retryArgs(tc.typ, kv("x-dead-letter-exchange", ""), kv("x-dead-letter-routing-key", "dlq")))
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q", "m")
			r := receiver(t, s, "/queues/q", nil)
			m := recv(t, r)
			for _, f := range tc.immediate {
				start := time.Now()
				f(t, r, m)
				m = recvAtOnce(t, r, start)
			}
			for _, f := range tc.delayed {
				start := time.Now()
				f(t, r, m)
				eventually(t, "delayed", func() bool { return queueInfo(t, b, "q").MessagesDelayed == 1 })
				info := queueInfo(t, b, "q")
				assert.Equal(t, []int{0, 0, 1}, []int{info.Messages, info.MessagesUnacknowledged, info.MessagesDelayed},
					"ready, unacknowledged, delayed")
				m = recvAfter(t, r, start, retryMin)
				assert.False(t, m.Header.FirstAcquirer)
			}
			// Rejected dead-letters at once, whatever the type.
			reject(t, r, m)
			d := recv(t, receiver(t, s, "/queues/dlq", nil))
			assert.Equal(t, "rejected", d.Annotations["x-last-death-reason"])
			assert.Zero(t, queueInfo(t, b, "q").MessagesDelayed)
		})
	}
}

// DR1: linear backoff, min 400, max 1000: 400, 800, 1000 ms, with
// delivery-count and x-acquired-count on each redelivery.
func TestDelayedRetryBackoffAMQP10(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Quorum, amqp10.Map{kv("x-delayed-retry-type", "failed"),
		kv("x-delayed-retry-min", int64(400)), kv("x-delayed-retry-max", int64(1000))})
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	m := recv(t, r)
	for i, want := range []time.Duration{400, 800, 1000} {
		start := time.Now()
		modify(t, r, m, true, false, nil)
		m = recvAfter(t, r, start, want*time.Millisecond)
		assert.Equal(t, uint32(i+1), m.Header.DeliveryCount)
		assert.Equal(t, int64(i+1), m.Annotations["x-acquired-count"])
	}
	accept(t, r, m)
}

// DR4: x-opt-delivery-time in a modified outcome delays that return until
// the time it names, on a quorum queue without any delayed-retry setting;
// the next message is delivered meanwhile; the annotation is delivered as a
// long; a time in the past returns the message at once. Sent as a timestamp
// and as a long.
func TestDeliveryTimeAnnotationAMQP10(t *testing.T) {
	for _, asTimestamp := range []bool{false, true} {
		b := startBroker(t, "")
		declareQueue(t, b, "q", router.Quorum, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1", "m2")
		r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 1})
		m1 := recv(t, r)
		require.Equal(t, "m1", body(m1))
		at := time.Now().Add(600 * time.Millisecond)
		var v any = at.UnixMilli()
		if asTimestamp {
			v = at
		}
		start := time.Now()
		modify(t, r, m1, false, false, amqp.Annotations{"x-opt-delivery-time": v})
		m2 := recv(t, r)
		require.Equal(t, "m2", body(m2), "delivered while m1 waits")
		accept(t, r, m2)
		m1 = recvAfter(t, r, start, 600*time.Millisecond)
		require.Equal(t, "m1", body(m1))
		assert.Zero(t, m1.Header.DeliveryCount)
		assert.False(t, m1.Header.FirstAcquirer)
		assert.Equal(t, at.UnixMilli(), m1.Annotations["x-opt-delivery-time"])

		start = time.Now()
		modify(t, r, m1, false, false, amqp.Annotations{"x-opt-delivery-time": int64(1)})
		m1 = recvAtOnce(t, r, start)
		assert.Equal(t, int64(1), m1.Annotations["x-opt-delivery-time"], "the latest value is kept")

		// A 0-9-1 consumer gets it as a long header (the detach returns the
		// message without a delay).
		ctx, cancel := closeCtx()
		require.NoError(t, r.Close(ctx))
		cancel()
		d := get091(t, channel091(t, dial091(t, b)), "q", true)
		assert.Equal(t, "m1", string(d.Body))
		assert.Equal(t, int64(1), d.Headers["x-opt-delivery-time"])
	}
}

// DR5: the delivery limit is checked before any delay: the failure that
// passes it dead-letters the message at once with reason delivery_limit,
// an x-opt-delivery-time in that outcome notwithstanding (it goes with the
// dead letter).
func TestDelayedRetryDeliveryLimitDeadLetters(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Quorum, retryArgs("failed", kv("x-delivery-limit", int64(1)),
		kv("x-dead-letter-exchange", ""), kv("x-dead-letter-routing-key", "dlq")))
	declareQueue(t, b, "dlq", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	m := recv(t, r)
	start := time.Now()
	modify(t, r, m, true, false, nil)
	m = recvAfter(t, r, start, retryMin)
	require.Equal(t, uint32(1), m.Header.DeliveryCount)
	at := time.Now().Add(time.Hour).UnixMilli()
	start = time.Now()
	modify(t, r, m, true, false, amqp.Annotations{"x-opt-delivery-time": at})
	d := recv(t, receiver(t, s, "/queues/dlq", nil))
	assert.Less(t, time.Since(start), retryMin, "dead-lettered at once")
	assert.Equal(t, uint32(2), d.Header.DeliveryCount)
	deaths := deathsOf(t, d)
	require.Len(t, deaths, 1)
	assertDeath(t, deaths[0], "q", "delivery_limit", 1, "", []string{"q"})
	assert.Equal(t, at, d.Annotations["x-opt-delivery-time"])
	assert.Zero(t, queueInfo(t, b, "q").MessagesDelayed)
}

// A delayed message whose TTL passes while it waits is dead-lettered as
// expired at its deadline, never delivered (epitaph does not hold it past
// its TTL; RabbitMQ would expire it at the promotion).
func TestDelayedRetryTTLExpiresDuringDelay(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Quorum, amqp10.Map{kv("x-delayed-retry-type", "all"), kv("x-delayed-retry-min", int64(60_000)),
		kv("x-message-ttl", int64(500)), kv("x-dead-letter-exchange", ""), kv("x-dead-letter-routing-key", "dlq")})
	declareQueue(t, b, "dlq", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	published := time.Now()
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	require.NoError(t, r.ReleaseMessage(ctxT(t), recv(t, r)))
	eventually(t, "delayed", func() bool { return queueInfo(t, b, "q").MessagesDelayed == 1 })
	d := recv(t, receiver(t, s, "/queues/dlq", nil))
	took := time.Since(published)
	assert.GreaterOrEqual(t, took, 480*time.Millisecond)
	assert.Less(t, took, 10*time.Second, "well before the 60 s delay")
	assert.Equal(t, "expired", d.Annotations["x-last-death-reason"])
	assert.Zero(t, queueInfo(t, b, "q").MessagesDelayed)
}

// Durable delayed messages keep their ready-at time across a restart, and
// come back when it passes.
func TestDelayedRetryRestartKeepsDelay(t *testing.T) {
	dir := t.TempDir()
	start := func() *epitaph.Broker {
		return startBroker(t, "", func(o *epitaph.Options) { o.InMemory, o.DataDir = false, dir })
	}
	b := start()
	declareQueue(t, b, "q", router.Quorum, amqp10.Map{kv("x-delayed-retry-type", "returned"), kv("x-delayed-retry-min", int64(3_600_000))})
	c := dial(t, b, nil)
	s := session(t, c)
	publish(t, s, "/queues/q", durableMsg("hour"), durableMsg("soon"))
	r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 2})
	hour, soon := recv(t, r), recv(t, r)
	require.NoError(t, r.ReleaseMessage(ctxT(t), hour))
	due := time.Now().Add(1500 * time.Millisecond)
	modify(t, r, soon, false, false, amqp.Annotations{"x-opt-delivery-time": due.UnixMilli()})
	eventually(t, "both delayed", func() bool { return queueInfo(t, b, "q").MessagesDelayed == 2 })
	before := queueInfo(t, b, "q")
	_ = c.Close()
	require.NoError(t, b.Close())

	b = start()
	after := queueInfo(t, b, "q")
	assert.Equal(t, []int{0, 2}, []int{after.Messages, after.MessagesDelayed})
	assert.Equal(t, before.NextDelayedAt, after.NextDelayedAt)
	assert.Equal(t, before.LastDelayedAt, after.LastDelayedAt)
	r = receiver(t, session(t, dial(t, b, nil)), "/queues/q", &amqp.ReceiverOptions{Credit: 2})
	m := recv(t, r)
	assert.Equal(t, "soon", body(m))
	assert.False(t, time.Now().Before(due.Add(-20*time.Millisecond)), "not before its delivery time")
	accept(t, r, m)
	assert.Equal(t, 1, queueInfo(t, b, "q").MessagesDelayed, "the other still waits its hour")
}

// The HTTP API shows RabbitMQ 4.3's fields.
func TestDelayedRetryHTTPFields(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	declareQueue(t, b, "q", router.Quorum, amqp10.Map{kv("x-delayed-retry-type", "failed"),
		kv("x-delayed-retry-min", int64(60_000)), kv("x-delayed-retry-max", int64(120_000))})
	st, out := apiCall(t, base, "GET", "/api/queues/%2f/q", nil)
	require.Equal(t, http.StatusOK, st)
	assert.Contains(t, string(out), `"delayed_retry":"failed (min: 60000ms, max: 120000ms)"`)
	assert.Contains(t, string(out), `"messages_delayed":0`)
	assert.NotContains(t, string(out), "next_delayed_at")
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	modify(t, r, recv(t, r), true, false, nil)
	eventually(t, "delayed", func() bool { return queueInfo(t, b, "q").MessagesDelayed == 1 })
	st, out = apiCall(t, base, "GET", "/api/queues/%2f/q", nil)
	require.Equal(t, http.StatusOK, st)
	for _, want := range []string{`"messages_delayed":1`, `"messages":1`, `"messages_ready":0`, `"next_delayed_at":`, `"last_delayed_at":`} {
		assert.Contains(t, string(out), want)
	}
	// A policy with RabbitMQ's validation.
	st, out = apiCall(t, base, "PUT", "/api/policies/%2f/retry", map[string]any{"pattern": "^q$",
		"definition": map[string]any{"delayed-retry-type": "all", "delayed-retry-min": 2000, "delayed-retry-max": 1000}})
	assert.Equal(t, http.StatusBadRequest, st)
	assert.Contains(t, string(out), "delayed-retry-max (1000) must not be smaller than delayed-retry-min (2000)")
	st, _ = apiCall(t, base, "PUT", "/api/policies/%2f/retry", map[string]any{"pattern": "^q$",
		"definition": map[string]any{"delayed-retry-type": "returned", "delayed-retry-min": 1000}})
	require.Equal(t, http.StatusCreated, st)
	_, out = apiCall(t, base, "GET", "/api/queues/%2f/q", nil)
	assert.Contains(t, string(out), `"delayed_retry":"returned (min: 1000ms, max: 120000ms)"`, "policy type wins, min and max the minimum")
}

// AMQP 0-9-1 (DR3, DR8): nack(requeue) and recover are returns,
// reject(requeue) and a channel closed with unacknowledged messages are
// failures. While delayed, basic.get is empty and queue.declare-ok counts
// no message.
func TestDelayedRetryAMQP091(t *testing.T) {
	b := startBroker(t, "")
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("all", true, false, false, false, amqp091.Table{"x-queue-type": "quorum",
		"x-delayed-retry-type": "all", "x-delayed-retry-min": int64(retryMin.Milliseconds())})
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "all", false, false, amqp091.Publishing{Body: []byte("m")}))
	d := get091(t, ch, "all", false)
	start := time.Now()
	require.NoError(t, d.Nack(false, true))
	eventually(t, "delayed", func() bool { return queueInfo(t, b, "all").MessagesDelayed == 1 })
	_, ok, err := ch.Get("all", false)
	require.NoError(t, err)
	assert.False(t, ok, "get-empty while delayed")
	qs, err := ch.QueueDeclarePassive("all", true, false, false, false, nil)
	require.NoError(t, err)
	assert.Zero(t, qs.Messages)
	d = get091(t, ch, "all", false)
	assert.GreaterOrEqual(t, time.Since(start), retryMin-20*time.Millisecond)
	assert.True(t, d.Redelivered)
	assert.Equal(t, int64(1), d.Headers["x-acquired-count"])
	assert.NotContains(t, d.Headers, "x-delivery-count")
	require.NoError(t, d.Ack(false))

	_, err = ch.QueueDeclare("failed", true, false, false, false, amqp091.Table{"x-queue-type": "quorum",
		"x-delayed-retry-type": "failed", "x-delayed-retry-min": int64(retryMin.Milliseconds())})
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "failed", false, false, amqp091.Publishing{Body: []byte("m")}))
	d = get091(t, ch, "failed", false)
	require.NoError(t, d.Nack(false, true))
	d, ok, err = ch.Get("failed", false)
	require.NoError(t, err)
	require.True(t, ok, "nack(requeue) is not a failure: at once")
	start = time.Now()
	require.NoError(t, d.Reject(true))
	eventually(t, "reject(requeue) is a failure: delayed", func() bool { return queueInfo(t, b, "failed").MessagesDelayed == 1 })
	d = get091(t, ch, "failed", false)
	assert.GreaterOrEqual(t, time.Since(start), retryMin-20*time.Millisecond)
	assert.Equal(t, int64(1), d.Headers["x-delivery-count"])

	// A channel closed with the message unacknowledged: a failure.
	start = time.Now()
	require.NoError(t, ch.Close())
	eventually(t, "delayed after the close", func() bool { return queueInfo(t, b, "failed").MessagesDelayed == 1 })
	ch2 := channel091(t, dial091(t, b))
	d = get091(t, ch2, "failed", true)
	assert.GreaterOrEqual(t, time.Since(start), retryMin-20*time.Millisecond)
	assert.Equal(t, int64(2), d.Headers["x-delivery-count"])
}

// The official client v1.0.0 (what CI runs): its QuorumQueueSpecification
// takes the arguments, and RequeueWithAnnotations with x-opt-delivery-time
// is what its newer DelayRetry sends (the main branch's DelayRetry and
// QuorumQueueDelayedRetry* specs, ported).
func TestDelayedRetryOfficialClient(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()
	for _, tc := range []struct {
		name, typ string
		settle    func(ctx context.Context, dc rmq.IDeliveryContext) error
		delayed   bool
	}{
		{"all requeue", "all", func(ctx context.Context, dc rmq.IDeliveryContext) error { return dc.Requeue(ctx) }, true},
		{"returned requeue", "returned", func(ctx context.Context, dc rmq.IDeliveryContext) error { return dc.Requeue(ctx) }, true},
		{"failed requeue", "failed", func(ctx context.Context, dc rmq.IDeliveryContext) error { return dc.Requeue(ctx) }, false},
		{"disabled requeue", "disabled", func(ctx context.Context, dc rmq.IDeliveryContext) error { return dc.Requeue(ctx) }, false},
		{"delivery time without a type", "", func(ctx context.Context, dc rmq.IDeliveryContext) error {
			return dc.RequeueWithAnnotations(ctx, amqp.Annotations{"x-opt-delivery-time": time.Now().Add(retryMin).UnixMilli()})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{}
			if tc.typ != "" {
				args["x-delayed-retry-type"], args["x-delayed-retry-min"] = tc.typ, retryMin.Milliseconds()
			}
			info, err := m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "q", Arguments: args})
			require.NoError(t, err)
			if tc.typ != "" {
				assert.Equal(t, tc.typ, info.Arguments()["x-delayed-retry-type"])
				assert.Equal(t, retryMin.Milliseconds(), info.Arguments()["x-delayed-retry-min"])
			}
			pub, err := conn.NewPublisher(ctxT(t), &rmq.QueueAddress{Queue: "q"}, nil)
			require.NoError(t, err)
			rmqPublish(t, pub, "m")
			c, err := conn.NewConsumer(ctxT(t), "q", nil)
			require.NoError(t, err)
			dc := rmqReceive(t, c)
			start := time.Now()
			require.NoError(t, tc.settle(ctxT(t), dc))
			dc = rmqReceive(t, c)
			if tc.delayed {
				assert.GreaterOrEqual(t, time.Since(start), retryMin-20*time.Millisecond)
			} else {
				assert.Less(t, time.Since(start), retryMin-immediateSlack)
			}
			require.NoError(t, dc.Accept(ctxT(t)))
			n, err := m.PurgeQueue(ctxT(t), "q")
			require.NoError(t, err)
			assert.Zero(t, n)
			require.NoError(t, c.Close(ctxT(t)))
			require.NoError(t, pub.Close(ctxT(t)))
			require.NoError(t, m.DeleteQueue(ctxT(t), "q"))
		})
	}
}
