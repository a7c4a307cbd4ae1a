package router

import (
	"testing"

	"github.com/epitaph-mq/epitaph/value"
	"github.com/stretchr/testify/require"
)

func peekBodies(ps []PeekedMessage) []string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p.Msg.Container.(AMQP10).Wire.Bare()))
	}
	return out
}

func TestPeekChangesNothing(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			for _, b := range []string{"a", "b", "c"} {
				e.publish(t, "", msg(b, "q"))
			}
			require.Nil(t, q.Peek(0))
			ps := q.Peek(2)
			require.Equal(t, []string{"a", "b"}, peekBodies(ps))
			require.Equal(t, 2, ps[0].Remaining)
			require.Equal(t, 1, ps[1].Remaining)
			for _, p := range ps {
				require.False(t, p.Redelivered)
				require.True(t, p.FirstAcquirer)
				require.Zero(t, p.DeliveryCount)
				require.Equal(t, "q", ann(p.Annotations, "x-routing-key"))
			}
			require.Equal(t, []string{"a", "b", "c"}, peekBodies(q.Peek(10)))
			require.Equal(t, 3, q.Len())

			// A consumer afterwards sees untouched messages.
			_, c := subscribe(t, q, 3)
			require.Equal(t, []string{"a", "b", "c"}, c.bodies())
			for _, d := range c.all() {
				require.True(t, d.Header.FirstAcquirer)
				require.Zero(t, d.Header.DeliveryCount)
			}
		})
	}
}

func TestTakeRemoves(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	for _, b := range []string{"a", "b", "c"} {
		e.publish(t, "", msg(b, "q"))
	}
	ps := q.Take(2)
	require.Equal(t, []string{"a", "b"}, peekBodies(ps))
	require.Equal(t, 2, ps[0].Remaining)
	require.Equal(t, 1, ps[1].Remaining)
	require.Equal(t, 1, q.Len())
	require.Equal(t, 0, q.Info().MessagesUnacknowledged)
	require.Equal(t, []string{"c"}, peekBodies(q.Take(5)))
	require.Empty(t, q.Take(1))
	require.Zero(t, e.dl.n(), "taking is accepting: nothing dead-lettered")
}

func TestReleaseMarksRedelivered(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			for _, b := range []string{"a", "b", "c"} {
				e.publish(t, "", msg(b, "q"))
			}
			ps := q.Release(1)
			require.Equal(t, []string{"a"}, peekBodies(ps))
			require.False(t, ps[0].Redelivered, "shown as delivered")
			require.Equal(t, 3, q.Len())
			after := q.Peek(3)
			require.Equal(t, []string{"a", "b", "c"}, peekBodies(after))
			require.True(t, after[0].Redelivered)
			require.Equal(t, uint32(1), after[0].AcquiredCount)
			require.Zero(t, after[0].DeliveryCount)
			require.False(t, after[1].Redelivered)
		})
	}
}

func TestRejectDeadLetters(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum)
	e.publish(t, "", msg("a", "q"))
	e.publish(t, "", msg("b", "q"))
	ps := q.Reject(1)
	require.Equal(t, []string{"a"}, peekBodies(ps))
	require.Equal(t, []string{"a:rejected"}, e.dl.bodies())
	require.Equal(t, uint32(1), e.dl.all()[0].Msg.DeliveryCount)
	require.Equal(t, 1, q.Len())
}

func TestPeekShowsDeathsAndDeletedQueue(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	m := msg("a", "q")
	m.Anns = value.Map{{Key: value.Symbol("x-opt-deaths"), Value: &value.Array{}}}
	m.DeliveryCount = 2
	e.publish(t, "", m)
	ps := q.Peek(1)
	require.Len(t, ps, 1)
	require.False(t, ps[0].FirstAcquirer)
	require.True(t, ps[0].Redelivered)
	require.Equal(t, uint32(2), ps[0].Msg.DeliveryCount)
	require.True(t, hasAnn(ps[0].Annotations, "x-opt-deaths"))

	_, err := e.v.DeleteQueue("q")
	require.NoError(t, err)
	require.Empty(t, q.Peek(1))
	require.Empty(t, q.Take(1))
}
