package amqp10

import (
	"encoding/binary"
	"fmt"
	"math"
)

// validCtor reports whether c is a primitive constructor of the type system.
func validCtor(c byte) bool {
	switch c {
	case 0x40, 0x41, 0x42, 0x43, 0x44, 0x45,
		0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56,
		0x60, 0x61,
		0x70, 0x71, 0x72, 0x73, 0x74,
		0x80, 0x81, 0x82, 0x83, 0x84,
		0x94, 0x98,
		0xa0, 0xa1, 0xa3, 0xb0, 0xb1, 0xb3,
		0xc0, 0xc1, 0xd0, 0xd1, 0xe0, 0xf0:
		return true
	}
	return false
}

// fixedWidth returns the width of the data of a fixed-width constructor,
// or -1 for variable-width and compound constructors.
func fixedWidth(c byte) int {
	switch c >> 4 {
	case 0x4:
		return 0
	case 0x5:
		return 1
	case 0x6:
		return 2
	case 0x7:
		return 4
	case 0x8:
		return 8
	case 0x9:
		return 16
	}
	return -1
}

func errTrunc(what string) error { return fmt.Errorf("%w: %s", ErrTruncated, what) }

func errCtor(c byte) error { return fmt.Errorf("%w: constructor 0x%02x", ErrInvalidType, c) }

func errWrongType(want string, c byte) error {
	return fmt.Errorf("%w: want %s, got constructor 0x%02x", ErrInvalidField, want, c)
}

// decoder carries the nesting depth and the element budget of one decode.
// The budget bounds the number of compound elements (including zero-width
// array elements) to roughly the input size, so a peer cannot make the
// decoder allocate out of proportion to the bytes it sent.
type decoder struct {
	depth  int
	budget int
}

func newDecoder(b []byte) decoder { return decoder{budget: len(b) + budgetSlack} }

// budgetSlack is the number of elements a decode may hold beyond one per
// input byte (arrays of zero-width elements such as null or true).
const budgetSlack = 1024

// errElementBudget is returned when a value holds more elements than its
// input size allows.
var errElementBudget = fmt.Errorf("%w: element count out of proportion to the input", ErrInvalidField)

func (d *decoder) enter() error {
	d.depth++
	if d.depth > MaxDepth {
		return fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
	}
	return nil
}

func (d *decoder) leave() { d.depth-- }

func (d *decoder) spend(n int) error {
	d.budget -= n
	if d.budget < 0 {
		return errElementBudget
	}
	return nil
}

// ReadValue decodes one value of any type (see types.go for the Go types).
// Nesting is limited to MaxDepth, element counts are checked against the
// bytes actually present before anything is allocated. Described values are
// returned as *Described.
func ReadValue(b []byte) (v any, rest []byte, err error) {
	d := newDecoder(b)
	return d.value(b)
}

func (d *decoder) value(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, b, errTrunc("constructor")
	}
	c := b[0]
	if c != TypeDescribed {
		return d.body(c, b[1:])
	}
	if err := d.enter(); err != nil {
		return nil, b, err
	}
	defer d.leave()
	desc, rest, err := d.value(b[1:])
	if err != nil {
		return nil, b, err
	}
	val, rest, err := d.value(rest)
	if err != nil {
		return nil, b, err
	}
	return &Described{Descriptor: desc, Value: val}, rest, nil
}

