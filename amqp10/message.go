package amqp10

import (
	"errors"
	"fmt"
)

// Descriptor codes of the message sections (section 3.2).
const (
	DescHeader                uint64 = 0x70
	DescDeliveryAnnotations   uint64 = 0x71
	DescMessageAnnotations    uint64 = 0x72
	DescProperties            uint64 = 0x73
	DescApplicationProperties uint64 = 0x74
	DescData                  uint64 = 0x75
	DescAMQPSequence          uint64 = 0x76
	DescAMQPValue             uint64 = 0x77
	DescFooter                uint64 = 0x78
)

// Header is the message header section (section 3.2.1).
//
//	<field name="durable" type="boolean" default="false"/>
//	<field name="priority" type="ubyte" default="4"/>
//	<field name="ttl" type="milliseconds"/>
//	<field name="first-acquirer" type="boolean" default="false"/>
//	<field name="delivery-count" type="uint" default="0"/>
//
// Decoding restores Priority 4 when absent. HasTTL is false when ttl was absent.
// HasPriority is true when the priority field was present (even as 4): a
// broker that orders messages by priority treats an absent priority apart
// from an explicit one (RabbitMQ's classic priority queues count it as 0).
type Header struct {
	Durable       bool
	Priority      uint8
	TTL           uint32
	HasTTL        bool
	FirstAcquirer bool
	HasPriority   bool
	DeliveryCount uint32
}

// Properties is the immutable properties section (section 3.2.4). Nil
// pointers and nil interface values are absent fields.
type Properties struct {
	MessageID          any // ulong, uuid, binary or string
	UserID             []byte
	To                 *string
	Subject            *string
	ReplyTo            *string
	CorrelationID      any
	ContentType        *Symbol
	ContentEncoding    *Symbol
	AbsoluteExpiryTime *Timestamp
	CreationTime       *Timestamp
	GroupID            *string
	GroupSequence      *uint32
	ReplyToGroupID     *string
}

// Message is a message held lazily: the sections the broker may rewrite
// (header, message annotations) are kept apart from the bare message, which
// stays the exact bytes the publisher sent. A Message is immutable once
// built and may be shared between queues and goroutines.
//
// The raw sections are one slice (they are contiguous in a transfer's
// payload) and two lengths rather than three slices: one is held per
// queued message, so it is kept to 56 bytes.
type Message struct {
	// Header is the decoded header; HasHeader is false when the publisher sent none.
	Header    Header
	HasHeader bool
	// sections holds the message-annotations section (annLen bytes), the
	// bare message (bareLen bytes) and the footer (the rest), as received.
	annLen, bareLen uint32
	sections        []byte
}

// NewMessage builds a message from its raw sections (each nil when absent),
// copying them into one buffer.
func NewMessage(h *Header, annotations, bare, footer []byte) *Message {
	m := &Message{}
	if h != nil {
		m.Header, m.HasHeader = *h, true
	}
	n := len(annotations) + len(bare) + len(footer)
	if n > 0 {
		m.sections = make([]byte, 0, n)
		m.sections = append(append(append(m.sections, annotations...), bare...), footer...)
	}
	m.annLen, m.bareLen = uint32(len(annotations)), uint32(len(bare))
	return m
}

// Annotations is the raw message-annotations section (with its
// descriptor), nil if absent.
func (m *Message) Annotations() []byte {
	if m.annLen == 0 {
		return nil
	}
	return m.sections[:m.annLen:m.annLen]
}

// Bare is the raw bare message: properties, application-properties and
// body sections, exactly as received (nil if empty).
func (m *Message) Bare() []byte {
	if m.bareLen == 0 {
		return nil
	}
	end := m.annLen + m.bareLen
	return m.sections[m.annLen:end:end]
}

// Footer is the raw footer section (with its descriptor), nil if absent.
func (m *Message) Footer() []byte {
	start := int(m.annLen + m.bareLen)
	if start == len(m.sections) {
		return nil
	}
	return m.sections[start:len(m.sections):len(m.sections)]
}

// Size is the size counted against max-length-bytes: bare message plus footer.
func (m *Message) Size() int { return len(m.sections) - int(m.annLen) }

