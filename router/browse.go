package router

import (
	"cmp"
	"container/heap"
	"errors"
	"slices"
	"time"

	"github.com/epitaph-mq/epitaph/router/store"
)

// Browsing and moving single ready messages, for the management plane's
// peek and redrive. Nothing here acquires a message or changes its delivery
// state: a browsed message stays where it is, and a moved one leaves its
// queue only in the same step that puts it into its targets.

// BrowsedMessage is a ready message seen by Browse or BrowseAfter.
type BrowsedMessage struct {
	PeekedMessage
	// Position is the message's place in delivery order when it was seen
	// (0: the next one a consumer would get).
	Position int
	// Seq identifies the message within its queue (MoveReady).
	Seq uint64
	// DeliveryTime is, for a delayed message (quorum delayed retry), when
	// it becomes ready again, in ms since the Unix epoch; 0 for a ready one.
	DeliveryTime int64

	delivery Delivery
}

// Delivery is the message as a consumer would receive it now (header and
// annotations), for a browsing link to send a copy of.
func (bm *BrowsedMessage) Delivery() *Delivery { return &bm.delivery }

// browsed describes e for Browse and BrowseAfter; the decoded
// annotations (PeekedMessage.Annotations, the costly part) only for a
// peek.
func (q *Queue) browsed(e *entry, pos, remaining int, withAnns bool) BrowsedMessage {
	h := e.msg.Header
	h.DeliveryCount = e.dc
	h.FirstAcquirer = e.acquired == 0 && e.dc == 0 && !hasDeaths(e.anns())
	var pm PeekedMessage
	if withAnns {
		pm = q.peekedLocked(e, remaining)
	} else {
		msg := e.msg
		if e.dc != msg.DeliveryCount || e.ext != nil && e.ext.hasAnns {
			msg = msg.withState(e.dc, e.anns()) // the message itself is immutable: shared when its state is the entry's
		}
		pm = PeekedMessage{Msg: msg, DeliveryCount: e.dc, AcquiredCount: e.acquired,
			Redelivered: e.acquired > 0 || e.dc > 0, FirstAcquirer: h.FirstAcquirer, Remaining: remaining}
	}
	var at int64
	if e.isDelayed() {
		at = e.ext.readyAt / int64(time.Millisecond)
	}
	return BrowsedMessage{PeekedMessage: pm, Position: pos, Seq: e.seq, DeliveryTime: at,
		delivery: Delivery{Msg: e.msg, Header: h, anns: e.anns(), acquired: e.acquired, quorum: q.typ == Quorum}}
}

// Browse returns up to limit ready messages that match (nil: every one),
// in delivery order, starting at position pos, testing at most scan
// messages. next is the position after the last message tested (where a
// further page starts), depth the number of ready messages. The cost is
// the positions skipped (pointer steps, whole chunks at a time while the
// queue holds no tombstones) plus the messages tested, never the queue.
// match is called with the queue's lock held (as MessageFilter says).
func (q *Queue) Browse(pos, limit, scan int, match MessageFilter) (out []BrowsedMessage, next, depth int) {
	if pos < 0 {
		pos = 0
	}
	q.mu.Lock()
	if q.deleted {
		q.unlock()
		return nil, pos, 0
	}
	q.expireLocked(q.nowNano())
	depth = q.readyCount
	next = pos
	i := 0
	visit := func(e *entry) bool {
		if len(out) >= limit || scan <= 0 {
			return false
		}
		scan--
		next = i + 1
		if match == nil || match.Match(e.msg, e.anns()) {
			out = append(out, q.browsed(e, i, max(q.readyCount-i-1, 0), true))
		}
		i++
		return true
	}
	skip := pos
	cont := true
	walk := func(l *readyList) {
		skipped := l.skip(skip)
		i += skipped
		skip -= skipped
		if skip > 0 {
			return
		}
		for e := range l.from(skipped) {
			if !visit(e) {
				cont = false
				return
			}
		}
	}
	walk(&q.returns)
	// Then each level, highest first: its window, and behind it its paged
	// messages in seq order.
	q.eachLevel(func(l *level) bool {
		if cont {
			walk(&l.main)
		}
		if cont && l.paged.n > 0 {
			passed := min(skip, l.paged.n) // the positions passed over come first
			i += passed
			skip -= passed
			if skip == 0 {
				cont = !q.visitPagedLocked(l, 0, passed, visit)
			}
		}
		return cont
	})
	if cont && len(q.delayed) > 0 {
		// Then the delayed messages (quorum delayed retry), in the order
		// they become ready: positions after the ready ones.
		passed := min(skip, len(q.delayed))
		i += passed
		skip -= passed
		if skip == 0 {
			q.visitDelayedLocked(passed, func(e *entry) bool { return visit(e) })
		}
	}
	q.unlock()
	q.flushDead()
	return out, next, depth
}

