package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// Acceptance tests of dead-lettering as RabbitMQ 4.3 does it, one behaviour
// per test. Each test starts its own broker. [wire] checks read the raw transfer.

// Expiry via queue TTL into a headers exchange (all-with-x).
func TestDeadLetterQueueTTLIntoHeadersExchange(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q1", router.Classic, dlArgs("amq.headers", nil, kv("x-message-ttl", int64(0))))
	declareQueue(t, b, "q2", router.Classic, nil)
	bind(t, b, "amq.headers", "q2", "", amqp10.Map{kv("my key", uint32(5)), kv("x-my key", uint32(6)), kv("x-match", "all-with-x")})
	s := session(t, dial(t, b, nil))

	m1 := msg("m1")
	m1.Annotations = amqp.Annotations{"x-my key": 6}
	m1.Properties = &amqp.MessageProperties{MessageID: "my ID"}
	m1.ApplicationProperties = map[string]any{"my key": 5}
	m2 := msg("m2")
	m2.Annotations = amqp.Annotations{"x-my key": 6}
	m2.ApplicationProperties = map[string]any{"my key": 5}
	m3 := msg("m3")
	m3.ApplicationProperties = map[string]any{"my key": 5}
	m4 := msg("m4")
	m4.Annotations = amqp.Annotations{"x-my key": 6}
	publish(t, s, "/queues/q1", m1, m2, m3, m4)

	r := settledReceiver(t, s, "q2")
	got := recvBodies(t, r, "m1", "m2")
	requireNoMessage(t, r, 300*time.Millisecond) // m3, m4 are unroutable: dropped

	d1, d2 := got[0], got[1]
	require.NotNil(t, d1.Properties)
	assert.Equal(t, &amqp.MessageProperties{MessageID: "my ID"}, d1.Properties)
	assert.Nil(t, d2.Properties, "no properties section may be added")
	assertSix(t, d1, "q1", "expired", "", "q1", "expired", "")
	ds := deathsOf(t, d1)
	require.Len(t, ds, 1)
	assertDeath(t, ds[0], "q1", "expired", 1, "", []string{"q1"})
	assert.Equal(t, "amq.headers", d1.Annotations["x-exchange"])
	assert.Equal(t, "q1", d1.Annotations["x-routing-key"])
	require.NotNil(t, d1.Header)
	assert.False(t, d1.Header.FirstAcquirer)
	assert.Zero(t, d1.Header.TTL)
	eventually(t, "counters", func() bool {
		st := stats(b, "q1", router.ReasonExpired)
		return st.DeadLettered == 2 && st.DroppedNoRoute == 2
	})

	// [wire] the same dead-lettering, read raw.
	cctx, cancel := closeCtx()
	defer cancel()
	require.NoError(t, r.Close(cctx))
	m5 := msg("m5")
	m5.Annotations = amqp.Annotations{"x-my key": 6}
	m5.ApplicationProperties = map[string]any{"my key": 5}
	publish(t, s, "/queues/q1", m5)
	wm, ann := parseWire(t, rawReceive(t, b, "q2"))
	assertWireDeaths(t, wm, false)
	assert.True(t, wm.HasHeader, "the header section is always present")
	assert.False(t, wm.Header.Durable, "no header from the publisher: durable false")
	assert.False(t, wm.Header.FirstAcquirer)
	assert.Equal(t, "amq.headers", mustGet(t, ann, "x-exchange"))
	p, err := wm.Properties()
	require.NoError(t, err)
	assert.Nil(t, p)
}

func mustGet(t *testing.T, m amqp10.Map, key string) any {
	t.Helper()
	v, ok := m.Get(amqp10.Symbol(key))
	require.True(t, ok, "missing %s in %v", key, m)
	return v
}

// A per-message TTL is recorded as the death's ttl and removed.
func TestDeadLetterPerMessageTTLRecordedAndRemoved(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q0", router.Quorum, dlArgs("", ptr("q1")))
	declareQueue(t, b, "q1", router.Classic, nil) // no streams: a CQ
	s := session(t, dial(t, b, nil))
	for _, n := range []string{"a", "b"} {
		m := msg(n)
		m.Header = &amqp.MessageHeader{Durable: true, TTL: 10 * time.Millisecond}
		publish(t, s, "/queues/q0", m)
	}

	// [wire] first message raw: ttl is the first key of the death map.
	wm, ann := parseWire(t, rawReceive(t, b, "q1"))
	assertWireDeaths(t, wm, true)
	assert.False(t, wm.Header.HasTTL, "header ttl must be removed")
	assert.False(t, wm.Header.FirstAcquirer)
	assert.True(t, wm.Header.Durable)
	ds := mustGet(t, ann, "x-opt-deaths").(*amqp10.Array)
	require.Len(t, ds.Elems, 1)
	ttl, ok := ds.Elems[0].(amqp10.Map).Get(amqp10.Symbol("ttl"))
	require.True(t, ok)
	assert.Equal(t, uint32(10), ttl)

	d := recv(t, settledReceiver(t, s, "q1"))
	assert.Equal(t, "b", body(d))
	assertSix(t, d, "q0", "expired", "", "q0", "expired", "")
	dd := deathsOf(t, d)
	require.Len(t, dd, 1)
	assertDeath(t, dd[0], "q0", "expired", 1, "", []string{"q0"}, 10)
	require.NotNil(t, d.Header)
	assert.Zero(t, d.Header.TTL, "the TTL is not re-applied")
	assert.False(t, d.Header.FirstAcquirer)
}

