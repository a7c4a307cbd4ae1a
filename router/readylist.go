package router

import (
	"container/heap"
	"sort"

	"github.com/epitaph-mq/epitaph/amqp10"
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

	ready     bool // in a ready list (false: delivered, or a tombstone)
	inReturns bool // quorum: in the returns list

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
	anns    amqp10.Map
	hasAnns bool
	// At-least-once dead state of a retained entry.
	deadReason Reason
	deadErr    *amqp10.Error
	deadAt     int64 // unix ns of the (first) death
}

// anns are the entry's broker annotations: the message's unless changed.
// Never modified in place (copy on write).
func (e *entry) anns() amqp10.Map {
	if e.ext != nil && e.ext.hasAnns {
		return e.ext.anns
	}
	return e.msg.Anns
}

func (e *entry) setAnns(m amqp10.Map) {
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

// readyList holds ready entries in delivery order. Entries removed from the
// middle (expiry) stay behind as tombstones (ready == false) and are
// skipped; the list compacts itself when they pile up.
type readyList struct {
	items []*entry
	head  int
	holes int
}

func (l *readyList) pushBack(e *entry) { l.items = append(l.items, e) }

// insertBySeq puts e back at its original position (classic requeue).
func (l *readyList) insertBySeq(e *entry) {
	live := l.items[l.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].seq > e.seq })
	if i == len(live) {
		l.items = append(l.items, e)
		return
	}
	if i == 0 && l.head > 0 {
		l.head--
		l.items[l.head] = e
		return
	}
	at := l.head + i
	l.items = append(l.items, nil)
	copy(l.items[at+1:], l.items[at:])
	l.items[at] = e
}

// front returns the first ready entry, dropping leading tombstones.
func (l *readyList) front() *entry {
	for l.head < len(l.items) {
		e := l.items[l.head]
		if e.ready {
			return e
		}
		l.items[l.head] = nil
		l.head++
		l.holes--
	}
	l.shrink()
	return nil
}

// popFront removes and returns the first ready entry.
func (l *readyList) popFront() *entry {
	e := l.front()
	if e == nil {
		return nil
	}
	l.items[l.head] = nil
	l.head++
	l.shrink()
	return e
}

// hole records that an entry of this list became a tombstone.
func (l *readyList) hole() {
	l.holes++
	if l.holes > 32 && l.holes > (len(l.items)-l.head)/2 {
		live := l.items[:0]
		for _, e := range l.items[l.head:] {
			if e.ready {
				live = append(live, e)
			}
		}
		clear(l.items[len(live):])
		l.items, l.head, l.holes = live, 0, 0
	}
}

func (l *readyList) shrink() {
	if l.head == len(l.items) {
		l.items, l.head = l.items[:0], 0
		return
	}
	if l.head > 1024 && l.head > len(l.items)/2 {
		n := copy(l.items, l.items[l.head:])
		clear(l.items[n:])
		l.items, l.head = l.items[:n], 0
	}
}

// each calls f for every ready entry in order.
func (l *readyList) each(f func(*entry)) {
	for _, e := range l.items[l.head:] {
		if e.ready {
			f(e)
		}
	}
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
