package annotations

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// Hand encoders for the alternative encodings (test only).

func v8(c byte, s string) []byte { return append([]byte{c, byte(len(s))}, s...) }

func v32(c byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{c}, uint32(len(s))), s...)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// c8 and c32 encode a list, map or array (for an array, body starts with
// the element constructor).
func c8(c byte, count int, body ...[]byte) []byte {
	b := cat(body...)
	return append([]byte{c, byte(len(b) + 1), byte(count)}, b...)
}

func c32(c byte, count int, body ...[]byte) []byte {
	b := cat(body...)
	h := binary.BigEndian.AppendUint32([]byte{c}, uint32(len(b)+4))
	return append(binary.BigEndian.AppendUint32(h, uint32(count)), b...)
}

// elem drops the constructor of a value, making it an array element.
func elem(b []byte) []byte { return b[1:] }

func ts(v int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{amqp10.TypeTimestamp}, uint64(v))
}

func ulong(v uint64) []byte { return binary.BigEndian.AppendUint64([]byte{amqp10.TypeULong}, v) }

func uint32v(v uint32) []byte { return binary.BigEndian.AppendUint32([]byte{amqp10.TypeUint}, v) }

var (
	s8   = func(s string) []byte { return v8(amqp10.TypeStr8, s) }
	s32  = func(s string) []byte { return v32(amqp10.TypeStr32, s) }
	y8   = func(s string) []byte { return v8(amqp10.TypeSym8, s) }
	y32  = func(s string) []byte { return v32(amqp10.TypeSym32, s) }
	null = []byte{amqp10.TypeNull}
)

const t0 = 1700000000000

// q1Expired is the death whose exact bytes are golden13 (deaths_test.go).
var q1Expired = Death{Queue: "q1", Reason: ReasonExpired, Count: 1, FirstTime: t0, LastTime: t0,
	RoutingKeys: []string{"q1"}}

// stdFields are the seven fields of q1Expired, sym8 keys, in RabbitMQ's
// order, with the given encodings of count and routing-keys.
func stdFields(count, keys []byte) []byte {
	return cat(y8("queue"), s8("q1"), y8("reason"), y8("expired"), y8("count"), count,
		y8("first-time"), ts(t0), y8("last-time"), ts(t0), y8("exchange"), s8(""), y8("routing-keys"), keys)
}

var smallOne = []byte{amqp10.TypeSmallULong, 1}

// rk8 is routing-keys ["q1"] as array8 of str32, as RabbitMQ writes it.
var rk8 = c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeStr32}, elem(s32("q1")))

type rawCase struct {
	label string
	wire  []byte
	want  []Death
}

func with(d Death, f func(*Death)) Death {
	f(&d)
	return d
}

