package router

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/value"
)

func new091(t *testing.T, p amqp091.Properties, body string) *Message {
	t.Helper()
	c, err := NewAMQP091(p, nil, []byte(body))
	require.NoError(t, err)
	m := NewMessage(c)
	m.RoutingKeys = []string{"q"}
	return m
}

// TestXDeathBytes: the x-death header of a 0-9-1 delivery is RabbitMQ's
// bytes (rabbit_binary_generator), the reference of the spec: for count 1,
// reason rejected, queue q, time 1700000000, exchange "", routing-keys [q];
// original-expiration first when the death had a ttl.
func TestXDeathBytes(t *testing.T) {
	h := &annotations.History{
		Deaths: []annotations.Death{{Queue: "q", Reason: "rejected", Count: 1, FirstTime: 1700000000123,
			LastTime: 1700000000123, Exchange: "", RoutingKeys: []string{"q"}}},
		First: annotations.Place{Queue: "q", Reason: "rejected"}, Last: annotations.Place{Queue: "q", Reason: "rejected"},
	}
	m := new091(t, amqp091.Properties{}, "x")
	d := Delivery{Msg: m, Header: m.Header, anns: value.Map{{Key: annotations.HistoryKey{}, Value: h}}}
	out, err := Delivery091Of(&d, nil)
	require.NoError(t, err)
	want, err := hex.DecodeString(strings.Join([]string{
		"07782d6465617468", "4100000068", "4600000063",
		"05636f756e74", "6c0000000000000001", "06726561736f6e", "5300000008", "72656a6563746564",
		"057175657565", "5300000001", "71", "0474696d65", "54000000006553f100",
		"0865786368616e6765", "5300000000", "0c726f7574696e672d6b657973", "4100000006", "530000000171",
	}, ""))
	require.NoError(t, err)
	assert.True(t, bytes.Contains(out.Props, want), "x-death bytes:\n%x\nnot in\n%x", want, out.Props)

	var p amqp091.Properties
	require.NoError(t, p.Decode(out.Props))
	keys := make([]string, len(p.Headers))
	for i, f := range p.Headers {
		keys[i] = f.Key
	}
	assert.Equal(t, []string{"x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
		"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason"}, keys)

	h.Deaths[0].TTL, h.Deaths[0].HasTTL = 60000, true
	out, err = Delivery091Of(&d, nil)
	require.NoError(t, err)
	require.NoError(t, p.Decode(out.Props))
	xd := p.Headers[0].Value.(amqp091.Array)[0].(amqp091.Table)
	assert.Equal(t, amqp091.Field{Key: "original-expiration", Value: "60000"}, xd[0])
}

