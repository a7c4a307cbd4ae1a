package router

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// The conversions between AMQP 0-9-1 and AMQP 1.0, as RabbitMQ 4.3's
// mc_amqpl does them (convert_to/3 for 0-9-1 to 1.0, convert_from/3 and
// protocol_state/2 for 1.0 to 0-9-1). They run on delivery, and only when
// the consumer's protocol differs from the publisher's. Where RabbitMQ's
// conversion crashes (a decimal header going to 1.0; a uuid or char value,
// a non-string map key going to 0-9-1; a non-hex urn:uuid id) epitaph
// drops the offending entry or keeps the id as a string: a deliberate
// deviation, since a crash there ends RabbitMQ's channel or session.

// ---- 0-9-1 to AMQP 1.0 ----

// amqp10Form returns the message as AMQP 1.0 (built once, then shared by
// every AMQP 1.0 delivery of the message).
func (c AMQP091) amqp10Form() (*amqp10.Message, error) {
	c.m.once.Do(func() {
		w, err := convert091To10(&c.m.p, c.m.body)
		if err != nil {
			c.m.as10 = err
			return
		}
		c.m.as10 = w
	})
	if err, ok := c.m.as10.(error); ok {
		return nil, err
	}
	return c.m.as10.(*amqp10.Message), nil
}

// convert091To10 builds the AMQP 1.0 message (header, message annotations,
// bare message) of a 0-9-1 message. The header is the publisher's: durable
// for delivery-mode 2, the priority, the expiration as ttl (a delivery
// writes it even after the message died, as RabbitMQ 4.3 does: its
// conversion reads the stored properties).
func convert091To10(p *amqp091.Properties, payload []byte) (*amqp10.Message, error) {
	h := amqp10.Header{Priority: 4, Durable: p.Has(amqp091.FlagDeliveryMode) && p.DeliveryMode == 2}
	if p.Has(amqp091.FlagPriority) {
		h.Priority = p.Priority
	}
	if p.Has(amqp091.FlagExpiration) {
		if n, err := strconv.ParseUint(p.Expiration, 10, 64); err == nil {
			h.TTL, h.HasTTL = uint32(n), true
		}
	}
	var ma, ap value.Map
	if p.Has(amqp091.FlagType) {
		ma = append(ma, value.KV{Key: value.Symbol("x-basic-type"), Value: p.Type})
	}
	var cc value.List
	for _, f := range p.Headers {
		switch {
		case strings.HasPrefix(f.Key, "x-"):
			if v, ok := from091(f.Value); ok {
				ma = append(ma, value.KV{Key: value.Symbol(f.Key), Value: v})
			}
		case f.Key == "CC":
			if arr, ok := f.Value.(amqp091.Array); ok {
				for _, e := range arr {
					if v, ok := from091(e); ok {
						cc = append(cc, v)
					}
				}
			}
		case f.Key == "BCC":
		default:
			switch f.Value.(type) {
			case amqp091.Array, amqp091.Table:
				continue // dropped, as RabbitMQ drops them
			}
			if v, ok := from091(f.Value); ok {
				ap = append(ap, value.KV{Key: f.Key, Value: v})
			}
		}
	}
	if cc != nil {
		ma = append(ma, value.KV{Key: value.Symbol("x-cc"), Value: cc})
	}
	var props amqp10.Properties
	hasProps := false
	// The properties' pointed-to values share one allocation.
	vals := new(struct {
		replyTo, groupID        string
		contentType, contentEnc value.Symbol
		creationTime            value.Timestamp
	})
	if p.Has(amqp091.FlagMessageID) {
		props.MessageID, hasProps = idFrom091(p.MessageID), true
	}
	if p.Has(amqp091.FlagUserID) {
		props.UserID, hasProps = []byte(p.UserID), true
	}
	if p.Has(amqp091.FlagReplyTo) {
		vals.replyTo = "/queues/" + quoteSegment(p.ReplyTo)
		props.ReplyTo, hasProps = &vals.replyTo, true
	}
	if p.Has(amqp091.FlagCorrelationID) {
		props.CorrelationID, hasProps = idFrom091(p.CorrelationID), true
	}
	if p.Has(amqp091.FlagContentType) {
		vals.contentType = value.Symbol(p.ContentType)
		props.ContentType, hasProps = &vals.contentType, true
	}
	if p.Has(amqp091.FlagContentEncoding) {
		vals.contentEnc = value.Symbol(p.ContentEncoding)
		props.ContentEncoding, hasProps = &vals.contentEnc, true
	}
	if p.Has(amqp091.FlagTimestamp) {
		vals.creationTime = value.Timestamp(int64(p.Timestamp) * 1000)
		props.CreationTime, hasProps = &vals.creationTime, true
	}
	if p.Has(amqp091.FlagAppID) {
		vals.groupID = p.AppID
		props.GroupID, hasProps = &vals.groupID, true
	}
	// The sections are written into one buffer, sized for the body, and
	// parsed there so that the lazy accessors (properties,
	// application-properties) work on the converted form too.
	buf := make([]byte, 0, 256+len(payload))
	buf = amqp10.AppendHeader(buf, &h)
	annStart := len(buf)
	var err error
	if len(ma) > 0 {
		buf = amqp10.AppendDescriptor(buf, amqp10.DescMessageAnnotations)
		if buf, err = amqp10.AppendMap(buf, ma); err != nil {
			return nil, fmt.Errorf("router: 0-9-1 headers as annotations: %w", err)
		}
	}
	bareStart := len(buf)
	if hasProps {
		if buf, err = amqp10.AppendProperties(buf, &props); err != nil {
			return nil, fmt.Errorf("router: 0-9-1 properties: %w", err)
		}
	}
	if len(ap) > 0 {
		buf = amqp10.AppendDescriptor(buf, amqp10.DescApplicationProperties)
		if buf, err = amqp10.AppendMap(buf, ap); err != nil {
			return nil, fmt.Errorf("router: 0-9-1 headers as application-properties: %w", err)
		}
	}
	if p.Has(amqp091.FlagType) && p.Type == "amqp-1.0" {
		// The payload is AMQP 1.0 body sections (RabbitMQ's convention
		// for a 1.0 message converted to 0-9-1); they are the body again.
		bodyStart := len(buf)
		buf = append(buf, payload...)
		if parsed, err := amqp10.ParseMessage(buf); err == nil {
			return parsed, nil
		}
		// A payload that is not body sections would be sent as an
		// undecodable transfer, ending the consumer's connection
		// (RabbitMQ's conversion crashes): it goes as a data section,
		// as for any other type, so that the consumer gets its octets.
		buf = buf[:bodyStart]
	}
	buf = amqp10.AppendBinary(amqp10.AppendDescriptor(buf, amqp10.DescData), payload)
	if parsed, err := amqp10.ParseMessage(buf); err == nil {
		return parsed, nil
	}
	var annSec []byte
	if bareStart > annStart {
		annSec = buf[annStart:bareStart:bareStart]
	}
	return amqp10.NewMessage(&h, annSec, buf[bareStart:], nil), nil
}

