package amqp091

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// wire decodes annotated hex: "#" comments to end of line, quoted
// strings are literal ASCII, "|" separates fields, everything else is hex
// digits in any spacing.
func wire(s string) []byte {
	var out []byte
	for line := range strings.SplitSeq(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for i, part := range strings.Split(line, `"`) {
			if i%2 == 1 {
				out = append(out, part...)
				continue
			}
			b, err := hex.DecodeString(strings.Join(strings.Fields(strings.ReplaceAll(part, "|", " ")), ""))
			if err != nil {
				panic(err)
			}
			out = append(out, b...)
		}
	}
	return out
}

func requireCode(t *testing.T, err error, code uint16, scope Scope) *Error {
	t.Helper()
	e, ok := errors.AsType[*Error](err)
	require.True(t, ok, "want *Error, got %v", err)
	require.Equal(t, code, e.Code, "%v", err)
	require.Equal(t, scope, e.Scope(), "%v", err)
	return e
}

func TestClassify(t *testing.T) {
	sasl := ProtoHeader10SASL
	for _, tc := range []struct {
		name   string
		in     string
		proto  Protocol
		legacy bool
		refuse bool
		reply  [8]byte
		reason string
	}{
		{"0-9-1", `"AMQP" 00 00 09 01`, ProtocolAMQP091, false, false, [8]byte{}, ""},
		{"0-9", `"AMQP" 01 01 00 09`, ProtocolAMQP091, true, false, [8]byte{}, ""},
		{"1.0 SASL", `"AMQP" 03 01 00 00`, ProtocolAMQP10SASL, false, false, [8]byte{}, ""},
		{"1.0 plain", `"AMQP" 00 01 00 00`, ProtocolAMQP10, false, true, sasl, "sasl_required"},
		{"1.0 TLS", `"AMQP" 02 01 00 00`, ProtocolAMQP10TLS, false, true, sasl, "sasl_required"},
		{"1.0 id 7", `"AMQP" 07 01 00 00`, ProtocolUnknown, false, true, sasl, "sasl_required"},
		{"0-8", `"AMQP" 01 01 08 00`, ProtocolUnknown, false, true, sasl, "bad_version"},
		{"0-8 alt", `"AMQP" 01 01 09 01`, ProtocolUnknown, false, true, sasl, "bad_version"},
		{"0-9-0", `"AMQP" 00 00 09 00`, ProtocolUnknown, false, true, ProtoHeader091, "bad_version"},
		{"0-10", `"AMQP" 00 00 0a 00`, ProtocolUnknown, false, true, ProtoHeader091, "bad_version"},
		{"0-8 by minor", `"AMQP" 00 00 08 00`, ProtocolUnknown, false, true, sasl, "bad_version"},
		{"http", `"GET / HT"`, ProtocolUnknown, false, true, sasl, "detected_http_get"},
		{"tls", `16 03 01 02 00 01 00 01`, ProtocolUnknown, false, true, sasl, "detected_tls"},
		{"garbage", `00 01 02 03 04 05 06 07`, ProtocolUnknown, false, true, sasl, "bad_header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Classify([8]byte(wire(tc.in)))
			require.Equal(t, Handshake{Protocol: tc.proto, Legacy09: tc.legacy, Refuse: tc.refuse, Reply: tc.reply, Reason: tc.reason}, got)
		})
	}
}

