package router

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
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
	Arguments  value.Map

	recoverID store.QueueID // Recover: the stored queue's ID
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
	Arguments value.Map
	// Messages is the number of ready messages; MessageBytes their size.
	Messages     int
	MessageBytes int64
	// MessagesUnacknowledged were delivered and are not settled yet.
	MessagesUnacknowledged int
	// Retained (RabbitMQ's "dlx" messages) are at-least-once dead messages
	// still in the queue, waiting to be dead-lettered; they count toward
	// the queue's length limits. RetainedBytes is their size.
	Retained      int
	RetainedBytes int64
	Consumers     int
	// ConsumerCredit is the link credit the queue's consumers have left: how
	// many messages it could deliver now without waiting for a flow.
	ConsumerCredit int64
	// Policy is the name of the policy applied to the queue ("" for none),
	// EffectivePolicyDefinition its definition (RabbitMQ's management
	// fields "policy" and "effective_policy_definition").
	Policy                    string
	EffectivePolicyDefinition value.Map
	// MessagesDelayed are quorum returns waiting for their delayed retry
	// (not ready, not unacknowledged); NextDelayedAt and LastDelayedAt the
	// earliest and latest time one becomes ready (ms since the epoch; 0
	// when none). DelayedRetry is the effective configuration as RabbitMQ's
	// management API shows it ("disabled", "failed (min: 1000ms, max: 30000ms)").
	MessagesDelayed int
	NextDelayedAt   int64
	LastDelayedAt   int64
	DelayedRetry    string
	// Stats are the queue's message counters since it was declared (or
	// the broker started).
	Stats QueueStats
}

// QueueStats count what passed through a queue, for RabbitMQ's
// management message_stats. Kept under the queue's lock: an increment
// costs nothing beside the work it counts.
type QueueStats struct {
	// Published: messages that entered the queue (publishes, dead-letter
	// copies and redrive moves).
	Published uint64
	// Delivered: deliveries to consumers (basic.get included);
	// DeliveredNoAck the pre-settled (no-ack) ones of them, Redelivered
	// the ones of a message delivered before.
	Delivered, DeliveredNoAck, Redelivered uint64
	// Acknowledged: deliveries settled accepted.
	Acknowledged uint64
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
	args       value.Map // declared (normalised); immutable
	// eff is the effective configuration for the accessors (lock-free, so
	// they may be called from anywhere); q.cfg is the same, under mu.
	eff atomic.Pointer[queueConfig]

	mu        sync.Mutex
	cfg       queueConfig
	policyDef value.Map
	deleted   bool
	seq       uint64
	// level is the queue's ready messages (main: the window, and paged
	// behind it), or one level of them when prio is set (priority.go).
	level
	prio        *priorities
	stats       QueueStats
	returns     readyList // quorum: returned messages, delivered first
	readyCount  int
	readyBytes  int64
	ttl         ttlHeap
	subs        []*Subscription // by priority, then attach order (consumer_select.go)
	rr          int
	sel         selection
	hadConsumer bool
	getters     int   // subscriptions of basic.get among subs (not consumers)
	blocked     bool  // quorum reject-publish: publishers refused until <= 80 %
	lastUsed    int64 // unix ns: creation, redeclare or last consumer gone (x-expires)
	unacked     int
	timer       *time.Timer
	timerAt     int64
	outbox      []Dead
	flushing    bool

	// filteredSubs counts the subscriptions with a filter (consumerfilter.go).
	filteredSubs int

	// delayed: quorum returns waiting for their delayed retry (delayed.go),
	// neither ready nor unacknowledged; delayOrd numbers them in the order
	// they were delayed.
	delayed      delayHeap
	delayedBytes int64
	delayOrd     uint64

	// Persistence (persist.go, store.go). id names the queue in the store
	// and orders multi-queue locking (lower id first); persist: durable
	// messages are stored (a durable queue with a broker store). pend
	// collects store operations made under mu; unlock submits them, so the
	// store sees a queue's operations in the order they happened.
	id      store.QueueID
	persist bool
	pend    store.Batch
	seqRes  uint64 // seqs up to here are reserved in the metadata

	// At-least-once: dead messages kept until forwarded, in death order.
	retained      []*entry
	retainedBytes int64

	// Paging (paged.go): the ready messages behind the window are each
	// level's paged list; durableSeq is how far the queue's appends are
	// durable (set from the store's callbacks).
	durableSeq atomic.Uint64
	// While a deep queue is read back in the background (recover.go):
	// loading, the last recovered seq; each level's fresh list holds the
	// messages enqueued meanwhile, which go behind every recovered one once
	// it is done. loadPurged: a purge came first, recovered messages are
	// settled. loadFed counts the messages the loader handed to waiting
	// consumers decoded instead of indexing them.
	loading    bool
	loadPurged bool
	loadEnd    uint64
	loadFed    int
	failedMu   sync.Mutex
	failed     [][2]uint64

	// Transient paging (spill.go): spills, the messages not in the store
	// are paged too, their bodies written to the levels' spill logs
	// (spillLogs, every one opened); spillDirty, a refill or an expiry
	// took spilled slots, so the logs' heads may be released.
	spills     bool
	spillLogs  []*spillLog
	spillDirty bool
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
func (q *Queue) Arguments() value.Map { return cloneMap(q.args) }

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
	defer q.unlock()
	return q.deleted
}

