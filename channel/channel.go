package channel

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
	"github.com/epitaph-mq/epitaph/value"
	"go.opentelemetry.io/otel/trace"
)

// channel is one open channel. The reader owns its method handling; mu
// guards what the deliverer and publish confirmations share with it.
type channel struct {
	c  *conn
	id uint16

	// Owned by the reader.
	asm       amqp091.Assembler
	closing   bool // channel.close sent, waiting for close-ok
	prefetch  uint16
	lastQueue string // the most recently declared queue ("" in consume/bind/get)
	pub       pendingPublish
	gets      map[*router.Queue]*getConsumer
	routeBuf  []*router.Queue
	ackIn     amqp091.BasicAck   // the last basic.ack received
	props     amqp091.Properties // the last publish's properties, decoded
	// Scratch of settle and apply.
	takeBuf []unacked
	spanBuf []settledSpan // scratch of apply: the traced deliveries settled
	tagBuf  []uint64
	errBuf  []error

	mu      sync.Mutex
	ended   bool
	nextTag uint64 // last delivery tag used
	unacked []unacked
	// tx is the transaction in progress after tx.select (nil: the channel
	// is not transactional). Set once, under mu; then the reader's
	// goroutine only.
	tx *txState
	// reply is the direct reply-to consumer (nil: none), guarded by mu.
	reply     *replyConsumer
	consumers map[string]*consumer
	// draining are consumers cancelled by the client while they still had
	// unacknowledged deliveries: they end with their last settlement, or
	// with the channel.
	draining map[*consumer]struct{}
	confirm  bool
	nextSeq  uint64 // last publish sequence number (confirm mode)
	// unconfirmed are the sequence numbers awaiting their outcome, in
	// order; acked and nacked the outcomes not yet sent, which the
	// deliverer sends coalesced (flushConfirms) once flushPosted.
	unconfirmed   []uint64
	acked, nacked []uint64
	flushPosted   bool
	nackSent      uint64            // the smallest sequence number refused so far (0: none)
	ack           amqp091.BasicAck  // scratch of flushConfirms
	nack          amqp091.BasicNack // scratch of flushConfirms
}

// unacked is a delivery the client has to settle.
type unacked struct {
	tag  uint64 // delivery tag on the channel
	sub  *router.Subscription
	stag uint64 // the subscription's tag
	cons *consumer
	// span is the deliver span's context when tracing (nil otherwise): the
	// settlement's span is its child.
	span *trace.SpanContext
}

// spanContextOf returns span's context for an unacked delivery, nil
// without tracing.
func spanContextOf(span trace.Span) *trace.SpanContext {
	if span == nil {
		return nil
	}
	sc := span.SpanContext()
	return &sc
}

// pendingPublish is a basic.publish whose content is being received.
type pendingPublish struct {
	active bool
	m      amqp091.BasicPublish
	props  []byte
	body   []byte
	size   uint64 // the body size the content header declared
	// propsScratch holds the property octets from the header to the first
	// body frame, reused from one publish to the next.
	propsScratch []byte
}

// header takes a content header's property octets (which alias the
// frame buffer) and declared body size. The buffer the message keeps is
// allocated as the body arrives, not here: a header declaring a large
// body costs nothing until the body comes, so that a client cannot hold
// memory on every channel with headers alone.
func (p *pendingPublish) header(props []byte, size uint64) {
	p.size, p.body = size, nil
	if size == 0 {
		np := len(props)
		buf := make([]byte, np)
		copy(buf, props)
		p.props, p.body = buf[:np:np], buf[np:]
		return
	}
	p.propsScratch = append(p.propsScratch[:0], props...)
	p.props = p.propsScratch
}

// appendBody appends a body frame's octets. The property octets and the
// body share one allocation (the message keeps both for its lifetime):
// exactly their size when the body is in one frame, else at most twice
// what has arrived, doubling up to the declared size.
func (p *pendingPublish) appendBody(b []byte) {
	need := len(p.body) + len(b)
	if need > cap(p.body) {
		c := uint64(need)
		if c < p.size {
			c = min(p.size, 2*c)
		}
		np := len(p.props)
		buf := make([]byte, np+len(p.body), np+int(c))
		copy(buf, p.props)
		copy(buf[np:], p.body)
		p.props, p.body = buf[:np:np], buf[np:]
		if cap(p.propsScratch) > 4096 {
			p.propsScratch = nil // not kept for the next publish
		}
	}
	p.body = append(p.body, b...)
}

func newChannel(c *conn, id uint16) *channel {
	if ctr := c.srv.opts.Counters; ctr != nil {
		ctr.ChannelAdded(1)
	}
	c.h.ChannelsChanged(1)
	return &channel{c: c, id: id, consumers: map[string]*consumer{}, draining: map[*consumer]struct{}{}, gets: map[*router.Queue]*getConsumer{}}
}

