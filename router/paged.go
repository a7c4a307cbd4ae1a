package router

import (
	"container/heap"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/epitaph-mq/epitaph/router/store"
)

// Paged queues.
//
// A persisting queue (and, with a spill directory, any queue) keeps only
// a head window of its ready messages in memory as entries (bodies
// included): the main list, bounded by
// Options.QueueWindowBytes. Every ready message behind the window is an
// index slot in a pagedList: its size and, when it has one, its deadline.
// The body stays in the store under (queue id, seq) and is read back ahead
// of the consumers, a batch at a time with one sequential store read
// (Store.IterateRange), when the window runs dry.
//
// Order: every window seq is below every paged seq. New messages go to the
// window only while nothing is paged and it has room; a refill moves the
// paged front to the window's back; a classic requeue puts a delivered
// entry back by seq, and delivered entries all came from the window.
//
// A message is paged out (its entry dropped, only the slot kept) once its
// append is durable: until then a read could miss it. Entries that are not
// stored at all (transient messages, every message of a non-durable queue)
// are written to their level's spill log when the broker has one
// (spill.go) and stay pinned in their slot otherwise; messages whose
// append failed stay pinned until withdrawn.

// pageSlots is how many consecutive seqs an index page covers.
const pageSlots = 256

// indexPage indexes the paged messages whose seqs are in
// [base, base+pageSlots). Its per-message cost is the 4-byte size slot,
// plus 8 bytes of deadline for pages holding a message with a TTL, plus 8
// bytes of entry pointer for pages still holding pinned entries.
//
// A sparse page (a priority level's, whose seqs interleave with the other
// levels') holds up to pageSlots consecutive slots instead, each naming its
// seq as an offset from base: 4 more bytes per message.
type indexPage struct {
	base      uint64
	sizes     []uint32 // per slot: message size + 1; 0: no ready message at this seq
	offs      []uint32 // sparse pages: per slot, its seq - base; nil for a dense page
	hiSeq     uint64   // sparse pages: the highest seq ever put in the page
	deadlines []int64  // nil until a slot has a deadline; unix ns, 0 = none
	pinned    []*entry // nil, or per slot the entry still held in memory
	npinned   int
	head      int // slots before head are empty
	live      int
	minDL     int64 // smallest deadline of a live slot, 0 = none
	heapIdx   int   // index in pagedList.byDeadline, -1 when absent
	// Transient messages written to the level's spill log (spill.go):
	// spilled marks their slots (a bit is never cleared while the page
	// holds a live slot), and a marked slot's log index is spillBase plus
	// the number of marked slots before it, since a level's transient
	// messages are written in seq order.
	spilled   *[pageSlots / 64]uint64
	spillBase uint64
}

// pagedList is a queue's paged ready messages, in seq order.
type pagedList struct {
	sparse     bool         // its pages are sparse (a priority level's list)
	pages      []*indexPage // pages[first:] are live
	first      int
	n          int
	bytes      int64
	byDeadline pageHeap
	nspilled   int // live slots whose bodies are in the spill log only
	// released: spill log indices of slots taken since the log's last
	// release (spill.go), in any order.
	released []uint64
	// outSeq: pinned stored entries below it were paged out already, or
	// could not be (not stored, append failed).
	outSeq uint64
}

// slot is one paged message taken out of its page.
type slot struct {
	seq      uint64
	size     int64
	deadline int64
	e        *entry // pinned entry, nil when the body is in the store only
	spill    uint64 // its index in the level's spill log; 0: not spilled
}

// spillIndex returns slot i's index in the spill log, 0 when its body is
// not there.
func (p *indexPage) spillIndex(i int) uint64 {
	if p.spilled == nil || p.spilled[i/64]&(1<<(i%64)) == 0 {
		return 0
	}
	n := bits.OnesCount64(p.spilled[i/64] & (1<<(i%64) - 1))
	for w := range i / 64 {
		n += bits.OnesCount64(p.spilled[w])
	}
	return p.spillBase + uint64(n)
}

// markSpilled records that slot i's body was written to the spill log at
// index idx and drops its pinned entry. It refuses (false) when idx is not
// the index the page's marks give slot i, so a mismatch can never make a
// slot read another message's body: the entry then stays in memory.
func (l *pagedList) markSpilled(p *indexPage, i int, idx uint64) bool {
	if p.spilled == nil {
		p.spilled, p.spillBase = new([pageSlots / 64]uint64), idx
	}
	p.spilled[i/64] |= 1 << (i % 64)
	if p.spillIndex(i) != idx {
		p.spilled[i/64] &^= 1 << (i % 64)
		return false
	}
	p.pinned[i] = nil
	p.npinned--
	if p.npinned == 0 {
		p.pinned = nil
	}
	l.nspilled++
	return true
}

