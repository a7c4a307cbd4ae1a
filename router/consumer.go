package router

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/epitaph-mq/epitaph/router/seqwin"
	"github.com/epitaph-mq/epitaph/value"
)

// Delivery is a message handed to a consumer.
type Delivery struct {
	// Tag identifies the delivery within its Subscription for Settle.
	Tag uint64
	Msg *Message
	// Header is the header to deliver: the message's, with delivery-count
	// and first-acquirer set.
	Header Header

	// What the delivered message-annotations are built from (see
	// AppendAMQP10Annotations): the entry's broker annotations (never
	// modified in place: copy on write), and for quorum queues the
	// acquired-count.
	anns     value.Map
	acquired uint32
	quorum   bool
}

// BrokerAnnotations are the broker-set annotations the message carries
// (the dead-letter history in its neutral form, the trace context,
// modified-outcome annotations), without the per-delivery ones. Callers
// must not modify them.
func (d Delivery) BrokerAnnotations() value.Map { return d.anns }

// Consumer receives deliveries from a queue. Both methods are called with the
// queue's lock held: they must not block or call back into the queue.
type Consumer interface {
	Deliver(d Delivery)
	// Drained reports that a drain finished: the consumer's delivery-count is
	// now deliveryCount and its credit 0.
	Drained(deliveryCount uint32)
}

// ConsumerOptions configure a subscription.
type ConsumerOptions struct {
	// PreSettled deliveries are removed from the queue when handed over.
	PreSettled bool
	// Owner identifies the connection (for exclusive queues).
	Owner any
	// InitialDeliveryCount is the sender's initial delivery-count (the
	// attach's initial-delivery-count); zero is fine for most links.
	InitialDeliveryCount uint32
	// Priority is the consumer priority (AMQP 1.0's rabbitmq:priority
	// attach property, AMQP 0.9.1's x-priority consume argument; see
	// ConsumerPriority): consumers of a higher priority with credit get
	// messages first (consumer_select.go). Default 0.
	Priority int64
	// Filter, when set, selects the messages the consumer gets; the others
	// stay in the queue for other consumers (consumerfilter.go).
	Filter MessageFilter
	// Getter marks the subscription through which AMQP 0-9-1's basic.get
	// takes messages. As in RabbitMQ, basic.get is not a consumer: the
	// subscription is not counted in the queue's consumers, does not make
	// an auto-delete queue deletable, and takes no part in single active
	// consumer's election.
	Getter bool
}

// CancelReason says why a subscription ends; it decides the delivery-count
// effect on the unsettled deliveries that return to the queue.
type CancelReason uint8

// Cancel reasons.
const (
	// CancelDetach: the link detached. A quorum queue counts acquired-count
	// +1 only; a classic queue counts a failed delivery as well (RabbitMQ
	// 4.3 requeues a stopped classic-queue consumer's messages with
	// delivery-failed set).
	CancelDetach CancelReason = iota
	// CancelConnectionLost: the consumer is gone (its session ended, its
	// connection closed, cleanly or not, or was lost): acquired-count and
	// delivery-count +1 on every queue type.
	CancelConnectionLost
)

// Subscription is one consumer's attachment to a queue. Its methods may be
// called from any goroutine.
type Subscription struct {
	q          *Queue
	c          Consumer
	preSettled bool
	owner      any

	// Guarded by q.mu.
	deliveryCount uint32 // the receiver's delivery-count from its last flow
	linkCredit    uint32 // the receiver's link-credit from its last flow
	handedOut     uint32 // the sender's delivery-count: deliveries handed out
	nextTag       uint64
	unsettled     seqwin.Window[uint64, *entry] // by tag
	cancelled     bool

	priority   int64         // consumer priority (immutable)
	order      uint64        // attach order within the queue (immutable)
	lastServed uint64        // when the queue last picked it (consumer_select.go)
	told       uint8         // the activity it was last told (quorum: activityActive, ...)
	getter     bool          // basic.get's subscription (ConsumerOptions.Getter)
	filter     MessageFilter // nil: every message
	scan       filterScan    // with a filter: what it has tested
}

