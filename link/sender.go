package link

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// transferOverhead bounds the frame header plus a first transfer
// performative with an 8-byte tag, for splitting messages into frames.
const transferOverhead = 64

// senderLink is a link on which the broker sends messages from a queue.
// Deliver and Drained run on the queue's goroutine and only post to the
// mailbox; everything else is owned by the connection loop.
type senderLink struct {
	s          *session
	handle     uint32
	name       string
	preSettled bool
	sub        *router.Subscription

	deliveryCount uint32 // deliveries sent (the sender's delivery-count)
	limit         uint32 // receiver's delivery-count + link-credit
	detached      bool
	qc            *QueueCounters // nil when counting is off
	// reported is the activity last sent in a flow's rabbitmq:active
	// (0: none yet).
	reported uint8
	// maxMessageSize is the consumer's max-message-size from its attach
	// (0: no limit): a larger delivery detaches the link (send).
	maxMessageSize uint64

	filters amqp10.Map // the filters in force, as the attach gave them

	// volatile is set, and sub nil, on a direct reply-to consumer: its
	// messages come from publishers through volatile, not from a queue.
	volatile *volatileSource
}

// sizeError: a delivery is larger than the consumer's max-message-size.
type sizeError struct{ size uint64 }

func (e *sizeError) Error() string {
	return fmt.Sprintf("message of %d bytes larger than the link's max-message-size", e.size)
}

// A quorum queue consumer's activity (single active consumer).
const (
	activeState  uint8 = 1
	waitingState uint8 = 2
)

// ActiveChanged implements router.ActivityNotifier.
func (l *senderLink) ActiveChanged(active bool) {
	state := waitingState
	if active {
		state = activeState
	}
	l.s.c.mbox.push(mailItem{l: l, activity: state})
}

// reportActivity sends a flow with the link state and the rabbitmq:active
// property when the activity differs from the last one reported, as
// RabbitMQ 4.3's session does with its queues' credit replies: the
// official clients read it (a single active consumer's standby and
// promotion).
func (l *senderLink) reportActivity(state uint8) {
	if state == l.reported {
		return
	}
	l.reported = state
	active := state == activeState
	credit := l.limit - l.deliveryCount
	if int32(credit) < 0 {
		credit = 0
	}
	l.s.sendFlow(func(f *amqp10.Flow) {
		f.Handle, f.HasHandle = l.handle, true
		f.DeliveryCount, f.HasDeliveryCount = l.deliveryCount, true
		f.LinkCredit, f.HasLinkCredit = credit, true
		f.Properties = amqp10.Map{{Key: amqp10.Symbol("rabbitmq:active"), Value: active}}
	})
}

// Deliver implements router.Consumer.
func (l *senderLink) Deliver(d router.Delivery) { l.s.c.mbox.push(mailItem{l: l, d: d}) }

// QueueDeleted implements router.QueueDeletedNotifier: the loop detaches
// the link with resource-deleted, as RabbitMQ 4 does, so that the consumer
// learns its queue is gone instead of waiting on a dead subscription.
func (l *senderLink) QueueDeleted(q *router.Queue) { l.s.c.mbox.push(mailItem{l: l, gone: q}) }

// Drained implements router.Consumer.
func (l *senderLink) Drained(count uint32) {
	l.s.c.mbox.push(mailItem{l: l, drained: true, count: count})
}

func (l *senderLink) handleFlow(f *amqp10.Flow) error {
	dc := f.DeliveryCount
	if !f.HasDeliveryCount {
		dc = 0 // the initial-delivery-count we sent
	}
	l.limit = dc + f.LinkCredit
	if l.volatile != nil {
		l.volatile.flow(l.limit, f.Drain)
	} else {
		l.sub.Flow(dc, f.LinkCredit, f.Drain)
	}
	if f.Echo {
		l.sendFlow(false)
	}
	return nil
}

func (l *senderLink) sendFlow(drain bool) {
	l.s.sendLinkFlow(l.handle, l.deliveryCount, l.limit, drain)
}

// drained reports a finished drain: credit consumed, delivery-count advanced.
func (l *senderLink) drained(count uint32) {
	l.deliveryCount = count
	l.limit = count
	l.sendFlow(true)
}

func (l *senderLink) release(reason router.CancelReason) {
	if l.detached {
		return
	}
	l.detached = true
	if l.volatile != nil {
		l.volatile.close() // what it took and did not send yet is dropped
		return
	}
	l.sub.Cancel(reason)
}

// queueName is the name of the queue the link consumes from.
func (l *senderLink) queueName() string {
	if l.volatile != nil {
		return l.volatile.name
	}
	return l.sub.Queue().Name()
}