// altCases are encodings of x-opt-deaths the direct decoder accepts.
func altCases() []rawCase {
	golden := goldenBytes()
	map8 := c8(amqp10.TypeMap8, 14, stdFields(smallOne, rk8))
	return []rawCase{
		{"rabbitmq reference bytes", golden, []Death{q1Expired}},
		{"array8 of map8, sym8, str8, smallulong, array8 of str8",
			c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8},
				elem(c8(amqp10.TypeMap8, 14, stdFields(smallOne, c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeStr8}, elem(s8("q1"))))))),
			[]Death{q1Expired}},
		{"array32 of map32, sym32, str32, ulong, array32 of str32, uint ttl",
			c32(amqp10.TypeArray32, 1, []byte{amqp10.TypeMap32}, elem(c32(amqp10.TypeMap32, 16,
				y32("ttl"), uint32v(70000),
				y32("queue"), s32("q1"), y32("reason"), y32("expired"), y32("count"), ulong(300),
				y32("first-time"), ts(t0), y32("last-time"), ts(t0+5), y32("exchange"), s32("x"),
				y32("routing-keys"), c32(amqp10.TypeArray32, 2, []byte{amqp10.TypeStr32}, elem(s32("a")), elem(s32("bb")))))),
			[]Death{with(q1Expired, func(d *Death) {
				d.TTL, d.HasTTL, d.Count, d.LastTime, d.Exchange, d.RoutingKeys = 70000, true, 300, t0+5, "x", []string{"a", "bb"}
			})}},
		{"ulong0 count, uint0 ttl, list8 of mixed str8/str32",
			c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 16,
				y8("ttl"), []byte{amqp10.TypeUint0},
				stdFields([]byte{amqp10.TypeULong0}, c8(amqp10.TypeList8, 2, s8("q1"), s32("k2")))))),
			[]Death{with(q1Expired, func(d *Death) { d.Count, d.HasTTL, d.RoutingKeys = 0, true, []string{"q1", "k2"} })}},
		{"smalluint ttl, list32 routing keys",
			c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap32}, elem(c32(amqp10.TypeMap32, 16,
				y8("ttl"), []byte{amqp10.TypeSmallUint, 10},
				stdFields(smallOne, c32(amqp10.TypeList32, 1, s8("q1")))))),
			[]Death{with(q1Expired, func(d *Death) { d.TTL, d.HasTTL = 10, true })}},
		{"list0 and empty array routing keys, any key order, unknown scalar keys",
			c8(amqp10.TypeArray8, 2, []byte{amqp10.TypeMap8},
				elem(c8(amqp10.TypeMap8, 12,
					y8("routing-keys"), []byte{amqp10.TypeList0}, y8("reason"), y8("maxlen"), y8("queue"), s8("q"),
					y8("x-custom"), s8("v"), y8("x-n"), ulong(9), y8("x-b"), []byte{amqp10.TypeBoolean, 1})),
				elem(c8(amqp10.TypeMap8, 10,
					y8("x-null"), null, y8("queue"), s8("r"), y8("routing-keys"), c8(amqp10.TypeArray8, 0, []byte{amqp10.TypeStr32}),
					y8("reason"), y8("my-reason"), y8("x-bin"), v8(amqp10.TypeBinary8, "\x00\x01")))),
			[]Death{{Queue: "q", Reason: ReasonMaxLen}, {Queue: "r", Reason: "my-reason"}}},
		{"routing keys: empty array without element constructor",
			c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 4,
				y8("queue"), s8("q"), y8("routing-keys"), c8(amqp10.TypeArray8, 0)))),
			[]Death{{Queue: "q"}}},
		{"reason only", c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 2, y8("reason"), y8("rejected")))),
			[]Death{{Reason: ReasonRejected}}},
		{"two deaths, map8 and map32 widths", c32(amqp10.TypeArray32, 2, []byte{amqp10.TypeMap8}, elem(map8), elem(map8)),
			[]Death{q1Expired, q1Expired}},
		{"empty array8", c8(amqp10.TypeArray8, 0), nil},
		{"empty array of map32", c8(amqp10.TypeArray8, 0, []byte{amqp10.TypeMap32}), nil},
		{"empty array32", c32(amqp10.TypeArray32, 0), nil},
		{"bytes after the value are ignored", append(append([]byte(nil), golden...), 0xff, 0x00), []Death{q1Expired}},
	}
}

// outsideCases are valid encodings the direct decoder hands to the generic one.
func outsideCases() []rawCase {
	std := stdFields(smallOne, rk8)
	return []rawCase{
		{"described map elements",
			c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeDescribed, amqp10.TypeSmallULong, 7, amqp10.TypeMap8},
				elem(c8(amqp10.TypeMap8, 14, std))),
			[]Death{q1Expired}},
		{"non-symbol key", c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 16,
			s8("queue"), s8("ignored"), std))),
			[]Death{q1Expired}},
		{"compound value under an unknown key", c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 16,
			y8("x-list"), c8(amqp10.TypeList8, 1, null), std))),
			[]Death{q1Expired}},
		{"empty array of another type", c8(amqp10.TypeArray8, 0, []byte{amqp10.TypeUint}), nil},
		{"routing keys: empty array of symbols", c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 4,
			y8("queue"), s8("q"), y8("routing-keys"), c8(amqp10.TypeArray8, 0, []byte{amqp10.TypeSym8})))),
			[]Death{{Queue: "q"}}},
	}
}

