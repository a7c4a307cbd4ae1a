package channel

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
	"github.com/epitaph-mq/epitaph/value"
	"go.opentelemetry.io/otel/trace"
)

// window is the credit of a consumer with no prefetch limit (prefetch 0,
// or no-ack): deliveries handed to the connection but not yet written. It
// bounds what a consumer holds in memory, not what it may leave
// unacknowledged.
const window = 1000

// consumer is one basic.consume: a router subscription whose credit is
// the prefetch window.
type consumer struct {
	ch        *channel
	tag       string
	q         *router.Queue
	sub       *router.Subscription
	noAck     bool
	prefetch  uint16 // 0: no limit (credit refills as deliveries are written)
	exclusive bool

	flowMu   sync.Mutex
	released uint32 // deliveries settled (prefetch) or written (no limit)
	// cancelled: basic.cancel was received; the subscription ends when the
	// last unacknowledged delivery is settled (RabbitMQ 4.3 keeps them
	// checked out and settleable). Set under ch.mu, so that a delivery is
	// written either before cancel-ok or not at all.
	cancelled atomic.Bool
	gone      atomic.Bool // the subscription has ended (set under flowMu; write reads it under ch.mu)
	out       int         // unacknowledged deliveries (guarded by ch.mu)
	buf       []byte
	deliver   amqp091.BasicDeliver // the method written for each delivery (guarded by ch.mu)
}

// Deliver implements router.Consumer; called with the queue's lock held.
func (k *consumer) Deliver(d router.Delivery) { k.ch.c.post(mailItem{cons: k, d: d}) }

// Drained implements router.Consumer (0-9-1 consumers never drain).
func (k *consumer) Drained(uint32) {}

// QueueDeleted implements router.QueueDeletedNotifier: the client is sent
// basic.cancel (consumer_cancel_notify).
func (k *consumer) QueueDeleted(*router.Queue) { k.ch.c.post(mailItem{cons: k, del: true}) }

// flow grants the consumer its credit: the window beyond what is released.
func (k *consumer) flow(released uint32) {
	k.flowMu.Lock()
	defer k.flowMu.Unlock()
	k.released += released
	if k.cancelled.Load() || k.gone.Load() {
		return
	}
	w := uint32(window)
	if k.prefetch > 0 && !k.noAck {
		w = uint32(k.prefetch)
	}
	k.sub.Flow(k.released, w, false)
}

// write appends one delivery to the connection's output (the deliverer's
// goroutine, which writes it with the rest of its batch) and returns the
// output's length.
func (k *consumer) write(d *router.Delivery) (int, error) {
	ch := k.ch
	ch.mu.Lock()
	if ch.ended || k.gone.Load() {
		ch.mu.Unlock()
		return 0, nil // its unsettled delivery went back with the subscription
	}
	if k.cancelled.Load() {
		// Handed over before basic.cancel took effect: it goes back.
		ch.mu.Unlock()
		if !k.noAck {
			_ = k.sub.Settle(d.Tag, router.Settlement{Kind: router.SettleRelease})
		}
		return 0, nil
	}
	var span trace.Span
	var extra value.Map
	if tr := ch.c.srv.opts.Tracer; tr != nil {
		// As over AMQP 1.0, the consumer sees this delivery's context (as
		// the x-opt-traceparent header), and its settlement's span is a
		// child of it.
		span = tr.StartDeliver(k.q, d, k.tag)
		defer span.End()
		extra = telemetry.Inject(nil, span.SpanContext())
	}
	out, err := router.Delivery091With(d, k.buf, extra)
	if err != nil {
		ch.mu.Unlock()
		ch.c.log.Warn("delivery not convertible to AMQP 0-9-1; rejected", "queue", k.q.Name(), "err", err)
		if !k.noAck {
			_ = k.sub.Settle(d.Tag, router.Settlement{Kind: router.SettleReject})
		}
		return 0, nil
	}
	ch.nextTag++
	tag := ch.nextTag
	if !k.noAck {
		ch.unacked = append(ch.unacked, unacked{tag: tag, sub: k.sub, stag: d.Tag, cons: k, span: spanContextOf(span)})
		k.out++
	}
	k.deliver = amqp091.BasicDeliver{ConsumerTag: k.tag, DeliveryTag: tag, Redelivered: out.Redelivered,
		Exchange: out.Exchange, RoutingKey: out.RoutingKey}
	n, err := ch.c.appendContent(ch.id, &k.deliver, out.Props, out.Body)
	if ctr := ch.c.srv.opts.Counters; ctr != nil {
		ctr.Delivered(k.q, k.noAck)
	}
	if cap(out.Props) <= 4096 {
		k.buf = out.Props[:0]
	}
	ch.mu.Unlock()
	if k.noAck || k.prefetch == 0 {
		k.flow(1)
	}
	return n, err
}