// end cancels the channel's consumers: their unacknowledged messages
// return to their queues as a lost consumer's do (RabbitMQ 4.3: delivery
// count +1 even for a clean close).
func (ch *channel) end() {
	ch.mu.Lock()
	if ch.ended {
		ch.mu.Unlock()
		return
	}
	ch.ended = true
	if ctr := ch.c.srv.opts.Counters; ctr != nil {
		ctr.ChannelAdded(-1)
	}
	ch.c.h.ChannelsChanged(-1)
	cons := make([]*consumer, 0, len(ch.consumers))
	for _, k := range ch.consumers {
		cons = append(cons, k)
	}
	for k := range ch.draining {
		cons = append(cons, k)
	}
	ch.consumers, ch.draining = map[string]*consumer{}, map[*consumer]struct{}{}
	ch.unacked = nil
	reply := ch.reply
	ch.reply = nil
	ch.mu.Unlock()
	if reply != nil {
		reply.remove()
	}
	for _, k := range cons {
		k.cancel(router.CancelConnectionLost)
	}
	for _, g := range ch.gets {
		g.sub.Cancel(router.CancelConnectionLost)
	}
	ch.gets = nil
}

func (ch *channel) err(code, classID, methodID uint16, format string, args ...any) *amqp091.Error {
	return &amqp091.Error{Code: code, Channel: ch.id, ClassID: classID, MethodID: methodID, Text: fmt.Sprintf(format, args...)}
}

// routerErr maps a router or auth error onto RabbitMQ's reply code.
func (ch *channel) routerErr(err error, classID, methodID uint16) *amqp091.Error {
	code := amqp091.InternalError
	sentinels := []struct {
		err  error
		code uint16
	}{
		{router.ErrNotFound, amqp091.NotFound},
		{router.ErrAccessRefused, amqp091.AccessRefused},
		{router.ErrResourceLocked, amqp091.ResourceLocked},
		{router.ErrPreconditionFailed, amqp091.PreconditionFailed},
		{router.ErrInvalidArgument, amqp091.PreconditionFailed},
	}
	text := err.Error()
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			code = s.code
			if i := strings.Index(text, s.err.Error()+": "); i >= 0 {
				text = text[i+len(s.err.Error())+2:]
			}
			break
		}
	}
	return ch.err(code, classID, methodID, "%s", text)
}

func (ch *channel) send(m amqp091.Method) error { return ch.c.sendMethod(ch.id, m) }

func (ch *channel) authorize(kind, name string, a auth.Access, classID, methodID uint16) error {
	c := ch.c
	var err error
	if c.token != nil {
		err = c.token.Authorize(c.vhost.Name(), kind, name, a)
	} else {
		err = c.srv.opts.Auth.Authorize(c.user, c.vhost.Name(), kind, name, a)
	}
	if err != nil {
		return ch.err(amqp091.AccessRefused, classID, methodID, "%s access to %s '%s' in vhost '%s' refused for user '%s'",
			a, kind, name, c.vhost.Name(), c.user)
	}
	return nil
}

// frame handles one frame of the channel.
func (ch *channel) frame(f amqp091.Frame) error {
	if ch.closing {
		// Waiting for close-ok: everything else is dropped, content frames
		// of a publish in progress included.
		if f.Type == amqp091.FrameMethod {
			if cl, me, _, _ := amqp091.ParseMethodHeader(f.Payload); cl == 20 && me == 41 {
				ch.c.forgetChannel(ch.id)
			} else if cl == 20 && me == 40 {
				// Both sides closed at once: answer the client's close and
				// keep waiting for the close-ok of ours, as rabbit_channel
				// does in its closing state (deleting the channel now made
				// that close-ok arrive on a channel not open: 504).
				_ = ch.send(&amqp091.ChannelCloseOk{})
			}
		}
		return nil
	}
	step, err := ch.asm.Next(f)
	if err != nil {
		return err
	}
	switch step {
	case amqp091.StepMethod:
		// basic.ack, the most frequent method, is decoded into the
		// channel's own struct; the others into new ones.
		if cl, me, args, err := amqp091.ParseMethodHeader(f.Payload); err == nil && cl == amqp091.ClassBasic && me == amqp091.MethodBasicAck {
			if err := amqp091.DecodeArgs(&ch.ackIn, args); err != nil {
				return amqp091.WithChannel(err, ch.id)
			}
			return ch.method(&ch.ackIn)
		}
		m, err := amqp091.ParseMethod(f.Payload)
		if err != nil {
			return amqp091.WithChannel(err, ch.id)
		}
		return ch.method(m)
	case amqp091.StepContent:
		cl, me, args, err := amqp091.ParseMethodHeader(f.Payload)
		if err != nil {
			return amqp091.WithChannel(err, ch.id)
		}
		if cl != amqp091.ClassBasic || me != amqp091.MethodBasicPublish {
			return ch.err(amqp091.CommandInvalid, cl, me, "unimplemented method %s", amqp091.MethodName(cl, me))
		}
		// Decoded over the previous publish: names that repeat (the
		// exchange, the routing key) are not allocated again.
		if err := amqp091.DecodeArgs(&ch.pub.m, args); err != nil {
			return amqp091.WithChannel(err, ch.id)
		}
		if ch.pub.m.Immediate {
			return connErr(amqp091.NotImplemented, 60, 40, "immediate=true")
		}
		ch.pub.active = true
		return nil
	case amqp091.StepHeader, amqp091.StepDone:
		if f.Type == amqp091.FrameHeader {
			h, err := amqp091.ParseContentHeader(f.Payload)
			if err != nil {
				return amqp091.WithChannel(err, ch.id)
			}
			if max := ch.c.srv.opts.MaxMessageSize; max > 0 && h.BodySize > max {
				return ch.err(amqp091.PreconditionFailed, 60, 40, "message size %d is larger than configured max size %d", h.BodySize, max)
			}
			ch.pub.header(h.Properties, h.BodySize)
		} else {
			ch.pub.appendBody(f.Payload)
		}
		if step == amqp091.StepDone {
			return ch.publish()
		}
		return nil
	case amqp091.StepBody:
		ch.pub.appendBody(f.Payload)
		return nil
	}
	return nil
}