// section ranks, in the order the sections must appear.
const (
	rankNone = iota
	rankHeader
	rankDeliveryAnnotations
	rankMessageAnnotations
	rankProperties
	rankApplicationProperties
	rankBody
	rankFooter
)

func errOrder(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrSectionOrder}, args...)...)
}

// MaxSections bounds the sections of one message. Only repeated data or
// amqp-sequence body sections can make a message long; each costs a scan
// step, and no client needs more than a few.
const MaxSections = 10000

// ParseMessage scans the sections of a message payload. It checks the order
// (header, delivery-annotations, message-annotations, properties,
// application-properties, body of data*|amqp-sequence*|amqp-value, footer;
// each at most once except repeated data/sequence), validates that every
// message-annotations key is a symbol beginning with "x-" (ErrReservedAnnotation),
// decodes the header, and keeps the other sections as raw byte ranges.
// A message without a body section is accepted.
// Errors wrap ErrSectionOrder, ErrReservedAnnotation, ErrTooManySections
// or a decode error.
//
// The returned Message aliases payload, which must not be modified afterwards.
func ParseMessage(payload []byte) (*Message, error) {
	m := &Message{}
	if err := m.Parse(payload); err != nil {
		return nil, err
	}
	return m, nil
}

// Parse is ParseMessage into m, which it overwrites (so a caller can
// allocate m together with other per-message state). On error m is
// left zero.
func (m *Message) Parse(payload []byte) error {
	*m = Message{}
	if err := m.parse(payload); err != nil {
		*m = Message{}
		return err
	}
	return nil
}

func (m *Message) parse(payload []byte) error {
	rank := rankNone
	var bodyKind uint64
	// The sections kept (message annotations, bare message, footer) are
	// contiguous: they start at secStart and run to the end.
	secStart, bareStart, bareEnd, footStart := -1, -1, -1, -1
	off := 0
	for n := 0; off < len(payload); n++ {
		if n == MaxSections {
			return fmt.Errorf("%w: more than %d", ErrTooManySections, MaxSections)
		}
		sec := payload[off:]
		code, val, err := readDescriptor(sec)
		if err != nil {
			if errors.Is(err, ErrInvalidField) {
				return errOrder("section at offset %d is not a described value", off)
			}
			return fmt.Errorf("section at offset %d: %w", off, err)
		}
		var r int
		switch code {
		case DescHeader:
			r = rankHeader
		case DescDeliveryAnnotations:
			r = rankDeliveryAnnotations
		case DescMessageAnnotations:
			r = rankMessageAnnotations
		case DescProperties:
			r = rankProperties
		case DescApplicationProperties:
			r = rankApplicationProperties
		case DescData, DescAMQPSequence, DescAMQPValue:
			r = rankBody
		case DescFooter:
			r = rankFooter
		default:
			return errOrder("unknown section at offset %d", off)
		}
		if r < rank || (r == rank && (r != rankBody || code != bodyKind || code == DescAMQPValue)) {
			return errOrder("section 0x%x at offset %d out of order", code, off)
		}
		rank = r
		if r == rankBody {
			bodyKind = code
		}
		var rest []byte
		switch code {
		case DescHeader:
			if rest, err = m.Header.unmarshalValue(val); err != nil {
				return err
			}
			m.HasHeader = true
		case DescMessageAnnotations:
			rest, err = scanAnnotations(val)
		case DescDeliveryAnnotations, DescApplicationProperties, DescFooter:
			rest, err = skipTyped(val, "map", TypeMap8, TypeMap32)
		case DescProperties, DescAMQPSequence:
			rest, err = skipTyped(val, "list", TypeList0, TypeList8, TypeList32)
		case DescData:
			rest, err = skipTyped(val, "binary", TypeBinary8, TypeBinary32)
		case DescAMQPValue:
			rest, err = skipValue(val, 1)
		}
		if err != nil {
			return fmt.Errorf("section 0x%x: %w", code, err)
		}
		end := len(payload) - len(rest)
		raw := payload[off:end:end]
		switch r {
		case rankDeliveryAnnotations:
			// Checked, then dropped: delivery annotations are for this hop
			// only, so nothing forwards or stores them (and a queued
			// message is 24 bytes smaller without the slice).
		case rankMessageAnnotations:
			secStart = off
			m.annLen = uint32(len(raw))
		case rankProperties, rankApplicationProperties, rankBody:
			if bareStart < 0 {
				bareStart = off
			}
			bareEnd = end
		case rankFooter:
			footStart = off
		}
		off = end
	}
	if bareStart >= 0 {
		m.bareLen = uint32(bareEnd - bareStart)
	}
	if secStart < 0 {
		secStart = bareStart
	}
	if secStart < 0 {
		secStart = footStart
	}
	if secStart >= 0 {
		m.sections = payload[secStart:len(payload):len(payload)]
	}
	return nil
}

