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

// fieldReader reads the fields of a described list in order, without
// allocating. It keeps the first error: after a read fails, or a mandatory
// field is missing, the later reads find no fields left and end returns
// that error. An unmarshal function is therefore the list of its fields
// followed by one call to end.
//
// A reader stores a field into its destination only when the field is
// present and not null, and reports whether it did. Absent and null fields
// leave the destination as it was, so the zero value or the default set
// before reading stands. Fields beyond those read are skipped by end, as
// the spec allows a later version to add fields.
type fieldReader struct {
	dec    decoder
	b      []byte
	n      int    // fields not yet read
	what   string // the composite being read, for errors
	absent string // the last field read that was absent or null, for mandatory
	err    error  // the first error
}

// openList starts reading the list value at b (after the descriptor) and
// returns the bytes after the list. An error is kept in f (and rest is b).
func openList(b []byte, what string) (f fieldReader, rest []byte) {
	f.what = what
	f.dec = newDecoder(b)
	if len(b) == 0 {
		f.err = fmt.Errorf("%s: %w", what, errTrunc("list"))
		return f, b
	}
	switch c := b[0]; c {
	case TypeList0:
		return f, b[1:]
	case TypeList8, TypeList32:
		n, body, rest, err := compoundHeader(c, b[1:])
		if err != nil {
			f.err = fmt.Errorf("%s: %w", what, err)
			return f, b
		}
		f.n, f.b = n, body
		return f, rest
	default:
		f.err = fmt.Errorf("%s: %w", what, errWrongType("list", c))
		return f, b
	}
}

// openDescribed checks the descriptor at b is want and starts reading its list.
func openDescribed(b []byte, want uint64, what string) (fieldReader, []byte) {
	code, rest, err := readDescriptor(b)
	if err != nil {
		return fieldReader{what: what, err: fmt.Errorf("%s: %w", what, err)}, b
	}
	if code != want {
		return fieldReader{what: what, err: fmt.Errorf("%w: %s: unexpected descriptor", ErrInvalidType, what)}, b
	}
	return openList(rest, what)
}

func (f *fieldReader) wrap(name string, err error) error {
	return fmt.Errorf("%s.%s: %w", f.what, name, err)
}

// fail keeps err as the first error and leaves no fields to read.
func (f *fieldReader) fail(err error) {
	f.err, f.n = err, 0
}

// next takes the next field, if there is one left (none after an error).
func (f *fieldReader) next(name string) bool {
	if f.n == 0 {
		f.absent = name
		return false
	}
	f.n--
	return true
}

// mandatory fails with a missing-field error unless the field just read
// was present.
func (f *fieldReader) mandatory(present bool) {
	if !present && f.err == nil {
		f.missing()
	}
}

// missing fails with the error for a missing mandatory field; it is apart
// from mandatory so that mandatory inlines.
func (f *fieldReader) missing() {
	f.fail(fmt.Errorf("%w: %s.%s is mandatory", ErrInvalidField, f.what, f.absent))
}

