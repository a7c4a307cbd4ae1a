package amqp10

import (
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// valueCases are encoded by AppendValue to exactly wire and decoded by
// ReadValue back to v.
var valueCases = []struct {
	name string
	v    any
	wire string
}{
	{"null", nil, "40"},
	{"true", true, "41"},
	{"false", false, "42"},
	{"ubyte", uint8(0xfe), "50 fe"},
	{"ushort", uint16(0x1234), "60 12 34"},
	{"uint0", uint32(0), "43"},
	{"smalluint", uint32(255), "52 ff"},
	{"uint", uint32(256), "70 00 00 01 00"},
	{"ulong0", uint64(0), "44"},
	{"smallulong", uint64(7), "53 07"},
	{"ulong", uint64(1 << 40), "80 00 00 01 00 00 00 00 00"},
	{"byte", int8(-2), "51 fe"},
	{"short", int16(-2), "61 ff fe"},
	{"smallint", int32(-128), "54 80"},
	{"int", int32(128), "71 00 00 00 80"},
	{"smalllong", int64(127), "55 7f"},
	{"long", int64(-129), "81 ff ff ff ff ff ff ff 7f"},
	{"float", float32(1.5), "72 3f c0 00 00"},
	{"double", float64(-2), "82 c0 00 00 00 00 00 00 00"},
	{"decimal32", Decimal32{1, 2, 3, 4}, "74 01 02 03 04"},
	{"decimal64", Decimal64{1, 2, 3, 4, 5, 6, 7, 8}, "84 01 02 03 04 05 06 07 08"},
	{"decimal128", Decimal128{15: 9}, "94 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 09"},
	{"char", Char('€'), "73 00 00 20 ac"},
	{"timestamp", Timestamp(1700000000000), "83 00 00 01 8b cf e5 68 00"},
	{"uuid", UUID{0: 0xde, 15: 0xad}, "98 de 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ad"},
	{"vbin8", []byte{1, 2}, "a0 02 01 02"},
	{"str8", "hi", `a1 02 "hi"`},
	{"sym8", Symbol("ab"), `a3 02 "ab"`},
	{"list0", List{}, "45"},
	{"list8", List{uint32(1), "a"}, `c0 06 02 52 01 a1 01 "a"`},
	{"map8", Map{{Key: Symbol("k"), Value: int64(1)}}, `c1 06 02 a3 01 "k" 55 01`},
	{"array8 of sym32", &Array{Type: TypeSym32, Elems: []any{Symbol("a"), Symbol("bc")}},
		`e0 0d 02 b3 00 00 00 01 "a" 00 00 00 02 "bc"`},
	{"array8 of uint", &Array{Type: TypeUint, Elems: []any{uint32(1)}}, "e0 06 01 70 00 00 00 01"},
	{"array8 of ulong", &Array{Type: TypeULong, Elems: []any{uint64(2)}}, "e0 0a 01 80 00 00 00 00 00 00 00 02"},
	{"array8 of int", &Array{Type: TypeInt, Elems: []any{int32(-1)}}, "e0 06 01 71 ff ff ff ff"},
	{"array8 of long", &Array{Type: TypeLong, Elems: []any{int64(3)}}, "e0 0a 01 81 00 00 00 00 00 00 00 03"},
	{"array8 of boolean", &Array{Type: TypeBoolean, Elems: []any{true, false}}, "e0 04 02 56 01 00"},
	{"array8 of binary", &Array{Type: TypeBinary32, Elems: []any{[]byte{7}}}, "e0 07 01 b0 00 00 00 01 07"},
	{"array8 of list32", &Array{Type: TypeList32, Elems: []any{List{true}}}, "e0 0b 01 d0 00 00 00 05 00 00 00 01 41"},
	{"array8 of array32", &Array{Type: TypeArray32, Elems: []any{&Array{Type: TypeUint, Elems: []any{uint32(5)}}}},
		"e0 0f 01 f0 00 00 00 09 00 00 00 01 70 00 00 00 05"},
	{"array of described", &Array{Type: TypeSym8, Descriptor: uint64(0x1234), Elems: []any{Symbol("x")}},
		`e0 0e 01 00 80 00 00 00 00 00 00 12 34 a3 01 "x"`},
	{"array of nulls", &Array{Type: TypeNull, Elems: []any{nil, nil, nil}}, "e0 02 03 40"},
	{"empty array", &Array{Type: TypeSym32, Elems: []any{}}, "e0 02 00 b3"},
	{"described", &Described{Descriptor: Symbol("x:y"), Value: "v"}, `00 a3 03 "x:y" a1 01 "v"`},
	{"described numeric", &Described{Descriptor: uint64(0x77), Value: List{}}, `00 53 77 45`},
}

func TestValueTable(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			wire := hx(tc.wire)
			got, err := AppendValue(nil, tc.v)
			require.NoError(t, err)
			assert.Equal(t, hex.EncodeToString(wire), hex.EncodeToString(got), "encode")

			v, rest, err := ReadValue(append(wire, 0xff))
			require.NoError(t, err)
			assert.Equal(t, []byte{0xff}, rest)
			assert.Equal(t, tc.v, v, "decode")

			skipped, err := SkipValue(wire)
			require.NoError(t, err)
			assert.Empty(t, skipped)
		})
	}
}

