package amqp10

import (
	"fmt"
	"math"
)

// descUnknown is returned by readDescriptor for descriptors this package
// does not know (unknown symbols, or ulongs with a non-zero domain).
const descUnknown = math.MaxUint64

// descByName maps the symbolic descriptors of the spec's composite types
// to their numeric codes.
var descByName = map[string]uint64{
	"amqp:open:list":                           DescOpen,
	"amqp:begin:list":                          DescBegin,
	"amqp:attach:list":                         DescAttach,
	"amqp:flow:list":                           DescFlow,
	"amqp:transfer:list":                       DescTransfer,
	"amqp:disposition:list":                    DescDisposition,
	"amqp:detach:list":                         DescDetach,
	"amqp:end:list":                            DescEnd,
	"amqp:close:list":                          DescClose,
	"amqp:error:list":                          DescError,
	"amqp:sasl-mechanisms:list":                DescSASLMechanisms,
	"amqp:sasl-init:list":                      DescSASLInit,
	"amqp:sasl-challenge:list":                 DescSASLChallenge,
	"amqp:sasl-response:list":                  DescSASLResponse,
	"amqp:sasl-outcome:list":                   DescSASLOutcome,
	"amqp:header:list":                         DescHeader,
	"amqp:delivery-annotations:map":            DescDeliveryAnnotations,
	"amqp:message-annotations:map":             DescMessageAnnotations,
	"amqp:properties:list":                     DescProperties,
	"amqp:application-properties:map":          DescApplicationProperties,
	"amqp:data:binary":                         DescData,
	"amqp:amqp-sequence:list":                  DescAMQPSequence,
	"amqp:amqp-value:*":                        DescAMQPValue,
	"amqp:footer:map":                          DescFooter,
	"amqp:received:list":                       DescReceived,
	"amqp:accepted:list":                       DescAccepted,
	"amqp:rejected:list":                       DescRejected,
	"amqp:released:list":                       DescReleased,
	"amqp:modified:list":                       DescModified,
	"amqp:source:list":                         DescSource,
	"amqp:target:list":                         DescTarget,
	"amqp:delete-on-close:list":                DescDeleteOnClose,
	"amqp:delete-on-no-links:list":             DescDeleteOnNoLinks,
	"amqp:delete-on-no-messages:list":          DescDeleteOnNoMessages,
	"amqp:delete-on-no-links-or-messages:list": DescDeleteOnNoLinksOrMsgs,
	"amqp:coordinator:list":                    DescCoordinator,
	"amqp:declare:list":                        0x31,
	"amqp:discharge:list":                      0x32,
	"amqp:declared:list":                       DescDeclared,
	"amqp:transactional-state:list":            DescTransactionalState,
}

// readDescriptor consumes the described-type constructor and a descriptor
// (ulong or symbol). Descriptors it does not know give descUnknown.
func readDescriptor(b []byte) (code uint64, rest []byte, err error) {
	if len(b) == 0 {
		return 0, b, errTrunc("described type")
	}
	if b[0] != TypeDescribed {
		return 0, b, errWrongType("described type", b[0])
	}
	if len(b) < 2 {
		return 0, b, errTrunc("descriptor")
	}
	switch b[1] {
	case TypeSym8, TypeSym32:
		s, rest, err := varBody(b[1], b[2:])
		if err != nil {
			return 0, b, err
		}
		if c, ok := descByName[string(s)]; ok {
			return c, rest, nil
		}
		return descUnknown, rest, nil
	case TypeSmallULong, TypeULong, TypeULong0:
		v, _, rest, err := ReadULong(b[1:])
		if err != nil {
			return 0, b, err
		}
		if v>>32 != 0 {
			return descUnknown, rest, nil
		}
		return v, rest, nil
	}
	return 0, b, fmt.Errorf("%w: descriptor constructor 0x%02x", ErrInvalidType, b[1])
}

// PeekDescriptor returns the numeric descriptor of the described value that
// starts body (symbolic descriptors of the spec's types are mapped to their codes).
func PeekDescriptor(body []byte) (uint64, error) {
	code, _, err := readDescriptor(body)
	if err != nil {
		return 0, err
	}
	if code == descUnknown {
		return 0, fmt.Errorf("%w: unknown descriptor", ErrInvalidType)
	}
	return code, nil
}

// fieldReader walks the fields of a described list without allocating.
type fieldReader struct {
	dec  decoder
	b    []byte
	n    int
	what string
}

// openList starts reading the list value at b (after the descriptor).
func openList(b []byte, what string) (f fieldReader, rest []byte, err error) {
	f.what = what
	f.dec = newDecoder(b)
	if len(b) == 0 {
		return f, b, fmt.Errorf("%s: %w", what, errTrunc("list"))
	}
	c := b[0]
	switch c {
	case TypeList0:
		return f, b[1:], nil
	case TypeList8, TypeList32:
		n, body, rest, err := compoundHeader(c, b[1:])
		if err != nil {
			return f, b, fmt.Errorf("%s: %w", what, err)
		}
		f.n, f.b = n, body
		return f, rest, nil
	}
	return f, b, fmt.Errorf("%s: %w", what, errWrongType("list", c))
}

