package router

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// QueueSpec declares a queue. Arguments hold x-arguments as AMQP values
// (int64/uint64/int32/... for numbers, string for strings, bool).
type QueueSpec struct {
	Name       string
	Type       QueueType // "" means classic
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Owner      any
	Arguments  amqp10.Map
}

// QueueInfo describes a queue and its counters.
type QueueInfo struct {
	Name       string
	VHost      string
	Type       QueueType
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	// Arguments are the declared x-arguments with normalised values.
	Arguments amqp10.Map
	// Messages is the number of ready messages; MessageBytes their size.
	Messages     int
	MessageBytes int64
	// MessagesUnacknowledged were delivered and are not settled yet.
	MessagesUnacknowledged int
	Consumers              int
	// Policy is the name of the policy applied to the queue ("" for none),
	// EffectivePolicyDefinition its definition (RabbitMQ's management
	// fields "policy" and "effective_policy_definition").
	Policy                    string
	EffectivePolicyDefinition amqp10.Map
}

// QueueDeletedNotifier may be implemented by a Consumer that wants to know
// that its queue was deleted (its subscription is over). It is called
// without the queue lock held.
type QueueDeletedNotifier interface {
	QueueDeleted(q *Queue)
}

// Queue is a classic or quorum queue.
type Queue struct {
	vh         *VHost
	b          *Broker
	name       string
	typ        QueueType
	durable    bool
	exclusive  bool
	autoDelete bool
	owner      any
	args       amqp10.Map // declared (normalised); immutable
	// eff is the effective configuration for the accessors (lock-free, so
	// they may be called from anywhere); q.cfg is the same, under mu.
	eff atomic.Pointer[queueConfig]

	mu          sync.Mutex
	cfg         queueConfig
	policyDef   amqp10.Map
	deleted     bool
	seq         uint64
	main        readyList
	returns     readyList // quorum: returned messages, delivered first
	readyCount  int
	readyBytes  int64
	ttl         ttlHeap
	subs        []*Subscription
	rr          int
	hadConsumer bool
	blocked     bool  // quorum reject-publish: publishers refused until <= 80 %
	lastUsed    int64 // unix ns: creation, redeclare or last consumer gone (x-expires)
	unacked     int
	timer       *time.Timer
	timerAt     int64
	outbox      []Dead
	flushing    bool
}

// Name returns the queue name.
func (q *Queue) Name() string { return q.name }

// Type returns the queue type.
func (q *Queue) Type() QueueType { return q.typ }

// VHost returns the queue's virtual host.
func (q *Queue) VHost() *VHost { return q.vh }

// Durable reports the durable flag.
func (q *Queue) Durable() bool { return q.durable }

// Exclusive reports whether the queue is exclusive to its owner.
func (q *Queue) Exclusive() bool { return q.exclusive }

// AutoDelete reports the auto-delete flag.
func (q *Queue) AutoDelete() bool { return q.autoDelete }

// Owner returns the owner of an exclusive queue.
func (q *Queue) Owner() any { return q.owner }

// Arguments returns a copy of the declared x-arguments (normalised).
func (q *Queue) Arguments() amqp10.Map { return cloneMap(q.args) }

// config returns the effective configuration.
func (q *Queue) config() *queueConfig { return q.eff.Load() }

// DeadLetterExchange returns the effective dead-letter exchange: the
// x-dead-letter-exchange argument or, without it, the policy's.
func (q *Queue) DeadLetterExchange() (string, bool) {
	c := q.config()
	return c.dlx, c.hasDLX
}

// DeadLetterRoutingKey returns the effective dead-letter routing key (the
// argument wins over the policy); none when there is no dead-letter exchange.
func (q *Queue) DeadLetterRoutingKey() (string, bool) {
	c := q.config()
	return c.dlrk, c.hasDLRK
}

// DeadLetterStrategy returns the effective strategy: at-least-once only for
// a quorum queue with a dead-letter exchange, dead-letter-strategy
// at-least-once and effective overflow reject-publish; otherwise
// at-most-once.
func (q *Queue) DeadLetterStrategy() string { return q.config().dlStrategy }

