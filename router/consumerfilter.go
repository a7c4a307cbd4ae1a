package router

import (
	"iter"
	"slices"
	"sort"

	"github.com/epitaph-mq/epitaph/value"
)

// Consumer filters: a subscription with a MessageFilter gets only the ready
// messages the filter matches; the others stay where they are, in order,
// for the other consumers. This file is the whole hook: dispatch asks the
// subscription (filterHasWorkLocked, takeMatchLocked) and requeues tell it
// (filtersSeeRequeueLocked); nothing else in the queue knows of filters.
//
// Cost. A filtered subscription keeps a scan position: the highest seq of
// the queue's main list it has tested. Every ready message at or below it
// did not match, so a credit grant or an enqueue tests only the messages
// that arrived since, never the whole queue again; a filtered consumer on a
// deep queue where nothing matches costs one test per message enqueued.
// Messages that come back behind the position (a classic requeue goes back
// to its place, a quorum return to the returns list) are handed to each
// filtered subscription to test once (filterScan.retest), so a consumer
// that keeps releasing the head of a deep queue does not make a filtered
// one test the queue again; past maxRetest of them, the subscription tests
// the queue again from the oldest instead (bounded memory).

// MessageFilter decides which messages a consumer gets.
type MessageFilter interface {
	// Match reports whether the consumer gets m, whose broker annotations
	// (the dead-letter history among them) are anns. It is called with the
	// queue's lock held: it must not block or call into the queue, and
	// must not keep m, anns or anything read from them.
	Match(m *Message, anns value.Map) bool
}

// PropertyField names a field of a message's standard properties (the
// AMQP 1.0 properties section, in its order).
type PropertyField uint8

// Property fields.
const (
	PropMessageID PropertyField = iota
	PropUserID
	PropTo
	PropSubject
	PropReplyTo
	PropCorrelationID
	PropContentType
	PropContentEncoding
	PropAbsoluteExpiryTime
	PropCreationTime
	PropGroupID
	PropGroupSequence
	PropReplyToGroupID
)

// FieldReader is implemented by a Container that can read single fields of
// its message in place (no allocation), for consumer filters. The values
// alias the message and must not be kept.
type FieldReader interface {
	// Property is one standard property (KindAbsent when not set).
	Property(f PropertyField) (value.Scalar, error)
	// ApplicationProperty is the application's header value named key.
	ApplicationProperty(key string) (value.Scalar, error)
	// Annotation is the publisher's annotation (AMQP 1.0 message
	// annotation) named key; the broker's are in Message.Anns.
	Annotation(key string) (value.Scalar, error)
}

// filterScan is a filtered subscription's scan state (guarded by q.mu).
type filterScan struct {
	// seq: every ready message of the main list with a seq up to it has
	// been tested and did not match, but those in retest.
	seq uint64
	// returnsDirty: the quorum returns list may hold messages not tested
	// (at subscribe, and after retest overflowed).
	returnsDirty bool
	// retest: messages back in the queue since they were tested (or while
	// the returns list was being skipped), in the order they came back; a
	// message no longer ready is skipped.
	retest []*entry
	// levelSeq (a queue with priority levels): per level, how far past seq
	// the scan has tested that level's messages. Each level is scanned on
	// its own, highest first, so that the consumer gets its highest
	// priority match.
	levelSeq []uint64
}

// cursor is how far the scan has tested level p's messages.
func (f *filterScan) cursor(p uint8) uint64 {
	if f.levelSeq == nil {
		return f.seq
	}
	return max(f.seq, f.levelSeq[p])
}

// advance records that level p's messages up to seq were tested.
func (f *filterScan) advance(p uint8, seq uint64) {
	if f.levelSeq == nil {
		f.seq = seq
		return
	}
	f.levelSeq[p] = seq
}

// rewind makes the scan test again every message above to.
func (f *filterScan) rewind(to uint64) {
	f.seq = min(f.seq, to)
	for i, s := range f.levelSeq {
		f.levelSeq[i] = min(s, to)
	}
}

// maxRetest bounds a filtered subscription's retest list.
const maxRetest = 1024