// Len returns the number of ready messages.
func (q *Queue) Len() int {
	q.mu.Lock()
	if !q.deleted {
		q.expireLocked(q.nowNano())
		q.pageOutLocked()
	}
	n := q.readyCount
	q.unlock()
	q.flushDead()
	return n
}

// Info returns the queue's description and counters.
func (q *Queue) Info() QueueInfo {
	q.mu.Lock()
	if !q.deleted {
		q.expireLocked(q.nowNano())
		q.pageOutLocked()
	}
	info := QueueInfo{
		Name: q.name, VHost: q.vh.name, Type: q.typ,
		Durable: q.durable, Exclusive: q.exclusive, AutoDelete: q.autoDelete,
		Arguments:                 cloneMap(q.args),
		Messages:                  q.readyCount,
		MessageBytes:              q.readyBytes,
		MessagesUnacknowledged:    q.unacked,
		Retained:                  len(q.retained),
		RetainedBytes:             q.retainedBytes,
		Consumers:                 q.consumersLocked(),
		ConsumerCredit:            q.creditLocked(),
		Policy:                    q.cfg.policy,
		EffectivePolicyDefinition: cloneMap(q.policyDef),
		MessagesDelayed:           len(q.delayed),
		DelayedRetry:              q.cfg.retry.String(),
		Stats:                     q.stats,
	}
	info.NextDelayedAt, info.LastDelayedAt = q.delayedSpanLocked()
	q.unlock()
	q.flushDead()
	return info
}

// creditLocked sums the credit of the queue's consumers.
func (q *Queue) creditLocked() int64 {
	var n int64
	for _, s := range q.subs {
		if q.isActiveLocked(s) {
			n += int64(s.credit())
		}
	}
	return n
}

// Purge removes every ready and delayed message (never dead-lettered) and
// returns how many there were.
func (q *Queue) Purge() int {
	q.mu.Lock()
	defer q.unlock()
	n := q.readyCount + len(q.delayed)
	if q.persist {
		q.returns.each(q.settleStoredLocked)
		q.eachLevel(func(l *level) bool {
			l.main.each(q.settleStoredLocked)
			return true
		})
		q.clearDelayedLocked(true)
		q.clearPagedLocked(true)
		q.loadPurged = q.loading
	}
	q.clearReadyLocked()
	q.blocked = false
	q.armTimerLocked(q.nowNano())
	return n
}

func (q *Queue) clearReadyLocked() {
	unready := func(e *entry) { e.ready = false }
	q.returns.each(unready)
	q.returns.reset()
	q.eachLevel(func(l *level) bool {
		l.main.each(unready)
		l.main.reset()
		return true
	})
	q.clearPagedLocked(false)
	q.clearDelayedLocked(false)
	clear(q.ttl)
	q.ttl = q.ttl[:0]
	q.readyCount, q.readyBytes = 0, 0
}

