package amqp10

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

func TestReadScalar(t *testing.T) {
	for _, c := range []struct {
		v    any
		want value.Scalar
	}{
		{nil, value.Scalar{Kind: value.KindNull}},
		{true, value.Scalar{Kind: value.KindBool, Int: 1}},
		{false, value.Scalar{Kind: value.KindBool}},
		{uint8(7), value.Scalar{Kind: value.KindUint, Uint: 7}},
		{uint16(700), value.Scalar{Kind: value.KindUint, Uint: 700}},
		{uint32(0), value.Scalar{Kind: value.KindUint}},
		{uint32(70000), value.Scalar{Kind: value.KindUint, Uint: 70000}},
		{uint64(1 << 63), value.Scalar{Kind: value.KindUint, Uint: 1 << 63}},
		{int8(-7), value.Scalar{Kind: value.KindInt, Int: -7}},
		{int16(-700), value.Scalar{Kind: value.KindInt, Int: -700}},
		{int32(-70000), value.Scalar{Kind: value.KindInt, Int: -70000}},
		{int64(-1 << 40), value.Scalar{Kind: value.KindInt, Int: -1 << 40}},
		{float32(1.5), value.Scalar{Kind: value.KindFloat, Float: 1.5}},
		{float64(-2.25), value.Scalar{Kind: value.KindFloat, Float: -2.25}},
		{Timestamp(1234), value.Scalar{Kind: value.KindTimestamp, Int: 1234}},
		{Char('x'), value.Scalar{Kind: value.KindChar, Int: 'x'}},
		{"héllo", value.Scalar{Kind: value.KindString, Bytes: []byte("héllo")}},
		{Symbol("sym"), value.Scalar{Kind: value.KindSymbol, Bytes: []byte("sym")}},
		{[]byte{1, 2}, value.Scalar{Kind: value.KindBinary, Bytes: []byte{1, 2}}},
		{UUID{1}, value.Scalar{Kind: value.KindUUID, Bytes: []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}},
		{List{int64(1)}, value.Scalar{Kind: value.KindOther}},
		{Map{{Key: "a", Value: int64(1)}}, value.Scalar{Kind: value.KindOther}},
		{&Described{Descriptor: uint64(9), Value: "x"}, value.Scalar{Kind: value.KindOther}},
		{Decimal64{}, value.Scalar{Kind: value.KindOther}},
	} {
		b, err := AppendValue(nil, c.v)
		require.NoError(t, err)
		got, rest, err := ReadScalar(append(b, 0x40))
		require.NoError(t, err, "%#v", c.v)
		assert.Equal(t, c.want, got, "%#v", c.v)
		assert.Equal(t, []byte{0x40}, rest, "%#v", c.v)
	}
	for _, bad := range [][]byte{nil, {0xa1, 5, 'a'}, {0x56, 2}, {0x71, 0}, {0x99}} {
		_, _, err := ReadScalar(bad)
		assert.Error(t, err, "% x", bad)
	}
}

func scalarMessage(t testing.TB) *Message {
	b, err := AppendMessageAnnotations(nil, Map{{Key: Symbol("x-b"), Value: List{int64(4)}}, {Key: Symbol("x-a"), Value: int64(3)}})
	require.NoError(t, err)
	subject := "s"
	b, err = AppendProperties(b, &Properties{MessageID: "id", Subject: &subject, GroupSequence: ptrUint(9)})
	require.NoError(t, err)
	b, err = AppendApplicationProperties(b, Map{{Key: "k", Value: "v"}, {Key: "n", Value: nil}})
	require.NoError(t, err)
	b, err = AppendAMQPValue(b, "body")
	require.NoError(t, err)
	m, err := ParseMessage(b)
	require.NoError(t, err)
	return m
}

func ptrUint(v uint32) *uint32 { return &v }

