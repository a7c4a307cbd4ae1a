package router

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// bodyFilter matches messages whose body marker starts with prefix, and
// counts the messages it tests.
type bodyFilter struct {
	prefix string
	tested int
}

func (f *bodyFilter) Match(m *Message, _ value.Map) bool {
	f.tested++
	return strings.HasPrefix(string(m.Container.(AMQP10).Wire.Bare()), f.prefix)
}

func subscribeFiltered(t *testing.T, q *Queue, f MessageFilter, credit uint32) (*Subscription, *fakeConsumer) {
	t.Helper()
	c := &fakeConsumer{}
	s, err := q.Subscribe(c, ConsumerOptions{Filter: f})
	require.NoError(t, err)
	if credit > 0 {
		s.Flow(0, credit, false)
	}
	return s, c
}

func publishBodies(t *testing.T, e *env, queue string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		require.Equal(t, Accepted, e.publish(t, "", msg(b, queue)))
	}
}

// A filtered consumer gets only what matches; what it passes over stays, in
// order, for the others.
func TestFilteredConsumerSkipsForItselfOnly(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			publishBodies(t, e, "q", "a1", "b1", "a2", "b2", "a3")
			_, fc := subscribeFiltered(t, q, &bodyFilter{prefix: "b"}, 10)
			assert.Equal(t, []string{"b1", "b2"}, fc.bodies())
			assert.Equal(t, 3, q.Len(), "the others stay ready")
			_, c := subscribe(t, q, 10)
			assert.Equal(t, []string{"a1", "a2", "a3"}, c.bodies(), "in their order")
			publishBodies(t, e, "q", "b3", "a4")
			assert.Equal(t, []string{"b1", "b2", "b3"}, fc.bodies())
			assert.Equal(t, []string{"a1", "a2", "a3", "a4"}, c.bodies())
			assert.Equal(t, 0, q.Len())
		})
	}
}

// The scan position: a filtered consumer on a deep queue where nothing
// matches tests each message once, not once per credit or enqueue.
func TestFilteredConsumerDoesNotRescan(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	const deep = 1000
	for i := range deep {
		publishBodies(t, e, "q", "a"+string(rune('0'+i%10)))
	}
	f := &bodyFilter{prefix: "b"}
	s, fc := subscribeFiltered(t, q, f, 5)
	assert.Equal(t, deep, f.tested, "the first credit tests the queue once")
	for i := range 20 {
		s.Flow(0, uint32(6+i), false)
	}
	assert.Equal(t, deep, f.tested, "more credit tests nothing again")
	publishBodies(t, e, "q", "a", "a", "b")
	assert.Equal(t, deep+3, f.tested, "each enqueue tests the new message only")
	assert.Equal(t, []string{"b"}, fc.bodies())
	assert.Equal(t, deep+2, q.Len())
}

// A message that comes back to the queue (released by another consumer)
// before the filtered consumer's scan position is tested again.
func TestFilteredConsumerSeesRequeues(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			publishBodies(t, e, "q", "b1", "a1", "a2")
			s, c := subscribe(t, q, 1)
			require.Equal(t, []string{"b1"}, c.bodies())
			_, fc := subscribeFiltered(t, q, &bodyFilter{prefix: "b"}, 10)
			assert.Empty(t, fc.bodies(), "nothing ready matches")
			require.NoError(t, s.Settle(c.all()[0].Tag, Settlement{Kind: SettleRelease}))
			assert.Equal(t, []string{"b1"}, fc.bodies(), "the released message goes to the filtered consumer")
			assert.Equal(t, 2, q.Len())
		})
	}
}

// A filtered consumer's drain ends at once when nothing matches, and its
// credit is used up; the messages stay.
func TestFilteredConsumerDrain(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum)
	publishBodies(t, e, "q", "a1", "a2")
	s, fc := subscribeFiltered(t, q, &bodyFilter{prefix: "b"}, 0)
	s.Flow(0, 5, true)
	assert.Empty(t, fc.bodies())
	assert.Equal(t, []uint32{5}, fc.drained)
	assert.Equal(t, 2, q.Len())
}

