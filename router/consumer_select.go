package router

import (
	"fmt"
	"slices"

	"github.com/epitaph-mq/epitaph/value"
)

// Which consumer gets the next message, as RabbitMQ 4.3 chooses it.
//
// Consumer priorities (AMQP 1.0's rabbitmq:priority attach property,
// AMQP 0.9.1's x-priority consume argument; default 0): a message goes to
// a consumer of the highest priority that has credit; consumers of the
// same priority take turns (round robin). q.subs is kept sorted by
// priority, highest first, in attach order within a priority, so with one
// priority the order is the attach order.
//
// Single active consumer (x-single-active-consumer): only the active
// consumer gets messages; the others wait. The first consumer becomes
// active; when the active one goes, the next is promoted: the waiting
// consumer of the highest priority, the first attached among equals (a
// quorum queue, as rabbit_fifo sorts its waiting consumers, prefers among
// equal priorities the one with more credit). On a quorum queue a
// consumer of a higher priority than the active one takes over: at once
// when the active one has no unsettled message, otherwise the active one
// gets no new message (it is quiescing) until it has settled them all. A
// classic queue keeps its active consumer until it goes.
//
// Quorum queue consumers learn whether they are active (ActivityNotifier),
// which AMQP 1.0 carries as the rabbitmq:active link state property of a
// flow; RabbitMQ 4.3's classic queues report nothing.

// ActivityNotifier may be implemented by a Consumer of a quorum queue that
// wants to know whether it is active (it gets messages) or waiting (single
// active consumer). ActiveChanged is called with the queue's lock held (it
// must not block or call back into the queue) whenever the state the
// consumer was last told changes: for the first consumer at Subscribe, for
// the others at their first Flow (RabbitMQ's credit replies carry the
// state, and its session passes changes on), and at every promotion or
// demotion.
type ActivityNotifier interface {
	ActiveChanged(active bool)
}

// ConsumerPriority converts a consumer priority from a protocol value (an
// integer of any AMQP or Go width) for ConsumerOptions.Priority. It is
// what AMQP 1.0's rabbitmq:priority and AMQP 0.9.1's x-priority accept;
// anything else is refused with an error wrapping ErrInvalidArgument that
// names the field.
func ConsumerPriority(field string, v any) (int64, error) {
	switch v.(type) {
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint:
		if n, ok := toInt64(v); ok {
			return n, nil
		}
		return 0, fmt.Errorf("%w: %s: %v is out of range", ErrInvalidArgument, field, v)
	}
	return 0, fmt.Errorf("%w: %s must be an integer, got %T", ErrInvalidArgument, field, v)
}

// selection is a queue's consumer-selection state, guarded by q.mu.
type selection struct {
	singleActive bool          // x-single-active-consumer
	active       *Subscription // single active consumer: the active one
	quiescing    bool          // quorum: active, but a higher priority waits for its unsettled
	attached     uint64        // attach counter: Subscription.order
	serveClock   uint64        // counts consumers picked: Subscription.lastServed
}

// singleActiveArg reads x-single-active-consumer from validated arguments.
func singleActiveArg(args value.Map) bool {
	v, _ := lookupKey(args, "x-single-active-consumer")
	on, _ := v.(bool)
	return on
}

// SingleActiveConsumer reports whether the queue has a single active
// consumer (x-single-active-consumer).
func (q *Queue) SingleActiveConsumer() bool { return q.sel.singleActive }

// addSubLocked inserts s into q.subs, after the consumers of its priority
// or higher, and makes it active if the queue has single active consumer
// and needs one.
func (q *Queue) addSubLocked(s *Subscription) {
	q.sel.attached++
	s.order = q.sel.attached
	q.served(s) // a new consumer takes its turn after the others
	i := slices.IndexFunc(q.subs, func(o *Subscription) bool { return o.priority < s.priority })
	if i < 0 {
		i = len(q.subs)
	}
	q.subs = slices.Insert(q.subs, i, s)
	if q.rr >= i && i < len(q.subs)-1 {
		q.rr++ // the consumer that was next stays next
	}
	if q.sel.singleActive {
		q.electLocked()
	}
}

// removeSubLocked takes s out of q.subs; a single active consumer that
// goes is replaced. It reports whether another consumer became active.
func (q *Queue) removeSubLocked(s *Subscription) bool {
	if i := slices.Index(q.subs, s); i >= 0 {
		q.subs = slices.Delete(q.subs, i, i+1)
		if q.rr > i {
			q.rr--
		}
	}
	if !q.sel.singleActive || q.sel.active != s {
		return false
	}
	q.sel.active, q.sel.quiescing = nil, false
	return q.electLocked()
}