func (q *Queue) nowNano() int64 { return q.b.now().UnixNano() }

// clockLocked returns the time for expiry and the timer, or 0 when nothing
// in the queue depends on it (no message deadline, no armed timer, no
// x-expires): the per-message paths then read no clock.
func (q *Queue) clockLocked() int64 {
	if len(q.ttl) > 0 || len(q.delayed) > 0 || q.timerAt != 0 || q.cfg.expires > 0 {
		return q.nowNano()
	}
	if q.prio == nil {
		if q.paged.minDeadline() != 0 || q.fresh.minDeadline() != 0 {
			return q.nowNano()
		}
	} else if d, _, _ := q.pagedMinDeadlineLocked(); d != 0 {
		return q.nowNano()
	}
	return 0
}

// ---- publishing ----

type enqueueResult uint8

const (
	enqueued enqueueResult = iota
	enqueueRejected
	enqueueGone // the queue was deleted meanwhile
)

func (q *Queue) newEntry(m *Message, now int64) *entry {
	q.seq++
	// anns shares m.Anns (never modified in place; a merge makes a new map),
	// which tells encodeState that they are unchanged.
	e := &entry{msg: m, seq: q.seq, dc: m.DeliveryCount, heapIdx: -1}
	if q.prio != nil {
		e.prio = q.priorityOf(m)
	}
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

// enqueue stores m, applying TTL and overflow rules, and dispatches. A
// durable message on a persisting queue is stored with its own batch.
func (q *Queue) enqueue(m *Message) enqueueResult {
	var enc []byte
	if q.persist && m.Header.Durable {
		enc = q.b.encode(m)
	}
	var recs []store.Record
	q.mu.Lock()
	res := q.enqueueLocked(m, enc, &recs)
	if len(recs) > 0 {
		q.b.st.Commit(new(store.Batch).Append(recs...), appendDone([]*Queue{q}, recs, q.b.logStoreErr))
	}
	q.unlock()
	q.flushDead()
	return res
}

// enqueueLocked is enqueue with q.mu held. When enc is not nil (m is
// durable) and q persists, the stored record is appended to recs: the
// caller must commit recs before q.unlock submits q.pend (which may hold
// operations on the new seq).
func (q *Queue) enqueueLocked(m *Message, enc []byte, recs *[]store.Record) enqueueResult {
	if q.deleted {
		return enqueueGone
	}
	persist := q.persist && enc != nil
	now := q.clockLocked()
	if now == 0 && (q.cfg.messageTTL >= 0 || m.Header.HasTTL) {
		now = q.nowNano() // the new message gets a deadline
	}
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
		q.stats.Published++
		e := q.newEntry(m, now)
		if e.deadline != 0 && e.deadline <= now {
			// x-message-ttl=0 (or header ttl 0): delivered at once if a
			// consumer has credit, otherwise expired at publish.
			var s *Subscription
			if q.readyCount == 0 && !q.loading {
				s = q.nextSubForLocked(e)
			}
			if s != nil {
				e.stored = persist && !s.preSettled
				q.deliverLocked(s, e)
			} else {
				e.stored = persist && q.retainsLocked(ReasonExpired)
				q.deadLocked(e, ReasonExpired, nil)
			}
			if e.stored {
				*recs = append(*recs, q.recordLocked(e, enc))
			}
			break
		}
		e.stored = persist // before it is paged: a stored message is not spilled
		q.addReadyLocked(e)
		if persist {
			*recs = append(*recs, q.recordLocked(e, enc))
		}
		q.dispatchLocked()
		if q.dropsHead() {
			q.dropHeadLocked()
		}
		if q.typ == Quorum && q.cfg.overflow == OverflowRejectPublish && q.overLocked() {
			q.blocked = true
		}
	}
	q.armTimerLocked(now)
	return res
}