// compoundHeader parses the size and count of a list, map or array whose
// constructor c has been consumed. body is the encoded elements (for
// arrays, starting with the element constructor).
func compoundHeader(c byte, b []byte) (count int, body, rest []byte, err error) {
	var size, n uint64
	switch c {
	case TypeList8, TypeMap8, TypeArray8:
		if len(b) < 2 {
			return 0, nil, b, errTrunc("compound header")
		}
		size, n = uint64(b[0]), uint64(b[1])
		if size < 1 {
			return 0, nil, b, fmt.Errorf("%w: compound size %d", ErrInvalidField, size)
		}
		if uint64(len(b)-1) < size {
			return 0, nil, b, errTrunc("compound")
		}
		body, rest = b[2:1+size], b[1+size:]
	default: // 32-bit forms
		if len(b) < 8 {
			return 0, nil, b, errTrunc("compound header")
		}
		size, n = uint64(binary.BigEndian.Uint32(b)), uint64(binary.BigEndian.Uint32(b[4:]))
		if size < 4 {
			return 0, nil, b, fmt.Errorf("%w: compound size %d", ErrInvalidField, size)
		}
		if uint64(len(b)-4) < size {
			return 0, nil, b, errTrunc("compound")
		}
		body, rest = b[8:4+size], b[4+size:]
	}
	if (c == TypeMap8 || c == TypeMap32) && n%2 != 0 {
		return 0, nil, b, fmt.Errorf("%w: map with odd element count %d", ErrInvalidField, n)
	}
	if c != TypeArray8 && c != TypeArray32 && n > uint64(len(body)) {
		return 0, nil, b, fmt.Errorf("%w: %d elements claimed in %d bytes", ErrTruncated, n, len(body))
	}
	if n > math.MaxInt32 {
		return 0, nil, b, fmt.Errorf("%w: %d elements", ErrTruncated, n)
	}
	return int(n), body, rest, nil
}

// body decodes the data of a value whose constructor c has been consumed.
func (d *decoder) body(c byte, b []byte) (any, []byte, error) {
	be := binary.BigEndian
	if w := fixedWidth(c); w >= 0 {
		if !validCtor(c) {
			return nil, b, errCtor(c)
		}
		if len(b) < w {
			return nil, b, errTrunc("fixed-width value")
		}
		v, rest := b[:w], b[w:]
		switch c {
		case TypeNull:
			return nil, rest, nil
		case TypeTrue:
			return true, rest, nil
		case TypeFalse:
			return false, rest, nil
		case TypeUint0:
			return uint32(0), rest, nil
		case TypeULong0:
			return uint64(0), rest, nil
		case TypeList0:
			return List{}, rest, nil
		case TypeBoolean:
			if v[0] > 1 {
				return nil, b, fmt.Errorf("%w: boolean 0x%02x", ErrInvalidField, v[0])
			}
			return v[0] == 1, rest, nil
		case TypeUbyte:
			return v[0], rest, nil
		case TypeByte:
			return int8(v[0]), rest, nil
		case TypeSmallUint:
			return uint32(v[0]), rest, nil
		case TypeSmallULong:
			return uint64(v[0]), rest, nil
		case TypeSmallInt:
			return int32(int8(v[0])), rest, nil
		case TypeSmallLong:
			return int64(int8(v[0])), rest, nil
		case TypeUshort:
			return be.Uint16(v), rest, nil
		case TypeShort:
			return int16(be.Uint16(v)), rest, nil
		case TypeUint:
			return be.Uint32(v), rest, nil
		case TypeInt:
			return int32(be.Uint32(v)), rest, nil
		case TypeFloat:
			return math.Float32frombits(be.Uint32(v)), rest, nil
		case TypeChar:
			return Char(be.Uint32(v)), rest, nil
		case TypeDecimal32:
			return Decimal32(v), rest, nil
		case TypeULong:
			return be.Uint64(v), rest, nil
		case TypeLong:
			return int64(be.Uint64(v)), rest, nil
		case TypeDouble:
			return math.Float64frombits(be.Uint64(v)), rest, nil
		case TypeTimestamp:
			return Timestamp(be.Uint64(v)), rest, nil
		case TypeDecimal64:
			return Decimal64(v), rest, nil
		case TypeDecimal128:
			return Decimal128(v), rest, nil
		case TypeUUID:
			return UUID(v), rest, nil
		}
		return nil, b, errCtor(c)
	}
	switch c {
	case TypeBinary8, TypeStr8, TypeSym8, TypeBinary32, TypeStr32, TypeSym32:
		v, rest, err := varBody(c, b)
		if err != nil {
			return nil, b, err
		}
		switch c {
		case TypeBinary8, TypeBinary32:
			return v, rest, nil
		case TypeStr8, TypeStr32:
			return string(v), rest, nil
		}
		return Symbol(v), rest, nil
	case TypeList8, TypeList32:
		n, body, rest, err := compoundHeader(c, b)
		if err != nil {
			return nil, b, err
		}
		l, err := d.list(n, body)
		if err != nil {
			return nil, b, err
		}
		return l, rest, nil
	case TypeMap8, TypeMap32:
		n, body, rest, err := compoundHeader(c, b)
		if err != nil {
			return nil, b, err
		}
		m, err := d.mapBody(n, body)
		if err != nil {
			return nil, b, err
		}
		return m, rest, nil
	case TypeArray8, TypeArray32:
		n, body, rest, err := compoundHeader(c, b)
		if err != nil {
			return nil, b, err
		}
		a, err := d.array(n, body)
		if err != nil {
			return nil, b, err
		}
		return a, rest, nil
	}
	return nil, b, errCtor(c)
}

