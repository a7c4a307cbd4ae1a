package router

import (
	"errors"
	"slices"

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
		pm = PeekedMessage{Msg: e.msg.withState(e.dc, e.anns()), DeliveryCount: e.dc, AcquiredCount: e.acquired,
			Redelivered: e.acquired > 0 || e.dc > 0, FirstAcquirer: h.FirstAcquirer, Remaining: remaining}
	}
	return BrowsedMessage{PeekedMessage: pm, Position: pos, Seq: e.seq,
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
			out = append(out, q.browsed(e, i, q.readyCount-i-1, true))
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
	q.unlock()
	q.flushDead()
	return out, next, depth
}

// BrowseAfter returns up to limit ready messages with a Seq above seq that
// match (nil: every one), testing at most scan messages: the quorum
// returns first, then the main list in Seq order. last is the highest Seq
// tested of the main list (seq when none), so that a caller walking the
// queue with it never sees a message twice; done reports that the main
// list has nothing after last. Position and Annotations are not set.
func (q *Queue) BrowseAfter(seq uint64, limit, scan int, match MessageFilter) (out []BrowsedMessage, last uint64, done bool) {
	last = seq
	q.mu.Lock()
	if q.deleted {
		q.unlock()
		return nil, last, true
	}
	q.expireLocked(q.nowNano())
	done = true
	if q.prio != nil {
		out, last, done = q.browseAfterLevelsLocked(seq, limit, scan, match)
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
			out = append(out, q.browsed(e, 0, 0, false))
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
				out = append(out, q.browsed(e, 0, 0, false))
			}
			return true
		})
	}
	// Returned messages (quorum) are few and out of Seq order: those within
	// the range just walked go with it.
	for e := range q.returns.all() {
		if e.seq > seq && (done || e.seq <= last) && (match == nil || match.Match(e.msg, e.anns())) {
			out = append(out, q.browsed(e, 0, 0, false))
		}
	}
	slices.SortFunc(out, func(a, b BrowsedMessage) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	q.unlock()
	q.flushDead()
	return out, last, done
}

// browseAfterLevelsLocked is BrowseAfter's walk of a queue with priority
// levels: the messages of every level after seq, merged in seq order, so
// that a caller walking the queue by seq sees each message once.
func (q *Queue) browseAfterLevelsLocked(seq uint64, limit, scan int, match MessageFilter) (out []BrowsedMessage, last uint64, done bool) {
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
	slices.SortFunc(refs, func(a, b ref) int { return cmpSeq(a.sl.seq, b.sl.seq) })
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
			out = append(out, q.browsed(e, 0, 0, false))
		}
	}
	return out, last, !truncated
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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

// MoveReady moves the ready message seq of q into targets, as m (a copy
// carrying the annotations the move gives it): the copies appended to
// durable targets, the removal of the stored original from q and, when
// metaKey is not empty, the metadata record metaKey=metaValue are one
// atomic store batch, so after a crash either all of them happened or none
// did. The message leaves q only when at least one target accepts it.
// done is called once the batch is durable (at once when nothing was
// stored), with the store's error if it failed; the in-memory move is then
// undone where the messages are still ready.
func (q *Queue) MoveReady(seq uint64, m *Message, targets []*Queue, metaKey string, metaValue []byte, done func(MoveResult, error)) {
	var enc []byte
	st := q.b.st
	if m.Header.Durable && st != nil && slices.ContainsFunc(targets, func(t *Queue) bool { return t.persist }) {
		enc = q.b.encode(m)
	}
	lockSet := append(slices.Clone(targets), q)
	if slices.Contains(targets, q) {
		lockSet = slices.Clone(targets)
	}
	ls := lockQueues(lockSet)
	e := q.readyBySeqLocked(seq)
	fromPaged := false
	if e == nil && !q.deleted {
		e = q.takePagedBySeqLocked(seq)
		fromPaged = e != nil
	}
	if e == nil || q.deleted {
		unlockQueues(ls)
		done(MoveResult{}, ErrNotReady)
		return
	}
	var recs []store.Record
	res := MoveResult{Outcomes: make([]Outcome, len(targets))}
	for i, t := range targets {
		switch t.enqueueLocked(m, enc, &recs) {
		case enqueued:
			res.Outcomes[i] = Outcome{Kind: Accepted}
			res.Moved = true
		case enqueueRejected:
			res.Outcomes[i] = Outcome{Kind: Rejected, Error: maxLenError(t.name)}
		default:
			res.Outcomes[i] = Outcome{Kind: Released}
		}
	}
	if !res.Moved {
		if fromPaged {
			q.restoreReadyLocked(e)
		}
		unlockQueues(ls)
		done(res, nil)
		return
	}
	var placedCopies []placed
	for _, r := range recs {
		for _, t := range targets {
			if t.id == r.Queue {
				placedCopies = append(placedCopies, placed{t, t.entryBySeqLocked(r.Seq)})
			}
		}
	}
	if !fromPaged {
		inReturns := e.inReturns
		q.takeReadyLocked(e)
		q.holeLocked(e, inReturns)
	}
	batch := new(store.Batch).Append(recs...)
	if e.stored && !e.forwarded {
		batch.Settle(q.id, e.seq)
	}
	if metaKey != "" && st != nil {
		batch.PutMeta(metaKey, metaValue)
	}
	if batch.Len() == 0 || st == nil {
		unlockQueues(ls)
		done(res, nil)
		return
	}
	wasStored := e.stored
	e.stored, e.forwarded = false, wasStored
	st.Commit(batch, func(err error) {
		if err != nil {
			q.b.logStoreErr(err)
			go func() {
				withdraw(placedCopies)
				q.mu.Lock()
				if !q.deleted && !e.ready {
					e.stored, e.forwarded = wasStored, false
					q.restoreReadyLocked(e)
				}
				q.unlock()
				done(res, err)
			}()
			return
		}
		done(res, nil)
	})
	unlockQueues(ls)
}

// readyBySeqLocked finds the ready entry seq: binary search in the main
// list, a walk of the (short) returns list.
func (q *Queue) readyBySeqLocked(seq uint64) *entry {
	var found *entry
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
