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
