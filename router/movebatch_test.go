package router

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MoveBatch moves a batch of a durable queue's messages in one store
// batch with the caller's progress record: after a restart the moved ones
// are in their targets and gone from the source, the refused and missing
// ones are where they were, and the record says what the batch did.
func TestMoveBatchDurableAtomicWithProgress(t *testing.T) {
	dir := t.TempDir()
	d := openDurable(t, dir)
	src := d.queue(t, "src", Classic)
	a := d.queue(t, "a", Classic)
	full := d.queue(t, "full", Classic, "x-max-length", int64(0), "x-overflow", "reject-publish")
	for i := range 6 {
		require.Equal(t, Accepted, d.publish(t, "", durableMsg(t, fmt.Sprintf("m-%d", i), "src")))
	}
	out, _, _ := src.BrowseAfter(0, 10, 10, nil)
	require.Len(t, out, 6)
	moves := []ReadyMove{
		{Seq: out[0].Seq, Msg: durableMsg(t, "c-0", "a"), Targets: []*Queue{a}},
		{Seq: out[1].Seq, Msg: durableMsg(t, "c-1", "full"), Targets: []*Queue{full}},
		{Seq: 999, Msg: durableMsg(t, "c-x", "a"), Targets: []*Queue{a}},
		{Seq: out[3].Seq, Msg: durableMsg(t, "c-3", "a"), Targets: []*Queue{a}},
		{Seq: out[4].Seq, Msg: durableMsg(t, "c-4", "a"), Targets: []*Queue{a, full}},
	}
	var seen []error
	done := make(chan error, 1)
	src.MoveBatch(moves, func(ms []ReadyMove) (string, []byte) {
		for _, m := range ms {
			seen = append(seen, m.Err)
		}
		return "R/test", []byte("progress")
	}, func(err error) { done <- err })
	require.NoError(t, <-done)
	require.Equal(t, []error{nil, ErrMoveRefused, ErrNotReady, nil, nil}, seen)
	require.Equal(t, 3, src.Len())
	require.Equal(t, 3, a.Len())
	require.Equal(t, 0, full.Len())
	d.close(t)

	d2 := openDurable(t, dir)
	var meta []byte
	require.NoError(t, d2.st.Meta(func(k string, v []byte) error {
		if k == "R/test" {
			meta = append([]byte(nil), v...) // v is only valid during the call
		}
		return nil
	}))
	require.Equal(t, "progress", string(meta))
	for name, want := range map[string][]string{"src": {"m-1", "m-2", "m-5"}, "a": {"c-0", "c-3", "c-4"}, "full": nil} {
		q, ok := d2.v.Queue(name)
		require.True(t, ok)
		require.Equal(t, len(want), q.Len(), name)
		if len(want) > 0 {
			_, c := subscribe(t, q, 10)
			require.Equal(t, want, bodiesOf(t, c.all()), name)
		}
	}
	d2.close(t)
}

// A durable delayed message (quorum delayed retry) moved by MoveBatch
// leaves the delayed set for good: after a restart it is in its target
// only; Browse shows delayed messages after the ready ones, with their
// delivery time, and WalkAfter walks them with the ready ones by seq.
func TestMoveBatchDelayedDurable(t *testing.T) {
	dir := t.TempDir()
	clock := newClock()
	d := openDurable(t, dir, withClock(clock))
	q := d.queue(t, "q", Quorum, "x-delayed-retry-type", "all", "x-delayed-retry-min", int64(3_600_000))
	dst := d.queue(t, "dst", Classic)
	for _, b := range []string{"a", "b", "c"} {
		require.Equal(t, Accepted, d.publish(t, "", durableMsg(t, b, "q")))
	}
	s, c := subscribe(t, q, 1)
	require.Len(t, c.all(), 1)
	require.NoError(t, s.Settle(c.all()[0].Tag, Settlement{Kind: SettleRelease}))
	s.Cancel(CancelDetach)
	require.Equal(t, 1, q.Info().MessagesDelayed)

	page, next, depth := q.Browse(0, 10, 10, nil)
	require.Len(t, page, 3)
	assert.Equal(t, []int{3, 2}, []int{next, depth})
	assert.Equal(t, []string{"b", "c", "a"}, []string{bodyOf(t, page[0].Msg), bodyOf(t, page[1].Msg), bodyOf(t, page[2].Msg)})
	assert.Zero(t, page[0].DeliveryTime)
	assert.Equal(t, clock.Now().Add(time.Hour).UnixMilli(), page[2].DeliveryTime)
	tail, _, _ := q.Browse(2, 10, 10, nil)
	require.Len(t, tail, 1)
	assert.Equal(t, "a", bodyOf(t, tail[0].Msg))

	walked, _, done := q.WalkAfter(nil, 0, 10, 10, nil)
	require.True(t, done)
	require.Len(t, walked, 3)
	var moves []ReadyMove
	for _, w := range walked {
		moves = append(moves, ReadyMove{Seq: w.Seq, Msg: durableMsg(t, "moved-"+bodyOf(t, w.Msg), "dst"), Targets: []*Queue{dst}})
	}
	assert.Equal(t, "moved-a", bodyOf(t, moves[0].Msg), "in seq order: the delayed one first")
	done2 := make(chan error, 1)
	q.MoveBatch(moves, nil, func(err error) { done2 <- err })
	require.NoError(t, <-done2)
	for _, mv := range moves {
		require.NoError(t, mv.Err)
	}
	info := q.Info()
	assert.Equal(t, []int{0, 0}, []int{info.Messages, info.MessagesDelayed})
	d.close(t)

	clock.Advance(2 * time.Hour) // the delay would have passed
	d = openDurable(t, dir, withClock(clock))
	q, _ = d.v.Queue("q")
	dst, _ = d.v.Queue("dst")
	info = q.Info()
	assert.Equal(t, []int{0, 0}, []int{info.Messages, info.MessagesDelayed})
	_, c = subscribe(t, dst, 10)
	assert.Equal(t, []string{"moved-a", "moved-b", "moved-c"}, bodiesOf(t, c.all()))
	d.close(t)
}