// filterHasWorkLocked reports whether dispatch may find a message for s:
// always for an unfiltered subscription; for a filtered one, when messages
// it has not tested are ready.
func (s *Subscription) filterHasWorkLocked() bool {
	return s.filter == nil || len(s.scan.retest) > 0 || s.scan.returnsDirty || s.scan.seq < s.q.seq
}

// takeMatchLocked removes and returns the first ready message s's filter
// matches (quorum returns first), testing only what s has not tested; nil
// when none.
func (q *Queue) takeMatchLocked(s *Subscription) *entry {
	if q.prio != nil {
		return q.takeMatchLevelsLocked(s)
	}
	for i, e := range s.scan.retest {
		if e.ready && s.filter.Match(e.msg, e.anns()) {
			// Those before it are tested; those after it are not yet.
			n := copy(s.scan.retest, s.scan.retest[i+1:])
			clear(s.scan.retest[n:])
			s.scan.retest = s.scan.retest[:n]
			q.takeMiddleLocked(e)
			return e
		}
	}
	clear(s.scan.retest)
	s.scan.retest = s.scan.retest[:0]
	if s.scan.returnsDirty {
		for e := range q.returns.all() {
			if s.filter.Match(e.msg, e.anns()) {
				q.takeMiddleLocked(e)
				return e // the rest of the returns are tested next time
			}
		}
		s.scan.returnsDirty = false
	}
	if e := q.takeLevelMatchLocked(s, &q.level); e != nil {
		return e
	}
	// Nothing ready matched: every seq given out so far has been tested
	// (or is not ready, and comes back only through a requeue; or is being
	// read back after a restart, and rewindFilteredLocked shows it).
	s.scan.seq = q.seq
	return nil
}

// takeLevelMatchLocked takes the first message of level l after s's scan
// position that s's filter matches: the window, then behind it.
func (q *Queue) takeLevelMatchLocked(s *Subscription, l *level) *entry {
	for e := range l.main.after(s.scan.cursor(l.prio)) {
		s.scan.advance(l.prio, e.seq)
		if s.filter.Match(e.msg, e.anns()) {
			q.takeMiddleLocked(e)
			return e
		}
	}
	return q.takePagedMatchLocked(s, l)
}

// takeMatchLevelsLocked is takeMatchLocked for a queue with priority
// levels: the quorum returns first, then the highest level holding a
// match (retested messages among it), first in first out within it.
func (q *Queue) takeMatchLevelsLocked(s *Subscription) *entry {
	// Retested messages: those that match stay in the list (only the best
	// is taken, now or after a higher level's match), the others are
	// tested.
	var best *entry
	keep := s.scan.retest[:0]
	for _, e := range s.scan.retest {
		if !e.ready || !s.filter.Match(e.msg, e.anns()) {
			continue
		}
		keep = append(keep, e)
		if best == nil || !best.inReturns && (e.inReturns || e.prio > best.prio) {
			best = e
		}
	}
	clear(s.scan.retest[len(keep):])
	s.scan.retest = keep
	takeBest := func() *entry {
		if i := slices.Index(s.scan.retest, best); i >= 0 {
			s.scan.retest = slices.Delete(s.scan.retest, i, i+1)
		}
		q.takeMiddleLocked(best)
		return best
	}
	if best != nil && best.inReturns {
		return takeBest()
	}
	if s.scan.returnsDirty {
		for e := range q.returns.all() {
			if s.filter.Match(e.msg, e.anns()) {
				q.takeMiddleLocked(e)
				return e
			}
		}
		s.scan.returnsDirty = false
	}
	for _, l := range q.prio.active {
		if best != nil && l.prio <= best.prio {
			return takeBest()
		}
		if e := q.takeLevelMatchLocked(s, l); e != nil {
			return e
		}
		s.scan.levelSeq[l.prio] = q.seq // every message of l tested
	}
	if best != nil {
		return takeBest()
	}
	s.scan.seq = q.seq
	clear(s.scan.levelSeq)
	return nil
}

// filterReadBatch is how many paged messages a filtered consumer's scan
// reads from the store at a time.
const filterReadBatch = 256