// goldenMethods are method frame payloads written from the spec's field
// lists (class-id, method-id, arguments).
var goldenMethods = []struct {
	name string
	m    Method
	wire string
}{
	{"connection.tune", &ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60},
		`000a 001e | 07ff | 00020000 | 003c`},
	{"connection.start-ok", &ConnectionStartOk{
		ClientProperties: Table{{"capabilities", Table{{"basic.nack", true}}}},
		Mechanism:        "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"},
		`000a 000b | 0000001f 0c "capabilities" "F" 0000000d 0a "basic.nack" "t" 01
		 05 "PLAIN" | 0000000c 00 "guest" 00 "guest" | 05 "en_US"`},
	{"connection.close", &ConnectionClose{ReplyCode: 501, ReplyText: "FRAME_ERROR - x", ClassID: 60, MethodID: 40},
		`000a 0032 | 01f5 | 0f "FRAME_ERROR - x" | 003c | 0028`},
	{"connection.blocked", &ConnectionBlocked{Reason: "low on memory"}, `000a 003c | 0d "low on memory"`},
	{"connection.update-secret", &ConnectionUpdateSecret{NewSecret: "s", Reason: "r"}, `000a 0046 | 00000001 "s" | 01 "r"`},
	{"channel.open", &ChannelOpen{}, `0014 000a | 00`},
	{"channel.open-ok", &ChannelOpenOk{}, `0014 000b | 00000000`},
	{"channel.flow", &ChannelFlow{Active: true}, `0014 0014 | 01`},
	{"exchange.declare", &ExchangeDeclare{Exchange: "x", Type: "topic", Durable: true, Internal: true, Arguments: Table{}},
		`0028 000a | 0000 | 01 "x" | 05 "topic" | 0a # durable bit 1, internal bit 3
		 00000000`},
	{"exchange.unbind-ok", &ExchangeUnbindOk{}, `0028 0033`},
	{"queue.declare", &QueueDeclare{Queue: "q", Passive: true, Exclusive: true, NoWait: true,
		Arguments: Table{{"x-queue-type", "quorum"}}},
		`0032 000a | 0000 | 01 "q" | 15 # passive 1, exclusive 4, no-wait 16
		 00000018 0c "x-queue-type" "S" 00000006 "quorum"`},
	{"queue.declare-ok", &QueueDeclareOk{Queue: "amq.gen-1", MessageCount: 3, ConsumerCount: 1},
		`0032 000b | 09 "amq.gen-1" | 00000003 | 00000001`},
	{"queue.delete", &QueueDelete{Queue: "q", IfEmpty: true}, `0032 0028 | 0000 | 01 "q" | 02`},
	{"basic.qos", &BasicQos{PrefetchCount: 1000}, `003c 000a | 00000000 | 03e8 | 00`},
	{"basic.consume", &BasicConsume{Queue: "q", ConsumerTag: "c", NoAck: true, Exclusive: true, Arguments: Table{}},
		`003c 0014 | 0000 | 01 "q" | 01 "c" | 06 | 00000000`},
	{"basic.publish", &BasicPublish{Exchange: "orders", RoutingKey: "new", Mandatory: true},
		`003c 0028 | 0000 | 06 "orders" | 03 "new" | 01`},
	{"basic.return", &BasicReturn{ReplyCode: 312, ReplyText: "NO_ROUTE", Exchange: "e", RoutingKey: "k"},
		`003c 0032 | 0138 | 08 "NO_ROUTE" | 01 "e" | 01 "k"`},
	{"basic.deliver", &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, Redelivered: true, Exchange: "", RoutingKey: "work.dlq"},
		`003c 003c | 04 "ctag" | 0000000000000001 | 01 | 00 | 08 "work.dlq"`},
	{"basic.get-ok", &BasicGetOk{DeliveryTag: 2, Exchange: "x", RoutingKey: "k", MessageCount: 7},
		`003c 0047 | 0000000000000002 | 00 | 01 "x" | 01 "k" | 00000007`},
	{"basic.ack", &BasicAck{DeliveryTag: 5, Multiple: true}, `003c 0050 | 0000000000000005 | 01`},
	{"basic.reject", &BasicReject{DeliveryTag: 6}, `003c 005a | 0000000000000006 | 00`},
	{"basic.nack", &BasicNack{DeliveryTag: 7, Requeue: true}, `003c 0078 | 0000000000000007 | 02`},
	{"basic.recover-async", &BasicRecoverAsync{Requeue: true}, `003c 0064 | 01`},
	{"confirm.select", &ConfirmSelect{NoWait: true}, `0055 000a | 01`},
	{"tx.commit-ok", &TxCommitOk{}, `005a 0015`},
}

func TestGoldenMethods(t *testing.T) {
	for _, tc := range goldenMethods {
		t.Run(tc.name, func(t *testing.T) {
			want := wire(tc.wire)
			got, err := tc.m.Append(nil)
			require.NoError(t, err)
			require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
			back, err := ParseMethod(want)
			require.NoError(t, err)
			require.Equal(t, tc.m, back)
			c, m := back.ID()
			require.Equal(t, tc.name, strings.ReplaceAll(MethodName(c, m), "_", "-"))
		})
	}
}

