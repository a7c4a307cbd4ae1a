package amqp10

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzReadValue(f *testing.F) {
	for _, tc := range valueCases {
		f.Add(hx(tc.wire))
	}
	for _, tc := range decodeOnly {
		f.Add(hx(tc.wire))
	}
	f.Add(mustAppend(f, &Array{Type: TypeMap32, Elems: []any{deathsMap(true)}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := ReadValue(b)
		if _, serr := SkipValue(b); err == nil && serr != nil {
			t.Fatalf("ReadValue ok but SkipValue: %v", serr)
		}
		if err != nil {
			return
		}
		// Re-encoding is a fixed point after one round.
		e1, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", v, err)
		}
		v2, rest, err := ReadValue(e1)
		if errors.Is(err, errElementBudget) {
			// Zero-width array elements decoded from a larger input
			// may exceed the budget of their compact re-encoding.
			return
		}
		if err != nil || len(rest) != 0 {
			t.Fatalf("decode re-encoded %x: %v", e1, err)
		}
		e2, err := AppendValue(nil, v2)
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("unstable encoding %x vs %x (%v)", e1, e2, err)
		}
	})
}

func FuzzParsePerformative(f *testing.F) {
	for _, p := range allPerformatives() {
		f.Add(p.Append(nil))
	}
	for _, tc := range perfWire {
		f.Add(hx(tc.wire))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, _, err := ParsePerformative(b)
		if err != nil {
			return
		}
		e1 := p.Append(nil)
		p2, rest, err := ParsePerformative(e1)
		if err != nil || len(rest) != 0 {
			t.Fatalf("decode re-encoded %T %x: %v", p, e1, err)
		}
		if e2 := p2.Append(nil); !bytes.Equal(e1, e2) {
			t.Fatalf("unstable encoding %x vs %x", e1, e2)
		}
	})
}

func FuzzParseMessage(f *testing.F) {
	f.Add(buildMessage(f))
	f.Add(AppendData(nil, []byte("x")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMessage(b)
		if err != nil {
			return
		}
		// The bare message, message annotations and footer re-assemble
		// byte for byte; a header is re-encoded and delivery annotations
		// are dropped (they are for one hop), and these come first.
		lead, _ := PeekDescriptor(b)
		if !bytes.Equal(m.Append(nil), b) && !m.HasHeader && lead != DescDeliveryAnnotations {
			t.Fatalf("sections do not re-assemble")
		}
		// Decoding the lazy sections must not panic; errors are fine.
		_, _ = m.AnnotationMap()
		_, _ = m.Properties()
		_, _ = m.ApplicationProperties()
		out, err := m.AppendDelivery(nil, &Header{Priority: 4, DeliveryCount: 1}, Map{{Key: Symbol("x-opt-k"), Value: "v"}})
		if err != nil {
			t.Fatalf("AppendDelivery: %v", err)
		}
		d, err := ParseMessage(out)
		if err != nil {
			t.Fatalf("delivered message does not parse: %v", err)
		}
		if !bytes.Equal(d.Bare(), m.Bare()) || !bytes.Equal(d.Footer(), m.Footer()) {
			t.Fatalf("bare message changed")
		}
	})
}

func FuzzParseFrameHeader(f *testing.F) {
	f.Add(AppendHeartbeat(nil))
	f.Add(hx("00 00 00 0c 03 00 00 00"))
	f.Add(hx("00 00 00 07 02 00 00 00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseFrameHeader(b)
		if err != nil {
			return
		}
		if h.Size < 8 || h.DataOffset < 2 || uint32(h.DataOffset)*4 > h.Size {
			t.Fatalf("invalid header accepted: %+v", h)
		}
	})
}