// queueDeleted tells the client its consumer is gone.
func (k *consumer) queueDeleted() {
	ch := k.ch
	ch.mu.Lock()
	if ch.ended || ch.consumers[k.tag] != k {
		ch.mu.Unlock()
		return
	}
	delete(ch.consumers, k.tag)
	ch.mu.Unlock()
	k.cancel(router.CancelConnectionLost)
	if ch.c.hasCapability("consumer_cancel_notify") {
		_ = ch.send(&amqp091.BasicCancel{ConsumerTag: k.tag, NoWait: true})
	}
}

// cancel ends the subscription.
func (k *consumer) cancel(reason router.CancelReason) {
	k.flowMu.Lock()
	if k.gone.Load() {
		k.flowMu.Unlock()
		return
	}
	k.gone.Store(true)
	k.flowMu.Unlock()
	k.sub.Cancel(reason)
	srv := k.ch.c.srv
	if ctr := srv.opts.Counters; ctr != nil {
		ctr.ConsumerAdded(-1)
	}
	srv.mu.Lock()
	if srv.consumers[k.q]--; srv.consumers[k.q] <= 0 {
		delete(srv.consumers, k.q)
	}
	if k.exclusive {
		delete(srv.exclusive, k.q)
	}
	srv.mu.Unlock()
}