// The rejected outcome.
func TestDeadLetterRejectedOutcome(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q1", typ, dlArgs("", ptr("dlq")))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q1", "m", "w")
		r := receiver(t, s, "/queues/q1", nil)
		m := recv(t, r)
		require.Equal(t, "m", body(m))
		require.NotNil(t, m.Header)
		assert.Zero(t, m.Header.DeliveryCount)
		assert.True(t, m.Header.FirstAcquirer)
		reject(t, r, m)
		w := recv(t, r)
		reject(t, r, w)

		// [wire] the first rejected message, m.
		eventually(t, "both dead-lettered", func() bool { return queueLen(t, b, "dlq") == 2 })
		wm, ann := parseWire(t, rawReceive(t, b, "dlq"))

		d := recv(t, settledReceiver(t, s, "dlq"))
		assert.Equal(t, "w", body(d))
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "q1", "rejected", 1, "", []string{"q1"})
		assertSix(t, d, "q1", "rejected", "", "q1", "rejected", "")
		assert.Equal(t, uint32(1), d.Header.DeliveryCount)
		assert.False(t, d.Header.FirstAcquirer)
		assert.Equal(t, "", d.Annotations["x-exchange"])
		assert.Equal(t, "dlq", d.Annotations["x-routing-key"])
		assert.Zero(t, queueLen(t, b, "q1"))
		assert.Zero(t, unacked(t, b, "q1"))

		assertWireDeaths(t, wm, false)
		assert.Equal(t, uint32(1), wm.Header.DeliveryCount)
		ds2 := mustGet(t, ann, "x-opt-deaths").(*amqp10.Array)
		assert.Equal(t, amqp10.TypeMap32, ds2.Type)
		dm := ds2.Elems[0].(amqp10.Map)
		reason, _ := dm.Get(amqp10.Symbol("reason"))
		assert.Equal(t, amqp10.Symbol("rejected"), reason)
		count, _ := dm.Get(amqp10.Symbol("count"))
		assert.Equal(t, uint64(1), count)
		ft, _ := dm.Get(amqp10.Symbol("first-time"))
		assert.IsType(t, amqp10.Timestamp(0), ft)
		rks, _ := dm.Get(amqp10.Symbol("routing-keys"))
		assert.Equal(t, &amqp10.Array{Type: amqp10.TypeStr32, Elems: []any{"q1"}}, rks)
		assert.Equal(t, "rejected", mustGet(t, ann, "x-first-death-reason"))
	})
}

// modified(undeliverable-here) dead-letters as rejected; delivery-failed controls dc.
func TestDeadLetterModifiedUndeliverableHereAsRejected(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "src", typ, dlArgs("", ptr("dlq")))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/src", "m1", "m2")
		r := receiver(t, s, "/queues/src", nil)
		m1 := recv(t, r)
		modify(t, r, m1, true, true, nil)
		m2 := recv(t, r)
		modify(t, r, m2, false, true, nil)

		got := recvBodies(t, settledReceiver(t, s, "dlq"), "m1", "m2")
		for i, d := range got {
			ds := deathsOf(t, d)
			require.Len(t, ds, 1)
			assertDeath(t, ds[0], "src", "rejected", 1, "", []string{"src"})
			assert.False(t, d.Header.FirstAcquirer)
			assert.Equal(t, uint32(1-i), d.Header.DeliveryCount, "%s delivery-count", body(d))
		}
	})
}

// modified(undeliverable-here=false) requeues, merges annotations (QQ
// only), never dead-letters.
func TestModifiedRequeueNeverDeadLetters(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1", "m2")
		r1 := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
		next := func(r *amqp.Receiver) *amqp.Message {
			t.Helper()
			require.NoError(t, r.IssueCredit(1))
			return recv(t, r)
		}
		m := next(r1)
		require.Equal(t, "m1", body(m))
		modify(t, r1, m, false, true, nil) // no DLX: discarded

		m = next(r1)
		require.Equal(t, "m2", body(m))
		assert.Zero(t, m.Header.DeliveryCount)
		assert.True(t, m.Header.FirstAcquirer)
		modify(t, r1, m, false, false, nil)

		m = next(r1)
		require.Equal(t, "m2", body(m))
		assert.Zero(t, m.Header.DeliveryCount)
		assert.False(t, m.Header.FirstAcquirer)
		modify(t, r1, m, true, false, nil)

		m = next(r1)
		require.Equal(t, "m2", body(m))
		assert.Equal(t, uint32(1), m.Header.DeliveryCount)
		a1 := amqp.Annotations{
			"x-opt-requeued-by":    []string{"receiver 1"},
			"x-opt-requeue-reason": []any{"reason 1"},
			"x-opt-my-map":         map[any]any{"k1": int8(-1), "k2": uint64(2)},
		}
		modify(t, r1, m, true, false, a1)

		r2 := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
		m = next(r2)
		require.Equal(t, "m2", body(m))
		assert.Equal(t, uint32(2), m.Header.DeliveryCount)
		if typ == router.Quorum {
			assert.Equal(t, []string{"receiver 1"}, m.Annotations["x-opt-requeued-by"], "array stays an array")
			assert.Equal(t, []any{"reason 1"}, m.Annotations["x-opt-requeue-reason"], "list stays a list")
			assert.Equal(t, map[string]any{"k1": int8(-1), "k2": uint64(2)}, m.Annotations["x-opt-my-map"])
		} else {
			for k := range a1 {
				assert.NotContains(t, m.Annotations, k, "a CQ does not store modified annotations")
			}
		}
		modify(t, r2, m, false, false, amqp.Annotations{
			"x-opt-requeued-by":    []string{"receiver 2", "receiver 1"},
			"x-opt-requeue-reason": []any{amqp.Symbol("reason 2"), "reason 1"},
			"x-opt-my-map":         map[any]any{"k1": int8(-1), "k2": uint64(2), amqp.Symbol("k3"): amqp.Symbol("val 3")},
			"x-other":              99,
		})
		cctx, cancel := closeCtx()
		defer cancel()
		require.NoError(t, r1.Close(cctx))
		require.NoError(t, r2.Close(cctx))

		// Final delivery, raw, to see the exact AMQP types.
		wm, ann := parseWire(t, rawReceive(t, b, "q"))
		body, err := wm.Body()
		require.NoError(t, err)
		assert.Contains(t, string(body), "m2")
		assert.Equal(t, uint32(2), wm.Header.DeliveryCount)
		_, hasDeaths := ann.Get(amqp10.Symbol("x-opt-deaths"))
		assert.False(t, hasDeaths, "modify never dead-letters")
		if typ == router.Quorum {
			by := mustGet(t, ann, "x-opt-requeued-by")
			if arr, ok := by.(*amqp10.Array); assert.True(t, ok, "x-opt-requeued-by is %T", by) {
				assert.Equal(t, []any{"receiver 2", "receiver 1"}, arr.Elems)
			}
			assert.Equal(t, amqp10.List{amqp10.Symbol("reason 2"), "reason 1"}, mustGet(t, ann, "x-opt-requeue-reason"))
			mm, ok := mustGet(t, ann, "x-opt-my-map").(amqp10.Map)
			if assert.True(t, ok) {
				v, _ := mm.Get(amqp10.Symbol("k3"))
				assert.Equal(t, amqp10.Symbol("val 3"), v)
				v, _ = mm.Get("k1")
				assert.Equal(t, int8(-1), v)
				v, _ = mm.Get("k2")
				assert.Equal(t, uint64(2), v)
			}
			assert.Equal(t, int64(99), mustGet(t, ann, "x-other"), "simple values become long")
			raw, _ := rawAnnotation(t, wm, "x-other")
			assert.Contains(t, []byte{0x81, 0x55}, raw[0], "x-other must be a long")
		} else {
			for _, k := range []string{"x-opt-requeued-by", "x-opt-requeue-reason", "x-opt-my-map", "x-other"} {
				_, ok := ann.Get(amqp10.Symbol(k))
				assert.False(t, ok, "a CQ does not store %s", k)
			}
		}
		assert.Zero(t, queueLen(t, b, "q"), "m1 never returns")
		assert.Equal(t, uint64(1), stats(b, "q", router.ReasonRejected).DroppedNoDLX)
	})
}