// decodeOnly are wire forms the encoder never produces at top level.
var decodeOnly = []struct {
	name string
	wire string
	v    any
}{
	{"boolean 0x56 true", "56 01", true},
	{"boolean 0x56 false", "56 00", false},
	{"uint as 0x70", "70 00 00 00 05", uint32(5)},
	{"ulong as 0x80", "80 00 00 00 00 00 00 00 05", uint64(5)},
	{"int as 0x71", "71 00 00 00 05", int32(5)},
	{"long as 0x81", "81 00 00 00 00 00 00 00 05", int64(5)},
	{"vbin32", "b0 00 00 00 01 09", []byte{9}},
	{"str32", `b1 00 00 00 01 "z"`, "z"},
	{"sym32", `b3 00 00 00 01 "z"`, Symbol("z")},
	{"list32", "d0 00 00 00 05 00 00 00 01 43", List{uint32(0)}},
	{"map32", "d1 00 00 00 06 00 00 00 02 44 42", Map{{Key: uint64(0), Value: false}}},
	{"array32", "f0 00 00 00 07 00 00 00 02 52 01 02", &Array{Type: TypeSmallUint, Elems: []any{uint32(1), uint32(2)}}},
	{"array of list0", "e0 02 02 45", &Array{Type: TypeList0, Elems: []any{List{}, List{}}}},
	{"array of true", "e0 02 02 41", &Array{Type: TypeTrue, Elems: []any{true, true}}},
	{"array of map8", "e0 06 01 c1 03 02 41 42", &Array{Type: TypeMap8, Elems: []any{Map{{Key: true, Value: false}}}}},
}

func TestDecodeOnly(t *testing.T) {
	for _, tc := range decodeOnly {
		t.Run(tc.name, func(t *testing.T) {
			v, rest, err := ReadValue(hx(tc.wire))
			require.NoError(t, err)
			require.Empty(t, rest)
			require.Equal(t, tc.v, v)
			// Arrays keep their wire element constructor and re-encode exactly.
			if a, ok := tc.v.(*Array); ok {
				out, err := AppendValue(nil, a)
				require.NoError(t, err)
				if tc.wire[0] == 'e' {
					require.Equal(t, hx(tc.wire), out)
				}
			}
		})
	}
}