// A message with a TTL of 0 goes straight to a consumer with credit that
// takes it, or expires: a filtered consumer that does not match does not
// get it.
func TestFilteredConsumerZeroTTL(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-message-ttl", int64(0))
	_, fc := subscribeFiltered(t, q, &bodyFilter{prefix: "b"}, 5)
	publishBodies(t, e, "q", "a1", "b1")
	assert.Equal(t, []string{"b1"}, fc.bodies())
	assert.Equal(t, []string{"a1:expired"}, e.dl.bodies())
}

// Round robin between a filtered and an unfiltered consumer: on its turn
// the filtered one takes its first match, the other the head; a message the
// filtered one does not match goes to the other whatever the turn.
func TestFilteredConsumerRoundRobin(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	_, c := subscribe(t, q, 10)
	_, fc := subscribeFiltered(t, q, &bodyFilter{prefix: "b"}, 10)
	publishBodies(t, e, "q", "a1", "b1", "b2", "a2")
	assert.Equal(t, []string{"a1", "b2", "a2"}, c.bodies())
	assert.Equal(t, []string{"b1"}, fc.bodies())
}

// neverFilter matches nothing, at no cost of its own.
type neverFilter struct{}

func (neverFilter) Match(*Message, value.Map) bool { return false }

// BenchmarkEnqueueFilteredNoMatch is BenchmarkEnqueue with a filtered
// consumer with credit on a queue of 100,000 messages it does not match:
// each enqueue tests the new message only (the scan position), so the cost
// does not grow with the queue.
func BenchmarkEnqueueFilteredNoMatch(b *testing.B) {
	br := New(Options{})
	b.Cleanup(br.Close)
	vh, _ := br.VHost("/")
	q, _, err := vh.DeclareQueue(QueueSpec{Name: "q"})
	require.NoError(b, err)
	m := NewAMQP10Message(benchWire(b))
	m.RoutingKeys = []string{"q"}
	for range 100_000 {
		q.Enqueue(m)
	}
	sub, err := q.Subscribe(&benchConsumer{}, ConsumerOptions{Filter: neverFilter{}})
	require.NoError(b, err)
	sub.Flow(0, 1000, false)
	b.ReportAllocs()
	for b.Loop() {
		if st := q.Enqueue(m); st.Kind != Accepted {
			b.Fatal(st)
		}
	}
}

// A consumer that keeps releasing the head of a deep queue does not make a
// filtered consumer test the queue again: each message that comes back is
// tested once.
func TestFilteredConsumerRequeuesCostOneTestEach(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			const deep = 1000
			for range deep {
				publishBodies(t, e, "q", "a")
			}
			f := &bodyFilter{prefix: "b"}
			_, fc := subscribeFiltered(t, q, f, 5)
			require.Equal(t, deep, f.tested)
			s, c := subscribe(t, q, 1)
			for i := range 50 {
				d := c.last(t)
				require.NoError(t, s.Settle(d.Tag, Settlement{Kind: SettleRelease}))
				s.Flow(uint32(i+1), 1, false)
			}
			assert.Equal(t, deep+50, f.tested, "one test per release")
			assert.Empty(t, fc.bodies())
		})
	}
}

// Past maxRetest messages back in the queue while a filtered consumer has
// no credit, it tests the queue again from the oldest of them, and still
// finds what matches.
func TestFilteredConsumerRetestOverflow(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			publishBodies(t, e, "q", "b-first")
			s, c := subscribe(t, q, 1)
			require.Equal(t, []string{"b-first"}, c.bodies())
			const n = maxRetest + 10
			for range n {
				publishBodies(t, e, "q", "a")
			}
			f := &bodyFilter{prefix: "b"}
			fs, fc := subscribeFiltered(t, q, f, 1)
			require.Equal(t, n, f.tested, "tested the queue, b-first is out")
			fs.Flow(0, 0, false) // no credit while the messages come back
			s.Flow(0, n+1, false)
			require.Equal(t, n+1, c.n())
			for _, d := range c.all() {
				require.NoError(t, s.Settle(d.Tag, Settlement{Kind: SettleRelease}))
			}
			s.Cancel(CancelDetach)
			require.Less(t, len(fs.scan.retest), maxRetest, "the retest list overflowed and was dropped")
			fs.Flow(0, 5, false)
			assert.Equal(t, []string{"b-first"}, fc.bodies())
			assert.Equal(t, n, q.Len())
		})
	}
}
