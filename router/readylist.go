package router

import (
	"container/heap"
	"iter"
	"slices"
	"sort"

	"github.com/epitaph-mq/epitaph/value"
)

// entry is one message held by a queue.
//
// One is held per queued message, so it is kept to 64 bytes: what few
// messages need (changed annotations, at-least-once dead state) lives in
// ext, and the size comes from msg.
type entry struct {
	msg      *Message
	seq      uint64 // enqueue order: a classic queue's original position
	deadline int64  // unix nanoseconds; 0 = no expiry
	ext      *entryExt
	dc       uint32 // delivery-count
	acquired uint32 // acquired-count (times returned to the queue)
	heapIdx  int32  // index in the TTL heap, -1 when absent
	prio     uint8  // its priority level (priority.go); 0 in a queue without levels

	ready     bool // in a ready list (false: delivered, or a tombstone)
	inReturns bool // quorum: in the returns list
	paged     bool // pinned in a slot of the queue's paged list (paged.go)
	// statePinned: the stored state was rewritten and the rewrite may not
	// be durable yet, so the entry is never paged out (a read would see
	// the old state). Only recovery sets it.
	statePinned bool

	// Persistence (persist.go). stored: the message is in the store under
	// (queue id, seq) until settled; delivered: its stored state says so.
	stored    bool
	delivered bool
	// forwarded: a dead entry's store copy has been settled or moved (the
	// dead path must not settle it again).
	forwarded bool

	// At-least-once dead-lettering: the entry is held in the queue's
	// retained list until the dead-letter component moves it.
	retained bool
	inFlight bool // handed to the DeadLetterer, not back yet
}

// entryExt is the rarely needed part of an entry.
type entryExt struct {
	// anns replaces msg.Anns as the entry's broker annotations when hasAnns
	// (a quorum queue's modified outcome, or a recovered changed state).
	anns    value.Map
	hasAnns bool
	// At-least-once dead state of a retained entry.
	deadReason Reason
	deadErr    *Error
	deadAt     int64 // unix ns of the (first) death
	// Delayed retry (delayed.go): delayed, the entry waits in its queue's
	// delayed set until readyAt (unix ns); delayIdx is its index there,
	// delayOrd the order it was delayed in.
	delayed  bool
	readyAt  int64
	delayIdx int
	delayOrd uint64
}

// anns are the entry's broker annotations: the message's unless changed.
// Never modified in place (copy on write).
func (e *entry) anns() value.Map {
	if e.ext != nil && e.ext.hasAnns {
		return e.ext.anns
	}
	return e.msg.Anns
}

func (e *entry) setAnns(m value.Map) {
	x := e.extension()
	x.anns, x.hasAnns = m, true
}

// extension returns e.ext, creating it.
func (e *entry) extension() *entryExt {
	if e.ext == nil {
		e.ext = new(entryExt)
	}
	return e.ext
}

// dead returns the dead state (zero when never set).
func (e *entry) dead() entryExt {
	if e.ext == nil {
		return entryExt{}
	}
	return *e.ext
}

// size is the size counted against x-max-length-bytes.
func (e *entry) size() int64 { return int64(e.msg.size()) }

// readyChunk is how many entries a full chunk of a ready list holds: 4 KiB
// of pointers, one size class. A list's first chunks are smaller (8, 16,
// ... entries), so a queue that holds a few messages holds a few pointers.
const readyChunk = 512

// readyList holds ready entries in delivery order. Entries removed from the
// middle (expiry) stay behind as tombstones (ready == false) and are
// skipped; the list compacts itself when they pile up.
//
// It is a deque of chunks, not one slice: growing a slice of a million
// entries copies 8 MB under the queue lock and leaves the old array as
// garbage, and a drained prefix is only given back by copying. Chunks are
// taken and given back one at a time instead.
type readyList struct {
	chunks [][]*entry // chunks[first:] are the list's, each non-empty
	first  int
	head   int // chunks[first][:head] are gone
	n      int // entries from head on, tombstones included
	holes  int
	spare  []*entry // the largest emptied chunk, for the next one needed
}

func (l *readyList) pushBack(e *entry) {
	want := 8
	if k := len(l.chunks); k > l.first {
		c := l.chunks[k-1]
		if len(c) < cap(c) {
			l.chunks[k-1] = append(c, e)
			l.n++
			return
		}
		want = min(2*cap(c), readyChunk)
	}
	l.chunks = append(l.chunks, append(l.newChunk(want), e))
	l.n++
}

// newChunk returns an empty chunk of capacity n, or the spare if it is
// at least that large.
func (l *readyList) newChunk(n int) []*entry {
	if cap(l.spare) >= n {
		c := l.spare
		l.spare = nil
		return c
	}
	return make([]*entry, 0, n)
}