// visitDelayedLocked calls visit for the delayed messages in the order
// they become ready, passing over the first skip of them, until visit
// returns false: a heap walk of a copy of the delayed set, so its cost is
// the copy plus the messages visited, not a sort of them all.
func (q *Queue) visitDelayedLocked(skip int, visit func(e *entry) bool) {
	h := delayOrder(slices.Clone(q.delayed))
	for n := 0; len(h) > 0; n++ {
		e := heap.Pop(&h).(*entry)
		if n >= skip && !visit(e) {
			return
		}
	}
}

// DelayCursor is where a walk of a queue's delayed messages in the order
// they become ready (BrowseDelayed) has got to; the zero value is the
// start.
type DelayCursor struct {
	due int64
	ord uint64
}

// BrowseDelayed returns up to limit delayed messages (quorum delayed
// retry) that match (nil: every one), in the order they become ready,
// after cursor, and the cursor after the last one returned. A message
// delayed later than the walk got to, to become ready before, is not
// returned. The cost is a copy of the delayed set plus a heap step per
// message passed or returned. match is called with the queue's lock held.
func (q *Queue) BrowseDelayed(cursor DelayCursor, limit int, match MessageFilter) ([]BrowsedMessage, DelayCursor) {
	var out []BrowsedMessage
	q.mu.Lock()
	if !q.deleted && len(q.delayed) > 0 {
		q.visitDelayedLocked(0, func(e *entry) bool {
			due, ord := dueOf(e), e.ext.delayOrd
			if due < cursor.due || due == cursor.due && ord <= cursor.ord {
				return true
			}
			if len(out) >= limit {
				return false
			}
			cursor = DelayCursor{due: due, ord: ord}
			if match == nil || match.Match(e.msg, e.anns()) {
				out = append(out, q.browsed(e, 0, 0, false))
			}
			return true
		})
	}
	q.unlock()
	return out, cursor
}

// delayOrder orders a copy of a delayed set as delayHeap does, leaving the
// entries' heap indexes alone.
type delayOrder []*entry

func (h delayOrder) Len() int           { return len(h) }
func (h delayOrder) Less(i, j int) bool { return delayHeap(h).Less(i, j) }
func (h delayOrder) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayOrder) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *delayOrder) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// BrowseAfter returns up to limit ready messages with a Seq above seq that
// match (nil: every one), testing at most scan messages: the quorum
// returns first, then the main list in Seq order. last is the highest Seq
// tested of the main list (seq when none), so that a caller walking the
// queue with it never sees a message twice; done reports that the main
// list has nothing after last. Position and Annotations are not set.
func (q *Queue) BrowseAfter(seq uint64, limit, scan int, match MessageFilter) (out []BrowsedMessage, last uint64, done bool) {
	return q.BrowseAfterAppend(nil, seq, limit, scan, match, false)
}

// BrowseAfterAppend is BrowseAfter appending to out (a caller walking a
// queue reuses one slice); withDelayed: the delayed messages (quorum
// delayed retry) of the range walked are among those returned, in Seq
// order with the others, their DeliveryTime set.
func (q *Queue) BrowseAfterAppend(out []BrowsedMessage, seq uint64, limit, scan int, match MessageFilter, withDelayed bool) (_ []BrowsedMessage, last uint64, done bool) {
	return browseAfter(q, out, seq, limit, scan, match, withDelayed,
		func(e *entry) BrowsedMessage { return q.browsed(e, 0, 0, false) },
		func(bm *BrowsedMessage) uint64 { return bm.Seq })
}