func TestMessageScalars(t *testing.T) {
	m := scalarMessage(t)
	s, err := m.PropertyScalar(0)
	require.NoError(t, err)
	assert.Equal(t, value.Scalar{Kind: value.KindString, Bytes: []byte("id")}, s)
	s, err = m.PropertyScalar(3)
	require.NoError(t, err)
	assert.Equal(t, value.Scalar{Kind: value.KindString, Bytes: []byte("s")}, s)
	s, err = m.PropertyScalar(2)
	require.NoError(t, err)
	assert.Equal(t, value.KindNull, s.Kind, "to: null in the list")
	s, err = m.PropertyScalar(11)
	require.NoError(t, err)
	assert.Equal(t, value.Scalar{Kind: value.KindUint, Uint: 9}, s)
	s, err = m.PropertyScalar(12)
	require.NoError(t, err)
	assert.Equal(t, value.KindAbsent, s.Kind, "beyond the list")

	s, err = m.ApplicationPropertyScalar("k")
	require.NoError(t, err)
	assert.Equal(t, value.Scalar{Kind: value.KindString, Bytes: []byte("v")}, s)
	s, err = m.ApplicationPropertyScalar("n")
	require.NoError(t, err)
	assert.Equal(t, value.KindNull, s.Kind)
	s, err = m.ApplicationPropertyScalar("missing")
	require.NoError(t, err)
	assert.Equal(t, value.KindAbsent, s.Kind)

	s, err = m.AnnotationScalar("x-a")
	require.NoError(t, err)
	assert.Equal(t, value.Scalar{Kind: value.KindInt, Int: 3}, s)
	s, err = m.AnnotationScalar("x-missing")
	require.NoError(t, err)
	assert.Equal(t, value.KindAbsent, s.Kind)

	empty, err := ParseMessage(must(AppendAMQPValue(nil, "b")))
	require.NoError(t, err)
	for i := range 13 {
		s, err := empty.PropertyScalar(i)
		require.NoError(t, err)
		assert.Equal(t, value.KindAbsent, s.Kind)
	}
	s, err = empty.ApplicationPropertyScalar("k")
	require.NoError(t, err)
	assert.Equal(t, value.KindAbsent, s.Kind)
	s, err = empty.AnnotationScalar("k")
	require.NoError(t, err)
	assert.Equal(t, value.KindAbsent, s.Kind)

	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_, _ = m.PropertyScalar(3)
		_, _ = m.ApplicationPropertyScalar("k")
		_, _ = m.AnnotationScalar("x-a")
	}), "reading a field in place allocates nothing")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzMessageScalars reads single fields of arbitrary messages: no panic,
// and a field is read or an error returned.
func FuzzMessageScalars(f *testing.F) {
	m := scalarMessage(f)
	f.Add(append(append([]byte(nil), m.Annotations()...), m.Bare()...))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMessage(b)
		if err != nil {
			return
		}
		for i := range 14 {
			_, _ = m.PropertyScalar(i)
		}
		_, _ = m.ApplicationPropertyScalar("k")
		_, _ = m.AnnotationScalar("x-a")
		_, _, _ = ReadScalar(b)
	})
}

// PropertyScalars gives every field as PropertyScalar does, in one walk:
// a message with properties (some null, the list shorter than asked), one
// without, and one whose list is cut short (an error either way).
func TestPropertyScalarsMatchPropertyScalar(t *testing.T) {
	empty, err := ParseMessage(must(AppendAMQPValue(nil, "b")))
	require.NoError(t, err)
	for _, m := range []*Message{scalarMessage(t), empty} {
		got := make([]value.Scalar, 14)
		require.NoError(t, m.PropertyScalars(got))
		for i := range got {
			want, err := m.PropertyScalar(i)
			require.NoError(t, err)
			assert.Equal(t, want, got[i], "field %d", i)
		}
	}
	// properties [message-id "id", user-id] with the user-id's octets cut
	b := append([]byte{0x00, 0x53, 0x73, 0xc0, 0x08, 0x02, 0xa1, 0x02, 'i', 'd', 0xa0, 0x05, 'x'}, must(AppendAMQPValue(nil, "b"))...)
	m, err := ParseMessage(b)
	require.NoError(t, err, "the sections are read lazily")
	_, errOne := m.PropertyScalar(1)
	require.Error(t, errOne)
	assert.Error(t, m.PropertyScalars(make([]value.Scalar, 14)))
}
