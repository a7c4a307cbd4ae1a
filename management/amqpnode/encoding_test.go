package amqpnode

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// unhex decodes hex digits, ignoring spaces, line breaks and comments
// from "#" to the end of a line.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	var digits strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	require.NoError(t, err)
	return b
}

// The reply to a queue declaration, byte for byte as RabbitMQ 4.3 writes
// it. No RabbitMQ could be run to record one, so the expected bytes are
// built by hand from RabbitMQ's source: rabbit_amqp_management's
// handle_request and encode_queue (the sections, the keys, their order and
// types), amqp10_framing (trailing nulls of properties omitted) and
// amqp10_binary_generator (the encoding of each type: {boolean, B} as
// 0x56 0x01/0x00, the smallest forms of uint, ulong and long, str8 up to
// 255 bytes, list8/map8/array8 while they fit, an array of utf8 with the
// 0xb1 constructor).
func TestDeclareQueueReplyIsRabbitMQsBytes(t *testing.T) {
	e := newTestEnv(t) // node name "epitaph@test"
	req := testRequest(t, "m1", "PUT", "/queues/q1", amqp10.Map{
		{Key: "durable", Value: true},
		{Key: "exclusive", Value: false},
		{Key: "auto_delete", Value: false},
		{Key: "arguments", Value: amqp10.Map{
			{Key: "x-max-length", Value: int64(10)},
			{Key: "x-queue-type", Value: "classic"},
		}},
	})
	got := e.node.Request(nil, e.user, e.vh, req)
	want := unhex(t, `
		00 53 73 c0 0e 06                    # properties, list8 of 6 fields (13 bytes + count)
		  40 40 40                           # message-id, user-id, to: null
		  a1 03 323031                       # subject "201"
		  40                                 # reply-to: null
		  a1 02 6d31                         # correlation-id "m1" (the request's message-id)
		00 53 74 c1 15 02                    # application-properties, map8 of 2 (20 bytes + count)
		  a1 0d 687474703a726573706f6e7365   # "http:response"
		  a1 03 312e31                       # "1.1"
		00 53 77 c1 d5 16                    # amqp-value: map8 of 22 (212 bytes + count)
		  a1 06 6c6561646572                 # "leader"
		  a1 0c 657069746170684074657374 # "epitaph@test"
		  a1 0d 6d6573736167655f636f756e74   # "message_count"
		  44                                 # {ulong, 0}
		  a1 0e 636f6e73756d65725f636f756e74 # "consumer_count"
		  43                                 # {uint, 0}
		  a1 04 6e616d65  a1 02 7131         # "name" "q1"
		  a1 05 76686f7374 a1 01 2f         # "vhost" "/"
		  a1 07 64757261626c65  56 01        # "durable" {boolean, true}
		  a1 0b 6175746f5f64656c657465 56 00 # "auto_delete" {boolean, false}
		  a1 09 6578636c7573697665 56 00     # "exclusive" {boolean, false}
		  a1 04 74797065  a1 07 636c6173736963   # "type" "classic"
		  a1 09 617267756d656e7473           # "arguments"
		    c1 28 04                         # map8 of 4 (39 bytes + count), in the client's order
		    a1 0c 782d6d61782d6c656e677468 55 0a        # "x-max-length" {long, 10}
		    a1 0c 782d71756575652d74797065 a1 07 636c6173736963 # "x-queue-type" "classic"
		  a1 08 7265706c69636173             # "replicas"
		    e0 12 01 b1                      # array8 of 1 utf8 (17 bytes + count), constructor str32
		    0000000c 657069746170684074657374  # "epitaph@test"
	`)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
}