// Subscribe adds a consumer. It starts with no credit: call Flow.
func (q *Queue) Subscribe(c Consumer, opts ConsumerOptions) (*Subscription, error) {
	q.mu.Lock()
	defer q.unlock()
	if q.deleted {
		return nil, fmt.Errorf("%w: %s was deleted", ErrNotFound, q)
	}
	if q.exclusive && q.owner != opts.Owner {
		return nil, fmt.Errorf("%w: cannot obtain exclusive access to locked %s", ErrResourceLocked, q)
	}
	s := &Subscription{
		q: q, c: c, preSettled: opts.PreSettled, owner: opts.Owner,
		deliveryCount: opts.InitialDeliveryCount,
		handedOut:     opts.InitialDeliveryCount,
		priority:      opts.Priority,
		filter:        opts.Filter,
		getter:        opts.Getter,
	}
	if s.filter != nil {
		s.scan.returnsDirty = true
		if q.prio != nil {
			s.scan.levelSeq = make([]uint64, int(q.prio.top)+1)
		}
		q.filteredSubs++
	}
	q.addSubLocked(s)
	if s.getter {
		q.getters++
	} else {
		q.hadConsumer = true
	}
	q.armTimerLocked(q.nowNano()) // no x-expires while consumed
	return s, nil
}

// Queue returns the subscription's queue.
func (s *Subscription) Queue() *Queue { return s.q }

