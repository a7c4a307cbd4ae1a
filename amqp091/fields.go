package amqp091

import (
	"encoding/binary"
	"fmt"
	"math"
)

// MaxDepth bounds the nesting of field tables and arrays the decoder
// accepts (RabbitMQ has no limit; its parser recurses on the Erlang heap).
const MaxDepth = 64

// Table is a field table (section 4.2.5.5) in wire order. Duplicate keys
// are kept, as RabbitMQ's parser keeps them; sorting and deduplication are
// conversion steps, not decoding.
//
// Values are plain Go types, one per field-value type octet of
// RabbitMQ's set (rabbit_binary_parser, rabbit_binary_generator):
//
//	t  boolean         bool (any non-zero octet is true)
//	b  short-short-int int8
//	B  short-short-uint uint8
//	s  short-int       int16
//	u  short-uint      uint16
//	I  long-int        int32
//	i  long-uint       uint32
//	l  long-long-int   int64
//	L  long-long-uint  int64 (RabbitMQ decodes both l and L as signed; the encoder writes l)
//	f  float           float32
//	d  double          float64
//	D  decimal         Decimal
//	S  long-string     string (may hold any octets; RabbitMQ's longstr)
//	x  byte array      Binary
//	T  timestamp       Timestamp (seconds)
//	F  field table     Table
//	A  field array     Array
//	V  void            nil
//
// A decoded table's keys and string values are substrings of one copy of
// the table's octets, so they outlive the frame buffer and cost one
// allocation together.
//
// The protocol-neutral value model maps these one to one: signed and
// unsigned integers by width, float and double, decimal, utf8-or-binary
// long strings, binary, timestamp (seconds here, milliseconds in AMQP 1.0),
// map with string keys, list, and null.
type Table []Field

// Field is one entry of a Table.
type Field struct {
	Key   string
	Value any
}

// Array is a field array: values without names.
type Array []any

// Decimal is a decimal value: Value scaled down by Scale decimal places.
type Decimal struct {
	Scale uint8
	Value uint32
}

// Binary is a byte array value ('x').
type Binary []byte

// Timestamp is a timestamp value ('T'): POSIX seconds.
type Timestamp uint64