// method handles a method without content.
func (ch *channel) method(m amqp091.Method) error {
	switch m := m.(type) {
	case *amqp091.ChannelOpen:
		return connErr(amqp091.ChannelError, 20, 10, "second 'channel.open' seen")
	case *amqp091.ChannelClose:
		ch.end()
		ch.c.forgetChannel(ch.id)
		return ch.send(&amqp091.ChannelCloseOk{})
	// channel.close-ok, but for a close the broker sent (frame's closing
	// state), is RabbitMQ's catch-all 503 at the end of this switch.
	case *amqp091.ChannelFlow:
		if !m.Active {
			return connErr(amqp091.NotImplemented, 20, 20, "active=false")
		}
		return ch.send(&amqp091.ChannelFlowOk{Active: true})
	case *amqp091.AccessRequest:
		return ch.send(&amqp091.AccessRequestOk{Ticket: 1})
	case *amqp091.ExchangeDeclare:
		return ch.exchangeDeclare(m)
	case *amqp091.ExchangeDelete:
		return ch.exchangeDelete(m)
	case *amqp091.ExchangeBind:
		return ch.bind(router.Binding{Source: m.Source, Destination: m.Destination, DestinationIsExchange: true,
			Key: m.RoutingKey, Arguments: tableToMap(m.Arguments)}, true, m.NoWait, 40, 30)
	case *amqp091.ExchangeUnbind:
		return ch.bind(router.Binding{Source: m.Source, Destination: m.Destination, DestinationIsExchange: true,
			Key: m.RoutingKey, Arguments: tableToMap(m.Arguments)}, false, m.NoWait, 40, 40)
	case *amqp091.QueueDeclare:
		return ch.queueDeclare(m)
	case *amqp091.QueueBind:
		return ch.bind(router.Binding{Source: m.Exchange, Destination: ch.queueName(m.Queue),
			Key: m.RoutingKey, Arguments: tableToMap(m.Arguments)}, true, m.NoWait, 50, 20)
	case *amqp091.QueueUnbind:
		return ch.bind(router.Binding{Source: m.Exchange, Destination: ch.queueName(m.Queue),
			Key: m.RoutingKey, Arguments: tableToMap(m.Arguments)}, false, false, 50, 50)
	case *amqp091.QueuePurge:
		return ch.queuePurge(m)
	case *amqp091.QueueDelete:
		return ch.queueDelete(m)
	case *amqp091.BasicQos:
		if m.PrefetchSize != 0 {
			return connErr(amqp091.NotImplemented, 60, 10, "prefetch_size!=0 (%d)", m.PrefetchSize)
		}
		// global=true is RabbitMQ 4.3's denied deprecated feature global_qos,
		// silently taken as global=false.
		ch.mu.Lock() // the HTTP API's channel list reads it
		ch.prefetch = m.PrefetchCount
		ch.mu.Unlock()
		return ch.send(&amqp091.BasicQosOk{})
	case *amqp091.BasicConsume:
		return ch.consume(m)
	case *amqp091.BasicCancel:
		return ch.cancel(m)
	case *amqp091.BasicGet:
		return ch.get(m)
	case *amqp091.BasicAck:
		return ch.settle(m.DeliveryTag, m.Multiple, router.Settlement{Kind: router.SettleAccept}, 60, 80)
	case *amqp091.BasicReject:
		// reject(requeue=false) is RabbitMQ's discard (delivery count +1);
		// reject(requeue=true) a modify with delivery-failed: it counts
		// toward a quorum queue's delivery limit.
		o := router.Settlement{Kind: router.SettleReject}
		if m.Requeue {
			o = router.Settlement{Kind: router.SettleModify, DeliveryFailed: true}
		}
		return ch.settle(m.DeliveryTag, false, o, 60, 90)
	case *amqp091.BasicNack:
		// nack(requeue=false) dead-letters without counting a delivery;
		// nack(requeue=true) returns the message and never counts toward
		// the delivery limit (RabbitMQ 4.3).
		o := router.Settlement{Kind: router.SettleModify, UndeliverableHere: true}
		if m.Requeue {
			o = router.Settlement{Kind: router.SettleRelease}
		}
		return ch.settle(m.DeliveryTag, m.Multiple, o, 60, 120)
	case *amqp091.BasicRecoverAsync:
		return ch.recover(m.Requeue, false, 100)
	case *amqp091.BasicRecover:
		return ch.recover(m.Requeue, true, 110)
	case *amqp091.ConfirmSelect:
		if ch.tx != nil {
			return ch.err(amqp091.PreconditionFailed, 85, 10, "cannot switch from tx to confirm mode")
		}
		ch.mu.Lock()
		ch.confirm = true
		ch.mu.Unlock()
		if m.NoWait {
			return nil
		}
		return ch.send(&amqp091.ConfirmSelectOk{})
	case *amqp091.TxSelect:
		return ch.txSelect()
	case *amqp091.TxCommit:
		return ch.txCommit()
	case *amqp091.TxRollback:
		return ch.txRollback()
	}
	cl, me := m.ID()
	return connErr(amqp091.CommandInvalid, cl, me, "unimplemented method")
}

