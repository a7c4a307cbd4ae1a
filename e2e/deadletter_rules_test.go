package e2e

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// Dead-lettering rules (RabbitMQ 4.3's annotations, reasons and cycle
// detection) that the acceptance tests of deadletter_scenarios_test.go do
// not reach, plus epitaph's documented additions.

// assertWireDeath checks one decoded x-opt-deaths element with exact AMQP types.
func assertWireDeath(t *testing.T, el any, queue, reason string, count uint64, exchange string, rks ...string) {
	t.Helper()
	m, ok := el.(amqp10.Map)
	require.True(t, ok, "death is %T", el)
	get := func(k string) any {
		v, ok := m.Get(amqp10.Symbol(k))
		assert.True(t, ok, "death without %s", k)
		return v
	}
	assert.Equal(t, queue, get("queue"))
	assert.Equal(t, amqp10.Symbol(reason), get("reason"))
	assert.Equal(t, count, get("count"))
	assert.Equal(t, exchange, get("exchange"))
	elems := make([]any, len(rks))
	for i, k := range rks {
		elems[i] = k
	}
	assert.Equal(t, &amqp10.Array{Type: amqp10.TypeStr32, Elems: elems}, get("routing-keys"))
	ft, ok1 := get("first-time").(amqp10.Timestamp)
	lt, ok2 := get("last-time").(amqp10.Timestamp)
	if assert.True(t, ok1 && ok2, "times must be timestamps") {
		assert.LessOrEqual(t, ft, lt)
		if count == 1 {
			assert.Equal(t, ft, lt)
		}
		assert.InDelta(t, time.Now().UnixMilli(), int64(lt), 5000)
	}
}

// Compaction across three queues, final recency order
// (amqp_client_SUITE:dead_letter_reject): q1 -expired-> q2 -rejected-> q3
// -expired-> q1 ... ends on q2 with [q1 expired 3, q3 expired 2, q2 rejected 2].
func TestDLRuleCompactionThreeQueues(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q1", typ, dlArgs("", ptr("q2"), kv("x-message-ttl", int64(0))))
		declareQueue(t, b, "q2", typ, dlArgs("", ptr("q3")))
		declareQueue(t, b, "q3", typ, dlArgs("", ptr("q1"), kv("x-message-ttl", int64(0))))
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q1", "m")
		r := receiver(t, s, "/queues/q2", &amqp.ReceiverOptions{Credit: -1})
		for i := range 2 {
			require.NoError(t, r.IssueCredit(1))
			m := recv(t, r)
			require.Len(t, deathsOf(t, m), 1+2*i)
			reject(t, r, m)
		}
		cctx, cancel := closeCtx()
		defer cancel()
		require.NoError(t, r.Close(cctx))

		wm, ann := parseWire(t, rawReceive(t, b, "q2"))
		assertWireDeaths(t, wm, false, false, false)
		ds := mustGet(t, ann, "x-opt-deaths").(*amqp10.Array)
		require.Len(t, ds.Elems, 3)
		assertWireDeath(t, ds.Elems[0], "q1", "expired", 3, "", "q1")
		assertWireDeath(t, ds.Elems[1], "q3", "expired", 2, "", "q3")
		assertWireDeath(t, ds.Elems[2], "q2", "rejected", 2, "", "q2")
		assert.Equal(t, "q1", mustGet(t, ann, "x-first-death-queue"))
		assert.Equal(t, "expired", mustGet(t, ann, "x-first-death-reason"))
		assert.Equal(t, "q1", mustGet(t, ann, "x-last-death-queue"))
		assert.Equal(t, "expired", mustGet(t, ann, "x-last-death-reason"))
		assert.Equal(t, uint32(2), wm.Header.DeliveryCount)
		assert.Equal(t, uint64(3), stats(b, "q1", router.ReasonExpired).DeadLettered)
		assert.Equal(t, uint64(2), stats(b, "q3", router.ReasonExpired).DeadLettered)
		assert.Equal(t, uint64(2), stats(b, "q2", router.ReasonRejected).DeadLettered)
	})
}