// varBody returns the bytes of a variable-width value (binary, string,
// symbol) whose constructor c has been consumed.
func varBody(c byte, b []byte) (v, rest []byte, err error) {
	var n uint64
	if c&0xf0 == 0xa0 {
		if len(b) < 1 {
			return nil, b, errTrunc("variable-width size")
		}
		n, b = uint64(b[0]), b[1:]
	} else {
		if len(b) < 4 {
			return nil, b, errTrunc("variable-width size")
		}
		n, b = uint64(binary.BigEndian.Uint32(b)), b[4:]
	}
	if uint64(len(b)) < n {
		return nil, b, errTrunc("variable-width value")
	}
	return b[:n:n], b[n:], nil
}

func (d *decoder) list(n int, body []byte) (List, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	if err := d.spend(n); err != nil {
		return nil, err
	}
	l := make(List, n)
	var err error
	for i := range l {
		if l[i], body, err = d.value(body); err != nil {
			return nil, err
		}
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last list element", ErrInvalidField, len(body))
	}
	return l, nil
}

func (d *decoder) mapBody(n int, body []byte) (Map, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	if err := d.spend(n); err != nil {
		return nil, err
	}
	m := make(Map, n/2)
	var err error
	for i := range m {
		if m[i].Key, body, err = d.value(body); err != nil {
			return nil, err
		}
		if m[i].Value, body, err = d.value(body); err != nil {
			return nil, err
		}
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last map entry", ErrInvalidField, len(body))
	}
	if err := checkDuplicateKeys(m); err != nil {
		return nil, err
	}
	return m, nil
}

// comparableKey reports whether k can be compared with ==.
func comparableKey(k any) bool {
	switch k.(type) {
	case []byte, List, Map, *Array, *Described:
		return false
	}
	return true
}

func checkDuplicateKeys(m Map) error {
	if len(m) < 2 {
		return nil
	}
	dup := func(k any) error {
		return fmt.Errorf("%w: duplicate map key %v", ErrInvalidField, k)
	}
	if len(m) <= 16 {
		for i := 1; i < len(m); i++ {
			if !comparableKey(m[i].Key) {
				continue
			}
			for j := 0; j < i; j++ {
				if comparableKey(m[j].Key) && m[i].Key == m[j].Key {
					return dup(m[i].Key)
				}
			}
		}
		return nil
	}
	seen := make(map[any]struct{}, len(m))
	for i := range m {
		k := m[i].Key
		if !comparableKey(k) {
			continue
		}
		if f, ok := k.(float64); ok && f != f {
			continue // NaN keys never compare equal
		}
		if f, ok := k.(float32); ok && f != f {
			continue
		}
		if _, ok := seen[k]; ok {
			return dup(k)
		}
		seen[k] = struct{}{}
	}
	return nil
}

