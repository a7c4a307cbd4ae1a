package amqp10

import (
	"encoding/hex"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func allPerformatives() []Performative {
	rejErr := &Error{Condition: ErrCondNotFound, Description: "no queue", Info: Map{{Key: Symbol("k"), Value: "v"}}}
	return []Performative{
		&Open{ContainerID: "c1", Hostname: "h", MaxFrameSize: 65536, ChannelMax: 255, IdleTimeOut: 30000,
			OutgoingLocales: []Symbol{"en-US"}, IncomingLocales: []Symbol{"en-US", "de"},
			OfferedCapabilities: []Symbol{"ANONYMOUS-RELAY"}, DesiredCapabilities: []Symbol{"a", "b"},
			Properties: Map{{Key: Symbol("product"), Value: "epitaph"}}},
		&Open{ContainerID: "c2", MaxFrameSize: 4294967295, ChannelMax: 65535},
		&Begin{RemoteChannel: 3, HasRemoteChannel: true, NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 255,
			OfferedCapabilities: []Symbol{"x"}, Properties: Map{{Key: Symbol("p"), Value: uint32(1)}}},
		&Begin{NextOutgoingID: 0, IncomingWindow: 1, OutgoingWindow: 2, HandleMax: 4294967295},
		&Attach{Name: "link", Handle: 1, Role: RoleReceiver, SndSettleMode: SndSettled, HasSndSettleMode: true,
			RcvSettleMode: RcvSecond, HasRcvSettleMode: true,
			Source: &Source{Address: "q1", HasAddress: true, Durable: 2, ExpiryPolicy: "never", Timeout: 10, Dynamic: true,
				DynamicNodeProperties: Map{{Key: Symbol("lifetime-policy"), Value: &Described{Descriptor: uint64(0x2b), Value: List{}}}},
				DistributionMode:      "move", Filter: Map{{Key: Symbol("f"), Value: &Described{Descriptor: Symbol("apache.org:selector-filter:string"), Value: "a = 1"}}},
				DefaultOutcome: &DeliveryState{Kind: StateReleased}, Outcomes: []Symbol{"amqp:accepted:list", "amqp:rejected:list"}, Capabilities: []Symbol{"queue"}},
			Target: &Target{Address: "t", HasAddress: true, Durable: 1, ExpiryPolicy: "link-detach", Timeout: 1, Dynamic: true,
				DynamicNodeProperties: Map{{Key: Symbol("x"), Value: true}}, Capabilities: []Symbol{"topic"}},
			Unsettled: Map{{Key: []byte{1}, Value: &Described{Descriptor: uint64(DescAccepted), Value: List{}}}}, IncompleteUnsettled: true,
			InitialDeliveryCount: 7, HasInitialDeliveryCount: true, MaxMessageSize: 1 << 20,
			OfferedCapabilities: []Symbol{"o"}, DesiredCapabilities: []Symbol{"d"}, Properties: Map{{Key: Symbol("z"), Value: int64(-1)}}},
		&Attach{Name: "coord", Handle: 2, Role: RoleSender, Target: &Target{Coordinator: true}},
		&Attach{Name: "bare", Handle: 0},
		&Flow{NextIncomingID: 1, HasNextIncomingID: true, IncomingWindow: 2, NextOutgoingID: 3, OutgoingWindow: 4, Handle: 5, HasHandle: true,
			DeliveryCount: 6, HasDeliveryCount: true, LinkCredit: 7, HasLinkCredit: true, Available: 8, HasAvailable: true,
			Drain: true, Echo: true, Properties: Map{{Key: Symbol("p"), Value: "v"}}},
		&Flow{IncomingWindow: 2, NextOutgoingID: 3, OutgoingWindow: 4},
		&Transfer{Handle: 1, DeliveryID: 2, HasDeliveryID: true, DeliveryTag: []byte("tag"), MessageFormat: 0, HasMessageFormat: true,
			Settled: true, HasSettled: true, More: true, RcvSettleMode: RcvSecond, HasRcvSettleMode: true,
			State: DeliveryState{Kind: StateReceived, SectionNumber: 1, SectionOffset: 2}, Resume: true, Aborted: true, Batchable: true},
		&Transfer{Handle: 0},
		&Transfer{Handle: 1, State: DeliveryState{Kind: StateModified, DeliveryFailed: true, UndeliverableHere: true, Annotations: Map{{Key: Symbol("x-a"), Value: "b"}}}},
		&Disposition{Role: RoleReceiver, First: 1, Last: 10, HasLast: true, Settled: true, State: DeliveryState{Kind: StateAccepted}, Batchable: true},
		&Disposition{Role: RoleReceiver, First: 1, State: DeliveryState{Kind: StateRejected, Error: rejErr}},
		&Disposition{Role: RoleSender, First: 1, State: DeliveryState{Kind: StateRejected}},
		&Disposition{Role: RoleSender, First: 1, State: DeliveryState{Kind: StateReleased}},
		&Disposition{Role: RoleSender, First: 1, State: DeliveryState{Kind: StateModified}},
		&Detach{Handle: 3, Closed: true, Error: rejErr},
		&Detach{Handle: 3},
		&End{Error: &Error{Condition: ErrCondWindowViolation}},
		&End{},
		&Close{Error: rejErr},
		&Close{},
		&SASLMechanisms{Mechanisms: []Symbol{"PLAIN", "ANONYMOUS"}},
		&SASLMechanisms{Mechanisms: []Symbol{"PLAIN"}},
		&SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00u\x00p"), Hostname: "h"},
		&SASLInit{Mechanism: "ANONYMOUS"},
		&SASLChallenge{Challenge: []byte("c")},
		&SASLResponse{Response: []byte("r")},
		&SASLOutcome{Code: SASLCodeAuth, AdditionalData: []byte("d")},
		&SASLOutcome{Code: SASLCodeOK},
	}
}

func TestPerformativeRoundTrip(t *testing.T) {
	for _, p := range allPerformatives() {
		b := p.Append(nil)
		b = append(b, "payload"...)
		got, rest, err := ParsePerformative(b)
		require.NoError(t, err, "%T %x", p, b)
		require.Equal(t, "payload", string(rest))
		require.Equal(t, p, got, "%T %x", p, b)
		code, err := PeekDescriptor(b)
		require.NoError(t, err)
		require.Equal(t, p.Descriptor(), code)
		// Re-encoding gives the same bytes.
		require.Equal(t, b[:len(b)-7], got.Append(nil))
	}
}

var perfWire = []struct {
	name string
	p    Performative
	wire string
}{
	{"open minimal", &Open{ContainerID: "c", MaxFrameSize: 4294967295, ChannelMax: 65535},
		`00 53 10 | c0 04 01 | a1 01 "c"`},
	{"open fields", &Open{ContainerID: "c", MaxFrameSize: 512, ChannelMax: 65535, IdleTimeOut: 1000},
		`00 53 10 | c0 10 05 | a1 01 "c" 40 70 00 00 02 00 40 70 00 00 03 e8`},
	{"begin", &Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100, HandleMax: 4294967295},
		`00 53 11 | c0 07 04 | 40 43 52 64 52 64`},
	{"attach", &Attach{Name: "l", Handle: 0, Role: RoleReceiver, Source: &Source{Address: "q", HasAddress: true}},
		`00 53 12 | c0 11 06 | a1 01 "l" 43 41 40 40 | 00 53 28 c0 04 01 a1 01 "q"`},
	{"flow", &Flow{IncomingWindow: 2047, NextOutgoingID: 1, OutgoingWindow: 0, Handle: 0, HasHandle: true, DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: 100, HasLinkCredit: true},
		`00 53 13 | c0 0e 07 | 40 70 00 00 07 ff 52 01 43 43 43 52 64`},
	{"transfer", &Transfer{Handle: 0, DeliveryID: 1, HasDeliveryID: true, DeliveryTag: []byte{9}, MessageFormat: 0, HasMessageFormat: true, Settled: false, HasSettled: true},
		`00 53 14 | c0 09 05 | 43 52 01 a0 01 09 43 42`},
	{"disposition accepted", &Disposition{Role: RoleReceiver, First: 5, Settled: true, State: DeliveryState{Kind: StateAccepted}},
		`00 53 15 | c0 0a 05 | 41 52 05 40 41 | 00 53 24 45`},
	{"disposition rejected", &Disposition{Role: RoleReceiver, First: 0, State: DeliveryState{Kind: StateRejected, Error: &Error{Condition: "c"}}},
		`00 53 15 | c0 14 05 | 41 43 40 40 | 00 53 25 c0 0a 01 | 00 53 1d c0 04 01 a3 01 "c"`},
	{"detach", &Detach{Handle: 1, Closed: true}, `00 53 16 | c0 04 02 | 52 01 41`},
	{"end", &End{}, `00 53 17 45`},
	{"close error", &Close{Error: &Error{Condition: "amqp:internal-error", Description: "x"}},
		`00 53 18 | c0 1f 01 | 00 53 1d c0 19 02 a3 13 "amqp:internal-error" a1 01 "x"`},
	{"sasl-mechanisms", &SASLMechanisms{Mechanisms: []Symbol{"PLAIN"}},
		`00 53 40 | c0 0e 01 | e0 0b 01 b3 00 00 00 05 "PLAIN"`},
	{"sasl-outcome", &SASLOutcome{Code: 0}, `00 53 44 | c0 03 01 | 50 00`},
}

