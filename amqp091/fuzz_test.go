package amqp091

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// requireWireError fails unless err is nil, an I/O end of input, or an
// *Error with a reply code the front end can send.
func requireWireError(t *testing.T, err error) {
	t.Helper()
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return
	}
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error is not an *Error: %v", err)
	}
	if ReplyName(e.Code) == "" || e.Code < 300 {
		t.Fatalf("error with reply code %d: %v", e.Code, err)
	}
}

func methodFrames(f *testing.F) [][]byte {
	var out [][]byte
	for _, tc := range goldenMethods {
		out = append(out, wire(tc.wire))
	}
	for _, m := range allMethods() {
		fill(m)
		b, err := m.Append(nil)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzFrameReader reads a stream of frames with the reader and a
// per-channel Assembler, as the front end will, and decodes every method
// and content header: nothing panics, every error carries a reply code,
// and the reader's buffer never outgrows the input by more than a chunk.
func FuzzFrameReader(f *testing.F) {
	stream := AppendHeartbeat(nil)
	for _, m := range methodFrames(f) {
		var err error
		if stream, err = AppendMethodFrame(stream, 0, rawMethod(m)); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(uint32(0), stream)
	content, err := AppendContent(nil, 1, InitialFrameMax, &BasicPublish{RoutingKey: "q"}, basicProperties(), bytes.Repeat([]byte("b"), 9000))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(InitialFrameMax), content)
	f.Add(uint32(131072), wire(`03 0001 ffffffff 00`))
	f.Add(uint32(4096), wire(`08 0001 00000000 ce`))
	f.Fuzz(func(t *testing.T, frameMax uint32, in []byte) {
		fr := NewFrameReader(bytes.NewReader(in))
		if frameMax != InitialFrameMax {
			fr.SetFrameMax(frameMax)
		}
		var channels [4]Assembler
		for {
			frame, err := fr.ReadFrame()
			if err != nil {
				requireWireError(t, err)
				break
			}
			if frame.Type == FrameHeartbeat {
				continue
			}
			_, err = channels[frame.Channel%4].Next(frame)
			requireWireError(t, err)
			switch frame.Type {
			case FrameMethod:
				_, err = ParseMethod(frame.Payload)
			case FrameHeader:
				var h ContentHeader
				if h, err = ParseContentHeader(frame.Payload); err == nil {
					var p Properties
					err = p.Decode(h.Properties)
				}
			}
			requireWireError(t, err)
		}
		if c := cap(fr.buf); c > len(in)+2*readChunk {
			t.Fatalf("buffer of %d octets for %d octets of input", c, len(in))
		}
	})
}

// rawMethod is a Method whose encoding is given octets, for seeding.
type rawMethod []byte

func (rawMethod) ID() (uint16, uint16)              { return 0, 0 }
func (r rawMethod) Append(b []byte) ([]byte, error) { return append(b, r...), nil }
func (rawMethod) Decode([]byte) error               { return nil }

// FuzzParseMethod: a decoded method re-encodes to octets that decode to
// the same encoding (a fixed point after one round: unused bits and L
// values are normalised).
func FuzzParseMethod(f *testing.F) {
	for _, b := range methodFrames(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ParseMethod(in)
		if err != nil {
			requireWireError(t, err)
			return
		}
		e1, err := m.Append(nil)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", m, err)
		}
		m2, err := ParseMethod(e1)
		if err != nil {
			t.Fatalf("decode re-encoded %x: %v", e1, err)
		}
		e2, err := m2.Append(nil)
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("unstable encoding %x vs %x (%v)", e1, e2, err)
		}
	})
}

// FuzzParseTable: the same fixed point for field tables.
func FuzzParseTable(f *testing.F) {
	for _, tc := range fieldCases {
		f.Add(append([]byte{1, 'k'}, wire(tc.wire)...))
	}
	b, err := AppendTable(nil, xDeath())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[4:])
	f.Add(nested(MaxDepth + 1))
	f.Add(wire(`01 "k" "L" ffffffffffffffff 01 "t" "t" 07`))
	f.Fuzz(func(t *testing.T, in []byte) {
		tab, err := ParseTable(in)
		if err != nil {
			requireWireError(t, err)
			return
		}
		e1, err := AppendTable(nil, tab)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		tab2, err := ParseTable(e1[4:])
		if err != nil {
			t.Fatalf("decode re-encoded %x: %v", e1, err)
		}
		e2, err := AppendTable(nil, tab2)
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("unstable encoding %x vs %x (%v)", e1, e2, err)
		}
	})
}

// FuzzContentHeader decodes a content header frame payload and its
// properties; decoded properties re-encode to a fixed point.
func FuzzContentHeader(f *testing.F) {
	for _, p := range []*Properties{basicProperties(), publishProps(), {}, {Flags: FlagHeaders, Headers: xDeath()}} {
		b, err := AppendHeaderFrame(nil, 1, 1024, p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[7 : len(b)-1])
	}
	f.Add(wire(`003c 0000 0000000000000001 1001 0001 0000 02`))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ParseContentHeader(in)
		if err != nil {
			requireWireError(t, err)
			return
		}
		var p Properties
		if err := p.Decode(h.Properties); err != nil {
			requireWireError(t, err)
			return
		}
		e1, err := p.Append(nil)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", p, err)
		}
		var p2 Properties
		if err := p2.Decode(e1); err != nil {
			t.Fatalf("decode re-encoded %x: %v", e1, err)
		}
		e2, err := p2.Append(nil)
		if err != nil || !bytes.Equal(e1, e2) {
			t.Fatalf("unstable encoding %x vs %x (%v)", e1, e2, err)
		}
	})
}

// FuzzClassify: every protocol header gets a verdict. Only 0-9-1 (or 0-9)
// and AMQP 1.0 with SASL are accepted; a refusal names its reason and
// replies with a header the broker speaks.
func FuzzClassify(f *testing.F) {
	for _, h := range [][8]byte{ProtoHeader091, ProtoHeader09, ProtoHeader10SASL, ProtoHeader10, ProtoHeader10TLS,
		{'A', 'M', 'Q', 'P', 0, 0, 9, 0}, {'A', 'M', 'Q', 'P', 1, 1, 8, 0}, {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T'},
		{0x16, 3, 1, 0, 0xc8, 1, 0, 0}} {
		f.Add(h[:])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var h [8]byte
		copy(h[:], in)
		v := Classify(h)
		if v.Legacy09 != (h == ProtoHeader09) {
			t.Fatalf("%x: Legacy09 %v", h, v.Legacy09)
		}
		if !v.Refuse {
			if v.Protocol != ProtocolAMQP091 && v.Protocol != ProtocolAMQP10SASL {
				t.Fatalf("%x: accepted as %v", h, v.Protocol)
			}
			return
		}
		if v.Reason == "" || v.Reply != ProtoHeader10SASL && v.Reply != ProtoHeader091 {
			t.Fatalf("%x: refused with reason %q, reply %x", h, v.Reason, v.Reply)
		}
	})
}
