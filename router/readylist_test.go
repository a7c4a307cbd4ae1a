package router

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// readyModel is the obvious implementation: the ready entries in seq order.
type readyModel []*entry

func (m readyModel) seqs() []uint64 {
	out := make([]uint64, len(m))
	for i, e := range m {
		out[i] = e.seq
	}
	return out
}

func listSeqs(l *readyList) []uint64 {
	out := []uint64{}
	for e := range l.all() {
		out = append(out, e.seq)
	}
	return out
}

// TestReadyListModel drives the chunked list and the model with the same
// random operations (enqueue, requeue to the original position, expiry
// from the middle, delivery from the front) and compares them after each.
// Requeues and long runs cross chunk boundaries, split full chunks and
// reclaim a first chunk's gone prefix.
func TestReadyListModel(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var l readyList
		var model readyModel
		var out []*entry // delivered, may be requeued
		next := uint64(1)
		grow := true // the list grows to 3,000 entries (6 full chunks), then drains
		for op := range 4000 {
			if grow && len(model) > 3000 || !grow && len(model) < 50 {
				grow = !grow
			}
			enq := 30
			if grow {
				enq = 60
			}
			switch r := rng.IntN(100); {
			case r < enq: // enqueue a run
				for range 1 + rng.IntN(40) {
					e := &entry{seq: next, ready: true}
					next++
					l.pushBack(e)
					model = append(model, e)
				}
			case r < enq+25: // deliver
				for range 1 + rng.IntN(30) {
					e := l.popFront()
					if len(model) == 0 {
						require.Nil(t, e, "seed %d op %d", seed, op)
						break
					}
					require.Same(t, model[0], e, "seed %d op %d", seed, op)
					model = model[1:]
					e.ready = false
					out = append(out, e)
				}
			case r < enq+40: // requeue delivered entries to their positions
				rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
				n := min(len(out), 1+rng.IntN(20))
				for _, e := range out[:n] {
					e.ready = true
					l.insertBySeq(e)
					i, _ := slices.BinarySearchFunc(model, e.seq, func(x *entry, s uint64) int {
						return int(x.seq) - int(s)
					})
					model = slices.Insert(model, i, e)
				}
				out = out[n:]
			default: // expire entries from the middle
				for range 1 + rng.IntN(10) {
					if len(model) == 0 {
						break
					}
					i := rng.IntN(len(model))
					model[i].ready = false
					l.hole()
					model = slices.Delete(model, i, i+1)
				}
			}
			if len(model) > 0 {
				require.Same(t, model[0], l.front(), "seed %d op %d", seed, op)
			}
			if op%10 == 0 {
				require.Equal(t, model.seqs(), listSeqs(&l), "seed %d op %d", seed, op)
			}
		}
	}
}

func TestReadyListFindTail(t *testing.T) {
	var l readyList
	for s := range uint64(1000) {
		l.pushBack(&entry{seq: s, ready: true})
	}
	for range 600 {
		l.popFront()
	}
	require.Equal(t, uint64(999), l.findTail(999, 4).seq)
	require.Equal(t, uint64(996), l.findTail(996, 4).seq)
	require.Nil(t, l.findTail(995, 4), "beyond the last 4")
	require.Nil(t, l.findTail(599, 1000), "already gone")
	require.Equal(t, uint64(600), l.findTail(600, 1000).seq)
}

// A queue that is drained keeps no chunks but one spare, and a steady
// stream through it allocates nothing.
func TestReadyListReuse(t *testing.T) {
	var l readyList
	es := make([]*entry, 3*readyChunk)
	for i := range es {
		es[i] = &entry{seq: uint64(i), ready: true}
	}
	cycle := func() {
		for _, e := range es {
			e.ready = true
			l.pushBack(e)
		}
		for l.popFront() != nil {
		}
	}
	cycle()
	require.Zero(t, l.n)
	require.Empty(t, l.chunks)
	require.Equal(t, readyChunk, cap(l.spare))
	// Each pass takes its first chunk from the spare (full size, so the
	// next ones are full size too) and makes the other two.
	require.Equal(t, 2.0, testing.AllocsPerRun(20, cycle))

	steady := func() {
		l.pushBack(es[0])
		l.popFront()
	}
	require.Zero(t, testing.AllocsPerRun(1000, steady))
}
