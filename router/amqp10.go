package router

import (
	"fmt"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
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

// prioritySet reports whether the publisher's header carried a priority
// (priority.go: a classic priority queue puts a message without one at 0).
func (c AMQP10) prioritySet() bool {
	return c.Wire != nil && c.Wire.HasHeader && c.Wire.Header.HasPriority
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
// x-opt-deaths the history is written as) in a fresh map m by their decoded
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

// The fixed message annotations RabbitMQ gives an AMQP 1.0 delivery.
const (
	annExchange      = value.Symbol("x-exchange")
	annRoutingKey    = value.Symbol("x-routing-key")
	annAcquiredCount = value.Symbol("x-acquired-count")
	annDeliveryCount = value.Symbol("x-delivery-count")
)

// AMQP10Annotations returns the message annotations the delivery goes out
// with over AMQP 1.0, in a new map: AppendAMQP10Annotations(nil, nil).
func (d Delivery) AMQP10Annotations() value.Map { return d.AppendAMQP10Annotations(nil, nil) }

// BoxCache is a consumer connection's scratch for writing deliveries in
// AMQP 1.0: it keeps the last exchange and routing key boxed as interface
// values, so that delivering a stream of messages that share them boxes
// nothing, and writes a delivery's annotations (AppendAMQP10Delivery). Its
// owner uses it from one goroutine.
type BoxCache struct {
	exch, key boxedString
	src       annotationSource
	scratch   value.Map // the general path's map
}

// annotationSource writes the annotations of one delivery
// (amqp10.AnnotationSource) for AppendAMQP10Delivery. It holds copies of
// the delivery's fields, not the delivery: a pointer kept here would move
// every caller's Delivery to the heap.
type annotationSource struct {
	exchange, key string
	anns          value.Map
	acquired, dc  uint32
	quorum        bool
	extra         value.Map
	history       *annotations.History
}

// AppendAMQP10Annotations builds the message-annotations entries an AMQP
// 1.0 consumer gets, as RabbitMQ writes them, into m[:0] and returns it:
// x-exchange, x-routing-key, for quorum queues x-acquired-count and (when
// not zero) x-delivery-count once there is one to tell (quorumCounters), then the broker annotations in their AMQP
// 1.0 form (annotations.ExpandAMQP10), which replace same-named entries in
// place. bc may be nil.
func (d Delivery) AppendAMQP10Annotations(m value.Map, bc *BoxCache) value.Map {
	if bc == nil {
		bc = new(BoxCache)
	}
	m = append(m[:0],
		value.KV{Key: annExchange, Value: boxString(&bc.exch, d.Msg.Exchange)},
		value.KV{Key: annRoutingKey, Value: boxString(&bc.key, d.Msg.primaryKey())})
	if acquired, ok := quorumCounters(d.quorum, d.acquired, d.Header.DeliveryCount); ok {
		m = append(m, value.KV{Key: annAcquiredCount, Value: int64(acquired)})
		if d.Header.DeliveryCount != 0 {
			m = append(m, value.KV{Key: annDeliveryCount, Value: int64(d.Header.DeliveryCount)})
		}
	}
	fixed := len(m)
	anns := d.anns
	if _, ok := annotations.HistoryOf(anns); ok {
		anns = annotations.ExpandAMQP10(nil, anns)
	}
next:
	for _, kv := range anns {
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

// quorumCounters returns the x-acquired-count a quorum queue's delivery
// carries, and whether it carries the counters at all, as RabbitMQ 4.3
// writes them: none on a first delivery (nothing returned or failed yet);
// once the message has been returned, its acquired-count; and for a message
// that has only a delivery-count (a dead-letter copy that carried one in),
// that delivery-count as its acquired-count too. x-delivery-count goes with
// it when the delivery-count is not zero.
func quorumCounters(quorum bool, acquired, dc uint32) (uint32, bool) {
	switch {
	case !quorum:
		return 0, false
	case acquired > 0:
		return acquired, true
	case dc > 0:
		return dc, true
	}
	return 0, false
}

// AppendAMQP10Delivery appends d as an AMQP 1.0 message: its header, the
// message annotations of AppendAMQP10Annotations with the entries of extra
// set over them (replacing same-named ones in place), then the publisher's
// other annotations, and the bare message and footer byte for byte. The
// annotations are written straight into b: the dead-letter history is
// encoded from its neutral form (annotations.AppendHistoryAMQP10), and
// nothing is boxed. bc must not be nil.
func AppendAMQP10Delivery(b []byte, d *Delivery, extra value.Map, bc *BoxCache) ([]byte, error) {
	h := AMQP10Header(&d.Header)
	c, ok := d.Msg.Container.(AMQP10)
	if c091, is091 := d.Msg.Container.(AMQP091); is091 && c091.m != nil {
		// Converted once per message (amqp10_091.go); the header keeps the
		// publisher's expiration as ttl even after a death, as RabbitMQ 4.3
		// converts from the stored properties.
		w, err := c091.amqp10Form()
		if err != nil {
			return b, err
		}
		c, ok = AMQP10{Wire: w}, true
		h.TTL, h.HasTTL = w.Header.TTL, w.Header.HasTTL
	}
	if !ok || c.Wire == nil {
		return b, fmt.Errorf("router: no AMQP 1.0 form of the message (%T)", d.Msg.Container)
	}
	if !symbolKeysOnly(d.anns, false) || !symbolKeysOnly(extra, true) {
		// Keys of other types (not written by the broker today), or extra
		// entries over the history's, take the general path, which sets
		// them one by one.
		m := d.AppendAMQP10Annotations(bc.scratch, bc)
		for _, kv := range extra {
			m = m.Set(kv.Key, kv.Value)
		}
		b, err := c.Wire.AppendDelivery(b, &h, m)
		clear(m)
		bc.scratch = m[:0]
		return b, err
	}
	src := &bc.src
	*src = annotationSource{exchange: d.Msg.Exchange, key: d.Msg.primaryKey(), anns: d.anns,
		acquired: d.acquired, dc: d.Header.DeliveryCount, quorum: d.quorum, extra: extra}
	src.history, _ = annotations.HistoryOf(d.anns)
	b, err := c.Wire.AppendDeliveryFrom(b, &h, src)
	*src = annotationSource{}
	return b, err
}

// symbolKeysOnly reports whether every key of m is a symbol (with
// noDeathKeys, none of the history's AMQP 1.0 keys) or the history's
// entries.
func symbolKeysOnly(m value.Map, noDeathKeys bool) bool {
	for i := range m {
		switch k := m[i].Key.(type) {
		case value.Symbol:
			if noDeathKeys && annotations.IsDeathKey(k) {
				return false
			}
		case annotations.HistoryKey, annotations.ErrorKey:
		default:
			return false
		}
	}
	return true
}

// appendAMQP10Entries appends the broker annotations anns as AMQP map
// entries, the history in its AMQP 1.0 form (the entries of
// annotations.ExpandAMQP10), and returns how many values it appended.
func appendAMQP10Entries(b []byte, anns value.Map) ([]byte, int, error) {
	h, hasHistory := annotations.HistoryOf(anns)
	n := 0
	var err error
	for _, kv := range anns {
		switch k := kv.Key.(type) {
		case annotations.HistoryKey:
			if hasHistory {
				b = annotations.AppendHistoryAMQP10(b, h)
				n += 14
			}
			continue
		case annotations.ErrorKey:
			var m int
			b, m = annotations.AppendErrorAMQP10(b, h)
			n += m
			continue
		case value.Symbol:
			if hasHistory && annotations.IsDeathKey(k) {
				continue
			}
		}
		if b, err = amqp10.AppendValue(b, kv.Key); err != nil {
			return b, n, err
		}
		if b, err = amqp10.AppendValue(b, kv.Value); err != nil {
			return b, n, err
		}
		n += 2
	}
	return b, n, nil
}

// lookupSymbol returns the value of the symbol key k in m.
func lookupSymbol(m value.Map, k value.Symbol) (any, bool) {
	for i := range m {
		if s, ok := m[i].Key.(value.Symbol); ok && s == k {
			return m[i].Value, true
		}
	}
	return nil, false
}

// fixedKey reports whether k is one of the fixed annotations of the delivery.
func (src *annotationSource) fixedKey(k value.Symbol) bool {
	switch k {
	case annExchange, annRoutingKey:
		return true
	case annAcquiredCount:
		return src.quorum
	case annDeliveryCount:
		return src.quorum && src.dc != 0
	}
	return false
}

// broker reports whether the broker annotation with symbol key k is written
// among the broker entries (not a fixed one, not hidden by the history).
func (src *annotationSource) broker(k value.Symbol) bool {
	return !src.fixedKey(k) && (src.history == nil || !annotations.IsDeathKey(k))
}

// appendFixed appends the fixed entry k: extra's value, else the broker
// annotations', else v (appended by appendV).
func (src *annotationSource) appendFixed(b []byte, k value.Symbol, appendV func([]byte) []byte) ([]byte, error) {
	b = amqp10.AppendSymbol(b, k)
	if v, ok := lookupSymbol(src.extra, k); ok {
		return amqp10.AppendValue(b, v)
	}
	if v, ok := lookupSymbol(src.anns, k); ok {
		return amqp10.AppendValue(b, v)
	}
	return appendV(b), nil
}

// AppendEntries implements amqp10.AnnotationSource: the entries
// AppendAMQP10Annotations builds, with extra set over them, as bytes.
func (src *annotationSource) AppendEntries(b []byte) ([]byte, int, error) {
	var err error
	if b, err = src.appendFixed(b, annExchange, func(b []byte) []byte { return amqp10.AppendString(b, src.exchange) }); err != nil {
		return b, 0, err
	}
	if b, err = src.appendFixed(b, annRoutingKey, func(b []byte) []byte { return amqp10.AppendString(b, src.key) }); err != nil {
		return b, 0, err
	}
	n := 4
	if acquired, ok := quorumCounters(src.quorum, src.acquired, src.dc); ok {
		if b, err = src.appendFixed(b, annAcquiredCount, func(b []byte) []byte { return amqp10.AppendLong(b, int64(acquired)) }); err != nil {
			return b, 0, err
		}
		n += 2
		if src.dc != 0 {
			if b, err = src.appendFixed(b, annDeliveryCount, func(b []byte) []byte { return amqp10.AppendLong(b, int64(src.dc)) }); err != nil {
				return b, 0, err
			}
			n += 2
		}
	}
	for _, kv := range src.anns {
		switch k := kv.Key.(type) {
		case annotations.HistoryKey:
			if src.history != nil {
				b = annotations.AppendHistoryAMQP10(b, src.history)
				n += 14
			}
		case annotations.ErrorKey:
			var m int
			b, m = annotations.AppendErrorAMQP10(b, src.history)
			n += m
		case value.Symbol:
			if !src.broker(k) {
				continue
			}
			v := kv.Value
			if x, ok := lookupSymbol(src.extra, k); ok {
				v = x
			}
			if b, err = amqp10.AppendValue(amqp10.AppendSymbol(b, k), v); err != nil {
				return b, 0, err
			}
			n += 2
		}
	}
	for _, kv := range src.extra {
		k := kv.Key.(value.Symbol)
		if src.fixedKey(k) {
			continue
		}
		if _, ok := lookupSymbol(src.anns, k); ok && src.broker(k) {
			continue // set in place
		}
		if b, err = amqp10.AppendValue(amqp10.AppendSymbol(b, k), kv.Value); err != nil {
			return b, 0, err
		}
		n += 2
	}
	return b, n, nil
}

// Overrides implements amqp10.AnnotationSource: whether AppendEntries wrote
// an entry with the symbol key.
func (src *annotationSource) Overrides(key []byte) bool {
	k := value.Symbol(key)
	if src.fixedKey(k) {
		return true
	}
	if _, ok := lookupSymbol(src.extra, k); ok {
		return true
	}
	if h := src.history; h != nil {
		switch k {
		case annotations.KeyLastDeathErrorCond, annotations.KeyLastDeathErrorDescr:
			if h.LastError != nil && hasErrorEntry(src.anns) {
				return true
			}
		default:
			if annotations.IsDeathKey(k) {
				return true
			}
		}
	}
	if _, ok := lookupSymbol(src.anns, k); ok && src.broker(k) {
		return true
	}
	return false
}

// hasErrorEntry reports whether anns marks where the history's error goes.
func hasErrorEntry(anns value.Map) bool {
	for i := range anns {
		if _, ok := anns[i].Key.(annotations.ErrorKey); ok {
			return true
		}
	}
	return false
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

// Property implements FieldReader: one field of the properties section,
// read in place.
func (c AMQP10) Property(f PropertyField) (value.Scalar, error) {
	if c.Wire == nil {
		return value.Scalar{}, nil
	}
	return c.Wire.PropertyScalar(int(f))
}

// ApplicationProperty implements FieldReader.
func (c AMQP10) ApplicationProperty(key string) (value.Scalar, error) {
	if c.Wire == nil {
		return value.Scalar{}, nil
	}
	return c.Wire.ApplicationPropertyScalar(key)
}

// Annotation implements FieldReader: the publisher's message annotation
// (the broker's are the Message's Anns).
func (c AMQP10) Annotation(key string) (value.Scalar, error) {
	if c.Wire == nil {
		return value.Scalar{}, nil
	}
	return c.Wire.AnnotationScalar(key)
}