func TestPerformativeWire(t *testing.T) {
	for _, tc := range perfWire {
		t.Run(tc.name, func(t *testing.T) {
			want := hx(tc.wire)
			got := tc.p.Append(nil)
			require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
			p, rest, err := ParsePerformative(want)
			require.NoError(t, err)
			require.Empty(t, rest)
			require.Equal(t, tc.p, p)
		})
	}
}

func TestPerformativeLenient(t *testing.T) {
	// Symbolic descriptors, ulong descriptors, list32, address as symbol,
	// capabilities as a single symbol or an array of sym8.
	cases := []struct {
		wire string
		want Performative
	}{
		{`00 a3 0e "amqp:open:list" c0 04 01 a1 01 "c"`, &Open{ContainerID: "c", MaxFrameSize: 4294967295, ChannelMax: 65535}},
		{`00 80 00 00 00 00 00 00 00 10 d0 00 00 00 07 00 00 00 01 a1 01 "c"`, &Open{ContainerID: "c", MaxFrameSize: 4294967295, ChannelMax: 65535}},
		{`00 53 12 c0 21 06 a1 01 "l" 43 41 40 40 00 a3 10 "amqp:source:list" c0 04 01 a3 01 "q"`,
			&Attach{Name: "l", Role: RoleReceiver, Source: &Source{Address: "q", HasAddress: true}}},
		{`00 53 11 c0 0e 06 40 43 43 43 40 e0 06 02 a3 01 "a" 01 "b"`,
			&Begin{HandleMax: 4294967295, OfferedCapabilities: []Symbol{"a", "b"}}},
		{`00 53 15 c0 1b 05 41 43 40 41 00 a3 12 "amqp:accepted:list" 45`,
			&Disposition{Role: RoleReceiver, Settled: true, State: DeliveryState{Kind: StateAccepted}}},
		// Unknown extra fields are skipped.
		{`00 53 16 c0 05 04 43 40 40 40`, &Detach{}},
	}
	for _, tc := range cases {
		w := hx(tc.wire)
		p, rest, err := ParsePerformative(w)
		require.NoError(t, err, tc.wire)
		require.Empty(t, rest)
		require.Equal(t, tc.want, p, tc.wire)
	}
}