// credit is the credit available to the queue: deliveryCount + linkCredit -
// handedOut in serial-number arithmetic (RFC 1982), never negative.
func (s *Subscription) credit() uint32 {
	if s.cancelled {
		return 0
	}
	since := int64(int32(s.handedOut - s.deliveryCount)) // deliveries since the receiver's count
	c := int64(s.linkCredit) - since
	switch {
	case c < 0:
		return 0
	case c > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(c)
}

// Flow applies a flow frame's delivery-count and link-credit from the
// receiver; credit available to the queue is deliveryCount+linkCredit minus
// the deliveries already handed to the consumer.
//
// With drain set, the queue delivers what it has; any credit left is then
// consumed by advancing the handed-out count to deliveryCount+linkCredit,
// and Drained is called with the resulting delivery-count (also when no
// credit was left, so the link can always answer the drain).
func (s *Subscription) Flow(deliveryCount, linkCredit uint32, drain bool) {
	q := s.q
	q.mu.Lock()
	if s.cancelled {
		q.unlock()
		return
	}
	s.deliveryCount, s.linkCredit = deliveryCount, linkCredit
	now := q.clockLocked()
	q.expireLocked(now)
	q.dispatchLocked()
	// As RabbitMQ's credit reply, which tells the session whether the
	// consumer is active.
	q.notifyActive(s, q.isActiveLocked(s))
	if drain {
		// 2.6.7 Flow Control: "the sender MUST (after sending all available
		// messages) advance the delivery-count as much as possible,
		// consuming all link-credit, and send the flow state to the receiver."
		if s.credit() > 0 {
			s.handedOut = deliveryCount + linkCredit
		}
		s.c.Drained(s.handedOut)
	}
	q.armTimerLocked(now)
	q.unlock()
	q.flushDead()
}

// Settle applies a consumer's outcome to one delivery.
//
// SettleAccept removes the message; SettleRelease requeues it (acquired-count +1);
// SettleReject dead-letters it with reason rejected (delivery-count +1);
// SettleModify requeues it (delivery-count +1 when DeliveryFailed; a quorum
// queue merges the annotations and checks its delivery limit) or, with
// UndeliverableHere, dead-letters it with reason rejected. Errors wrap
// ErrNotFound (unknown tag or ended subscription) or ErrInvalidArgument
// (bad outcome, or a quorum modified annotation key that is not a symbol
// starting with "x-"); the delivery is then left as it was.
//
// On a quorum queue a message that a release, a modify or a cancel returns
// may be delayed instead of ready (delayed.go): until the modify's
// x-opt-delivery-time annotation when it is later than now, or as the
// queue's delayed-retry configuration says.
func (s *Subscription) Settle(tag uint64, o Settlement) error {
	var err [1]error
	s.SettleBatch([]uint64{tag}, o, err[:])
	return err[0]
}

// SettleBatch applies one outcome to several deliveries, in the order of
// tags, under one acquisition of the queue's lock; the messages that die
// are dead-lettered as one batch, in that order (as RabbitMQ does). errs[i] is set to
// Settle's error for tags[i], or nil; len(errs) must be len(tags).
func (s *Subscription) SettleBatch(tags []uint64, o Settlement, errs []error) {
	q := s.q
	q.mu.Lock()
	var (
		anns   value.Map
		failed error
	)
	switch o.Kind {
	case SettleAccept, SettleReject, SettleRelease:
	case SettleModify:
		if q.typ == Quorum && len(o.Annotations) > 0 {
			anns, failed = modifiedAnnotations(o.Annotations)
		}
	default:
		failed = fmt.Errorf("%w: unrecognised delivery state %d", ErrInvalidArgument, uint8(o.Kind))
	}
	if failed == nil && s.cancelled {
		failed = fmt.Errorf("%w: subscription to %s has ended", ErrNotFound, q)
	}
	if failed != nil {
		q.unlock()
		for i := range errs {
			errs[i] = failed
		}
		return
	}
	requeued := false
	for i, tag := range tags {
		e, ok := s.unsettled.Delete(tag)
		if !ok {
			errs[i] = fmt.Errorf("%w: no unsettled delivery with tag %d", ErrNotFound, tag)
			continue
		}
		errs[i] = nil
		q.unacked--
		switch o.Kind {
		case SettleAccept:
			q.stats.Acknowledged++
			q.settleStoredLocked(e)
		case SettleRelease:
			e.acquired++
			requeued = q.returnLocked(e, false, nil) || requeued
		case SettleReject:
			e.acquired++
			e.dc++
			q.deadLocked(e, ReasonRejected, o.Error)
		case SettleModify:
			e.acquired++
			if o.DeliveryFailed {
				e.dc++
			}
			if len(anns) > 0 {
				merged := mergeAnnotations(e.anns(), anns)
				e.setAnns(merged)
				m := *e.msg // later deliveries carry the merged annotations in Msg too
				m.Anns = merged
				e.msg = &m
			}
			switch {
			case o.UndeliverableHere:
				q.deadLocked(e, ReasonRejected, nil)
			case q.overDeliveryLimit(e):
				q.deadLocked(e, ReasonDeliveryLimit, nil)
			default:
				requeued = q.returnLocked(e, o.DeliveryFailed, anns) || requeued
			}
		}
	}
	now := q.clockLocked()
	if requeued {
		q.afterRequeueLocked(now)
	}
	if q.settledLocked(s) {
		q.dispatchLocked()
	}
	q.armTimerLocked(now)
	q.unlock()
	q.flushDead()
}

// overDeliveryLimit is the quorum check after a return (4.3: delivery-count > limit).
func (q *Queue) overDeliveryLimit(e *entry) bool {
	return q.typ == Quorum && q.cfg.deliveryLimit >= 0 && int64(e.dc) > q.cfg.deliveryLimit
}

// afterRequeueLocked applies a classic queue's drop-head after a requeue,
// drops what expired meanwhile and dispatches.
func (q *Queue) afterRequeueLocked(now int64) {
	if q.typ == Classic && q.dropsHead() {
		q.dropHeadLocked()
	}
	q.expireLocked(now)
	q.dispatchLocked()
}

// Cancel ends the subscription; unsettled deliveries return to the queue in
// delivery order with acquired-count +1 and, when the reason counts a failed
// delivery (failedOnCancel), delivery-count +1, which may exceed a quorum
// queue's delivery limit. An
// auto-delete queue is deleted when its last consumer is cancelled.
func (s *Subscription) Cancel(reason CancelReason) {
	q := s.q
	q.mu.Lock()
	if s.cancelled {
		q.unlock()
		return
	}
	s.cancelled = true
	if s.filter != nil {
		q.filteredSubs--
	}
	if s.getter {
		q.getters--
	}
	promoted := q.removeSubLocked(s)
	tags := make([]uint64, 0, s.unsettled.Len())
	for t := range s.unsettled.All() {
		tags = append(tags, t)
	}
	slices.Sort(tags) // All yields the tags in the window's overflow map unordered
	failed := q.failedOnCancel(reason)
	requeued := false
	for _, t := range tags {
		e, _ := s.unsettled.Get(t)
		q.unacked--
		e.acquired++
		if failed {
			e.dc++
			if q.overDeliveryLimit(e) {
				q.deadLocked(e, ReasonDeliveryLimit, nil)
				continue
			}
		}
		requeued = q.returnLocked(e, failed, nil) || requeued
	}
	s.unsettled.Clear()
	now := q.nowNano()
	if requeued {
		q.afterRequeueLocked(now)
	} else if promoted {
		q.dispatchLocked()
	}
	autoDelete := q.autoDelete && q.hadConsumer && q.consumersLocked() == 0
	if len(q.subs) == 0 {
		q.lastUsed = now
	}
	q.armTimerLocked(now)
	q.unlock()
	q.flushDead()
	if autoDelete {
		q.vh.autoDeleteQueue(q)
	}
}

// failedOnCancel reports whether cancelling a subscription for reason counts
// a failed delivery (delivery-count +1) for its unsettled messages: always
// when the consumer is gone, and on a classic queue also for a link detach
// (RabbitMQ 4.3: only a quorum queue returns a detached link's messages
// without counting a failure).
func (q *Queue) failedOnCancel(reason CancelReason) bool {
	return reason == CancelConnectionLost || q.typ == Classic
}

// ---- dispatch ----

// dispatchLocked hands ready messages to consumers with credit.
func (q *Queue) dispatchLocked() {
	for q.readyCount > 0 {
		s := q.nextSubLocked()
		if s == nil {
			return
		}
		if s.filter != nil {
			// Its first match, wherever it is; none: it has no work left
			// and the next pick passes it over.
			if e := q.takeMatchLocked(s); e != nil {
				q.deliverLocked(s, e)
			}
			continue
		}
		e := q.popHeadLocked()
		if e == nil {
			return
		}
		q.deliverLocked(s, e)
	}
}

// deliverLocked hands e (no longer ready) to s.
func (q *Queue) deliverLocked(s *Subscription, e *entry) {
	q.stats.Delivered++
	if s.preSettled {
		q.stats.DeliveredNoAck++
	}
	if e.acquired > 0 {
		q.stats.Redelivered++
	}
	s.nextTag++
	tag := s.nextTag
	s.handedOut++
	h := e.msg.Header
	h.DeliveryCount = e.dc
	// first-acquirer = not redelivered AND delivery_count == 0 AND no deaths.
	h.FirstAcquirer = e.acquired == 0 && e.dc == 0 && !hasDeaths(e.anns())
	d := Delivery{Tag: tag, Msg: e.msg, Header: h, anns: e.anns(), acquired: e.acquired, quorum: q.typ == Quorum}
	if !s.preSettled {
		s.unsettled.Put(tag, e)
		q.unacked++
		if e.stored {
			e.delivered = true
			q.updateStoredLocked(e)
		}
	} else {
		q.settleStoredLocked(e)
	}
	s.c.Deliver(d)
}

// modifiedAnnotations validates and types a modified outcome's annotations
// (quorum queues): keys must be symbols starting with "x-".
func modifiedAnnotations(in value.Map) (value.Map, error) {
	out := make(value.Map, 0, len(in))
	for _, kv := range in {
		k, ok := kv.Key.(value.Symbol)
		if !ok || !strings.HasPrefix(string(k), "x-") {
			return nil, fmt.Errorf("%w: modified message-annotations key %v: must be a symbol starting with \"x-\"", ErrInvalidArgument, kv.Key)
		}
		out = out.Set(k, normaliseAnnotation(kv.Value))
	}
	return out, nil
}

// mergeAnnotations is maps:merge(old, new): new keys overwrite, nothing is deleted.
func mergeAnnotations(old, add value.Map) value.Map {
	if len(add) == 0 {
		return old
	}
	m := cloneMap(old)
	for _, kv := range add {
		m = m.Set(kv.Key, kv.Value)
	}
	return m
}

// consumersLocked counts the queue's consumers: its subscriptions but
// basic.get's.
func (q *Queue) consumersLocked() int { return len(q.subs) - q.getters }