// TestConvert10To091Bodies is the spec's E4 and E6: data sections are
// concatenated; an amqp-value or amqp-sequence body is its AMQP encoding
// with type amqp-1.0; binary and long ids go to x-message-id headers.
func TestConvert10To091Bodies(t *testing.T) {
	deliver := func(bare []byte) amqp091.Properties {
		t.Helper()
		w := amqp10.NewMessage(nil, nil, bare, nil)
		parsed, err := amqp10.ParseMessage(w.Append(nil))
		require.NoError(t, err)
		m := NewAMQP10Message(parsed)
		d := Delivery{Msg: m, Header: m.Header}
		out, err := Delivery091Of(&d, nil)
		require.NoError(t, err)
		var p amqp091.Properties
		require.NoError(t, p.Decode(out.Props))
		p.Headers = append(p.Headers, amqp091.Field{Key: "\x00body", Value: string(out.Body)})
		return p
	}
	body := func(p amqp091.Properties) string { v, _ := p.Headers.Get("\x00body"); return v.(string) }
	data := func(s string) []byte {
		return amqp10.AppendBinary(amqp10.AppendDescriptor(nil, amqp10.DescData), []byte(s))
	}
	p := deliver(append(data("ab"), data("cd")...))
	assert.Equal(t, "abcd", body(p))
	assert.False(t, p.Has(amqp091.FlagType))

	value := amqp10.AppendString(amqp10.AppendDescriptor(nil, amqp10.DescAMQPValue), "hi")
	p = deliver(value)
	assert.Equal(t, "\x00\x53\x77\xa1\x02hi", body(p))
	assert.Equal(t, "amqp-1.0", p.Type)

	seq, err := amqp10.AppendList(amqp10.AppendDescriptor(nil, amqp10.DescAMQPSequence), amqp10.List{"a", int32(1)})
	require.NoError(t, err)
	p = deliver(seq)
	assert.Equal(t, "amqp-1.0", p.Type)
	assert.Equal(t, string(seq), body(p))

	props := func(id any) []byte {
		b, err := amqp10.AppendProperties(nil, &amqp10.Properties{MessageID: id, CorrelationID: id})
		require.NoError(t, err)
		return append(b, data("")...)
	}
	p = deliver(props("abc"))
	assert.Equal(t, "abc", p.MessageID)
	p = deliver(props(uint64(0)))
	assert.Equal(t, "0", p.MessageID)
	p = deliver(props([]byte{1, 2}))
	assert.False(t, p.Has(amqp091.FlagMessageID))
	v, _ := p.Headers.Get("x-message-id")
	assert.Equal(t, amqp091.Binary{1, 2}, v)
	v, _ = p.Headers.Get("x-correlation-id")
	assert.Equal(t, amqp091.Binary{1, 2}, v)
	long := strings.Repeat("i", 256)
	p = deliver(props(long))
	assert.False(t, p.Has(amqp091.FlagCorrelationID))
	v, _ = p.Headers.Get("x-correlation-id")
	assert.Equal(t, long, v)
}

// TestConvertReplyTo is the spec's E13.
func TestConvertReplyTo(t *testing.T) {
	for in, want := range map[string]string{"a b": "/queues/a%20b", "amq.rabbitmq.reply-to.g1h2AA==": "/queues/amq.rabbitmq.reply-to.g1h2AA%3D%3D", "x=": "/queues/x%3D"} {
		w, err := convert091To10(&amqp091.Properties{Flags: amqp091.FlagReplyTo, ReplyTo: in}, nil)
		require.NoError(t, err)
		p, err := w.Properties()
		require.NoError(t, err)
		assert.Equal(t, want, *p.ReplyTo, in)
	}
	for in, want := range map[string]string{"/queues/amq.rabbitmq.reply-to.abc%3D%3D": "amq.rabbitmq.reply-to.abc==",
		"/exchanges/x/rk": "/exchanges/x/rk", "plain": "plain", "/queues/%ZZ": ""} {
		b, err := amqp10.AppendProperties(nil, &amqp10.Properties{ReplyTo: &in})
		require.NoError(t, err)
		parsed, err := amqp10.ParseMessage(amqp10.NewMessage(nil, nil, b, nil).Append(nil))
		require.NoError(t, err)
		m := NewAMQP10Message(parsed)
		out, err := Delivery091Of(&Delivery{Msg: m, Header: m.Header}, nil)
		require.NoError(t, err)
		var p amqp091.Properties
		require.NoError(t, p.Decode(out.Props))
		assert.Equal(t, want, p.ReplyTo, in)
		assert.Equal(t, want != "", p.Has(amqp091.FlagReplyTo), in)
	}
}

// TestConvert091To10OddHeaders is the spec's E15: a longstr that is not
// UTF-8 or longer than 4096 octets becomes binary; a decimal is dropped
// (RabbitMQ crashes there).
func TestConvert091To10OddHeaders(t *testing.T) {
	w, err := convert091To10(&amqp091.Properties{Flags: amqp091.FlagHeaders, Headers: amqp091.Table{
		{Key: "bin", Value: "\x00\xff"}, {Key: "u", Value: "ü"}, {Key: "big", Value: strings.Repeat("a", 5000)},
		{Key: "dec", Value: amqp091.Decimal{Scale: 1, Value: 5}}, {Key: "x-first-death-queue", Value: "old"},
	}}, nil)
	require.NoError(t, err)
	ap, err := w.ApplicationProperties()
	require.NoError(t, err)
	assert.Equal(t, value.Map{{Key: "bin", Value: []byte{0, 0xff}}, {Key: "u", Value: "ü"},
		{Key: "big", Value: bytes.Repeat([]byte("a"), 5000)}}, ap)
	ma, err := w.AnnotationMap()
	require.NoError(t, err)
	assert.Equal(t, value.Map{{Key: value.Symbol("x-first-death-queue"), Value: "old"}}, ma)
}

