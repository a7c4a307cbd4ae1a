package link

import (
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// mgmtLink is the broker->client half of the /management link pair: it
// sends the management node's responses, pre-settled, in request order.
// Owned by the connection loop.
type mgmtLink struct {
	s             *session
	handle        uint32
	name          string
	deliveryCount uint32
	limit         uint32 // receiver's delivery-count + link-credit
	pending       [][]byte
	tags          uint64
	detached      bool
}

func (l *mgmtLink) handleFlow(f *amqp10.Flow) error {
	dc := f.DeliveryCount
	if !f.HasDeliveryCount {
		dc = 0
	}
	l.limit = dc + f.LinkCredit
	l.flush()
	if f.Drain && int32(l.limit-l.deliveryCount) > 0 {
		l.deliveryCount = l.limit
	}
	if f.Echo || f.Drain {
		l.s.sendLinkFlow(l.handle, l.deliveryCount, l.limit, f.Drain)
	}
	return nil
}

func (l *mgmtLink) release(router.CancelReason) {
	l.detached = true
	for _, p := range l.pending {
		l.s.mgmtHeld -= len(p)
	}
	l.pending = nil
}

// flush sends pending responses while the link has credit, the session
// window allows and the connection's output is not full (the rest is sent
// when it drains).
func (l *mgmtLink) flush() {
	for len(l.pending) > 0 && int32(l.limit-l.deliveryCount) > 0 && !l.s.c.holdBack() {
		l.tags++
		if _, ok := l.s.sendMessage(l.handle, l.pending[0], l.tags, true); !ok {
			return
		}
		l.deliveryCount++
		l.s.mgmtHeld -= len(l.pending[0])
		l.pending[0] = nil
		l.pending = l.pending[1:]
	}
}

// mgmtResponse queues a response for the management link paired with the
// request link named name (RabbitMQ clients use one name for both halves).
func (s *session) mgmtResponse(name string, resp []byte) {
	s.mgmtHeld += len(resp)
	var out *mgmtLink
	for _, l := range s.links {
		if ml, ok := l.(*mgmtLink); ok && (out == nil || ml.name == name) {
			out = ml
		}
	}
	if out == nil {
		// No response link yet: keep the response until one attaches.
		s.mgmtWaiting = append(s.mgmtWaiting, resp)
		return
	}
	out.pending = append(out.pending, resp)
	out.flush()
}

// attachMgmtSender attaches the broker->client half of the link pair.
func (s *session) attachMgmtSender(a *amqp10.Attach) error {
	l := &mgmtLink{s: s, handle: a.Handle, name: a.Name, pending: s.mgmtWaiting}
	s.mgmtWaiting = nil
	s.addLink(a.Handle, l)
	r := s.reply(a)
	r.InitialDeliveryCount, r.HasInitialDeliveryCount = 0, true
	r.MaxMessageSize = 0
	s.c.write(s.local, r, nil)
	return nil
}

// handleMgmtRequest passes one request to the management node.
func (l *receiverLink) handleMgmtRequest(body []byte) {
	wm, err := amqp10.ParseMessage(body)
	if err != nil {
		l.fail(amqp10.ErrCondDecodeError, "%v", err)
		return
	}
	c := l.s.c
	if limit := c.srv.opts.ManagementPendingBytes; l.s.mgmtHeld >= limit {
		// The client sends requests but does not take the responses (no
		// response link, or no credit on it). RabbitMQ refuses such a
		// request outright (precondition-failed: a half-open link pair or
		// no credit); epitaph holds responses up to the bound, so a client
		// that attaches its response link late still gets them, and
		// refuses the request beyond it, before running it.
		l.fail(amqp10.ErrCondResourceLimitExceeded,
			"%d bytes of management responses wait for the response link to attach or grant credit (limit %d)",
			l.s.mgmtHeld, limit)
		return
	}
	resp := c.srv.opts.Management.Request(c, c.user, c.vhost, wm)
	l.settle(amqp10.DeliveryState{Kind: amqp10.StateAccepted})
	l.s.mgmtResponse(l.name, resp)
}
