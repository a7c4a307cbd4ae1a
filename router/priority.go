package router

import (
	"math"
	"sort"
)

// Message priorities, as RabbitMQ 4.3 has them.
//
// A classic queue declared with x-max-priority N (rabbit_priority_queue)
// has levels 0..max(N, 1); N is at most 255 (0 is accepted and means 1).
// A message's level is its priority, capped at the top level; a message
// whose publisher set no priority is at level 0, whatever its protocol
// (mc:priority/1 is undefined for it, which rabbit_priority_queue counts
// as 0). Without x-max-priority a classic queue has one level.
//
// A quorum queue (rabbit_fifo with rabbit_fifo_pq, RabbitMQ 4.3) always has
// 32 levels, 0..31, with no argument: a message's level is its priority
// capped at 31, and a message without one is at level 4
// (?DEFAULT_PRIORITY). x-max-priority is refused on quorum queues.
//
// Both deliver the head of the highest level that has messages, first in
// first out within a level; a quorum queue's returned messages come before
// every level, as its returns list always does. max-length drop-head drops
// the message that would be delivered next (the highest level's head:
// rabbit_priority_queue:drop/2 and rabbit_fifo's drop_head both take the
// next message). A classic requeue puts a message back at its place in its
// own level.
//
// Each level is a level: its window list, its paged list (and the list
// of messages published while a deep queue is read back). The queue's own
// level (Queue.level) holds the one level of a queue without priorities,
// and level 0 of a classic priority queue or level 4 of a quorum queue, so
// that messages without a priority take the path they take in a queue
// without priorities. The other levels are made when a message first
// needs one. A level's paged list is sparse (its pages name each slot's
// seq), since the seqs of one level are interleaved with the others'.

// level is one priority level's ready messages.
type level struct {
	main  readyList // the head window: ready entries with their bodies, in seq order
	paged pagedList // behind the window (persisting queues)
	fresh pagedList // published while the queue is read back (recover.go)
	spill *spillLog // its transient messages behind the window (spill.go)
	prio  uint8
}

// quorumLevels is how many priorities a quorum queue has (rabbit_fifo's
// ?MAX_PRIORITY 31, plus 0), and quorumDefault the level of a message
// without a priority (?DEFAULT_PRIORITY).
const (
	quorumLevels  = 32
	quorumDefault = 4
	// maxSupportedPriority is RabbitMQ's ?MAX_SUPPORTED_PRIORITY.
	maxSupportedPriority = 255
)

// priorities are the levels of a queue with more than one.
type priorities struct {
	top    uint8    // the highest level
	levels []*level // by priority; nil until a message needs it
	active []*level // the levels made so far, highest first
}

// initPriorities sets up q's levels: a classic queue with
// x-max-priority, and every quorum queue.
func (q *Queue) initPriorities() {
	var top, own uint8
	switch {
	case q.typ == Quorum:
		top, own = quorumLevels-1, quorumDefault
	case q.typ == Classic:
		v, ok := lookupKey(q.args, "x-max-priority")
		if !ok {
			return
		}
		n, ok := toInt64(v)
		if !ok {
			return // rabbit_priority_queue: not an integer type, no priorities
		}
		top = uint8(max(1, min(n, maxSupportedPriority)))
	default:
		return
	}
	q.level.prio = own
	q.level.paged.sparse, q.level.fresh.sparse = true, true
	p := &priorities{top: top, levels: make([]*level, int(top)+1)}
	p.levels[own] = &q.level
	p.active = []*level{&q.level}
	q.prio = p
}

// MaxPriority returns the queue's highest message priority level: a
// classic queue's x-max-priority (at least 1), 31 for a quorum queue, 0 for
// a classic queue without priorities.
func (q *Queue) MaxPriority() int {
	if q.prio == nil {
		return 0
	}
	return int(q.prio.top)
}

