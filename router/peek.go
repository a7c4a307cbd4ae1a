package router

import (
	"github.com/epitaph-mq/epitaph/value"
)

// PeekedMessage is a ready message as the management API shows it: the
// message with the state the queue keeps for it.
type PeekedMessage struct {
	// Msg is a copy of the message carrying the queue's current delivery
	// count and annotations (the dead-letter history, modified-outcome
	// annotations).
	Msg *Message
	// DeliveryCount is the message's delivery-count (failed deliveries).
	DeliveryCount uint32
	// AcquiredCount is how many times the message was returned to the queue.
	AcquiredCount uint32
	// Redelivered is RabbitMQ's redelivered flag: the message was handed out
	// before (acquired or failed delivery).
	Redelivered bool
	// FirstAcquirer is the header's first-acquirer a delivery would carry.
	FirstAcquirer bool
	// Annotations are the message annotations a consumer would receive:
	// x-exchange, x-routing-key, the quorum counters, then Msg.Anns.
	Annotations value.Map
	// Remaining is the number of ready messages after this one (RabbitMQ's
	// message_count).
	Remaining int
}

// peekedLocked describes e as a consumer would see it.
func (q *Queue) peekedLocked(e *entry, remaining int) PeekedMessage {
	return PeekedMessage{
		Msg:           e.msg.withState(e.dc, e.anns()),
		DeliveryCount: e.dc,
		AcquiredCount: e.acquired,
		Redelivered:   e.acquired > 0 || e.dc > 0,
		FirstAcquirer: e.acquired == 0 && e.dc == 0 && !hasDeaths(e.anns()),
		Annotations:   decodedRaw(q.deliveryAnnotations(e)),
		Remaining:     remaining,
	}
}

// readyPrefixLocked returns up to n ready entries in delivery order (quorum
// returns first) without removing them.
func (q *Queue) readyPrefixLocked(n int) []*entry {
	var out []*entry
	for e := range q.returns.all() {
		if len(out) >= n {
			return out
		}
		out = append(out, e)
	}
	q.eachLevel(func(l *level) bool {
		for e := range l.main.all() {
			if len(out) >= n {
				return false
			}
			out = append(out, e)
		}
		out = append(out, q.peekPagedLocked(l, n-len(out))...)
		return len(out) < n
	})
	return out
}

// Peek returns up to n ready messages in delivery order without changing
// anything about them: they stay where they are, and their delivery count,
// acquired count and redelivered flag are unchanged. Messages whose TTL has
// already passed are expired first, as Len and Info do.
func (q *Queue) Peek(n int) []PeekedMessage {
	if n <= 0 {
		return nil
	}
	q.mu.Lock()
	if q.deleted {
		q.unlock()
		return nil
	}
	q.expireLocked(q.nowNano())
	es := q.readyPrefixLocked(n)
	out := make([]PeekedMessage, len(es))
	for i, e := range es {
		out[i] = q.peekedLocked(e, q.readyCount-i-1)
	}
	q.unlock()
	q.flushDead()
	return out
}

// Take removes up to n ready messages from the head of the queue as if a
// consumer had received and accepted them, and returns them as they were
// delivered. Like a basic.get, it counts as use of the queue (x-expires).
func (q *Queue) Take(n int) []PeekedMessage {
	return q.get(n, func(e *entry) bool {
		q.settleStoredLocked(e)
		return false
	})
}

// Release returns up to n ready messages as if a consumer had received them
// and settled them with the released outcome (RabbitMQ's management get with
// reject_requeue_true): each goes back to the queue (a classic queue's
// original position, a quorum queue's returns) with its acquired count
// incremented, so it is redelivered afterwards. The returned messages show
// the state they were delivered with.
func (q *Queue) Release(n int) []PeekedMessage {
	return q.get(n, func(e *entry) bool {
		e.acquired++
		q.requeueLocked(e)
		return true
	})
}

// Reject returns up to n ready messages as if a consumer had received them
// and rejected them (RabbitMQ's management get with reject_requeue_false):
// each is dead-lettered with reason rejected and its delivery count
// incremented.
func (q *Queue) Reject(n int) []PeekedMessage {
	return q.get(n, func(e *entry) bool {
		e.acquired++
		e.dc++
		q.deadLocked(e, ReasonRejected, nil)
		return false
	})
}

// get pops up to n ready messages, then settles each with settle (which
// reports whether it requeued the entry).
func (q *Queue) get(n int, settle func(*entry) bool) []PeekedMessage {
	if n <= 0 {
		return nil
	}
	q.mu.Lock()
	if q.deleted {
		q.unlock()
		return nil
	}
	now := q.nowNano()
	q.expireLocked(now)
	var es []*entry
	for len(es) < n {
		e := q.popHeadLocked()
		if e == nil {
			break
		}
		es = append(es, e)
	}
	out := make([]PeekedMessage, len(es))
	for i, e := range es {
		out[i] = q.peekedLocked(e, q.readyCount+len(es)-i-1)
	}
	requeued := false
	for _, e := range es {
		if settle(e) {
			requeued = true
		}
	}
	if requeued {
		q.afterRequeueLocked(now)
	}
	if len(q.subs) == 0 {
		q.lastUsed = now
	}
	q.armTimerLocked(now)
	q.unlock()
	q.flushDead()
	return out
}
