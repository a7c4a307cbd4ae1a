package router

import (
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// Message is a message inside the broker: the wire message plus the state
// RabbitMQ keeps in its message container. Immutable once enqueued.
type Message struct {
	Wire *amqp10.Message
	// Header is the header to deliver (from the publisher's, or rewritten by dead-lettering).
	Header amqp10.Header
	// Exchange the message was published to ("" is the default exchange).
	Exchange string
	// RoutingKeys: the primary key first, then the x-cc keys.
	RoutingKeys []string
	// DeliveryCount carried in from earlier queues (dead-lettering).
	DeliveryCount uint32
	// Anns are broker-set message annotations (x-opt-deaths, x-*-death-*,
	// modified-outcome annotations); on delivery they override the
	// publisher's annotations with the same keys.
	Anns value.Map
}

// NewMessage wraps a parsed wire message for publishing. The header is the
// publisher's (priority 4 when it sent none) with delivery-count and
// first-acquirer cleared: the broker sets those on delivery.
func NewMessage(w *amqp10.Message) *Message {
	h := amqp10.Header{Priority: 4}
	if w != nil && w.HasHeader {
		h = w.Header
	}
	h.DeliveryCount = 0
	h.FirstAcquirer = false
	return &Message{Wire: w, Header: h}
}

// size is the size counted against x-max-length-bytes: bare message plus footer.
func (m *Message) size() int {
	if m == nil || m.Wire == nil {
		return 0
	}
	return m.Wire.Size()
}

// primaryKey is the first routing key, "" when there is none.
func (m *Message) primaryKey() string {
	if len(m.RoutingKeys) == 0 {
		return ""
	}
	return m.RoutingKeys[0]
}

// withState returns a shallow copy of m carrying dc and anns.
func (m *Message) withState(dc uint32, anns value.Map) *Message {
	c := m.stateCopy(dc, anns)
	return &c
}

// stateCopy is withState as a value, for a Dead (no allocation).
func (m *Message) stateCopy(dc uint32, anns value.Map) Message {
	c := *m
	c.DeliveryCount = dc
	c.Anns = anns // shared: annotations and routing keys are never modified in place
	return c
}

// hasDeaths reports whether anns records an earlier dead-lettering.
func hasDeaths(anns value.Map) bool {
	for _, kv := range anns {
		switch k := kv.Key.(type) {
		case value.Symbol:
			if k == "x-opt-deaths" {
				return true
			}
		case string:
			if k == "x-opt-deaths" {
				return true
			}
		}
	}
	return false
}

func cloneMap(m value.Map) value.Map {
	if m == nil {
		return nil
	}
	return append(value.Map(nil), m...)
}

// keyString returns a map key as a string (string and symbol keys).
func keyString(k any) (string, bool) {
	switch v := k.(type) {
	case string:
		return v, true
	case value.Symbol:
		return string(v), true
	}
	return "", false
}
