package amqp10

import (
	"encoding/binary"
	"fmt"
	"math"
)

// AppendNull appends null.
func AppendNull(b []byte) []byte { return append(b, TypeNull) }

// AppendBool appends true/false (0x41/0x42).
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, TypeTrue)
	}
	return append(b, TypeFalse)
}

// AppendUbyte appends a ubyte.
func AppendUbyte(b []byte, v uint8) []byte { return append(b, TypeUbyte, v) }

// AppendUshort appends a ushort.
func AppendUshort(b []byte, v uint16) []byte {
	return binary.BigEndian.AppendUint16(append(b, TypeUshort), v)
}

// AppendByte appends a byte (signed 8-bit integer).
func AppendByte(b []byte, v int8) []byte { return append(b, TypeByte, byte(v)) }

// AppendShort appends a short.
func AppendShort(b []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(append(b, TypeShort), uint16(v))
}

// AppendUint appends the smallest encoding of v (uint0, smalluint, uint).
func AppendUint(b []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(b, TypeUint0)
	case v < 256:
		return append(b, TypeSmallUint, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(b, TypeUint), v)
}

// AppendULong appends the smallest encoding of v (ulong0, smallulong, ulong).
func AppendULong(b []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(b, TypeULong0)
	case v < 256:
		return append(b, TypeSmallULong, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(b, TypeULong), v)
}

// AppendInt appends the smallest encoding of v (smallint, int).
func AppendInt(b []byte, v int32) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(b, TypeSmallInt, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint32(append(b, TypeInt), uint32(v))
}

// AppendLong appends the smallest encoding of v (smalllong, long).
func AppendLong(b []byte, v int64) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(b, TypeSmallLong, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint64(append(b, TypeLong), uint64(v))
}

// AppendFloat appends a float (IEEE 754 binary32).
func AppendFloat(b []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(append(b, TypeFloat), math.Float32bits(v))
}

// AppendDouble appends a double (IEEE 754 binary64).
func AppendDouble(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, TypeDouble), math.Float64bits(v))
}

// AppendChar appends a char (UTF-32BE).
func AppendChar(b []byte, v Char) []byte {
	return binary.BigEndian.AppendUint32(append(b, TypeChar), uint32(v))
}

// AppendUUID appends a uuid.
func AppendUUID(b []byte, v UUID) []byte { return append(append(b, TypeUUID), v[:]...) }

// AppendTimestamp appends a timestamp (0x83).
func AppendTimestamp(b []byte, v Timestamp) []byte {
	return binary.BigEndian.AppendUint64(append(b, TypeTimestamp), uint64(v))
}

// AppendBinary appends vbin8 or vbin32.
func AppendBinary(b []byte, v []byte) []byte {
	if len(v) <= math.MaxUint8 {
		b = append(b, TypeBinary8, byte(len(v)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, TypeBinary32), uint32(len(v)))
	}
	return append(b, v...)
}

// AppendString appends str8-utf8 (len <= 255) or str32-utf8.
func AppendString(b []byte, v string) []byte {
	if len(v) <= math.MaxUint8 {
		b = append(b, TypeStr8, byte(len(v)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, TypeStr32), uint32(len(v)))
	}
	return append(b, v...)
}

// AppendSymbol appends sym8 or sym32.
func AppendSymbol(b []byte, v Symbol) []byte {
	if len(v) <= math.MaxUint8 {
		b = append(b, TypeSym8, byte(len(v)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, TypeSym32), uint32(len(v)))
	}
	return append(b, v...)
}

// AppendSymbols appends a multiple="true" symbol field: null when empty, a
// single symbol when len is 1, otherwise an array of symbols.
func AppendSymbols(b []byte, v []Symbol) []byte {
	switch len(v) {
	case 0:
		return append(b, TypeNull)
	case 1:
		return AppendSymbol(b, v[0])
	}
	return appendSymbolArray(b, v)
}

