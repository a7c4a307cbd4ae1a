package amqp10

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func buildMessage(t testing.TB) []byte {
	var b []byte
	b = AppendHeader(b, &Header{Durable: true, Priority: 4, TTL: 1000, HasTTL: true})
	b = append(b, AppendDescriptor(nil, DescDeliveryAnnotations)...)
	b, _ = AppendMap(b, Map{{Key: Symbol("x-da"), Value: "v"}})
	b, _ = AppendMessageAnnotations(b, Map{{Key: Symbol("x-opt-a"), Value: "a"}, {Key: Symbol("x-opt-b"), Value: uint64(2)}})
	to := "q1"
	b, _ = AppendProperties(b, &Properties{MessageID: "m1", To: &to})
	b, _ = AppendApplicationProperties(b, Map{{Key: "k", Value: int32(1)}})
	b = AppendData(b, []byte("hello"))
	b = AppendData(b, []byte("world"))
	b = append(b, AppendDescriptor(nil, DescFooter)...)
	b, _ = AppendMap(b, Map{{Key: Symbol("x-f"), Value: true}})
	return b
}

func TestParseMessage(t *testing.T) {
	payload := buildMessage(t)
	m, err := ParseMessage(payload)
	require.NoError(t, err)
	require.True(t, m.HasHeader)
	require.Equal(t, Header{Durable: true, Priority: 4, TTL: 1000, HasTTL: true, HasPriority: true}, m.Header) // the priority field is on the wire (before ttl)
	ann, err := m.AnnotationMap()
	require.NoError(t, err)
	require.Equal(t, Map{{Key: Symbol("x-opt-a"), Value: "a"}, {Key: Symbol("x-opt-b"), Value: uint64(2)}}, ann)
	p, err := m.Properties()
	require.NoError(t, err)
	require.Equal(t, "m1", p.MessageID)
	require.Equal(t, "q1", *p.To)
	ap, err := m.ApplicationProperties()
	require.NoError(t, err)
	require.Equal(t, Map{{Key: "k", Value: int32(1)}}, ap)
	body, err := m.Body()
	require.NoError(t, err)
	require.Equal(t, append(AppendData(nil, []byte("hello")), AppendData(nil, []byte("world"))...), body)
	require.Equal(t, m.Size(), len(m.Bare())+len(m.Footer()))
	// Re-emitting gives the same bytes without the delivery annotations.
	da := append(AppendDescriptor(nil, DescDeliveryAnnotations), mustAppend(t, Map{{Key: Symbol("x-da"), Value: "v"}})...)
	require.Equal(t, bytes.Replace(payload, da, nil, 1), m.Append(nil))

	// Delivery: header replaced, broker keys first, originals kept, DA dropped.
	out, err := m.AppendDelivery(nil, &Header{DeliveryCount: 1, Priority: 4}, Map{{Key: Symbol("x-opt-b"), Value: uint64(9)}, {Key: Symbol("x-new"), Value: "n"}})
	require.NoError(t, err)
	d, err := ParseMessage(out)
	require.NoError(t, err)
	require.Equal(t, Header{DeliveryCount: 1, Priority: 4, HasPriority: true}, d.Header) // written before delivery-count
	require.NotContains(t, string(out), "x-da")
	ann, err = d.AnnotationMap()
	require.NoError(t, err)
	require.Equal(t, Map{{Key: Symbol("x-opt-b"), Value: uint64(9)}, {Key: Symbol("x-new"), Value: "n"}, {Key: Symbol("x-opt-a"), Value: "a"}}, ann)
	require.Equal(t, m.Bare(), d.Bare())
	require.Equal(t, m.Footer(), d.Footer())

	// Empty annotations produce no section.
	m2, err := ParseMessage(AppendData(nil, []byte("x")))
	require.NoError(t, err)
	out, err = m2.AppendDelivery(nil, &Header{Priority: 4}, nil)
	require.NoError(t, err)
	require.Equal(t, append(hx("00 53 70 45"), AppendData(nil, []byte("x"))...), out)

	// NewMessage from the raw sections is the same message.
	h := m.Header
	nm := NewMessage(&h, m.Annotations(), m.Bare(), m.Footer())
	require.Equal(t, m.Append(nil), nm.Append(nil))
	require.Equal(t, m.Size(), nm.Size())
	require.Nil(t, NewMessage(nil, nil, []byte("b"), nil).Footer())
	require.Nil(t, NewMessage(nil, nil, []byte("b"), nil).Annotations())
}

