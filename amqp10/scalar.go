package amqp10

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/epitaph-mq/epitaph/value"
)

// The readers in this file look up one field of a message in place: they
// walk the encoded section, decode only the value asked for, and return it
// as a value.Scalar that aliases the message, so they allocate nothing.
// Consumer filters use them to test every queued message.

// ReadScalar reads one value as a Scalar. A value that is not a simple one
// (decimal, list, map, array, described) is skipped and given as KindOther.
func ReadScalar(b []byte) (value.Scalar, []byte, error) {
	if len(b) == 0 {
		return value.Scalar{}, b, errTrunc("constructor")
	}
	c := b[0]
	if c == TypeDescribed {
		rest, err := SkipValue(b)
		return value.Scalar{Kind: value.KindOther}, rest, err
	}
	be := binary.BigEndian
	if w := fixedWidth(c); w >= 0 {
		if !validCtor(c) {
			return value.Scalar{}, b, errCtor(c)
		}
		if len(b)-1 < w {
			return value.Scalar{}, b, errTrunc("fixed-width value")
		}
		v, rest := b[1:1+w], b[1+w:]
		var s value.Scalar
		switch c {
		case TypeNull:
			s.Kind = value.KindNull
		case TypeTrue:
			s.Kind, s.Int = value.KindBool, 1
		case TypeFalse:
			s.Kind = value.KindBool
		case TypeBoolean:
			if v[0] > 1 {
				return value.Scalar{}, b, fmt.Errorf("%w: boolean 0x%02x", ErrInvalidField, v[0])
			}
			s.Kind, s.Int = value.KindBool, int64(v[0])
		case TypeUint0, TypeULong0:
			s.Kind = value.KindUint
		case TypeUbyte, TypeSmallUint, TypeSmallULong:
			s.Kind, s.Uint = value.KindUint, uint64(v[0])
		case TypeUshort:
			s.Kind, s.Uint = value.KindUint, uint64(be.Uint16(v))
		case TypeUint:
			s.Kind, s.Uint = value.KindUint, uint64(be.Uint32(v))
		case TypeULong:
			s.Kind, s.Uint = value.KindUint, be.Uint64(v)
		case TypeByte, TypeSmallInt, TypeSmallLong:
			s.Kind, s.Int = value.KindInt, int64(int8(v[0]))
		case TypeShort:
			s.Kind, s.Int = value.KindInt, int64(int16(be.Uint16(v)))
		case TypeInt:
			s.Kind, s.Int = value.KindInt, int64(int32(be.Uint32(v)))
		case TypeLong:
			s.Kind, s.Int = value.KindInt, int64(be.Uint64(v))
		case TypeFloat:
			s.Kind, s.Float = value.KindFloat, float64(math.Float32frombits(be.Uint32(v)))
		case TypeDouble:
			s.Kind, s.Float = value.KindFloat, math.Float64frombits(be.Uint64(v))
		case TypeTimestamp:
			s.Kind, s.Int = value.KindTimestamp, int64(be.Uint64(v))
		case TypeChar:
			s.Kind, s.Int = value.KindChar, int64(be.Uint32(v))
		case TypeUUID:
			s.Kind, s.Bytes = value.KindUUID, v
		default: // decimals, list0
			s.Kind = value.KindOther
		}
		return s, rest, nil
	}
	switch c {
	case TypeBinary8, TypeStr8, TypeSym8, TypeBinary32, TypeStr32, TypeSym32:
		v, rest, err := varBody(c, b[1:])
		if err != nil {
			return value.Scalar{}, b, err
		}
		s := value.Scalar{Kind: value.KindBinary, Bytes: v}
		switch c {
		case TypeStr8, TypeStr32:
			s.Kind = value.KindString
		case TypeSym8, TypeSym32:
			s.Kind = value.KindSymbol
		}
		return s, rest, nil
	}
	rest, err := skipBody(c, b[1:])
	return value.Scalar{Kind: value.KindOther}, rest, err
}

// sectionBody returns the compound body (elements) and element count of a
// raw section whose value is a list or map (null or list0: no elements).
func sectionBody(sec []byte) (n int, body []byte, err error) {
	_, val, err := readDescriptor(sec)
	if err != nil {
		return 0, nil, err
	}
	if len(val) == 0 {
		return 0, nil, errTrunc("section value")
	}
	switch c := val[0]; c {
	case TypeNull, TypeList0:
		return 0, nil, nil
	case TypeList8, TypeList32, TypeMap8, TypeMap32:
		n, body, _, err = compoundHeader(c, val[1:])
		return n, body, err
	default:
		return 0, nil, errWrongType("list or map", c)
	}
}

// PropertyScalar returns field i (0 message-id ... 12 reply-to-group-id, in
// the order of section 3.2.4) of the properties section: KindAbsent when
// the message has no properties or the list is shorter.
func (m *Message) PropertyScalar(i int) (value.Scalar, error) {
	sec, _, _, err := m.bareSections()
	if err != nil || sec == nil {
		return value.Scalar{}, err
	}
	n, body, err := sectionBody(sec)
	if err != nil || i >= n {
		return value.Scalar{}, err
	}
	for range i {
		if body, err = SkipValue(body); err != nil {
			return value.Scalar{}, err
		}
	}
	s, _, err := ReadScalar(body)
	return s, err
}

// PropertyScalars reads the first len(dst) fields of the properties section
// into dst in one walk, each as PropertyScalar would return it (KindAbsent
// when the message has no properties or the list is shorter); an error in
// any of them is returned and leaves dst unspecified. Reading every field
// of a conversion this way walks the section once, where PropertyScalar
// per field walks the message's sections and the fields before it each
// time.
func (m *Message) PropertyScalars(dst []value.Scalar) error {
	clear(dst)
	sec, _, _, err := m.bareSections()
	if err != nil || sec == nil {
		return err
	}
	n, body, err := sectionBody(sec)
	if err != nil {
		return err
	}
	for i := range min(n, len(dst)) {
		if dst[i], body, err = ReadScalar(body); err != nil {
			return err
		}
	}
	return nil
}

// ApplicationPropertyScalar returns the application property named key
// (KindAbsent when there is none).
func (m *Message) ApplicationPropertyScalar(key string) (value.Scalar, error) {
	_, sec, _, err := m.bareSections()
	if err != nil || sec == nil {
		return value.Scalar{}, err
	}
	return mapScalar(sec, key, false)
}

// AnnotationScalar returns the publisher's message annotation whose symbol
// key is key (KindAbsent when there is none).
func (m *Message) AnnotationScalar(key string) (value.Scalar, error) {
	if m.annLen == 0 {
		return value.Scalar{}, nil
	}
	return mapScalar(m.Annotations(), key, true)
}

// mapScalar looks key up in the raw section sec holding a map: keys are
// strings (application-properties) or symbols (annotations).
func mapScalar(sec []byte, key string, symbolKeys bool) (value.Scalar, error) {
	n, body, err := sectionBody(sec)
	if err != nil {
		return value.Scalar{}, err
	}
	for i := 0; i+1 < n; i += 2 {
		k, rest, err := ReadScalar(body)
		if err != nil {
			return value.Scalar{}, err
		}
		want := value.KindString
		if symbolKeys {
			want = value.KindSymbol
		}
		if k.Kind == want && string(k.Bytes) == key {
			s, _, err := ReadScalar(rest)
			return s, err
		}
		if body, err = SkipValue(rest); err != nil {
			return value.Scalar{}, err
		}
	}
	return value.Scalar{}, nil
}