func TestPerformativeErrors(t *testing.T) {
	cases := []struct {
		name string
		wire string
		err  error
	}{
		{"unknown descriptor", `00 53 99 45`, ErrInvalidType},
		{"unknown symbolic", `00 a3 01 "x" 45`, ErrInvalidType},
		{"not described", `45`, ErrInvalidField},
		{"section not a frame", `00 53 70 45`, ErrInvalidType},
		{"open no container-id", `00 53 10 45`, ErrInvalidField},
		{"open container-id wrong type", `00 53 10 c0 02 01 43`, ErrInvalidField},
		{"begin missing windows", `00 53 11 c0 03 02 40 43`, ErrInvalidField},
		{"attach missing name", `00 53 12 45`, ErrInvalidField},
		{"attach missing handle", `00 53 12 c0 04 01 a1 01 "l"`, ErrInvalidField},
		{"attach missing role", `00 53 12 c0 05 02 a1 01 "l" 43`, ErrInvalidField},
		{"attach handle wrong type", `00 53 12 c0 06 03 a1 01 "l" 53 01 41`, ErrInvalidField},
		{"attach bad snd-settle-mode", `00 53 12 c0 08 04 a1 01 "l" 43 41 50 03`, ErrInvalidField},
		{"attach source wrong type", `00 53 12 c0 09 06 a1 01 "l" 43 41 40 40 43`, ErrInvalidField},
		{"attach address wrong type", `00 53 12 c0 0f 06 a1 01 "l" 43 41 40 40 00 53 28 c0 02 01 43`, ErrInvalidField},
		{"flow missing outgoing-window", `00 53 13 c0 04 03 40 43 43`, ErrInvalidField},
		{"transfer missing handle", `00 53 14 45`, ErrInvalidField},
		{"transfer handle null", `00 53 14 c0 02 01 40`, ErrInvalidField},
		{"transfer tag wrong type", `00 53 14 c0 05 03 43 43 a1 00`, ErrInvalidField},
		{"transfer truncated", `00 53 14 c0 05 03 43 43`, ErrTruncated},
		{"disposition missing first", `00 53 15 c0 02 01 41`, ErrInvalidField},
		{"disposition missing role", `00 53 15 45`, ErrInvalidField},
		{"disposition bad state", `00 53 15 c0 06 05 41 43 40 40 43`, ErrInvalidField},
		{"detach missing handle", `00 53 16 45`, ErrInvalidField},
		{"error missing condition", `00 53 18 c0 05 01 00 53 1d 45`, ErrInvalidField},
		{"symbols wrong type", `00 53 10 c0 09 06 a1 01 "c" 40 40 40 40 43`, ErrInvalidField},
		{"trailing bytes in list", `00 53 17 c0 02 00 40`, ErrInvalidField},
		{"sasl-init missing mechanism", `00 53 41 45`, ErrInvalidField},
		{"sasl-mechanisms null", `00 53 40 c0 02 01 40`, ErrInvalidField},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParsePerformative(hx(tc.wire))
			require.ErrorIs(t, err, tc.err)
		})
	}
}