// Overflow returns the effective overflow behaviour (drop-head by default;
// a quorum queue reports reject-publish-dlx as the drop-head it applies).
func (q *Queue) Overflow() string { return q.config().overflow }

// DeliveryLimit returns a quorum queue's effective delivery limit
// (negative: none). Classic queues have no limit and return -1.
func (q *Queue) DeliveryLimit() int64 {
	c := q.config()
	if q.typ != Quorum || c.deliveryLimit < 0 {
		return -1
	}
	return c.deliveryLimit
}

// EffectivePolicy returns the name of the policy applied to the queue.
func (q *Queue) EffectivePolicy() (name string, ok bool) {
	c := q.config()
	return c.policy, c.policy != ""
}

// Deleted reports whether the queue was deleted.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Len returns the number of ready messages.
func (q *Queue) Len() int {
	q.mu.Lock()
	if !q.deleted {
		q.expireLocked(q.nowNano())
	}
	n := q.readyCount
	q.mu.Unlock()
	q.flushDead()
	return n
}

// Info returns the queue's description and counters.
func (q *Queue) Info() QueueInfo {
	q.mu.Lock()
	if !q.deleted {
		q.expireLocked(q.nowNano())
	}
	info := QueueInfo{
		Name: q.name, VHost: q.vh.name, Type: q.typ,
		Durable: q.durable, Exclusive: q.exclusive, AutoDelete: q.autoDelete,
		Arguments:                 cloneMap(q.args),
		Messages:                  q.readyCount,
		MessageBytes:              q.readyBytes,
		MessagesUnacknowledged:    q.unacked,
		Consumers:                 len(q.subs),
		Policy:                    q.cfg.policy,
		EffectivePolicyDefinition: cloneMap(q.policyDef),
	}
	q.mu.Unlock()
	q.flushDead()
	return info
}

// Purge removes every ready message (never dead-lettered) and returns how
// many there were.
func (q *Queue) Purge() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.readyCount
	q.clearReadyLocked()
	q.blocked = false
	q.armTimerLocked(q.nowNano())
	return n
}

func (q *Queue) clearReadyLocked() {
	for _, l := range []*readyList{&q.returns, &q.main} {
		l.each(func(e *entry) { e.ready = false })
		l.reset()
	}
	clear(q.ttl)
	q.ttl = q.ttl[:0]
	q.readyCount, q.readyBytes = 0, 0
}

func (q *Queue) nowNano() int64 { return q.b.now().UnixNano() }

// ---- publishing ----

type enqueueResult uint8

const (
	enqueued enqueueResult = iota
	enqueueRejected
	enqueueGone // the queue was deleted meanwhile
)

func (q *Queue) newEntry(m *Message, now int64) *entry {
	q.seq++
	e := &entry{msg: m, seq: q.seq, dc: m.DeliveryCount, anns: cloneMap(m.Anns), size: m.size(), heapIdx: -1}
	ttl := q.cfg.messageTTL
	if m.Header.HasTTL && (ttl < 0 || int64(m.Header.TTL) < ttl) {
		ttl = int64(m.Header.TTL)
	}
	if ttl >= 0 {
		e.deadline = now + ttl*int64(time.Millisecond)
		if e.deadline == 0 {
			e.deadline = 1
		}
	}
	return e
}

// enqueue stores m, applying TTL and overflow rules, and dispatches.
func (q *Queue) enqueue(m *Message) enqueueResult {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return enqueueGone
	}
	now := q.nowNano()
	q.expireLocked(now)
	res := enqueued
	size := m.size()
	switch {
	case q.rejectsLocked(size):
		res = enqueueRejected
		if q.typ == Classic && q.cfg.overflow == OverflowRejectPublishDLX {
			q.deadLocked(q.newEntry(m, now), ReasonMaxLen, nil)
		}
	default:
		e := q.newEntry(m, now)
		if e.deadline != 0 && e.deadline <= now {
			// x-message-ttl=0 (or header ttl 0): delivered at once if a
			// consumer has credit, otherwise expired at publish.
			var s *Subscription
			if q.readyCount == 0 {
				s = q.nextSubLocked()
			}
			if s != nil {
				q.deliverLocked(s, e)
			} else {
				q.deadLocked(e, ReasonExpired, nil)
			}
			break
		}
		q.addReadyLocked(e)
		q.dispatchLocked()
		if q.dropsHead() {
			q.dropHeadLocked()
		}
		if q.typ == Quorum && q.cfg.overflow == OverflowRejectPublish && q.overLocked() {
			q.blocked = true
		}
	}
	q.armTimerLocked(now)
	q.mu.Unlock()
	q.flushDead()
	return res
}