// WalkedMessage is a message seen by WalkAfter: what moving it needs.
type WalkedMessage struct {
	Seq uint64
	// Msg carries the queue's delivery count and annotations for it.
	Msg *Message
	// DeliveryTime is as BrowsedMessage's (a delayed message's).
	DeliveryTime int64
}

// WalkAfter is BrowseAfterAppend with withDelayed, giving each message's
// Seq and message only (a walk that moves what it sees, as a redrive,
// needs no more, and writes far less per message).
func (q *Queue) WalkAfter(out []WalkedMessage, seq uint64, limit, scan int, match MessageFilter) (_ []WalkedMessage, last uint64, done bool) {
	return browseAfter(q, out, seq, limit, scan, match, true, q.walked,
		func(wm *WalkedMessage) uint64 { return wm.Seq })
}

// walked describes e for WalkAfter.
func (q *Queue) walked(e *entry) WalkedMessage {
	msg := e.msg
	if e.dc != msg.DeliveryCount || e.ext != nil && e.ext.hasAnns {
		msg = msg.withState(e.dc, e.anns())
	}
	var at int64
	if e.isDelayed() {
		at = e.ext.readyAt / int64(time.Millisecond)
	}
	return WalkedMessage{Seq: e.seq, Msg: msg, DeliveryTime: at}
}

// browseAfter is BrowseAfterAppend's walk, making each element with mk.
func browseAfter[T any](q *Queue, out []T, seq uint64, limit, scan int, match MessageFilter, withDelayed bool,
	mk func(*entry) T, seqOf func(*T) uint64) (_ []T, last uint64, done bool) {
	base := len(out)
	limit += base
	last = seq
	q.mu.Lock()
	if q.deleted {
		q.unlock()
		return out, last, true
	}
	q.expireLocked(q.nowNano())
	done = true
	if q.prio != nil {
		out, last, done = browseAfterLevelsLocked(q, out, seq, limit, scan, match, mk)
	}
	for e := range q.main.after(seq) {
		if q.prio != nil {
			break
		}
		if len(out) >= limit || scan <= 0 {
			done = false
			break
		}
		scan--
		last = e.seq
		if match == nil || match.Match(e.msg, e.anns()) {
			out = append(out, mk(e))
		}
	}
	if done && q.paged.n > 0 && q.prio == nil {
		// Behind the window: the paged messages, whose seqs are above the
		// window's.
		q.visitPagedLocked(&q.level, last, 0, func(e *entry) bool {
			if len(out) >= limit || scan <= 0 {
				done = false
				return false
			}
			scan--
			last = e.seq
			if match == nil || match.Match(e.msg, e.anns()) {
				out = append(out, mk(e))
			}
			return true
		})
	}
	// Returned messages (quorum) are few and out of Seq order: those within
	// the range just walked go with it.
	walked := len(out)
	for e := range q.returns.all() {
		if e.seq > seq && (done || e.seq <= last) && (match == nil || match.Match(e.msg, e.anns())) {
			out = append(out, mk(e))
		}
	}
	if withDelayed {
		// So are delayed messages (quorum delayed retry): they move with
		// the ready ones of their range.
		for _, e := range q.delayed {
			if e.seq > seq && (done || e.seq <= last) && (match == nil || match.Match(e.msg, e.anns())) {
				out = append(out, mk(e))
			}
		}
	}
	if len(out) > walked {
		// The walk itself is in Seq order.
		slices.SortFunc(out[base:], func(a, b T) int { return cmp.Compare(seqOf(&a), seqOf(&b)) })
	}
	q.unlock()
	q.flushDead()
	return out, last, done
}