// fill sets every field of the method struct to a distinct non-zero value
// (all bits true), so a round trip proves each field has its own place.
func fill(m Method) {
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(i + 1))
		case reflect.String:
			f.SetString(strings.Repeat(string(rune('a'+i)), i+1))
		case reflect.Slice: // Table
			f.Set(reflect.ValueOf(Table{{"k", int32(i)}}))
		}
	}
}

func TestMethodsRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range allMethods() {
		c, id := m.ID()
		name := MethodName(c, id)
		require.NotEmpty(t, name)
		require.False(t, seen[name], "duplicate %s", name)
		seen[name] = true
		fill(m)
		b, err := m.Append(nil)
		require.NoError(t, err, name)
		back, err := ParseMethod(b)
		require.NoError(t, err, name)
		require.Equal(t, m, back, name)
		// Every truncation fails, as does an extra octet.
		for n := 4; n < len(b); n++ {
			_, err := ParseMethod(b[:n])
			requireCode(t, err, FrameError, ScopeConnection)
		}
		_, err = ParseMethod(append(b, 0))
		e := requireCode(t, err, FrameError, ScopeConnection)
		require.ErrorIs(t, e, ErrTrailing)
		require.Equal(t, [2]uint16{c, id}, [2]uint16{e.ClassID, e.MethodID})
	}
	require.Len(t, seen, 66) // 14 connection, 6 channel, 2 access, 8 exchange, 10 queue, 18 basic, 2 confirm, 6 tx
}

// TestBitPacking pins that bits are packed least significant first, that
// nine bits would need a second octet (none of the methods has more than
// five), and that unused high bits are ignored when decoding, as RabbitMQ
// does.
func TestBitPacking(t *testing.T) {
	var m BasicNack
	require.NoError(t, m.Decode(wire(`0000000000000009 | fc`)))
	require.Equal(t, BasicNack{DeliveryTag: 9}, m)
	require.NoError(t, m.Decode(wire(`0000000000000009 | 03`)))
	require.Equal(t, BasicNack{DeliveryTag: 9, Multiple: true, Requeue: true}, m)
	var q QueueDeclare
	require.NoError(t, q.Decode(wire(`0000 00 1f 00000000`)))
	require.True(t, q.Passive && q.Durable && q.Exclusive && q.AutoDelete && q.NoWait)
	var r AccessRequest
	require.NoError(t, r.Decode(wire(`00 1f`)))
	require.True(t, r.Exclusive && r.Passive && r.Active && r.Write && r.Read)
}

func TestMethodErrors(t *testing.T) {
	_, err := ParseMethod(wire(`003c`))
	requireCode(t, err, FrameError, ScopeConnection)
	_, err = ParseMethod(wire(`003c 00ff`))
	e := requireCode(t, err, CommandInvalid, ScopeConnection)
	require.ErrorIs(t, e, ErrUnknownMethod)
	// Malformed UTF-8 in a shortstr of a method without content.
	_, err = ParseMethod(wire(`0032 000a 0000 01 ff 00 00000000`))
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrBadUTF8)
	// ...is not checked in basic.publish, as in RabbitMQ.
	_, err = ParseMethod(wire(`003c 0028 0000 01 ff 00 00`))
	require.NoError(t, err)
	// A bad table inside arguments.
	_, err = ParseMethod(wire(`0032 000a 0000 01 "q" 00 00000003 01 "k" "?"`))
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrInvalidType)
	// A shortstr over 255 octets cannot be encoded.
	_, err = (&BasicPublish{RoutingKey: strings.Repeat("k", 256)}).Append(nil)
	require.ErrorIs(t, err, ErrEncode)
}

func TestErrorScope(t *testing.T) {
	require.Equal(t, ScopeChannel, (&Error{Code: NotFound, Channel: 1}).Scope())
	require.Equal(t, ScopeConnection, (&Error{Code: NotFound, Channel: 0}).Scope())
	require.Equal(t, ScopeConnection, (&Error{Code: FrameError, Channel: 1}).Scope())
	require.Equal(t, ScopeConnection, (&Error{Code: 999, Channel: 1}).Scope())
	e := &Error{Code: NotFound, Text: "no queue 'q' in vhost '/'"}
	require.Equal(t, "NOT_FOUND - no queue 'q' in vhost '/'", e.ReplyText())
	require.Len(t, (&Error{Code: NotFound, Text: strings.Repeat("x", 300)}).ReplyText(), 255)
}