func (d *decoder) array(n int, body []byte) (*Array, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	a := &Array{}
	if len(body) == 0 {
		if n != 0 {
			return nil, errTrunc("array element constructor")
		}
		a.Type = TypeNull
		return a, nil
	}
	c := body[0]
	body = body[1:]
	if c == TypeDescribed {
		desc, rest, err := d.value(body)
		if err != nil {
			return nil, err
		}
		if len(rest) == 0 {
			return nil, errTrunc("array element constructor")
		}
		a.Descriptor, c, body = desc, rest[0], rest[1:]
		if c == TypeDescribed {
			return nil, fmt.Errorf("%w: nested descriptor in array", ErrInvalidType)
		}
	}
	if !validCtor(c) {
		return nil, errCtor(c)
	}
	a.Type = c
	// Every element of non-zero width takes at least one byte; zero-width
	// elements are bounded by the decode budget.
	if fixedWidth(c) != 0 && n > len(body) {
		return nil, fmt.Errorf("%w: %d array elements claimed in %d bytes", ErrTruncated, n, len(body))
	}
	if err := d.spend(n); err != nil {
		return nil, err
	}
	a.Elems = make([]any, n)
	var err error
	for i := range a.Elems {
		if a.Elems[i], body, err = d.body(c, body); err != nil {
			return nil, err
		}
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last array element", ErrInvalidField, len(body))
	}
	return a, nil
}

// SkipValue skips one encoded value without allocating.
func SkipValue(b []byte) (rest []byte, err error) {
	return skipValue(b, 0)
}

func skipValue(b []byte, depth int) ([]byte, error) {
	for {
		if len(b) == 0 {
			return b, errTrunc("constructor")
		}
		c := b[0]
		if c != TypeDescribed {
			return skipBody(c, b[1:])
		}
		depth++
		if depth > MaxDepth {
			return b, fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
		}
		rest, err := skipValue(b[1:], depth)
		if err != nil {
			return b, err
		}
		b = rest
	}
}

func skipBody(c byte, b []byte) ([]byte, error) {
	if w := fixedWidth(c); w >= 0 {
		if !validCtor(c) {
			return b, errCtor(c)
		}
		if len(b) < w {
			return b, errTrunc("fixed-width value")
		}
		return b[w:], nil
	}
	switch c {
	case TypeBinary8, TypeStr8, TypeSym8, TypeBinary32, TypeStr32, TypeSym32:
		_, rest, err := varBody(c, b)
		return rest, err
	case TypeList8, TypeList32, TypeMap8, TypeMap32, TypeArray8, TypeArray32:
		_, _, rest, err := compoundHeader(c, b)
		return rest, err
	}
	return b, errCtor(c)
}

// ReadMap decodes a map (or null, giving a nil Map).
func ReadMap(b []byte) (m Map, rest []byte, err error) {
	d := newDecoder(b)
	return d.readMap(b)
}

func (d *decoder) readMap(b []byte) (Map, []byte, error) {
	if len(b) == 0 {
		return nil, b, errTrunc("map")
	}
	switch c := b[0]; c {
	case TypeNull:
		return nil, b[1:], nil
	case TypeMap8, TypeMap32:
		n, body, rest, err := compoundHeader(c, b[1:])
		if err != nil {
			return nil, b, err
		}
		m, err := d.mapBody(n, body)
		if err != nil {
			return nil, b, err
		}
		return m, rest, nil
	default:
		return nil, b, errWrongType("map", c)
	}
}

// ReadList decodes a list (or null, giving a nil List).
func ReadList(b []byte) (l List, rest []byte, err error) {
	if len(b) == 0 {
		return nil, b, errTrunc("list")
	}
	switch c := b[0]; c {
	case TypeNull:
		return nil, b[1:], nil
	case TypeList0:
		return List{}, b[1:], nil
	case TypeList8, TypeList32:
		d := newDecoder(b)
		v, rest, err := d.body(c, b[1:])
		if err != nil {
			return nil, b, err
		}
		return v.(List), rest, nil
	default:
		return nil, b, errWrongType("list", c)
	}
}