// Cycles through several queues.
func TestDLRuleCycles(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		t.Run("two queues, automatic reasons only: dropped", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q1", typ, dlArgs("", ptr("q2"), kv("x-message-ttl", int64(0))))
			declareQueue(t, b, "q2", typ, dlArgs("", ptr("q1"), kv("x-message-ttl", int64(0))))
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q1", "m")
			eventually(t, "cycle dropped", func() bool { return stats(b, "q2", router.ReasonExpired).DroppedCycle == 1 })
			assert.Equal(t, uint64(1), stats(b, "q1", router.ReasonExpired).DeadLettered, "q1 saw m once")
			assert.Zero(t, queueLen(t, b, "q1")+queueLen(t, b, "q2"))
		})
		t.Run("three queues, automatic reasons only: dropped", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q1", typ, dlArgs("", ptr("q2"), kv("x-message-ttl", int64(0))))
			declareQueue(t, b, "q2", typ, dlArgs("", ptr("q3"), kv("x-message-ttl", int64(0))))
			declareQueue(t, b, "q3", typ, dlArgs("", ptr("q1"), kv("x-message-ttl", int64(0))))
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q1", "m")
			eventually(t, "cycle dropped", func() bool { return stats(b, "q3", router.ReasonExpired).DroppedCycle == 1 })
			for _, q := range []string{"q1", "q2"} {
				assert.Equal(t, uint64(1), stats(b, q, router.ReasonExpired).DeadLettered, q)
			}
		})
		t.Run("a rejection breaks the cycle", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q1", typ, dlArgs("", ptr("q2")))
			declareQueue(t, b, "q2", typ, dlArgs("", ptr("q1"), kv("x-message-ttl", int64(0))))
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q1", "m")
			r := receiver(t, s, "/queues/q1", nil)
			reject(t, r, recv(t, r))
			m := recv(t, r) // back in q1 through q2
			ds := deathsOf(t, m)
			require.Len(t, ds, 2)
			assertDeath(t, ds[0], "q2", "expired", 1, "", []string{"q2"})
			assertDeath(t, ds[1], "q1", "rejected", 1, "", []string{"q1"})
			accept(t, r, m)
		})
		t.Run("per target: fanout DLX delivers to the non-cycling target only", func(t *testing.T) {
			b := startBroker(t, "")
			declareExchange(t, b, "fx", router.ExchangeFanout, nil)
			declareQueue(t, b, "q1", typ, dlArgs("", ptr("q2"), kv("x-message-ttl", int64(0))))
			declareQueue(t, b, "q2", typ, dlArgs("fx", nil, kv("x-message-ttl", int64(0))))
			declareQueue(t, b, "other", router.Classic, nil)
			bind(t, b, "fx", "q1", "", nil)
			bind(t, b, "fx", "other", "", nil)
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q1", "m")
			d := take(t, s, "other", "m")[0]
			ds := deathsOf(t, d)
			require.Len(t, ds, 2)
			assertDeath(t, ds[0], "q2", "expired", 1, "", []string{"q2"})
			assertDeath(t, ds[1], "q1", "expired", 1, "", []string{"q1"})
			assert.Equal(t, uint64(1), stats(b, "q1", router.ReasonExpired).DeadLettered, "m never re-entered q1")
			assert.Equal(t, uint64(1), stats(b, "q2", router.ReasonExpired).DeadLettered)
			assert.Zero(t, stats(b, "q2", router.ReasonExpired).DroppedCycle, "one target was left")
			assert.Zero(t, queueLen(t, b, "q1"))
		})
		t.Run("per target, after a rejection: both targets", func(t *testing.T) {
			b := startBroker(t, "")
			declareExchange(t, b, "fx", router.ExchangeFanout, nil)
			declareQueue(t, b, "q1", typ, dlArgs("", ptr("q2")))
			declareQueue(t, b, "q2", typ, dlArgs("fx", nil, kv("x-message-ttl", int64(0))))
			declareQueue(t, b, "other", router.Classic, nil)
			bind(t, b, "fx", "q1", "", nil)
			bind(t, b, "fx", "other", "", nil)
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q1", "m")
			r := receiver(t, s, "/queues/q1", nil)
			reject(t, r, recv(t, r))
			take(t, s, "other", "m")
			m := recv(t, r)
			assert.Len(t, deathsOf(t, m), 2)
			accept(t, r, m)
		})
	})
}

// CC keys: the death's routing-keys include x-cc keys; with
// a DLRK the copy routes only on the DLRK but x-cc stays on the message.
func TestDLRuleCCKeys(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		for _, withDLRK := range []bool{false, true} {
			name := "without DLRK"
			if withDLRK {
				name = "with DLRK"
			}
			t.Run(name, func(t *testing.T) {
				b := startBroker(t, "")
				declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
				var dlrk *string
				if withDLRK {
					dlrk = ptr("only")
				}
				declareQueue(t, b, "q", typ, dlArgs("dlx", dlrk))
				bind(t, b, "amq.direct", "q", "k1", nil)
				for _, q := range []string{"dlq1", "dlq2", "dlqonly"} {
					declareQueue(t, b, q, router.Classic, nil)
				}
				bind(t, b, "dlx", "dlq1", "k1", nil)
				bind(t, b, "dlx", "dlq2", "k2", nil)
				bind(t, b, "dlx", "dlqonly", "only", nil)
				s := session(t, dial(t, b, nil))
				m := msg("m")
				m.Annotations = amqp.Annotations{"x-cc": []any{"k2"}}
				publish(t, s, "/exchanges/amq.direct/k1", m)
				r := receiver(t, s, "/queues/q", nil)
				reject(t, r, recv(t, r))

				var got []*amqp.Message
				if withDLRK {
					got = take(t, s, "dlqonly", "m")
					assert.Equal(t, "only", got[0].Annotations["x-routing-key"])
				} else {
					got = append(take(t, s, "dlq1", "m"), take(t, s, "dlq2", "m")...)
					assert.Equal(t, "k1", got[0].Annotations["x-routing-key"])
				}
				for _, d := range got {
					ds := deathsOf(t, d)
					require.Len(t, ds, 1)
					assertDeath(t, ds[0], "q", "rejected", 1, "amq.direct", []string{"k1", "k2"})
					assert.Equal(t, []any{"k2"}, d.Annotations["x-cc"], "x-cc stays on the message")
					assert.Equal(t, "dlx", d.Annotations["x-exchange"])
				}
				if withDLRK {
					assert.Zero(t, queueLen(t, b, "dlq1"))
					assert.Zero(t, queueLen(t, b, "dlq2"))
				} else {
					assert.Zero(t, queueLen(t, b, "dlqonly"))
				}
			})
		}
	})
}