// priorityOf returns the level a message goes to in q (which has levels).
func (q *Queue) priorityOf(m *Message) uint8 {
	return q.priorityLevel(m.Header.Priority, prioritySet(m))
}

// priorityLevel is the level of a message with header priority p, set telling
// whether its publisher set one.
func (q *Queue) priorityLevel(p uint8, set bool) uint8 {
	if q.typ == Classic && p == quorumDefault && !set {
		p = 0 // no priority set: level 0 of a classic priority queue
	}
	return min(p, q.prio.top)
}

// prioritySet reports whether m's publisher set a priority: the neutral
// header says 4 for one that did not, as both protocols' defaults do.
func prioritySet(m *Message) bool {
	if c, ok := m.Container.(interface{ prioritySet() bool }); ok {
		return c.prioritySet()
	}
	return true
}

// levelFor returns level p of q, making it when missing.
func (q *Queue) levelFor(p uint8) *level {
	l := q.prio.levels[p]
	if l != nil {
		return l
	}
	l = &level{prio: p}
	// Appends to the new page lists search pages by their slots' seqs.
	l.paged.sparse, l.fresh.sparse = true, true
	q.prio.levels[p] = l
	i := sort.Search(len(q.prio.active), func(i int) bool { return q.prio.active[i].prio < p })
	q.prio.active = append(q.prio.active, nil)
	copy(q.prio.active[i+1:], q.prio.active[i:])
	q.prio.active[i] = l
	return l
}

// levelOf returns the level that holds (or held) e.
func (q *Queue) levelOf(e *entry) *level {
	if q.prio == nil {
		return &q.level
	}
	return q.levelFor(e.prio)
}

// eachLevel calls f for every level of q, highest first, until f returns
// false.
func (q *Queue) eachLevel(f func(l *level) bool) {
	if q.prio == nil {
		f(&q.level)
		return
	}
	for _, l := range q.prio.active {
		if !f(l) {
			return
		}
	}
}

// popLevelLocked removes the head of l (refilling its window from its
// paged list when it ran dry), nil when l has nothing to deliver.
func (q *Queue) popLevelLocked(l *level) *entry {
	e := l.main.popFront()
	for e == nil && l.paged.n > 0 { // a refill may find only unreadable messages
		q.refillLocked(l)
		e = l.main.popFront()
	}
	return e
}

// pagedBytesLocked is the size of the messages held without their bodies.
func (q *Queue) pagedBytesLocked() int64 {
	if q.prio == nil {
		return q.paged.bytes + q.fresh.bytes
	}
	var n int64
	for _, l := range q.prio.active {
		n += l.paged.bytes + l.fresh.bytes
	}
	return n
}

// pagedMinDeadlineLocked returns the earliest deadline of a paged message
// (of any level, fresh lists included; 0: none), with its level and list.
func (q *Queue) pagedMinDeadlineLocked() (int64, *level, *pagedList) {
	if q.prio == nil {
		pd, fd := q.paged.minDeadline(), q.fresh.minDeadline()
		if fd != 0 && (pd == 0 || fd < pd) {
			return fd, &q.level, &q.fresh
		}
		return pd, &q.level, &q.paged
	}
	var best int64
	var bl *level
	var bp *pagedList
	for _, l := range q.prio.active {
		for _, pl := range []*pagedList{&l.paged, &l.fresh} {
			if d := pl.minDeadline(); d != 0 && (best == 0 || d < best) {
				best, bl, bp = d, l, pl
			}
		}
	}
	return best, bl, bp
}

// holeLocked records that e, just taken out of the middle of its list,
// left a tombstone there.
func (q *Queue) holeLocked(e *entry, inReturns bool) {
	if inReturns {
		q.returns.hole()
	} else {
		q.levelOf(e).main.hole()
	}
}

// sparse page lists: a level's paged list, whose pages hold consecutive
// slots rather than consecutive seqs. maxSparseSpan bounds the seqs a
// sparse page spans (its offsets are uint32).
const maxSparseSpan = math.MaxUint32
