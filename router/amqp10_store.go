package router

import (
	"encoding/binary"
	"fmt"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/value"
)

// The store's AMQP-typed encodings: values (annotations, arguments, policy
// definitions, metadata records) are written with the AMQP codec, the
// value model's own encoding, and an AMQP 1.0 message is stored in format
// msgAMQP10, which is the format every store written before containers
// existed holds, so that those stores recover unchanged.

// msgAMQP10 tags a stored message whose container is AMQP10:
//
//	0x01, header section (the router's Header), uvarint-prefixed wire
//	annotations / bare / footer, wire-has-header byte [wire header],
//	exchange, routing keys, delivery-count, Anns (AMQP map or null).
const msgAMQP10 = 1

// encodeAMQP10Message encodes m, whose container is c, in format msgAMQP10.
func encodeAMQP10Message(m *Message, c AMQP10) ([]byte, error) {
	w := c.Wire
	if w == nil {
		w = &amqp10.Message{}
	}
	b := make([]byte, 0, 64+m.size()+len(w.Annotations()))
	b = append(b, msgAMQP10)
	h := AMQP10Header(&m.Header)
	b = amqp10.AppendHeader(b, &h)
	b = appendBytes(b, w.Annotations())
	b = appendBytes(b, w.Bare())
	b = appendBytes(b, w.Footer())
	if w.HasHeader {
		b = append(b, 1)
		b = amqp10.AppendHeader(b, &w.Header)
	} else {
		b = append(b, 0)
	}
	b = appendStr(b, m.Exchange)
	b = binary.AppendUvarint(b, uint64(len(m.RoutingKeys)))
	for _, k := range m.RoutingKeys {
		b = appendStr(b, k)
	}
	b = binary.AppendUvarint(b, uint64(m.DeliveryCount))
	return appendAnns(b, m.Anns)
}

func (r *reader) header() amqp10.Header {
	var h amqp10.Header
	if r.err != nil {
		return h
	}
	rest, err := h.Unmarshal(r.b)
	if err != nil {
		r.err = fmt.Errorf("%w: %w", errCorrupt, err)
		return h
	}
	r.b = rest
	return h
}

// decodeAMQP10Message decodes a record of format msgAMQP10 (b is what
// follows the tag).
func decodeAMQP10Message(b []byte) (*Message, error) {
	r := &reader{b: b}
	m := &Message{}
	h := r.header()
	m.Header = Header{Durable: h.Durable, Priority: h.Priority, TTL: h.TTL, HasTTL: h.HasTTL,
		FirstAcquirer: h.FirstAcquirer, DeliveryCount: h.DeliveryCount}
	ann, bare, footer := r.view(), r.view(), r.view() // NewMessage copies them
	var wh *amqp10.Header
	if r.byte() == 1 {
		h := r.header()
		wh = &h
	}
	m.Container = AMQP10{Wire: amqp10.NewMessage(wh, ann, bare, footer)}
	m.Exchange = r.str()
	if n := r.uvarint(); n > 0 && r.err == nil {
		if n > uint64(len(r.b)) {
			return nil, errCorrupt
		}
		m.RoutingKeys = make([]string, n)
		for i := range m.RoutingKeys {
			m.RoutingKeys[i] = r.str()
		}
	}
	m.DeliveryCount = uint32(r.uvarint())
	m.Anns = r.anns()
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

// anns reads broker annotations written by appendAnns: the dead-letter
// history comes back in its neutral form (a store written before that form
// existed holds the AMQP 1.0 form, which is read the same way).
func (r *reader) anns() value.Map {
	return annotations.LiftAMQP10(r.valueMap())
}

// valueMap reads a map (or null).
func (r *reader) valueMap() value.Map {
	if r.err != nil {
		return nil
	}
	if len(r.b) > 0 && r.b[0] == amqp10.TypeNull {
		r.b = r.b[1:]
		return nil
	}
	m, rest, err := amqp10.ReadMap(r.b)
	if err != nil {
		r.err = fmt.Errorf("%w: %w", errCorrupt, err)
		return nil
	}
	r.b = rest
	return m
}

// appendAnns appends broker annotations as an AMQP map, or null for nil,
// with the dead-letter history in its AMQP 1.0 form: the bytes of
// amqp10.AppendMap(annotations.ExpandAMQP10(nil, m)), the format every
// store holds.
func appendAnns(b []byte, m value.Map) ([]byte, error) {
	if m == nil {
		return amqp10.AppendNull(b), nil
	}
	start := len(b)
	b, mapStart := amqp10.BeginMap(b)
	b, n, err := appendAMQP10Entries(b, m)
	if err != nil {
		return b[:start], err
	}
	return amqp10.EndMap(b, mapStart, n), nil
}

func encodeList(l value.List) []byte {
	b, err := amqp10.AppendList(nil, l)
	if err != nil {
		panic(fmt.Sprintf("router: encoding metadata: %v", err)) // only broker-validated values get here
	}
	return b
}

func decodeList(b []byte, n int) (value.List, error) {
	l, _, err := amqp10.ReadList(b)
	if err != nil {
		return nil, err
	}
	if len(l) < n {
		return nil, fmt.Errorf("%w: metadata list has %d fields, want %d", errCorrupt, len(l), n)
	}
	return l, nil
}

// storedIndexFields is what recovery indexes a stored message by, read
// from its record without decoding or copying it: the size of the message
// it decodes to (Message.size), its header priority and whether its
// publisher set one (as the container's prioritySet).
type storedIndexFields struct {
	size    int64
	prio    uint8
	prioSet bool
}

// storedIndex reads the index fields of a stored message record, in either
// format.
func storedIndex(b []byte) (storedIndexFields, error) {
	if len(b) > 0 && b[0] == msgAMQP091 {
		return stored091Index(b)
	}
	if len(b) == 0 || b[0] != msgAMQP10 {
		return storedIndexFields{}, errCorrupt
	}
	r := &reader{b: b[1:]}
	h := r.header()
	_, bare, footer := r.view(), r.view(), r.view()
	f := storedIndexFields{size: int64(len(bare) + len(footer)), prio: h.Priority}
	if r.byte() == 1 {
		f.prioSet = r.header().HasPriority
	}
	if r.err != nil {
		return storedIndexFields{}, r.err
	}
	return f, nil
}
