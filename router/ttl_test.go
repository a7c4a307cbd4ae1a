package router

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

func TestMessageTTLExpiresInOrder(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-message-ttl", int64(30))
	publishN(t, e, "q", 3)
	eventually(t, func() bool { return e.dl.n() == 3 }, 2*time.Second)
	assert.Equal(t, []string{"m1:expired", "m2:expired", "m3:expired"}, e.dl.bodies())
	assert.Zero(t, q.Len())
}

// A ready message is removed within 50 ms of its deadline even when it is
// not at the head of the queue.
func TestExpiryNotAtHead(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			e.publish(t, "", msg("head", "q"))
			const ttl = 40 * time.Millisecond
			start := time.Now()
			e.publish(t, "", ttlMsg("short", uint32(ttl/time.Millisecond), "q"))
			e.publish(t, "", msg("tail", "q"))
			eventually(t, func() bool { return e.dl.n() == 1 }, 2*time.Second)
			e.dl.mu.Lock()
			late := e.dl.at[0].Sub(start) - ttl
			e.dl.mu.Unlock()
			assert.Less(t, late, 50*time.Millisecond, "removed %v after its deadline", late)
			assert.GreaterOrEqual(t, late, time.Duration(0))
			assert.Equal(t, []string{"short:expired"}, e.dl.bodies())
			assert.Equal(t, 2, q.Len())
			_, c := subscribe(t, q, 10)
			assert.Equal(t, []string{"head", "tail"}, c.bodies())
		})
	}
}

func TestEffectiveTTLIsMinimum(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withClock(clock))
	q := e.queue(t, "q", Classic, "x-message-ttl", int64(1000))
	e.publish(t, "", ttlMsg("short", 100, "q"))
	e.publish(t, "", ttlMsg("long", 5000, "q"))
	e.publish(t, "", msg("none", "q"))
	clock.Advance(100 * time.Millisecond)
	assert.Equal(t, 2, q.Len())
	clock.Advance(900 * time.Millisecond)
	assert.Zero(t, q.Len())
	assert.Equal(t, []string{"short:expired", "long:expired", "none:expired"}, e.dl.bodies())
}

func TestExpiryTiesInQueueOrder(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withClock(clock))
	q := e.queue(t, "q", Classic)
	e.publish(t, "", ttlMsg("a", 200, "q"))
	clock.Advance(100 * time.Millisecond)
	e.publish(t, "", ttlMsg("b", 100, "q")) // same deadline as a
	e.publish(t, "", ttlMsg("c", 50, "q"))  // earlier deadline
	clock.Advance(time.Second)
	assert.Zero(t, q.Len())
	assert.Equal(t, []string{"c:expired", "a:expired", "b:expired"}, e.dl.bodies())
}

func TestUnsettledDoNotExpire(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			clock := newClock()
			e := newEnv(t, withClock(clock))
			q := e.queue(t, "q", typ, "x-message-ttl", int64(100))
			publishN(t, e, "q", 2)
			s, c := subscribe(t, q, 2)
			clock.Advance(time.Second)
			assert.Zero(t, q.Len())
			assert.Empty(t, e.dl.all(), "delivered messages do not expire")

			// Requeued messages keep their deadline: expired at once, never redelivered.
			require.NoError(t, s.Settle(c.all()[0].Tag, Settlement{Kind: SettleRelease}))
			assert.Equal(t, []string{"m1:expired"}, e.dl.bodies())
			s.Cancel(CancelDetach)
			assert.Equal(t, []string{"m1:expired", "m2:expired"}, e.dl.bodies())
			assert.Equal(t, 2, c.n())
		})
	}
}

func TestRequeueKeepsDeadline(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withClock(clock))
	q := e.queue(t, "q", Classic, "x-message-ttl", int64(100))
	e.publish(t, "", msg("m1", "q"))
	s, c := subscribe(t, q, 1)
	clock.Advance(60 * time.Millisecond)
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
	assert.Equal(t, 1, q.Len())
	clock.Advance(40 * time.Millisecond)
	assert.Zero(t, q.Len(), "100 ms after publish, not after the requeue")
	assert.Equal(t, []string{"m1:expired"}, e.dl.bodies())
}

func TestZeroTTL(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ, "x-message-ttl", int64(0))
			assert.Equal(t, Accepted, e.publish(t, "", msg("nobody", "q")))
			assert.Equal(t, []string{"nobody:expired"}, e.dl.bodies())
			assert.Zero(t, q.Len())

			s, c := subscribe(t, q, 1)
			e.publish(t, "", msg("taken", "q"))
			assert.Equal(t, []string{"taken"}, c.bodies())
			e.publish(t, "", msg("nocredit", "q"))
			assert.Equal(t, []string{"nobody:expired", "nocredit:expired"}, e.dl.bodies())
			require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleAccept}))

			// Header ttl 0 too.
			e.publish(t, "", ttlMsg("hdr", 0, "q"))
			assert.Len(t, e.dl.all(), 3)
		})
	}
}

func TestQueueExpires(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-expires", int64(40), "x-dead-letter-exchange", "dlx")
	publishN(t, e, "q", 2)
	eventually(t, q.Deleted, 2*time.Second)
	_, ok := e.v.Queue("q")
	assert.False(t, ok)
	assert.Empty(t, e.dl.all(), "queue expiry never dead-letters")
}

func TestQueueExpiresUnusedOnly(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withClock(clock))
	q := e.queue(t, "q", Quorum, "x-expires", int64(100))
	clock.Advance(80 * time.Millisecond)
	_, created, err := e.v.DeclareQueue(QueueSpec{Name: "q", Type: Quorum, Durable: true, Arguments: value.Map{{Key: "x-expires", Value: int64(100)}}})
	require.NoError(t, err)
	require.False(t, created)
	clock.Advance(80 * time.Millisecond)
	q.onTimer()
	require.False(t, q.Deleted(), "the redeclare restarted the clock")

	s, _ := subscribe(t, q, 1)
	clock.Advance(time.Hour)
	q.onTimer()
	require.False(t, q.Deleted(), "consumed queues do not expire")
	e.publish(t, "", msg("m", "q"))

	s.Cancel(CancelDetach)
	clock.Advance(99 * time.Millisecond)
	q.onTimer()
	require.False(t, q.Deleted())
	clock.Advance(time.Millisecond)
	q.onTimer()
	require.True(t, q.Deleted())
}

func TestCloseStopsTimers(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-message-ttl", int64(1))
	e.b.Close()
	e.b.Close()
	e.publish(t, "", msg("m", "q"))
	// The timer is not armed after Close; activity still expires.
	q.mu.Lock()
	armed := q.timerAt != 0
	q.mu.Unlock()
	assert.False(t, armed)
	eventually(t, func() bool { return q.Len() == 0 }, time.Second)
}