// appendSymbolArray appends v as an array of sym32 (array8 when it fits).
func appendSymbolArray(b []byte, v []Symbol) []byte {
	start := len(b)
	b = append(b, TypeArray32, 0, 0, 0, 0, 0, 0, 0, 0, TypeSym32)
	for _, s := range v {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return finishArray(b, start, len(v))
}

// AppendDescriptor appends the described-type constructor 0x00 and a numeric
// descriptor (smallulong when it fits).
func AppendDescriptor(b []byte, code uint64) []byte {
	if code < 256 {
		return append(b, TypeDescribed, TypeSmallULong, byte(code))
	}
	return binary.BigEndian.AppendUint64(append(b, TypeDescribed, TypeULong), code)
}

// AppendMap appends m as map8/map32, keys in order.
func AppendMap(b []byte, m Map) ([]byte, error) { return appendMap(b, m, 0) }

// AppendList appends l as list0/list8/list32.
func AppendList(b []byte, l List) ([]byte, error) { return appendList(b, l, 0) }

// AppendArray appends a as array8 (count < 255 and size < 256) or array32.
func AppendArray(b []byte, a *Array) ([]byte, error) { return appendArray(b, a, 0) }

// AppendValue appends any value of the types listed in types.go, plus the
// Go conveniences []string (array of str32), []Symbol (array of sym32),
// []Map (array of map32), int (long), uint (ulong). Unsupported Go types
// return an error wrapping ErrInvalidType.
//
// It also encodes *Error, DeliveryState, *DeliveryState, *Source, *Target,
// []any (as a list) and any Performative as their described forms.
func AppendValue(b []byte, v any) ([]byte, error) { return appendValue(b, v, 0) }

func errTooDeepEnc() error { return fmt.Errorf("%w: encoding deeper than %d", ErrTooDeep, MaxDepth) }

func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, TypeNull), nil
	case bool:
		return AppendBool(b, v), nil
	case uint8:
		return AppendUbyte(b, v), nil
	case uint16:
		return AppendUshort(b, v), nil
	case uint32:
		return AppendUint(b, v), nil
	case uint64:
		return AppendULong(b, v), nil
	case uint:
		return AppendULong(b, uint64(v)), nil
	case int8:
		return AppendByte(b, v), nil
	case int16:
		return AppendShort(b, v), nil
	case int32:
		return AppendInt(b, v), nil
	case int64:
		return AppendLong(b, v), nil
	case int:
		return AppendLong(b, int64(v)), nil
	case float32:
		return AppendFloat(b, v), nil
	case float64:
		return AppendDouble(b, v), nil
	case Decimal32:
		return append(append(b, TypeDecimal32), v[:]...), nil
	case Decimal64:
		return append(append(b, TypeDecimal64), v[:]...), nil
	case Decimal128:
		return append(append(b, TypeDecimal128), v[:]...), nil
	case Char:
		return AppendChar(b, v), nil
	case Timestamp:
		return AppendTimestamp(b, v), nil
	case UUID:
		return AppendUUID(b, v), nil
	case []byte:
		return AppendBinary(b, v), nil
	case string:
		return AppendString(b, v), nil
	case Symbol:
		return AppendSymbol(b, v), nil
	case List:
		return appendList(b, v, depth)
	case []any:
		return appendList(b, v, depth)
	case Map:
		return appendMap(b, v, depth)
	case *Array:
		if v == nil {
			return append(b, TypeNull), nil
		}
		return appendArray(b, v, depth)
	case Array:
		return appendArray(b, &v, depth)
	case *Described:
		if v == nil {
			return append(b, TypeNull), nil
		}
		return appendDescribed(b, v, depth)
	case Described:
		return appendDescribed(b, &v, depth)
	case []string:
		elems := make([]any, len(v))
		for i := range v {
			elems[i] = v[i]
		}
		return appendArray(b, &Array{Type: TypeStr32, Elems: elems}, depth)
	case []Symbol:
		return appendSymbolArray(b, v), nil
	case []Map:
		elems := make([]any, len(v))
		for i := range v {
			elems[i] = v[i]
		}
		return appendArray(b, &Array{Type: TypeMap32, Elems: elems}, depth)
	case *Error:
		return appendError(b, v), nil
	case DeliveryState:
		return appendDeliveryState(b, &v), nil
	case *DeliveryState:
		if v == nil {
			return append(b, TypeNull), nil
		}
		return appendDeliveryState(b, v), nil
	case *Source:
		return appendSource(b, v), nil
	case *Target:
		return appendTarget(b, v), nil
	case Performative:
		return v.Append(b), nil
	case Raw:
		if len(v) == 0 {
			return b, fmt.Errorf("%w: empty Raw value", ErrInvalidType)
		}
		return append(b, v...), nil
	}
	return b, fmt.Errorf("%w: cannot encode Go type %T", ErrInvalidType, v)
}

