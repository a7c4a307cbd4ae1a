package filter

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

// ErrInvalid is wrapped by the errors of a filter that is refused: one of
// the filter-expression descriptors with a malformed value, or an SQL
// expression that does not parse or is beyond the limits.
var ErrInvalid = errors.New("invalid filter")

// Descriptors of the filters this package applies.
const (
	PropertiesFilterName            = value.Symbol("amqp:properties-filter")
	PropertiesFilterCode            = uint64(0x173)
	ApplicationPropertiesFilterName = value.Symbol("amqp:application-properties-filter")
	ApplicationPropertiesFilterCode = uint64(0x174)
	SQLFilterName                   = value.Symbol("amqp:sql-filter")
	SQLFilterCode                   = uint64(0x120)
)

// Set is the filters in force on one consumer: a message passes when it
// passes every one. It implements router.MessageFilter and is immutable.
type Set struct {
	props    []propertyFilter
	appProps []appPropertyFilter
	sql      []*Expr
}

var _ router.MessageFilter = (*Set)(nil)

// Parse reads an attach source's filter set within lim. It returns the entries it
// applies (for the attach reply's source: the filters in force, AMQP 1.0
// section 3.5.3) and the Set applying them, nil when there are none.
// Entries it does not apply (a JMS selector, stream filters, unknown
// descriptors) are left out of both. An entry with one of its descriptors
// whose value is malformed fails the whole set with an error wrapping
// ErrInvalid that names the entry.
func Parse(set value.Map, lim Limits) (inForce value.Map, f *Set, err error) {
	var s Set
	for _, kv := range set {
		d, ok := kv.Value.(*value.Described)
		if !ok || d == nil {
			continue
		}
		var applied bool
		switch {
		case isDescriptor(d.Descriptor, PropertiesFilterName, PropertiesFilterCode):
			var pf propertyFilter
			if pf, err = parseProperties(d.Value, lim.MaxFields); err == nil {
				s.props, applied = append(s.props, pf), true
			}
		case isDescriptor(d.Descriptor, ApplicationPropertiesFilterName, ApplicationPropertiesFilterCode):
			var af appPropertyFilter
			if af, err = parseAppProperties(d.Value, lim.MaxFields); err == nil {
				s.appProps, applied = append(s.appProps, af), true
			}
		case isDescriptor(d.Descriptor, SQLFilterName, SQLFilterCode):
			src, isString := d.Value.(string)
			if !isString {
				err = fmt.Errorf("the value is of type %s, not a string", typeName(d.Value))
				break
			}
			var e *Expr
			if e, err = ParseSQLWithin(src, lim); err == nil {
				s.sql, applied = append(s.sql, e), true
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w %q (%s): %w", ErrInvalid, fmt.Sprint(kv.Key), descriptorName(d.Descriptor), err)
		}
		if applied {
			inForce = append(inForce, kv)
		}
	}
	if len(inForce) == 0 {
		return nil, nil, nil
	}
	return inForce, &s, nil
}

func isDescriptor(d any, name value.Symbol, code uint64) bool {
	switch x := d.(type) {
	case value.Symbol:
		return x == name
	case uint64:
		return x == code
	}
	return false
}

func descriptorName(d any) string {
	switch {
	case isDescriptor(d, PropertiesFilterName, PropertiesFilterCode):
		return string(PropertiesFilterName)
	case isDescriptor(d, ApplicationPropertiesFilterName, ApplicationPropertiesFilterCode):
		return string(ApplicationPropertiesFilterName)
	}
	return string(SQLFilterName)
}

// typeName is the AMQP type name of a decoded value, for errors.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case uint8:
		return "ubyte"
	case uint16:
		return "ushort"
	case uint32:
		return "uint"
	case uint64:
		return "ulong"
	case int8:
		return "byte"
	case int16:
		return "short"
	case int32:
		return "int"
	case int64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case value.Timestamp:
		return "timestamp"
	case value.UUID:
		return "uuid"
	case []byte:
		return "binary"
	case string:
		return "string"
	case value.Symbol:
		return "symbol"
	case value.List:
		return "list"
	case value.Map:
		return "map"
	case *value.Array:
		return "array"
	case *value.Described:
		return "described value"
	}
	return fmt.Sprintf("%T", v)
}

// Match implements router.MessageFilter.
func (s *Set) Match(m *router.Message, anns value.Map) bool {
	var v msgView
	v.init(m, anns)
	for i := range s.props {
		if !s.props[i].match(&v) {
			return false
		}
	}
	for i := range s.appProps {
		if !s.appProps[i].match(&v) {
			return false
		}
	}
	for _, e := range s.sql {
		if !e.match(&v) {
			return false
		}
	}
	return true
}

// ---- property filters ----

// reference is a property filter's reference value.
type reference struct {
	v        val
	any      bool // null: any value matches
	affix    byte // 'p' prefix, 's' suffix, 0 the whole value
	affixLit []byte
}

func (r *reference) matches(x val) bool {
	switch {
	case r.any:
		return true
	case r.affix == 'p':
		return (x.k == kString || x.k == kBinary) && bytes.HasPrefix(x.b, r.affixLit)
	case r.affix == 's':
		return (x.k == kString || x.k == kBinary) && bytes.HasSuffix(x.b, r.affixLit)
	}
	return equal(r.v, x)
}