// takePagedMatchLocked tests the paged messages behind the window after
// s's scan position, reading their bodies from the store in batches
// without moving them into the window (what does not match stays paged,
// so the window's bytes stay bounded), and takes the first that matches.
// Without it a filtered consumer would test only the window and never
// reach a match behind it, since only unfiltered consumers drain the
// window to make room.
func (q *Queue) takePagedMatchLocked(s *Subscription, l *level) *entry {
	for l.paged.n > 0 {
		var slots []slot
		l.paged.eachAfter(s.scan.cursor(l.prio), func(p *indexPage, i int) bool {
			slots = append(slots, p.slotAt(i))
			return len(slots) < filterReadBatch
		})
		if len(slots) == 0 {
			return nil
		}
		for _, e := range q.loadSlotsLocked(l, slots, false) {
			if !s.filter.Match(e.msg, e.anns()) {
				continue
			}
			p, i, ok := l.paged.find(e.seq)
			if !ok {
				continue
			}
			s.scan.advance(l.prio, e.seq)
			sl := l.paged.take(p, i)
			q.spillDirty = q.spillDirty || sl.spill != 0
			e.ready = false
			q.readyCount--
			q.readyBytes -= sl.size
			return e
		}
		s.scan.advance(l.prio, slots[len(slots)-1].seq)
	}
	return nil
}

// rewindFilteredLocked makes the filtered subscriptions test again the
// messages from seq on: messages read back after a restart (and those
// published meanwhile) join the queue below seqs the scans have passed.
func (q *Queue) rewindFilteredLocked(seq uint64) {
	if q.filteredSubs == 0 || seq == 0 {
		return
	}
	for _, s := range q.subs {
		if s.filter != nil {
			s.scan.rewind(seq - 1)
		}
	}
}

// takeMiddleLocked removes the ready entry e from wherever it is in its
// list, leaving a tombstone as expiry does.
func (q *Queue) takeMiddleLocked(e *entry) {
	inReturns := e.inReturns
	q.takeReadyLocked(e)
	q.holeLocked(e, inReturns)
}

// filtersSeeRequeueLocked tells the filtered subscriptions that e is ready
// again: back in the main list at its place (classic) or in the returns
// (quorum). It costs nothing while no subscription has a filter.
func (q *Queue) filtersSeeRequeueLocked(e *entry) {
	if q.filteredSubs == 0 {
		return
	}
	for _, s := range q.subs {
		if s.filter == nil || !e.inReturns && e.seq > s.scan.cursor(e.prio) {
			continue // no filter, or the scan is still to reach it
		}
		if len(s.scan.retest) < maxRetest {
			s.scan.retest = append(s.scan.retest, e)
			continue
		}
		// Too many to remember: test the queue again from the oldest.
		for _, r := range s.scan.retest {
			if !r.inReturns {
				s.scan.rewind(r.seq - 1)
			}
		}
		if !e.inReturns {
			s.scan.rewind(e.seq - 1)
		}
		s.scan.returnsDirty = true
		clear(s.scan.retest)
		s.scan.retest = s.scan.retest[:0]
	}
}

// nextSubForLocked picks, round robin, the next consumer with credit that
// takes e (no filter, or a filter that matches it): the path that hands a
// message over without making it ready first.
func (q *Queue) nextSubForLocked(e *entry) *Subscription {
	n := len(q.subs)
	for i := range n {
		idx := (q.rr + i) % n
		if s := q.subs[idx]; s.credit() > 0 && (s.filter == nil || s.filter.Match(e.msg, e.anns())) {
			q.rr = (idx + 1) % n
			return s
		}
	}
	return nil
}

// after yields the entries of the list with a seq above seq, in order
// (ready ones only). The main list is in seq order (enqueues append, a
// classic requeue goes back to its place), so it starts with a binary
// search rather than a walk from the head.
func (l *readyList) after(seq uint64) iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		live := l.chunks[l.first:]
		i := sort.Search(len(live), func(i int) bool {
			c := live[i]
			return c[len(c)-1].seq > seq
		})
		for ci := i; ci < len(live); ci++ {
			c := live[ci]
			lo := 0
			if ci == 0 {
				lo = l.head
			}
			if ci == i {
				lo += sort.Search(len(c)-lo, func(k int) bool { return c[lo+k].seq > seq })
			}
			for _, e := range c[lo:] {
				if e.ready && !yield(e) {
					return
				}
			}
		}
	}
}