func TestHeaderEncoding(t *testing.T) {
	require.Equal(t, hx("00 53 70 45"), AppendHeader(nil, &Header{Priority: 4}))
	require.Equal(t, hx("00 53 70 c0 02 01 41"), AppendHeader(nil, &Header{Durable: true, Priority: 4}))
	require.Equal(t, hx("00 53 70 c0 08 05 42 50 04 40 42 52 03"), AppendHeader(nil, &Header{Priority: 4, DeliveryCount: 3}))
	require.Equal(t, hx("00 53 70 c0 09 03 42 50 04 70 00 00 01 00"),
		AppendHeader(nil, &Header{Priority: 4, TTL: 256, HasTTL: true}))
	var h Header
	_, err := h.Unmarshal(hx("00 53 70 45"))
	require.NoError(t, err)
	require.Equal(t, Header{Priority: 4}, h)
}

func TestParseMessageErrors(t *testing.T) {
	hdr := hx("00 53 70 45")
	data := AppendData(nil, []byte("x"))
	val, _ := AppendAMQPValue(nil, "v")
	seq, _ := AppendAMQPSequence(nil, List{uint32(1)})
	props, _ := AppendProperties(nil, &Properties{})
	ap, _ := AppendApplicationProperties(nil, Map{})
	ma := func(k any) []byte { b, _ := AppendMessageAnnotations(nil, Map{{Key: k, Value: "v"}}); return b }
	footer := append(AppendDescriptor(nil, DescFooter), 0xc1, 0x01, 0x00)
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	ok := [][]byte{
		nil,
		data,
		cat(data, data),
		cat(seq, seq),
		val,
		cat(hdr, ma(Symbol("x-a")), props, ap, val, footer),
		cat(props),
		cat(hdr, footer),
	}
	for _, p := range ok {
		_, err := ParseMessage(p)
		require.NoError(t, err, "%x", p)
	}
	bad := []struct {
		p   []byte
		err error
	}{
		{cat(data, hdr), ErrSectionOrder},
		{cat(hdr, hdr), ErrSectionOrder},
		{cat(val, val), ErrSectionOrder},
		{cat(data, seq), ErrSectionOrder},
		{cat(seq, data), ErrSectionOrder},
		{cat(data, val), ErrSectionOrder},
		{cat(ap, props), ErrSectionOrder},
		{cat(data, footer, footer), ErrSectionOrder},
		{cat(footer, data), ErrSectionOrder},
		{hx("00 53 79 45"), ErrSectionOrder},
		{hx("00 53 10 45"), ErrSectionOrder},
		{hx("45"), ErrSectionOrder},
		{ma("a"), ErrReservedAnnotation},
		{ma("x"), ErrReservedAnnotation},
		{ma(uint64(1)), ErrReservedAnnotation},
		{ma(Symbol("amqp:x")), ErrReservedAnnotation},
		{ma("x-ok"), ErrReservedAnnotation}, // string, not symbol
		{cat(AppendDescriptor(nil, DescData), hx("a1 01 78")), ErrInvalidField},
		{cat(AppendDescriptor(nil, DescData), hx("a0 05 78")), ErrTruncated},
	}
	for _, tc := range bad {
		_, err := ParseMessage(tc.p)
		require.ErrorIs(t, err, tc.err, "%x", tc.p)
	}
	_, err := ParseMessage(ma(Symbol("x-fine")))
	require.NoError(t, err)
}