// Headers exchange and alternate exchange as the DLX.
func TestDLRuleHeadersAndAlternateExchange(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		t.Run("headers DLX matches application-properties", func(t *testing.T) {
			b := startBroker(t, "")
			declareExchange(t, b, "hx", router.ExchangeHeaders, nil)
			declareQueue(t, b, "q", typ, dlArgs("hx", ptr("ignored")))
			declareQueue(t, b, "red", router.Classic, nil)
			declareQueue(t, b, "blue", router.Classic, nil)
			bind(t, b, "hx", "red", "", amqp10.Map{kv("x-match", "any"), kv("colour", "red")})
			bind(t, b, "hx", "blue", "", amqp10.Map{kv("x-match", "all"), kv("colour", "blue")})
			s := session(t, dial(t, b, nil))
			for _, c := range []string{"red", "blue"} {
				m := msg(c)
				m.ApplicationProperties = map[string]any{"colour": c}
				publish(t, s, "/queues/q", m)
			}
			r := receiver(t, s, "/queues/q", nil)
			reject(t, r, recv(t, r))
			reject(t, r, recv(t, r))
			d := take(t, s, "red", "red")[0]
			assertDeath(t, deathsOf(t, d)[0], "q", "rejected", 1, "", []string{"q"})
			take(t, s, "blue", "blue")
		})
		t.Run("alternate exchange of the DLX receives unroutable copies", func(t *testing.T) {
			b := startBroker(t, "")
			declareExchange(t, b, "ae", router.ExchangeFanout, nil)
			declareExchange(t, b, "dlx", router.ExchangeDirect, amqp10.Map{kv("alternate-exchange", "ae")})
			declareQueue(t, b, "trash", router.Classic, nil)
			bind(t, b, "ae", "trash", "", nil)
			declareQueue(t, b, "q", typ, dlArgs("dlx", ptr("nobody")))
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q", "m")
			r := receiver(t, s, "/queues/q", nil)
			reject(t, r, recv(t, r))
			d := take(t, s, "trash", "m")[0]
			assertDeath(t, deathsOf(t, d)[0], "q", "rejected", 1, "", []string{"q"})
			assert.Equal(t, "dlx", d.Annotations["x-exchange"])
			assert.Equal(t, "nobody", d.Annotations["x-routing-key"])
			st := stats(b, "q", router.ReasonRejected)
			assert.Equal(t, uint64(1), st.DeadLettered)
			assert.Zero(t, st.DroppedNoRoute)
		})
	})
}

// Ordering: settlement order for rejections; FIFO for expiry and drop-head.
func TestDLRuleOrder(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		t.Run("rejections in settlement order", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq")))
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q", "1", "2", "3", "4", "5")
			r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 5})
			ms := map[string]*amqp.Message{}
			for range 5 {
				m := recv(t, r)
				ms[body(m)] = m
			}
			for _, n := range []string{"2", "3", "4", "1", "5"} {
				reject(t, r, ms[n])
			}
			take(t, s, "dlq", "2", "3", "4", "1", "5")
		})
		t.Run("expiry in FIFO order", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-message-ttl", int64(50))))
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q", "1", "2", "3", "4", "5")
			take(t, s, "dlq", "1", "2", "3", "4", "5")
		})
		t.Run("drop-head in FIFO order", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-max-length", int64(1))))
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q", "1", "2", "3", "4", "5")
			take(t, s, "dlq", "1", "2", "3", "4")
			take(t, s, "q", "5")
		})
	})
}

// epitaph's addition: delivered unsettled messages do not expire; a released
// message keeps its original expiry.
func TestDLRuleRequeueAndExpiry(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-message-ttl", int64(1000))))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m")
		published := time.Now()
		r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
		require.NoError(t, r.IssueCredit(1))
		m := recv(t, r)

		// Hold m unsettled past its deadline (this wait is the scenario).
		<-time.After(time.Until(published.Add(1300 * time.Millisecond)))
		assert.Empty(t, b.DeadLetters().QueueStats("/", "q"), "a delivered unsettled message must not expire")
		assert.Equal(t, 1, unacked(t, b, "q"))

		released := time.Now()
		require.NoError(t, r.ReleaseMessage(ctxT(t), m))
		d := take(t, s, "dlq", "m")[0]
		// The original deadline has passed: it dies at once, not 1 s after the release.
		assert.Less(t, time.Since(released), 700*time.Millisecond, "released message got a fresh TTL")
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "q", "expired", 1, "", []string{"q"})
		assert.Zero(t, d.Header.DeliveryCount, "released is not a failed delivery")
	})
}