// idFrom091 converts a message or correlation id: urn:uuid: and 36
// characters of hex in the 8-4-4-4-12 pattern is a uuid, anything else a
// string (RabbitMQ crashes on a non-hex urn:uuid; epitaph keeps the string).
func idFrom091(s string) any {
	const prefix = "urn:uuid:"
	if len(s) == len(prefix)+36 && strings.HasPrefix(s, prefix) {
		u := s[len(prefix):]
		if u[8] == '-' && u[13] == '-' && u[18] == '-' && u[23] == '-' {
			var id value.UUID
			if _, err := hex.Decode(id[:], []byte(u[:8]+u[9:13]+u[14:18]+u[19:23]+u[24:])); err == nil {
				return id
			}
		}
	}
	return s
}

// from091 converts a header value to AMQP 1.0 (mc_amqpl:from_091/2).
func from091(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if len(x) <= 4096 && utf8.ValidString(x) && !strings.ContainsRune(x, 0) {
			return x, true
		}
		return []byte(x), true
	case amqp091.Binary:
		return []byte(x), true
	case amqp091.Timestamp:
		return value.Timestamp(int64(x) * 1000), true
	case amqp091.Decimal:
		return nil, false
	case amqp091.Array:
		l := make(value.List, 0, len(x))
		for _, e := range x {
			if c, ok := from091(e); ok {
				l = append(l, c)
			}
		}
		return l, true
	case amqp091.Table:
		m := make(value.Map, 0, len(x))
		for _, f := range x {
			if c, ok := from091(f.Value); ok {
				m = append(m, value.KV{Key: value.Symbol(f.Key), Value: c})
			}
		}
		return m, true
	case nil, bool, int8, uint8, int16, uint16, int32, uint32, int64, float32, float64:
		return x, true
	}
	return nil, false
}