// recordLocked returns e's store record and reserves seqs in the metadata
// when e.seq passes the reservation (so seqs are never reused, even after
// the messages holding the highest ones were settled before a restart).
func (q *Queue) recordLocked(e *entry, enc []byte) store.Record {
	if e.seq >= q.seqRes {
		q.seqRes = e.seq + seqReserve
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], q.seqRes)
		q.pend.PutMeta(seqKey(q.id), v[:])
	}
	return store.Record{Queue: q.id, Seq: e.seq, Msg: enc, State: encodeState(e)}
}

// settleStoredLocked removes e's stored copy (accepted, dropped, purged).
func (q *Queue) settleStoredLocked(e *entry) {
	if e.stored && !e.forwarded {
		e.forwarded = true
		q.pend.Settle(q.id, e.seq)
	}
}

// updateStoredLocked rewrites e's stored state.
func (q *Queue) updateStoredLocked(e *entry) {
	if e.stored && !e.forwarded {
		q.pend.Update(q.id, e.seq, encodeState(e))
	}
}

// unlock submits the store operations collected under q.mu, then unlocks.
func (q *Queue) unlock() {
	if q.pend.Len() > 0 {
		b := new(store.Batch)
		*b = q.pend
		q.pend = store.Batch{}
		q.b.st.Commit(b, q.b.logStoreErr)
	}
	q.mu.Unlock()
}

func (q *Queue) hasLimit() bool { return q.cfg.maxLen >= 0 || q.cfg.maxBytes >= 0 }

func (q *Queue) dropsHead() bool {
	if !q.hasLimit() {
		return false
	}
	return q.cfg.overflow == OverflowDropHead || (q.typ == Quorum && q.cfg.overflow == OverflowRejectPublishDLX)
}

// overLocked reports whether the ready, retained and delayed messages exceed a limit.
func (q *Queue) overLocked() bool {
	return (q.cfg.maxLen >= 0 && q.lengthLocked() > q.cfg.maxLen) ||
		(q.cfg.maxBytes >= 0 && q.bytesLocked() > q.cfg.maxBytes)
}

// rejectsLocked decides reject-publish overflow for a new message of size.
func (q *Queue) rejectsLocked(size int) bool {
	if !q.hasLimit() {
		return false
	}
	switch {
	case q.typ == Classic && (q.cfg.overflow == OverflowRejectPublish || q.cfg.overflow == OverflowRejectPublishDLX):
		// A classic queue rejects the message that would exceed the limit.
		return (q.cfg.maxLen >= 0 && q.lengthLocked()+1 > q.cfg.maxLen) ||
			(q.cfg.maxBytes >= 0 && q.bytesLocked()+int64(size) > q.cfg.maxBytes)
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
	return below(q.cfg.maxLen, q.lengthLocked()) && below(q.cfg.maxBytes, q.bytesLocked())
}

// lengthLocked and bytesLocked are what the length limits count: ready,
// retained (at-least-once) and delayed messages.
func (q *Queue) lengthLocked() int64 {
	return int64(q.readyCount + len(q.retained) + len(q.delayed))
}

func (q *Queue) bytesLocked() int64 { return q.readyBytes + q.retainedBytes + q.delayedBytes }

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
	q.readyBytes += e.size()
	l := &q.level
	if q.prio != nil {
		l = q.levelFor(e.prio)
	}
	if q.loading && e.seq > q.loadEnd {
		l.fresh.push(e) // behind every message still being read back
		q.pagedOutLocked(l, e)
		return
	}
	if q.pagesLocked(l) {
		l.paged.push(e)
		q.pagedOutLocked(l, e)
		return
	}
	q.ttl.add(e)
	l.main.pushBack(e)
}

// pagedOutLocked follows e's push behind level l's window: stored
// messages are dropped once durable, the others written to the spill log.
func (q *Queue) pagedOutLocked(l *level, e *entry) {
	if q.spills && !e.stored {
		q.spillLocked(l, e)
	}
	q.pageOutLocked()
}