func TestDeliveryStateRoundTrip(t *testing.T) {
	states := []DeliveryState{
		{},
		{Kind: StateAccepted},
		{Kind: StateReleased},
		{Kind: StateRejected},
		{Kind: StateRejected, Error: &Error{Condition: ErrCondDecodeError}},
		{Kind: StateModified, DeliveryFailed: true},
		{Kind: StateModified, UndeliverableHere: true, Annotations: Map{{Key: Symbol("x-k"), Value: uint64(1)}}},
		{Kind: StateReceived, SectionNumber: 3, SectionOffset: 1 << 33},
		{Kind: StateUnknown, UnknownDescriptor: uint64(0x99)},
		{Kind: StateUnknown, UnknownDescriptor: Symbol("x:y")},
	}
	for _, s := range states {
		b := s.Append(nil)
		var got DeliveryState
		rest, err := readDeliveryState(b, &got)
		require.NoError(t, err)
		require.Empty(t, rest)
		require.Equal(t, s, got)
	}
	require.Equal(t, hx("00 53 24 45"), (&DeliveryState{Kind: StateAccepted}).Append(nil))
	require.Equal(t, hx("00 53 26 45"), (&DeliveryState{Kind: StateReleased}).Append(nil))
	require.Equal(t, hx("00 53 25 45"), (&DeliveryState{Kind: StateRejected}).Append(nil))
	require.Equal(t, hx("00 53 27 c0 03 02 41 41"), (&DeliveryState{Kind: StateModified, DeliveryFailed: true, UndeliverableHere: true}).Append(nil))
	require.Equal(t, hx("40"), (&DeliveryState{}).Append(nil))
}