// An error reply to a request whose message-id is a ulong, and a count
// reply past one byte, as RabbitMQ 4.3 writes them (built from its source
// as above): the correlation-id keeps the request's type, the explanation
// is a utf8 amqp-value, message_count a full-width ulong.
func TestErrorAndCountRepliesAreRabbitMQsBytes(t *testing.T) {
	e := newTestEnv(t)
	got := e.node.Request(nil, e.user, e.vh, testRequest(t, uint64(7), "GET", "/queues/nope", nil))
	want := unhex(t, `
		00 53 73 c0 0c 06                    # properties, list8 of 6 fields (11 bytes + count)
		  40 40 40                           # message-id, user-id, to: null
		  a1 03 343034                       # subject "404"
		  40                                 # reply-to: null
		  53 07                              # correlation-id {ulong, 7}
		00 53 74 c1 15 02                    # application-properties
		  a1 0d 687474703a726573706f6e7365 a1 03 312e31 # "http:response" "1.1"
		00 53 77 a1 23                       # amqp-value: utf8 of 35 bytes
		  717565756520276e6f70652720696e2076686f737420272f27206e6f7420666f756e64 # queue 'nope' in vhost '/' not found
	`)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))

	_, _, err := e.vh.DeclareQueue(router.QueueSpec{Name: "q2", Durable: true})
	require.NoError(t, err)
	enqueue(t, e.vh, "q2", 300)
	got = e.node.Request(nil, e.user, e.vh, testRequest(t, "d", "DELETE", "/queues/q2", nil))
	want = unhex(t, `
		00 53 73 c0 0d 06 40 40 40 a1 03 323030 40 a1 01 64 # list8 of 6 (12 bytes + count): subject "200", correlation-id "d"
		00 53 74 c1 15 02 a1 0d 687474703a726573706f6e7365 a1 03 312e31
		00 53 77 c1 19 02                    # amqp-value: map8 of 2 (24 bytes + count)
		  a1 0d 6d6573736167655f636f756e74   # "message_count"
		  80 000000000000012c                # {ulong, 300}
	`)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))
}

// A binding's arguments come back as RabbitMQ stores them: sorted, a
// boolean tagged (0x56), a symbol as utf8, a ulong as long, a nested map
// with symbol keys; no arguments is an empty map8; no bindings an empty list.
func TestBindingRepliesAreRabbitMQsBytes(t *testing.T) {
	e := newTestEnv(t)
	r := e.do(t, "GET", "/bindings?src=amq.direct&dstq=none&key=", nil)
	require.Equal(t, "200", r.status)
	got := e.node.Request(nil, e.user, e.vh, testRequest(t, "l", "GET", "/bindings?src=amq.direct&dstq=none&key=", nil))
	require.Equal(t, "00537745", hex.EncodeToString(got[len(got)-4:]), "amqp-value: list0")

	_, _, err := e.vh.DeclareQueue(router.QueueSpec{Name: "bq", Durable: true})
	require.NoError(t, err)
	r = e.do(t, "POST", "/bindings", amqp10.Map{
		{Key: "source", Value: "amq.headers"}, {Key: "destination_queue", Value: "bq"}, {Key: "binding_key", Value: ""},
		{Key: "arguments", Value: amqp10.Map{
			{Key: "x-match", Value: amqp10.Symbol("all")},
			{Key: "n", Value: uint64(5)},
			{Key: "flag", Value: true},
			{Key: "m", Value: amqp10.Map{{Key: "k", Value: false}}},
		}},
	})
	require.Equal(t, "204", r.status, "%v", r.body)
	got = e.node.Request(nil, e.user, e.vh, testRequest(t, "l", "GET", "/bindings?src=amq.headers&dstq=bq&key=", nil))
	want := unhex(t, `
		a1 09 617267756d656e7473             # "arguments"
		c1 27 08                             # map8 of 8 (38 bytes + count)
		  a1 04 666c6167 56 01               # "flag" {boolean, true}
		  a1 01 6d c1 06 02 a3 01 6b 56 00   # "m" {map, [{symbol "k", {boolean, false}}]}
		  a1 01 6e 55 05                     # "n" {long, 5}
		  a1 07 782d6d61746368 a1 03 616c6c  # "x-match" "all"
	`)
	require.Contains(t, hex.EncodeToString(got), hex.EncodeToString(want))
}