// fieldCases are one value of every type RabbitMQ parses, with its octets.
var fieldCases = []struct {
	name string
	v    any
	wire string
}{
	{"bool", true, `"t" 01`},
	{"byte", int8(-1), `"b" ff`},
	{"ubyte", uint8(255), `"B" ff`},
	{"short", int16(-2), `"s" fffe`},
	{"ushort", uint16(65535), `"u" ffff`},
	{"signedint", int32(-3), `"I" fffffffd`},
	{"unsignedint", uint32(4294967295), `"i" ffffffff`},
	{"long", int64(1) << 40, `"l" 0000010000000000`},
	{"float", float32(1.5), `"f" 3fc00000`},
	{"double", 1.5, `"d" 3ff8000000000000`},
	{"decimal", Decimal{Scale: 2, Value: 12345}, `"D" 02 00003039`},
	{"longstr", "acme", `"S" 00000004 "acme"`},
	{"binary", Binary{0, 1, 2}, `"x" 00000003 000102`},
	{"timestamp", Timestamp(1700000000), `"T" 000000006553f100`},
	{"table", Table{{"a", "b"}}, `"F" 00000008 01 "a" "S" 00000001 "b"`},
	{"array", Array{"x", int64(1)}, `"A" 0000000f "S" 00000001 "x" "l" 0000000000000001`},
	{"void", nil, `"V"`},
}

func TestFieldValues(t *testing.T) {
	for _, tc := range fieldCases {
		t.Run(tc.name, func(t *testing.T) {
			want := wire(tc.wire)
			got, err := AppendValue(nil, tc.v)
			require.NoError(t, err)
			require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
			back, rest, err := parseValue(string(want), 0)
			require.NoError(t, err)
			require.Empty(t, rest)
			require.Equal(t, tc.v, back)
		})
	}
	// RabbitMQ's readings: L is a signed long, any non-zero bool octet is true.
	v, _, err := parseValue(string(wire(`"L" ffffffffffffffff`)), 0)
	require.NoError(t, err)
	require.Equal(t, int64(-1), v)
	v, _, err = parseValue(string(wire(`"t" 07`)), 0)
	require.NoError(t, err)
	require.Equal(t, true, v)
	_, err = AppendValue(nil, struct{}{})
	require.ErrorIs(t, err, ErrEncode)
	_, err = AppendValue(nil, math.NaN())
	require.NoError(t, err)
}

// xDeath is a header table like a message dead-lettered twice carries.
func xDeath() Table {
	death := func(queue, reason string) Table {
		return Table{
			{"count", int64(1)},
			{"reason", reason},
			{"queue", queue},
			{"time", Timestamp(1700000000)},
			{"exchange", "orders"},
			{"routing-keys", Array{"new", "audit"}},
			{"original-expiration", "60000"},
		}
	}
	return Table{
		{"CC", Array{"audit"}},
		{"tenant", "acme"},
		{"x-death", Array{death("retry", "expired"), death("orders.q", "rejected")}},
		{"x-first-death-exchange", "orders"},
		{"x-first-death-queue", "orders.q"},
		{"x-first-death-reason", "rejected"},
		{"x-last-death-exchange", "dlx"},
		{"x-last-death-queue", "retry"},
		{"x-last-death-reason", "expired"},
	}
}

func TestTableRoundTrip(t *testing.T) {
	b, err := AppendTable(nil, xDeath())
	require.NoError(t, err)
	back, err := ParseTable(b[4:])
	require.NoError(t, err)
	require.Equal(t, xDeath(), back)
	v, ok := back.Get("x-last-death-queue")
	require.True(t, ok)
	require.Equal(t, "retry", v)
	// Duplicate keys survive decoding in order.
	dup, err := ParseTable(wire(`01 "b" "l" 0000000000000001 01 "a" "l" 0000000000000002 01 "b" "l" 0000000000000003`))
	require.NoError(t, err)
	require.Equal(t, Table{{"b", int64(1)}, {"a", int64(2)}, {"b", int64(3)}}, dup)
}

