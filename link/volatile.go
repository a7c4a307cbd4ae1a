package link

import (
	"net/url"
	"sync"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// capVolatileQueue is the source capability with which a consumer asks
// for direct reply-to (RabbitMQ 4.2+): a dynamic source whose address is a
// volatile queue of its own (router.VHost.DeclareVolatile).
const capVolatileQueue amqp10.Symbol = "rabbitmq:volatile-queue"

func hasCapability(caps []amqp10.Symbol, c amqp10.Symbol) bool {
	for _, x := range caps {
		if x == c {
			return true
		}
	}
	return false
}

// volatileSource is the volatile queue of a direct reply-to consumer link.
// Publishers call DeliverVolatile on their own goroutines: it takes one of
// the link's credits, or drops the message when there is none (the queue
// has no buffer), so the link's mailbox never holds more than its credit.
// The credit is counted in the link's delivery-count space: taken counts
// the messages handed over since the attach (each one later sent, or
// dropped if the link goes first), limit is the receiver's delivery-count
// plus link-credit from its last flow.
type volatileSource struct {
	l      *senderLink
	name   string
	remove func()

	mu    sync.Mutex
	taken uint32
	limit uint32
	gone  bool
}

// DeliverVolatile implements router.VolatileConsumer.
func (v *volatileSource) DeliverVolatile(d router.Delivery) bool {
	v.mu.Lock()
	if v.gone || int32(v.limit-v.taken) <= 0 {
		v.mu.Unlock()
		return false
	}
	v.taken++
	d.Tag = uint64(v.taken)
	v.mu.Unlock()
	v.l.s.c.mbox.push(mailItem{l: v.l, d: d})
	return true
}

// flow takes the receiver's flow (on the connection's loop). A drain
// consumes the credit left: no more messages are taken, and the drained
// answer, posted behind the messages already taken, advances the link's
// delivery-count to the limit once they are sent.
func (v *volatileSource) flow(limit uint32, drain bool) {
	v.mu.Lock()
	if drain {
		if int32(limit-v.taken) < 0 {
			limit = v.taken
		}
		v.taken = limit
	}
	v.limit = limit
	v.mu.Unlock()
	if drain {
		v.l.s.c.mbox.push(mailItem{l: v.l, drained: true, count: limit})
	}
}

// close removes the queue: its name is unknown from now on, and no message
// is taken any more.
func (v *volatileSource) close() {
	v.remove()
	v.mu.Lock()
	v.gone = true
	v.mu.Unlock()
}

// attachVolatile attaches a direct reply-to consumer, as RabbitMQ 4.3's
// session does: only a pre-settled link whose dynamic source has terminus
// durability none, expiry-policy link-detach and timeout 0 (their
// defaults but the expiry policy) gets a volatile queue; any other dynamic
// source with that capability is refused as not implemented.
func (s *session) attachVolatile(a *amqp10.Attach) error {
	src := a.Source
	settled := a.HasSndSettleMode && a.SndSettleMode == amqp10.SndSettled
	if src.HasAddress || src.Durable != 0 || src.ExpiryPolicy != "link-detach" || src.Timeout != 0 || !settled {
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotImplemented,
			"dynamic source with capability %s needs snd-settle-mode settled, expiry-policy link-detach, durable none and timeout 0",
			capVolatileQueue))
	}
	l := &senderLink{s: s, handle: a.Handle, name: a.Name, preSettled: true, maxMessageSize: a.MaxMessageSize}
	v := &volatileSource{l: l}
	v.name, v.remove = s.c.vhost.DeclareVolatile(v)
	l.volatile = v
	s.addLink(a.Handle, l)
	r := s.reply(a)
	r.Source = &amqp10.Source{
		Address: "/queues/" + url.PathEscape(v.name), HasAddress: true,
		ExpiryPolicy: src.ExpiryPolicy, Dynamic: true,
		DynamicNodeProperties: amqp10.Map{
			{Key: amqp10.Symbol("lifetime-policy"), Value: &amqp10.Described{Descriptor: uint64(0x2b), Value: amqp10.List{}}},
			{Key: amqp10.Symbol("supported-dist-modes"), Value: &amqp10.Array{Type: amqp10.TypeSym8, Elems: []any{amqp10.Symbol("move")}}},
		},
		DistributionMode: "move",
		Capabilities:     []amqp10.Symbol{capVolatileQueue},
	}
	r.InitialDeliveryCount, r.HasInitialDeliveryCount = 0, true
	r.MaxMessageSize = a.MaxMessageSize // echoed, as for any consumer: nothing larger is sent
	s.c.write(s.local, r, nil)
	return nil
}