// A republished dead-lettered message starts a fresh history; a
// publisher-supplied x-opt-deaths passes through untouched.
func TestDLRuleRepublishAndPassThrough(t *testing.T) {
	t.Run("republish starts a fresh history", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", router.Classic, dlArgs("", ptr("dlq"), kv("x-message-ttl", int64(0))))
		declareQueue(t, b, "dlq", router.Classic, nil)
		declareQueue(t, b, "q2", router.Quorum, dlArgs("", ptr("dlq2")))
		declareQueue(t, b, "dlq2", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m")
		d := take(t, s, "dlq", "m")[0]
		require.Len(t, deathsOf(t, d), 1)

		re := msg("m")
		re.Annotations = amqp.Annotations{}
		for k, v := range d.Annotations {
			if k != "x-exchange" && k != "x-routing-key" {
				re.Annotations[k] = v
			}
		}
		publish(t, s, "/queues/q2", re)
		r := receiver(t, s, "/queues/q2", nil)
		got := recv(t, r)
		assert.Len(t, deathsOf(t, got), 1, "never dead-lettered here: passed through")
		reject(t, r, got)
		d2 := take(t, s, "dlq2", "m")[0]
		ds := deathsOf(t, d2)
		require.Len(t, ds, 1, "fresh history")
		assertDeath(t, ds[0], "q2", "rejected", 1, "", []string{"q2"})
		assertSix(t, d2, "q2", "rejected", "", "q2", "rejected", "")
	})
	t.Run("publisher-supplied x-opt-deaths untouched", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", router.Classic, dlArgs("", ptr("dlq")))
		fake := &amqp10.Array{Type: amqp10.TypeMap32, Elems: []any{amqp10.Map{
			{Key: amqp10.Symbol("count"), Value: uint64(7)}, // publisher's own order and content
			{Key: amqp10.Symbol("queue"), Value: "elsewhere"},
			{Key: amqp10.Symbol("reason"), Value: amqp10.Symbol("expired")},
		}}}
		payload, err := amqp10.AppendMessageAnnotations(nil, amqp10.Map{
			{Key: amqp10.Symbol("x-opt-deaths"), Value: fake},
			{Key: amqp10.Symbol("x-first-death-queue"), Value: amqp10.Symbol("fake")},
		})
		require.NoError(t, err)
		payload = amqp10.AppendData(payload, []byte("m"))
		sent, err := amqp10.ParseMessage(payload)
		require.NoError(t, err)
		sentDeaths, ok := rawAnnotation(t, sent, "x-opt-deaths")
		require.True(t, ok)

		st := rawSend(t, b, "/queues/q", payload)
		require.Equal(t, amqp10.StateAccepted, st.Kind)
		wm, ann := parseWire(t, rawReceive(t, b, "q"))
		gotDeaths, ok := rawAnnotation(t, wm, "x-opt-deaths")
		require.True(t, ok)
		assert.Equal(t, sentDeaths, gotDeaths, "x-opt-deaths must be forwarded byte for byte")
		assert.Equal(t, amqp10.Symbol("fake"), mustGet(t, ann, "x-first-death-queue"))
		assert.Empty(t, b.DeadLetters().QueueStats("/", "q"))
	})
}