// nested returns a table nested depth levels deep: {"a": {"a": ...}}.
func nested(depth int) []byte {
	b := []byte{}
	for range depth {
		inner := b
		b = append([]byte{1, 'a', 'F', 0, 0, 0, 0}, inner...)
		n := len(inner)
		b[3], b[4], b[5], b[6] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	}
	return b
}

// TestTableLimits: a table nested 10,000 deep or declaring a 4 GiB length
// is refused without allocating it.
func TestTableLimits(t *testing.T) {
	_, err := ParseTable(nested(MaxDepth - 1))
	require.NoError(t, err)
	deep := nested(10000)
	_, err = ParseTable(deep)
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrTooDeep)
	var ms testingMem
	// The input is copied once (the table's text), not once per level.
	ms.check(t, uint64(len(deep))+64<<10, func() { _, _ = ParseTable(deep) })

	huge := wire(`01 "k" "S" ffffffff "abc"`)
	_, err = ParseTable(huge)
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrTruncated)
	for _, typ := range []string{`"S"`, `"x"`, `"F"`, `"A"`} {
		_, err = ParseTable(wire(`01 "k"` + typ + `ffffffff 00`))
		require.ErrorIs(t, err, ErrTruncated, typ)
	}
	var q QueueDeclare
	require.ErrorIs(t, q.Decode(wire(`0000 01 "q" 00 ffffffff`)), ErrTruncated)
	ms.check(t, 64<<10, func() { _, _ = ParseTable(huge) })

	_, err = AppendTable(nil, Table{{strings.Repeat("k", 256), nil}})
	require.ErrorIs(t, err, ErrEncode)
	var deepT any = Table{}
	for range MaxDepth + 1 {
		deepT = Table{{"a", deepT}}
	}
	_, err = AppendTable(nil, deepT.(Table))
	require.ErrorIs(t, err, ErrTooDeep)
}

// basicProperties is E1's property set (every property present).
func basicProperties() *Properties {
	return &Properties{
		Flags:           FlagContentType | FlagContentEncoding | FlagHeaders | FlagDeliveryMode | FlagPriority | FlagCorrelationID | FlagReplyTo | FlagExpiration | FlagMessageID | FlagTimestamp | FlagType | FlagUserID | FlagAppID | FlagClusterID,
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         Table{{"tenant", "acme"}},
		DeliveryMode:    2,
		Priority:        5,
		CorrelationID:   "c",
		ReplyTo:         "replies/q",
		Expiration:      "60000",
		MessageID:       "m-1",
		Timestamp:       1700000000,
		Type:            "order.created",
		UserID:          "guest",
		AppID:           "shop",
		ClusterID:       "c1",
	}
}

func TestPropertiesGolden(t *testing.T) {
	want := wire(`fffc
		10 "application/json" | 04 "gzip" | 00000010 06 "tenant" "S" 00000004 "acme"
		02 | 05 | 01 "c" | 09 "replies/q" | 05 "60000" | 03 "m-1" | 000000006553f100
		0d "order.created" | 05 "guest" | 04 "shop" | 02 "c1"`)
	p := basicProperties()
	got, err := p.Append(nil)
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
	var back Properties
	require.NoError(t, back.Decode(want))
	require.Equal(t, *p, back)

	// delivery-mode and priority 0 present are not absent.
	got, err = (&Properties{Flags: FlagDeliveryMode | FlagPriority}).Append(nil)
	require.NoError(t, err)
	require.Equal(t, wire(`1800 00 00`), got)
	require.NoError(t, back.Decode(wire(`0000`)))
	require.Equal(t, Properties{}, back)

	// Continuation words that set nothing else are accepted.
	require.NoError(t, back.Decode(wire(`1001 0001 0000 02`)))
	require.Equal(t, Properties{Flags: FlagDeliveryMode, DeliveryMode: 2}, back)
	for _, bad := range []string{`0002`, `0001 8000 00`, `1000`, `1000 02 00`, `00`} {
		err := back.Decode(wire(bad))
		requireCode(t, err, FrameError, ScopeConnection)
	}
}

