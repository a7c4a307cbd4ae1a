package e2e

import (
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/router"
)

// holdOne starts a broker with a queue "q" of type typ holding one message
// "m", and returns the consumer that holds it unsettled, its session, and
// the message.
func holdOne(t *testing.T, typ router.QueueType) (*epitaph.Broker, *amqp.Session, *amqp.Receiver, *amqp.Message) {
	t.Helper()
	b := startBroker(t, "")
	declareQueue(t, b, "q", typ, nil)
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/q", "m")
	r := receiver(t, s, "/queues/q", nil)
	return b, s, r, recv(t, r)
}

// The delivery counters RabbitMQ 4.3 keeps when a consumer goes away with
// unsettled messages, and the quorum-queue counter annotations, over real
// connections.

// A detached link's unsettled message counts a failed delivery on a classic
// queue (delivery-count 1) but not on a quorum queue, where only the
// acquired-count grows.
func TestDeliveryCountLinkDetachClassicCountsFailure(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		_, s, r, m := holdOne(t, typ)
		require.True(t, m.Header.FirstAcquirer)
		cctx, cancel := closeCtx()
		defer cancel()
		require.NoError(t, r.Close(cctx))

		r2 := receiver(t, s, "/queues/q", nil)
		m = recv(t, r2)
		require.Equal(t, "m", body(m))
		assert.False(t, m.Header.FirstAcquirer)
		if typ == router.Classic {
			assert.Equal(t, uint32(1), m.Header.DeliveryCount)
			assert.NotContains(t, m.Annotations, "x-acquired-count", "classic queues write no counter annotations")
			assert.NotContains(t, m.Annotations, "x-delivery-count")
		} else {
			assert.Zero(t, m.Header.DeliveryCount)
			assert.Equal(t, int64(1), m.Annotations["x-acquired-count"])
			assert.NotContains(t, m.Annotations, "x-delivery-count")
		}
		accept(t, r2, m)
	})
}

// An AMQP 1.0 end, or a clean close of the connection, with unsettled
// deliveries counts a failed delivery on every queue type: the consumer is
// gone, as when its connection is lost.
func TestDeliveryCountSessionEndAndCloseCountFailure(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", typ, nil)
		c1 := dial(t, b, nil)
		s1 := session(t, c1)
		publishBodies(t, s1, "/queues/q", "m")
		m := recv(t, receiver(t, s1, "/queues/q", nil))
		require.True(t, m.Header.FirstAcquirer)
		cctx, cancel := closeCtx()
		defer cancel()
		require.NoError(t, s1.Close(cctx), "end")

		s2 := session(t, c1)
		m = recv(t, receiver(t, s2, "/queues/q", nil))
		require.Equal(t, "m", body(m))
		assert.Equal(t, uint32(1), m.Header.DeliveryCount, "after end")
		assert.False(t, m.Header.FirstAcquirer)
		if typ == router.Quorum {
			assert.Equal(t, int64(1), m.Annotations["x-acquired-count"])
			assert.Equal(t, int64(1), m.Annotations["x-delivery-count"])
		}
		require.NoError(t, c1.Close(), "close")

		r3 := receiver(t, session(t, dial(t, b, nil)), "/queues/q", nil)
		m = recv(t, r3)
		require.Equal(t, "m", body(m))
		assert.Equal(t, uint32(2), m.Header.DeliveryCount, "after close")
		if typ == router.Quorum {
			assert.Equal(t, int64(2), m.Annotations["x-acquired-count"])
			assert.Equal(t, int64(2), m.Annotations["x-delivery-count"])
		}
		accept(t, r3, m)
	})
}

// A quorum queue's first delivery carries neither x-acquired-count nor
// x-delivery-count; a release adds x-acquired-count only.
func TestDeliveryCountAcquiredCountAbsentOnFirstDelivery(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		_, _, r, m := holdOne(t, typ)
		assert.True(t, m.Header.FirstAcquirer)
		assert.Zero(t, m.Header.DeliveryCount)
		assert.NotContains(t, m.Annotations, "x-acquired-count")
		assert.NotContains(t, m.Annotations, "x-delivery-count")
		require.NoError(t, r.ReleaseMessage(ctxT(t), m))

		m = recv(t, r)
		assert.False(t, m.Header.FirstAcquirer)
		assert.Zero(t, m.Header.DeliveryCount)
		if typ == router.Quorum {
			assert.Equal(t, int64(1), m.Annotations["x-acquired-count"])
		} else {
			assert.NotContains(t, m.Annotations, "x-acquired-count")
		}
		assert.NotContains(t, m.Annotations, "x-delivery-count")
		accept(t, r, m)
	})
}

// A dead-letter copy that enters a quorum queue with delivery-count 2 is
// first delivered with delivery-count 2, x-acquired-count 2,
// x-delivery-count 2 and as redelivered (first-acquirer false; the HTTP
// API's get shows redelivered); released once, its acquired-count starts
// over at 1 while its delivery-count stays.
func TestDeliveryCountDeadLetterCopyIntoQuorumQueue(t *testing.T) {
	eachType(t, func(t *testing.T, typ router.QueueType) {
		b := startBroker(t, "", withHTTP)
		base := apiServer(t, b)
		declareQueue(t, b, "q", typ, dlArgs("", ptr("dlq")))
		declareQueue(t, b, "dlq", router.Quorum, nil)
		s := session(t, dial(t, b, nil))
		publishBodies(t, s, "/queues/q", "m")
		r := receiver(t, s, "/queues/q", nil)
		m := recv(t, r)
		modify(t, r, m, true, false, nil) // delivery-count 1, requeued
		m = recv(t, r)
		require.Equal(t, uint32(1), m.Header.DeliveryCount)
		reject(t, r, m) // delivery-count 2, dead-lettered
		eventually(t, "the copy in dlq", func() bool { return queueLen(t, b, "dlq") == 1 })

		ms := apiJSON[[]map[string]any](t, api(t, base, "POST", "/api/queues/%2f/dlq/get",
			map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}, 200))
		require.Len(t, ms, 1)
		assert.Equal(t, true, ms[0]["redelivered"])
		assert.EqualValues(t, 2, ms[0]["delivery_count"])

		rd := receiver(t, s, "/queues/dlq", nil)
		d := recv(t, rd)
		require.Equal(t, "m", body(d))
		assert.Equal(t, uint32(2), d.Header.DeliveryCount)
		assert.False(t, d.Header.FirstAcquirer)
		assert.Equal(t, int64(2), d.Annotations["x-acquired-count"])
		assert.Equal(t, int64(2), d.Annotations["x-delivery-count"])
		deaths := deathsOf(t, d)
		require.Len(t, deaths, 1)
		assertDeath(t, deaths[0], "q", "rejected", 1, "", []string{"q"})
		assert.Equal(t, "dlq", d.Annotations["x-routing-key"])
		require.NoError(t, rd.ReleaseMessage(ctxT(t), d))

		d = recv(t, rd)
		assert.Equal(t, uint32(2), d.Header.DeliveryCount)
		assert.Equal(t, int64(1), d.Annotations["x-acquired-count"])
		assert.Equal(t, int64(2), d.Annotations["x-delivery-count"])
		accept(t, rd, d)
	})
}