// epitaph addition: x-last-death-error-condition/-description.
func TestDLRuleLastDeathError(t *testing.T) {
	run := func(t *testing.T, strict bool) {
		b := startBroker(t, "", func(o *epitaph.Options) { o.StrictParity = strict })
		declareQueue(t, b, "q1", router.Quorum, dlArgs("", ptr("q2")))
		declareQueue(t, b, "q2", router.Classic, dlArgs("", ptr("q3")))
		declareQueue(t, b, "q3", router.Classic, dlArgs("", ptr("q4"), kv("x-message-ttl", int64(0))))
		declareQueue(t, b, "q4", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q1", "m", "w")
		r1 := receiver(t, s, "/queues/q1", nil)
		for range 2 {
			m := recv(t, r1)
			require.NoError(t, r1.RejectMessage(ctxT(t), m, &amqp.Error{Condition: "app:invalid", Description: "bad order"}))
		}

		// [wire] the first copy raw.
		eventually(t, "both in q2", func() bool { return queueLen(t, b, "q2") == 2 })
		wm, ann := parseWire(t, rawReceive(t, b, "q2"))
		_, hasCond := ann.Get(amqp10.Symbol("x-last-death-error-condition"))
		_, hasDesc := ann.Get(amqp10.Symbol("x-last-death-error-description"))
		if strict {
			assert.False(t, hasCond || hasDesc, "StrictParity: no x-last-death-error-*")
		} else {
			assert.Equal(t, "app:invalid", mustGet(t, ann, "x-last-death-error-condition"))
			assert.Equal(t, "bad order", mustGet(t, ann, "x-last-death-error-description"))
			raw, _ := rawAnnotation(t, wm, "x-last-death-error-condition")
			assert.Equal(t, amqp10.TypeStr8, raw[0], "a string, not a symbol")
		}

		// A later death without an error removes them: reject w in q2
		// without error, then it expires through q3 into q4.
		r2 := receiver(t, s, "/queues/q2", nil)
		w := recv(t, r2)
		require.Equal(t, "w", body(w))
		if !strict {
			assert.Equal(t, "app:invalid", w.Annotations["x-last-death-error-condition"])
		}
		reject(t, r2, w)
		d := take(t, s, "q4", "w")[0]
		assert.NotContains(t, d.Annotations, "x-last-death-error-condition")
		assert.NotContains(t, d.Annotations, "x-last-death-error-description")
		assert.Len(t, deathsOf(t, d), 3)
		assertSix(t, d, "q1", "rejected", "", "q3", "expired", "")
	}
	t.Run("default", func(t *testing.T) { run(t, false) })
	t.Run("StrictParity", func(t *testing.T) { run(t, true) })
}

// The bare message (properties, application-properties, body) and
// the footer are forwarded byte for byte; other MAs are kept; header TTL is
// removed and recorded.
func TestDLRuleBareMessageByteIdentical(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-message-ttl", int64(0))))
		declareQueue(t, b, "dlq", router.Classic, nil)

		p := amqp10.AppendHeader(nil, &amqp10.Header{Durable: true, Priority: 7, TTL: 60000, HasTTL: true})
		p, err := amqp10.AppendMessageAnnotations(p, amqp10.Map{{Key: amqp10.Symbol("x-opt-foo"), Value: "bar"}})
		require.NoError(t, err)
		subj, to, ct := "subject", "/queues/q", amqp10.Symbol("text/plain")
		ts := amqp10.Timestamp(1700000000000)
		p, err = amqp10.AppendProperties(p, &amqp10.Properties{MessageID: "id-1", To: &to, Subject: &subj,
			ContentType: &ct, CreationTime: &ts, CorrelationID: uint64(42)})
		require.NoError(t, err)
		p, err = amqp10.AppendApplicationProperties(p, amqp10.Map{{Key: "k", Value: int32(7)}, {Key: "s", Value: "v"}})
		require.NoError(t, err)
		p = amqp10.AppendData(p, []byte("part one"))
		p = amqp10.AppendData(p, []byte("part two"))
		p = append(p, 0x00, 0x53, 0x78)
		p, err = amqp10.AppendValue(p, amqp10.Map{{Key: amqp10.Symbol("x-opt-sig"), Value: "abc"}})
		require.NoError(t, err)
		sent, err := amqp10.ParseMessage(p)
		require.NoError(t, err)

		require.Equal(t, amqp10.StateAccepted, rawSend(t, b, "/queues/q", p).Kind)
		wm, ann := parseWire(t, rawReceive(t, b, "dlq"))
		assert.True(t, bytes.Equal(sent.Bare(), wm.Bare()), "bare message changed:\n sent %x\n got  %x", sent.Bare(), wm.Bare())
		assert.True(t, bytes.Equal(sent.Footer(), wm.Footer()), "footer changed")
		assert.Equal(t, "bar", mustGet(t, ann, "x-opt-foo"))
		assert.False(t, wm.Header.HasTTL, "header ttl removed")
		assert.True(t, wm.Header.Durable)
		assert.Equal(t, uint8(7), wm.Header.Priority)
		ds := mustGet(t, ann, "x-opt-deaths").(*amqp10.Array)
		require.Len(t, ds.Elems, 1)
		ttl, _ := ds.Elems[0].(amqp10.Map).Get(amqp10.Symbol("ttl"))
		assert.Equal(t, uint32(60000), ttl, "the message's own TTL is recorded")
		assertWireDeaths(t, wm, true)
	})
}

// The message's own TTL is recorded for any reason; the queue's
// x-message-ttl never is.
func TestDLRuleTTLRecordedForAnyReason(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "qrej", typ, dlArgs("", ptr("dlq"), kv("x-message-ttl", int64(60000))))
		declareQueue(t, b, "qmax", typ, dlArgs("", ptr("dlq"), kv("x-max-length", int64(1))))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		withTTL := func(n string) *amqp.Message {
			m := msg(n)
			// Priority 4, the default: a go-amqp header otherwise says 0,
			// which a quorum queue (32 levels, as RabbitMQ 4.3's) delivers
			// and drops after the messages without a header.
			m.Header = &amqp.MessageHeader{TTL: 30 * time.Second, Priority: 4}
			return m
		}
		publish(t, s, "/queues/qrej", withTTL("rejected-ttl"), msg("rejected-queue-ttl"))
		r := receiver(t, s, "/queues/qrej", nil)
		reject(t, r, recv(t, r))
		reject(t, r, recv(t, r))
		publish(t, s, "/queues/qmax", withTTL("maxlen-ttl"), msg("last"))

		got := take(t, s, "dlq", "rejected-ttl", "rejected-queue-ttl", "maxlen-ttl")
		assertDeath(t, deathsOf(t, got[0])[0], "qrej", "rejected", 1, "", []string{"qrej"}, 30000)
		assertDeath(t, deathsOf(t, got[1])[0], "qrej", "rejected", 1, "", []string{"qrej"})
		assertDeath(t, deathsOf(t, got[2])[0], "qmax", "maxlen", 1, "", []string{"qmax"}, 30000)
		for _, d := range got {
			assert.Zero(t, d.Header.TTL, "%s: header ttl removed", body(d))
		}
	})
}