// ---- AMQP 1.0 to 0-9-1 ----

// convertTo091 converts an AMQP 1.0 message to 0-9-1 basic properties and
// payload, the delivery's header giving delivery-mode, priority and
// expiration (the store's annotations in RabbitMQ).
func convertTo091(c Container, d *Delivery) (amqp091.Properties, []byte, error) {
	var p amqp091.Properties
	a, ok := c.(AMQP10)
	if !ok || a.Wire == nil {
		return p, nil, fmt.Errorf("router: no AMQP 0-9-1 form of the message (%T)", c)
	}
	w := a.Wire
	if d.Header.Durable {
		p.Flags |= amqp091.FlagDeliveryMode
		p.DeliveryMode = 2
	}
	if w.HasHeader && d.Header.Priority != 4 {
		// The header's priority field, when the publisher set one: the
		// codec keeps no presence bit, so the default 4 reads as unset.
		p.Flags |= amqp091.FlagPriority
		p.Priority = d.Header.Priority
	}
	if d.Header.HasTTL {
		p.Flags |= amqp091.FlagExpiration
		p.Expiration = strconv.FormatUint(uint64(d.Header.TTL), 10)
	}
	var headers amqp091.Table
	fast, fastOK := propertiesTo091InPlace(w, &p, headers)
	if fastOK {
		headers = fast
	} else if props, err := w.Properties(); err == nil && props != nil {
		headers = idTo091(&p, amqp091.FlagMessageID, &p.MessageID, props.MessageID, "x-message-id", headers)
		headers = idTo091(&p, amqp091.FlagCorrelationID, &p.CorrelationID, props.CorrelationID, "x-correlation-id", headers)
		if u := string(props.UserID); props.UserID != nil && validShortstr(u) {
			p.Flags |= amqp091.FlagUserID
			p.UserID = u
		}
		if props.ReplyTo != nil && len(*props.ReplyTo) < 256 {
			r := *props.ReplyTo
			ok := true
			if q, isQueue := strings.CutPrefix(r, "/queues/"); isQueue {
				r, ok = unescapePath(q)
			}
			if ok {
				p.Flags |= amqp091.FlagReplyTo
				p.ReplyTo = r
			}
		}
		if props.ContentType != nil {
			p.Flags |= amqp091.FlagContentType
			p.ContentType = string(*props.ContentType)
		}
		if props.ContentEncoding != nil {
			p.Flags |= amqp091.FlagContentEncoding
			p.ContentEncoding = string(*props.ContentEncoding)
		}
		if props.CreationTime != nil {
			p.Flags |= amqp091.FlagTimestamp
			p.Timestamp = uint64(int64(*props.CreationTime) / 1000)
		}
		if props.GroupID != nil && len(*props.GroupID) < 256 {
			p.Flags |= amqp091.FlagAppID
			p.AppID = *props.GroupID
		}
	}
	if ap, err := w.ApplicationProperties(); err == nil {
		for _, kv := range ap {
			k, ok := kv.Key.(string)
			if !ok || len(k) >= 256 {
				continue
			}
			if v, ok := to091(kv.Value); ok {
				headers = append(headers, amqp091.Field{Key: k, Value: v})
			}
		}
	}
	if w.Annotations() != nil {
		if ma, err := w.AnnotationMap(); err == nil {
			for _, kv := range ma {
				k, ok := kv.Key.(value.Symbol)
				if !ok || len(k) >= 256 || !strings.HasPrefix(string(k), "x-") {
					continue
				}
				switch k {
				case "x-basic-type":
					if s, ok := kv.Value.(string); ok && len(s) < 256 {
						p.Flags |= amqp091.FlagType
						p.Type = s
					}
					continue
				case "x-cc":
					if v, ok := to091(kv.Value); ok {
						if arr, ok := v.(amqp091.Array); ok {
							headers = append(headers, amqp091.Field{Key: "CC", Value: arr})
						}
					}
					continue
				}
				if internalHeader(string(k)) {
					continue
				}
				if v, ok := to091(kv.Value); ok {
					headers = append(headers, amqp091.Field{Key: string(k), Value: v})
				}
			}
		}
	}
	p.Headers = headers
	payload, amqpBody, err := payloadTo091(w)
	if err != nil {
		return p, nil, err
	}
	if amqpBody {
		p.Flags |= amqp091.FlagType
		p.Type = "amqp-1.0"
	}
	return p, payload, nil
}