// skipTyped skips a value whose constructor must be one of ctors (or null).
func skipTyped(b []byte, want string, ctors ...byte) ([]byte, error) {
	if len(b) == 0 {
		return b, errTrunc(want)
	}
	if b[0] != TypeNull {
		ok := false
		for _, c := range ctors {
			ok = ok || b[0] == c
		}
		if !ok {
			return b, errWrongType(want, b[0])
		}
	}
	return skipValue(b, 1)
}

// scanAnnotations checks every key of the message-annotations map at b is a
// symbol beginning with "x-" and returns the bytes after the map.
func scanAnnotations(b []byte) ([]byte, error) {
	n, body, rest, err := rawMap(b)
	if err != nil {
		return b, err
	}
	for i := 0; i < n; i += 2 {
		var key []byte
		if key, body, err = annotationKey(body); err != nil {
			return b, err
		}
		_ = key
		if body, err = skipValue(body, 1); err != nil {
			return b, err
		}
	}
	if len(body) != 0 {
		return b, fmt.Errorf("%w: bytes after the last map entry", ErrInvalidField)
	}
	return rest, nil
}

// annotationKey reads a message-annotations key, which must be a symbol
// beginning with "x-".
func annotationKey(b []byte) (key, rest []byte, err error) {
	if len(b) == 0 {
		return nil, b, errTrunc("annotation key")
	}
	if b[0] != TypeSym8 && b[0] != TypeSym32 {
		return nil, b, fmt.Errorf("%w: key with constructor 0x%02x", ErrReservedAnnotation, b[0])
	}
	key, rest, err = varBody(b[0], b[1:])
	if err != nil {
		return nil, b, err
	}
	if len(key) < 2 || key[0] != 'x' || key[1] != '-' {
		return nil, b, fmt.Errorf("%w: %q", ErrReservedAnnotation, key)
	}
	return key, rest, nil
}

// rawMap parses the header of a map value (null is an empty map).
func rawMap(b []byte) (n int, body, rest []byte, err error) {
	if len(b) == 0 {
		return 0, nil, b, errTrunc("map")
	}
	switch c := b[0]; c {
	case TypeNull:
		return 0, nil, b[1:], nil
	case TypeMap8, TypeMap32:
		return compoundHeader(c, b[1:])
	default:
		return 0, nil, b, errWrongType("map", c)
	}
}

// unmarshalValue decodes the header list value (after the descriptor).
func (h *Header) unmarshalValue(b []byte) ([]byte, error) {
	f, rest := openList(b, "header")
	*h = Header{Priority: 4}
	f.boolean("durable", &h.Durable)
	h.HasPriority = f.ubyte("priority", &h.Priority)
	h.HasTTL = f.uint("ttl", &h.TTL)
	f.boolean("first-acquirer", &h.FirstAcquirer)
	f.uint("delivery-count", &h.DeliveryCount)
	return f.end(b, rest)
}

// Unmarshal decodes a header section (with its descriptor) into h,
// restoring Priority 4 when absent, and returns the bytes after it.
func (h *Header) Unmarshal(b []byte) (rest []byte, err error) {
	code, val, err := readDescriptor(b)
	if err != nil {
		return b, err
	}
	if code != DescHeader {
		return b, fmt.Errorf("%w: not a header section", ErrInvalidType)
	}
	return h.unmarshalValue(val)
}