// epitaph: a ready message expires within 50 ms of its deadline even when
// it is not at the head; expired messages dead-letter in deadline order.
func TestDLRuleExpiryPrecisionAndDeadlineOrder(t *testing.T) {
	ttlMsg := func(n string, ttl time.Duration) *amqp.Message {
		m := msg(n)
		m.Header = &amqp.MessageHeader{TTL: ttl}
		return m
	}
	eachType(t, func(t *testing.T, typ router.QueueType) {
		t.Run("short TTL behind a long TTL", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq")))
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publish(t, s, "/queues/q", ttlMsg("head", 10*time.Second))
			start := time.Now()
			publish(t, s, "/queues/q", ttlMsg("short", 100*time.Millisecond))
			take(t, s, "dlq", "short")
			assert.Less(t, time.Since(start), 3*time.Second, "the short-TTL message waited for the head")
			assert.Equal(t, 1, queueLen(t, b, "q"))
		})
		t.Run("deadline order", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq")))
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publish(t, s, "/queues/q", ttlMsg("a", 900*time.Millisecond), ttlMsg("b", 500*time.Millisecond),
				ttlMsg("c", 500*time.Millisecond), ttlMsg("d", 100*time.Millisecond))
			take(t, s, "dlq", "d", "b", "c", "a")
		})
		t.Run("queue TTL ties keep queue order", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-message-ttl", int64(200))))
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publish(t, s, "/queues/q", msg("1"), ttlMsg("2", 50*time.Millisecond), msg("3"))
			take(t, s, "dlq", "2", "1", "3")
		})
	})
}

// Delivery count and requeue interplay: how the delivery count, requeues
// and the delivery limit act together.
func TestDLRuleRequeueInterplay(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		t.Run("release order: CQ original position, QQ returns queue", func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, nil)
			s := session(t, dial(t, b, nil))
			publishBodies(t, s, "/queues/q", "m1", "m2", "m3")
			r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
			require.NoError(t, r.IssueCredit(2))
			m1, m2 := recv(t, r), recv(t, r)
			require.Equal(t, "m1", body(m1))
			require.NoError(t, r.ReleaseMessage(ctxT(t), m2))
			require.NoError(t, r.ReleaseMessage(ctxT(t), m1))
			cctx, cancel := closeCtx()
			defer cancel()
			require.NoError(t, r.Close(cctx))
			if typ == router.Classic {
				take(t, s, "q", "m1", "m2", "m3")
			} else {
				take(t, s, "q", "m2", "m1", "m3")
			}
		})
		t.Run("delivery-count and acquired-count", func(t *testing.T) {
			_, _, r, m := holdOne(t, typ)
			require.NoError(t, r.ReleaseMessage(ctxT(t), m)) // acquired +1
			m = recv(t, r)
			assert.Zero(t, m.Header.DeliveryCount)
			modify(t, r, m, true, false, nil) // both +1
			m = recv(t, r)
			assert.Equal(t, uint32(1), m.Header.DeliveryCount)
			modify(t, r, m, false, false, nil) // acquired +1
			m = recv(t, r)
			assert.Equal(t, uint32(1), m.Header.DeliveryCount)
			assert.False(t, m.Header.FirstAcquirer)
			if typ == router.Quorum {
				assert.Equal(t, int64(3), m.Annotations["x-acquired-count"])
				assert.Equal(t, int64(1), m.Annotations["x-delivery-count"])
			}
			accept(t, r, m)
		})
		t.Run("link detach is a failed delivery on a classic queue only", func(t *testing.T) {
			_, s, r, _ := holdOne(t, typ)
			cctx, cancel := closeCtx()
			defer cancel()
			require.NoError(t, r.Close(cctx))
			m := take(t, s, "q", "m")[0]
			if typ == router.Classic {
				assert.Equal(t, uint32(1), m.Header.DeliveryCount)
			} else {
				assert.Zero(t, m.Header.DeliveryCount)
			}
			assert.False(t, m.Header.FirstAcquirer)
		})
	})
	t.Run("CQ: a message requeued to the head can be dropped (maxlen)", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", router.Classic, dlArgs("", ptr("dlq"), kv("x-max-length", int64(1))))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1")
		r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
		require.NoError(t, r.IssueCredit(1))
		m1 := recv(t, r)
		publishBodies(t, s, "/queues/q", "m2") // unacked m1 does not count
		assert.Empty(t, b.DeadLetters().QueueStats("/", "q"))
		require.NoError(t, r.ReleaseMessage(ctxT(t), m1))
		d := take(t, s, "dlq", "m1")[0]
		assertDeath(t, deathsOf(t, d)[0], "q", "maxlen", 1, "", []string{"q"})
		assert.Equal(t, 1, queueLen(t, b, "q"))
	})
	t.Run("QQ: drop-head drops returns first", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", router.Quorum, dlArgs("", ptr("dlq"), kv("x-max-length", int64(1))))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m1")
		r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
		require.NoError(t, r.IssueCredit(1))
		m1 := recv(t, r)
		publishBodies(t, s, "/queues/q", "m2")
		require.NoError(t, r.ReleaseMessage(ctxT(t), m1)) // m1 joins the returns
		publishBodies(t, s, "/queues/q", "m3")
		take(t, s, "dlq", "m1", "m2")
		take(t, s, "q", "m3")
	})
}