// Get returns the value of the first field named key.
func (t Table) Get(key string) (any, bool) {
	for _, f := range t {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// ParseTable decodes the octets of a field table without its length
// prefix (the content of an 'F' value, or AMQPLAIN's response).
func ParseTable(b []byte) (Table, error) {
	t, err := parseTable(b, 0)
	if err != nil {
		return nil, frameErr(err, "cannot decode field table")
	}
	return t, nil
}

// parseTable copies the table's octets into one string, once, and decodes
// from that: every key and string value is a substring of it, so a table
// costs one allocation for all its text instead of one per string, and
// stays valid after the frame buffer is reused.
func parseTable(b []byte, depth int) (Table, error) {
	return parseTableString(string(b), depth)
}

func parseTableString(s string, depth int) (Table, error) {
	if depth >= MaxDepth {
		return nil, fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
	}
	t := Table{}
	for len(s) > 0 {
		n := int(s[0])
		if 1+n >= len(s) {
			return nil, fmt.Errorf("%w: table field name and type", ErrTruncated)
		}
		key := s[1 : 1+n]
		v, rest, err := parseValue(s[1+n:], depth)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
		t = append(t, Field{Key: key, Value: v})
		s = rest
	}
	return t, nil
}

func parseArray(s string, depth int) (Array, error) {
	if depth >= MaxDepth {
		return nil, fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
	}
	a := Array{}
	for len(s) > 0 {
		v, rest, err := parseValue(s, depth)
		if err != nil {
			return nil, fmt.Errorf("array element %d: %w", len(a), err)
		}
		a = append(a, v)
		s = rest
	}
	return a, nil
}

// fixedSize is the value size of each fixed-width type octet; -1 marks
// the types with a long length prefix, 0 (but for 'V') unknown types.
var fixedSize = [256]int8{
	't': 1, 'b': 1, 'B': 1, 's': 2, 'u': 2, 'I': 4, 'i': 4,
	'l': 8, 'L': 8, 'f': 4, 'd': 8, 'D': 5, 'T': 8, 'V': 0,
	'S': -1, 'x': -1, 'F': -1, 'A': -1,
}

// Big-endian reads from a string (encoding/binary reads only slices).
func be16(s string) uint16 { return uint16(s[0])<<8 | uint16(s[1]) }
func be32(s string) uint32 { return uint32(be16(s))<<16 | uint32(be16(s[2:])) }
func be64(s string) uint64 { return uint64(be32(s))<<32 | uint64(be32(s[4:])) }

// parseValue decodes one type octet and its value; depth is the nesting of
// the table or array holding it.
func parseValue(s string, depth int) (any, string, error) {
	if len(s) == 0 {
		return nil, "", fmt.Errorf("%w: field type", ErrTruncated)
	}
	typ, s := s[0], s[1:]
	size := int(fixedSize[typ])
	if size == 0 && typ != 'V' {
		return nil, "", fmt.Errorf("%w: %q", ErrInvalidType, typ)
	}
	if size < 0 {
		if len(s) < 4 {
			return nil, "", fmt.Errorf("%w: length of %q", ErrTruncated, typ)
		}
		n := be32(s)
		s = s[4:]
		if uint64(n) > uint64(len(s)) {
			return nil, "", fmt.Errorf("%w: %q of %d octets, %d left", ErrTruncated, typ, n, len(s))
		}
		v, rest := s[:n], s[n:]
		switch typ {
		case 'S':
			return v, rest, nil
		case 'x':
			return Binary(v), rest, nil
		case 'F':
			t, err := parseTableString(v, depth+1)
			return t, rest, err
		default: // 'A'
			a, err := parseArray(v, depth+1)
			return a, rest, err
		}
	}
	if len(s) < size {
		return nil, "", fmt.Errorf("%w: %q needs %d octets", ErrTruncated, typ, size)
	}
	v, rest := s[:size], s[size:]
	switch typ {
	case 't':
		return v[0] != 0, rest, nil
	case 'b':
		return int8(v[0]), rest, nil
	case 'B':
		return v[0], rest, nil
	case 's':
		return int16(be16(v)), rest, nil
	case 'u':
		return be16(v), rest, nil
	case 'I':
		return int32(be32(v)), rest, nil
	case 'i':
		return be32(v), rest, nil
	case 'l', 'L':
		return int64(be64(v)), rest, nil
	case 'f':
		return math.Float32frombits(be32(v)), rest, nil
	case 'd':
		return math.Float64frombits(be64(v)), rest, nil
	case 'D':
		return Decimal{Scale: v[0], Value: be32(v[1:])}, rest, nil
	case 'T':
		return Timestamp(be64(v)), rest, nil
	}
	return nil, rest, nil // 'V'
}

// AppendTable appends t as a field table with its long length prefix
// (backpatched). It allocates nothing when b has capacity.
func AppendTable(b []byte, t Table) ([]byte, error) {
	return appendTable(b, t, 0)
}

func appendTable(b []byte, t Table, depth int) ([]byte, error) {
	if depth >= MaxDepth {
		return b, fmt.Errorf("%w: %w: more than %d levels", ErrEncode, ErrTooDeep, MaxDepth)
	}
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	for i := range t {
		f := &t[i]
		if len(f.Key) > 255 {
			return b[:start], shortstrErr("table key", len(f.Key))
		}
		b = appendShortstr(b, f.Key)
		var err error
		if b, err = appendValue(b, f.Value, depth); err != nil {
			return b[:start], fmt.Errorf("field %q: %w", f.Key, err)
		}
	}
	return backpatch(b, start)
}

// AppendArray appends a as a field array with its long length prefix.
func AppendArray(b []byte, a Array) ([]byte, error) {
	return appendArray(b, a, 0)
}

func appendArray(b []byte, a Array, depth int) ([]byte, error) {
	if depth >= MaxDepth {
		return b, fmt.Errorf("%w: %w: more than %d levels", ErrEncode, ErrTooDeep, MaxDepth)
	}
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	for i, v := range a {
		var err error
		if b, err = appendValue(b, v, depth); err != nil {
			return b[:start], fmt.Errorf("array element %d: %w", i, err)
		}
	}
	return backpatch(b, start)
}

func backpatch(b []byte, start int) ([]byte, error) {
	n := len(b) - start - 4
	if uint64(n) > math.MaxUint32 {
		return b[:start], fmt.Errorf("%w: %d octets exceed a long length", ErrEncode, n)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	return b, nil
}

// AppendValue appends one field value: its type octet, then the value.
// The Go types are those Table's documentation lists; int and []byte are
// accepted too, as 'l' and 'x'.
func AppendValue(b []byte, v any) ([]byte, error) {
	return appendValue(b, v, 0)
}

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, 'V'), nil
	case bool:
		return append(b, 't', flag(v, 0)), nil
	case int8:
		return append(b, 'b', byte(v)), nil
	case uint8:
		return append(b, 'B', v), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(b, 's'), uint16(v)), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, 'u'), v), nil
	case int32:
		return binary.BigEndian.AppendUint32(append(b, 'I'), uint32(v)), nil
	case uint32:
		return binary.BigEndian.AppendUint32(append(b, 'i'), v), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(b, 'l'), uint64(v)), nil
	case int:
		return binary.BigEndian.AppendUint64(append(b, 'l'), uint64(v)), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(b, 'f'), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return binary.BigEndian.AppendUint32(append(b, 'D', v.Scale), v.Value), nil
	case string:
		return appendLongstr(append(b, 'S'), v), nil
	case Binary:
		return appendBytesLongstr(append(b, 'x'), v), nil
	case []byte:
		return appendBytesLongstr(append(b, 'x'), v), nil
	case Timestamp:
		return binary.BigEndian.AppendUint64(append(b, 'T'), uint64(v)), nil
	case Table:
		return appendTable(append(b, 'F'), v, depth+1)
	case Array:
		return appendArray(append(b, 'A'), v, depth+1)
	}
	return b, fmt.Errorf("%w: field value of type %T", ErrEncode, v)
}

func appendBytesLongstr(b, v []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(v))), v...)
}