// slotAt describes live slot i of p without taking it.
func (p *indexPage) slotAt(i int) slot {
	s := slot{seq: p.seqAt(i), size: int64(p.sizes[i] - 1), spill: p.spillIndex(i)}
	if p.pinned != nil {
		s.e = p.pinned[i]
	}
	if p.deadlines != nil {
		s.deadline = p.deadlines[i]
	}
	return s
}

// seqAt returns the seq of slot i.
func (p *indexPage) seqAt(i int) uint64 {
	if p.offs == nil {
		return p.base + uint64(i)
	}
	return p.base + uint64(p.offs[i])
}

// maxSeq is the highest seq the page covers.
func (p *indexPage) maxSeq() uint64 {
	if p.offs == nil && p.hiSeq == 0 {
		return p.base + pageSlots - 1
	}
	return p.hiSeq
}

// indexFrom returns the first slot whose seq is seq or above (len(sizes)
// when none).
func (p *indexPage) indexFrom(seq uint64) int {
	if seq <= p.base {
		return 0
	}
	if p.offs == nil && p.hiSeq == 0 {
		return int(min(seq-p.base, uint64(len(p.sizes))))
	}
	return sort.Search(len(p.offs), func(k int) bool { return p.base+uint64(p.offs[k]) >= seq })
}

// slotFor returns the slot of seq (above every seq in the list) in the
// last page, adding a page when seq does not fit it.
func (l *pagedList) slotFor(seq uint64) (*indexPage, int) {
	p := l.last()
	if !l.sparse {
		if p == nil || seq >= p.base+pageSlots {
			p = &indexPage{base: seq - seq%pageSlots, heapIdx: -1}
			l.pages = append(l.pages, p)
		}
		i := int(seq - p.base)
		for len(p.sizes) <= i {
			p.sizes = append(p.sizes, 0)
		}
		return p, i
	}
	if p == nil || len(p.sizes) >= pageSlots || seq-p.base > maxSparseSpan {
		p = &indexPage{base: seq, heapIdx: -1}
		l.pages = append(l.pages, p)
	}
	p.sizes = append(p.sizes, 0)
	p.offs = append(p.offs, uint32(seq-p.base))
	p.hiSeq = seq
	return p, len(p.sizes) - 1
}

func (l *pagedList) last() *indexPage {
	if len(l.pages) == l.first {
		return nil
	}
	return l.pages[len(l.pages)-1]
}

// push appends e (ready, the highest seq so far) as a pinned slot.
func (l *pagedList) push(e *entry) {
	p, i := l.slotFor(e.seq)
	size := e.size()
	p.sizes[i] = uint32(min(size, math.MaxUint32-1)) + 1
	if p.pinned == nil {
		p.pinned = make([]*entry, pageSlots)
	}
	p.pinned[i] = e
	p.npinned++
	if e.deadline != 0 {
		if p.deadlines == nil {
			p.deadlines = make([]int64, pageSlots)
		}
		p.deadlines[i] = e.deadline
		if p.minDL == 0 || e.deadline < p.minDL {
			p.minDL = e.deadline
			l.fixHeap(p)
		}
	}
	p.live++
	l.n++
	l.bytes += size
	e.paged = true
}

// pushSlot appends an unpinned slot (its body only in the store): a
// message read back after a restart.
func (l *pagedList) pushSlot(seq uint64, size, deadline int64) {
	p, i := l.slotFor(seq)
	p.sizes[i] = uint32(min(size, math.MaxUint32-1)) + 1
	if deadline != 0 {
		if p.deadlines == nil {
			p.deadlines = make([]int64, pageSlots)
		}
		p.deadlines[i] = deadline
		if p.minDL == 0 || deadline < p.minDL {
			p.minDL = deadline
			l.fixHeap(p)
		}
	}
	p.live++
	l.n++
	l.bytes += size
}