// ReadString decodes a str8/str32 (null gives "", false).
func ReadString(b []byte) (v string, ok bool, rest []byte, err error) {
	raw, ok, rest, err := readVar(b, TypeStr8, TypeStr32, "string")
	return string(raw), ok, rest, err
}

// ReadSymbol decodes a sym8/sym32 (null gives "", false).
func ReadSymbol(b []byte) (v Symbol, ok bool, rest []byte, err error) {
	raw, ok, rest, err := readVar(b, TypeSym8, TypeSym32, "symbol")
	return Symbol(raw), ok, rest, err
}

// ReadBinary decodes a vbin8/vbin32 (null gives nil, false). The result
// aliases b.
func ReadBinary(b []byte) (v []byte, ok bool, rest []byte, err error) {
	return readVar(b, TypeBinary8, TypeBinary32, "binary")
}

// ReadAddress decodes a string or a symbol (null gives "", false).
func ReadAddress(b []byte) (v string, ok bool, rest []byte, err error) {
	if len(b) > 0 && (b[0] == TypeSym8 || b[0] == TypeSym32) {
		raw, ok, rest, err := readVar(b, TypeSym8, TypeSym32, "address")
		return string(raw), ok, rest, err
	}
	raw, ok, rest, err := readVar(b, TypeStr8, TypeStr32, "address")
	return string(raw), ok, rest, err
}

func readVar(b []byte, c8, c32 byte, want string) (v []byte, ok bool, rest []byte, err error) {
	if len(b) == 0 {
		return nil, false, b, errTrunc(want)
	}
	c := b[0]
	switch c {
	case TypeNull:
		return nil, false, b[1:], nil
	case c8, c32:
		v, rest, err := varBody(c, b[1:])
		if err != nil {
			return nil, false, b, err
		}
		return v, true, rest, nil
	}
	return nil, false, b, errWrongType(want, c)
}

// ReadSymbols decodes a multiple="true" symbol field: null (nil), a single
// symbol, or an array of symbols.
func ReadSymbols(b []byte) (v []Symbol, rest []byte, err error) {
	if len(b) == 0 {
		return nil, b, errTrunc("symbols")
	}
	c := b[0]
	switch c {
	case TypeNull:
		return nil, b[1:], nil
	case TypeSym8, TypeSym32:
		s, rest, err := varBody(c, b[1:])
		if err != nil {
			return nil, b, err
		}
		return []Symbol{Symbol(s)}, rest, nil
	case TypeArray8, TypeArray32:
		n, body, rest, err := compoundHeader(c, b[1:])
		if err != nil {
			return nil, b, err
		}
		if n == 0 {
			return []Symbol{}, rest, nil
		}
		if len(body) == 0 {
			return nil, b, errTrunc("array element constructor")
		}
		ec := body[0]
		if ec != TypeSym8 && ec != TypeSym32 {
			return nil, b, errWrongType("array of symbols", ec)
		}
		body = body[1:]
		if n > len(body) {
			return nil, b, errTrunc("array of symbols")
		}
		out := make([]Symbol, n)
		for i := range out {
			var s []byte
			if s, body, err = varBody(ec, body); err != nil {
				return nil, b, err
			}
			out[i] = Symbol(s)
		}
		if len(body) != 0 {
			return nil, b, fmt.Errorf("%w: bytes after the last array element", ErrInvalidField)
		}
		return out, rest, nil
	}
	return nil, b, errWrongType("symbol or array of symbols", c)
}

