package amqp091

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// publishProps are the properties of a typical persistent JSON message.
func publishProps() *Properties {
	return &Properties{
		Flags:        FlagContentType | FlagHeaders | FlagDeliveryMode | FlagMessageID | FlagTimestamp,
		ContentType:  "application/json",
		Headers:      Table{{"tenant", "acme"}, {"attempt", int32(3)}},
		DeliveryMode: 2,
		MessageID:    "m-1",
		Timestamp:    1700000000,
	}
}

var body1K = bytes.Repeat([]byte("x"), 1024)

// TestEncodeAllocs pins zero allocations for the encoders when the output
// has capacity: a publish with header and body, a deliver, the acks, and
// an x-death header table.
func TestEncodeAllocs(t *testing.T) {
	buf := make([]byte, 0, 64<<10)
	publish := &BasicPublish{Exchange: "orders", RoutingKey: "new"}
	deliver := &BasicDeliver{ConsumerTag: "amq.ctag-1", DeliveryTag: 42, Exchange: "orders", RoutingKey: "new"}
	props := publishProps()
	death := &Properties{Flags: FlagHeaders | FlagDeliveryMode, Headers: xDeath(), DeliveryMode: 2}
	ack := &BasicAck{DeliveryTag: 7, Multiple: true}
	nack := &BasicNack{DeliveryTag: 8, Requeue: true}
	for name, f := range map[string]func(){
		"publish content": func() { _, _ = AppendContent(buf[:0], 1, 131072, publish, props, body1K) },
		"deliver content": func() { _, _ = AppendContent(buf[:0], 1, 131072, deliver, death, body1K) },
		"ack frame":       func() { _, _ = AppendMethodFrame(buf[:0], 1, ack) },
		"nack frame":      func() { _, _ = AppendMethodFrame(buf[:0], 1, nack) },
		"x-death table":   func() { _, _ = AppendTable(buf[:0], death.Headers) },
		"heartbeat":       func() { _ = AppendHeartbeat(buf[:0]) },
	} {
		require.Zero(t, testing.AllocsPerRun(100, f), name)
	}
}

// TestDecodeAllocs pins what decoding the hot frames costs: reading
// frames from a warm reader, decoding a basic.ack, and decoding a
// basic.publish into a struct that held the same names allocate nothing.
func TestDecodeAllocs(t *testing.T) {
	frames, err := AppendContent(nil, 1, 131072, &BasicPublish{RoutingKey: "q"}, publishProps(), body1K)
	require.NoError(t, err)
	ackFrame, err := AppendMethodFrame(nil, 1, &BasicAck{DeliveryTag: 1})
	require.NoError(t, err)
	in := bytes.NewReader(nil)
	fr := NewFrameReader(in)
	var ack BasicAck
	publishFrame, err := (&BasicPublish{Exchange: "orders", RoutingKey: "new"}).Append(nil)
	require.NoError(t, err)
	publishArgs := publishFrame[4:]
	var publish BasicPublish
	require.NoError(t, publish.Decode(publishArgs))
	require.Zero(t, testing.AllocsPerRun(100, func() {
		in.Reset(frames)
		for range 3 {
			if _, err := fr.ReadFrame(); err != nil {
				panic(err)
			}
		}
		in.Reset(ackFrame)
		f, err := fr.ReadFrame()
		if err != nil {
			panic(err)
		}
		_, _, args, err := ParseMethodHeader(f.Payload)
		if err != nil {
			panic(err)
		}
		if err := ack.Decode(args); err != nil {
			panic(err)
		}
		if err := publish.Decode(publishArgs); err != nil {
			panic(err)
		}
	}))
	require.Equal(t, BasicPublish{Exchange: "orders", RoutingKey: "new"}, publish)
}

func BenchmarkEncodePublish(b *testing.B) {
	buf := make([]byte, 0, 4096)
	m := &BasicPublish{Exchange: "orders", RoutingKey: "new"}
	p := publishProps()
	b.ReportAllocs()
	b.SetBytes(int64(len(body1K)))
	for b.Loop() {
		buf, _ = AppendContent(buf[:0], 1, 131072, m, p, body1K)
	}
}

func BenchmarkDecodePublish(b *testing.B) {
	in, err := AppendContent(nil, 1, 131072, &BasicPublish{Exchange: "orders", RoutingKey: "new"}, publishProps(), body1K)
	require.NoError(b, err)
	r := bytes.NewReader(in)
	fr := NewFrameReader(r)
	var (
		a  Assembler
		m  BasicPublish
		p  Properties
		ok bool
	)
	b.ReportAllocs()
	b.SetBytes(int64(len(body1K)))
	for b.Loop() {
		r.Reset(in)
		for range 3 {
			f, err := fr.ReadFrame()
			if err != nil {
				b.Fatal(err)
			}
			step, err := a.Next(f)
			if err != nil {
				b.Fatal(err)
			}
			switch step {
			case StepContent:
				_, _, args, _ := ParseMethodHeader(f.Payload)
				err = m.Decode(args)
			case StepHeader:
				h, _ := ParseContentHeader(f.Payload)
				err = p.Decode(h.Properties)
			case StepDone:
				ok = len(f.Payload) == len(body1K)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	if !ok {
		b.Fatal("body not seen")
	}
}

func BenchmarkEncodeDeliver(b *testing.B) {
	buf := make([]byte, 0, 4096)
	m := &BasicDeliver{ConsumerTag: "amq.ctag-1", DeliveryTag: 42, Exchange: "orders", RoutingKey: "new"}
	p := publishProps()
	b.ReportAllocs()
	for b.Loop() {
		m.DeliveryTag++
		buf, _ = AppendContent(buf[:0], 1, 131072, m, p, body1K)
	}
}

func BenchmarkDecodeDeliver(b *testing.B) {
	in, err := (&BasicDeliver{ConsumerTag: "amq.ctag-1", DeliveryTag: 42, Exchange: "orders", RoutingKey: "new"}).Append(nil)
	require.NoError(b, err)
	var m BasicDeliver
	b.ReportAllocs()
	for b.Loop() {
		_, _, args, err := ParseMethodHeader(in)
		if err == nil {
			err = m.Decode(args)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeXDeathTable(b *testing.B) {
	buf := make([]byte, 0, 4096)
	t := xDeath()
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendTable(buf[:0], t)
	}
}

func BenchmarkDecodeXDeathTable(b *testing.B) {
	in, err := AppendTable(nil, xDeath())
	require.NoError(b, err)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := ParseTable(in[4:]); err != nil {
			b.Fatal(err)
		}
	}
}