func appendDescribed(b []byte, d *Described, depth int) ([]byte, error) {
	if depth >= MaxDepth {
		return b, errTooDeepEnc()
	}
	b = append(b, TypeDescribed)
	var err error
	if code, ok := d.Descriptor.(uint64); ok {
		b = AppendULong(b, code)
	} else if b, err = appendValue(b, d.Descriptor, depth+1); err != nil {
		return b, err
	}
	return appendValue(b, d.Value, depth+1)
}

// Compound encoding reserves a 32-bit header (constructor, size, count),
// appends the elements, then shrinks to the 8-bit form when it fits.

func finishCompound(b []byte, start, count int, small, large byte) []byte {
	body := len(b) - (start + 9)
	if count == 0 && small == TypeList8 {
		b = b[:start]
		return append(b, TypeList0)
	}
	if body+1 <= math.MaxUint8 && count <= math.MaxUint8 {
		b[start] = small
		b[start+1] = byte(body + 1)
		b[start+2] = byte(count)
		copy(b[start+3:], b[start+9:])
		return b[:len(b)-6]
	}
	b[start] = large
	binary.BigEndian.PutUint32(b[start+1:], uint32(body+4))
	binary.BigEndian.PutUint32(b[start+5:], uint32(count))
	return b
}

// finishArray completes an array whose header was reserved at start and
// whose element constructor (and descriptor) and elements follow it.
func finishArray(b []byte, start, count int) []byte {
	body := len(b) - (start + 9) // constructor + elements
	if count < math.MaxUint8 && body+1 <= math.MaxUint8 {
		b[start] = TypeArray8
		b[start+1] = byte(body + 1)
		b[start+2] = byte(count)
		copy(b[start+3:], b[start+9:])
		return b[:len(b)-6]
	}
	b[start] = TypeArray32
	binary.BigEndian.PutUint32(b[start+1:], uint32(body+4))
	binary.BigEndian.PutUint32(b[start+5:], uint32(count))
	return b
}