// browseAfterLevelsLocked is BrowseAfter's walk of a queue with priority
// levels: the messages of every level after seq, merged in seq order, so
// that a caller walking the queue by seq sees each message once.
func browseAfterLevelsLocked[T any](q *Queue, out []T, seq uint64, limit, scan int, match MessageFilter, mk func(*entry) T) (_ []T, last uint64, done bool) {
	last, done = seq, true
	type ref struct {
		e  *entry
		l  *level
		sl slot
	}
	var refs []ref
	truncated := false
	for _, l := range q.prio.active {
		n := 0
		for e := range l.main.after(seq) {
			if n >= scan {
				truncated = true
				break
			}
			refs = append(refs, ref{e: e, sl: slot{seq: e.seq}})
			n++
		}
		l.paged.eachAfter(seq, func(p *indexPage, i int) bool {
			if n >= scan {
				truncated = true
				return false
			}
			refs = append(refs, ref{l: l, sl: p.slotAt(i)})
			n++
			return true
		})
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Compare(a.sl.seq, b.sl.seq) })
	for _, r := range refs {
		if len(out) >= limit || scan <= 0 {
			return out, last, false
		}
		e := r.e
		if e == nil {
			es := q.loadSlotsLocked(r.l, []slot{r.sl}, false)
			if len(es) == 0 {
				continue
			}
			e = es[0]
		}
		scan--
		last = e.seq
		if match == nil || match.Match(e.msg, e.anns()) {
			out = append(out, mk(e))
		}
	}
	return out, last, !truncated
}

// skip returns how many ready entries (at most n) there are to pass over
// to start n ready entries in: at once while the list has no tombstones,
// else by walking it.
func (l *readyList) skip(n int) int {
	if l.holes == 0 {
		return min(n, l.n)
	}
	live := 0
	for range l.all() {
		if live >= n {
			break
		}
		live++
	}
	return live
}

// from yields the ready entries after the first k ready ones.
func (l *readyList) from(k int) func(func(*entry) bool) {
	return func(yield func(*entry) bool) {
		if l.holes == 0 {
			// Index straight into the chunks.
			idx := l.head + k
			for _, c := range l.chunks[l.first:] {
				if idx >= len(c) {
					idx -= len(c)
					continue
				}
				for _, e := range c[idx:] {
					if !yield(e) {
						return
					}
				}
				idx = 0
			}
			return
		}
		i := 0
		for e := range l.all() {
			if i >= k && !yield(e) {
				return
			}
			i++
		}
	}
}

// ErrNotReady is returned by MoveReady when the message is no longer ready
// in its queue (taken by a consumer, expired, moved or purged meanwhile).
var ErrNotReady = errors.New("message no longer ready")

// MoveResult is what MoveReady did.
type MoveResult struct {
	// Outcomes are the targets' outcomes, as Queue.Enqueue's.
	Outcomes []Outcome
	// Moved reports that at least one target took the message, so it left
	// its source queue.
	Moved bool
}

// MoveReady moves the ready message seq of q into targets, as m: a
// MoveBatch of one message whose progress record, when metaKey is not
// empty, is metaKey=metaValue.
func (q *Queue) MoveReady(seq uint64, m *Message, targets []*Queue, metaKey string, metaValue []byte, done func(MoveResult, error)) {
	moves := []ReadyMove{{Seq: seq, Msg: m, Targets: targets, Outcomes: make([]Outcome, len(targets))}}
	var progress func([]ReadyMove) (string, []byte)
	if metaKey != "" {
		progress = func([]ReadyMove) (string, []byte) { return metaKey, metaValue }
	}
	q.MoveBatch(moves, progress, func(err error) {
		mv := &moves[0]
		switch {
		case errors.Is(mv.Err, ErrNotReady):
			done(MoveResult{}, ErrNotReady)
		case err != nil:
			done(MoveResult{Outcomes: mv.Outcomes, Moved: true}, err)
		default:
			done(MoveResult{Outcomes: mv.Outcomes, Moved: mv.Err == nil}, nil)
		}
	})
}

// ErrMoveRefused is a ReadyMove's error when every target refused the
// message (x-overflow reject-publish, or deleted meanwhile).
var ErrMoveRefused = errors.New("every target refused the message")

// ReadyMove is one message of a MoveBatch: the message Seq of the source
// queue goes into Targets as Msg (a copy carrying the annotations the move
// gives it).
type ReadyMove struct {
	Seq     uint64
	Msg     *Message
	Targets []*Queue
	// Outcomes, when the caller gives it the length of Targets, receives
	// each target's outcome (as Queue.Enqueue's).
	Outcomes []Outcome
	// Err is set by MoveBatch before progress is called: nil when at least
	// one target took the message (it left the source), ErrNotReady when
	// it was no longer ready (nor delayed) in the source, ErrMoveRefused
	// when every target refused it (it stays).
	Err error
}