// malformedCases are rejected by both decoders.
func malformedCases() [][]byte {
	m := func(fields ...[]byte) []byte {
		return c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, len(fields), fields...)))
	}
	std := stdFields(smallOne, rk8)
	return [][]byte{
		{},
		null,
		c8(amqp10.TypeList8, 0),
		m(y8("queue"), s8("a"), y8("queue"), s8("b")),            // duplicate key
		m(y8("queue"), s8("a"), y32("queue"), s8("b")),           // duplicate key, two widths
		m(y8("x"), s8("a"), y8("x"), null, y8("queue"), s8("b")), // duplicate unknown key
		m(y8("queue"), y8("q")),                                  // queue as a symbol
		m(y8("reason"), s8("expired")),                           // reason as a string
		m(y8("queue"), s8("q"), y8("count"), uint32v(1)),         // count as a uint
		m(y8("queue"), s8("q"), y8("ttl"), ulong(1)),             // ttl as a ulong
		m(y8("queue"), s8("q"), y8("first-time"), ulong(1)),      // time as a ulong
		m(y8("queue"), s8("q"), y8("count"), null),               // null count
		m(y8("queue"), s8("q"), y8("routing-keys"), c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeSym8}, elem(y8("k")))),
		m(y8("queue"), s8("q"), y8("routing-keys"), c8(amqp10.TypeList8, 1, ulong(1))),
		m(y8("queue"), s8("q"), y8("routing-keys"), s8("k")),
		m(y8("queue"), s8(""), y8("exchange"), s8("x")), // neither queue nor reason
		m(y8("queue"), s8("q"), y8("x-b"), []byte{amqp10.TypeBoolean, 2}),
		m(y8("queue"), s8("q"), y8("x-bad"), []byte{0x46}),
		c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 13, std))), // odd count
		c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeList8}, elem(c8(amqp10.TypeList8, 0))),     // not maps
		c8(amqp10.TypeArray8, 2, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 14, std))), // count too high
		{amqp10.TypeArray8, 0, 0}, // size smaller than the count field
		{amqp10.TypeArray32, 0, 0, 0, 3, 0, 0, 0, 0},
		c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 14, std)))[:20],       // truncated
		c8(amqp10.TypeArray8, 1, []byte{amqp10.TypeMap8}, elem(c8(amqp10.TypeMap8, 14, std)), []byte{0}), // trailing element bytes
		c8(amqp10.TypeArray8, 0, []byte{amqp10.TypeMap8}, []byte{1}),
	}
}

// goldenBytes is golden13 as bytes.
func goldenBytes() []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(golden13), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// genericDeaths decodes b the generic way: amqp10.ReadValue, then Decode
// on the decoded value.
func genericDeaths(b []byte) ([]Death, error) {
	v, _, err := amqp10.ReadValue(b)
	if err != nil {
		return nil, err
	}
	h, _, err := Decode(value.Map{{Key: KeyDeaths, Value: v}})
	return h.Deaths, err
}

// checkRawAgrees checks the direct decoder against the generic one on b:
// what the direct decoder accepts the generic one accepts identically, what
// it calls malformed the generic one rejects, and Decode on the bytes as a
// Raw always gives the generic result.
func checkRawAgrees(t *testing.T, b []byte) (direct error) {
	t.Helper()
	in := append([]byte(nil), b...)
	got, err := decodeRawDeaths(b)
	require.True(t, bytes.Equal(in, b), "the direct decoder modified its input")
	want, gerr := genericDeaths(b)
	switch {
	case err == nil:
		require.NoError(t, gerr, "direct accepted %x, generic did not", b)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%x: direct %#v, generic %#v", b, got, want)
		}
	case errors.Is(err, errRawMalformed):
		require.Error(t, gerr, "direct rejected %x, generic accepted %#v", b, want)
	case errors.Is(err, errRawUnsupported):
	default:
		t.Fatalf("unexpected error class: %v", err)
	}
	h, ok, derr := Decode(value.Map{{Key: KeyDeaths, Value: amqp10.Raw(b)}})
	require.True(t, ok)
	if gerr != nil {
		require.ErrorIs(t, derr, ErrMalformed)
		require.Equal(t, History{}, h)
	} else {
		require.NoError(t, derr)
		if !reflect.DeepEqual(want, h.Deaths) {
			t.Fatalf("%x: Decode %#v, generic %#v", b, h.Deaths, want)
		}
	}
	return err
}

func TestRawDeathsAlternativeEncodings(t *testing.T) {
	for _, tc := range altCases() {
		t.Run(tc.label, func(t *testing.T) {
			got, err := decodeRawDeaths(tc.wire)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			require.NoError(t, checkRawAgrees(t, tc.wire))
		})
	}
	for _, tc := range outsideCases() {
		t.Run(tc.label, func(t *testing.T) {
			_, err := decodeRawDeaths(tc.wire)
			require.ErrorIs(t, err, errRawUnsupported)
			checkRawAgrees(t, tc.wire)
			h, _, err := Decode(value.Map{{Key: KeyDeaths, Value: amqp10.Raw(tc.wire)}})
			require.NoError(t, err)
			assert.Equal(t, tc.want, h.Deaths)
		})
	}
	for i, b := range malformedCases() {
		_, err := decodeRawDeaths(b)
		require.ErrorIs(t, err, errRawMalformed, "case %d: %x", i, b)
		require.ErrorIs(t, err, ErrMalformed, "case %d", i)
		checkRawAgrees(t, b)
	}
}