// insertBySeq puts e back at its original position (classic requeue).
func (l *readyList) insertBySeq(e *entry) {
	live := l.chunks[l.first:]
	// The first chunk whose last entry comes after e.
	i := sort.Search(len(live), func(i int) bool {
		c := live[i]
		return c[len(c)-1].seq > e.seq
	})
	if i == len(live) {
		l.pushBack(e)
		return
	}
	c := live[i]
	lo := 0
	if i == 0 {
		lo = l.head
	}
	j := lo + sort.Search(len(c)-lo, func(k int) bool { return c[lo+k].seq > e.seq })
	l.n++
	if i == 0 && j == l.head && l.head > 0 {
		l.head--
		c[l.head] = e
		return
	}
	if len(c) == cap(c) {
		if i == 0 && l.head > 0 {
			// Reclaim the first chunk's gone prefix instead of splitting.
			m := copy(c, c[l.head:])
			clear(c[m:])
			c, j, l.head = c[:m], j-l.head, 0
		} else {
			// Split: the second half moves to a chunk of its own.
			half := len(c) / 2
			second := append(l.newChunk(cap(c)), c[half:]...)
			clear(c[half:])
			c = c[:half]
			l.chunks = slices.Insert(l.chunks, l.first+i+1, second)
			live = l.chunks[l.first:]
			live[i] = c
			if j > half {
				i, c, j = i+1, second, j-half
			}
		}
	}
	c = append(c, nil)
	copy(c[j+1:], c[j:])
	c[j] = e
	live[i] = c
}

// front returns the first ready entry, dropping leading tombstones.
func (l *readyList) front() *entry {
	for l.n > 0 {
		if e := l.chunks[l.first][l.head]; e.ready {
			return e
		}
		l.dropFront()
		l.holes--
	}
	return nil
}

// popFront removes and returns the first ready entry.
func (l *readyList) popFront() *entry {
	e := l.front()
	if e != nil {
		l.dropFront()
	}
	return e
}

// dropFront removes the first entry. An emptied chunk may become the
// spare; the slice of chunks is reused from its start once empty, and
// compacted once mostly gone.
func (l *readyList) dropFront() {
	c := l.chunks[l.first]
	c[l.head] = nil
	l.head++
	l.n--
	if l.head < len(c) {
		return
	}
	l.chunks[l.first] = nil
	l.first++
	l.head = 0
	if cap(c) > cap(l.spare) {
		l.spare = c[:0]
	}
	switch {
	case l.first == len(l.chunks):
		l.chunks, l.first = l.chunks[:0], 0
	case l.first >= 32 && l.first > len(l.chunks)/2:
		m := copy(l.chunks, l.chunks[l.first:])
		clear(l.chunks[m:])
		l.chunks, l.first = l.chunks[:m], 0
	}
}

// hole records that an entry of this list became a tombstone.
func (l *readyList) hole() {
	l.holes++
	if l.holes > 32 && l.holes > l.n/2 {
		old := *l
		*l = readyList{spare: old.spare}
		for e := range old.all() {
			l.pushBack(e)
		}
	}
}

// all yields the ready entries in order.
func (l *readyList) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		lo := l.head
		for _, c := range l.chunks[l.first:] {
			for _, e := range c[lo:] {
				if e.ready && !yield(e) {
					return
				}
			}
			lo = 0
		}
	}
}

// each calls f for every ready entry in order.
func (l *readyList) each(f func(*entry)) {
	for e := range l.all() {
		f(e)
	}
}

// findTail returns the entry with seq if it is among the last k entries,
// ready or not.
func (l *readyList) findTail(seq uint64, k int) *entry {
	for ci := len(l.chunks) - 1; ci >= l.first && k > 0; ci-- {
		c := l.chunks[ci]
		lo := 0
		if ci == l.first {
			lo = l.head
		}
		for i := len(c) - 1; i >= lo && k > 0; i, k = i-1, k-1 {
			if c[i].seq == seq {
				return c[i]
			}
		}
	}
	return nil
}

func (l *readyList) reset() { *l = readyList{} }

// ttlHeap orders ready entries with a deadline by (deadline, seq).
type ttlHeap []*entry

func (h ttlHeap) Len() int { return len(h) }
func (h ttlHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].seq < h[j].seq
}
func (h ttlHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = int32(i)
	h[j].heapIdx = int32(j)
}
func (h *ttlHeap) Push(x any) {
	e := x.(*entry)
	e.heapIdx = int32(len(*h))
	*h = append(*h, e)
}
func (h *ttlHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.heapIdx = -1
	return e
}

func (h *ttlHeap) add(e *entry) {
	if e.deadline != 0 && e.heapIdx < 0 {
		heap.Push(h, e)
	}
}

func (h *ttlHeap) remove(e *entry) {
	if e.heapIdx >= 0 {
		heap.Remove(h, int(e.heapIdx))
	}
}