func TestFrameReader(t *testing.T) {
	var out []byte
	out, err := AppendMethodFrame(out, 0, &ConnectionTuneOk{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60})
	require.NoError(t, err)
	require.Equal(t, wire(`01 0000 0000000c 000a 001f 07ff 00020000 003c ce`), out)
	out = AppendHeartbeat(out)
	body := bytes.Repeat([]byte("b"), 20000)
	out, err = AppendContent(out, 3, InitialFrameMax, &BasicPublish{RoutingKey: "q"}, basicProperties(), body)
	require.NoError(t, err)

	fr := NewFrameReader(bytes.NewReader(out))
	f, err := fr.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, FrameMethod, f.Type)
	f, err = fr.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, Frame{Type: FrameHeartbeat, Payload: []byte{}}, f)

	var a Assembler
	var got []byte
	steps := []Step{}
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, uint16(3), f.Channel)
		require.LessOrEqual(t, len(f.Payload)+FrameOverhead, InitialFrameMax)
		step, err := a.Next(f)
		require.NoError(t, err)
		steps = append(steps, step)
		switch f.Type {
		case FrameHeader:
			h, err := ParseContentHeader(f.Payload)
			require.NoError(t, err)
			require.Equal(t, uint64(len(body)), h.BodySize)
			var p Properties
			require.NoError(t, p.Decode(h.Properties))
			require.Equal(t, *basicProperties(), p)
		case FrameBody:
			got = append(got, f.Payload...)
		}
	}
	require.Equal(t, body, got)
	require.Equal(t, []Step{StepContent, StepHeader, StepBody, StepBody, StepDone}, steps)
}

func readOne(t *testing.T, frameMax uint32, in []byte) (Frame, error) {
	t.Helper()
	fr := NewFrameReader(bytes.NewReader(in))
	if frameMax != InitialFrameMax {
		fr.SetFrameMax(frameMax)
	}
	return fr.ReadFrame()
}

func TestFrameReaderErrors(t *testing.T) {
	frame := func(typ byte, ch uint16, payload []byte, end byte) []byte {
		b := []byte{typ, byte(ch >> 8), byte(ch), 0, 0, 0, 0}
		n := len(payload)
		b[3], b[4], b[5], b[6] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return append(append(b, payload...), end)
	}
	// Before tune-ok the limit is 8192 octets of payload (RabbitMQ's
	// check allows the frame overhead on top of the spec's limit).
	_, err := readOne(t, InitialFrameMax, frame(FrameBody, 1, make([]byte, InitialFrameMax), FrameEnd))
	require.NoError(t, err)
	_, err = readOne(t, InitialFrameMax, frame(FrameBody, 1, make([]byte, InitialFrameMax+1), FrameEnd))
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrFrameTooLarge)
	_, err = readOne(t, 131072, frame(FrameBody, 1, make([]byte, 131072+1), FrameEnd))
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrFrameTooLarge)

	_, err = readOne(t, InitialFrameMax, frame(FrameMethod, 0, wire(`000a 0033`), 0xCD))
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrFrameEnd)
	_, err = readOne(t, InitialFrameMax, frame(4, 0, nil, FrameEnd))
	require.ErrorIs(t, requireCode(t, err, FrameError, ScopeConnection), ErrUnknownFrame)
	_, err = readOne(t, InitialFrameMax, frame(FrameHeartbeat, 0, []byte{0}, FrameEnd))
	requireCode(t, err, FrameError, ScopeConnection)
	_, err = readOne(t, InitialFrameMax, frame(FrameHeartbeat, 5, nil, FrameEnd))
	e := requireCode(t, err, UnexpectedFrame, ScopeConnection)
	require.Equal(t, uint16(5), e.Channel)

	_, err = readOne(t, InitialFrameMax, nil)
	require.ErrorIs(t, err, io.EOF)
	_, err = readOne(t, InitialFrameMax, wire(`01 0000`))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = readOne(t, InitialFrameMax, wire(`01 0000 00000004 000a`))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// TestFrameReaderClaimedSize: with no frame-max, a frame claiming 4 GiB
// whose octets never come costs the octets that came, not 4 GiB.
func TestFrameReaderClaimedSize(t *testing.T) {
	in := append(wire(`03 0001 ffffffff`), make([]byte, 1000)...)
	var err error
	allocs := testing.AllocsPerRun(5, func() {
		fr := NewFrameReader(bytes.NewReader(in))
		fr.SetFrameMax(0)
		_, err = fr.ReadFrame()
	})
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Less(t, allocs, 10.0)
	var ms testingMem
	ms.check(t, 1<<20, func() {
		fr := NewFrameReader(bytes.NewReader(in))
		fr.SetFrameMax(0)
		_, _ = fr.ReadFrame()
	})
}