func appendList(b []byte, l []any, depth int) ([]byte, error) {
	if depth >= MaxDepth {
		return b, errTooDeepEnc()
	}
	start := len(b)
	b = append(b, TypeList32, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	for _, e := range l {
		if b, err = appendValue(b, e, depth+1); err != nil {
			return b[:start], err
		}
	}
	return finishCompound(b, start, len(l), TypeList8, TypeList32), nil
}

func appendMap(b []byte, m Map, depth int) ([]byte, error) {
	if depth >= MaxDepth {
		return b, errTooDeepEnc()
	}
	start := len(b)
	b = append(b, TypeMap32, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	for i := range m {
		if b, err = appendValue(b, m[i].Key, depth+1); err != nil {
			return b[:start], err
		}
		if b, err = appendValue(b, m[i].Value, depth+1); err != nil {
			return b[:start], err
		}
	}
	return finishCompound(b, start, 2*len(m), TypeMap8, TypeMap32), nil
}

// arrayElemType infers the 4-byte-width array constructor for a Go value.
func arrayElemType(v any) (byte, bool) {
	switch v.(type) {
	case nil:
		return TypeNull, true
	case bool:
		return TypeBoolean, true
	case uint8:
		return TypeUbyte, true
	case uint16:
		return TypeUshort, true
	case uint32:
		return TypeUint, true
	case uint64, uint:
		return TypeULong, true
	case int8:
		return TypeByte, true
	case int16:
		return TypeShort, true
	case int32:
		return TypeInt, true
	case int64, int:
		return TypeLong, true
	case float32:
		return TypeFloat, true
	case float64:
		return TypeDouble, true
	case Decimal32:
		return TypeDecimal32, true
	case Decimal64:
		return TypeDecimal64, true
	case Decimal128:
		return TypeDecimal128, true
	case Char:
		return TypeChar, true
	case Timestamp:
		return TypeTimestamp, true
	case UUID:
		return TypeUUID, true
	case []byte:
		return TypeBinary32, true
	case string:
		return TypeStr32, true
	case Symbol:
		return TypeSym32, true
	case List, []any:
		return TypeList32, true
	case Map:
		return TypeMap32, true
	case *Array, Array:
		return TypeArray32, true
	}
	return 0, false
}

func appendArray(b []byte, a *Array, depth int) ([]byte, error) {
	start := len(b)
	b = append(b, TypeArray32)
	b, small, err := appendArrayBody(b, a, depth, 0)
	if err != nil {
		return b[:start], err
	}
	if small {
		b[start] = TypeArray8
	}
	return b, nil
}

// appendArrayBody appends the array a without its constructor: size,
// count, element constructor (with descriptor) and elements. width is 1 or
// 4 for a fixed width, 0 to pick array8 when count < 255 and size < 256.
// small reports whether the 8-bit form was used.
func appendArrayBody(b []byte, a *Array, depth, width int) (_ []byte, small bool, err error) {
	if depth >= MaxDepth {
		return b, false, errTooDeepEnc()
	}
	typ, desc := a.Type, a.Descriptor
	if typ == TypeDescribed && desc == nil {
		// Untyped: infer from the first element.
		if len(a.Elems) == 0 {
			typ = TypeNull
		} else {
			e := a.Elems[0]
			if d, ok := e.(*Described); ok && d != nil {
				desc, e = d.Descriptor, d.Value
			}
			t, ok := arrayElemType(e)
			if !ok {
				return b, false, fmt.Errorf("%w: cannot encode %T in an array", ErrInvalidType, e)
			}
			typ = t
		}
	}
	if typ == TypeDescribed || !validCtor(typ) {
		return b, false, fmt.Errorf("%w: array element constructor 0x%02x", ErrInvalidType, typ)
	}
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	if desc != nil {
		b = append(b, TypeDescribed)
		if code, ok := desc.(uint64); ok {
			b = AppendULong(b, code)
		} else if b, err = appendValue(b, desc, depth+1); err != nil {
			return b[:start], false, err
		}
	}
	b = append(b, typ)
	for _, e := range a.Elems {
		if desc != nil {
			if d, ok := e.(*Described); ok && d != nil {
				e = d.Value
			}
		}
		if b, err = appendElem(b, typ, e, depth+1); err != nil {
			return b[:start], false, err
		}
	}
	body := len(b) - (start + 8)
	count := len(a.Elems)
	fits := count < math.MaxUint8 && body+1 <= math.MaxUint8
	if width == 1 || (width == 0 && fits) {
		if !fits {
			return b[:start], false, fmt.Errorf("%w: array too large for array8", ErrInvalidType)
		}
		b[start] = byte(body + 1)
		b[start+1] = byte(count)
		copy(b[start+2:], b[start+8:])
		return b[:len(b)-6], true, nil
	}
	binary.BigEndian.PutUint32(b[start:], uint32(body+4))
	binary.BigEndian.PutUint32(b[start+4:], uint32(count))
	return b, false, nil
}

func errElem(typ byte, v any) error {
	return fmt.Errorf("%w: cannot encode %T with array constructor 0x%02x", ErrInvalidType, v, typ)
}

// appendElem appends v encoded with constructor typ, without the constructor.
func appendElem(b []byte, typ byte, v any, depth int) ([]byte, error) {
	be := binary.BigEndian
	switch typ {
	case TypeNull:
		if v != nil {
			return b, errElem(typ, v)
		}
		return b, nil
	case TypeTrue, TypeFalse:
		if x, ok := v.(bool); ok && x == (typ == TypeTrue) {
			return b, nil
		}
	case TypeBoolean:
		if x, ok := v.(bool); ok {
			if x {
				return append(b, 1), nil
			}
			return append(b, 0), nil
		}
	case TypeUbyte:
		if x, ok := v.(uint8); ok {
			return append(b, x), nil
		}
	case TypeUshort:
		if x, ok := v.(uint16); ok {
			return be.AppendUint16(b, x), nil
		}
	case TypeUint, TypeSmallUint, TypeUint0:
		x, ok := v.(uint32)
		if !ok {
			break
		}
		switch {
		case typ == TypeUint:
			return be.AppendUint32(b, x), nil
		case typ == TypeSmallUint && x < 256:
			return append(b, byte(x)), nil
		case typ == TypeUint0 && x == 0:
			return b, nil
		}
	case TypeULong, TypeSmallULong, TypeULong0:
		var x uint64
		switch y := v.(type) {
		case uint64:
			x = y
		case uint:
			x = uint64(y)
		default:
			return b, errElem(typ, v)
		}
		switch {
		case typ == TypeULong:
			return be.AppendUint64(b, x), nil
		case typ == TypeSmallULong && x < 256:
			return append(b, byte(x)), nil
		case typ == TypeULong0 && x == 0:
			return b, nil
		}
	case TypeByte:
		if x, ok := v.(int8); ok {
			return append(b, byte(x)), nil
		}
	case TypeShort:
		if x, ok := v.(int16); ok {
			return be.AppendUint16(b, uint16(x)), nil
		}
	case TypeInt, TypeSmallInt:
		if x, ok := v.(int32); ok {
			if typ == TypeInt {
				return be.AppendUint32(b, uint32(x)), nil
			}
			if x >= math.MinInt8 && x <= math.MaxInt8 {
				return append(b, byte(int8(x))), nil
			}
		}
	case TypeLong, TypeSmallLong:
		var x int64
		switch y := v.(type) {
		case int64:
			x = y
		case int:
			x = int64(y)
		default:
			return b, errElem(typ, v)
		}
		if typ == TypeLong {
			return be.AppendUint64(b, uint64(x)), nil
		}
		if x >= math.MinInt8 && x <= math.MaxInt8 {
			return append(b, byte(int8(x))), nil
		}
	case TypeFloat:
		if x, ok := v.(float32); ok {
			return be.AppendUint32(b, math.Float32bits(x)), nil
		}
	case TypeDouble:
		if x, ok := v.(float64); ok {
			return be.AppendUint64(b, math.Float64bits(x)), nil
		}
	case TypeDecimal32:
		if x, ok := v.(Decimal32); ok {
			return append(b, x[:]...), nil
		}
	case TypeDecimal64:
		if x, ok := v.(Decimal64); ok {
			return append(b, x[:]...), nil
		}
	case TypeDecimal128:
		if x, ok := v.(Decimal128); ok {
			return append(b, x[:]...), nil
		}
	case TypeChar:
		if x, ok := v.(Char); ok {
			return be.AppendUint32(b, uint32(x)), nil
		}
	case TypeTimestamp:
		if x, ok := v.(Timestamp); ok {
			return be.AppendUint64(b, uint64(x)), nil
		}
	case TypeUUID:
		if x, ok := v.(UUID); ok {
			return append(b, x[:]...), nil
		}
	case TypeBinary8, TypeBinary32, TypeStr8, TypeStr32, TypeSym8, TypeSym32:
		var s string
		var raw []byte
		isRaw := false
		switch y := v.(type) {
		case []byte:
			if typ != TypeBinary8 && typ != TypeBinary32 {
				return b, errElem(typ, v)
			}
			raw, isRaw = y, true
		case string:
			if typ != TypeStr8 && typ != TypeStr32 {
				return b, errElem(typ, v)
			}
			s = y
		case Symbol:
			if typ != TypeSym8 && typ != TypeSym32 {
				return b, errElem(typ, v)
			}
			s = string(y)
		default:
			return b, errElem(typ, v)
		}
		n := len(s)
		if isRaw {
			n = len(raw)
		}
		if typ&0xf0 == 0xa0 {
			if n > math.MaxUint8 {
				return b, errElem(typ, v)
			}
			b = append(b, byte(n))
		} else {
			b = be.AppendUint32(b, uint32(n))
		}
		if isRaw {
			return append(b, raw...), nil
		}
		return append(b, s...), nil
	case TypeList0:
		if l, ok := asList(v); ok && len(l) == 0 {
			return b, nil
		}
	case TypeList8, TypeList32:
		if l, ok := asList(v); ok {
			if depth >= MaxDepth {
				return b, errTooDeepEnc()
			}
			return appendElemCompound(b, typ == TypeList8, len(l), func(b []byte) ([]byte, error) {
				var err error
				for _, e := range l {
					if b, err = appendValue(b, e, depth+1); err != nil {
						return b, err
					}
				}
				return b, nil
			})
		}
	case TypeMap8, TypeMap32:
		if m, ok := v.(Map); ok {
			if depth >= MaxDepth {
				return b, errTooDeepEnc()
			}
			return appendElemCompound(b, typ == TypeMap8, 2*len(m), func(b []byte) ([]byte, error) {
				var err error
				for i := range m {
					if b, err = appendValue(b, m[i].Key, depth+1); err != nil {
						return b, err
					}
					if b, err = appendValue(b, m[i].Value, depth+1); err != nil {
						return b, err
					}
				}
				return b, nil
			})
		}
	case TypeArray8, TypeArray32:
		var a *Array
		switch y := v.(type) {
		case *Array:
			a = y
		case Array:
			a = &y
		}
		if a == nil {
			break
		}
		width := 4
		if typ == TypeArray8 {
			width = 1
		}
		nb, _, err := appendArrayBody(b, a, depth, width)
		return nb, err
	}
	return b, errElem(typ, v)
}

func asList(v any) ([]any, bool) {
	switch l := v.(type) {
	case List:
		return l, true
	case []any:
		return l, true
	}
	return nil, false
}

// appendElemCompound appends a list/map body without constructor: size and
// count in 1 or 4 bytes each, then the elements fill writes.
func appendElemCompound(b []byte, small bool, count int, fill func([]byte) ([]byte, error)) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b, err := fill(b)
	if err != nil {
		return b[:start], err
	}
	body := len(b) - (start + 8)
	if small {
		if body+1 > math.MaxUint8 || count > math.MaxUint8 {
			return b[:start], fmt.Errorf("%w: compound too large for 8-bit array element", ErrInvalidType)
		}
		b[start] = byte(body + 1)
		b[start+1] = byte(count)
		copy(b[start+2:], b[start+8:])
		return b[:len(b)-6], nil
	}
	binary.BigEndian.PutUint32(b[start:], uint32(body+4))
	binary.BigEndian.PutUint32(b[start+4:], uint32(count))
	return b, nil
}

// BeginMap starts a map whose entries the caller appends (each key, then
// its value): it reserves a map32 header and returns where the map starts.
// EndMap completes it.
func BeginMap(b []byte) ([]byte, int) {
	return append(b, TypeMap32, 0, 0, 0, 0, 0, 0, 0, 0), len(b)
}

// EndMap completes the map begun at start holding count values (two per
// entry): as map8 when it fits, else map32, the bytes AppendMap writes.
func EndMap(b []byte, start, count int) []byte {
	return finishCompound(b, start, count, TypeMap8, TypeMap32)
}
