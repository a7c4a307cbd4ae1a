package router

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/value"
)

// AMQP091 is the container of a message published over AMQP 0-9-1: its
// basic properties and body as the publisher sent them (less a BCC
// header, which only routes), so that a 0-9-1 consumer gets the
// publisher's property octets and body unchanged and an AMQP 1.0 consumer
// gets the conversion of RabbitMQ 4.3's mc_amqpl, built once, on first
// delivery over 1.0 (amqp10_091.go). A struct of one pointer, like AMQP10.
type AMQP091 struct {
	m *amqp091Message
}

type amqp091Message struct {
	props []byte // the property list (flags and values) as sent, BCC removed
	body  []byte
	p     amqp091.Properties // props decoded (the front end decoded them anyway)

	// The AMQP 1.0 form, built once by the first AMQP 1.0 delivery.
	once sync.Once
	as10 any // *amqp10.Message, or an error
}

// NewAMQP091 returns the container of a message with the decoded
// properties p (whose octets are raw, nil to encode p) and body. The
// caller gives up p, raw and body. A BCC header is removed here: it
// routes (the front end has read it) and is never delivered.
func NewAMQP091(p amqp091.Properties, raw, body []byte) (AMQP091, error) {
	if i := slices.IndexFunc(p.Headers, func(f amqp091.Field) bool { return f.Key == "BCC" }); i >= 0 {
		p.Headers = slices.DeleteFunc(slices.Clone(p.Headers), func(f amqp091.Field) bool { return f.Key == "BCC" })
		if len(p.Headers) == 0 {
			p.Flags &^= amqp091.FlagHeaders
			p.Headers = nil
		}
		raw = nil
	}
	if raw == nil {
		var err error
		if raw, err = p.Append(nil); err != nil {
			return AMQP091{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	return AMQP091{m: &amqp091Message{props: raw, body: body, p: p}}, nil
}

// Protocol implements Container.
func (c AMQP091) Protocol() Protocol { return ProtocolAMQP091 }

// Size implements Container: the body, as RabbitMQ counts a 0-9-1
// message's size toward x-max-length-bytes.
func (c AMQP091) Size() int {
	if c.m == nil {
		return 0
	}
	return len(c.m.body)
}

// Header implements Container: durable for delivery-mode 2, the
// priority (4 when absent: RabbitMQ's default for priority queues) and the
// expiration as TTL. The front end has validated the expiration.
func (c AMQP091) Header() Header {
	h := Header{Priority: 4}
	if c.m == nil {
		return h
	}
	p := &c.m.p
	h.Durable = p.Has(amqp091.FlagDeliveryMode) && p.DeliveryMode == 2
	if p.Has(amqp091.FlagPriority) {
		h.Priority = p.Priority
	}
	if ttl, ok := c.expiration(); ok {
		h.TTL, h.HasTTL = ttl, true
	}
	return h
}

// prioritySet reports whether the priority property was set (priority.go).
func (c AMQP091) prioritySet() bool { return c.m != nil && c.m.p.Has(amqp091.FlagPriority) }

// expiration is the expiration property as a TTL in milliseconds; values
// above 2^32-1 wrap, as RabbitMQ's conversion to the AMQP 1.0 ttl does.
func (c AMQP091) expiration() (uint32, bool) {
	p := &c.m.p
	if !p.Has(amqp091.FlagExpiration) {
		return 0, false
	}
	n, err := strconv.ParseUint(p.Expiration, 10, 64)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// Properties091 are the message's basic properties as published (BCC
// removed). Callers must not modify them.
func (c AMQP091) Properties091() *amqp091.Properties { return &c.m.p }

// RawProperties are the property list's octets as published (BCC removed).
func (c AMQP091) RawProperties() []byte { return c.m.props }

// Payload is the body as published.
func (c AMQP091) Payload() []byte { return c.m.body }

// RoutingHeaders implements Container: the headers table, values in the
// neutral model.
func (c AMQP091) RoutingHeaders() (value.Map, error) {
	if c.m == nil || len(c.m.p.Headers) == 0 {
		return nil, nil
	}
	m := make(value.Map, 0, len(c.m.p.Headers))
	for _, f := range c.m.p.Headers {
		m = append(m, value.KV{Key: f.Key, Value: neutralValue(f.Value)})
	}
	return m, nil
}

// XHeaders implements Container: the headers whose names start with x-.
func (c AMQP091) XHeaders() (value.Map, error) {
	if c.m == nil {
		return nil, nil
	}
	var m value.Map
	for _, f := range c.m.p.Headers {
		if len(f.Key) >= 2 && f.Key[:2] == "x-" {
			m = append(m, value.KV{Key: value.Symbol(f.Key), Value: neutralValue(f.Value)})
		}
	}
	return m, nil
}

// Properties implements Container.
func (c AMQP091) Properties() (Properties, error) {
	if c.m == nil {
		return Properties{}, nil
	}
	p := &c.m.p
	var out Properties
	if p.Has(amqp091.FlagMessageID) {
		out.MessageID = p.MessageID
	}
	if p.Has(amqp091.FlagCorrelationID) {
		out.CorrelationID = p.CorrelationID
	}
	if p.Has(amqp091.FlagUserID) {
		out.UserID = []byte(p.UserID)
	}
	out.ReplyTo, out.ContentType, out.ContentEncoding = p.ReplyTo, p.ContentType, p.ContentEncoding
	return out, nil
}

// Body implements Container: the payload.
func (c AMQP091) Body() ([]byte, error) {
	if c.m == nil {
		return nil, nil
	}
	return c.m.body, nil
}

// neutralValue maps a field-table value onto the value model (for
// headers-exchange matching): longstr as string, timestamp in
// milliseconds, tables as maps with string keys, arrays as lists.
func neutralValue(v any) any {
	switch x := v.(type) {
	case amqp091.Table:
		m := make(value.Map, 0, len(x))
		for _, f := range x {
			m = append(m, value.KV{Key: f.Key, Value: neutralValue(f.Value)})
		}
		return m
	case amqp091.Array:
		l := make(value.List, len(x))
		for i := range x {
			l[i] = neutralValue(x[i])
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

// ---- delivery in AMQP 0-9-1 ----

// Delivery091 is what a 0-9-1 consumer is sent for a delivery: the
// properties' octets (the publisher's own when nothing changes) and the
// payload, plus basic.deliver's exchange and routing key.
type Delivery091 struct {
	Props       []byte
	Body        []byte
	Exchange    string
	RoutingKey  string
	Redelivered bool
}

// Delivery091Of returns d as RabbitMQ 4.3 delivers it over AMQP 0-9-1
// (mc_amqpl:protocol_state/2 and convert_from/3): a 0-9-1 message keeps its
// properties and body; one published over another protocol is converted
// (amqp10_091.go). The broker's annotations are merged into the headers:
// the dead-letter history as x-death and the six x-*-death-* longstr
// headers, a quorum queue's x-delivery-count and x-acquired-count, other
// integer, string and boolean x- annotations; then the headers are sorted
// by key with duplicates dropped (the first kept), on every delivery that
// has headers. A message that has died has no expiration (its TTL is
// in the history's original-expiration). scratch is reused storage.
func Delivery091Of(d *Delivery, scratch []byte) (Delivery091, error) {
	return Delivery091With(d, scratch, nil)
}

// Delivery091With is Delivery091Of with extra annotations (the deliver
// span's x-opt-traceparent) merged over the message's own, as the AMQP 1.0
// sender adds its extra message annotations: an AMQP 0-9-1 consumer gets
// them as headers.
func Delivery091With(d *Delivery, scratch []byte, extra value.Map) (Delivery091, error) {
	out := Delivery091{Exchange: d.Msg.Exchange, RoutingKey: d.Msg.primaryKey()}
	acquired, quorum := quorumCounters(d.quorum, d.acquired, d.Header.DeliveryCount)
	out.Redelivered = d.acquired > 0 || d.quorum && d.Header.DeliveryCount > 0
	var p amqp091.Properties
	headers := amqp091.Table(nil)
	switch c := d.Msg.Container.(type) {
	case AMQP091:
		out.Body = c.m.body
		if len(extra) == 0 && !needsRewrite091(c, d, quorum) {
			out.Props = c.m.props
			return out, nil
		}
		p = c.m.p
		if !d.Header.HasTTL {
			p.Flags &^= amqp091.FlagExpiration
			p.Expiration = ""
		}
		headers = p.Headers
		if quorum || len(d.anns) > 0 || len(extra) > 0 || !sortedUnique(headers) {
			// The stored message's table is never modified.
			headers = slices.Clone(headers)
		}
	default:
		var err error
		if p, out.Body, err = convertTo091(d.Msg.Container, d); err != nil {
			return out, err
		}
		headers = p.Headers // built for this delivery
	}
	headers = mergeBrokerHeaders(headers, d.anns)
	headers = mergeBrokerHeaders(headers, extra)
	if quorum {
		headers = setField(headers, "x-acquired-count", int64(acquired))
		if d.Header.DeliveryCount != 0 {
			headers = setField(headers, "x-delivery-count", int64(d.Header.DeliveryCount))
		}
	}
	if !sortedUnique(headers) {
		headers = sortHeaders(headers)
	}
	if len(headers) == 0 {
		headers = nil
	}
	p.Headers = headers
	if len(p.Headers) > 0 {
		p.Flags |= amqp091.FlagHeaders
	} else {
		p.Flags &^= amqp091.FlagHeaders
	}
	b, err := p.Append(scratch[:0])
	if err != nil {
		return out, fmt.Errorf("router: 0-9-1 properties: %w", err)
	}
	out.Props = b
	return out, nil
}

// needsRewrite091 reports whether a 0-9-1 message's properties change on
// delivery (the fast path sends the publisher's octets).
func needsRewrite091(c AMQP091, d *Delivery, quorumCounters bool) bool {
	if quorumCounters || len(c.m.p.Headers) > 0 || len(d.anns) > 0 {
		return true
	}
	return c.m.p.Has(amqp091.FlagExpiration) && !d.Header.HasTTL
}

// setField sets key in t (replacing the first same-named entry, else
// appending).
func setField(t amqp091.Table, key string, v any) amqp091.Table {
	for i := range t {
		if t[i].Key == key {
			t[i].Value = v
			return t
		}
	}
	return append(t, amqp091.Field{Key: key, Value: v})
}

// sortedUnique reports whether t's keys are in ascending bytewise order
// with no key twice (what sortHeaders makes of a table).
func sortedUnique(t amqp091.Table) bool {
	for i := 1; i < len(t); i++ {
		if t[i-1].Key >= t[i].Key {
			return false
		}
	}
	return true
}

// sortHeaders sorts t by key, bytewise, and keeps the first of each key,
// as RabbitMQ's protocol_state does on every 0-9-1 delivery.
func sortHeaders(t amqp091.Table) amqp091.Table {
	if len(t) == 0 {
		return nil
	}
	slices.SortStableFunc(t, func(a, b amqp091.Field) int { return bytes.Compare([]byte(a.Key), []byte(b.Key)) })
	return slices.CompactFunc(t, func(a, b amqp091.Field) bool { return a.Key == b.Key })
}

// mergeBrokerHeaders sets the broker's annotations in t: the history as
// x-death and the x-first/last-death-* headers (replacing any the client
// set: a client's x-death is not history), and other x- annotations of
// integer, string or boolean value (mc_amqpl:protocol_state/2 emits no
// others).
func mergeBrokerHeaders(t amqp091.Table, anns value.Map) amqp091.Table {
	for _, kv := range anns {
		switch k := kv.Key.(type) {
		case annotations.HistoryKey:
			h, ok := kv.Value.(*annotations.History)
			if !ok || h == nil {
				continue
			}
			t = setField(t, "x-death", xDeathArray(*h))
			t = setField(t, "x-first-death-exchange", h.First.Exchange)
			t = setField(t, "x-first-death-queue", h.First.Queue)
			t = setField(t, "x-first-death-reason", h.First.Reason)
			t = setField(t, "x-last-death-exchange", h.Last.Exchange)
			t = setField(t, "x-last-death-queue", h.Last.Queue)
			t = setField(t, "x-last-death-reason", h.Last.Reason)
		case annotations.ErrorKey:
			// epitaph's x-last-death-error-*: AMQP 1.0 annotations only.
		default:
			name, ok := keyString(k)
			if !ok || len(name) < 2 || name[:2] != "x-" || len(name) > 255 || internalHeader(name) {
				continue
			}
			if v, ok := annotationHeaderValue(kv.Value); ok {
				t = setField(t, name, v)
			}
		}
	}
	return t
}

// internalHeader names the x- annotations RabbitMQ never copies into 0-9-1
// headers (mc_amqpl:is_internal_header/1 and the history's own).
func internalHeader(k string) bool {
	switch k {
	case "x-routing-key", "x-exchange", "x-death", "x-opt-deaths", "x-cc":
		return true
	}
	return len(k) > 8 && k[:8] == "x-basic-" || annotations.IsDeathKey(value.Symbol(k))
}

// annotationHeaderValue is an annotation's value as a header: integers
// (as long), strings (longstr) and booleans only.
func annotationHeaderValue(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case value.Symbol:
		return string(x), true
	case []byte:
		return string(x), true
	case bool:
		return x, true
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), true
	}
	return nil, false
}

// xDeathArray is the history as the x-death header: one table per death,
// most recent first, in RabbitMQ's field order (annotations.ToXDeath).
func xDeathArray(h annotations.History) amqp091.Array {
	xs := annotations.ToXDeath(h)
	arr := make(amqp091.Array, len(xs))
	for i, x := range xs {
		t := make(amqp091.Table, 0, 7)
		if x.HasOriginalExpiration {
			t = append(t, amqp091.Field{Key: "original-expiration", Value: x.OriginalExpiration})
		}
		keys := make(amqp091.Array, len(x.RoutingKeys))
		for j, k := range x.RoutingKeys {
			keys[j] = k
		}
		t = append(t,
			amqp091.Field{Key: "count", Value: x.Count},
			amqp091.Field{Key: "reason", Value: x.Reason},
			amqp091.Field{Key: "queue", Value: x.Queue},
			amqp091.Field{Key: "time", Value: amqp091.Timestamp(x.Time)},
			amqp091.Field{Key: "exchange", Value: x.Exchange},
			amqp091.Field{Key: "routing-keys", Value: keys})
		arr[i] = t
	}
	return arr
}

// ---- store ----

// msgAMQP091 tags a stored message whose container is AMQP091:
//
//	0x02, the router's header (durable, priority, has-ttl, ttl),
//	uvarint-prefixed properties and body, exchange, routing keys,
//	delivery-count, Anns (as in msgAMQP10).
const msgAMQP091 = 2

func encodeAMQP091Message(m *Message, c AMQP091) ([]byte, error) {
	b := make([]byte, 0, 32+len(c.m.props)+len(c.m.body))
	b = append(b, msgAMQP091, boolByte(m.Header.Durable), m.Header.Priority, boolByte(m.Header.HasTTL))
	b = binary.AppendUvarint(b, uint64(m.Header.TTL))
	b = appendBytes(b, c.m.props)
	b = appendBytes(b, c.m.body)
	b = appendStr(b, m.Exchange)
	b = binary.AppendUvarint(b, uint64(len(m.RoutingKeys)))
	for _, k := range m.RoutingKeys {
		b = appendStr(b, k)
	}
	b = binary.AppendUvarint(b, uint64(m.DeliveryCount))
	return appendAnns(b, m.Anns)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func decodeAMQP091Message(b []byte) (*Message, error) {
	r := &reader{b: b}
	var h Header
	h.Durable = r.byte() == 1
	h.Priority = r.byte()
	h.HasTTL = r.byte() == 1
	h.TTL = uint32(r.uvarint())
	props := bytes.Clone(r.view())
	body := bytes.Clone(r.view())
	exchange := r.str()
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		return nil, errCorrupt
	}
	var keys []string
	for range n {
		keys = append(keys, r.str())
	}
	dc := uint32(r.uvarint())
	anns := r.anns()
	if r.err != nil {
		return nil, r.err
	}
	var p amqp091.Properties
	if err := p.Decode(props); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return &Message{Container: AMQP091{m: &amqp091Message{props: props, body: body, p: p}}, Header: h,
		DeliveryCount: dc, Exchange: exchange, RoutingKeys: keys, Anns: anns}, nil
}

// HandedOut is the number of deliveries the subscription has handed out
// (AMQP 1.0's sender delivery-count): a 0-9-1 basic.get grants credit 1
// from it.
func (s *Subscription) HandedOut() uint32 {
	s.q.mu.Lock()
	defer s.q.unlock()
	return s.handedOut
}

// stored091Index reads the index fields of a msgAMQP091 record b (tag
// included) without decoding its properties: the router header's
// priority, whether the properties carry one (their first flags word), and
// the body's size.
func stored091Index(b []byte) (storedIndexFields, error) {
	r := &reader{b: b[1:]}
	r.byte() // durable
	f := storedIndexFields{prio: r.byte()}
	r.byte() // has-ttl
	r.uvarint()
	props := r.view()
	f.size = int64(len(r.view()))
	if r.err == nil && len(props) < 2 {
		r.err = errCorrupt
	}
	if r.err != nil {
		return storedIndexFields{}, r.err
	}
	f.prioSet = binary.BigEndian.Uint16(props)&amqp091.FlagPriority != 0
	return f, nil
}