// Client-supplied x-exchange / x-routing-key are replaced on the copy.
func TestDLRuleClientExchangeAnnotationsReplaced(t *testing.T) {
	b := startBroker(t, "")
	declareExchange(t, b, "dlx", router.ExchangeFanout, nil)
	declareQueue(t, b, "q", router.Classic, dlArgs("dlx", ptr("rk"), kv("x-message-ttl", int64(0))))
	declareQueue(t, b, "dlq", router.Classic, nil)
	bind(t, b, "dlx", "dlq", "", nil)
	s := session(t, dial(t, b, nil))
	m := msg("m")
	m.Annotations = amqp.Annotations{"x-exchange": "fake-x", "x-routing-key": "fake-rk", "x-opt-keep": "kept"}
	publish(t, s, "/queues/q", m)
	d := take(t, s, "dlq", "m")[0]
	assert.Equal(t, "dlx", d.Annotations["x-exchange"])
	assert.Equal(t, "rk", d.Annotations["x-routing-key"])
	assert.Equal(t, "kept", d.Annotations["x-opt-keep"])
}

// QQ modified annotations are merged before dead-lettering and
// a headers DLX (any-with-x) can route on them; a CQ ignores them.
func TestDLRuleModifiedAnnotationsRouteHeaders(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareExchange(t, b, "hx", router.ExchangeHeaders, amqp10.Map{kv("alternate-exchange", "trash-x")})
		declareExchange(t, b, "trash-x", router.ExchangeFanout, nil)
		declareQueue(t, b, "q", typ, dlArgs("hx", nil))
		declareQueue(t, b, "routed", router.Classic, nil)
		declareQueue(t, b, "trash", router.Classic, nil)
		bind(t, b, "hx", "routed", "", amqp10.Map{kv("x-match", "any-with-x"), kv("x-opt-route", "yes")})
		bind(t, b, "trash-x", "trash", "", nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m")
		r := receiver(t, s, "/queues/q", nil)
		modify(t, r, recv(t, r), true, true, amqp.Annotations{"x-opt-route": "yes"})
		if typ == router.Quorum {
			d := take(t, s, "routed", "m")[0]
			assert.Equal(t, "yes", d.Annotations["x-opt-route"])
			assertDeath(t, deathsOf(t, d)[0], "q", "rejected", 1, "", []string{"q"})
			assert.Equal(t, uint32(1), d.Header.DeliveryCount)
		} else {
			d := take(t, s, "trash", "m")[0]
			assert.NotContains(t, d.Annotations, "x-opt-route")
			assert.Equal(t, uint32(1), d.Header.DeliveryCount)
		}
	})
}

// CQ message-ttl 0 with a waiting consumer delivers instead of
// dead-lettering.
func TestDLRuleCQTTLZeroWithConsumer(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Classic, dlArgs("", ptr("dlq"), kv("x-message-ttl", int64(0))))
	declareQueue(t, b, "dlq", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	r := receiver(t, s, "/queues/q", nil)
	// TTL 0 delivers only to a consumer that can take the message now, so
	// wait for the receiver's credit, not just its attach: go-amqp sends its
	// first flow after the attach returns.
	eventually(t, "consumer has credit", func() bool {
		q, _ := vhost(t, b).Queue("q")
		return q.Info().ConsumerCredit > 0
	})
	publishBodies(t, s, "/queues/q", "m")
	m := recv(t, r)
	assert.Equal(t, "m", body(m))
	assert.NotContains(t, m.Annotations, "x-opt-deaths")
	accept(t, r, m)
	assert.Empty(t, b.DeadLetters().QueueStats("/", "q"))
}

// Max-length-bytes drop-head dead-letters with maxlen.
func TestDLRuleMaxLengthBytes(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq"), kv("x-max-length-bytes", int64(1000))))
		declareQueue(t, b, "dlq", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		big := func(n string) *amqp.Message { return msg(n + string(bytes.Repeat([]byte("x"), 600))) }
		publish(t, s, "/queues/q", big("1"), big("2"))
		d := recv(t, settledReceiver(t, s, "dlq"))
		assert.Equal(t, byte('1'), body(d)[0])
		assertDeath(t, deathsOf(t, d)[0], "q", "maxlen", 1, "", []string{"q"})
		assert.Equal(t, 1, queueLen(t, b, "q"))
	})
}

// An explicit empty DLRK is a routing key, not "unset".
func TestDLRuleEmptyDLRK(t *testing.T) {
	b := startBroker(t, "")
	declareExchange(t, b, "dx", router.ExchangeDirect, nil)
	declareQueue(t, b, "q", router.Classic, dlArgs("dx", ptr("")))
	declareQueue(t, b, "by-empty", router.Classic, nil)
	declareQueue(t, b, "by-name", router.Classic, nil)
	bind(t, b, "dx", "by-empty", "", nil)
	bind(t, b, "dx", "by-name", "q", nil)
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	reject(t, r, recv(t, r))
	d := take(t, s, "by-empty", "m")[0]
	assert.Equal(t, "", d.Annotations["x-routing-key"])
	assertDeath(t, deathsOf(t, d)[0], "q", "rejected", 1, "", []string{"q"})
	assert.Zero(t, queueLen(t, b, "by-name"))
}

// A DLRK that comes only from a policy, with no DLX, is ignored.
func TestDLRulePolicyDLRKWithoutDLX(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, nil)
		declareQueue(t, b, "dlq", router.Classic, nil)
		require.NoError(t, vhost(t, b).PutPolicy(router.Policy{Name: "rk-only", Pattern: "^q$", ApplyTo: router.ApplyToQueues,
			Definition: amqp10.Map{kv("dead-letter-routing-key", "dlq")}}))
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m")
		r := receiver(t, s, "/queues/q", nil)
		reject(t, r, recv(t, r))
		eventually(t, "dropped: no DLX", func() bool { return stats(b, "q", router.ReasonRejected).DroppedNoDLX == 1 })
		assert.Zero(t, queueLen(t, b, "dlq"))
	})
}