// pageOut drops the pinned entries of stored messages with seqs up to
// durable (their appends are durable) for which keep is false.
func (l *pagedList) pageOut(durable uint64, keep func(seq uint64) bool) {
	if durable < l.outSeq {
		return
	}
	live := l.pages[l.first:]
	start, hi := 0, len(live)
	for start < hi { // the first page not wholly below outSeq
		m := (start + hi) / 2
		if live[m].maxSeq() < l.outSeq {
			start = m + 1
		} else {
			hi = m
		}
	}
	for _, p := range live[start:] {
		if p.base > durable {
			break
		}
		if p.npinned == 0 {
			continue
		}
		lo := p.indexFrom(l.outSeq)
		hi := len(p.sizes)
		if durable != math.MaxUint64 { // (durable may be the largest seq)
			hi = p.indexFrom(durable + 1)
		}
		for i := lo; i < hi; i++ {
			e := p.pinned[i]
			if e == nil || !e.stored || e.forwarded || e.statePinned || keep(e.seq) {
				continue
			}
			p.pinned[i] = nil
			p.npinned--
		}
		if p.npinned == 0 {
			p.pinned = nil
		}
	}
	// Slots not pushed yet are not covered: recovery sets the watermark
	// above every seq it will push.
	if p := l.last(); p != nil {
		lastSeq := p.base + uint64(len(p.sizes)) - 1
		if l.sparse {
			lastSeq = p.hiSeq
		}
		l.outSeq = min(durable, lastSeq) + 1
	}
}

// front returns the first page with a live slot, dropping empty ones.
func (l *pagedList) front() *indexPage {
	for l.first < len(l.pages) {
		p := l.pages[l.first]
		if p.live > 0 {
			for p.sizes[p.head] == 0 {
				p.head++
			}
			return p
		}
		l.dropFront()
	}
	return nil
}

func (l *pagedList) dropFront() {
	p := l.pages[l.first]
	if p.heapIdx >= 0 {
		heap.Remove(&l.byDeadline, p.heapIdx)
	}
	l.pages[l.first] = nil
	l.first++
	if l.first == len(l.pages) {
		l.pages, l.first = l.pages[:0], 0
	} else if l.first >= 32 && l.first > len(l.pages)/2 {
		m := copy(l.pages, l.pages[l.first:])
		clear(l.pages[m:])
		l.pages, l.first = l.pages[:m], 0
	}
}

// take removes slot i of p and returns it.
func (l *pagedList) take(p *indexPage, i int) slot {
	s := slot{seq: p.seqAt(i), size: int64(p.sizes[i] - 1), spill: p.spillIndex(i)}
	if s.spill != 0 {
		l.nspilled--
		l.released = append(l.released, s.spill)
	}
	p.sizes[i] = 0
	if p.pinned != nil && p.pinned[i] != nil {
		s.e = p.pinned[i]
		s.e.paged = false
		p.pinned[i] = nil
		p.npinned--
		if p.npinned == 0 {
			p.pinned = nil
		}
	}
	if p.deadlines != nil {
		s.deadline = p.deadlines[i]
		p.deadlines[i] = 0
		if s.deadline != 0 && s.deadline == p.minDL {
			p.minDL = 0
			for j, d := range p.deadlines {
				if d != 0 && p.sizes[j] != 0 && (p.minDL == 0 || d < p.minDL) {
					p.minDL = d
				}
			}
			l.fixHeap(p)
		}
	}
	for p.head < len(p.sizes) && p.sizes[p.head] == 0 {
		p.head++
	}
	p.live--
	l.n--
	l.bytes -= s.size
	if p.live == 0 {
		// The slices go now; the page itself when it reaches the front.
		p.sizes, p.offs, p.deadlines, p.pinned, p.head, p.minDL = nil, nil, nil, nil, 0, 0
		p.spilled, p.spillBase = nil, 0
		if p.heapIdx >= 0 {
			heap.Remove(&l.byDeadline, p.heapIdx)
		}
	}
	return s
}

// popFront removes and returns the first paged message.
func (l *pagedList) popFront() (slot, bool) {
	p := l.front()
	if p == nil {
		return slot{}, false
	}
	return l.take(p, p.head), true
}

// each yields the live slots in seq order without removing them, until
// yield returns false.
func (l *pagedList) each(yield func(p *indexPage, i int) bool) {
	for _, p := range l.pages[l.first:] {
		for i := p.head; i < len(p.sizes); i++ {
			if p.sizes[i] != 0 && !yield(p, i) {
				return
			}
		}
	}
}