// Every prefix of valid encodings is either rejected by both decoders or
// (a prefix can still be a valid value) decoded identically.
func TestRawDeathsTruncated(t *testing.T) {
	h := History{Deaths: []Death{q1Expired, with(q1Expired, func(d *Death) { d.Reason, d.TTL, d.HasTTL = "other", 9, true })}}
	for _, b := range [][]byte{unhex(t, golden13), AppendDeaths(nil, h), altCases()[3].wire} {
		for n := range len(b) {
			checkRawAgrees(t, b[:n])
		}
	}
}

func randomHistory(rng *rand.Rand) History {
	word := func() string {
		switch rng.IntN(8) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("l", 200+rng.IntN(200)) // str32 on the wire
		}
		return string([]byte{byte('a' + rng.IntN(26)), byte('a' + rng.IntN(26))})
	}
	reasons := []string{ReasonRejected, ReasonExpired, ReasonMaxLen, ReasonDeliveryLimit, "custom"}
	n := rng.IntN(6)
	if rng.IntN(20) == 0 {
		n = 200 + rng.IntN(200) // array32, elements past 255
	}
	var h History
	for range n {
		d := Death{Queue: word(), Reason: reasons[rng.IntN(len(reasons))], Exchange: word()}
		if d.Queue == "" && rng.IntN(2) == 0 {
			d.Reason = ""
			d.Queue = "q"
		}
		switch rng.IntN(3) {
		case 0:
			d.Count = uint64(rng.IntN(256))
		case 1:
			d.Count = rng.Uint64()
		}
		d.FirstTime = value.Timestamp(rng.Int64())
		d.LastTime = d.FirstTime + value.Timestamp(rng.IntN(1000))
		if rng.IntN(2) == 0 {
			d.HasTTL = true
			d.TTL = []uint32{0, uint32(rng.IntN(256)), rng.Uint32()}[rng.IntN(3)]
		}
		for range rng.IntN(4) {
			d.RoutingKeys = append(d.RoutingKeys, word())
		}
		h.Deaths = append(h.Deaths, d)
	}
	return h
}

// Property: for random histories, the direct decoder on AppendDeaths'
// bytes gives the history back, as the generic decoder does.
func TestRawDeathsEquivalence(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		h := randomHistory(rng)
		b := AppendDeaths(nil, h)
		got, err := decodeRawDeaths(b)
		require.NoError(t, err, "history %d", i)
		want, err := genericDeaths(b)
		require.NoError(t, err)
		require.Equal(t, want, got, "history %d", i)
		require.Equal(t, h.Deaths, got, "history %d", i)

		// Through Decode, with the annotations Apply writes.
		h.First = Place{Queue: "f", Reason: ReasonExpired}
		h.Last = Place{Queue: "l", Reason: "x", Exchange: "e"}
		if i%3 == 0 {
			h.LastError = &DeathError{Condition: "c", Description: "d"}
		}
		dec, ok, err := Decode(Apply(nil, h, false))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, h, dec)
	}
}

// The deaths of a decoded history share one slice of routing keys; each
// is capped, so appending to one cannot overwrite the next.
func TestRawDeathsKeysCapped(t *testing.T) {
	h := History{Deaths: []Death{
		{Queue: "a", RoutingKeys: []string{"k1"}},
		{Queue: "b", RoutingKeys: []string{"k2", "k3"}},
	}}
	got, err := decodeRawDeaths(AppendDeaths(nil, h))
	require.NoError(t, err)
	_ = append(got[0].RoutingKeys, "overwrite")
	assert.Equal(t, []string{"k2", "k3"}, got[1].RoutingKeys)
	assert.Equal(t, h.Deaths, got)
}

// Allocation budget of the repeat-death path.
func TestRawDeathsAllocs(t *testing.T) {
	anns := Apply(nil, Record(History{}, benchEvent), false)
	// The deaths, the routing keys, one string for all the names.
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() {
		if _, _, err := Decode(anns); err != nil {
			t.Fatal(err)
		}
	}), 3.0, "Decode")
	// Decode, Record (the new deaths) and Apply (the encoded value and its
	// box, the map, one boxed string).
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() {
		h, _, _ := Decode(anns)
		Apply(anns, Record(h, benchEvent), false)
	}), 8.0, "repeat death")
}

func FuzzDecodeRawDeaths(f *testing.F) {
	f.Add(goldenBytes())
	for _, tc := range altCases() {
		f.Add(tc.wire)
	}
	for _, tc := range outsideCases() {
		f.Add(tc.wire)
	}
	for _, b := range malformedCases() {
		f.Add(b)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 4 {
		f.Add(AppendDeaths(nil, randomHistory(rng)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRawAgrees(t, b)
	})
}