// released requeues without a dc increment, and never reaches the
// delivery limit (4.3+).
func TestReleasedNeverDeadLetters(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Quorum, dlArgs("", ptr("dlq")))
	declareQueue(t, b, "dlq", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	for i := range 26 {
		m := recv(t, r)
		require.Equal(t, "m", body(m), "delivery %d", i+1)
		assert.Zero(t, m.Header.DeliveryCount, "delivery %d", i+1)
		assert.Equal(t, i == 0, m.Header.FirstAcquirer, "delivery %d first-acquirer", i+1)
		if i > 0 {
			assert.Equal(t, int64(i), m.Annotations["x-acquired-count"], "delivery %d", i+1)
		}
		if i == 25 {
			accept(t, r, m)
			break
		}
		require.NoError(t, r.ReleaseMessage(ctxT(t), m))
	}
	assert.Empty(t, b.DeadLetters().QueueStats("/", "q"))
	assert.Zero(t, queueLen(t, b, "dlq"))
}

// Max-length overflow with drop-head dead-letters the head as maxlen.
func TestDeadLetterMaxLengthDropHead(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
		declareQueue(t, b, "q", typ, dlArgs("dlx", ptr("dlq"), kv("x-max-length", int64(1))))
		declareQueue(t, b, "dlq", router.Classic, nil)
		bind(t, b, "dlx", "dlq", "dlq", nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1", "m2", "m3")

		for _, d := range recvBodies(t, settledReceiver(t, s, "dlq"), "m1", "m2") {
			ds := deathsOf(t, d)
			require.Len(t, ds, 1)
			assertDeath(t, ds[0], "q", "maxlen", 1, "", []string{"q"})
			assert.Equal(t, "maxlen", d.Annotations["x-last-death-reason"])
			assert.Equal(t, "dlx", d.Annotations["x-exchange"])
		}
		assert.Equal(t, 1, queueLen(t, b, "q"))
		recvBodies(t, settledReceiver(t, s, "q"), "m3")
		assert.Equal(t, uint64(2), stats(b, "q", router.ReasonMaxLen).DeadLettered)
	})
}

// requireRejectedMaxLen checks reject-publish's rejected outcome for queue q.
func requireRejectedMaxLen(t *testing.T, st amqp.DeliveryState, q string) {
	t.Helper()
	rej, ok := st.(*amqp.StateRejected)
	require.True(t, ok, "want rejected, got %T %+v", st, st)
	require.NotNil(t, rej.Error)
	assert.Equal(t, amqp.ErrCond("amqp:resource-limit-exceeded"), rej.Error.Condition)
	assert.Equal(t, "queue '"+q+"' exceeded maximum length", rej.Error.Description)
	assert.Equal(t, map[string]any{"queue": q, "reason": "maxlen"}, rej.Error.Info)
}

// Reject-publish rejects the publisher and does not dead-letter.
func TestRejectPublishDoesNotDeadLetter(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-max-length", int64(1)), kv("x-overflow", "reject-publish")))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		snd := sender(t, s, "/queues/q", nil)
		accepted := 1
		if typ == router.Quorum {
			accepted = 2 // a QQ accepts the message that crosses the limit
		}
		for i := range accepted {
			require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("ok")), "message %d", i+1)
		}
		requireRejectedMaxLen(t, send(t, snd, msg("over")), "q")
		requireRejectedMaxLen(t, send(t, snd, msg("over2")), "q")

		// [wire] info.queue is a string and info.reason a symbol.
		raw, err := amqp.NewMessage([]byte("raw")).MarshalBinary()
		require.NoError(t, err)
		st := rawSend(t, b, "/queues/q", raw)
		require.Equal(t, amqp10.StateRejected, st.Kind)
		require.NotNil(t, st.Error)
		reason, _ := st.Error.Info.Get(amqp10.Symbol("reason"))
		assert.Equal(t, amqp10.Symbol("maxlen"), reason)
		queue, _ := st.Error.Info.Get(amqp10.Symbol("queue"))
		assert.Equal(t, "q", queue)

		assert.Equal(t, accepted, queueLen(t, b, "q"))
		assert.Zero(t, queueLen(t, b, "dlq"))
		assert.Empty(t, b.DeadLetters().QueueStats("/", "q"), "reject-publish never dead-letters")

		// Below the limit again (QQ: at most 80 %), publishing is accepted.
		bodies := []string{"ok"}
		if typ == router.Quorum {
			bodies = append(bodies, "ok")
		}
		take(t, s, "q", bodies...)
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("again")))
	})
}

