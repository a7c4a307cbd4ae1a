package router

import (
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/value"
)

// Message is a message inside the broker: its publisher's encoding (the
// Container) plus the protocol-neutral state the router keeps for it, as in
// RabbitMQ's message container. Immutable once enqueued.
type Message struct {
	// Container holds the message as the publisher's protocol encoded it.
	Container Container
	// Header is the header to deliver: the publisher's (copied from the
	// container at publish), or rewritten by dead-lettering.
	Header Header
	// DeliveryCount carried in from earlier queues (dead-lettering).
	DeliveryCount uint32
	// Exchange the message was published to ("" is the default exchange).
	Exchange string
	// RoutingKeys: the primary key first, then the x-cc keys.
	RoutingKeys []string
	// Anns are broker-set message annotations: the dead-letter history in
	// its neutral form (annotations.HistoryKey), modified-outcome
	// annotations, the trace context. On delivery a front end writes them
	// in its protocol's form, over the publisher's annotations with the
	// same keys.
	Anns value.Map
}

// NewMessage returns the message to publish for a front end's container c:
// its header is copied from c, so that the router reads it as a field.
func NewMessage(c Container) *Message {
	return &Message{Container: c, Header: c.Header()}
}

// size is the size counted against x-max-length-bytes.
func (m *Message) size() int {
	if m == nil || m.Container == nil {
		return 0
	}
	return m.Container.Size()
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

// hasDeaths reports whether anns records an earlier dead-lettering: a
// history (annotations.HistoryKey), or an x-opt-deaths annotation.
func hasDeaths(anns value.Map) bool {
	for _, kv := range anns {
		switch k := kv.Key.(type) {
		case annotations.HistoryKey:
			return true
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
