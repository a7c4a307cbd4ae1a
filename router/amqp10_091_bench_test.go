package router

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// The conversions between the protocols on the delivery path, with their
// allocations: a 0-9-1 message's AMQP 1.0 form (built once per message),
// an AMQP 1.0 message delivered over 0-9-1 (per delivery), and a 0-9-1
// message delivered over 0-9-1 (no conversion).

var convBody = bytes.Repeat([]byte("x"), 1024)

// convProps091 are a typical 0-9-1 publish's properties: persistent JSON
// with a message id, a timestamp and two application headers.
func convProps091() amqp091.Properties {
	return amqp091.Properties{
		Flags: amqp091.FlagContentType | amqp091.FlagHeaders | amqp091.FlagDeliveryMode | amqp091.FlagMessageID |
			amqp091.FlagTimestamp,
		ContentType: "application/json", Headers: amqp091.Table{{Key: "tenant", Value: "acme"}, {Key: "attempt", Value: int32(3)}},
		DeliveryMode: 2, MessageID: "m-1", Timestamp: 1700000000,
	}
}

// convMsg10 is the same message published over AMQP 1.0.
func convMsg10(tb testing.TB) *Message {
	tb.Helper()
	id, ct := any("m-1"), value.Symbol("application/json")
	ts := value.Timestamp(1700000000000)
	b := amqp10.AppendHeader(nil, &amqp10.Header{Durable: true, Priority: 4})
	b, err := amqp10.AppendProperties(b, &amqp10.Properties{MessageID: id, ContentType: &ct, CreationTime: &ts})
	require.NoError(tb, err)
	b, err = amqp10.AppendApplicationProperties(b, value.Map{{Key: "tenant", Value: "acme"}, {Key: "attempt", Value: int32(3)}})
	require.NoError(tb, err)
	b = amqp10.AppendData(b, convBody)
	w, err := amqp10.ParseMessage(b)
	require.NoError(tb, err)
	m := NewAMQP10Message(w)
	m.Exchange, m.RoutingKeys = "", []string{"q"}
	return m
}

func convMsg091(tb testing.TB) *Message {
	tb.Helper()
	c, err := NewAMQP091(convProps091(), nil, convBody)
	require.NoError(tb, err)
	m := NewMessage(c)
	m.RoutingKeys = []string{"q"}
	return m
}

// Allocation ceilings of the conversions, pinned: a change that makes one
// allocate more fails TestConversionAllocs.
const (
	// per delivery: the sorted copy of the headers table (the
	// publisher's order is not the one RabbitMQ delivers); a message
	// without headers, or with sorted ones, is sent as published
	allocs091To091 = 1
	// per delivery: the application-properties map as decoded (map, keys,
	// values), the headers table, and the strings kept (message-id,
	// content-type); the properties are read in place
	allocs10To091 = 12
	// once per message: the sections' one buffer, the parsed message, the
	// maps of headers and values, the properties' values
	allocs091To10 = 8
)

func TestConversionAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	scratch := make([]byte, 0, 4096)
	m091 := convMsg091(t)
	d091 := &Delivery{Tag: 1, Msg: m091, Header: m091.Header}
	if got := testing.AllocsPerRun(100, func() {
		out, err := Delivery091Of(d091, scratch)
		if err != nil || len(out.Body) != len(convBody) {
			t.Fatal(err)
		}
	}); got > allocs091To091 {
		t.Errorf("0-9-1 delivered over 0-9-1: %v allocs, want at most %d", got, allocs091To091)
	}
	m10 := convMsg10(t)
	d10 := &Delivery{Tag: 1, Msg: m10, Header: m10.Header}
	if got := testing.AllocsPerRun(100, func() {
		out, err := Delivery091Of(d10, scratch)
		if err != nil || len(out.Body) != len(convBody) {
			t.Fatal(err)
		}
	}); got > allocs10To091 {
		t.Errorf("AMQP 1.0 delivered over 0-9-1: %v allocs, want at most %d", got, allocs10To091)
	}
	p := convProps091()
	if got := testing.AllocsPerRun(100, func() {
		if _, err := convert091To10(&p, convBody); err != nil {
			t.Fatal(err)
		}
	}); got > allocs091To10 {
		t.Errorf("0-9-1 converted to AMQP 1.0: %v allocs, want at most %d", got, allocs091To10)
	}
}

func BenchmarkDelivery091Of(b *testing.B) {
	scratch := make([]byte, 0, 4096)
	for _, tc := range []struct {
		name string
		m    *Message
	}{{"091-to-091", convMsg091(b)}, {"10-to-091", convMsg10(b)}} {
		b.Run(tc.name, func(b *testing.B) {
			d := &Delivery{Tag: 1, Msg: tc.m, Header: tc.m.Header}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Delivery091Of(d, scratch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConvert091To10 is the per-message cost of a 0-9-1 message's
// first AMQP 1.0 delivery (later ones share the form).
func BenchmarkConvert091To10(b *testing.B) {
	p := convProps091()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := convert091To10(&p, convBody); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAMQP10DeliveryOf091 is an AMQP 1.0 delivery of a 0-9-1 message
// whose 1.0 form exists (every delivery after the message's first).
func BenchmarkAMQP10DeliveryOf091(b *testing.B) {
	m := convMsg091(b)
	d := &Delivery{Tag: 1, Msg: m, Header: m.Header}
	var bc BoxCache
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendAMQP10Delivery(buf[:0], d, nil, &bc); err != nil {
			b.Fatal(err)
		}
	}
}