func (q *Queue) hasLimit() bool { return q.cfg.maxLen >= 0 || q.cfg.maxBytes >= 0 }

func (q *Queue) dropsHead() bool {
	if !q.hasLimit() {
		return false
	}
	return q.cfg.overflow == OverflowDropHead || (q.typ == Quorum && q.cfg.overflow == OverflowRejectPublishDLX)
}

// overLocked reports whether the ready messages exceed a limit.
func (q *Queue) overLocked() bool {
	return (q.cfg.maxLen >= 0 && int64(q.readyCount) > q.cfg.maxLen) ||
		(q.cfg.maxBytes >= 0 && q.readyBytes > q.cfg.maxBytes)
}

// rejectsLocked decides reject-publish overflow for a new message of size.
func (q *Queue) rejectsLocked(size int) bool {
	if !q.hasLimit() {
		return false
	}
	switch {
	case q.typ == Classic && (q.cfg.overflow == OverflowRejectPublish || q.cfg.overflow == OverflowRejectPublishDLX):
		// A classic queue rejects the message that would exceed the limit.
		return (q.cfg.maxLen >= 0 && int64(q.readyCount)+1 > q.cfg.maxLen) ||
			(q.cfg.maxBytes >= 0 && q.readyBytes+int64(size) > q.cfg.maxBytes)
	case q.typ == Quorum && q.cfg.overflow == OverflowRejectPublish:
		// A quorum queue accepts while not over the limit (the message that
		// crosses it is accepted), then refuses until it is back at 80 %.
		if q.overLocked() {
			q.blocked = true
		}
		if q.blocked && q.belowSoftLimitLocked() {
			q.blocked = false
		}
		return q.blocked
	}
	return false
}

// belowSoftLimitLocked is rabbit_fifo's is_below_soft_limit (?LOW_LIMIT 0.8).
func (q *Queue) belowSoftLimitLocked() bool {
	below := func(limit, n int64) bool { return limit < 0 || n <= int64(float64(limit)*0.8) }
	return below(q.cfg.maxLen, int64(q.readyCount)) && below(q.cfg.maxBytes, q.readyBytes)
}

// dropHeadLocked drops ready messages from the head while over a limit.
func (q *Queue) dropHeadLocked() {
	for q.overLocked() {
		e := q.popHeadLocked()
		if e == nil {
			return
		}
		q.deadLocked(e, ReasonMaxLen, nil)
	}
}

// ---- ready set ----

func (q *Queue) addReadyLocked(e *entry) {
	e.ready = true
	q.readyCount++
	q.readyBytes += int64(e.size)
	q.ttl.add(e)
	q.main.pushBack(e)
}

// requeueLocked returns a delivered entry to the ready set: a classic queue
// puts it back at its original position, a quorum queue into its returns
// (delivered before the other ready messages).
func (q *Queue) requeueLocked(e *entry) {
	e.ready = true
	q.readyCount++
	q.readyBytes += int64(e.size)
	q.ttl.add(e)
	if q.typ == Quorum {
		e.inReturns = true
		q.returns.pushBack(e)
		return
	}
	q.main.insertBySeq(e)
}

func (q *Queue) takeReadyLocked(e *entry) {
	e.ready = false
	e.inReturns = false
	q.readyCount--
	q.readyBytes -= int64(e.size)
	q.ttl.remove(e)
}

// popHeadLocked removes the next entry to deliver (quorum: returns first).
func (q *Queue) popHeadLocked() *entry {
	e := q.returns.popFront()
	if e == nil {
		e = q.main.popFront()
	}
	if e != nil {
		q.takeReadyLocked(e)
	}
	return e
}