// A modified outcome with a reserved (non-x-) annotation key must not
// crash the session with internal-error (RabbitMQ does; the spec says answer
// invalid-field or ignore the key).
func TestDLRuleModifiedReservedAnnotationKey(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Quorum, nil)
	c := dial(t, b, nil)
	s := session(t, c)
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	m := recv(t, r)
	err := r.ModifyMessage(ctxT(t), m, &amqp.ModifyMessageOptions{DeliveryFailed: true,
		Annotations: amqp.Annotations{"reserved-key": "v"}})
	if err == nil {
		// The error, if any, may come asynchronously (detach/end).
		var m2 *amqp.Message
		if m2, err = r.Receive(ctxT(t), nil); err == nil {
			// Ignored: the message comes back without the key.
			assert.NotContains(t, m2.Annotations, "reserved-key")
			accept(t, r, m2)
			return
		}
	}
	var le *amqp.LinkError
	var se *amqp.SessionError
	var ce *amqp.ConnError
	var ae *amqp.Error
	var cond amqp.ErrCond
	switch {
	case errors.As(err, &le) && le.RemoteErr != nil:
		cond = le.RemoteErr.Condition
	case errors.As(err, &se) && se.RemoteErr != nil:
		cond = se.RemoteErr.Condition
	case errors.As(err, &ce) && ce.RemoteErr != nil:
		cond = ce.RemoteErr.Condition
	case errors.As(err, &ae):
		cond = ae.Condition
	default:
		t.Fatalf("unexpected error %T: %v", err, err)
	}
	assert.Equal(t, amqp.ErrCond("amqp:invalid-field"), cond)
	eventually(t, "m requeued, not lost", func() bool { return queueLen(t, b, "q") == 1 })
}

// Cycle detection — a loop through three queues that includes a rejection
// never counts as a cycle, and compaction keeps the recency order.
func TestDLRuleRejectLoopThreeQueues(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q1", typ, dlArgs("", ptr("q2")))
		declareQueue(t, b, "q2", typ, dlArgs("", ptr("q3"), kv("x-message-ttl", int64(0))))
		declareQueue(t, b, "q3", typ, dlArgs("", ptr("q1"), kv("x-message-ttl", int64(0))))
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q1", "m")
		r := receiver(t, s, "/queues/q1", nil)
		reject(t, r, recv(t, r))
		m := recv(t, r)
		ds := deathsOf(t, m)
		require.Len(t, ds, 3)
		assertDeath(t, ds[0], "q3", "expired", 1, "", []string{"q3"})
		assertDeath(t, ds[1], "q2", "expired", 1, "", []string{"q2"})
		assertDeath(t, ds[2], "q1", "rejected", 1, "", []string{"q1"})
		reject(t, r, m)
		m = recv(t, r)
		ds = deathsOf(t, m)
		require.Len(t, ds, 3)
		assertDeath(t, ds[0], "q3", "expired", 2, "", []string{"q3"})
		assertDeath(t, ds[1], "q2", "expired", 2, "", []string{"q2"})
		assertDeath(t, ds[2], "q1", "rejected", 2, "", []string{"q1"})
		assertSix(t, m, "q1", "rejected", "", "q3", "expired", "")
		assert.Equal(t, uint32(2), m.Header.DeliveryCount)
		accept(t, r, m)
		for _, q := range []string{"q1", "q2", "q3"} {
			assert.Zero(t, stats(b, q, router.ReasonExpired).DroppedCycle, q)
		}
	})
}

// Without a DLRK an expired copy routes on all original keys
// (primary + x-cc) through the default exchange: the source queue is a
// cycle and is skipped, the CC queue gets the copy.
func TestDLRuleCCSelfCyclePerTarget(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, dlArgs("", nil, kv("x-message-ttl", int64(0))))
		declareQueue(t, b, "cc", router.Classic, nil)
		s := session(t, dial(t, b, nil))
		m := msg("m")
		m.Annotations = amqp.Annotations{"x-cc": []any{"cc"}}
		publish(t, s, "/queues/q", m) // delivered to q and, via CC, to cc
		// cc gets the published copy and the dead-lettered copy of q's
		// message, in either order.
		got := take(t, s, "cc", "m", "m")
		var d *amqp.Message
		for _, g := range got {
			if _, ok := g.Annotations["x-opt-deaths"]; ok {
				require.Nil(t, d, "two dead-lettered copies")
				d = g
			}
		}
		require.NotNil(t, d, "no dead-lettered copy in cc: %v / %v", got[0].Annotations, got[1].Annotations)
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "q", "expired", 1, "", []string{"q", "cc"})
		assert.Equal(t, uint64(1), stats(b, "q", router.ReasonExpired).DeadLettered)
		assert.Zero(t, stats(b, "q", router.ReasonExpired).DroppedCycle)
		assert.Zero(t, queueLen(t, b, "q"))
	})
}