// ReadBool decodes a boolean (null gives false, false).
func ReadBool(b []byte) (v, ok bool, rest []byte, err error) {
	if len(b) == 0 {
		return false, false, b, errTrunc("boolean")
	}
	switch b[0] {
	case TypeNull:
		return false, false, b[1:], nil
	case TypeTrue:
		return true, true, b[1:], nil
	case TypeFalse:
		return false, true, b[1:], nil
	case TypeBoolean:
		if len(b) < 2 {
			return false, false, b, errTrunc("boolean")
		}
		if b[1] > 1 {
			return false, false, b, fmt.Errorf("%w: boolean 0x%02x", ErrInvalidField, b[1])
		}
		return b[1] == 1, true, b[2:], nil
	}
	return false, false, b, errWrongType("boolean", b[0])
}

// ReadUbyte decodes a ubyte (null gives 0, false).
func ReadUbyte(b []byte) (v uint8, ok bool, rest []byte, err error) {
	if len(b) == 0 {
		return 0, false, b, errTrunc("ubyte")
	}
	switch b[0] {
	case TypeNull:
		return 0, false, b[1:], nil
	case TypeUbyte:
		if len(b) < 2 {
			return 0, false, b, errTrunc("ubyte")
		}
		return b[1], true, b[2:], nil
	}
	return 0, false, b, errWrongType("ubyte", b[0])
}

// ReadUshort decodes a ushort (null gives 0, false).
func ReadUshort(b []byte) (v uint16, ok bool, rest []byte, err error) {
	if len(b) == 0 {
		return 0, false, b, errTrunc("ushort")
	}
	switch b[0] {
	case TypeNull:
		return 0, false, b[1:], nil
	case TypeUshort:
		if len(b) < 3 {
			return 0, false, b, errTrunc("ushort")
		}
		return binary.BigEndian.Uint16(b[1:]), true, b[3:], nil
	}
	return 0, false, b, errWrongType("ushort", b[0])
}

// ReadUint decodes a uint in any width (null gives 0, false).
func ReadUint(b []byte) (v uint32, ok bool, rest []byte, err error) {
	if len(b) == 0 {
		return 0, false, b, errTrunc("uint")
	}
	switch b[0] {
	case TypeNull:
		return 0, false, b[1:], nil
	case TypeUint0:
		return 0, true, b[1:], nil
	case TypeSmallUint:
		if len(b) < 2 {
			return 0, false, b, errTrunc("uint")
		}
		return uint32(b[1]), true, b[2:], nil
	case TypeUint:
		if len(b) < 5 {
			return 0, false, b, errTrunc("uint")
		}
		return binary.BigEndian.Uint32(b[1:]), true, b[5:], nil
	}
	return 0, false, b, errWrongType("uint", b[0])
}

// ReadULong decodes a ulong in any width (null gives 0, false).
func ReadULong(b []byte) (v uint64, ok bool, rest []byte, err error) {
	if len(b) == 0 {
		return 0, false, b, errTrunc("ulong")
	}
	switch b[0] {
	case TypeNull:
		return 0, false, b[1:], nil
	case TypeULong0:
		return 0, true, b[1:], nil
	case TypeSmallULong:
		if len(b) < 2 {
			return 0, false, b, errTrunc("ulong")
		}
		return uint64(b[1]), true, b[2:], nil
	case TypeULong:
		if len(b) < 9 {
			return 0, false, b, errTrunc("ulong")
		}
		return binary.BigEndian.Uint64(b[1:]), true, b[9:], nil
	}
	return 0, false, b, errWrongType("ulong", b[0])
}

// ReadTimestamp decodes a timestamp (null gives 0, false).
func ReadTimestamp(b []byte) (v Timestamp, ok bool, rest []byte, err error) {
	if len(b) == 0 {
		return 0, false, b, errTrunc("timestamp")
	}
	switch b[0] {
	case TypeNull:
		return 0, false, b[1:], nil
	case TypeTimestamp:
		if len(b) < 9 {
			return 0, false, b, errTrunc("timestamp")
		}
		return Timestamp(binary.BigEndian.Uint64(b[1:])), true, b[9:], nil
	}
	return 0, false, b, errWrongType("timestamp", b[0])
}