// Reject-publish-dlx rejects and dead-letters the new message (CQ); a
// QQ treats it as drop-head.
func TestRejectPublishDLXDeadLettersNewMessage(t *testing.T) {
	setup := func(t *testing.T, typ router.QueueType) (*amqp.Session, *amqp.Sender, func() *amqp.Receiver, func(string) int) {
		b := startBroker(t, "")
		declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
		declareQueue(t, b, "q", typ, dlArgs("dlx", ptr("dlq"), kv("x-max-length", int64(1)), kv("x-overflow", "reject-publish-dlx")))
		declareQueue(t, b, "dlq", router.Classic, nil)
		bind(t, b, "dlx", "dlq", "dlq", nil)
		s := session(t, dial(t, b, nil))
		return s, sender(t, s, "/queues/q", nil), func() *amqp.Receiver { return settledReceiver(t, s, "dlq") },
			func(q string) int { return queueLen(t, b, q) }
	}
	t.Run("CQ", func(t *testing.T) {
		s, snd, dlq, qlen := setup(t, router.Classic)
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("m1")))
		requireRejectedMaxLen(t, send(t, snd, msg("m2")), "q")
		requireRejectedMaxLen(t, send(t, snd, msg("m3")), "q")
		for _, d := range recvBodies(t, dlq(), "m2", "m3") {
			ds := deathsOf(t, d)
			require.Len(t, ds, 1)
			assertDeath(t, ds[0], "q", "maxlen", 1, "", []string{"q"})
		}
		assert.Equal(t, 1, qlen("q"))
		recvBodies(t, settledReceiver(t, s, "q"), "m1")
	})
	t.Run("QQ is drop-head", func(t *testing.T) {
		s, snd, dlq, qlen := setup(t, router.Quorum)
		for _, n := range []string{"m1", "m2", "m3"} {
			require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg(n)))
		}
		for _, d := range recvBodies(t, dlq(), "m1", "m2") {
			ds := deathsOf(t, d)
			require.Len(t, ds, 1)
			assertDeath(t, ds[0], "q", "maxlen", 1, "", []string{"q"})
		}
		assert.Equal(t, 1, qlen("q"))
		recvBodies(t, settledReceiver(t, s, "q"), "m3")
	})
}

// The delivery limit (QQ, limit 0) dead-letters as delivery_limit.
func TestDeadLetterDeliveryLimitZero(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "src", router.Quorum, dlArgs("", ptr("dst"), kv("x-delivery-limit", int64(0))))
	declareQueue(t, b, "dst", router.Quorum, nil)
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/src", "m1", "m2")
	r := receiver(t, s, "/queues/src", &amqp.ReceiverOptions{Credit: 2})
	m1, m2 := recv(t, r), recv(t, r)
	require.Equal(t, []string{"m1", "m2"}, []string{body(m1), body(m2)})
	modify(t, r, m1, true, false, nil)
	modify(t, r, m2, true, false, nil)

	for _, d := range recvBodies(t, settledReceiver(t, s, "dst"), "m1", "m2") {
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "delivery_limit", 1, "", []string{"src"})
		assert.Equal(t, "delivery_limit", d.Annotations["x-first-death-reason"])
		assert.Equal(t, uint32(1), d.Header.DeliveryCount)
	}
	assert.Zero(t, queueLen(t, b, "src"))
	assert.Zero(t, unacked(t, b, "src"))
}

// The default delivery limit is 20; -1 disables it; an abrupt
// disconnect counts as a failed delivery.
func TestDefaultDeliveryLimit(t *testing.T) {
	t.Run("default 20", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "src", router.Quorum, dlArgs("", ptr("dst")))
		declareQueue(t, b, "dst", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/src", "m")
		r := receiver(t, s, "/queues/src", nil)
		for i := range 21 {
			m := recv(t, r)
			require.Equal(t, uint32(i), m.Header.DeliveryCount, "delivery %d", i+1)
			modify(t, r, m, true, false, nil)
		}
		d := recv(t, settledReceiver(t, s, "dst"))
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "delivery_limit", 1, "", []string{"src"})
		assert.Equal(t, uint32(21), d.Header.DeliveryCount)
		assert.Zero(t, queueLen(t, b, "src"))
	})
	t.Run("-1 is unlimited", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "src", router.Quorum, dlArgs("", ptr("dst"), kv("x-delivery-limit", int64(-1))))
		declareQueue(t, b, "dst", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/src", "m")
		r := receiver(t, s, "/queues/src", nil)
		for i := range 30 {
			m := recv(t, r)
			require.Equal(t, uint32(i), m.Header.DeliveryCount)
			modify(t, r, m, true, false, nil)
		}
		m := recv(t, r)
		assert.Equal(t, uint32(30), m.Header.DeliveryCount)
		accept(t, r, m)
		assert.Empty(t, b.DeadLetters().QueueStats("/", "src"))
	})
	t.Run("clean close and abrupt disconnect both count", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "src", router.Quorum, dlArgs("", ptr("dst"), kv("x-delivery-limit", int64(1))))
		declareQueue(t, b, "dst", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/src", "m")

		// A clean close while holding m: the consumer is gone, dc +1
		// (RabbitMQ 4.3 counts any exit of the consumer).
		c1 := dial(t, b, nil)
		r1 := receiver(t, session(t, c1), "/queues/src", nil)
		m := recv(t, r1)
		require.Zero(t, m.Header.DeliveryCount)
		require.NoError(t, c1.Close())
		eventually(t, "m requeued after clean close", func() bool { return queueLen(t, b, "src") == 1 })

		// An abrupt drop while holding m: dc +1 again, over the limit 1.
		p := startProxy(t, b.Addr().String())
		r2 := receiver(t, session(t, dialVia(t, p)), "/queues/src", nil)
		m = recv(t, r2)
		require.Equal(t, uint32(1), m.Header.DeliveryCount, "a clean close is a failed delivery")
		p.kill()

		d := recv(t, settledReceiver(t, s, "dst"))
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "delivery_limit", 1, "", []string{"src"})
		assert.Equal(t, uint32(2), d.Header.DeliveryCount, "an abrupt disconnect is a failed delivery")
		assert.Zero(t, queueLen(t, b, "src"))
	})
}