func TestFrames(t *testing.T) {
	require.Equal(t, hx("00 00 00 08 02 00 00 00"), AppendHeartbeat(nil))
	b := AppendFrame([]byte{0xaa}, FrameTypeAMQP, 0x0102, &End{}, []byte("p"))
	require.Equal(t, hx("aa | 00 00 00 0d 02 00 01 02 | 00 53 17 45 | 70"), b)
	h, err := ParseFrameHeader(b[1:])
	require.NoError(t, err)
	require.Equal(t, FrameHeader{Size: 13, DataOffset: 2, Type: 0, Channel: 0x0102}, h)
	b = AppendFrame(nil, FrameTypeSASL, 0, &SASLOutcome{}, nil)
	require.Equal(t, hx("00 00 00 10 02 01 00 00 00 53 44 c0 03 01 50 00"), b)

	for _, bad := range []struct {
		wire string
		err  error
	}{
		{"00 00 00", ErrTruncated},
		{"00 00 00 07 02 00 00 00", ErrInvalidField},
		{"00 00 00 08 01 00 00 00", ErrInvalidField},
		{"00 00 00 08 03 00 00 00", ErrInvalidField},
		{"00 00 00 0b 03 00 00 00", ErrInvalidField},
	} {
		_, err := ParseFrameHeader(hx(bad.wire))
		require.ErrorIs(t, err, bad.err, bad.wire)
	}
	h, err = ParseFrameHeader(hx("00 00 00 0c 03 00 00 00"))
	require.NoError(t, err)
	require.Equal(t, uint8(3), h.DataOffset)
}

var (
	benchTransfer = &Transfer{Handle: 1, DeliveryID: 12345, HasDeliveryID: true, DeliveryTag: []byte("12345678"),
		MessageFormat: 0, HasMessageFormat: true, Settled: false, HasSettled: true,
		State: DeliveryState{Kind: StateAccepted}}
	benchFlow = &Flow{NextIncomingID: 10, HasNextIncomingID: true, IncomingWindow: 5000, NextOutgoingID: 1, OutgoingWindow: 5000,
		Handle: 0, HasHandle: true, DeliveryCount: 100, HasDeliveryCount: true, LinkCredit: 500, HasLinkCredit: true, Drain: true}
	benchDispositions = []*Disposition{
		{Role: RoleReceiver, First: 1, Last: 100, HasLast: true, Settled: true, State: DeliveryState{Kind: StateAccepted}},
		{Role: RoleReceiver, First: 1, Settled: true, State: DeliveryState{Kind: StateReleased}},
		{Role: RoleReceiver, First: 1, Settled: true, State: DeliveryState{Kind: StateRejected}},
	}
	benchAttach = allPerformatives()[4].(*Attach)
)