func (ch *channel) consume(m *amqp091.BasicConsume) error {
	if m.Queue == replyToQueue {
		return ch.consumeReply(m)
	}
	name := ch.queueName(m.Queue)
	if err := ch.authorize(auth.ResourceQueue, name, auth.Read, 60, 20); err != nil {
		return err
	}
	q, err := ch.lookupQueue(name, 60, 20)
	if err != nil {
		return err
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = newTag()
	}
	ch.mu.Lock()
	_, reused := ch.consumers[tag]
	reused = reused || ch.reply != nil && ch.reply.tag == tag
	ch.mu.Unlock()
	if reused {
		return connErr(amqp091.NotAllowed, 60, 20, "attempt to reuse consumer tag '%s'", tag)
	}
	opts := router.ConsumerOptions{PreSettled: m.NoAck, Owner: ch.c}
	if v, ok := m.Arguments.Get("x-priority"); ok {
		// consumer_priorities: the router's consumer priorities, as AMQP
		// 1.0's rabbitmq:priority. RabbitMQ refuses a value that is not an
		// integer as an invalid consume argument (406).
		if opts.Priority, err = router.ConsumerPriority("x-priority", v); err != nil {
			return ch.err(amqp091.PreconditionFailed, 60, 20, "invalid arg 'x-priority' for queue '%s' in vhost '%s': %v", q.Name(), ch.c.vhost.Name(), err)
		}
	}
	if m.Exclusive && q.SingleActiveConsumer() {
		// rabbit_amqqueue_process answers exclusive_consume_unavailable,
		// which the channel reports as the queue in exclusive use.
		return ch.err(amqp091.AccessRefused, 60, 20, "queue '%s' in vhost '%s' in exclusive use", q.Name(), ch.c.vhost.Name())
	}
	srv := ch.c.srv
	srv.mu.Lock()
	if srv.exclusive[q] || m.Exclusive && (srv.consumers[q] > 0 || q.Info().Consumers > 0) {
		srv.mu.Unlock()
		return ch.err(amqp091.AccessRefused, 60, 20, "queue '%s' in vhost '%s' in exclusive use", q.Name(), ch.c.vhost.Name())
	}
	srv.consumers[q]++
	if m.Exclusive {
		srv.exclusive[q] = true
	}
	srv.mu.Unlock()
	k := &consumer{ch: ch, tag: tag, q: q, noAck: m.NoAck, prefetch: ch.prefetch, exclusive: m.Exclusive}
	sub, err := q.Subscribe(k, opts)
	if err != nil {
		srv.mu.Lock()
		if srv.consumers[q]--; srv.consumers[q] <= 0 {
			delete(srv.consumers, q)
		}
		if m.Exclusive {
			delete(srv.exclusive, q)
		}
		srv.mu.Unlock()
		return ch.routerErr(err, 60, 20)
	}
	k.sub = sub
	if ctr := srv.opts.Counters; ctr != nil {
		ctr.ConsumerAdded(1)
	}
	ch.mu.Lock()
	ch.consumers[tag] = k
	ch.mu.Unlock()
	if !m.NoWait {
		if err := ch.send(&amqp091.BasicConsumeOk{ConsumerTag: tag}); err != nil {
			return err
		}
	}
	k.flow(0) // after consume-ok: the first delivery follows it
	return nil
}

func (ch *channel) cancel(m *amqp091.BasicCancel) error {
	if !ch.cancelReply(m.ConsumerTag) {
		ch.stopConsumer(m.ConsumerTag)
	}
	return ch.okUnlessNoWait(m.NoWait, &amqp091.BasicCancelOk{ConsumerTag: m.ConsumerTag})
}

// stopConsumer ends the consumer tag, if it exists: no more deliveries;
// its unacknowledged ones can still be settled.
func (ch *channel) stopConsumer(tag string) {
	ch.mu.Lock()
	k, ok := ch.consumers[tag]
	out := 0
	if ok {
		delete(ch.consumers, tag)
		k.cancelled.Store(true)
		if out = k.out; out > 0 {
			ch.draining[k] = struct{}{}
		}
	}
	ch.mu.Unlock()
	if ok {
		if out == 0 {
			k.cancel(router.CancelDetach)
		} else {
			// Its unacknowledged deliveries stay checked out and can still
			// be settled; no more are delivered.
			k.flowMu.Lock()
			k.sub.Flow(k.released, 0, false)
			k.flowMu.Unlock()
		}
	}
}

// getConsumer is the subscription basic.get takes a message with: credit
// 1 with drain, so that it takes at most one ready message.
type getConsumer struct {
	sub *router.Subscription
	got *router.Delivery
}

func (g *getConsumer) Deliver(d router.Delivery) { g.got = &d }
func (g *getConsumer) Drained(uint32)            {}

