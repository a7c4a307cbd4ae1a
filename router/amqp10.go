package router

import (
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// AMQP10 is the container of a message published over AMQP 1.0: the
// message as received, its bare message kept byte for byte, so that an
// AMQP 1.0 consumer gets it as the publisher sent it. A struct of one
// pointer, it is stored in a Container interface without an allocation.
type AMQP10 struct {
	Wire *amqp10.Message
}

// NewAMQP10Message returns the message to publish for w, received over
// AMQP 1.0 (see NewMessage).
func NewAMQP10Message(w *amqp10.Message) *Message { return NewMessage(AMQP10{Wire: w}) }

// Protocol implements Container.
func (c AMQP10) Protocol() Protocol { return ProtocolAMQP10 }

// Size implements Container: the bare message plus the footer.
func (c AMQP10) Size() int {
	if c.Wire == nil {
		return 0
	}
	return c.Wire.Size()
}

// Header implements Container: the publisher's header (priority 4 when it
// sent none) with delivery-count and first-acquirer cleared.
func (c AMQP10) Header() Header {
	if c.Wire == nil || !c.Wire.HasHeader {
		return Header{Priority: 4}
	}
	w := &c.Wire.Header
	return Header{Durable: w.Durable, Priority: w.Priority, TTL: w.TTL, HasTTL: w.HasTTL}
}

// AMQP10Header is h as AMQP 1.0's header section.
func AMQP10Header(h *Header) amqp10.Header {
	return amqp10.Header{Durable: h.Durable, Priority: h.Priority, TTL: h.TTL, HasTTL: h.HasTTL,
		FirstAcquirer: h.FirstAcquirer, DeliveryCount: h.DeliveryCount}
}

// RoutingHeaders implements Container: the application-properties.
func (c AMQP10) RoutingHeaders() (value.Map, error) {
	if c.Wire == nil {
		return nil, nil
	}
	return c.Wire.ApplicationProperties()
}

// XHeaders implements Container: the publisher's message annotations.
func (c AMQP10) XHeaders() (value.Map, error) {
	if c.Wire == nil || c.Wire.Annotations() == nil {
		return nil, nil
	}
	return c.Wire.AnnotationMap()
}

// Properties implements Container.
func (c AMQP10) Properties() (Properties, error) {
	if c.Wire == nil {
		return Properties{}, nil
	}
	p, err := c.Wire.Properties()
	if err != nil || p == nil {
		return Properties{}, err
	}
	out := Properties{MessageID: p.MessageID, CorrelationID: p.CorrelationID, UserID: p.UserID}
	if p.ReplyTo != nil {
		out.ReplyTo = *p.ReplyTo
	}
	if p.ContentType != nil {
		out.ContentType = string(*p.ContentType)
	}
	if p.ContentEncoding != nil {
		out.ContentEncoding = string(*p.ContentEncoding)
	}
	return out, nil
}

// Body implements Container: the encoded body sections.
func (c AMQP10) Body() ([]byte, error) {
	if c.Wire == nil {
		return nil, nil
	}
	return c.Wire.Body()
}

// decodedRaw replaces pre-encoded values (amqp10.Raw, such as the
// x-opt-deaths the dead-letterer writes) in a fresh map m by their decoded
// form, so that a peek shows what a consumer decodes.
func decodedRaw(m value.Map) value.Map {
	for i := range m {
		if r, ok := m[i].Value.(amqp10.Raw); ok {
			if v, _, err := amqp10.ReadValue(r); err == nil {
				m[i].Value = v
			}
		}
	}
	return m
}

// ---- delivery in AMQP 1.0 ----

// AMQP10Annotations returns the message annotations the delivery goes out
// with over AMQP 1.0, in a new map: AppendAMQP10Annotations(nil, nil).
func (d Delivery) AMQP10Annotations() value.Map { return d.AppendAMQP10Annotations(nil, nil) }

// BoxCache keeps the last exchange and routing key boxed as interface
// values, so that delivering a stream of messages that share them boxes
// nothing. Its owner uses it from one goroutine.
type BoxCache struct{ exch, key boxedString }

// AppendAMQP10Annotations builds the message-annotations entries an AMQP
// 1.0 consumer gets, as RabbitMQ writes them, into m[:0] and returns it:
// x-exchange, x-routing-key, for quorum queues x-acquired-count and (when
// not zero) x-delivery-count, then the broker annotations, which replace
// same-named entries in place. bc may be nil.
func (d Delivery) AppendAMQP10Annotations(m value.Map, bc *BoxCache) value.Map {
	if bc == nil {
		bc = new(BoxCache)
	}
	m = append(m[:0],
		value.KV{Key: value.Symbol("x-exchange"), Value: boxString(&bc.exch, d.Msg.Exchange)},
		value.KV{Key: value.Symbol("x-routing-key"), Value: boxString(&bc.key, d.Msg.primaryKey())})
	if d.quorum {
		m = append(m, value.KV{Key: value.Symbol("x-acquired-count"), Value: int64(d.acquired)})
		if d.Header.DeliveryCount != 0 {
			m = append(m, value.KV{Key: value.Symbol("x-delivery-count"), Value: int64(d.Header.DeliveryCount)})
		}
	}
	fixed := len(m)
next:
	for _, kv := range d.anns {
		switch k := kv.Key.(type) {
		case value.Symbol:
			// The broker annotations' keys are unique: only the fixed
			// entries can share one.
			for i := range fixed {
				if m[i].Key.(value.Symbol) == k {
					m[i].Value = kv.Value
					continue next
				}
			}
			m = append(m, kv)
		case string:
			m = m.Set(value.Symbol(k), kv.Value)
		default:
			m = m.Set(kv.Key, kv.Value)
		}
	}
	return m
}

// deliveryAnnotations is what e would be delivered with now (peek).
func (q *Queue) deliveryAnnotations(e *entry) value.Map {
	h := e.msg.Header
	h.DeliveryCount = e.dc
	d := Delivery{Msg: e.msg, Header: h, anns: e.anns(), acquired: e.acquired, quorum: q.typ == Quorum}
	return d.AppendAMQP10Annotations(nil, nil)
}

// boxedString is a string and the same string as an interface value.
type boxedString struct {
	s string
	v any
}

// boxString returns s as an interface value, reusing the last one boxed in
// c when s is the same string: a queue's messages mostly share their
// exchange and routing key, so delivering them boxes nothing. Called with
// the owner's lock held.
func boxString(c *boxedString, s string) any {
	if c.v == nil || c.s != s {
		c.s, c.v = s, s
	}
	return c.v
}
