package router

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// activityConsumer is a fakeConsumer that records ActiveChanged calls.
type activityConsumer struct {
	fakeConsumer
	amu    sync.Mutex
	states []bool
}

func (c *activityConsumer) ActiveChanged(active bool) {
	c.amu.Lock()
	defer c.amu.Unlock()
	c.states = append(c.states, active)
}

func (c *activityConsumer) reported() []bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	return append([]bool(nil), c.states...)
}

func subscribeWith(t *testing.T, q *Queue, priority int64, credit uint32) (*Subscription, *activityConsumer) {
	t.Helper()
	c := &activityConsumer{}
	s, err := q.Subscribe(c, ConsumerOptions{Priority: priority})
	require.NoError(t, err)
	if credit > 0 {
		s.Flow(0, credit, false)
	}
	return s, c
}

func publishFrom(t *testing.T, e *env, queue string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		require.Equal(t, Accepted, e.publish(t, "", msg(fmt.Sprintf("m%d", i), queue)))
	}
}

func settleAll(t *testing.T, s *Subscription, c *activityConsumer) {
	t.Helper()
	for _, d := range c.all() {
		require.NoError(t, s.Settle(d.Tag, Settlement{Kind: SettleAccept}))
	}
}

// Higher-priority consumers get messages while they have credit; equal
// priorities take turns; lower ones get what the higher ones cannot take.
func TestConsumerPriorities(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			_, low := subscribeWith(t, q, 0, 100)
			_, hiA := subscribeWith(t, q, 5, 2)
			_, hiB := subscribeWith(t, q, 5, 2)
			_, neg := subscribeWith(t, q, -3, 100)
			publishFrom(t, e, "q", 0, 4)
			assert.Equal(t, []string{"m0", "m2"}, bodiesOfConsumer(hiA))
			assert.Equal(t, []string{"m1", "m3"}, bodiesOfConsumer(hiB))
			assert.Zero(t, low.n())
			// Out of credit at priority 5: priority 0 takes the rest, -3 nothing.
			publishFrom(t, e, "q", 4, 3)
			assert.Equal(t, []string{"m4", "m5", "m6"}, bodiesOfConsumer(low))
			assert.Zero(t, neg.n())
			assert.Equal(t, int64(197), q.Info().ConsumerCredit, "credit left: 97 (priority 0) + 100 (priority -3)")
		})
	}
}

func bodiesOfConsumer(c *activityConsumer) []string { return c.bodies() }

// A consumer attached later with a higher priority takes over the stream
// at once; the round robin among equals is kept across attaches.
func TestConsumerPriorityLateAttach(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	_, a := subscribeWith(t, q, 0, 100)
	_, b := subscribeWith(t, q, 0, 100)
	publishFrom(t, e, "q", 0, 3)
	assert.Equal(t, []string{"m0", "m2"}, a.bodies())
	assert.Equal(t, []string{"m1"}, b.bodies())
	_, hi := subscribeWith(t, q, 1, 100)
	publishFrom(t, e, "q", 3, 2)
	assert.Equal(t, []string{"m3", "m4"}, hi.bodies())
	// Once it is out of credit the round robin among equals resumes where
	// it was.
	_, c := subscribeWith(t, q, 0, 100)
	hiSub := q.subsForTest(hi)
	hiSub.Flow(0, 2, false) // credit used up: 2 delivered
	publishFrom(t, e, "q", 5, 3)
	assert.Equal(t, []string{"m0", "m2", "m6"}, a.bodies())
	assert.Equal(t, []string{"m1", "m5"}, b.bodies())
	assert.Equal(t, []string{"m7"}, c.bodies())
}

func TestConsumerPriorityConversion(t *testing.T) {
	for _, v := range []any{int32(7), int64(-2), uint8(3), int(9), uint64(1 << 40)} {
		_, err := ConsumerPriority("rabbitmq:priority", v)
		assert.NoError(t, err, "%T", v)
	}
	n, _ := ConsumerPriority("rabbitmq:priority", int32(-5))
	assert.Equal(t, int64(-5), n)
	for _, v := range []any{"10", true, 1.5, uint64(1 << 63), nil} {
		_, err := ConsumerPriority("rabbitmq:priority", v)
		require.ErrorIs(t, err, ErrInvalidArgument, "%T %v", v, v)
		assert.Contains(t, err.Error(), "rabbitmq:priority")
	}
}

// Single active consumer on a classic queue: the first consumer gets
// everything; when it goes, its unsettled messages and the rest go to the
// next in priority and attach order. A classic queue reports no activity
// (RabbitMQ 4.3's classic queues send no rabbitmq:active) and does not
// let a higher priority take over from the active consumer.
func TestSingleActiveConsumerClassic(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-single-active-consumer", true)
	require.True(t, q.SingleActiveConsumer())
	s1, c1 := subscribeWith(t, q, 0, 10)
	s2, c2 := subscribeWith(t, q, 0, 10)
	_, c3 := subscribeWith(t, q, 0, 10)
	publishFrom(t, e, "q", 0, 3)
	assert.Equal(t, []string{"m0", "m1", "m2"}, c1.bodies())
	assert.Zero(t, c2.n()+c3.n())
	assert.Equal(t, int64(7), q.Info().ConsumerCredit, "only the active consumer's credit counts")

	_, c4 := subscribeWith(t, q, 9, 10)
	publishFrom(t, e, "q", 3, 1)
	assert.Equal(t, []string{"m0", "m1", "m2", "m3"}, c1.bodies(), "no take-over on a classic queue")
	assert.Zero(t, c4.n())

	require.NoError(t, s1.Settle(c1.all()[0].Tag, Settlement{Kind: SettleAccept}))
	s1.Cancel(CancelDetach)
	assert.Equal(t, []string{"m1", "m2", "m3"}, c4.bodies(), "the highest priority is next, with the unsettled messages")
	assert.Zero(t, c2.n()+c3.n())
	settleAll(t, q.subsForTest(c4), c4)
	q.subsForTest(c4).Cancel(CancelDetach)
	publishFrom(t, e, "q", 4, 1)
	assert.Equal(t, []string{"m4"}, c2.bodies(), "then attach order")
	assert.Zero(t, c3.n())
	s2.Cancel(CancelConnectionLost)
	assert.Equal(t, []string{"m4"}, c3.bodies())
	for _, c := range []*activityConsumer{c1, c2, c3, c4} {
		assert.Empty(t, c.reported())
	}
}