func (ch *channel) get(m *amqp091.BasicGet) error {
	name := ch.queueName(m.Queue)
	if err := ch.authorize(auth.ResourceQueue, name, auth.Read, 60, 70); err != nil {
		return err
	}
	q, err := ch.lookupQueue(name, 60, 70)
	if err != nil {
		return err
	}
	key := q
	g := ch.gets[key]
	if g == nil || m.NoAck {
		g = &getConsumer{}
		sub, err := q.Subscribe(g, router.ConsumerOptions{PreSettled: m.NoAck, Owner: ch.c, Getter: true})
		if err != nil {
			return ch.routerErr(err, 60, 70)
		}
		g.sub = sub
		if !m.NoAck {
			ch.gets[key] = g
		}
	}
	g.got = nil
	// The subscription's delivery-count is its handed-out count after
	// each get, so credit 1 from there takes one message.
	g.sub.Flow(g.handed(), 1, true)
	d := g.got
	g.got = nil
	if m.NoAck {
		defer g.sub.Cancel(router.CancelDetach)
	}
	if d == nil {
		return ch.send(&amqp091.BasicGetEmpty{})
	}
	var span trace.Span
	var extra value.Map
	if tr := ch.c.srv.opts.Tracer; tr != nil {
		span = tr.StartDeliver(q, d, "basic.get")
		defer span.End()
		extra = telemetry.Inject(nil, span.SpanContext())
	}
	out, err := router.Delivery091With(d, nil, extra)
	if err != nil {
		if !m.NoAck {
			_ = g.sub.Settle(d.Tag, router.Settlement{Kind: router.SettleReject})
		}
		return ch.err(amqp091.InternalError, 60, 70, "message not convertible: %v", err)
	}
	// The tag and the get-ok's place in the output are taken under the
	// lock, in order with the deliverer's deliveries; the socket write is
	// not: a client that stops reading would hold the lock with it, and
	// with it whoever else takes the lock (the store's confirm callback,
	// a direct reply-to publisher, the HTTP API).
	ch.mu.Lock()
	ch.nextTag++
	tag := ch.nextTag
	if !m.NoAck {
		ch.unacked = append(ch.unacked, unacked{tag: tag, sub: g.sub, stag: d.Tag, span: spanContextOf(span)})
	}
	count := q.Len()
	if ctr := ch.c.srv.opts.Counters; ctr != nil {
		ctr.Delivered(q, m.NoAck)
	}
	_, err = ch.c.appendContent(ch.id, &amqp091.BasicGetOk{DeliveryTag: tag, Redelivered: out.Redelivered,
		Exchange: out.Exchange, RoutingKey: out.RoutingKey, MessageCount: uint32(count)}, out.Props, out.Body)
	ch.mu.Unlock()
	if err != nil {
		return err
	}
	return ch.c.flush()
}

// handed is the number of messages handed out through the subscription:
// every get takes at most one, and drain consumes the credit otherwise.
func (g *getConsumer) handed() uint32 { return g.sub.HandedOut() }

// settle applies an ack, reject or nack to one delivery tag, or with
// multiple to every unacknowledged tag up to it (0: all of them), per
// subscription in ascending tag order. The reader's goroutine only: take
// is the channel's scratch.
func (ch *channel) settle(tag uint64, multiple bool, o router.Settlement, classID, methodID uint16) error {
	ch.mu.Lock()
	take := ch.takeBuf[:0]
	if multiple {
		n := len(ch.unacked)
		if tag != 0 {
			// The tag itself must be unacknowledged, whatever is below it
			// (RabbitMQ's collect_acks/5): one settled already is unknown.
			i, found := slices.BinarySearchFunc(ch.unacked, tag, func(u unacked, t uint64) int { return cmp.Compare(u.tag, t) })
			if !found {
				ch.mu.Unlock()
				return ch.err(amqp091.PreconditionFailed, classID, methodID, "unknown delivery tag %d", tag)
			}
			n = i + 1
		}
		take = append(take, ch.unacked[:n]...)
		ch.dropUnacked(0, n)
	} else {
		i, found := 0, len(ch.unacked) > 0 && ch.unacked[0].tag == tag // most often the oldest
		if !found {
			i, found = slices.BinarySearchFunc(ch.unacked, tag, func(u unacked, t uint64) int { return cmp.Compare(u.tag, t) })
		}
		if !found {
			ch.mu.Unlock()
			return ch.err(amqp091.PreconditionFailed, classID, methodID, "unknown delivery tag %d", tag)
		}
		take = append(take, ch.unacked[i])
		ch.dropUnacked(i, i+1)
	}
	for _, u := range take {
		if u.cons != nil {
			u.cons.out--
		}
	}
	ch.mu.Unlock()
	if ch.tx != nil {
		// Applied at tx.commit, given back to the unacknowledged at
		// tx.rollback.
		ch.tx.settles = append(ch.tx.settles, txSettle{take: slices.Clone(take), o: o})
	} else {
		ch.apply(take, o)
	}
	clear(take) // no references kept past the settlement
	ch.takeBuf = take[:0]
	return nil
}