// queueName strips CR and LF, and "" names the channel's last declared queue.
func (ch *channel) queueName(name string) string {
	name = strings.NewReplacer("\r", "", "\n", "").Replace(name)
	if name == "" {
		return ch.lastQueue
	}
	return name
}

// ---- exchanges ----

func (ch *channel) exchangeDeclare(m *amqp091.ExchangeDeclare) error {
	vh := ch.c.vhost
	name := strings.NewReplacer("\r", "", "\n", "").Replace(m.Exchange)
	if m.Passive {
		if name == "" || vh.HasExchange(name) {
			return ch.okUnlessNoWait(m.NoWait, &amqp091.ExchangeDeclareOk{})
		}
		return ch.err(amqp091.NotFound, 40, 10, "no exchange '%s' in vhost '%s'", name, vh.Name())
	}
	if err := ch.authorize(auth.ResourceExchange, name, auth.Configure, 40, 10); err != nil {
		return err
	}
	if name == "" {
		return ch.err(amqp091.AccessRefused, 40, 10, "operation not permitted on the default exchange")
	}
	if strings.HasPrefix(name, "amq.") {
		if info, ok := vh.Exchange(name); ok && info.Type == m.Type {
			return ch.okUnlessNoWait(m.NoWait, &amqp091.ExchangeDeclareOk{})
		}
		return ch.err(amqp091.AccessRefused, 40, 10, "exchange name '%s' contains reserved prefix 'amq.*'", name)
	}
	typ := m.Type
	if typ == "" {
		typ = "direct"
	}
	_, err := vh.DeclareExchange(router.ExchangeSpec{Name: name, Type: typ, Durable: m.Durable,
		AutoDelete: m.AutoDelete, Internal: m.Internal, Arguments: tableToMap(m.Arguments)})
	if err != nil {
		// An unknown type is 406 "unknown exchange type 'T'" (RabbitMQ 4.3's
		// rabbit_exchange:check_type/1; older releases answered 503).
		return ch.routerErr(err, 40, 10)
	}
	return ch.okUnlessNoWait(m.NoWait, &amqp091.ExchangeDeclareOk{})
}

func (ch *channel) okUnlessNoWait(noWait bool, m amqp091.Method) error {
	if noWait {
		return nil
	}
	return ch.send(m)
}