// A self-loop via rejection compacts to one entry.
func TestDeadLetterRejectSelfLoopCompacts(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", nil))
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m")
		r := receiver(t, s, "/queues/q", nil)
		reject(t, r, recv(t, r))

		m := recv(t, r)
		require.Equal(t, "m", body(m))
		ds := deathsOf(t, m)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "q", "rejected", 1, "", []string{"q"})
		assertSix(t, m, "q", "rejected", "", "q", "rejected", "")
		assert.Equal(t, uint32(1), m.Header.DeliveryCount)
		first := ds[0]["first-time"].(time.Time)
		last := ds[0]["last-time"].(time.Time)
		reject(t, r, m)

		m = recv(t, r)
		require.Equal(t, "m", body(m))
		ds = deathsOf(t, m)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "q", "rejected", 2, "", []string{"q"})
		assert.Equal(t, first, ds[0]["first-time"], "first-time never changes")
		assert.False(t, ds[0]["last-time"].(time.Time).Before(last))
		assertSix(t, m, "q", "rejected", "", "q", "rejected", "")
		assert.Equal(t, uint32(2), m.Header.DeliveryCount)
		accept(t, r, m)
	})
}

// Distinct {queue, reason} pairs are prepended.
func TestDeadLetterDistinctDeathsPrepended(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", ptr("dlx1")))
		declareQueue(t, b, "dlx1", typ, dlArgs("", ptr("dlx2")))
		declareQueue(t, b, "dlx2", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m", "w")
		r := receiver(t, s, "/queues/q", nil)
		reject(t, r, recv(t, r))
		reject(t, r, recv(t, r))
		r1 := receiver(t, s, "/queues/dlx1", nil)
		recvd := []string{}
		for range 2 {
			m := recv(t, r1)
			recvd = append(recvd, body(m))
			reject(t, r1, m)
		}
		require.Equal(t, []string{"m", "w"}, recvd)

		wm, _ := parseWire(t, rawReceive(t, b, "dlx2")) // m
		assertWireDeaths(t, wm, false, false)

		d := recv(t, settledReceiver(t, s, "dlx2"))
		require.Equal(t, "w", body(d))
		ds := deathsOf(t, d)
		require.Len(t, ds, 2)
		assertDeath(t, ds[0], "dlx1", "rejected", 1, "", []string{"dlx1"})
		assertDeath(t, ds[1], "q", "rejected", 1, "", []string{"q"})
		assertSix(t, d, "q", "rejected", "", "dlx1", "rejected", "")
		assert.Equal(t, uint32(2), d.Header.DeliveryCount)
	})
}

// The x-first-* annotations never change; x-last-death-exchange is the previous DLX.
func TestDeadLetterFirstDeathNeverModified(t *testing.T) {
	b := startBroker(t, "")
	declareExchange(t, b, "X", router.ExchangeDirect, nil)
	declareQueue(t, b, "q", router.Classic, dlArgs("X", ptr("dlq")))
	declareQueue(t, b, "dlq", router.Classic, dlArgs("", ptr("q")))
	bind(t, b, "X", "dlq", "dlq", nil)
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	reject(t, r, recv(t, r))

	rd := receiver(t, s, "/queues/dlq", nil)
	m := recv(t, rd)
	assertSix(t, m, "q", "rejected", "", "q", "rejected", "")
	reject(t, rd, m)

	m = recv(t, r)
	assertSix(t, m, "q", "rejected", "", "dlq", "rejected", "X")
	ds := deathsOf(t, m)
	require.Len(t, ds, 2)
	assertDeath(t, ds[0], "dlq", "rejected", 1, "X", []string{"dlq"})
	assertDeath(t, ds[1], "q", "rejected", 1, "", []string{"q"})
	assert.Equal(t, "", m.Annotations["x-exchange"])
	assert.Equal(t, "q", m.Annotations["x-routing-key"])
	accept(t, r, m)
}

// A maxlen self-cycle is dropped.
func TestDeadLetterMaxLengthSelfCycleDropped(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", nil, kv("x-max-length", int64(1))))
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1", "m2")
		eventually(t, "m1 dropped as a cycle", func() bool {
			return stats(b, "q", router.ReasonMaxLen).DroppedCycle == 1
		})
		assert.Equal(t, 1, queueLen(t, b, "q"))
		r := receiver(t, s, "/queues/q", nil)
		m := recv(t, r)
		require.Equal(t, "m2", body(m))
		accept(t, r, m)
		requireNoMessage(t, r, 300*time.Millisecond)
		assert.Zero(t, queueLen(t, b, "q"))
		assert.Zero(t, stats(b, "q", router.ReasonMaxLen).DeadLettered)
	})
}

// A TTL self-cycle is dropped.
func TestDeadLetterTTLSelfCycleDropped(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", nil, kv("x-message-ttl", int64(1))))
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1", "m2")
		eventually(t, "both dropped as cycles", func() bool {
			return stats(b, "q", router.ReasonExpired).DroppedCycle == 2
		})
		assert.Zero(t, queueLen(t, b, "q"))
		requireNoMessage(t, receiver(t, s, "/queues/q", nil), 300*time.Millisecond)
		st := stats(b, "q", router.ReasonExpired)
		assert.Equal(t, uint64(2), st.DroppedCycle, "no loop: each message dies once")
		assert.Zero(t, st.DeadLettered)
	})
}

