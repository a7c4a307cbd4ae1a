package amqp091

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// decoder reads AMQP 0-9-1 domains (section 4.2.5) from a byte slice. The
// first failure sticks in err and every later read returns a zero value,
// so a method's Decode reads its fields straight through and checks once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail(fmt.Errorf("%w: %s needs %d octets, %d left", ErrTruncated, what, n, len(d.b)))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// octet, short, long and longlong are unsigned big-endian integers of 8,
// 16, 32 and 64 bits.
func (d *decoder) octet() uint8 {
	if v := d.take(1, "octet"); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) short() uint16 {
	if v := d.take(2, "short"); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) long() uint32 {
	if v := d.take(4, "long"); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) longlong() uint64 {
	if v := d.take(8, "longlong"); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// shortstrBytes is a shortstr (octet length, then at most 255 octets),
// aliasing the input.
func (d *decoder) shortstrBytes() []byte {
	n := d.octet()
	return d.take(int(n), "shortstr")
}

// shortstrTo decodes a shortstr into *dst. RabbitMQ's generated decoder
// checks UTF-8 only in methods without content
// (rabbit_binary_parser:assert_utf8/1, skipped for speed on publish,
// return, deliver and get-ok); checkUTF8 selects that.
//
// It keeps the string *dst holds when it has the same octets: a front end
// that decodes every publish into one struct allocates nothing for a
// repeated exchange or routing key.
func (d *decoder) shortstrTo(dst *string, checkUTF8 bool) {
	v := d.shortstrBytes()
	if checkUTF8 && d.err == nil && !utf8.Valid(v) {
		d.fail(ErrBadUTF8)
	}
	if *dst != string(v) {
		*dst = string(v)
	}
}

// longstrBytes is a longstr (long length, then octets), aliasing the input.
// The length is checked against what is left before anything is sliced.
func (d *decoder) longstrBytes() []byte {
	n := d.long()
	if d.err == nil && uint64(n) > uint64(len(d.b)) {
		d.fail(fmt.Errorf("%w: longstr of %d octets, %d left", ErrTruncated, n, len(d.b)))
		return nil
	}
	return d.take(int(n), "longstr")
}

func (d *decoder) longstr() string { return string(d.longstrBytes()) }

func (d *decoder) table() Table {
	raw := d.longstrBytes()
	if d.err != nil {
		return nil
	}
	t, err := parseTable(raw, 0)
	d.fail(err)
	return t
}

// finish reports the first failure, or trailing octets: RabbitMQ's
// decoder matches a method's whole argument list, so extra octets do not
// decode either.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d after the last field", ErrTrailing, len(d.b))
	}
	return d.err
}

// noArgs is Decode for a method without arguments.
func noArgs(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// appendIDs appends a method's class-id and method-id.
func appendIDs(b []byte, classID, methodID uint16) []byte {
	return append(b, byte(classID>>8), byte(classID), byte(methodID>>8), byte(methodID))
}

// appendShortstr appends a shortstr; the caller has checked len(s) <= 255
// (methods check all their shortstrs up front in validShortstrs).
func appendShortstr(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

func appendLongstr(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// flag is bit n of a packed bit octet when v is set: consecutive bit
// fields share octets, the first field in the lowest bit (section 4.2.5.2).
func flag(v bool, n uint) byte {
	if v {
		return 1 << n
	}
	return 0
}

// shortstrErr reports a string too long for a shortstr.
func shortstrErr(field string, n int) error {
	return fmt.Errorf("%w: %s is %d octets, a shortstr holds 255", ErrEncode, field, n)
}