// requeueLocked returns a delivered entry to the ready set: a classic queue
// puts it back at its original position, a quorum queue into its returns
// (delivered before the other ready messages).
func (q *Queue) requeueLocked(e *entry) {
	e.delivered = false
	q.updateStoredLocked(e)
	e.ready = true
	q.readyCount++
	q.readyBytes += e.size()
	q.ttl.add(e)
	if q.typ == Quorum {
		e.inReturns = true
		q.returns.pushBack(e)
	} else {
		q.levelOf(e).main.insertBySeq(e)
	}
	q.filtersSeeRequeueLocked(e)
}

func (q *Queue) takeReadyLocked(e *entry) {
	e.ready = false
	e.inReturns = false
	q.readyCount--
	q.readyBytes -= e.size()
	q.ttl.remove(e)
}

// popHeadLocked removes the next entry to deliver (quorum: returns first;
// then the highest level's head).
func (q *Queue) popHeadLocked() *entry {
	e := q.returns.popFront()
	if e == nil {
		if q.prio == nil {
			e = q.popLevelLocked(&q.level)
		} else {
			for _, l := range q.prio.active {
				if e = q.popLevelLocked(l); e != nil {
					break
				}
			}
		}
	}
	if e != nil {
		q.takeReadyLocked(e)
	}
	return e
}

// expireLocked dead-letters every ready message whose deadline has passed,
// in deadline order (ties in queue order).
func (q *Queue) expireLocked(now int64) {
	for {
		pd, lv, pl := q.pagedMinDeadlineLocked()
		if pd != 0 && pd <= now && (len(q.ttl) == 0 || pd < q.ttl[0].deadline) {
			s := pl.takeEarliest()
			q.readyCount--
			q.readyBytes -= s.size
			q.expirePagedLocked(lv, s)
			continue
		}
		if len(q.ttl) == 0 || q.ttl[0].deadline > now {
			q.releaseSpillLocked()
			return
		}
		e := q.ttl[0]
		inReturns := e.inReturns
		q.takeReadyLocked(e)
		q.holeLocked(e, inReturns)
		q.deadLocked(e, ReasonExpired, nil)
	}
}

// ---- dead path ----

// retainsLocked reports whether a message dying for r is retained
// (at-least-once; RabbitMQ never applies it to maxlen).
func (q *Queue) retainsLocked(r Reason) bool {
	return q.typ == Quorum && q.cfg.dlStrategy == StrategyAtLeastOnce && r != ReasonMaxLen && q.b.deadLetterer() != nil
}

// deadLocked queues e for the DeadLetterer; flushDead hands the batch over
// after the lock is released. An at-least-once queue keeps e (retained)
// until the DeadLetterer forwards it. A stored at-most-once entry keeps its
// stored copy until ForwardDead moves it or flushDead settles it.
func (q *Queue) deadLocked(e *entry, r Reason, err *Error) {
	if q.b.deadLetterer() == nil {
		q.settleStoredLocked(e)
		return
	}
	if q.retainsLocked(r) {
		now := q.nowNano()
		e.retained, e.inFlight, e.delivered = true, true, false
		x := e.extension()
		x.deadReason, x.deadErr, x.deadAt = r, err, now
		q.retained = append(q.retained, e)
		q.retainedBytes += e.size()
		q.b.retained.Add(1)
		q.updateStoredLocked(e)
		q.outbox = append(q.outbox, q.retainedDead(e))
		q.b.armRetry()
		return
	}
	// At most once: the dead-letterer stamps the deaths of a batch with one
	// clock reading, so Time stays zero (unknown) here.
	d := Dead{Msg: e.msg.stateCopy(e.dc, e.anns()), Reason: r, Error: err}
	if e.stored {
		d.e = e
	}
	q.outbox = append(q.outbox, d)
}

func (q *Queue) retainedDead(e *entry) Dead {
	dead := e.dead()
	return Dead{Msg: e.msg.stateCopy(e.dc, e.anns()), Reason: dead.deadReason, Error: dead.deadErr,
		Retained: true, Time: timeFromNano(dead.deadAt), e: e}
}