func TestLargeForms(t *testing.T) {
	long := strings.Repeat("x", 300)
	b, err := AppendValue(nil, long)
	require.NoError(t, err)
	require.Equal(t, hx("b1 00 00 01 2c"), b[:5])
	b, _ = AppendValue(nil, Symbol(long))
	require.Equal(t, hx("b3 00 00 01 2c"), b[:5])
	b, _ = AppendValue(nil, []byte(long))
	require.Equal(t, hx("b0 00 00 01 2c"), b[:5])
	b, _ = AppendValue(nil, List{long})
	require.Equal(t, hx("d0 00 00 01 35 00 00 00 01 b1"), b[:10])
	b, _ = AppendValue(nil, Map{{Key: "k", Value: long}})
	require.Equal(t, TypeMap32, b[0])
	elems := make([]any, 255)
	for i := range elems {
		elems[i] = true
	}
	b, _ = AppendValue(nil, &Array{Type: TypeBoolean, Elems: elems})
	require.Equal(t, hx("f0 00 00 01 04 00 00 00 ff 56"), b[:10])
	for _, v := range []any{long, Symbol(long), []byte(long), List{long}, Map{{Key: "k", Value: long}}, &Array{Type: TypeBoolean, Elems: elems}} {
		got, rest, err := ReadValue(mustAppend(t, v))
		require.NoError(t, err)
		require.Empty(t, rest)
		require.Equal(t, v, got)
	}
}

func mustAppend(t testing.TB, v any) []byte {
	t.Helper()
	b, err := AppendValue(nil, v)
	require.NoError(t, err)
	return b
}

func TestConveniences(t *testing.T) {
	require.Equal(t, hx(`e0 0b 02 b1 00 00 00 01 "a" 00 00 00 00`), mustAppend(t, []string{"a", ""}))
	require.Equal(t, hx(`e0 07 01 b3 00 00 00 01 "a"`), mustAppend(t, []Symbol{"a"}))
	require.Equal(t, hx("55 05"), mustAppend(t, 5))
	require.Equal(t, hx("53 05"), mustAppend(t, uint(5)))
	_, err := AppendValue(nil, struct{}{})
	require.ErrorIs(t, err, ErrInvalidType)
	_, err = AppendValue(nil, &Array{Type: TypeStr32, Elems: []any{uint32(1)}})
	require.ErrorIs(t, err, ErrInvalidType)
	// Symbols field forms.
	require.Equal(t, hx("40"), AppendSymbols(nil, nil))
	require.Equal(t, hx(`a3 01 "a"`), AppendSymbols(nil, []Symbol{"a"}))
	require.Equal(t, hx(`e0 0c 02 b3 00 00 00 01 "a" 00 00 00 01 "b"`), AppendSymbols(nil, []Symbol{"a", "b"}))
	for _, w := range []string{"40", `a3 01 "a"`, `e0 0c 02 b3 00 00 00 01 "a" 00 00 00 01 "b"`, `e0 06 02 a3 01 "a" 01 "b"`} {
		_, rest, err := ReadSymbols(hx(w))
		require.NoError(t, err, w)
		require.Empty(t, rest)
	}
	// A self-referencing list is rejected rather than overflowing the stack.
	l := List{nil}
	l[0] = l
	_, err = AppendValue(nil, l)
	require.ErrorIs(t, err, ErrTooDeep)
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct {
		name string
		wire string
		err  error
	}{
		{"empty", "", ErrTruncated},
		{"bad ctor", "ff", ErrInvalidType},
		{"reserved ctor", "57", ErrInvalidType},
		{"short uint", "70 00 00", ErrTruncated},
		{"short str8", "a1 05 61", ErrTruncated},
		{"str32 huge", "b1 ff ff ff ff 61", ErrTruncated},
		{"list8 count > bytes", "c0 02 10 40", ErrTruncated},
		{"list32 huge count", "d0 00 00 00 04 7f ff ff ff", ErrTruncated},
		{"list32 huge size", "d0 7f ff ff ff 00 00 00 01 40", ErrTruncated},
		{"map odd count", "c1 02 01 40", ErrInvalidField},
		{"array count > bytes", "e0 03 10 70 00", ErrTruncated},
		{"array32 huge count", "f0 00 00 00 05 7f ff ff ff 70", ErrTruncated},
		{"zero-width array huge", "f0 00 00 00 05 00 00 ff ff 40", ErrInvalidField},
		{"list trailing garbage", "c0 03 01 40 40", ErrInvalidField},
		{"bool 0x56 bad", "56 02", ErrInvalidField},
		{"duplicate map key", `c1 09 04 a3 01 "a" 40 a3 01 "a" 40`, ErrInvalidField},
		{"nested descriptor in array", "e0 05 01 00 53 01 00", ErrInvalidType},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadValue(hx(tc.wire))
			require.ErrorIs(t, err, tc.err)
		})
	}
	// Depth limit.
	nested := hx("45")
	for i := 0; i < MaxDepth+1; i++ {
		nested = append([]byte{TypeList32, 0, 0, 0, 0, 0, 0, 0, 1}, nested...)
		size := uint32(len(nested) - 5)
		nested[1], nested[2], nested[3], nested[4] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	}
	_, _, err := ReadValue(nested)
	require.ErrorIs(t, err, ErrTooDeep)
	_, _, err = ReadValue(nested[9:])
	require.NoError(t, err)
	descs := []byte{}
	for i := 0; i < MaxDepth+1; i++ {
		descs = append(descs, 0x00, 0x40)
	}
	descs = append(descs, 0x40)
	_, _, err = ReadValue(descs)
	require.ErrorIs(t, err, ErrTooDeep)
	_, err = SkipValue(descs)
	require.ErrorIs(t, err, ErrTooDeep)
}