// AppendHeader appends a header section: durable, priority, ttl (only when
// HasTTL), first-acquirer, delivery-count, with trailing defaults omitted
// (a priority of 4 is a default unless HasPriority).
func AppendHeader(b []byte, h *Header) []byte {
	b, w := beginList(b, DescHeader)
	b = w.soft(AppendBool(b, h.Durable), !h.Durable)
	b = w.soft(AppendUbyte(b, h.Priority), h.Priority == 4 && !h.HasPriority)
	b = w.uint(b, h.TTL, h.HasTTL)
	b = w.soft(AppendBool(b, h.FirstAcquirer), !h.FirstAcquirer)
	b = w.soft(AppendUint(b, h.DeliveryCount), h.DeliveryCount == 0)
	return w.end(b)
}

// sectionValue returns the value of a raw section (after its descriptor).
func sectionValue(sec []byte) ([]byte, error) {
	_, val, err := readDescriptor(sec)
	return val, err
}

// AnnotationMap decodes the message-annotations section (nil when absent).
func (m *Message) AnnotationMap() (Map, error) {
	if m.annLen == 0 {
		return nil, nil
	}
	val, err := sectionValue(m.Annotations())
	if err != nil {
		return nil, err
	}
	a, _, err := ReadMap(val)
	return a, err
}

// bareSections returns the raw properties and application-properties
// sections of the bare message (nil when absent) and the body sections.
func (m *Message) bareSections() (props, appProps, body []byte, err error) {
	b := m.Bare()
	for len(b) > 0 {
		code, val, err := readDescriptor(b)
		if err != nil {
			return nil, nil, nil, err
		}
		if code != DescProperties && code != DescApplicationProperties {
			return props, appProps, b, nil
		}
		rest, err := skipValue(val, 1)
		if err != nil {
			return nil, nil, nil, err
		}
		sec := b[:len(b)-len(rest)]
		if code == DescProperties {
			props = sec
		} else {
			appProps = sec
		}
		b = rest
	}
	return props, appProps, nil, nil
}

// Body returns the raw body sections of the bare message.
func (m *Message) Body() ([]byte, error) {
	_, _, body, err := m.bareSections()
	return body, err
}

// Properties decodes the properties section (nil, nil when absent).
func (m *Message) Properties() (*Properties, error) {
	sec, _, _, err := m.bareSections()
	if err != nil || sec == nil {
		return nil, err
	}
	p := &Properties{}
	if _, err := p.Unmarshal(sec); err != nil {
		return nil, err
	}
	return p, nil
}

// UserID returns properties.user-id (nil when the message has no
// properties or no user-id) without decoding the other properties and
// without allocating: it aliases the message.
func (m *Message) UserID() ([]byte, error) {
	sec, _, _, err := m.bareSections()
	if err != nil || sec == nil {
		return nil, err
	}
	f, _ := openDescribed(sec, DescProperties, "properties")
	var uid []byte
	f.skip("message-id")
	f.binary("user-id", &uid)
	return uid, f.err
}

// ApplicationProperties decodes the application-properties section (nil when absent).
func (m *Message) ApplicationProperties() (Map, error) {
	_, sec, _, err := m.bareSections()
	if err != nil || sec == nil {
		return nil, err
	}
	val, err := sectionValue(sec)
	if err != nil {
		return nil, err
	}
	ap, _, err := ReadMap(val)
	return ap, err
}

// Unmarshal decodes a properties section (with its descriptor) into p and
// returns the bytes after it. UserID and binary message ids alias b.
func (p *Properties) Unmarshal(b []byte) (rest []byte, err error) {
	f, rest := openDescribed(b, DescProperties, "properties")
	*p = Properties{}
	messageID(&f, "message-id", &p.MessageID)
	f.binary("user-id", &p.UserID)
	p.To = optional(&f, "to", (*fieldReader).address)
	p.Subject = optional(&f, "subject", (*fieldReader).str)
	p.ReplyTo = optional(&f, "reply-to", (*fieldReader).address)
	messageID(&f, "correlation-id", &p.CorrelationID)
	p.ContentType = optional(&f, "content-type", (*fieldReader).sym)
	p.ContentEncoding = optional(&f, "content-encoding", (*fieldReader).sym)
	p.AbsoluteExpiryTime = optional(&f, "absolute-expiry-time", (*fieldReader).timestamp)
	p.CreationTime = optional(&f, "creation-time", (*fieldReader).timestamp)
	p.GroupID = optional(&f, "group-id", (*fieldReader).str)
	p.GroupSequence = optional(&f, "group-sequence", (*fieldReader).uint)
	p.ReplyToGroupID = optional(&f, "reply-to-group-id", (*fieldReader).str)
	return f.end(b, rest)
}