func TestPropertiesRoundTrip(t *testing.T) {
	s := func(v string) *string { return &v }
	sym := func(v Symbol) *Symbol { return &v }
	ts := func(v Timestamp) *Timestamp { return &v }
	u := uint32(7)
	p := &Properties{MessageID: uint64(5), UserID: []byte("u"), To: s("to"), Subject: s("subj"), ReplyTo: s("rt"),
		CorrelationID: UUID{1}, ContentType: sym("text/plain"), ContentEncoding: sym("gzip"),
		AbsoluteExpiryTime: ts(1), CreationTime: ts(2), GroupID: s("g"), GroupSequence: &u, ReplyToGroupID: s("rg")}
	b, err := AppendProperties(nil, p)
	require.NoError(t, err)
	var got Properties
	rest, err := got.Unmarshal(b)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Equal(t, p, &got)
	b, err = AppendProperties(nil, &Properties{})
	require.NoError(t, err)
	require.Equal(t, hx("00 53 73 45"), b)
	_, err = got.Unmarshal(hx("00 53 73 c0 02 01 41"))
	require.ErrorIs(t, err, ErrInvalidField)
}

func BenchmarkParseMessage(b *testing.B) {
	payload := buildMessage(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMessage(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendDelivery(b *testing.B) {
	m, err := ParseMessage(buildMessage(b))
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	h := &Header{Priority: 4, DeliveryCount: 1}
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = m.AppendDelivery(buf[:0], h, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestParseIntoAllocs(t *testing.T) {
	payload := buildMessage(t)
	var m Message
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if err := m.Parse(payload); err != nil {
			t.Fatal(err)
		}
	}))
	want, err := ParseMessage(payload)
	require.NoError(t, err)
	require.Equal(t, *want, m)
	require.Error(t, m.Parse([]byte{0x00, 0x53, 0x99, 0x45}))
	require.Equal(t, Message{}, m, "left zero on error")
}

// The parsed message is held per queued message: its size is part of the
// broker's memory budget per message.
func TestMessageStructSize(t *testing.T) {
	if n := unsafe.Sizeof(Message{}); n > 56 {
		t.Errorf("Message is %d bytes, budget 56", n)
	}
}

func TestParseMessageSectionLimit(t *testing.T) {
	data := []byte{0x00, 0x53, 0x75, 0xa0, 0x00} // an empty data section
	atLimit := bytes.Repeat(data, MaxSections)
	if _, err := ParseMessage(atLimit); err != nil {
		t.Fatalf("%d sections: %v", MaxSections, err)
	}
	_, err := ParseMessage(append(atLimit, data...))
	if !errors.Is(err, ErrTooManySections) {
		t.Fatalf("%d sections: got %v, want ErrTooManySections", MaxSections+1, err)
	}
}

// UserID reads properties.user-id alone, without allocating, with or
// without a properties section.
func TestMessageUserIDNoAlloc(t *testing.T) {
	props, err := AppendProperties(nil, &Properties{MessageID: "id-1", UserID: []byte("bob"), Subject: new("s")})
	require.NoError(t, err)
	body := hx("00 53 75 a0 01 78")
	var with, without, noUser Message
	require.NoError(t, with.Parse(append(append([]byte(nil), props...), body...)))
	require.NoError(t, without.Parse(body))
	other, err := AppendProperties(nil, &Properties{MessageID: uint64(1)})
	require.NoError(t, err)
	require.NoError(t, noUser.Parse(append(other, body...)))
	uid, err := with.UserID()
	require.NoError(t, err)
	require.Equal(t, []byte("bob"), uid)
	for _, m := range []*Message{&without, &noUser} {
		uid, err := m.UserID()
		require.NoError(t, err)
		require.Nil(t, uid)
	}
	require.Zero(t, testing.AllocsPerRun(100, func() {
		_, _ = with.UserID()
		_, _ = without.UserID()
		_, _ = noUser.UserID()
	}))
}