// A DLX that routes nowhere drops (at-most-once).
func TestDeadLetterDLXRoutingNowhereDrops(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
		declareQueue(t, b, "q", typ, dlArgs("dlx", nil))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1")
		r := receiver(t, s, "/queues/q", nil)
		reject(t, r, recv(t, r))
		eventually(t, "m1 dropped", func() bool { return stats(b, "q", router.ReasonRejected).DroppedNoRoute == 1 })
		assert.Zero(t, queueLen(t, b, "q"))
		assert.Zero(t, unacked(t, b, "q"))

		bind(t, b, "dlx", "dlq", "q", nil)
		publishBodies(t, s, "/queues/q", "m2")
		reject(t, r, recv(t, r))
		dr := settledReceiver(t, s, "dlq")
		d := recvBodies(t, dr, "m2")[0]
		assertDeath(t, deathsOf(t, d)[0], "q", "rejected", 1, "", []string{"q"})
		requireNoMessage(t, dr, 200*time.Millisecond)
	})
}

// A DLX that does not exist drops (at-most-once); later messages go
// through once it exists.
func TestDeadLetterMissingDLXDrops(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("dlx-missing", ptr("dlq")))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1")
		r := receiver(t, s, "/queues/q", nil)
		reject(t, r, recv(t, r))
		eventually(t, "m1 dropped", func() bool { return stats(b, "q", router.ReasonRejected).DroppedNoRoute == 1 })
		assert.Zero(t, queueLen(t, b, "q"))
		assert.Zero(t, queueLen(t, b, "dlq"))

		declareExchange(t, b, "dlx-missing", router.ExchangeDirect, nil)
		bind(t, b, "dlx-missing", "dlq", "dlq", nil)
		publishBodies(t, s, "/queues/q", "m2")
		reject(t, r, recv(t, r))
		dr := settledReceiver(t, s, "dlq")
		d := recvBodies(t, dr, "m2")[0]
		assert.Equal(t, "dlx-missing", d.Annotations["x-exchange"])
		requireNoMessage(t, dr, 200*time.Millisecond)
	})
}

// No DLX configured: messages are removed, nothing else happens.
func TestNoDLXRemovesMessages(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, nil)
		declareQueue(t, b, "qttl", typ, amqp10.Map{kv("x-message-ttl", int64(1))})
		declareQueue(t, b, "qmax", typ, amqp10.Map{kv("x-max-length", int64(1))})
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m")
		r := receiver(t, s, "/queues/q", nil)
		reject(t, r, recv(t, r))
		publishBodies(t, s, "/queues/qttl", "t")
		publishBodies(t, s, "/queues/qmax", "a", "b")

		eventually(t, "all three removed", func() bool {
			return stats(b, "q", router.ReasonRejected).DroppedNoDLX == 1 &&
				stats(b, "qttl", router.ReasonExpired).DroppedNoDLX == 1 &&
				stats(b, "qmax", router.ReasonMaxLen).DroppedNoDLX == 1
		})
		assert.Zero(t, queueLen(t, b, "q"))
		assert.Zero(t, queueLen(t, b, "qttl"))
		recvBodies(t, settledReceiver(t, s, "qmax"), "b")
		requireNoMessage(t, r, 200*time.Millisecond)
		// The connection is still healthy: no errors anywhere.
		publishBodies(t, s, "/queues/q", "again")
	})
}

// Headers-exchange routing on the first-death annotations.
func TestDeadLetterHeadersRouteOnFirstDeath(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareExchange(t, b, "DLX", router.ExchangeHeaders, nil)
		declareQueue(t, b, "q1", typ, dlArgs("DLX", nil))
		declareQueue(t, b, "q2", typ, dlArgs("DLX", nil))
		declareQueue(t, b, "expiredQ", router.Classic, nil)
		declareQueue(t, b, "rejectedQ", router.Classic, nil)
		bind(t, b, "DLX", "expiredQ", "", amqp10.Map{kv("x-match", "all-with-x"),
			kv("x-first-death-reason", "expired"), kv("x-first-death-queue", "q1")})
		bind(t, b, "DLX", "rejectedQ", "", amqp10.Map{kv("x-match", "any-with-x"), kv("x-first-death-reason", "rejected")})
		s := session(t, dial(t, b, nil))

		publishBodies(t, s, "/queues/q2", "m3")
		r := receiver(t, s, "/queues/q2", nil)
		reject(t, r, recv(t, r))
		cctx, cancel := closeCtx()
		defer cancel()
		require.NoError(t, r.Close(cctx)) // m2 must not be delivered: it has to expire
		ttl := func(n string) *amqp.Message {
			m := msg(n)
			m.Header = &amqp.MessageHeader{TTL: time.Millisecond}
			return m
		}
		publish(t, s, "/queues/q1", ttl("m1"))
		publish(t, s, "/queues/q2", ttl("m2"))

		er := settledReceiver(t, s, "expiredQ")
		recvBodies(t, er, "m1")
		rr := settledReceiver(t, s, "rejectedQ")
		recvBodies(t, rr, "m3")
		eventually(t, "m2 dropped", func() bool { return stats(b, "q2", router.ReasonExpired).DroppedNoRoute == 1 })
		requireNoMessage(t, er, 200*time.Millisecond)
		requireNoMessage(t, rr, 50*time.Millisecond)
	})
}

// Declaration errors of the dead-letter arguments.
func TestDeadLetterDeclarationErrors(t *testing.T) {
	b := startBroker(t, "")
	vh := vhost(t, b)
	for _, tc := range []struct {
		name string
		typ  router.QueueType
		args amqp10.Map
	}{
		{"dlrk without dlx CQ", router.Classic, amqp10.Map{kv("x-dead-letter-routing-key", "k")}},
		{"dlrk without dlx QQ", router.Quorum, amqp10.Map{kv("x-dead-letter-routing-key", "k")}},
		{"strategy foo", router.Quorum, amqp10.Map{kv("x-dead-letter-exchange", "x"), kv("x-dead-letter-strategy", "foo")}},
		{"overflow bar CQ", router.Classic, amqp10.Map{kv("x-overflow", "bar")}},
		{"overflow bar QQ", router.Quorum, amqp10.Map{kv("x-overflow", "bar")}},
		{"CQ delivery-limit", router.Classic, amqp10.Map{kv("x-delivery-limit", int64(5))}},
		{"CQ strategy", router.Classic, amqp10.Map{kv("x-dead-letter-exchange", "x"), kv("x-dead-letter-strategy", "at-most-once")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "bad-" + strings.ReplaceAll(tc.name, " ", "-")
			_, _, err := vh.DeclareQueue(router.QueueSpec{Name: name, Type: tc.typ, Durable: true, Arguments: tc.args})
			require.Error(t, err)
			assert.True(t, errors.Is(err, router.ErrPreconditionFailed), "want precondition-failed, got %v", err)
			_, exists := vh.Queue(name)
			assert.False(t, exists)
		})
	}
	t.Run("non-existent DLX is fine", func(t *testing.T) {
		eachType(t, func(t *testing.T, typ router.QueueType) {
			_, created, err := vh.DeclareQueue(router.QueueSpec{Name: "ok-" + string(typ), Type: typ, Durable: true,
				Arguments: dlArgs("no-such-exchange", ptr("k"))})
			require.NoError(t, err)
			assert.True(t, created)
		})
	})
}