// done skips fields this package does not know and checks the list is
// exhausted; it returns the first error.
func (f *fieldReader) done() error {
	if f.err != nil {
		return f.err
	}
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

// end finishes an unmarshal: it returns rest, the bytes after the list, or
// in (the unmarshal's input) and the first error.
func (f *fieldReader) end(in, rest []byte) ([]byte, error) {
	if err := f.done(); err != nil {
		return in, err
	}
	return rest, nil
}

// readField reads one field with decode, a Read* function of this package.
func readField[T any](f *fieldReader, name string, dst *T, decode func([]byte) (T, bool, []byte, error)) bool {
	if !f.next(name) {
		return false
	}
	v, ok, rest, err := decode(f.b)
	if err != nil {
		f.fail(f.wrap(name, err))
		return false
	}
	f.b = rest
	if !ok {
		f.absent = name
		return false
	}
	*dst = v
	return true
}

func (f *fieldReader) uint(name string, dst *uint32) bool { return readField(f, name, dst, ReadUint) }

func (f *fieldReader) ulong(name string, dst *uint64) bool { return readField(f, name, dst, ReadULong) }

func (f *fieldReader) ushort(name string, dst *uint16) bool {
	return readField(f, name, dst, ReadUshort)
}

func (f *fieldReader) ubyte(name string, dst *uint8) bool { return readField(f, name, dst, ReadUbyte) }

func (f *fieldReader) boolean(name string, dst *bool) bool { return readField(f, name, dst, ReadBool) }

func (f *fieldReader) str(name string, dst *string) bool { return readField(f, name, dst, ReadString) }

// address reads a string or a symbol.
func (f *fieldReader) address(name string, dst *string) bool {
	return readField(f, name, dst, ReadAddress)
}

func (f *fieldReader) sym(name string, dst *Symbol) bool { return readField(f, name, dst, ReadSymbol) }

// binary reads a binary field; the value aliases the input.
func (f *fieldReader) binary(name string, dst *[]byte) bool {
	return readField(f, name, dst, ReadBinary)
}

func (f *fieldReader) timestamp(name string, dst *Timestamp) bool {
	return readField(f, name, dst, ReadTimestamp)
}

// enum reads a ubyte field whose values above highest are invalid.
func (f *fieldReader) enum(name string, dst *uint8, highest uint8) bool {
	var v uint8
	if !f.ubyte(name, &v) {
		return false
	}
	if v > highest {
		f.outOfRange(name, v)
		return false
	}
	*dst = v
	return true
}

func (f *fieldReader) outOfRange(name string, v uint8) {
	f.fail(fmt.Errorf("%w: %s.%s %d", ErrInvalidField, f.what, name, v))
}

// symbols reads a multiple="true" symbol field (a symbol or an array).
func (f *fieldReader) symbols(name string, dst *[]Symbol) bool {
	if !f.next(name) {
		return false
	}
	v, rest, err := ReadSymbols(f.b)
	if err != nil {
		f.fail(f.wrap(name, err))
		return false
	}
	f.b = rest
	if v == nil { // null; a present field gives a non-nil slice
		f.absent = name
		return false
	}
	*dst = v
	return true
}

// fields reads a map field.
func (f *fieldReader) fields(name string, dst *Map) bool {
	if !f.next(name) {
		return false
	}
	v, rest, err := f.dec.readMap(f.b)
	if err != nil {
		f.fail(f.wrap(name, err))
		return false
	}
	f.b = rest
	if v == nil {
		f.absent = name
		return false
	}
	*dst = v
	return true
}

// anyValue reads a field of any type (null stores nil).
func (f *fieldReader) anyValue(name string, dst *any) {
	if !f.next(name) {
		return
	}
	v, rest, err := f.dec.value(f.b)
	if err != nil {
		f.fail(f.wrap(name, err))
		return
	}
	f.b, *dst = rest, v
}

// skip passes over a field without decoding it.
func (f *fieldReader) skip(name string) {
	if !f.next(name) {
		return
	}
	rest, err := skipValue(f.b, 0)
	if err != nil {
		f.fail(f.wrap(name, err))
		return
	}
	f.b = rest
}

// state reads a delivery-state field into st, which is zeroed first (null
// leaves Kind StateNone).
func (f *fieldReader) state(name string, st *DeliveryState) {
	*st = DeliveryState{}
	if !f.next(name) {
		return
	}
	rest, err := readDeliveryState(f.b, st)
	if err != nil {
		f.fail(f.wrap(name, err))
		return
	}
	f.b = rest
}

// composite reads an optional described composite (an error, source,
// target or outcome) into a newly allocated T; null leaves nil.
func composite[T any, P interface {
	*T
	Unmarshal([]byte) ([]byte, error)
}](f *fieldReader, name string, dst *P) {
	if !f.next(name) {
		return
	}
	if len(f.b) > 0 && f.b[0] == TypeNull {
		f.b = f.b[1:]
		return
	}
	v := P(new(T))
	rest, err := v.Unmarshal(f.b)
	if err != nil {
		f.fail(f.wrap(name, err))
		return
	}
	f.b, *dst = rest, v
}

// Unmarshal decodes an error (with its descriptor) into e and returns the
// bytes after it.
func (e *Error) Unmarshal(b []byte) (rest []byte, err error) {
	f, rest := openDescribed(b, DescError, "error")
	*e = Error{}
	f.mandatory(f.sym("condition", (*Symbol)(&e.Condition)))
	f.str("description", &e.Description)
	f.fields("info", &e.Info)
	return f.end(b, rest)
}

// Append appends the described encoding of e (null when e is nil).
func (e *Error) Append(b []byte) []byte { return appendError(b, e) }