func (ch *channel) exchangeDelete(m *amqp091.ExchangeDelete) error {
	vh := ch.c.vhost
	name := m.Exchange
	if err := ch.authorize(auth.ResourceExchange, name, auth.Configure, 40, 20); err != nil {
		return err
	}
	if name == "" || strings.HasPrefix(name, "amq.") {
		return ch.err(amqp091.AccessRefused, 40, 20, "operation not permitted on the default exchange")
	}
	if !vh.HasExchange(name) {
		// RabbitMQ answers delete-ok for a missing exchange.
		return ch.okUnlessNoWait(m.NoWait, &amqp091.ExchangeDeleteOk{})
	}
	if m.IfUnused && slices.ContainsFunc(vh.Bindings(), func(b router.Binding) bool { return b.Source == name }) {
		return ch.err(amqp091.PreconditionFailed, 40, 20, "exchange '%s' in vhost '%s' in use", name, vh.Name())
	}
	if err := vh.DeleteExchange(name); err != nil && !errors.Is(err, router.ErrNotFound) {
		return ch.routerErr(err, 40, 20)
	}
	return ch.okUnlessNoWait(m.NoWait, &amqp091.ExchangeDeleteOk{})
}

// bind adds or removes a binding (queue or exchange destination), with
// RabbitMQ's permission checks: write on the destination, read on the
// source.
func (ch *channel) bind(b router.Binding, add, noWait bool, classID, methodID uint16) error {
	kind := auth.ResourceQueue
	if b.DestinationIsExchange {
		kind = auth.ResourceExchange
	}
	if err := ch.authorize(kind, b.Destination, auth.Write, classID, methodID); err != nil {
		return err
	}
	if err := ch.authorize(auth.ResourceExchange, b.Source, auth.Read, classID, methodID); err != nil {
		return err
	}
	if !b.DestinationIsExchange && isVolatileName(b.Destination) {
		return ch.err(amqp091.AccessRefused, classID, methodID, "cannot bind or unbind to a volatile (direct reply-to) queue")
	}
	vh := ch.c.vhost
	if !b.DestinationIsExchange {
		q, ok := vh.Queue(b.Destination)
		if !ok && add {
			return ch.err(amqp091.NotFound, classID, methodID, "no queue '%s' in vhost '%s'", b.Destination, vh.Name())
		}
		if ok && q.Exclusive() && q.Owner() != ch.c {
			return ch.err(amqp091.ResourceLocked, classID, methodID, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'", q.Name(), vh.Name())
		}
	}
	var err error
	if add {
		err = vh.Bind(b)
	} else {
		err = vh.Unbind(b)
		if errors.Is(err, router.ErrNotFound) {
			// Unbinding what is not there (the source, the destination or
			// the binding) is fine, as RabbitMQ's rabbit_db_binding:delete/2
			// has it; the default exchange was refused before (403).
			err = nil
		}
	}
	if err != nil {
		return ch.routerErr(err, classID, methodID)
	}
	switch {
	case classID == 40 && add:
		return ch.okUnlessNoWait(noWait, &amqp091.ExchangeBindOk{})
	case classID == 40:
		return ch.okUnlessNoWait(noWait, &amqp091.ExchangeUnbindOk{})
	case add:
		return ch.okUnlessNoWait(noWait, &amqp091.QueueBindOk{})
	}
	return ch.send(&amqp091.QueueUnbindOk{})
}

// ---- queues ----

func (ch *channel) queueDeclare(m *amqp091.QueueDeclare) error {
	vh := ch.c.vhost
	name := strings.NewReplacer("\r", "", "\n", "").Replace(m.Queue)
	if name == replyToQueue || isVolatileName(name) {
		return ch.declareReplyTo(name, m.NoWait)
	}
	if m.Passive {
		q, ok := vh.Queue(ch.queueName(name))
		if !ok {
			return ch.err(amqp091.NotFound, 50, 10, "no queue '%s' in vhost '%s'", ch.queueName(name), vh.Name())
		}
		if q.Exclusive() && q.Owner() != ch.c {
			return ch.err(amqp091.ResourceLocked, 50, 10, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", q.Name(), vh.Name())
		}
		return ch.declareOk(q, m.NoWait)
	}
	if name != "" {
		if err := ch.authorize(auth.ResourceQueue, name, auth.Configure, 50, 10); err != nil {
			return err
		}
	}
	if !m.Durable && !m.Exclusive && !ch.c.srv.opts.PermitTransientNonExclQueues {
		if _, exists := vh.Queue(name); !exists || name == "" {
			return connErr(amqp091.InternalError, 50, 10,
				"queue '%s' in vhost '%s' is non-durable and non-exclusive: the deprecated feature transient_nonexcl_queues is not permitted (permit-transient-nonexcl-queues)", name, vh.Name())
		}
	}
	spec := router.QueueSpec{Name: name, Durable: m.Durable, Exclusive: m.Exclusive, AutoDelete: m.AutoDelete,
		Arguments: tableToMap(m.Arguments)}
	if m.Exclusive {
		spec.Owner = ch.c
	}
	q, _, err := vh.DeclareQueue(spec)
	if err != nil {
		return ch.routerErr(err, 50, 10)
	}
	ch.lastQueue = q.Name()
	return ch.declareOk(q, m.NoWait)
}

func (ch *channel) declareOk(q *router.Queue, noWait bool) error {
	ch.lastQueue = q.Name()
	info := q.Info()
	return ch.okUnlessNoWait(noWait, &amqp091.QueueDeclareOk{Queue: q.Name(), MessageCount: uint32(info.Messages),
		ConsumerCount: uint32(ch.c.srv.consumerCount(q))})
}

// lookupQueue finds a queue the channel may use (404, 405).
func (ch *channel) lookupQueue(name string, classID, methodID uint16) (*router.Queue, error) {
	vh := ch.c.vhost
	q, ok := vh.Queue(name)
	if !ok {
		return nil, ch.err(amqp091.NotFound, classID, methodID, "no queue '%s' in vhost '%s'", name, vh.Name())
	}
	if q.Exclusive() && q.Owner() != ch.c {
		return nil, ch.err(amqp091.ResourceLocked, classID, methodID, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", q.Name(), vh.Name())
	}
	return q, nil
}

func (ch *channel) queuePurge(m *amqp091.QueuePurge) error {
	name := ch.queueName(m.Queue)
	if err := ch.authorize(auth.ResourceQueue, name, auth.Read, 50, 30); err != nil {
		return err
	}
	q, err := ch.lookupQueue(name, 50, 30)
	if err != nil {
		return err
	}
	n := q.Purge()
	return ch.okUnlessNoWait(m.NoWait, &amqp091.QueuePurgeOk{MessageCount: uint32(n)})
}

func (ch *channel) queueDelete(m *amqp091.QueueDelete) error {
	name := ch.queueName(m.Queue)
	if err := ch.authorize(auth.ResourceQueue, name, auth.Configure, 50, 40); err != nil {
		return err
	}
	vh := ch.c.vhost
	q, ok := vh.Queue(name)
	if !ok {
		return ch.okUnlessNoWait(m.NoWait, &amqp091.QueueDeleteOk{})
	}
	if q.Exclusive() && q.Owner() != ch.c {
		return ch.err(amqp091.ResourceLocked, 50, 40, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'", name, vh.Name())
	}
	info := q.Info()
	if m.IfUnused && ch.c.srv.consumerCount(q) > 0 {
		return ch.err(amqp091.PreconditionFailed, 50, 40, "queue '%s' in vhost '%s' in use", name, vh.Name())
	}
	if m.IfEmpty && info.Messages > 0 {
		return ch.err(amqp091.PreconditionFailed, 50, 40, "queue '%s' in vhost '%s' is not empty", name, vh.Name())
	}
	n, err := vh.DeleteQueue(name)
	if err != nil && !errors.Is(err, router.ErrNotFound) {
		return ch.routerErr(err, 50, 40)
	}
	return ch.okUnlessNoWait(m.NoWait, &amqp091.QueueDeleteOk{MessageCount: uint32(n)})
}

// ---- publish ----

// maxExpiration is RabbitMQ's largest per-message TTL (ten years in ms).
const maxExpiration = 315360000000

func (ch *channel) publish() error {
	pub := ch.pub
	// Only the buffers go: the method stays for the next publish to be
	// decoded over.
	ch.pub.active, ch.pub.props, ch.pub.body = false, nil, nil
	c := ch.c
	if !c.waitUnblocked() {
		return errClosed
	}
	vh := c.vhost
	exchange := pub.m.Exchange
	// Decoded over the previous publish's properties, so that strings that
	// repeat (content-type, app-id, ...) are shared rather than allocated
	// again: the message gets a copy of the struct, and strings are
	// immutable.
	if err := ch.props.Decode(pub.props); err != nil {
		return amqp091.WithChannel(err, ch.id)
	}
	props := ch.props
	if err := ch.authorize(auth.ResourceExchange, exchange, auth.Write, 60, 40); err != nil {
		return err
	}
	if rewritten, err := ch.replyTo(&props); err != nil {
		return err
	} else if rewritten {
		// The stored properties are the publisher's but for reply_to.
		b, err := props.Append(nil)
		if err != nil {
			return ch.err(amqp091.InternalError, 60, 40, "reply_to: %v", err)
		}
		pub.props = b
	}
	if props.Has(amqp091.FlagExpiration) {
		n, err := strconv.ParseUint(props.Expiration, 10, 64)
		if err != nil || n > maxExpiration {
			return ch.err(amqp091.PreconditionFailed, 60, 40, "invalid expiration '%s'", props.Expiration)
		}
	}
	if props.Has(amqp091.FlagUserID) && props.UserID != c.user && !c.impersonator() {
		return ch.err(amqp091.PreconditionFailed, 60, 40, "user_id property set to '%s' but authenticated user was '%s'", props.UserID, c.user)
	}
	keys := []string{pub.m.RoutingKey}
	var routeKeys []string
	for _, h := range []string{"CC", "BCC"} {
		v, ok := props.Headers.Get(h)
		if !ok {
			continue
		}
		arr, isArr := v.(amqp091.Array)
		if !isArr {
			// rabbit_basic:header_routes/1 prints the key as a string (it
			// is binary_to_list'ed) and the type as its parser names it.
			return ch.err(amqp091.PreconditionFailed, 60, 40, "invalid message: {unacceptable_type_in_header,\"%s\",%s}", h, typeName(v))
		}
		if h == "BCC" {
			routeKeys = slices.Clone(keys)
		}
		for _, e := range arr {
			if s, ok := e.(string); ok {
				if h == "BCC" {
					routeKeys = append(routeKeys, s)
				} else {
					keys = append(keys, s)
				}
			}
		}
	}
	container, err := router.NewAMQP091(props, pub.props, pub.body)
	if err != nil {
		return ch.routerErr(err, 60, 40)
	}
	msg := router.NewMessage(container)
	msg.RoutingKeys = keys
	if ch.tx != nil {
		// Routed and delivered at tx.commit; a missing exchange is refused
		// now, as RabbitMQ looks it up at the publish.
		if _, ok := vh.Exchange(exchange); !ok && exchange != "" {
			return ch.err(amqp091.NotFound, 60, 40, "no exchange '%s' in vhost '%s'", exchange, vh.Name())
		}
		ch.tx.publishes = append(ch.tx.publishes, txPublish{exchange: exchange, routingKey: pub.m.RoutingKey,
			mandatory: pub.m.Mandatory, msg: msg, routeKeys: routeKeys, props: container.RawProperties(), body: pub.body})
		return nil
	}
	ch.mu.Lock()
	confirm := ch.confirm
	var seq uint64
	if confirm {
		ch.nextSeq++
		seq = ch.nextSeq
		ch.unconfirmed = append(ch.unconfirmed, seq)
	}
	ch.mu.Unlock()
	var span trace.Span
	if tr := c.srv.opts.Tracer; tr != nil {
		span = tr.StartPublish(vh.Name(), exchange, pub.m.RoutingKey, container)
		// The message carries the publish span's context as its hop context.
		msg.Anns = telemetry.Inject(msg.Anns, span.SpanContext())
	}
	p := router.Publish{Exchange: exchange, Msg: msg, RouteKeys: routeKeys, Queues: ch.routeBuf}
	// Always asynchronous: without confirm mode nobody waits for the
	// store's sync, and the channel must not wait for it either. The
	// router calls Confirm only for a durable message (one to be synced),
	// so a transient one needs no closure.
	if msg.Header.Durable {
		p.Confirm = func(o router.Outcome) { ch.published(span, confirm, seq, exchange, o, nil) }
	}
	res, err := vh.Publish(p)
	ch.routeBuf = res.Queues[:0]
	if err != nil && span != nil {
		telemetry.EndPublish(span, nil, router.Outcome{Kind: router.Rejected, Error: &router.Error{Condition: "amqp:not-found", Description: err.Error()}})
	}
	if err != nil {
		if errors.Is(err, router.ErrNotFound) {
			return ch.err(amqp091.NotFound, 60, 40, "no exchange '%s' in vhost '%s'", exchange, vh.Name())
		}
		return ch.routerErr(err, 60, 40)
	}
	if ctr := c.srv.opts.Counters; ctr != nil {
		ctr.Published(res.Queues, res.Outcome.Kind, confirm, pub.m.Mandatory)
	}
	if res.Outcome.Kind == router.Released && pub.m.Mandatory {
		ret := &amqp091.BasicReturn{ReplyCode: amqp091.NoRoute, ReplyText: "NO_ROUTE", Exchange: exchange, RoutingKey: pub.m.RoutingKey}
		if err := c.sendContent(ch.id, ret, container.RawProperties(), pub.body); err != nil {
			return err
		}
	}
	if !res.Pending {
		ch.published(span, confirm, seq, exchange, res.Outcome, res.Queues)
	}
	return nil
}

// published handles a publish's outcome: the span ends, and the confirm
// (sequence number seq) is recorded for the publisher.
func (ch *channel) published(span trace.Span, confirm bool, seq uint64, exchange string, o router.Outcome, queues []*router.Queue) {
	if span != nil {
		telemetry.EndPublish(span, queues, o)
	}
	if confirm {
		ch.confirmed(seq, o)
	} else if o.Kind == router.Rejected {
		ch.c.log.Warn("publish refused; the publisher is not in confirm mode and is not told", "exchange", exchange, "err", o.Error)
	}
}

// confirmed records the outcome of seq for the publisher: basic.nack when
// a queue refused the message, basic.ack otherwise (an unroutable message
// is confirmed too). The deliverer sends them (flushConfirms), so that the
// outcomes that arrive together go out together.
func (ch *channel) confirmed(seq uint64, o router.Outcome) {
	ch.mu.Lock()
	if ch.ended {
		ch.mu.Unlock()
		return
	}
	if i, ok := slices.BinarySearch(ch.unconfirmed, seq); ok {
		ch.unconfirmed = slices.Delete(ch.unconfirmed, i, i+1)
	}
	if o.Kind == router.Rejected {
		ch.nacked = append(ch.nacked, seq)
	} else {
		ch.acked = append(ch.acked, seq)
	}
	post := !ch.flushPosted
	ch.flushPosted = true
	ch.mu.Unlock()
	if post {
		ch.c.post(mailItem{flush: ch})
	}
}

// flushConfirms sends the recorded outcomes as RabbitMQ coalesces them
// (rabbit_channel:send_confirms_and_nacks/1): the acknowledgements below
// both the smallest sequence number still awaiting its outcome and the
// smallest refused one as one basic.ack with multiple set, then the other
// outcomes one by one in sequence order.
func (ch *channel) flushConfirms() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.flushPosted = false
	if ch.ended {
		return nil
	}
	slices.Sort(ch.acked)
	slices.Sort(ch.nacked)
	low := uint64(math.MaxUint64)
	if len(ch.unconfirmed) > 0 {
		low = ch.unconfirmed[0]
	}
	if len(ch.nacked) > 0 {
		low = min(low, ch.nacked[0])
	}
	n, _ := slices.BinarySearch(ch.acked, low) // acks below low
	acks := ch.acked
	// Appended to the output, which the deliverer writes with the rest of
	// its batch; ack and nack are the channel's scratch methods.
	// A multiple ack never reaches over a number already refused (a client
	// may read multiple as every number up to it), so once a nack has gone
	// out only the acks below it are coalesced.
	if n > 1 && (ch.nackSent == 0 || acks[n-1] < ch.nackSent) {
		ch.ack = amqp091.BasicAck{DeliveryTag: acks[n-1], Multiple: true}
		if err := ch.c.appendMethod(ch.id, &ch.ack); err != nil {
			return err
		}
		acks = acks[n:]
	}
	nacks := ch.nacked
	for len(acks) > 0 || len(nacks) > 0 {
		var err error
		if len(nacks) == 0 || len(acks) > 0 && acks[0] < nacks[0] {
			ch.ack = amqp091.BasicAck{DeliveryTag: acks[0]}
			err = ch.c.appendMethod(ch.id, &ch.ack)
			acks = acks[1:]
		} else {
			ch.nack = amqp091.BasicNack{DeliveryTag: nacks[0]}
			err = ch.c.appendMethod(ch.id, &ch.nack)
			if ch.nackSent == 0 || nacks[0] < ch.nackSent {
				ch.nackSent = nacks[0]
			}
			nacks = nacks[1:]
		}
		if err != nil {
			return err
		}
	}
	ch.acked, ch.nacked = ch.acked[:0], ch.nacked[:0]
	return nil
}

// typeName is a field value's type as RabbitMQ's rabbit_binary_parser
// names it.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "longstr"
	case amqp091.Table:
		return "table"
	case amqp091.Array:
		return "array"
	case int64:
		return "long"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case float32:
		return "float"
	case float64:
		return "double"
	case bool:
		return "bool"
	case amqp091.Decimal:
		return "decimal"
	case amqp091.Timestamp:
		return "timestamp"
	case amqp091.Binary:
		return "binary"
	case nil:
		return "void"
	}
	return fmt.Sprintf("%T", v)
}

// tableToMap converts declare and bind arguments to the router's values.
func tableToMap(t amqp091.Table) value.Map {
	if len(t) == 0 {
		return nil
	}
	m := make(value.Map, 0, len(t))
	for _, f := range t {
		m = append(m, value.KV{Key: f.Key, Value: argValue(f.Value)})
	}
	return m
}

func argValue(v any) any {
	switch x := v.(type) {
	case amqp091.Table:
		return tableToMap(x)
	case amqp091.Array:
		l := make(value.List, len(x))
		for i := range x {
			l[i] = argValue(x[i])
		}
		return l
	case amqp091.Binary:
		return []byte(x)
	case amqp091.Timestamp:
		return value.Timestamp(int64(x) * 1000)
	case amqp091.Decimal:
		return nil
	}
	return v
}

// newTag generates a consumer tag as RabbitMQ does (amq.ctag-…).
func newTag() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "amq.ctag-" + base64.RawURLEncoding.EncodeToString(b[:])
}