// dropUnacked removes unacked[i:j] (ch.mu held). Removing from the front,
// the usual case, reslices instead of moving the rest: the array is
// reclaimed when append next outgrows it.
func (ch *channel) dropUnacked(i, j int) {
	if i == 0 {
		clear(ch.unacked[:j])
		ch.unacked = ch.unacked[j:]
		if len(ch.unacked) == 0 {
			ch.unacked = ch.unacked[:0:0] // start again at the array's front
		}
		return
	}
	ch.unacked = slices.Delete(ch.unacked, i, j)
}

// apply settles deliveries, grouped by subscription in ascending tag
// order, and refills their consumers' credit. The reader's goroutine
// only (tags and errs are the channel's scratch); take is reordered.
func (ch *channel) apply(take []unacked, o router.Settlement) {
	for len(take) > 0 {
		sub := take[0].sub
		tags := ch.tagBuf[:0]
		spans := ch.spanBuf[:0]
		var cons *consumer
		rest := take[:0]
		for _, u := range take {
			if u.sub == sub {
				tags = append(tags, u.stag)
				if u.span != nil {
					spans = append(spans, settledSpan{tag: u.stag, parent: u.span})
				}
				cons = u.cons
			} else {
				rest = append(rest, u)
			}
		}
		take = rest
		ch.tagBuf = tags
		if cap(ch.errBuf) < len(tags) {
			ch.errBuf = make([]error, len(tags))
		}
		errs := ch.errBuf[:len(tags)]
		sub.SettleBatch(tags, o, errs)
		if tr := ch.c.srv.opts.Tracer; tr != nil && len(spans) > 0 {
			j := 0 // spans lists the traced tags in the order of tags
			for _, sp := range spans {
				for tags[j] != sp.tag {
					j++
				}
				tr.Settle(*sp.parent, sub.Queue(), sp.tag, o, errs[j])
			}
		}
		clear(spans)
		ch.spanBuf = spans[:0]
		clear(errs)
		if ctr := ch.c.srv.opts.Counters; ctr != nil {
			ctr.Settled(sub.Queue(), o, len(tags))
		}
		if cons != nil {
			k := cons
			cancelled := k.cancelled.Load()
			ch.mu.Lock()
			done := cancelled && k.out == 0
			if done {
				delete(ch.draining, k)
			}
			ch.mu.Unlock()
			if done {
				k.cancel(router.CancelDetach)
			} else if k.prefetch > 0 && !k.noAck {
				k.flow(uint32(len(tags)))
			}
		}
	}
}

// settledSpan is a traced delivery in a settlement: its subscription tag
// and its deliver span's context.
type settledSpan struct {
	tag    uint64
	parent *trace.SpanContext
}

// recover returns every unacknowledged delivery of the channel to its
// queue (requeue=false is not implemented, as in RabbitMQ).
func (ch *channel) recover(requeue, reply bool, methodID uint16) error {
	if !requeue {
		return connErr(amqp091.NotImplemented, 60, methodID, "requeue=false")
	}
	ch.mu.Lock()
	take := ch.unacked
	ch.unacked = nil
	for _, u := range take {
		if u.cons != nil {
			u.cons.out--
		}
	}
	ch.mu.Unlock()
	ch.apply(take, router.Settlement{Kind: router.SettleRelease})
	if reply {
		return ch.send(&amqp091.BasicRecoverOk{})
	}
	return nil
}