// The properties fields convertTo091 reads (AMQP 1.0 properties list
// positions).
const (
	propMessageID       = 0
	propUserID          = 1
	propReplyTo         = 4
	propCorrelationID   = 5
	propContentType     = 6
	propContentEncoding = 7
	propAbsoluteExpiry  = 8
	propCreationTime    = 9
	propGroupID         = 10
	propGroupSequence   = 11
	propsFields         = 13
)

// propertiesTo091InPlace sets p's properties from the message's properties
// section read in place, which allocates only the strings kept, and returns
// the headers with any id that goes there. It reports false, having set
// nothing, when a field it reads is of a type it does not map exactly as
// the decoded section would be (an id of another type than string, uuid
// or binary, a mistyped field) or cannot be read: the caller then decodes
// the section (amqp10.Message.Properties).
func propertiesTo091InPlace(w *amqp10.Message, p *amqp091.Properties, h amqp091.Table) (amqp091.Table, bool) {
	// Every field is read and its type checked, those not converted too,
	// so that a section the decoder would refuse takes the decoder's path.
	var f [propsFields + 1]value.Scalar // and the one beyond, which must be absent
	if err := w.PropertyScalars(f[:]); err != nil {
		return h, false
	}
	for i := range f {
		s := &f[i]
		want := value.KindString
		switch i {
		case propsFields: // no field beyond the thirteen
			want = value.KindAbsent
		case propAbsoluteExpiry:
			want = value.KindTimestamp
		case propGroupSequence: // a uint: the scalar does not tell it from the other widths
			want = value.KindAbsent
		case propMessageID, propCorrelationID:
			switch s.Kind {
			case value.KindString, value.KindBinary:
				want = s.Kind
			case value.KindUUID:
				if len(s.Bytes) != 16 {
					return h, false
				}
				want = s.Kind
			}
		case propUserID:
			want = value.KindBinary
		case propContentType, propContentEncoding:
			want = value.KindSymbol
		case propCreationTime:
			want = value.KindTimestamp
		}
		if s.Kind != want && s.Kind != value.KindAbsent && s.Kind != value.KindNull {
			return h, false
		}
	}
	present := func(i int) bool { return f[i].Kind != value.KindAbsent && f[i].Kind != value.KindNull }
	id := func(i int, flag uint16, dst *string, header string) {
		if !present(i) {
			return
		}
		s := f[i]
		switch s.Kind {
		case value.KindString:
			if len(s.Bytes) < 256 {
				p.Flags |= flag
				*dst = string(s.Bytes)
			} else {
				h = append(h, amqp091.Field{Key: header, Value: string(s.Bytes)})
			}
		case value.KindUUID:
			var u value.UUID
			copy(u[:], s.Bytes)
			h = idTo091(p, flag, dst, u, header, h)
		case value.KindBinary:
			h = append(h, amqp091.Field{Key: header, Value: amqp091.Binary(bytes.Clone(s.Bytes))})
		}
	}
	id(propMessageID, amqp091.FlagMessageID, &p.MessageID, "x-message-id")
	id(propCorrelationID, amqp091.FlagCorrelationID, &p.CorrelationID, "x-correlation-id")
	if present(propUserID) {
		if b := f[propUserID].Bytes; len(b) < 256 && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
			p.Flags |= amqp091.FlagUserID
			p.UserID = string(b)
		}
	}
	if present(propReplyTo) && len(f[propReplyTo].Bytes) < 256 {
		r := string(f[propReplyTo].Bytes)
		ok := true
		if q, isQueue := strings.CutPrefix(r, "/queues/"); isQueue {
			r, ok = unescapePath(q)
		}
		if ok {
			p.Flags |= amqp091.FlagReplyTo
			p.ReplyTo = r
		}
	}
	if present(propContentType) {
		p.Flags |= amqp091.FlagContentType
		p.ContentType = string(f[propContentType].Bytes)
	}
	if present(propContentEncoding) {
		p.Flags |= amqp091.FlagContentEncoding
		p.ContentEncoding = string(f[propContentEncoding].Bytes)
	}
	if present(propCreationTime) {
		p.Flags |= amqp091.FlagTimestamp
		p.Timestamp = uint64(f[propCreationTime].Int / 1000)
	}
	if present(propGroupID) && len(f[propGroupID].Bytes) < 256 {
		p.Flags |= amqp091.FlagAppID
		p.AppID = string(f[propGroupID].Bytes)
	}
	return h, true
}