// electLocked applies the single-active-consumer rules after a change
// (a consumer came or went, a quiescing one settled): it promotes a
// waiting consumer when there is no active one, or on a quorum queue when
// one of a higher priority waits and the active one has nothing unsettled
// (with unsettled messages the active one quiesces). It reports whether
// the active consumer may now get messages it could not before: another
// became active, or a quiescing one resumes (as in rabbit_fifo, a
// quiescing consumer stays so until it has settled everything, also when
// the consumer it made way for has gone meanwhile).
func (q *Queue) electLocked() bool {
	next := q.bestWaitingLocked()
	cur := q.sel.active
	switch {
	case cur == nil && next == nil:
		return false
	case cur == nil:
	case q.typ != Quorum || next == nil || next.priority <= cur.priority:
		if q.sel.quiescing && cur.unsettled.Len() == 0 {
			q.sel.quiescing = false
			return true
		}
		return false
	case cur.unsettled.Len() > 0:
		q.sel.quiescing = true
		return false
	}
	q.sel.active, q.sel.quiescing = next, false
	if cur != nil {
		q.notifyActive(cur, false)
	}
	q.notifyActive(next, true)
	return true
}

// bestWaitingLocked returns the waiting consumer to promote next.
func (q *Queue) bestWaitingLocked() *Subscription {
	var best *Subscription
	for _, s := range q.subs {
		if s == q.sel.active || s.cancelled || s.getter {
			continue
		}
		if best == nil || q.waitsBefore(s, best) {
			best = s
		}
	}
	return best
}

// waitsBefore orders waiting consumers: priority, then (quorum) credit,
// then attach order.
func (q *Queue) waitsBefore(a, b *Subscription) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if q.typ == Quorum {
		if ca, cb := a.credit(), b.credit(); ca != cb {
			return ca > cb
		}
	}
	return a.order < b.order
}

// settledLocked runs after deliveries of s were settled: a quiescing
// single active consumer that has settled everything hands over.
func (q *Queue) settledLocked(s *Subscription) bool {
	if !q.sel.quiescing || q.sel.active != s || s.unsettled.Len() > 0 {
		return false
	}
	return q.electLocked()
}

// isActiveLocked reports whether s may get messages (single active
// consumer: it is the active one, quiescing or not).
func (q *Queue) isActiveLocked(s *Subscription) bool {
	return !q.sel.singleActive || q.sel.active == s
}

// notifyActive tells a quorum queue consumer whether it is active, when
// that differs from what it was last told (so a flow costs nothing when
// nothing changed; the peer hears only changes in any case).
func (q *Queue) notifyActive(s *Subscription, active bool) {
	if q.typ != Quorum {
		return
	}
	state := activityWaiting
	if active {
		state = activityActive
	}
	if s.told == state {
		return
	}
	if n, ok := s.c.(ActivityNotifier); ok {
		s.told = state
		n.ActiveChanged(active)
	}
}

// What a quorum queue consumer was last told (Subscription.told).
const (
	activityUntold uint8 = iota
	activityActive
	activityWaiting
)

// nextSubLocked picks the consumer for the next message: the active one
// (single active consumer), else a consumer with credit of the highest
// priority that has credit, the one served least recently among them
// (RabbitMQ puts a consumer it served back at the end of its priority;
// a new consumer starts there too).
func (q *Queue) nextSubLocked() *Subscription {
	if q.sel.singleActive {
		s := q.sel.active
		if s == nil || q.sel.quiescing || s.credit() == 0 || !s.filterHasWorkLocked() {
			return q.getterWithCreditLocked()
		}
		return s
	}
	n := len(q.subs)
	if n == 0 {
		return nil
	}
	if q.subs[0].priority == q.subs[n-1].priority {
		// One priority: round robin in attach order from q.rr, which is
		// the least recently served order without a scan.
		for i := range n {
			idx := (q.rr + i) % n
			if s := q.subs[idx]; s.credit() > 0 && s.filterHasWorkLocked() {
				q.rr = (idx + 1) % n
				q.served(s)
				return s
			}
		}
		return nil
	}
	for lo := 0; lo < n; {
		var best *Subscription
		hi := lo
		for ; hi < n && q.subs[hi].priority == q.subs[lo].priority; hi++ {
			if s := q.subs[hi]; s.credit() > 0 && s.filterHasWorkLocked() && (best == nil || s.lastServed < best.lastServed) {
				best = s
			}
		}
		if best != nil {
			// Keep the one-priority round robin after best when the
			// priorities become equal again.
			q.rr = (slices.Index(q.subs, best) + 1) % n
			q.served(best)
			return best
		}
		lo = hi
	}
	return nil
}

// served moves s to the end of its priority's turn order.
func (q *Queue) served(s *Subscription) {
	q.sel.serveClock++
	s.lastServed = q.sel.serveClock
}

// getterWithCreditLocked returns a basic.get subscription asking for a
// message: single active consumer does not hold back basic.get.
func (q *Queue) getterWithCreditLocked() *Subscription {
	if q.getters == 0 || q.sel.quiescing {
		return nil
	}
	for _, s := range q.subs {
		if s.getter && s.credit() > 0 {
			return s
		}
	}
	return nil
}