// optional reads a field with read into a new value; absent or null gives nil.
func optional[T any](f *fieldReader, name string, read func(*fieldReader, string, *T) bool) *T {
	v := new(T)
	if !read(f, name, v) {
		return nil
	}
	return v
}

// messageID reads a message-id or correlation-id: null, ulong, uuid,
// binary or string.
func messageID(f *fieldReader, name string, dst *any) {
	var v any
	f.anyValue(name, &v)
	switch v.(type) {
	case nil, uint64, UUID, []byte, string:
		*dst = v
	default:
		f.fail(fmt.Errorf("%w: properties.%s of type %T", ErrInvalidField, name, v))
	}
}

// AppendProperties appends a properties section (used to build management responses).
func AppendProperties(b []byte, p *Properties) ([]byte, error) {
	if p == nil {
		p = &Properties{}
	}
	start := len(b)
	b, w := beginList(b, DescProperties)
	var err error
	anyField := func(v any) {
		if err != nil {
			return
		}
		if v == nil {
			b = w.null(b)
			return
		}
		var nb []byte
		if nb, err = AppendValue(b, v); err == nil {
			b = w.mark(nb)
		}
	}
	str := func(v *string) {
		if v == nil {
			b = w.null(b)
		} else {
			b = w.str(b, *v, true)
		}
	}
	sym := func(v *Symbol) {
		if v == nil {
			b = w.null(b)
		} else {
			b = w.sym(b, *v, true)
		}
	}
	ts := func(v *Timestamp) {
		if v == nil {
			b = w.null(b)
		} else {
			b = w.mark(AppendTimestamp(b, *v))
		}
	}
	anyField(p.MessageID)
	b = w.binary(b, p.UserID, p.UserID != nil)
	str(p.To)
	str(p.Subject)
	str(p.ReplyTo)
	anyField(p.CorrelationID)
	sym(p.ContentType)
	sym(p.ContentEncoding)
	ts(p.AbsoluteExpiryTime)
	ts(p.CreationTime)
	str(p.GroupID)
	if p.GroupSequence == nil {
		b = w.null(b)
	} else {
		b = w.uint(b, *p.GroupSequence, true)
	}
	str(p.ReplyToGroupID)
	if err != nil {
		return b[:start], err
	}
	return w.end(b), nil
}

// AppendApplicationProperties appends an application-properties section.
func AppendApplicationProperties(b []byte, m Map) ([]byte, error) {
	start := len(b)
	b, err := AppendMap(AppendDescriptor(b, DescApplicationProperties), m)
	if err != nil {
		return b[:start], err
	}
	return b, nil
}

// AppendMessageAnnotations appends a message-annotations section.
func AppendMessageAnnotations(b []byte, m Map) ([]byte, error) {
	start := len(b)
	b, err := AppendMap(AppendDescriptor(b, DescMessageAnnotations), m)
	if err != nil {
		return b[:start], err
	}
	return b, nil
}

// AppendAMQPValue appends an amqp-value body section holding v.
func AppendAMQPValue(b []byte, v any) ([]byte, error) {
	start := len(b)
	b, err := AppendValue(AppendDescriptor(b, DescAMQPValue), v)
	if err != nil {
		return b[:start], err
	}
	return b, nil
}

// AppendAMQPSequence appends an amqp-sequence body section holding l.
func AppendAMQPSequence(b []byte, l List) ([]byte, error) {
	start := len(b)
	b, err := AppendList(AppendDescriptor(b, DescAMQPSequence), l)
	if err != nil {
		return b[:start], err
	}
	return b, nil
}

// AppendData appends a data body section.
func AppendData(b []byte, data []byte) []byte {
	return AppendBinary(AppendDescriptor(b, DescData), data)
}