// Precedence between a dead-letter policy and a queue argument.
func TestDeadLetterPolicyArgumentPrecedence(t *testing.T) {
	put := func(t *testing.T, b interface{ PutPolicy(router.Policy) error }, pattern string, def amqp10.Map) {
		t.Helper()
		require.NoError(t, b.PutPolicy(router.Policy{Name: "p-" + pattern, Pattern: "^" + pattern + "$", ApplyTo: router.ApplyToQueues, Definition: def}))
	}
	rej := func(t *testing.T, s *amqp.Session, q, bd string) {
		t.Helper()
		publishBodies(t, s, "/queues/"+q, bd)
		r := receiver(t, s, "/queues/"+q, nil)
		m := recv(t, r)
		require.Equal(t, bd, body(m))
		reject(t, r, m)
		cctx, cancel := closeCtx()
		defer cancel()
		require.NoError(t, r.Close(cctx))
	}

	eachType(t, func(t *testing.T, typ router.QueueType) {
		t.Run("policy DLX applies to later deaths", func(t *testing.T) {
			b := startBroker(t, "")
			vh := vhost(t, b)
			declareQueue(t, b, "q", typ, nil)
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			rej(t, s, "q", "before")
			put(t, vh, "q", amqp10.Map{kv("dead-letter-exchange", ""), kv("dead-letter-routing-key", "dlq")})
			rej(t, s, "q", "after")
			dr := settledReceiver(t, s, "dlq")
			d := recvBodies(t, dr, "after")[0]
			assertDeath(t, deathsOf(t, d)[0], "q", "rejected", 1, "", []string{"q"})
			requireNoMessage(t, dr, 200*time.Millisecond)
		})
		for _, order := range []string{"policy first", "queue first"} {
			t.Run("argument beats policy for DLX/DLRK, "+order, func(t *testing.T) {
				b := startBroker(t, "")
				vh := vhost(t, b)
				declareQueue(t, b, "dlqA", router.Classic, nil)
				declareQueue(t, b, "dlqB", router.Classic, nil)
				declareExchange(t, b, "polx", router.ExchangeFanout, nil)
				bind(t, b, "polx", "dlqB", "", nil)
				pol := amqp10.Map{kv("dead-letter-exchange", "polx"), kv("dead-letter-routing-key", "dlqB")}
				if order == "policy first" {
					put(t, vh, "q", pol)
				}
				declareQueue(t, b, "q", typ, dlArgs("", ptr("dlqA")))
				if order == "queue first" {
					put(t, vh, "q", pol)
				}
				s := session(t, dial(t, b, nil))
				rej(t, s, "q", "m")
				recvBodies(t, settledReceiver(t, s, "dlqA"), "m")
				assert.Zero(t, queueLen(t, b, "dlqB"))
			})
		}
		t.Run("message-ttl: lower wins", func(t *testing.T) {
			for _, c := range []struct{ arg, pol int64 }{{60000, 1}, {1, 60000}} {
				b := startBroker(t, "")
				vh := vhost(t, b)
				declareQueue(t, b, "dlq", router.Classic, nil)
				declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-message-ttl", c.arg)))
				put(t, vh, "q", amqp10.Map{kv("message-ttl", c.pol)})
				s := session(t, dial(t, b, nil))
				publishBodies(t, s, "/queues/q", "m")
				d := recv(t, settledReceiver(t, s, "dlq"))
				assertDeath(t, deathsOf(t, d)[0], "q", "expired", 1, "", []string{"q"})
			}
		})
		t.Run("max-length: lower wins", func(t *testing.T) {
			for _, c := range []struct{ arg, pol int64 }{{5, 1}, {1, 5}} {
				b := startBroker(t, "")
				vh := vhost(t, b)
				declareQueue(t, b, "dlq", router.Classic, nil)
				declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-max-length", c.arg)))
				put(t, vh, "q", amqp10.Map{kv("max-length", c.pol)})
				s := session(t, dial(t, b, nil))
				publishBodies(t, s, "/queues/q", "m1", "m2")
				d := recv(t, settledReceiver(t, s, "dlq"))
				assert.Equal(t, "m1", body(d))
				assertDeath(t, deathsOf(t, d)[0], "q", "maxlen", 1, "", []string{"q"})
			}
		})
	})
	t.Run("overflow", func(t *testing.T) {
		// Policy reject-publish vs argument drop-head, max-length 1.
		eachType(t, func(t *testing.T, typ router.QueueType) {
			b := startBroker(t, "")
			vh := vhost(t, b)
			declareQueue(t, b, "q", typ, amqp10.Map{kv("x-max-length", int64(1)), kv("x-overflow", "drop-head")})
			put(t, vh, "q", amqp10.Map{kv("overflow", "reject-publish")})
			s := session(t, dial(t, b, nil))
			snd := sender(t, s, "/queues/q", nil)
			require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("m1")))
			st2 := send(t, snd, msg("m2"))
			st3 := send(t, snd, msg("m3"))
			if typ == router.Quorum {
				// QQ: the policy wins: reject-publish (off by one).
				require.IsType(t, &amqp.StateAccepted{}, st2)
				requireRejectedMaxLen(t, st3, "q")
			} else {
				// CQ: the argument wins: drop-head.
				require.IsType(t, &amqp.StateAccepted{}, st2)
				require.IsType(t, &amqp.StateAccepted{}, st3)
				assert.Equal(t, 1, queueLen(t, b, "q"))
			}
		})
	})
	t.Run("delivery-limit", func(t *testing.T) {
		for _, c := range []struct {
			name     string
			arg, pol int64
			fails    int // failed deliveries that dead-letter
		}{
			{"min", 5, 0, 1},
			{"negative policy: max", 1, -1, 2},
			{"negative argument: max", -1, 1, 2},
		} {
			t.Run(c.name, func(t *testing.T) {
				b := startBroker(t, "")
				vh := vhost(t, b)
				declareQueue(t, b, "dlq", router.Classic, nil)
				declareQueue(t, b, "q", router.Quorum, dlArgs("", ptr("dlq"), kv("x-delivery-limit", c.arg)))
				put(t, vh, "q", amqp10.Map{kv("delivery-limit", c.pol)})
				s := session(t, dial(t, b, nil))
				publishBodies(t, s, "/queues/q", "m")
				r := receiver(t, s, "/queues/q", nil)
				for range c.fails {
					modify(t, r, recv(t, r), true, false, nil)
				}
				d := recv(t, settledReceiver(t, s, "dlq"))
				assertDeath(t, deathsOf(t, d)[0], "q", "delivery_limit", 1, "", []string{"q"})
				assert.Equal(t, uint32(c.fails), d.Header.DeliveryCount)
			})
		}
	})
}