// expireLocked dead-letters every ready message whose deadline has passed,
// in deadline order (ties in queue order).
func (q *Queue) expireLocked(now int64) {
	for len(q.ttl) > 0 && q.ttl[0].deadline <= now {
		e := q.ttl[0]
		inReturns := e.inReturns
		q.takeReadyLocked(e)
		if inReturns {
			q.returns.hole()
		} else {
			q.main.hole()
		}
		q.deadLocked(e, ReasonExpired, nil)
	}
}

// ---- dead path ----

// deadLocked queues e for the DeadLetterer; flushDead hands the batch over
// after the lock is released.
func (q *Queue) deadLocked(e *entry, r Reason, err *amqp10.Error) {
	if q.b.deadLetterer() == nil {
		return
	}
	q.outbox = append(q.outbox, Dead{Msg: e.msg.withState(e.dc, e.anns), Reason: r, Error: err})
}

// flushDead hands dead messages to the DeadLetterer in the order they died.
// Only one goroutine flushes a queue at a time; a reentrant or concurrent
// call leaves its messages to the active flusher.
func (q *Queue) flushDead() {
	q.mu.Lock()
	if q.flushing || len(q.outbox) == 0 {
		q.mu.Unlock()
		return
	}
	q.flushing = true
	for len(q.outbox) > 0 {
		batch := q.outbox
		q.outbox = nil
		q.mu.Unlock()
		if dl := q.b.deadLetterer(); dl != nil {
			dl.DeadLetter(q, batch)
		}
		q.mu.Lock()
	}
	q.flushing = false
	q.mu.Unlock()
}

// ---- timer (message TTL and x-expires) ----

// armTimerLocked re-arms the queue's single timer to its earliest deadline:
// the first message expiry, or the queue expiry (x-expires) when unused.
func (q *Queue) armTimerLocked(now int64) {
	next := int64(0)
	if !q.deleted && !q.b.closed.Load() {
		if len(q.ttl) > 0 {
			next = q.ttl[0].deadline
		}
		if d, ok := q.expiresAtLocked(); ok && (next == 0 || d < next) {
			next = d
		}
	}
	if next == 0 {
		if q.timer != nil && q.timerAt != 0 {
			q.timer.Stop()
		}
		q.timerAt = 0
		return
	}
	if next == q.timerAt {
		return
	}
	q.timerAt = next
	d := max(time.Duration(next-now), 0)
	if q.timer == nil {
		q.timer = time.AfterFunc(d, q.onTimer) // runs on its own goroutine; stopped by delete and Broker.Close
		return
	}
	q.timer.Reset(d)
}

func (q *Queue) expiresAtLocked() (int64, bool) {
	if q.cfg.expires <= 0 || len(q.subs) > 0 {
		return 0, false
	}
	return q.lastUsed + q.cfg.expires*int64(time.Millisecond), true
}

func (q *Queue) onTimer() {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return
	}
	q.timerAt = 0
	now := q.nowNano()
	q.expireLocked(now)
	at, ok := q.expiresAtLocked()
	expired := ok && at <= now
	q.armTimerLocked(now)
	q.mu.Unlock()
	q.flushDead()
	if expired {
		q.vh.expireQueue(q)
	}
}

func (q *Queue) stopTimerLocked() {
	if q.timer != nil {
		q.timer.Stop()
	}
	q.timerAt = 0
}

// deleteLocked marks the queue deleted and drops its messages. It returns
// the number of ready messages and the subscriptions to notify.
func (q *Queue) deleteLocked() (int, []*Subscription) {
	n := q.readyCount
	q.deleted = true
	q.clearReadyLocked()
	subs := q.subs
	for _, s := range subs {
		s.cancelled = true
		s.unsettled = nil
	}
	q.subs = nil
	q.unacked = 0
	q.stopTimerLocked()
	return n, subs
}

func notifyDeleted(q *Queue, subs []*Subscription) {
	for _, s := range subs {
		if n, ok := s.c.(QueueDeletedNotifier); ok {
			n.QueueDeleted(q)
		}
	}
}

// String returns "queue '<name>' in vhost '<vhost>'", as RabbitMQ's errors say.
func (q *Queue) String() string { return fmt.Sprintf("queue '%s' in vhost '%s'", q.name, q.vh.name) }