// payloadTo091 is the 0-9-1 payload of an AMQP 1.0 message: the data
// sections concatenated, or (amqp-value or amqp-sequence) the body
// sections' encoding and the footer, reported by amqpBody.
func payloadTo091(w *amqp10.Message) (payload []byte, amqpBody bool, err error) {
	body, err := w.Body()
	if err != nil {
		return nil, false, err
	}
	if data, ok := singleData(body); ok {
		// The usual body, one data section: its octets, read in place
		// (the message's bytes are never modified).
		return data, false, nil
	}
	rest := body
	for len(rest) > 0 {
		v, r, err := amqp10.ReadValue(rest)
		if err != nil {
			return nil, false, err
		}
		rest = r
		d, ok := v.(*value.Described)
		if code, isCode := d.Descriptor.(uint64); !ok || !isCode || code != amqp10.DescData {
			return append(append([]byte(nil), body...), w.Footer()...), true, nil
		}
		b, _ := d.Value.([]byte)
		payload = append(payload, b...)
	}
	if payload == nil {
		payload = []byte{}
	}
	return payload, false, nil
}

// singleData returns the octets of body when body is exactly one data
// section (descriptor 0x75, binary vbin8 or vbin32).
func singleData(body []byte) ([]byte, bool) {
	if len(body) < 5 || body[0] != 0x00 || body[1] != 0x53 || body[2] != byte(amqp10.DescData) {
		return nil, false
	}
	switch body[3] {
	case 0xa0:
		if n := int(body[4]); len(body) == 5+n {
			return body[5:], true
		}
	case 0xb0:
		if len(body) >= 8 {
			if n := uint64(body[4])<<24 | uint64(body[5])<<16 | uint64(body[6])<<8 | uint64(body[7]); uint64(len(body)-8) == n {
				return body[8:], true
			}
		}
	}
	return nil, false
}

// idTo091 sets a message or correlation id: a string under 256 octets, a
// ulong in decimal, a uuid as urn:uuid:; a binary id or a longer string
// goes into the header named header instead.
func idTo091(p *amqp091.Properties, flag uint16, dst *string, id any, header string, h amqp091.Table) amqp091.Table {
	switch x := id.(type) {
	case nil:
	case string:
		if len(x) < 256 {
			p.Flags |= flag
			*dst = x
		} else {
			h = append(h, amqp091.Field{Key: header, Value: x})
		}
	case uint64:
		p.Flags |= flag
		*dst = strconv.FormatUint(x, 10)
	case value.UUID:
		p.Flags |= flag
		s := hex.EncodeToString(x[:])
		*dst = "urn:uuid:" + s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
	case []byte:
		h = append(h, amqp091.Field{Key: header, Value: amqp091.Binary(x)})
	}
	return h
}

func validShortstr(s string) bool {
	return len(s) < 256 && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// unescapePath percent-decodes a /queues/ address segment.
func unescapePath(s string) (string, bool) {
	u, err := url.PathUnescape(s)
	return u, err == nil
}

// to091 converts an AMQP 1.0 value to a header value (mc_amqpl:to_091).
func to091(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case value.Symbol:
		return string(x), true
	case []byte:
		return string(x), true
	case uint64:
		return int64(x), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false
		}
		return x, true
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, false
		}
		return x, true
	case value.Timestamp:
		return amqp091.Timestamp(int64(x) / 1000), true
	case value.List:
		arr := make(amqp091.Array, 0, len(x))
		for _, e := range x {
			if c, ok := to091(e); ok {
				arr = append(arr, c)
			}
		}
		return arr, true
	case *value.Array:
		arr := make(amqp091.Array, 0, len(x.Elems))
		for _, e := range x.Elems {
			if c, ok := to091(e); ok {
				arr = append(arr, c)
			}
		}
		return arr, true
	case value.Map:
		t := make(amqp091.Table, 0, len(x))
		for _, kv := range x {
			k, ok := keyString(kv.Key)
			if !ok {
				continue
			}
			if c, ok := to091(kv.Value); ok {
				t = append(t, amqp091.Field{Key: k, Value: c})
			}
		}
		return t, true
	case nil, bool, int8, uint8, int16, uint16, int32, uint32, int64:
		return x, true
	}
	return nil, false
}

// quoteSegment percent-encodes every octet but the unreserved characters
// of RFC 3986, as Erlang's uri_string:quote/1 does.
func quoteSegment(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
