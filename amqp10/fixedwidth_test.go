package amqp10

import (
	"errors"
	"fmt"
	"testing"
)

// Every encoding of each fixed-width type, null, too few bytes and another
// type's constructor: the value, presence, the rest of the input, and the
// error, as each typed reader gives them.
func TestFixedWidthReaders(t *testing.T) {
	type result struct {
		v    uint64
		ok   bool
		rest string
		err  error
	}
	wrap := func(v uint64, ok bool, rest []byte, err error) result {
		return result{v, ok, fmt.Sprintf("% x", rest), err}
	}
	readers := map[string]func([]byte) result{
		"ubyte": func(b []byte) result { v, ok, r, err := ReadUbyte(b); return wrap(uint64(v), ok, r, err) },
		"ushort": func(b []byte) result {
			v, ok, r, err := ReadUshort(b)
			return wrap(uint64(v), ok, r, err)
		},
		"uint":  func(b []byte) result { v, ok, r, err := ReadUint(b); return wrap(uint64(v), ok, r, err) },
		"ulong": func(b []byte) result { v, ok, r, err := ReadULong(b); return wrap(v, ok, r, err) },
		"timestamp": func(b []byte) result {
			v, ok, r, err := ReadTimestamp(b)
			return wrap(uint64(v), ok, r, err)
		},
	}
	for _, tc := range []struct {
		typ, in string
		want    result
	}{
		{"ubyte", "50 fe ff", result{0xfe, true, "ff", nil}},
		{"ushort", "60 01 02 ff", result{0x102, true, "ff", nil}},
		{"uint", "43 ff", result{0, true, "ff", nil}},
		{"uint", "52 07 ff", result{7, true, "ff", nil}},
		{"uint", "70 01 02 03 04 ff", result{0x01020304, true, "ff", nil}},
		{"ulong", "44 ff", result{0, true, "ff", nil}},
		{"ulong", "53 07 ff", result{7, true, "ff", nil}},
		{"ulong", "80 01 02 03 04 05 06 07 08 ff", result{0x0102030405060708, true, "ff", nil}},
		{"timestamp", "83 00 00 01 00 00 00 00 01 ff", result{1<<40 + 1, true, "ff", nil}},
	} {
		if got := readers[tc.typ](hx(tc.in)); got != tc.want {
			t.Errorf("%s of %s: %+v, want %+v", tc.typ, tc.in, got, tc.want)
		}
	}
	wrongs := map[string]string{"ubyte": "60", "ushort": "50", "uint": "53", "ulong": "52", "timestamp": "80"}
	fulls := map[string]string{"ubyte": "50", "ushort": "60 01", "uint": "70 01 02 03", "ulong": "80 01 02 03 04 05 06 07",
		"timestamp": "83 01 02 03 04 05 06 07"}
	for typ, read := range readers {
		if got := read(hx("40 ff")); got != (result{0, false, "ff", nil}) {
			t.Errorf("%s of null: %+v", typ, got)
		}
		for _, in := range []string{"", fulls[typ]} {
			if got := read(hx(in)); !errors.Is(got.err, ErrTruncated) || got.ok || got.rest != in {
				t.Errorf("%s of %q: %+v, want truncated with the input left", typ, in, got)
			}
		}
		if got := read(hx(wrongs[typ] + " 00 00 00 00 00 00 00 00")); !errors.Is(got.err, ErrInvalidField) || got.ok ||
			got.rest[:2] != wrongs[typ] {
			t.Errorf("%s of constructor %s: %+v, want a wrong-type error with the input left", typ, wrongs[typ], got)
		}
	}
}