func TestAllocs(t *testing.T) {
	buf := make([]byte, 0, 4096)
	payload := []byte("hello world")
	check := func(name string, f func()) {
		t.Helper()
		require.Zero(t, testing.AllocsPerRun(100, f), name)
	}
	check("AppendFrame transfer", func() { buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, benchTransfer, payload) })
	check("AppendFrame flow", func() { buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, benchFlow, nil) })
	for _, d := range benchDispositions {
		check("AppendFrame disposition", func() { buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, d, nil) })
	}
	rej := &Transfer{Handle: 1, State: DeliveryState{Kind: StateRejected, Error: &Error{Condition: "c", Description: "d"}}}
	check("AppendFrame transfer with rejected error", func() { buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, rej, nil) })

	tb := append(benchTransfer.Append(nil), payload...)
	var tr Transfer
	check("Transfer.Unmarshal", func() {
		if _, err := tr.Unmarshal(tb); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, *benchTransfer, tr)
	fb := benchFlow.Append(nil)
	var fl Flow
	check("Flow.Unmarshal", func() {
		if _, err := fl.Unmarshal(fb); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, *benchFlow, fl)
	for _, d := range benchDispositions {
		db := d.Append(nil)
		var dp Disposition
		check("Disposition.Unmarshal", func() {
			if _, err := dp.Unmarshal(db); err != nil {
				t.Fatal(err)
			}
		})
		require.Equal(t, *d, dp)
	}
	// Symbolic outcome descriptors decode without allocating too.
	sym := hx(`00 53 15 c0 1b 05 41 43 40 41 00 a3 12 "amqp:accepted:list" 45`)
	var dp Disposition
	check("Disposition.Unmarshal symbolic", func() {
		if _, err := dp.Unmarshal(sym); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkEncodeTransfer(b *testing.B) {
	buf := make([]byte, 0, 4096)
	payload := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, benchTransfer, payload)
	}
}

func BenchmarkDecodeTransfer(b *testing.B) {
	body := append(benchTransfer.Append(nil), make([]byte, 256)...)
	var t Transfer
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.Unmarshal(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeFlow(b *testing.B) {
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, benchFlow, nil)
	}
}

func BenchmarkDecodeFlow(b *testing.B) {
	body := benchFlow.Append(nil)
	var f Flow
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Unmarshal(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeDisposition(b *testing.B) {
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, benchDispositions[0], nil)
	}
}

func BenchmarkDecodeDisposition(b *testing.B) {
	body := benchDispositions[0].Append(nil)
	var d Disposition
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Unmarshal(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeAttach(b *testing.B) {
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, benchAttach, nil)
	}
}

func BenchmarkDecodeAttach(b *testing.B) {
	body := benchAttach.Append(nil)
	var a Attach
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Unmarshal(body); err != nil {
			b.Fatal(err)
		}
	}
}

// unmarshaler is what every performative type implements for decoding.
type unmarshaler interface {
	Performative
	Unmarshal(body []byte) ([]byte, error)
}

// BenchmarkPerformatives encodes (as a whole frame) and decodes (into a
// reused value of the same type) every performative of allPerformatives,
// SASL frames included, with their allocations.
func BenchmarkPerformatives(b *testing.B) {
	seen := map[string]int{}
	for _, p := range allPerformatives() {
		name := strings.TrimPrefix(fmt.Sprintf("%T", p), "*amqp10.")
		seen[name]++
		name = fmt.Sprintf("%s-%d", name, seen[name])
		body := p.Append(nil)
		b.Run("encode/"+name, func(b *testing.B) {
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendFrame(buf[:0], FrameTypeAMQP, 1, p, nil)
			}
		})
		b.Run("decode/"+name, func(b *testing.B) {
			into := reflect.New(reflect.TypeOf(p).Elem()).Interface().(unmarshaler)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := into.Unmarshal(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A null field reads as an absent one: defaults stand, and a null mandatory
// field is reported by its name. The first error is the one returned, and
// on error the input comes back as the rest.
func TestUnmarshalNullsDefaultsAndFirstError(t *testing.T) {
	var o Open
	_, err := o.Unmarshal(hx(`00 53 10 c0 07 04 a1 01 "c" 40 40 40`))
	require.NoError(t, err)
	require.Equal(t, Open{ContainerID: "c", MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}, o)

	var fl Flow
	in := hx(`00 53 13 c0 05 04 40 43 43 40`)
	rest, err := fl.Unmarshal(in)
	require.ErrorIs(t, err, ErrInvalidField)
	require.ErrorContains(t, err, "flow.outgoing-window is mandatory")
	require.Equal(t, in, rest)

	var tr Transfer
	in = hx(`00 53 14 c0 09 07 40 40 40 40 40 40 50 05`)
	rest, err = tr.Unmarshal(in)
	require.ErrorIs(t, err, ErrInvalidField)
	require.ErrorContains(t, err, "transfer.handle is mandatory")
	require.NotContains(t, err.Error(), "rcv-settle-mode")
	require.Equal(t, in, rest)
	_, err = tr.Unmarshal(hx(`00 53 14 c0 09 07 43 40 40 40 40 40 50 05`))
	require.ErrorContains(t, err, "transfer.rcv-settle-mode 5")
}