func TestAssemblerErrors(t *testing.T) {
	publish, err := (&BasicPublish{}).Append(nil)
	require.NoError(t, err)
	header := func(class, weight uint16, size uint64) []byte {
		b, err := AppendHeaderFrame(nil, 1, size, &Properties{})
		require.NoError(t, err)
		p := b[7 : len(b)-1]
		p[0], p[1], p[2], p[3] = byte(class>>8), byte(class), byte(weight>>8), byte(weight)
		return p
	}
	type fr = Frame
	for _, tc := range []struct {
		name   string
		frames []Frame
		code   uint16
	}{
		{"header first", []fr{{FrameHeader, 1, header(60, 0, 1)}}, UnexpectedFrame},
		{"body first", []fr{{FrameBody, 1, []byte("x")}}, UnexpectedFrame},
		{"method instead of header", []fr{{FrameMethod, 1, publish}, {FrameMethod, 1, publish}}, UnexpectedFrame},
		{"body instead of header", []fr{{FrameMethod, 1, publish}, {FrameBody, 1, []byte("x")}}, UnexpectedFrame},
		{"wrong class", []fr{{FrameMethod, 1, publish}, {FrameHeader, 1, header(50, 0, 1)}}, UnexpectedFrame},
		{"weight", []fr{{FrameMethod, 1, publish}, {FrameHeader, 1, header(60, 1, 1)}}, UnexpectedFrame},
		{"short header", []fr{{FrameMethod, 1, publish}, {FrameHeader, 1, []byte{0, 60}}}, FrameError},
		{"body too large", []fr{{FrameMethod, 1, publish}, {FrameHeader, 1, header(60, 0, MaxBodySize+1)}}, FrameError},
		{"body over size", []fr{{FrameMethod, 1, publish}, {FrameHeader, 1, header(60, 0, 1)}, {FrameBody, 1, []byte("xy")}}, FrameError},
		{"method instead of body", []fr{{FrameMethod, 1, publish}, {FrameHeader, 1, header(60, 0, 2)}, {FrameBody, 1, []byte("x")}, {FrameMethod, 1, publish}}, UnexpectedFrame},
		{"unknown method", []fr{{FrameMethod, 1, wire(`003c 0029`)}}, CommandInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Assembler
			var err error
			for _, f := range tc.frames {
				if _, err = a.Next(f); err != nil {
					break
				}
			}
			e := requireCode(t, err, tc.code, ScopeConnection)
			require.Equal(t, uint16(1), e.Channel)
		})
	}
	var a Assembler
	step, err := a.Next(Frame{FrameMethod, 1, publish})
	require.NoError(t, err)
	require.Equal(t, StepContent, step)
	step, err = a.Next(Frame{FrameHeader, 1, header(60, 0, 0)})
	require.NoError(t, err)
	require.Equal(t, StepDone, step, "an empty body has no body frames")
	ack, err := (&BasicAck{}).Append(nil)
	require.NoError(t, err)
	step, err = a.Next(Frame{FrameMethod, 1, ack})
	require.NoError(t, err)
	require.Equal(t, StepMethod, step)

	// A header or body frame where a method is expected names no method
	// (RabbitMQ's method none: class-id and method-id 0), not the content
	// method completed before it.
	for _, f := range []Frame{{FrameHeader, 1, header(60, 0, 1)}, {FrameBody, 1, []byte("x")}} {
		var a Assembler
		_, err = a.Next(Frame{FrameMethod, 1, publish})
		require.NoError(t, err)
		step, err = a.Next(Frame{FrameHeader, 1, header(60, 0, 0)})
		require.NoError(t, err)
		require.Equal(t, StepDone, step)
		_, err = a.Next(f)
		e := requireCode(t, err, UnexpectedFrame, ScopeConnection)
		require.Equal(t, [2]uint16{0, 0}, [2]uint16{e.ClassID, e.MethodID}, "class-id and method-id")
	}
}