// MoveBatch moves messages of q, each into its targets, in the order
// given, in one step: q and every target are locked once (in QueueID
// order), and the copies appended to durable targets, the removals of the
// stored originals from q and the record progress returns (when progress
// is not nil and returns a key) are one atomic store batch, so after a
// crash either all of them happened or none did. A message leaves q only
// when at least one of its targets accepts it. A ready message is moved
// from wherever it is (the window, behind it, the quorum returns, or the
// delayed set, which it then leaves).
//
// progress is called with the locks held, once every move's Err is set,
// so that the caller's progress record counts what this batch did. done
// is called once the batch is durable (at once when nothing was stored),
// with the store's error if it failed; the in-memory moves are then undone
// where the messages are still there, and no move of the batch happened.
func (q *Queue) MoveBatch(moves []ReadyMove, progress func([]ReadyMove) (string, []byte), done func(error)) {
	st := q.b.st
	var encs [][]byte
	if st != nil {
		for i := range moves {
			mv := &moves[i]
			if mv.Msg.Header.Durable && slices.ContainsFunc(mv.Targets, func(t *Queue) bool { return t.persist }) {
				if encs == nil {
					encs = make([][]byte, len(moves))
				}
				encs[i] = q.b.encode(mv.Msg)
			}
		}
	}
	lockSet := []*Queue{q}
	for i := range moves {
		for _, t := range moves[i].Targets {
			if !slices.Contains(lockSet, t) {
				lockSet = append(lockSet, t)
			}
		}
	}
	ls := lockQueues(lockSet)
	type taken struct {
		e         *entry
		from      uint8 // takenReady, takenPaged, takenDelayed
		wasStored bool
	}
	var (
		recs      []store.Record
		copies    []placed
		sources   []taken
		delayedBy map[uint64]*entry
		batch     = new(store.Batch)
	)
	for i := range moves {
		mv := &moves[i]
		var enc []byte
		if encs != nil {
			enc = encs[i]
		}
		var e *entry
		from := takenReady
		if !q.deleted {
			e = q.readyBySeqLocked(mv.Seq)
			if e == nil {
				if e = q.takePagedBySeqLocked(mv.Seq); e != nil {
					from = takenPaged
				}
			}
			if e == nil && len(q.delayed) > 0 {
				if delayedBy == nil {
					delayedBy = make(map[uint64]*entry, len(q.delayed))
					for _, d := range q.delayed {
						delayedBy[d.seq] = d
					}
				}
				if d := delayedBy[mv.Seq]; d != nil && d.isDelayed() {
					e, from = d, takenDelayed
				}
			}
		}
		if e == nil {
			mv.Err = ErrNotReady
			continue
		}
		moved := false
		for j, t := range mv.Targets {
			n := len(recs)
			res := t.enqueueLocked(mv.Msg, enc, &recs)
			if len(recs) > n {
				copies = append(copies, placed{t, t.entryBySeqLocked(recs[len(recs)-1].Seq)})
			}
			var out Outcome
			switch res {
			case enqueued:
				out, moved = Outcome{Kind: Accepted}, true
			case enqueueRejected:
				out = Outcome{Kind: Rejected, Error: maxLenError(t.name)}
			default:
				out = Outcome{Kind: Released}
			}
			if len(mv.Outcomes) == len(mv.Targets) {
				mv.Outcomes[j] = out
			}
		}
		if !moved {
			if from == takenPaged {
				q.restoreReadyLocked(e)
			}
			mv.Err = ErrMoveRefused
			continue
		}
		switch from {
		case takenReady:
			inReturns := e.inReturns
			q.takeReadyLocked(e)
			q.holeLocked(e, inReturns)
		case takenDelayed:
			q.undelayLocked(e)
		}
		if e.stored && !e.forwarded {
			batch.Settle(q.id, e.seq)
		}
		if st != nil {
			sources = append(sources, taken{e: e, from: from, wasStored: e.stored})
		}
		e.stored, e.forwarded = false, e.stored
	}
	// Moves mostly take the head of a list: drop the tombstones they left
	// there at once, so the list never has to compact around them.
	q.returns.front()
	q.eachLevel(func(l *level) bool {
		l.main.front()
		return true
	})
	if progress != nil && st != nil {
		if key, val := progress(moves); key != "" {
			batch.PutMeta(key, val)
		}
	}
	batch.Append(recs...)
	if batch.Len() == 0 || st == nil {
		unlockQueues(ls)
		done(nil)
		return
	}
	st.Commit(batch, appendDone(ls, recs, func(err error) {
		if err != nil {
			q.b.logStoreErr(err)
			go func() {
				withdraw(copies)
				q.mu.Lock()
				for _, s := range sources {
					if q.deleted {
						break
					}
					s.e.stored, s.e.forwarded = s.wasStored, false
					switch {
					case s.from == takenDelayed:
						q.pushDelayedLocked(s.e, s.e.ext.readyAt)
					case !s.e.ready:
						q.restoreReadyLocked(s.e)
					}
				}
				q.unlock()
				done(err)
			}()
			return
		}
		done(nil)
	}))
	unlockQueues(ls)
}