// stringReference reads a string reference value with its modifier:
// "&p:" prefix, "&s:" suffix, "&&" a literal "&"; another "&" is refused.
func stringReference(s string) (reference, error) {
	switch {
	case len(s) >= 3 && s[:3] == "&p:":
		return reference{affix: 'p', affixLit: []byte(s[3:])}, nil
	case len(s) >= 3 && s[:3] == "&s:":
		return reference{affix: 's', affixLit: []byte(s[3:])}, nil
	case len(s) >= 2 && s[:2] == "&&":
		return reference{v: val{k: kString, b: []byte(s[1:])}}, nil
	case len(s) >= 1 && s[0] == '&':
		return reference{}, fmt.Errorf("reference value %q: unknown modifier (&p:, &s: or && expected)", s)
	}
	return reference{v: val{k: kString, b: []byte(s)}}, nil
}

type propertyFilter struct {
	fields []router.PropertyField
	refs   []reference
}

func (f *propertyFilter) match(v *msgView) bool {
	for i, p := range f.fields {
		x := v.property(p)
		if x.k == kNull || !f.refs[i].matches(x) {
			return false
		}
	}
	return true
}

// propertyFilterFields are the fields a properties filter names, with the
// reference value types accepted (as RabbitMQ 4.3's parser).
var propertyFilterFields = map[value.Symbol]router.PropertyField{
	"message-id": router.PropMessageID, "user-id": router.PropUserID, "to": router.PropTo,
	"subject": router.PropSubject, "reply-to": router.PropReplyTo, "correlation-id": router.PropCorrelationID,
	"content-type": router.PropContentType, "content-encoding": router.PropContentEncoding,
	"absolute-expiry-time": router.PropAbsoluteExpiryTime, "creation-time": router.PropCreationTime,
	"group-id": router.PropGroupID, "group-sequence": router.PropGroupSequence,
	"reply-to-group-id": router.PropReplyToGroupID,
}

func parseProperties(v any, maxFields int) (propertyFilter, error) {
	m, ok := v.(value.Map)
	if !ok {
		return propertyFilter{}, fmt.Errorf("the value is of type %s, not a map", typeName(v))
	}
	if len(m) == 0 || len(m) > maxFields {
		return propertyFilter{}, fmt.Errorf("%d fields: 1 to %d allowed", len(m), maxFields)
	}
	var f propertyFilter
	for _, kv := range m {
		k, ok := kv.Key.(value.Symbol)
		if !ok {
			return f, fmt.Errorf("key %v is not a symbol", kv.Key)
		}
		p, ok := propertyFilterFields[k]
		if !ok {
			return f, fmt.Errorf("unknown property %q", k)
		}
		ref, err := propertyReference(p, kv.Value)
		if err != nil {
			return f, fmt.Errorf("property %q: %w", k, err)
		}
		f.fields, f.refs = append(f.fields, p), append(f.refs, ref)
	}
	return f, nil
}

func propertyReference(p router.PropertyField, v any) (reference, error) {
	switch p {
	case router.PropMessageID, router.PropCorrelationID:
		switch x := v.(type) {
		case uint64, value.UUID, []byte:
			return reference{v: fromAny(x)}, nil
		case string:
			return stringReference(x)
		}
	case router.PropUserID:
		if x, ok := v.([]byte); ok {
			return reference{v: fromAny(x)}, nil
		}
	case router.PropTo, router.PropSubject, router.PropReplyTo, router.PropGroupID, router.PropReplyToGroupID:
		if x, ok := v.(string); ok {
			return stringReference(x)
		}
	case router.PropContentType, router.PropContentEncoding:
		if x, ok := v.(value.Symbol); ok {
			return reference{v: fromAny(x)}, nil
		}
	case router.PropAbsoluteExpiryTime, router.PropCreationTime:
		if x, ok := v.(value.Timestamp); ok {
			return reference{v: fromAny(x)}, nil
		}
	case router.PropGroupSequence:
		if x, ok := v.(uint32); ok {
			return reference{v: fromAny(x)}, nil
		}
	}
	return reference{}, fmt.Errorf("reference value of type %s not allowed", typeName(v))
}

type appPropertyFilter struct {
	keys []string
	refs []reference
}

func (f *appPropertyFilter) match(v *msgView) bool {
	for i, k := range f.keys {
		x, present := v.applicationPropertyPresent(k)
		if !present || !f.refs[i].matches(x) {
			return false
		}
	}
	return true
}

func parseAppProperties(v any, maxFields int) (appPropertyFilter, error) {
	m, ok := v.(value.Map)
	if !ok {
		return appPropertyFilter{}, fmt.Errorf("the value is of type %s, not a map", typeName(v))
	}
	if len(m) == 0 || len(m) > maxFields {
		return appPropertyFilter{}, fmt.Errorf("%d fields: 1 to %d allowed", len(m), maxFields)
	}
	var f appPropertyFilter
	for _, kv := range m {
		k, ok := kv.Key.(string)
		if !ok {
			return f, fmt.Errorf("key %v is not a string", kv.Key)
		}
		var ref reference
		switch x := kv.Value.(type) {
		case nil:
			ref.any = true
		case string:
			var err error
			if ref, err = stringReference(x); err != nil {
				return f, fmt.Errorf("key %q: %w", k, err)
			}
		default:
			ref.v = fromAny(x)
			if ref.v.k == kOther {
				return f, fmt.Errorf("key %q: reference value of type %s is not a simple value", k, typeName(x))
			}
		}
		f.keys, f.refs = append(f.keys, k), append(f.refs, ref)
	}
	return f, nil
}