// TestConvertAMQPBodyAndDurability: a 0-9-1 payload of type amqp-1.0 is
// the AMQP 1.0 body again (E5); an AMQP 1.0 message with durable=false
// gets no basic properties over 0-9-1, with priority 0 and ttl 0 exactly
// those (E3).
func TestConvertAMQPBodyAndDurability(t *testing.T) {
	payload := "\x00\x53\x77\xa1\x02hi"
	w, err := convert091To10(&amqp091.Properties{Flags: amqp091.FlagType, Type: "amqp-1.0"}, []byte(payload))
	require.NoError(t, err)
	b, err := w.Body()
	require.NoError(t, err)
	assert.Equal(t, payload, string(b))
	ma, err := w.AnnotationMap()
	require.NoError(t, err)
	assert.Equal(t, value.Map{{Key: value.Symbol("x-basic-type"), Value: "amqp-1.0"}}, ma)
	assert.False(t, w.Header.Durable)

	for _, tc := range []struct {
		h     *amqp10.Header
		flags uint16
	}{
		{nil, 0},
		{&amqp10.Header{Priority: 4}, 0},
		{&amqp10.Header{Priority: 0, TTL: 0, HasTTL: true}, amqp091.FlagPriority | amqp091.FlagExpiration},
	} {
		data := amqp10.AppendBinary(amqp10.AppendDescriptor(nil, amqp10.DescData), []byte("x"))
		parsed, err := amqp10.ParseMessage(amqp10.NewMessage(tc.h, nil, data, nil).Append(nil))
		require.NoError(t, err)
		m := NewAMQP10Message(parsed)
		out, err := Delivery091Of(&Delivery{Msg: m, Header: m.Header}, nil)
		require.NoError(t, err)
		var p amqp091.Properties
		require.NoError(t, p.Decode(out.Props))
		assert.Equal(t, tc.flags, p.Flags, "%+v", tc.h)
		if tc.flags != 0 {
			assert.Equal(t, uint8(0), p.Priority)
			assert.Equal(t, "0", p.Expiration)
		}
	}
}

// TestConvert10XCCToCC: an AMQP 1.0 x-cc annotation is the 0-9-1 CC header,
// an array of longstr; internal annotations are not copied.
func TestConvert10XCCToCC(t *testing.T) {
	ma := amqp10.AppendDescriptor(nil, amqp10.DescMessageAnnotations)
	ma, err := amqp10.AppendMap(ma, value.Map{{Key: value.Symbol("x-cc"), Value: value.List{"audit"}},
		{Key: value.Symbol("x-routing-key"), Value: "k"}, {Key: value.Symbol("x-basic-type"), Value: "t"},
		{Key: value.Symbol("x-n"), Value: uint64(7)}})
	require.NoError(t, err)
	data := amqp10.AppendBinary(amqp10.AppendDescriptor(nil, amqp10.DescData), []byte("x"))
	parsed, err := amqp10.ParseMessage(amqp10.NewMessage(nil, ma, data, nil).Append(nil))
	require.NoError(t, err)
	m := NewAMQP10Message(parsed)
	out, err := Delivery091Of(&Delivery{Msg: m, Header: m.Header}, nil)
	require.NoError(t, err)
	var p amqp091.Properties
	require.NoError(t, p.Decode(out.Props))
	assert.Equal(t, amqp091.Table{{Key: "CC", Value: amqp091.Array{"audit"}}, {Key: "x-n", Value: int64(7)}}, p.Headers)
	assert.Equal(t, "t", p.Type)
}