// send writes d as one or more transfer frames; false means the peer's
// session window is too small for it now.
func (l *senderLink) send(d *router.Delivery) bool {
	s, c := l.s, l.s.c
	var span trace.Span
	if tr := c.srv.opts.Tracer; tr != nil && l.sub != nil {
		span = tr.StartDeliver(l.sub.Queue(), d, l.name)
	}
	extra := c.annBuf[:0]
	if span != nil {
		// The consumer sees this delivery's context: its process span, and a
		// dead-letter consumer's, continue the producer's trace.
		extra = telemetry.Inject(extra, span.SpanContext())
	}
	id, ok, err := s.sendDelivery(l.handle, d, extra, l.preSettled, l.maxMessageSize)
	clear(extra) // keep no message's values reachable from the scratch map
	c.annBuf = extra[:0]
	var tooLarge *sizeError
	if errors.As(err, &tooLarge) {
		// "Any attempt to deliver a message larger than this results in a
		// message-size-exceeded link-error" (AMQP 1.0 section 2.7.3). The
		// link is detached from the loop (not from inside the sending of
		// its session's pending work), and its unsettled deliveries, this
		// one included, return to the queue. RabbitMQ 4.3 ends the session
		// with this error instead. A pre-settled delivery was already taken
		// from the queue: it is lost, as in RabbitMQ, and logged.
		if l.preSettled {
			c.log.Warn("pre-settled delivery dropped: larger than the consumer's max-message-size",
				"link", l.name, "queue", l.queueName(), "size", tooLarge.size, "max_message_size", l.maxMessageSize)
		}
		c.mbox.push(mailItem{l: l, detachErr: amqp10.Errorf(amqp10.ErrCondMessageSizeExceeded,
			"message size (%d bytes) > maximum message size (%d bytes)", tooLarge.size, l.maxMessageSize)})
		return true
	}
	if err != nil {
		if l.volatile != nil {
			c.log.Error("cannot encode direct reply-to delivery; dropping it", "err", err)
			return true
		}
		c.log.Error("cannot encode delivery; rejecting it", "err", err)
		_ = l.sub.Settle(d.Tag, router.Settlement{Kind: router.SettleReject})
		return true
	}
	if !ok {
		// Held back by the peer's window: the span is never ended, so never
		// exported; the retry starts another.
		return false
	}
	if span != nil {
		defer span.End()
	}
	l.deliveryCount++
	if l.qc != nil {
		l.qc.Delivered.Add(1)
		if l.preSettled {
			l.qc.DeliveredAutoAck.Add(1)
		}
	}
	if !l.preSettled {
		od := outDelivery{l: l, tag: d.Tag}
		if span != nil {
			sc := span.SpanContext()
			od.span = &sc
		}
		s.unsettledOut.Put(id, od)
	}
	return true
}

// sendDelivery writes delivery d on handle, with extra message annotations
// set over the ones the router gives it (router.AppendAMQP10Delivery).
// A delivery that fits one frame, nearly all of them, is encoded straight
// into the connection's output behind its transfer; a larger one is
// encoded aside and split by sendMessage. ok is false when the peer's
// session window is too small for it now (nothing is written then).
//
// A message larger than maxSize (when not 0) is not written: the error is
// a *sizeError.
func (s *session) sendDelivery(handle uint32, d *router.Delivery, extra amqp10.Map, settled bool, maxSize uint64) (id uint32, ok bool, err error) {
	if s.remoteIncomingWindow == 0 {
		return 0, false, nil // no frame may go now, one or many
	}
	c := s.c
	c.flushDisp()
	mark := len(c.wbuf)
	b, start := amqp10.BeginFrame(c.wbuf, amqp10.FrameTypeAMQP, s.local)
	b = s.outTransfer(handle, d.Tag, settled).Append(b)
	bodyAt := len(b)
	b, err = router.AppendAMQP10Delivery(b, d, extra, &c.boxes)
	if err != nil {
		c.wbuf = b[:mark]
		return 0, false, err
	}
	if size := uint64(len(b) - bodyAt); maxSize > 0 && size > maxSize {
		c.wbuf = b[:mark]
		return 0, false, &sizeError{size: size}
	}
	if len(b)-start <= int(c.peerMaxFrame) {
		c.wbuf = amqp10.EndFrame(b, start)
		return s.sent(1), true, nil
	}
	c.msgBuf = append(c.msgBuf[:0], b[bodyAt:]...)
	c.wbuf = b[:mark]
	id, ok = s.sendMessage(handle, c.msgBuf, d.Tag, settled)
	return id, ok, nil
}

// outTransfer returns the connection's transfer value set up as the first
// (or only) frame of the next delivery on handle.
func (s *session) outTransfer(handle uint32, tag uint64, settled bool) *amqp10.Transfer {
	c := s.c
	binary.BigEndian.PutUint64(c.tag[:], tag)
	tr := &c.tr
	*tr = amqp10.Transfer{Handle: handle,
		DeliveryID: s.nextDeliveryID, HasDeliveryID: true, DeliveryTag: c.tag[:],
		HasMessageFormat: true, Settled: settled, HasSettled: true}
	return tr
}

// sent accounts for a delivery of n frames just written and returns its
// delivery-id.
func (s *session) sent(n uint32) uint32 {
	id := s.nextDeliveryID
	s.nextDeliveryID++
	s.nextOutgoingID += n
	s.remoteIncomingWindow -= min(n, s.remoteIncomingWindow)
	return id
}

// sendMessage writes body as a delivery on handle, split into frames of the
// peer's max-frame-size. ok is false when the peer's session window is too
// small for it now (nothing is written then).
func (s *session) sendMessage(handle uint32, body []byte, tag uint64, settled bool) (id uint32, ok bool) {
	c := s.c
	chunk := int(c.peerMaxFrame) - transferOverhead
	frames := max(uint32((len(body)+chunk-1)/chunk), 1)
	if s.remoteIncomingWindow < frames && (s.remoteIncomingWindow == 0 || s.remoteIncomingWindow < s.peerWindowMax) {
		return 0, false
	}
	tr := s.outTransfer(handle, tag, settled)
	for n := uint32(0); ; n++ {
		k := min(chunk, len(body))
		tr.More = k < len(body)
		c.write(s.local, tr, body[:k])
		body = body[k:]
		if !tr.More {
			return s.sent(n + 1), true
		}
		*tr = amqp10.Transfer{Handle: handle} // continuation frames carry only the handle (and more)
	}
}