func TestTypedReaders(t *testing.T) {
	v, ok, rest, err := ReadUint(hx("52 07 40"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint32(7), v)
	_, ok, _, err = ReadUint(rest)
	require.NoError(t, err)
	require.False(t, ok)
	_, _, _, err = ReadUint(hx("53 07"))
	require.ErrorIs(t, err, ErrInvalidField)
	u, ok, _, err := ReadULong(hx("80 00 00 00 00 00 00 01 00"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(256), u)
	s, ok, _, err := ReadString(hx(`a1 01 "q"`))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "q", s)
	_, _, _, err = ReadString(hx(`a3 01 "q"`))
	require.ErrorIs(t, err, ErrInvalidField)
	m, _, err := ReadMap(hx("40"))
	require.NoError(t, err)
	require.Nil(t, m)
	m, _, err = ReadMap(hx(`c1 04 02 a1 00 41`))
	require.NoError(t, err)
	require.Equal(t, Map{{Key: "", Value: true}}, m)
	_, _, err = ReadMap(hx("45"))
	require.ErrorIs(t, err, ErrInvalidField)
}

func TestMapHelpers(t *testing.T) {
	m := Map{}.Set(Symbol("a"), 1).Set(Symbol("b"), 2).Set(Symbol("a"), 3)
	require.Equal(t, Map{{Key: Symbol("a"), Value: 3}, {Key: Symbol("b"), Value: 2}}, m)
	v, ok := m.Get(Symbol("b"))
	require.True(t, ok)
	require.Equal(t, 2, v)
	m = m.Delete(Symbol("a"))
	require.Equal(t, Map{{Key: Symbol("b"), Value: 2}}, m)
}

func TestFloatSpecials(t *testing.T) {
	b := mustAppend(t, math.Inf(1))
	v, _, err := ReadValue(b)
	require.NoError(t, err)
	require.True(t, math.IsInf(v.(float64), 1))
}

func TestErrorsWrap(t *testing.T) {
	_, _, err := ReadValue(hx("c0 02 10 40"))
	require.True(t, errors.Is(err, ErrTruncated))
}

func TestRawAppendsVerbatim(t *testing.T) {
	enc, err := AppendValue(nil, Map{{Key: Symbol("k"), Value: uint64(7)}})
	require.NoError(t, err)
	got, err := AppendValue([]byte{1}, Raw(enc))
	require.NoError(t, err)
	require.Equal(t, append([]byte{1}, enc...), got)
	got, err = AppendMap(nil, Map{{Key: Symbol("a"), Value: Raw(enc)}})
	require.NoError(t, err)
	v, _, err := ReadValue(got)
	require.NoError(t, err)
	require.Equal(t, Map{{Key: Symbol("a"), Value: Map{{Key: Symbol("k"), Value: uint64(7)}}}}, v)
	_, err = AppendValue(nil, Raw(nil))
	require.ErrorIs(t, err, ErrInvalidType)
}