// x-cc validation and routing.
func TestXCCValidationAndRouting(t *testing.T) {
	b := startBroker(t, "")
	for _, q := range []string{"q1", "q2", "qa", "qb"} {
		declareQueue(t, b, q, router.Classic, nil)
	}
	bind(t, b, "amq.direct", "q1", "k1", nil)
	bind(t, b, "amq.direct", "q2", "k2", nil)
	s := session(t, dial(t, b, nil))
	withCC := func(n string, cc any) *amqp.Message {
		m := msg(n)
		m.Annotations = amqp.Annotations{"x-cc": cc}
		return m
	}

	for _, bad := range []struct {
		name string
		cc   any
	}{{"array", []string{"k2"}}, {"list with a symbol", []any{amqp.Symbol("k2")}}} {
		t.Run("bad x-cc "+bad.name+" detaches the link", func(t *testing.T) {
			snd, err := s.NewSender(ctxT(t), "/exchanges/amq.direct/key-1", nil)
			require.NoError(t, err)
			rcpt, err := snd.SendWithReceipt(ctxT(t), withCC("bad", bad.cc), nil)
			if err == nil {
				st, werr := rcpt.Wait(ctxT(t))
				if werr == nil {
					assert.IsType(t, &amqp.StateReleased{}, st)
				}
			}
			var le *amqp.LinkError
			eventually(t, "link detached", func() bool {
				err := snd.Send(ctxT(t), msg("after"), nil)
				return errors.As(err, &le)
			})
			require.NotNil(t, le.RemoteErr)
			assert.Equal(t, amqp.ErrCond("amqp:invalid-field"), le.RemoteErr.Condition)
			assert.True(t, strings.HasPrefix(le.RemoteErr.Description, "bad value for 'x-cc' message-annotation: "), le.RemoteErr.Description)
		})
	}
	t.Run("bad x-cc on the anonymous terminus is rejected, link stays", func(t *testing.T) {
		snd := sender(t, s, "", nil)
		m := withCC("bad", []string{"k2"})
		m.Properties = &amqp.MessageProperties{To: ptr("/exchanges/amq.direct/k1")}
		st := send(t, snd, m)
		rej, ok := st.(*amqp.StateRejected)
		require.True(t, ok, "want rejected, got %T", st)
		require.NotNil(t, rej.Error)
		assert.Equal(t, amqp.ErrCond("amqp:invalid-field"), rej.Error.Condition)
		ok2 := msg("ok")
		ok2.Properties = &amqp.MessageProperties{To: ptr("/queues/qa")}
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, ok2))
		take(t, s, "qa", "ok")
	})
	t.Run("valid list routes with every CC key", func(t *testing.T) {
		publish(t, s, "/exchanges/amq.direct/k1", withCC("a", []any{"k2"}))
		publish(t, s, "/exchanges/amq.direct", withCC("b", []any{"k1"}))
		publish(t, s, "/queues/qa", withCC("c", []any{"qb"}))
		anon := msg("d")
		anon.Annotations = amqp.Annotations{"x-cc": []any{"k2"}}
		anon.Properties = &amqp.MessageProperties{To: ptr("/exchanges/amq.direct/k1")}
		publish(t, s, "", anon)
		recvBodies(t, settledReceiver(t, s, "q1"), "a", "b", "d")
		recvBodies(t, settledReceiver(t, s, "q2"), "a", "d")
		recvBodies(t, settledReceiver(t, s, "qa"), "c")
		recvBodies(t, settledReceiver(t, s, "qb"), "c")
	})
}

// Whole-queue events never dead-letter.
func TestWholeQueueEventsNeverDeadLetter(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		vh := vhost(t, b)
		declareQueue(t, b, "dlq", router.Classic, nil)
		declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq")))
		declareQueue(t, b, "qexp", typ, dlArgs("", ptr("dlq"), kv("x-expires", int64(100))))
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "d1", "d2")
		publishBodies(t, s, "/queues/qexp", "e1")
		n, err := vh.DeleteQueue("q")
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		eventually(t, "qexp expires", func() bool { _, ok := vh.Queue("qexp"); return !ok })
		requireNoMessage(t, settledReceiver(t, s, "dlq"), 300*time.Millisecond)
		assert.Empty(t, b.DeadLetters().QueueStats("/", "q"))
		assert.Empty(t, b.DeadLetters().QueueStats("/", "qexp"))
	})
}