// unretainLocked removes e from the retained list (forwarded or dropped).
func (q *Queue) unretainLocked(e *entry) {
	if !e.retained {
		return
	}
	e.retained = false
	if i := slices.Index(q.retained, e); i >= 0 {
		q.retained = slices.Delete(q.retained, i, i+1)
	}
	q.retainedBytes -= e.size()
	q.b.retained.Add(-1)
}

// dropRetainedLocked drops every retained message (a switch to
// at-most-once, as rabbit_fifo_dlx does, or a queue delete).
func (q *Queue) dropRetainedLocked() {
	for _, e := range q.retained {
		e.retained = false
		q.settleStoredLocked(e)
	}
	q.b.retained.Add(-int64(len(q.retained)))
	q.retained, q.retainedBytes = nil, 0
}

// retryRetained hands the retained messages that are not already with the
// DeadLetterer to it again.
func (q *Queue) retryRetained() {
	q.mu.Lock()
	for _, e := range q.retained {
		if !e.inFlight {
			e.inFlight = true
			q.outbox = append(q.outbox, q.retainedDead(e))
		}
	}
	q.unlock()
	q.flushDead()
}

// maxKeptOutbox bounds the outbox storage a queue keeps between flushes
// (a mass expiry's outbox is let go).
const maxKeptOutbox = 256

// flushDead hands dead messages to the DeadLetterer in the order they died.
// Only one goroutine flushes a queue at a time; a reentrant or concurrent
// call leaves its messages to the active flusher. Afterwards, stored
// at-most-once messages that the DeadLetterer did not forward with
// ForwardDead are settled, and retained ones become retryable.
func (q *Queue) flushDead() {
	q.mu.Lock()
	if q.flushing || len(q.outbox) == 0 {
		q.unlock()
		return
	}
	q.flushing = true
	for len(q.outbox) > 0 {
		batch := q.outbox
		q.outbox = nil
		q.unlock()
		if dl := q.b.deadLetterer(); dl != nil {
			dl.DeadLetter(q, batch)
		}
		q.mu.Lock()
		for i := range batch {
			e := batch[i].e
			switch {
			case e == nil:
			case e.retained:
				e.inFlight = false
			case !batch[i].Retained:
				q.settleStoredLocked(e)
			}
		}
		if q.outbox == nil && cap(batch) <= maxKeptOutbox {
			clear(batch)
			q.outbox = batch[:0] // the next deaths reuse its storage
		}
	}
	q.flushing = false
	q.unlock()
}

// ---- timer (message TTL, delayed retry and x-expires) ----

// armTimerLocked re-arms the queue's single timer to its earliest deadline:
// the first message expiry, the first delayed message due, or the queue
// expiry (x-expires) when unused.
func (q *Queue) armTimerLocked(now int64) {
	next := int64(0)
	if !q.deleted && !q.b.closed.Load() {
		if len(q.ttl) > 0 {
			next = q.ttl[0].deadline
		}
		if pd, _, _ := q.pagedMinDeadlineLocked(); pd != 0 && (next == 0 || pd < next) {
			next = pd
		}
		if pd := q.nextDelayedLocked(); pd != 0 && (next == 0 || pd < next) {
			next = pd
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
		q.unlock()
		return
	}
	q.timerAt = 0
	now := q.nowNano()
	q.expireLocked(now)
	if q.promoteDelayedLocked(now) {
		q.afterRequeueLocked(now)
	}
	at, ok := q.expiresAtLocked()
	expired := ok && at <= now
	q.armTimerLocked(now)
	q.unlock()
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
	q.dropRetainedLocked()
	q.pend = store.Batch{} // the queue's stored messages go with one DeleteQueue
	q.clearReadyLocked()
	subs := q.subs
	for _, s := range subs {
		s.cancelled = true
		s.unsettled.Clear()
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
	q.vh.queueDeleted(q)
}

// String returns "queue '<name>' in vhost '<vhost>'", as RabbitMQ's errors say.
func (q *Queue) String() string { return fmt.Sprintf("queue '%s' in vhost '%s'", q.name, q.vh.name) }
