package link

import (
	"errors"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/router"
)

// eventsLink is a consumer of the dead-letter event stream
// (/events/dead-letters[/{queue}]). Events wait in its dlevents
// subscription, whose bounded buffer is the only place they wait: the
// link takes one only when it has credit and the connection's output has
// room, so a consumer that does not keep up loses events to the buffer
// (a gap marker in its stream), never holds up the broker. Deliveries are
// pre-settled: the stream is a view of what happened, not messages in a
// queue, so there is nothing to redeliver. Owned by the connection loop;
// the hub only posts a wake-up to the mailbox.
type eventsLink struct {
	s             *session
	handle        uint32
	name          string
	sub           *dlevents.Subscription
	deliveryCount uint32
	limit         uint32 // receiver's delivery-count + link-credit
	tags          uint64
	detached      bool
	// held is an encoded event that the peer's session window held back.
	held []byte
}

func (l *eventsLink) handleFlow(f *amqp10.Flow) error {
	dc := f.DeliveryCount
	if !f.HasDeliveryCount {
		dc = 0
	}
	l.limit = dc + f.LinkCredit
	l.flush()
	if f.Drain && int32(l.limit-l.deliveryCount) > 0 {
		l.deliveryCount = l.limit // nothing more to send now: the credit is used up
	}
	if f.Echo || f.Drain {
		l.s.sendLinkFlow(l.handle, l.deliveryCount, l.limit, f.Drain)
	}
	return nil
}

func (l *eventsLink) release(router.CancelReason) {
	if l.detached {
		return
	}
	l.detached = true
	l.held = nil
	l.sub.Close()
}

// flush sends events while the link has credit, the session window
// allows and the connection's output is not full; what is left waits in
// the subscription (or in held) for the next flow, window or drained
// output.
func (l *eventsLink) flush() {
	c := l.s.c
	for !l.detached && int32(l.limit-l.deliveryCount) > 0 && !c.holdBack() {
		if l.held == nil {
			it, ok := l.sub.Next()
			if !ok {
				return
			}
			b, err := encodeEvent(it)
			if err != nil {
				c.log.Error("cannot encode a dead-letter event; skipping it", "err", err)
				continue
			}
			l.held = b
		}
		l.tags++
		if _, ok := l.s.sendMessage(l.handle, l.held, l.tags, true); !ok {
			return
		}
		l.deliveryCount++
		l.held = nil
	}
}

// encodeEvent is the AMQP 1.0 message of an event or gap marker: the JSON
// form as a data section (content-type application/json), the fields a
// consumer may select on as application-properties, the kind of item as
// subject, the event's seq as message-id and its time as creation-time.
func encodeEvent(it dlevents.Item) ([]byte, error) {
	body, err := it.JSON()
	if err != nil {
		return nil, err
	}
	ct := amqp10.Symbol("application/json")
	props := amqp10.Properties{ContentType: &ct}
	var app amqp10.Map
	if e := it.Event; e != nil {
		subject := dlevents.TypeDeadLetter
		ts := amqp10.Timestamp(e.Time.UnixMilli())
		props.Subject, props.MessageID, props.CreationTime = &subject, e.Seq, &ts
		app = amqp10.Map{{Key: "type", Value: dlevents.TypeDeadLetter}, {Key: "seq", Value: e.Seq},
			{Key: "vhost", Value: e.VHost}, {Key: "queue", Value: e.Queue}, {Key: "queue_type", Value: e.QueueType},
			{Key: "reason", Value: e.Reason}, {Key: "count", Value: e.Count}, {Key: "strategy", Value: e.Strategy},
			{Key: "outcome", Value: e.Outcome}}
		if e.HasExchange {
			app = append(app, amqp10.KV{Key: "exchange", Value: e.Exchange})
		}
		if e.DropCause != "" {
			app = append(app, amqp10.KV{Key: "drop_cause", Value: e.DropCause})
		}
		if e.HasMessageID {
			app = append(app, amqp10.KV{Key: "message_id", Value: e.MessageID})
		}
	} else {
		subject := dlevents.TypeGap
		props.Subject = &subject
		app = amqp10.Map{{Key: "type", Value: dlevents.TypeGap}, {Key: "lost", Value: it.Lost}}
	}
	b, err := amqp10.AppendProperties(nil, &props)
	if err != nil {
		return nil, err
	}
	if b, err = amqp10.AppendApplicationProperties(b, app); err != nil {
		return nil, err
	}
	return amqp10.AppendData(b, body), nil
}

// attachEventsSender attaches a consumer of the dead-letter events of the
// connection's vhost, of one queue (ad.queue) or of all of them.
//
// Permissions, as for consuming: one queue's events need read on that
// queue. The vhost's stream needs read permission on some queue (a read
// pattern or read scope for the vhost) and carries the events of the
// queues the user may read, checked per event with the permissions the
// connection had at attach.
func (s *session) attachEventsSender(a *amqp10.Attach, ad address) error {
	hub := s.c.srv.opts.Events
	if hub == nil {
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotFound, "no dead-letter event stream"))
	}
	if a.HasSndSettleMode && a.SndSettleMode == amqp10.SndUnsettled {
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotImplemented,
			"dead-letter events are sent pre-settled (at most once): attach with snd-settle-mode settled or mixed"))
	}
	vhost, user, token, reg := s.c.vhost.Name(), s.c.user, s.c.token, s.c.srv.opts.Auth
	mayRead := func(_, queue string) bool {
		if token != nil {
			return token.Authorize(vhost, auth.ResourceQueue, queue, auth.Read) == nil
		}
		return reg.Authorize(user, vhost, auth.ResourceQueue, queue, auth.Read) == nil
	}
	f := dlevents.Filter{VHost: vhost, Queue: ad.queue}
	if ad.queue != "" {
		if err := s.authorize(auth.ResourceQueue, ad.queue, auth.Read); err != nil {
			return s.refuse(a, routerError(err))
		}
	} else {
		grants := reg.GrantsRead(user, vhost)
		if token != nil {
			grants = token.GrantsRead(vhost)
		}
		if !grants {
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondUnauthorizedAccess,
				"read access to the dead-letter events of vhost '%s' refused for user '%s': no read permission there", vhost, user))
		}
		f.Allow = mayRead
	}
	l := &eventsLink{s: s, handle: a.Handle, name: a.Name}
	mbox := &s.c.mbox
	sub, err := hub.Subscribe(f, func() { mbox.push(mailItem{ev: l}) })
	switch {
	case errors.Is(err, dlevents.ErrTooManySubscribers):
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondResourceLimitExceeded, "%v (limit %d)", err, hub.MaxSubscribers()))
	case err != nil:
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondResourceDeleted, "%v", err))
	}
	l.sub = sub
	s.addLink(a.Handle, l)
	r := s.reply(a)
	r.InitialDeliveryCount, r.HasInitialDeliveryCount = 0, true
	r.MaxMessageSize = 0
	s.c.write(s.local, r, nil)
	return nil
}
