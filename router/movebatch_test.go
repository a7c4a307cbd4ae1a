package router

import (
	"fmt"
	"testing"

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