// openDescribed checks the descriptor at b is want and starts reading its list.
func openDescribed(b []byte, want uint64, what string) (fieldReader, []byte, error) {
	code, rest, err := readDescriptor(b)
	if err != nil {
		return fieldReader{}, b, fmt.Errorf("%s: %w", what, err)
	}
	if code != want {
		return fieldReader{}, b, fmt.Errorf("%w: %s: unexpected descriptor", ErrInvalidType, what)
	}
	return openList(rest, what)
}

func (f *fieldReader) wrap(name string, err error) error {
	return fmt.Errorf("%s.%s: %w", f.what, name, err)
}

func (f *fieldReader) missing(name string) error {
	return fmt.Errorf("%w: %s.%s is mandatory", ErrInvalidField, f.what, name)
}

// done skips fields this package does not know and checks the list is exhausted.
func (f *fieldReader) done() error {
	for ; f.n > 0; f.n-- {
		rest, err := skipValue(f.b, 0)
		if err != nil {
			return f.wrap("extra field", err)
		}
		f.b = rest
	}
	if len(f.b) != 0 {
		return fmt.Errorf("%w: %s: %d bytes after the last field", ErrInvalidField, f.what, len(f.b))
	}
	return nil
}

func (f *fieldReader) uint(name string) (v uint32, ok bool, err error) {
	if f.n == 0 {
		return 0, false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadUint(f.b); err != nil {
		return 0, false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) ulong(name string) (v uint64, ok bool, err error) {
	if f.n == 0 {
		return 0, false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadULong(f.b); err != nil {
		return 0, false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) ushort(name string) (v uint16, ok bool, err error) {
	if f.n == 0 {
		return 0, false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadUshort(f.b); err != nil {
		return 0, false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) ubyte(name string) (v uint8, ok bool, err error) {
	if f.n == 0 {
		return 0, false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadUbyte(f.b); err != nil {
		return 0, false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) boolean(name string) (v, ok bool, err error) {
	if f.n == 0 {
		return false, false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadBool(f.b); err != nil {
		return false, false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) str(name string) (v string, ok bool, err error) {
	if f.n == 0 {
		return "", false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadString(f.b); err != nil {
		return "", false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) address(name string) (v string, ok bool, err error) {
	if f.n == 0 {
		return "", false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadAddress(f.b); err != nil {
		return "", false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) sym(name string) (v Symbol, ok bool, err error) {
	if f.n == 0 {
		return "", false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadSymbol(f.b); err != nil {
		return "", false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) binary(name string) (v []byte, ok bool, err error) {
	if f.n == 0 {
		return nil, false, nil
	}
	f.n--
	if v, ok, f.b, err = ReadBinary(f.b); err != nil {
		return nil, false, f.wrap(name, err)
	}
	return v, ok, nil
}

func (f *fieldReader) symbols(name string) (v []Symbol, err error) {
	if f.n == 0 {
		return nil, nil
	}
	f.n--
	if v, f.b, err = ReadSymbols(f.b); err != nil {
		return nil, f.wrap(name, err)
	}
	return v, nil
}

func (f *fieldReader) fields(name string) (v Map, err error) {
	if f.n == 0 {
		return nil, nil
	}
	f.n--
	if v, f.b, err = f.dec.readMap(f.b); err != nil {
		return nil, f.wrap(name, err)
	}
	return v, nil
}

// anyValue decodes a field of any type.
func (f *fieldReader) anyValue(name string) (v any, err error) {
	if f.n == 0 {
		return nil, nil
	}
	f.n--
	if v, f.b, err = f.dec.value(f.b); err != nil {
		return nil, f.wrap(name, err)
	}
	return v, nil
}

func (f *fieldReader) err(name string) (e *Error, err error) {
	if f.n == 0 {
		return nil, nil
	}
	f.n--
	if e, f.b, err = readError(f.b); err != nil {
		return nil, f.wrap(name, err)
	}
	return e, nil
}

func (f *fieldReader) state(name string, st *DeliveryState) (err error) {
	*st = DeliveryState{}
	if f.n == 0 {
		return nil
	}
	f.n--
	if f.b, err = readDeliveryState(f.b, st); err != nil {
		return f.wrap(name, err)
	}
	return nil
}

// readError decodes an error (null gives nil).
func readError(b []byte) (*Error, []byte, error) {
	if len(b) > 0 && b[0] == TypeNull {
		return nil, b[1:], nil
	}
	f, rest, err := openDescribed(b, DescError, "error")
	if err != nil {
		return nil, b, err
	}
	e := &Error{}
	if err := e.unmarshalFields(&f); err != nil {
		return nil, b, err
	}
	return e, rest, nil
}

func (e *Error) unmarshalFields(f *fieldReader) error {
	cond, ok, err := f.sym("condition")
	if err != nil {
		return err
	}
	if !ok {
		return f.missing("condition")
	}
	e.Condition = ErrCond(cond)
	if e.Description, _, err = f.str("description"); err != nil {
		return err
	}
	if e.Info, err = f.fields("info"); err != nil {
		return err
	}
	return f.done()
}

// Unmarshal decodes an error (with its descriptor) into e and returns the
// bytes after it.
func (e *Error) Unmarshal(b []byte) (rest []byte, err error) {
	f, rest, err := openDescribed(b, DescError, "error")
	if err != nil {
		return b, err
	}
	*e = Error{}
	if err := e.unmarshalFields(&f); err != nil {
		return b, err
	}
	return rest, nil
}

// Append appends the described encoding of e (null when e is nil).
func (e *Error) Append(b []byte) []byte { return appendError(b, e) }