// eachAfter yields the live slots with a seq above seq, in seq order,
// without removing them, until yield returns false. It finds the first
// page by binary search, so a scan that goes on from where it stopped
// does not walk the pages before.
func (l *pagedList) eachAfter(seq uint64, yield func(p *indexPage, i int) bool) {
	live := l.pages[l.first:]
	k := sort.Search(len(live), func(m int) bool { return live[m].maxSeq() > seq })
	for _, p := range live[k:] {
		start := max(p.head, p.indexFrom(seq+1))
		for i := start; i < len(p.sizes); i++ {
			if p.sizes[i] != 0 && !yield(p, i) {
				return
			}
		}
	}
}

// find returns the page and slot of seq, if it is a live paged message.
func (l *pagedList) find(seq uint64) (*indexPage, int, bool) {
	live := l.pages[l.first:]
	lo, hi := 0, len(live)
	for lo < hi {
		m := (lo + hi) / 2
		if live[m].maxSeq() < seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(live) || live[lo].base > seq {
		return nil, 0, false
	}
	p := live[lo]
	i := p.indexFrom(seq)
	if i >= len(p.sizes) || p.seqAt(i) != seq || p.sizes[i] == 0 {
		return nil, 0, false
	}
	return p, i, true
}

// minDeadline is the earliest deadline of a paged message (0: none).
func (l *pagedList) minDeadline() int64 {
	if len(l.byDeadline) == 0 {
		return 0
	}
	return l.byDeadline[0].minDL
}

// takeEarliest removes the paged message with the earliest deadline
// (ties: the lowest seq), scanning only the page that holds it.
func (l *pagedList) takeEarliest() slot {
	p := l.byDeadline[0]
	best := -1
	for i, d := range p.deadlines {
		if d != 0 && p.sizes[i] != 0 && (best < 0 || d < p.deadlines[best]) {
			best = i
		}
	}
	return l.take(p, best)
}

func (l *pagedList) fixHeap(p *indexPage) {
	switch {
	case p.minDL == 0 && p.heapIdx >= 0:
		heap.Remove(&l.byDeadline, p.heapIdx)
	case p.minDL != 0 && p.heapIdx < 0:
		heap.Push(&l.byDeadline, p)
	case p.minDL != 0:
		heap.Fix(&l.byDeadline, p.heapIdx)
	}
}

func (l *pagedList) reset() { *l = pagedList{outSeq: l.outSeq} }

// appendList moves every page of o behind l's; o's seqs are all above l's,
// in pages of their own (recovery starts new seqs on a page boundary).
func (l *pagedList) appendList(o *pagedList) {
	for _, p := range o.pages[o.first:] {
		if p.live == 0 {
			continue
		}
		p.heapIdx = -1
		l.pages = append(l.pages, p)
		if p.minDL != 0 {
			heap.Push(&l.byDeadline, p)
		}
	}
	l.n += o.n
	l.bytes += o.bytes
	l.nspilled += o.nspilled
	l.released = append(l.released, o.released...)
	l.outSeq = max(l.outSeq, o.outSeq)
	*o = pagedList{}
}

// pageHeap orders pages by their earliest deadline (ties: lower base).
type pageHeap []*indexPage

func (h pageHeap) Len() int { return len(h) }
func (h pageHeap) Less(i, j int) bool {
	if h[i].minDL != h[j].minDL {
		return h[i].minDL < h[j].minDL
	}
	return h[i].base < h[j].base
}
func (h pageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}
func (h *pageHeap) Push(x any) {
	p := x.(*indexPage)
	p.heapIdx = len(*h)
	*h = append(*h, p)
}
func (h *pageHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	p.heapIdx = -1
	return p
}

// ---- the queue's side ----

// refillMin is the fewest messages a refill reads back when the window ran
// dry (more when the consumers' credit asks for more), so that a queue
// read by one consumer at a time still reads its store in batches.
const refillMin = 64

// pagesLocked reports whether a new ready entry of level l goes behind
// the window. The window is shared by the levels; each keeps at least its
// head in it.
func (q *Queue) pagesLocked(l *level) bool {
	if !(q.persist || q.spills) || q.b.windowBytes <= 0 {
		return false
	}
	if l.paged.n > 0 {
		return true
	}
	if l.main.n == 0 {
		return false // the window always takes one message
	}
	return q.windowBytesLocked() > q.b.windowBytes // e is counted already
}

// windowBytesLocked is the size of the ready messages held with their
// bodies (the window and the quorum returns).
func (q *Queue) windowBytesLocked() int64 { return q.readyBytes - q.pagedBytesLocked() }

// pageOutLocked drops the bodies of paged messages whose appends are durable.
func (q *Queue) pageOutLocked() {
	if q.prio == nil {
		q.level.pageOutLocked(q)
		return
	}
	for _, l := range q.prio.active {
		l.pageOutLocked(q)
	}
}

func (l *level) pageOutLocked(q *Queue) {
	if l.paged.n > 0 {
		l.paged.pageOut(q.durableSeq.Load(), q.appendFailed)
	}
	if l.fresh.n > 0 {
		l.fresh.pageOut(q.durableSeq.Load(), q.appendFailed)
	}
}

// noteDurable advances the queue's durable watermark to seq.
func (q *Queue) noteDurable(seq uint64) {
	for {
		cur := q.durableSeq.Load()
		if seq <= cur || q.durableSeq.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// noteFailed records that the appends of [lo, hi] failed: those messages
// keep their in-memory copies (they are not in the store to read back).
func (q *Queue) noteFailed(lo, hi uint64) {
	q.failedMu.Lock()
	q.failed = append(q.failed, [2]uint64{lo, hi})
	q.failedMu.Unlock()
}

func (q *Queue) appendFailed(seq uint64) bool {
	q.failedMu.Lock()
	defer q.failedMu.Unlock()
	for _, r := range q.failed {
		if seq >= r[0] && seq <= r[1] {
			return true
		}
	}
	return false
}

// appendDone wraps done for a batch appending recs to queues among qs: once
// the batch is durable, each queue's durable watermark moves to its highest
// seq in it, which lets the queue page those messages out.
func appendDone(qs []*Queue, recs []store.Record, done func(error)) func(error) {
	type span struct {
		q      *Queue
		lo, hi uint64
	}
	var spans []span
	for _, r := range recs {
		i := slices.IndexFunc(spans, func(s span) bool { return s.q.id == r.Queue })
		if i < 0 {
			j := slices.IndexFunc(qs, func(q *Queue) bool { return q.id == r.Queue })
			if j < 0 {
				continue
			}
			spans = append(spans, span{qs[j], r.Seq, r.Seq})
			continue
		}
		spans[i].lo, spans[i].hi = min(spans[i].lo, r.Seq), max(spans[i].hi, r.Seq)
	}
	return func(err error) {
		for _, s := range spans {
			if err != nil {
				s.q.noteFailed(s.lo, s.hi)
			} else {
				s.q.noteDurable(s.hi)
			}
		}
		done(err)
	}
}

// refillLocked moves messages from level l's paged list to its window: as
// many as the consumers' credit asks for (at least refillMin), within the
// window's bytes (at least one), with one sequential store read.
func (q *Queue) refillLocked(l *level) {
	l.pageOutLocked(q)
	want := max(int(min(q.creditLocked(), 1<<20)), refillMin)
	var got []slot
	var bytes int64
	for len(got) < want {
		p := l.paged.front()
		if p == nil {
			break
		}
		size := int64(p.sizes[p.head] - 1)
		if len(got) > 0 && bytes+size > q.b.windowBytes {
			break
		}
		s, _ := l.paged.popFront()
		got = append(got, s)
		bytes += size
	}
	for _, e := range q.loadSlotsLocked(l, got, true) {
		e.ready = true
		l.main.pushBack(e)
		q.ttl.add(e)
	}
	if q.spills {
		// The log's head follows the spilled slots taken; once the list is
		// empty, the entries waiting for their write are gone too.
		q.spillDirty = q.spillDirty || l.paged.n+l.fresh.n == 0 ||
			slices.ContainsFunc(got, func(s slot) bool { return s.spill != 0 })
		q.releaseSpillLocked()
	}
}

// loadSlotsLocked returns the entries of slots of level l (in seq order):
// pinned ones as they are, the others read back from the store in one
// pass. A message the store cannot give back (damaged, missing) is
// reported and, when ready, no longer counted.
func (q *Queue) loadSlotsLocked(l *level, slots []slot, ready bool) []*entry {
	out := make([]*entry, 0, len(slots))
	var need, spilled []slot
	for _, s := range slots {
		switch {
		case s.e != nil:
		case s.spill != 0:
			spilled = append(spilled, s)
		default:
			need = append(need, s)
		}
	}
	loaded := make(map[uint64]*entry, len(need)+len(spilled))
	if len(spilled) > 0 {
		q.readSpilledLocked(l, spilled, loaded)
	}
	if len(need) > 0 {
		read := func(from, to uint64) error {
			return q.b.st.IterateRange(q.id, from, to, func(seq uint64, msg, state []byte) error {
				m, err := decodeMessage(msg)
				if err != nil {
					return fmt.Errorf("%w: message %d: %w", store.ErrCorrupt, seq, err)
				}
				e := &entry{msg: m, seq: seq, dc: m.DeliveryCount, heapIdx: -1, stored: true, prio: l.prio}
				if err := decodeState(e, state); err != nil {
					return fmt.Errorf("%w: state of message %d: %w", store.ErrCorrupt, seq, err)
				}
				e.delivered, e.retained = false, false
				loaded[seq] = e
				return nil
			})
		}
		if err := read(need[0].seq, need[len(need)-1].seq+1); err != nil {
			// Isolate the damage: read each message not read yet on its own.
			for _, s := range need {
				if loaded[s.seq] == nil {
					if err := read(s.seq, s.seq+1); err != nil {
						q.b.storeLog.Error("page read", "paged message unreadable", "queue", q.String(), "seq", s.seq, "err", err)
					}
				}
			}
		}
	}
	for _, s := range slots {
		e := s.e
		if e == nil {
			e = loaded[s.seq]
			if e == nil {
				q.b.unreadable.Add(1)
				q.b.log.Error("paged message lost: the store could not give it back",
					"queue", q.name, "vhost", q.vh.name, "seq", s.seq, "bytes", s.size)
				if ready {
					q.readyCount--
					q.readyBytes -= s.size
				}
				continue
			}
			if ready {
				q.readyBytes += e.size() - s.size
			}
		}
		out = append(out, e)
	}
	return out
}

// expirePagedLocked dead-letters (or drops) s, a paged message whose
// deadline passed and that is no longer counted as ready. Without a
// dead-letterer its body is never read.
func (q *Queue) expirePagedLocked(l *level, s slot) {
	if s.e != nil {
		s.e.ready = false
		q.deadLocked(s.e, ReasonExpired, nil)
		return
	}
	if s.spill != 0 {
		q.spillDirty = true // released after the expiry
		if q.b.deadLetterer() == nil {
			return
		}
	}
	if q.b.deadLetterer() == nil {
		q.pend.Settle(q.id, s.seq)
		return
	}
	s.size = 0 // already uncounted
	for _, e := range q.loadSlotsLocked(l, []slot{s}, false) {
		q.deadLocked(e, ReasonExpired, nil)
	}
}

// peekPagedLocked returns up to n paged messages of level l from the
// front without taking them.
func (q *Queue) peekPagedLocked(l *level, n int) []*entry {
	if n <= 0 || l.paged.n == 0 {
		return nil
	}
	var slots []slot
	l.paged.each(func(p *indexPage, i int) bool {
		slots = append(slots, p.slotAt(i))
		return len(slots) < n
	})
	return q.loadSlotsLocked(l, slots, false)
}

// clearPagedLocked drops every paged message; settle: their stored copies
// are settled too (purge; a delete removes the queue's store at once).
func (q *Queue) clearPagedLocked(settle bool) {
	q.eachLevel(func(l *level) bool {
		q.clearPagedListLocked(&l.paged, settle)
		q.clearPagedListLocked(&l.fresh, settle)
		return true
	})
	q.clearSpillLocked()
}

func (q *Queue) clearPagedListLocked(l *pagedList, settle bool) {
	l.each(func(p *indexPage, i int) bool {
		var e *entry
		if p.pinned != nil {
			e = p.pinned[i]
		}
		switch {
		case e != nil:
			e.ready, e.paged = false, false
			if settle {
				q.settleStoredLocked(e)
			}
		case settle && p.spillIndex(i) == 0:
			q.pend.Settle(q.id, p.seqAt(i))
		}
		return true
	})
	l.reset()
}

// takePagedLocked removes e, a pinned paged entry, from the paged list.
func (q *Queue) takePagedLocked(e *entry) {
	lv := q.levelOf(e)
	l := &lv.paged
	if q.loading && e.seq > q.loadEnd {
		l = &lv.fresh
	}
	if p, i, ok := l.find(e.seq); ok {
		s := l.take(p, i)
		e.ready = false
		q.readyCount--
		q.readyBytes -= s.size
	}
}