// subsForTest finds the subscription of consumer c.
func (q *Queue) subsForTest(c Consumer) *Subscription {
	q.mu.Lock()
	defer q.unlock()
	for _, s := range q.subs {
		if s.c == c {
			return s
		}
	}
	return nil
}

// Single active consumer on a quorum queue, with the activity reports
// RabbitMQ's credit replies carry: the first consumer is told it is active
// when it attaches, a waiting one at its first flow; a promotion tells the
// new one.
func TestSingleActiveConsumerQuorum(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-single-active-consumer", true)
	s1, c1 := subscribeWith(t, q, 0, 0)
	assert.Equal(t, []bool{true}, c1.reported(), "active at attach")
	s1.Flow(0, 10, false)
	assert.Equal(t, []bool{true}, c1.reported(), "a flow changes nothing")
	s2, c2 := subscribeWith(t, q, 0, 0)
	assert.Empty(t, c2.reported(), "a waiting consumer hears nothing before its first flow")
	s2.Flow(0, 10, false)
	assert.Equal(t, []bool{false}, c2.reported())
	publishFrom(t, e, "q", 0, 2)
	assert.Equal(t, []string{"m0", "m1"}, c1.bodies())
	assert.Zero(t, c2.n())

	s1.Cancel(CancelDetach)
	assert.Equal(t, []bool{false, true}, c2.reported(), "promoted")
	assert.Equal(t, []string{"m0", "m1"}, c2.bodies(), "with the returned messages")
	_ = s2
}

// On a quorum queue a waiting consumer of a higher priority takes over
// once the active one has settled what it holds; meanwhile nobody gets
// new messages.
func TestSingleActiveConsumerQuorumPriorityTakeOver(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-single-active-consumer", true)
	s1, c1 := subscribeWith(t, q, 0, 10)
	publishFrom(t, e, "q", 0, 1)
	require.Equal(t, []string{"m0"}, c1.bodies())

	s2, c2 := subscribeWith(t, q, 5, 10)
	publishFrom(t, e, "q", 1, 1)
	assert.Equal(t, []string{"m0"}, c1.bodies(), "quiescing: no new message")
	assert.Zero(t, c2.n())
	assert.Equal(t, []bool{false}, c2.reported(), "still waiting")

	require.NoError(t, s1.Settle(c1.all()[0].Tag, Settlement{Kind: SettleAccept}))
	assert.Equal(t, []bool{false, true}, c2.reported())
	assert.Equal(t, []bool{true, false}, c1.reported(), "active at attach, then waiting")
	assert.Equal(t, []string{"m1"}, c2.bodies())

	// Without unsettled messages the take-over is immediate.
	_, c3 := subscribeWith(t, q, 0, 10)
	settleAll(t, s2, c2)
	_, c4 := subscribeWith(t, q, 7, 10)
	assert.Equal(t, []bool{true}, c4.reported()[:1])
	assert.Equal(t, false, c2.reported()[len(c2.reported())-1])
	publishFrom(t, e, "q", 2, 1)
	assert.Equal(t, []string{"m2"}, c4.bodies())
	assert.Zero(t, c3.n())
	_ = s2
}

// Among waiting consumers of equal priority a quorum queue promotes the
// one with more credit, then the first attached (rabbit_fifo's order).
func TestSingleActiveConsumerQuorumWaitingOrder(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-single-active-consumer", true)
	s1, _ := subscribeWith(t, q, 0, 1)
	_, c2 := subscribeWith(t, q, 0, 1)
	_, c3 := subscribeWith(t, q, 0, 5)
	_, c4 := subscribeWith(t, q, 0, 5)
	s1.Cancel(CancelDetach)
	publishFrom(t, e, "q", 0, 1)
	assert.Equal(t, []string{"m0"}, c3.bodies())
	assert.Zero(t, c2.n()+c4.n())
}

// A quiescing active consumer whose higher-priority successor leaves before
// it has settled stays quiescing until it has, then resumes.
func TestSingleActiveConsumerQuorumQuiescingResumes(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-single-active-consumer", true)
	s1, c1 := subscribeWith(t, q, 0, 10)
	publishFrom(t, e, "q", 0, 1)
	s2, c2 := subscribeWith(t, q, 5, 10)
	publishFrom(t, e, "q", 1, 1)
	s2.Cancel(CancelDetach)
	publishFrom(t, e, "q", 2, 1)
	assert.Equal(t, []string{"m0"}, c1.bodies(), "still quiescing")
	require.NoError(t, s1.Settle(c1.all()[0].Tag, Settlement{Kind: SettleAccept}))
	assert.Equal(t, []string{"m0", "m1", "m2"}, c1.bodies(), "resumed")
	assert.Equal(t, []bool{true}, c1.reported(), "never told it waits")
	assert.Zero(t, c2.n())
}