// AppendDelivery appends the message as the broker delivers it: the header
// h (always written), then a message-annotations section holding first the
// entries of ann (broker-set keys, in order) and then the original
// annotations whose keys are not in ann (no section when both are empty),
// then Bare and Footer byte for byte. Delivery annotations are dropped.
func (m *Message) AppendDelivery(b []byte, h *Header, ann Map) ([]byte, error) {
	start := len(b)
	b = AppendHeader(b, h)
	var err error
	if b, err = appendMergedAnnotations(b, ann, m.Annotations()); err != nil {
		return b[:start], err
	}
	return append(b, m.sections[m.annLen:]...), nil
}

// AnnotationSource writes the broker's message-annotation entries of a
// delivery straight into bytes (AppendDeliveryFrom).
type AnnotationSource interface {
	// AppendEntries appends the entries (each key, then its value) and
	// returns how many values it appended (two per entry).
	AppendEntries(b []byte) ([]byte, int, error)
	// Overrides reports whether an entry with the symbol key (its bytes)
	// was appended: the publisher's entry with that key is then dropped.
	Overrides(key []byte) bool
}

// AppendDeliveryFrom is AppendDelivery with the broker's entries written by
// src rather than taken from a map.
func (m *Message) AppendDeliveryFrom(b []byte, h *Header, src AnnotationSource) ([]byte, error) {
	start := len(b)
	b = AppendHeader(b, h)
	annStart := len(b)
	b = AppendDescriptor(b, DescMessageAnnotations)
	mapStart := len(b)
	b = append(b, TypeMap32, 0, 0, 0, 0, 0, 0, 0, 0)
	b, count, err := src.AppendEntries(b)
	if err != nil {
		return b[:start], err
	}
	if b, count, err = appendOrigAnnotations(b, count, m.Annotations(), src.Overrides); err != nil {
		return b[:start], err
	}
	if count == 0 {
		b = b[:annStart]
	} else {
		b = finishCompound(b, mapStart, count, TypeMap8, TypeMap32)
	}
	return append(b, m.sections[m.annLen:]...), nil
}

// appendMergedAnnotations appends a message-annotations section with the
// entries of ann followed by the raw entries of the section orig whose keys
// are not in ann. Nothing is appended when the result would be empty.
func appendMergedAnnotations(b []byte, ann Map, orig []byte) ([]byte, error) {
	start := len(b)
	b = AppendDescriptor(b, DescMessageAnnotations)
	mapStart := len(b)
	b = append(b, TypeMap32, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	for i := range ann {
		if b, err = AppendValue(b, ann[i].Key); err != nil {
			return b[:start], err
		}
		if b, err = AppendValue(b, ann[i].Value); err != nil {
			return b[:start], err
		}
	}
	count := 2 * len(ann)
	b, count, err = appendOrigAnnotations(b, count, orig, func(key []byte) bool { return annHasKey(ann, key) })
	if err != nil {
		return b[:start], err
	}
	if count == 0 {
		return b[:start], nil
	}
	return finishCompound(b, mapStart, count, TypeMap8, TypeMap32), nil
}

// appendOrigAnnotations appends the raw entries of the message-annotations
// section orig (nil: none) whose keys overridden does not report, and
// returns count plus two per entry appended.
func appendOrigAnnotations(b []byte, count int, orig []byte, overridden func(key []byte) bool) ([]byte, int, error) {
	if orig == nil {
		return b, count, nil
	}
	val, err := sectionValue(orig)
	if err != nil {
		return b, count, err
	}
	n, body, _, err := rawMap(val)
	if err != nil {
		return b, count, err
	}
	for i := 0; i < n; i += 2 {
		entry := body
		key, rest, err := annotationKey(body)
		if err != nil {
			return b, count, err
		}
		if rest, err = skipValue(rest, 1); err != nil {
			return b, count, err
		}
		body = rest
		if overridden(key) {
			continue
		}
		b = append(b, entry[:len(entry)-len(rest)]...)
		count += 2
	}
	return b, count, nil
}

func annHasKey(ann Map, key []byte) bool {
	for i := range ann {
		if k, ok := ann[i].Key.(Symbol); ok && string(k) == string(key) {
			return true
		}
	}
	return false
}

// Append appends the message as stored: header (when HasHeader), message
// annotations, bare message and footer (delivery annotations are dropped
// by ParseMessage).
func (m *Message) Append(b []byte) []byte {
	if m.HasHeader {
		b = AppendHeader(b, &m.Header)
	}
	return append(b, m.sections...)
}
