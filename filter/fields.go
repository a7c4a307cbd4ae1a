package filter

import (
	"fmt"

	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

type section uint8

const (
	secApplication section = iota
	secHeader
	secProperties
	secAnnotations
	secDeaths // epitaph: the most recent entry of x-opt-deaths
)

// fieldRef names a field of a message.
type fieldRef struct {
	section section
	key     string               // application property or annotation key
	prop    router.PropertyField // secProperties
	field   uint8                // secHeader, secDeaths: which one
}

// Header fields.
const (
	hdrPriority uint8 = iota
	hdrDurable
)

// Fields of an x-opt-deaths entry.
const (
	deathQueue uint8 = iota
	deathReason
	deathCount
	deathExchange
	deathFirstTime
	deathLastTime
	deathTTL
)

var propertyNames = map[string]router.PropertyField{
	"message_id": router.PropMessageID, "user_id": router.PropUserID, "to": router.PropTo,
	"subject": router.PropSubject, "reply_to": router.PropReplyTo,
	"correlation_id": router.PropCorrelationID, "content_type": router.PropContentType,
	"content_encoding": router.PropContentEncoding, "absolute_expiry_time": router.PropAbsoluteExpiryTime,
	"creation_time": router.PropCreationTime, "group_id": router.PropGroupID,
	"group_sequence": router.PropGroupSequence, "reply_to_group_id": router.PropReplyToGroupID,
}

var deathFields = map[string]uint8{
	"queue": deathQueue, "reason": deathReason, "count": deathCount, "exchange": deathExchange,
	"first_time": deathFirstTime, "last_time": deathLastTime, "ttl": deathTTL,
}

// sectionField resolves SECTION.FIELD.
func sectionField(sec, field string, delimited bool) (fieldRef, error) {
	switch sec {
	case "application_properties", "a":
		return fieldRef{section: secApplication, key: field}, nil
	case "message_annotations", "m":
		return fieldRef{section: secAnnotations, key: field}, nil
	case "header", "h":
		switch field {
		case "priority":
			return fieldRef{section: secHeader, field: hdrPriority}, nil
		case "durable":
			return fieldRef{section: secHeader, field: hdrDurable}, nil
		}
	case "properties", "p":
		if p, ok := propertyNames[field]; ok {
			return fieldRef{section: secProperties, prop: p}, nil
		}
	case "x-opt-deaths":
		if f, ok := deathFields[field]; ok {
			return fieldRef{section: secDeaths, field: f}, nil
		}
	case "delivery_annotations", "d", "footer", "f":
		return fieldRef{}, fmt.Errorf("section %q is not supported", sec)
	default:
		return fieldRef{}, fmt.Errorf("unknown section %q", sec)
	}
	return fieldRef{}, fmt.Errorf("unknown field %q of section %q", field, sec)
}

// kind is the type of a value during evaluation.
type kind uint8

const (
	kNull kind = iota // NULL: absent, null, or unknown
	kBool
	kInt
	kFloat
	kString
	kBinary
	kOther // present but not a simple value (a list, a map, a decimal)
)

// val is a value during evaluation. b aliases the message or the
// expression; it is never modified.
type val struct {
	k kind
	i int64 // kInt; kBool: 1 true
	f float64
	b []byte
}

var (
	valNull  = val{}
	valTrue  = val{k: kBool, i: 1}
	valFalse = val{k: kBool}
)

func boolVal(b bool) val {
	if b {
		return valTrue
	}
	return valFalse
}

// fromScalar converts a field read in place.
func fromScalar(s value.Scalar) val {
	switch s.Kind {
	case value.KindBool:
		return val{k: kBool, i: s.Int}
	case value.KindInt, value.KindTimestamp:
		return val{k: kInt, i: s.Int}
	case value.KindUint:
		if s.Uint > 1<<63-1 {
			return val{k: kFloat, f: float64(s.Uint)}
		}
		return val{k: kInt, i: int64(s.Uint)}
	case value.KindFloat:
		return val{k: kFloat, f: s.Float}
	case value.KindString, value.KindSymbol:
		return val{k: kString, b: s.Bytes}
	case value.KindBinary, value.KindUUID:
		return val{k: kBinary, b: s.Bytes}
	case value.KindAbsent, value.KindNull:
		return valNull
	}
	return val{k: kOther}
}

// fromAny converts a decoded value (a broker annotation, a reference value
// of a property filter, the fallback for containers that read no single
// fields). Strings are shared, not copied.
func fromAny(v any) val {
	switch x := v.(type) {
	case nil:
		return valNull
	case bool:
		return boolVal(x)
	case int8:
		return val{k: kInt, i: int64(x)}
	case int16:
		return val{k: kInt, i: int64(x)}
	case int32:
		return val{k: kInt, i: int64(x)}
	case int64:
		return val{k: kInt, i: x}
	case int:
		return val{k: kInt, i: int64(x)}
	case uint8:
		return val{k: kInt, i: int64(x)}
	case uint16:
		return val{k: kInt, i: int64(x)}
	case uint32:
		return val{k: kInt, i: int64(x)}
	case uint64:
		return fromScalar(value.Scalar{Kind: value.KindUint, Uint: x})
	case value.Timestamp:
		return val{k: kInt, i: int64(x)}
	case float32:
		return val{k: kFloat, f: float64(x)}
	case float64:
		return val{k: kFloat, f: x}
	case string:
		return stringVal(x)
	case value.Symbol:
		return stringVal(string(x))
	case []byte:
		return val{k: kBinary, b: x}
	case value.UUID:
		return val{k: kBinary, b: x[:]}
	}
	return val{k: kOther}
}

// msgView reads the fields of one message for one evaluation.
type msgView struct {
	m    *router.Message
	anns value.Map
	fr   router.FieldReader // nil: the container reads no single fields
	// hist is the dead-letter history, looked up once.
	hist     *annotations.History
	histDone bool
	// Decoded sections, for containers without a FieldReader.
	props     router.Properties
	appProps  value.Map
	xHeaders  value.Map
	decoded   bool
	nowMillis int64
}

func (v *msgView) init(m *router.Message, anns value.Map) {
	*v = msgView{m: m, anns: anns}
	if m.Container != nil {
		v.fr, _ = m.Container.(router.FieldReader)
	}
}

func (v *msgView) history() *annotations.History {
	if !v.histDone {
		v.hist, _ = annotations.HistoryOf(v.anns)
		v.histDone = true
	}
	return v.hist
}

// decode reads whole sections, for a container that reads no single field.
func (v *msgView) decode() {
	if v.decoded || v.m.Container == nil {
		return
	}
	v.decoded = true
	v.props, _ = v.m.Container.Properties()
	v.appProps, _ = v.m.Container.RoutingHeaders()
	v.xHeaders, _ = v.m.Container.XHeaders()
}

// field returns the value of ref; a field that cannot be read (a malformed
// section) is NULL.
func (v *msgView) field(ref *fieldRef) val {
	switch ref.section {
	case secApplication:
		return v.applicationProperty(ref.key)
	case secProperties:
		return v.property(ref.prop)
	case secHeader:
		if ref.field == hdrPriority {
			return val{k: kInt, i: int64(v.m.Header.Priority)}
		}
		return boolVal(v.m.Header.Durable)
	case secAnnotations:
		return v.annotation(ref.key)
	case secDeaths:
		return v.death(ref.field)
	}
	return valNull
}

func (v *msgView) applicationProperty(key string) val {
	x, _ := v.applicationPropertyPresent(key)
	return x
}

// applicationPropertyPresent is applicationProperty, and whether the key is
// there at all (a null value is there).
func (v *msgView) applicationPropertyPresent(key string) (val, bool) {
	if v.fr != nil {
		s, err := v.fr.ApplicationProperty(key)
		if err != nil {
			return valNull, false
		}
		return fromScalar(s), s.Kind != value.KindAbsent
	}
	v.decode()
	for _, kv := range v.appProps {
		if k, ok := kv.Key.(string); ok && k == key {
			return fromAny(kv.Value), true
		}
	}
	return valNull, false
}

func (v *msgView) property(p router.PropertyField) val {
	if v.fr != nil {
		s, err := v.fr.Property(p)
		if err != nil {
			return valNull
		}
		return fromScalar(s)
	}
	v.decode()
	pr := &v.props
	switch p {
	case router.PropMessageID:
		return fromAny(pr.MessageID)
	case router.PropCorrelationID:
		return fromAny(pr.CorrelationID)
	case router.PropUserID:
		if pr.UserID != nil {
			return val{k: kBinary, b: pr.UserID}
		}
	case router.PropReplyTo:
		if pr.ReplyTo != "" {
			return fromAny(pr.ReplyTo)
		}
	case router.PropContentType:
		if pr.ContentType != "" {
			return fromAny(pr.ContentType)
		}
	case router.PropContentEncoding:
		if pr.ContentEncoding != "" {
			return fromAny(pr.ContentEncoding)
		}
	}
	return valNull
}

// annotation is the message annotation key as a consumer receives it: the
// dead-letter history's, the broker's, x-exchange and x-routing-key, then
// the publisher's.
func (v *msgView) annotation(key string) val {
	if h := v.history(); h != nil && annotations.IsDeathKey(value.Symbol(key)) {
		switch value.Symbol(key) {
		case annotations.KeyDeaths:
			return val{k: kOther}
		case annotations.KeyFirstDeathQueue:
			return stringVal(h.First.Queue)
		case annotations.KeyFirstDeathReason:
			return stringVal(h.First.Reason)
		case annotations.KeyFirstDeathExchange:
			return stringVal(h.First.Exchange)
		case annotations.KeyLastDeathQueue:
			return stringVal(h.Last.Queue)
		case annotations.KeyLastDeathReason:
			return stringVal(h.Last.Reason)
		case annotations.KeyLastDeathExchange:
			return stringVal(h.Last.Exchange)
		case annotations.KeyLastDeathErrorCond:
			if h.LastError != nil {
				return stringVal(h.LastError.Condition)
			}
		case annotations.KeyLastDeathErrorDescr:
			if h.LastError != nil {
				return stringVal(h.LastError.Description)
			}
		}
		return valNull
	}
	for _, kv := range v.anns {
		switch k := kv.Key.(type) {
		case value.Symbol:
			if string(k) == key {
				return fromAny(kv.Value)
			}
		case string:
			if k == key {
				return fromAny(kv.Value)
			}
		}
	}
	switch key {
	case "x-exchange":
		return stringVal(v.m.Exchange)
	case "x-routing-key":
		if len(v.m.RoutingKeys) > 0 {
			return stringVal(v.m.RoutingKeys[0])
		}
		return stringVal("")
	}
	if v.fr != nil {
		s, err := v.fr.Annotation(key)
		if err != nil {
			return valNull
		}
		return fromScalar(s)
	}
	v.decode()
	for _, kv := range v.xHeaders {
		if k, ok := kv.Key.(value.Symbol); ok && string(k) == key {
			return fromAny(kv.Value)
		}
	}
	return valNull
}

// death reads the most recent entry of the dead-letter history.
func (v *msgView) death(f uint8) val {
	h := v.history()
	if h == nil || len(h.Deaths) == 0 {
		return valNull
	}
	d := &h.Deaths[0]
	switch f {
	case deathQueue:
		return stringVal(d.Queue)
	case deathReason:
		return stringVal(d.Reason)
	case deathCount:
		return fromAny(d.Count)
	case deathExchange:
		return stringVal(d.Exchange)
	case deathFirstTime:
		return val{k: kInt, i: int64(d.FirstTime)}
	case deathLastTime:
		return val{k: kInt, i: int64(d.LastTime)}
	case deathTTL:
		if d.HasTTL {
			return val{k: kInt, i: int64(d.TTL)}
		}
	}
	return valNull
}

// stringVal is s as a value without copying it: the bytes are only read.
func stringVal(s string) val {
	return val{k: kString, b: unsafeBytes(s)}
}