// Where MoveBatch took a message from.
const (
	takenReady uint8 = iota
	takenPaged
	takenDelayed
)

// readyBySeqLocked finds the ready entry seq: binary search in the main
// list, a walk of the (short) returns list.
func (q *Queue) readyBySeqLocked(seq uint64) *entry {
	var found *entry
	if q.prio == nil {
		// A walk in queue order (a redrive) mostly takes the head.
		if e := q.main.front(); e != nil && e.seq == seq {
			return e
		}
	}
	if seq > 0 {
		q.eachLevel(func(l *level) bool {
			for e := range l.main.after(seq - 1) {
				if e.seq == seq {
					found = e
				}
				break
			}
			return found == nil
		})
	}
	if found != nil {
		return found
	}
	for e := range q.returns.all() {
		if e.seq == seq {
			return e
		}
	}
	return nil
}

// restoreReadyLocked makes e, taken for a move that did not happen, ready
// again at its place in the window. A message taken from behind the
// window comes back into the window, so it may be delivered before older
// messages still paged.
func (q *Queue) restoreReadyLocked(e *entry) {
	e.ready = true
	q.readyCount++
	q.readyBytes += e.size()
	q.ttl.add(e)
	q.levelOf(e).main.insertBySeq(e)
	q.filtersSeeRequeueLocked(e)
}

// takePagedBySeqLocked takes the paged message seq out of the paged list,
// reading it back from the store; nil when it is not a paged ready
// message or cannot be read.
func (q *Queue) takePagedBySeqLocked(seq uint64) *entry {
	var l *level
	var p *indexPage
	var i int
	q.eachLevel(func(lv *level) bool {
		var ok bool
		if p, i, ok = lv.paged.find(seq); ok {
			l = lv
		}
		return l == nil
	})
	if l == nil {
		return nil
	}
	es := q.loadSlotsLocked(l, []slot{p.slotAt(i)}, false)
	if len(es) == 0 {
		return nil
	}
	sl := l.paged.take(p, i)
	q.spillDirty = q.spillDirty || sl.spill != 0
	e := es[0]
	e.ready = false
	q.readyCount--
	q.readyBytes -= sl.size
	return e
}

// visitPagedLocked calls visit for the paged messages of level l with a
// seq above after, in seq order, passing over the first skip of them,
// reading their bodies from the store in batches (they stay paged), until
// visit returns false. It reports whether visit stopped it.
func (q *Queue) visitPagedLocked(l *level, after uint64, skip int, visit func(e *entry) bool) (stopped bool) {
	skipped := 0
	for {
		var slots []slot
		l.paged.eachAfter(after, func(p *indexPage, i int) bool {
			after = p.seqAt(i)
			if skipped < skip {
				skipped++
				return true
			}
			slots = append(slots, p.slotAt(i))
			return len(slots) < filterReadBatch
		})
		if len(slots) == 0 {
			return false
		}
		for _, e := range q.loadSlotsLocked(l, slots, false) {
			if !visit(e) {
				return true
			}
		}
	}
}
