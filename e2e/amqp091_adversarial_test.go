package e2e

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/amqp091-go"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp091"
)

// methodSkippingContent reads the next method frame, skipping heartbeats
// and the content header and body frames of deliveries.
func (r *raw091) methodSkippingContent() amqp091.Method {
	r.t.Helper()
	for {
		f, err := r.fr.ReadFrame()
		require.NoError(r.t, err)
		if f.Type != amqp091.FrameMethod {
			continue
		}
		m, err := amqp091.ParseMethod(f.Payload)
		require.NoError(r.t, err)
		return m
	}
}

// expectChannelClose reads up to channel.close on ch and checks it.
func (r *raw091) expectChannelClose(code uint16, text string, classID, methodID uint16) {
	r.t.Helper()
	m := r.methodSkippingContent()
	cc, ok := m.(*amqp091.ChannelClose)
	require.True(r.t, ok, "expected channel.close, got %T %+v", m, m)
	assert.Equal(r.t, code, cc.ReplyCode, "reply code (%s)", cc.ReplyText)
	assert.Equal(r.t, text, cc.ReplyText)
	assert.Equal(r.t, classID, cc.ClassID, "class-id")
	assert.Equal(r.t, methodID, cc.MethodID, "method-id")
}

// consumeThree declares a queue, publishes three messages to it and
// consumes them on channel 1 (prefetch 0, acknowledgement mode): the
// deliveries have tags 1, 2 and 3.
func (r *raw091) consumeThree(queue string) {
	r.t.Helper()
	r.send(1, &amqp091.QueueDeclare{Queue: queue, Exclusive: true})
	_, ok := r.method().(*amqp091.QueueDeclareOk)
	require.True(r.t, ok)
	var pubs []byte
	for range 3 {
		var err error
		pubs, err = amqp091.AppendContent(pubs, 1, 131072, &amqp091.BasicPublish{RoutingKey: queue}, &amqp091.Properties{}, []byte("m"))
		require.NoError(r.t, err)
	}
	r.write(pubs)
	r.send(1, &amqp091.BasicConsume{Queue: queue, ConsumerTag: "c"})
	_, ok = r.methodSkippingContent().(*amqp091.BasicConsumeOk)
	require.True(r.t, ok)
	for want := uint64(1); want <= 3; want++ {
		m := r.methodSkippingContent()
		d, ok := m.(*amqp091.BasicDeliver)
		require.True(r.t, ok, "expected basic.deliver, got %T", m)
		require.Equal(r.t, want, d.DeliveryTag)
	}
}

// TestAMQP091RawMultipleSettleUnknownTag: basic.ack or basic.nack with
// multiple=true names a delivery tag that must itself be unacknowledged,
// as RabbitMQ's collect_acks/5 requires: a tag already acknowledged (or
// never delivered), even with unacknowledged tags below it, is 406
// "unknown delivery tag N" on the channel, and nothing is settled.
func TestAMQP091RawMultipleSettleUnknownTag(t *testing.T) {
	b := startBroker(t, "")
	for _, tc := range []struct {
		name     string
		settle   amqp091.Method
		methodID uint16
	}{
		{"ack", &amqp091.BasicAck{DeliveryTag: 2, Multiple: true}, 80},
		{"nack", &amqp091.BasicNack{DeliveryTag: 2, Multiple: true, Requeue: true}, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw091(t, b)
			r.open(131072)
			r.consumeThree("multi-" + tc.name)
			r.send(1, &amqp091.BasicAck{DeliveryTag: 2})
			r.send(1, tc.settle) // tag 2 is settled already; tag 1 is not
			// A synchronous method: its reply shows the settlement was
			// taken without an error.
			r.send(1, &amqp091.BasicQos{PrefetchCount: 0})
			r.expectChannelClose(406, "PRECONDITION_FAILED - unknown delivery tag 2", 60, tc.methodID)
		})
	}
}

// TestAMQP091RawGetToStalledReader: a client that sends basic.get and
// then stops reading its socket holds only its own connection up (until
// write-timeout). The broker used to write the get-ok while holding the
// channel's lock, which every other party to the channel takes: a
// publisher on another connection sending to the stalled channel's direct
// reply-to consumer (and the store's confirm callback, and the HTTP API's
// channel list) waited with it.
func TestAMQP091RawGetToStalledReader(t *testing.T) {
	b := startBroker(t, "") // write-timeout 30 s: longer than the waits below
	setup := channel091(t, dial091(t, b))
	for _, q := range []string{"big", "requests"} {
		_, err := setup.QueueDeclare(q, true, false, false, false, nil)
		require.NoError(t, err)
	}
	// Larger than what the socket buffers of both ends hold, so that the
	// get-ok's write blocks while the client does not read.
	require.NoError(t, setup.PublishWithContext(ctxT(t), "", "big", false, false,
		rmq.Publishing{Body: bytes.Repeat([]byte("b"), 15<<20)}))
	// The publish is not confirmed: the get below must find it queued.
	eventually(t, "the big message queued", func() bool { return queueLen(t, b, "big") == 1 })

	r := dialRaw091(t, b)
	require.NoError(t, r.nc.(*net.TCPConn).SetReadBuffer(4096))
	require.NoError(t, r.nc.SetDeadline(time.Time{}))
	r.open(131072)
	r.send(1, &amqp091.BasicConsume{Queue: "amq.rabbitmq.reply-to", ConsumerTag: "replies", NoAck: true})
	_, ok := r.method().(*amqp091.BasicConsumeOk)
	require.True(t, ok)
	req, err := amqp091.AppendContent(nil, 1, 131072, &amqp091.BasicPublish{RoutingKey: "requests"},
		&amqp091.Properties{Flags: amqp091.FlagReplyTo, ReplyTo: "amq.rabbitmq.reply-to"}, []byte("request"))
	require.NoError(t, err)
	r.write(req)
	r.send(1, &amqp091.BasicGet{Queue: "big"})
	// From here on the client reads nothing.

	responder := channel091(t, dial091(t, b))
	var replyTo string
	eventually(t, "the request", func() bool {
		d, ok, err := responder.Get("requests", true)
		require.NoError(t, err)
		replyTo = d.ReplyTo
		return ok
	})
	require.True(t, strings.HasPrefix(replyTo, "amq.rabbitmq.reply-to."), replyTo)
	eventually(t, "the get took the big message", func() bool { return unacked(t, b, "big") == 1 })

	require.NoError(t, responder.Confirm(false))
	for start := time.Now(); time.Since(start) < time.Second; {
		dc, err := responder.PublishWithDeferredConfirmWithContext(ctxT(t), "", replyTo, false, false, rmq.Publishing{Body: []byte("reply")})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		acked, err := dc.WaitContext(ctx)
		cancel()
		require.NoError(t, err, "the responder's publish is held up by the stalled connection")
		require.True(t, acked)
	}
}

// TestAMQP091RawUnfinishedPublishesBounded: content headers that declare
// a large body which never comes cost the broker about what was received,
// not what was declared. It used to set aside up to 1 MiB per channel at
// the header: 100 channels of a 30-octet header each held 100 MiB.
func TestAMQP091RawUnfinishedPublishesBounded(t *testing.T) {
	b := startBroker(t, "")
	bystander := channel091(t, dial091(t, b))
	_, err := bystander.QueueDeclare("bystander", true, false, false, false, nil)
	require.NoError(t, err)

	const channels = 100
	r := dialRaw091(t, b)
	_, ok := r.login("guest", nil).(*amqp091.ConnectionTune)
	require.True(t, ok)
	r.send(0, &amqp091.ConnectionTuneOk{ChannelMax: channels + 1, FrameMax: 131072})
	r.send(0, &amqp091.ConnectionOpen{VirtualHost: "/"})
	_, ok = r.method().(*amqp091.ConnectionOpenOk)
	require.True(t, ok)
	var opens []byte
	for ch := uint16(1); ch <= channels; ch++ {
		var err error
		opens, err = amqp091.AppendMethodFrame(opens, ch, &amqp091.ChannelOpen{})
		require.NoError(t, err)
	}
	r.write(opens)
	for range channels {
		_, ok := r.method().(*amqp091.ChannelOpenOk)
		require.True(t, ok)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body := bytes.Repeat([]byte("x"), 300<<10) // for channel 1, later
	var headers []byte
	for ch := uint16(1); ch <= channels; ch++ {
		declared := uint64(16 << 20)
		if ch == 1 {
			declared = uint64(len(body))
		}
		var err error
		headers, err = amqp091.AppendMethodFrame(headers, ch, &amqp091.BasicPublish{RoutingKey: "bystander"})
		require.NoError(t, err)
		headers, err = amqp091.AppendHeaderFrame(headers, ch, declared, &amqp091.Properties{})
		require.NoError(t, err)
	}
	r.write(headers)
	// The reader handles frames in order: once this channel is open, every
	// header before it has been taken.
	r.send(channels+1, &amqp091.ChannelOpen{})
	_, ok = r.method().(*amqp091.ChannelOpenOk)
	require.True(t, ok)
	runtime.GC()
	runtime.ReadMemStats(&after)
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(16<<20),
		"heap held for %d unfinished publishes of 30 octets each", channels)

	// One of them completes; the message arrives whole.
	r.write(amqp091.AppendBodyFrames(nil, 1, 131072, body))
	eventually(t, "the completed publish", func() bool { return queueLen(t, b, "bystander") == 1 })
	d, ok, err := bystander.Get("bystander", true)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, body, d.Body)
}

// TestAMQP091RawFrameOrderOnChannels: what RabbitMQ 4.3 answers to frames
// a channel does not expect. A content header or body frame on a channel
// never opened reaches a new channel's frame assembler, which expects a
// method: 505 UNEXPECTED_FRAME (not 504, which is for a method other
// than channel.open). channel.close-ok on a channel the broker is not
// closing matches no clause of rabbit_channel's handle_method/3 but the
// last: 503 COMMAND_INVALID "unimplemented method" (it used to be
// ignored). A method on channel 0 other than those of the running
// connection (close, close-ok of a close the broker sent, update-secret)
// is rabbit_reader's handle_method0/2 catch-all: 504 CHANNEL_ERROR
// "unexpected method in connection state running", naming the method (it
// used to be 503, and an unasked connection.close-ok ended the connection
// without a close). All of them close the connection.
func TestAMQP091RawFrameOrderOnChannels(t *testing.T) {
	b := startBroker(t, "")
	header, err := amqp091.AppendHeaderFrame(nil, 7, 1, &amqp091.Properties{})
	require.NoError(t, err)
	closeOk, err := amqp091.AppendMethodFrame(nil, 1, &amqp091.ChannelCloseOk{})
	require.NoError(t, err)
	frame0 := func(m amqp091.Method) []byte {
		f, err := amqp091.AppendMethodFrame(nil, 0, m)
		require.NoError(t, err)
		return f
	}
	for _, tc := range []struct {
		name              string
		frame             []byte
		code              uint16
		text              string
		classID, methodID uint16
	}{
		{"content header on a channel not opened", header, 505,
			"UNEXPECTED_FRAME - expected method frame, got non method frame instead", 0, 0},
		{"content body on a channel not opened", amqp091.AppendBodyFrames(nil, 7, 0, []byte("x")), 505,
			"UNEXPECTED_FRAME - expected method frame, got non method frame instead", 0, 0},
		{"channel.close-ok on an open channel", closeOk, 503,
			"COMMAND_INVALID - unimplemented method", 20, 41},
		{"basic.qos on channel 0", frame0(&amqp091.BasicQos{PrefetchCount: 1}), 504,
			"CHANNEL_ERROR - unexpected method in connection state running", 60, 10},
		{"basic.publish on channel 0", frame0(&amqp091.BasicPublish{RoutingKey: "q"}), 504,
			"CHANNEL_ERROR - unexpected method in connection state running", 60, 40},
		{"connection.tune-ok once running", frame0(&amqp091.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072}), 504,
			"CHANNEL_ERROR - unexpected method in connection state running", 10, 31},
		{"connection.close-ok unasked", frame0(&amqp091.ConnectionCloseOk{}), 504,
			"CHANNEL_ERROR - unexpected method in connection state running", 10, 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw091(t, b)
			r.open(131072)
			r.write(tc.frame)
			m := r.method()
			cl, ok := m.(*amqp091.ConnectionClose)
			require.True(t, ok, "expected connection.close, got %T %+v", m, m)
			assert.Equal(t, tc.code, cl.ReplyCode)
			assert.Equal(t, tc.text, cl.ReplyText)
			assert.Equal(t, tc.classID, cl.ClassID, "class-id")
			assert.Equal(t, tc.methodID, cl.MethodID, "method-id")
		})
	}
}

// TestAMQP091RawUnbindMissing: unbinding where the source exchange, the
// destination or the binding is missing is answered unbind-ok, as RabbitMQ
// 4.3 does (rabbit_db_binding:delete/2 is ok when a resource is missing);
// it used to be 404 NOT_FOUND for a missing queue or source exchange. The
// default exchange stays refused (403), as check_not_default_exchange/1
// comes first.
func TestAMQP091RawUnbindMissing(t *testing.T) {
	b := startBroker(t, "")
	r := dialRaw091(t, b)
	r.open(131072)
	r.send(1, &amqp091.QueueDeclare{Queue: "unbound", Exclusive: true})
	_, ok := r.method().(*amqp091.QueueDeclareOk)
	require.True(t, ok)
	for _, tc := range []struct {
		name string
		m    amqp091.Method
		ok   func(amqp091.Method) bool
	}{
		{"queue missing", &amqp091.QueueUnbind{Queue: "missing", Exchange: "amq.direct", RoutingKey: "k"},
			func(m amqp091.Method) bool { _, ok := m.(*amqp091.QueueUnbindOk); return ok }},
		{"source exchange missing", &amqp091.QueueUnbind{Queue: "unbound", Exchange: "missing", RoutingKey: "k"},
			func(m amqp091.Method) bool { _, ok := m.(*amqp091.QueueUnbindOk); return ok }},
		{"binding missing", &amqp091.QueueUnbind{Queue: "unbound", Exchange: "amq.direct", RoutingKey: "k"},
			func(m amqp091.Method) bool { _, ok := m.(*amqp091.QueueUnbindOk); return ok }},
		{"exchange source missing", &amqp091.ExchangeUnbind{Destination: "amq.fanout", Source: "missing", RoutingKey: "k"},
			func(m amqp091.Method) bool { _, ok := m.(*amqp091.ExchangeUnbindOk); return ok }},
		{"exchange destination missing", &amqp091.ExchangeUnbind{Destination: "missing", Source: "amq.direct", RoutingKey: "k"},
			func(m amqp091.Method) bool { _, ok := m.(*amqp091.ExchangeUnbindOk); return ok }},
	} {
		r.send(1, tc.m)
		m := r.method()
		require.True(t, tc.ok(m), "%s: got %T %+v", tc.name, m, m)
	}
	r.send(1, &amqp091.QueueUnbind{Queue: "missing", Exchange: "", RoutingKey: "k"})
	r.expectChannelClose(403, "ACCESS_REFUSED - operation not permitted on the default exchange", 50, 50)
}

// TestAMQP091RawDeadConsumerStopsTaking: a no-ack consumer whose client
// stopped reading and then went away takes what its credit allowed and
// no more. The deliverer went on after the socket failed, refilling the
// consumer's credit with every delivery it appended to the dead
// connection's output, until the reader's cleanup cancelled it: a batch
// of deliveries at least, often the whole queue, was taken (and, no-ack,
// lost). Four stalled consumers in turn: each takes nothing after its
// stall.
func TestAMQP091RawDeadConsumerStopsTaking(t *testing.T) {
	b := startBroker(t, "")
	setup := channel091(t, dial091(t, b))
	_, err := setup.QueueDeclare("flood", true, false, false, false, nil)
	require.NoError(t, err)
	const total = 12000
	body := bytes.Repeat([]byte("f"), 4096)
	for range total {
		require.NoError(t, setup.PublishWithContext(ctxT(t), "", "flood", false, false, rmq.Publishing{Body: body}))
	}
	eventually(t, "the messages", func() bool { return queueLen(t, b, "flood") == total })

	for round := range 4 {
		r := dialRaw091(t, b)
		require.NoError(t, r.nc.(*net.TCPConn).SetReadBuffer(4096))
		r.open(131072)
		// Measured before the consume: the broker may write all it can
		// before the test looks again.
		before := queueLen(t, b, "flood")
		r.send(1, &amqp091.BasicConsume{Queue: "flood", NoAck: true})
		// The client reads nothing: the broker's writes stall once the
		// socket buffers are full, and the consumer's credit (1,000
		// deliveries beyond those written) runs out.
		stalled := before
		eventually(t, "the deliveries stalled", func() bool {
			n := queueLen(t, b, "flood")
			done := n == stalled && n < before
			stalled = n
			time.Sleep(200 * time.Millisecond) // the polling interval: a stall is no change over it
			return done
		})
		require.NoError(t, r.nc.Close())
		eventually(t, "the consumer gone", func() bool {
			q, ok := vhost(t, b).Queue("flood")
			return ok && q.Info().Consumers == 0
		})
		require.LessOrEqual(t, stalled-queueLen(t, b, "flood"), 10, "round %d: taken after the consumer's connection failed", round)
	}

	// The rest is delivered to a consumer that reads.
	ch := channel091(t, dial091(t, b))
	ds, err := ch.Consume("flood", "", true, false, false, false, nil)
	require.NoError(t, err)
	recv091(t, ds)
}

// TestAMQP091RawMethodBeforeOpen: once tuned, a method on channel 0 other
// than connection.open is rabbit_reader's handle_method0/2 catch-all in
// the opening state, answered with a close: 504 CHANNEL_ERROR
// "unexpected method in connection state opening", naming the method (it
// was 503 COMMAND_INVALID).
func TestAMQP091RawMethodBeforeOpen(t *testing.T) {
	b := startBroker(t, "")
	r := dialRaw091(t, b)
	_, ok := r.login("guest", nil).(*amqp091.ConnectionTune)
	require.True(t, ok)
	r.send(0, &amqp091.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072})
	r.send(0, &amqp091.BasicQos{PrefetchCount: 1})
	m := r.method()
	cl, ok := m.(*amqp091.ConnectionClose)
	require.True(t, ok, "expected connection.close, got %T %+v", m, m)
	assert.Equal(t, uint16(504), cl.ReplyCode)
	assert.Equal(t, "CHANNEL_ERROR - unexpected method in connection state opening", cl.ReplyText)
	assert.Equal(t, [2]uint16{60, 10}, [2]uint16{cl.ClassID, cl.MethodID}, "class-id and method-id")
}

// TestAMQP091UndecodableAMQP10Body: a 0-9-1 message of type "amqp-1.0"
// whose payload is not AMQP 1.0 body sections reaches an AMQP 1.0
// consumer as a data section holding the payload. Its octets used to be
// sent as they were, an undecodable transfer that ended the consumer's
// connection (and the message, back in the queue, ended the next one
// too); RabbitMQ's conversion crashes. A valid payload is still the body.
func TestAMQP091UndecodableAMQP10Body(t *testing.T) {
	b := startBroker(t, `{"queues":[{"name":"q10","vhost":"/","durable":true}]}`)
	r := dialRaw091(t, b)
	r.open(131072)
	bodies := [][]byte{
		{0x00, 0x53, 0x77, 0xa1, 0x05, 'h'}, // amqp-value, a string shorter than it says
		{0xff},
		{0x00, 0x53, 0x70, 0x45},                 // a header section, not a body
		{0x00, 0x53, 0x77, 0xa1, 0x02, 'h', 'i'}, // amqp-value "hi"
	}
	for _, body := range bodies {
		pub, err := amqp091.AppendContent(nil, 1, 131072, &amqp091.BasicPublish{RoutingKey: "q10"},
			&amqp091.Properties{Flags: amqp091.FlagType, Type: "amqp-1.0"}, body)
		require.NoError(t, err)
		r.write(pub)
	}
	eventually(t, "the messages", func() bool { return queueLen(t, b, "q10") == len(bodies) })
	rc := receiver(t, session(t, dial(t, b, nil)), "/queues/q10", &amqp.ReceiverOptions{Credit: 1})
	for i, body := range bodies[:3] {
		m := recv(t, rc)
		assert.Equal(t, [][]byte{body}, m.Data, "message %d", i)
		require.NoError(t, rc.AcceptMessage(ctxT(t), m))
	}
	m := recv(t, rc)
	assert.Equal(t, "hi", m.Value)
	require.NoError(t, rc.AcceptMessage(ctxT(t), m))
}

// TestAMQP091RawRoutingHeaderTypes: a CC or BCC header that is not an
// array is 406 "invalid message: {unacceptable_type_in_header,"CC",T}",
// T being the field's type as RabbitMQ's parser names it; the key is
// printed as the string rabbit_basic:header_routes/1 makes of it
// (binary_to_list), not as a binary. Types other than longstr, table,
// long, signedint and bool used to be printed as Go types.
func TestAMQP091RawRoutingHeaderTypes(t *testing.T) {
	b := startBroker(t, "")
	r := dialRaw091(t, b)
	r.open(131072)
	for _, tc := range []struct {
		key   string
		value any
		typ   string
	}{
		{"CC", "x", "longstr"},
		{"BCC", nil, "void"},
		{"CC", amqp091.Binary("x"), "binary"},
		{"CC", amqp091.Decimal{Scale: 1, Value: 5}, "decimal"},
		{"CC", amqp091.Timestamp(1), "timestamp"},
		{"CC", int8(1), "byte"},
		{"CC", uint8(1), "unsignedbyte"},
		{"CC", int16(1), "short"},
		{"CC", uint16(1), "unsignedshort"},
		{"CC", uint32(1), "unsignedint"},
		{"CC", float32(1), "float"},
		{"BCC", float64(1), "double"},
	} {
		pub, err := amqp091.AppendContent(nil, 1, 131072, &amqp091.BasicPublish{RoutingKey: "q"},
			&amqp091.Properties{Flags: amqp091.FlagHeaders, Headers: amqp091.Table{{Key: tc.key, Value: tc.value}}}, []byte("x"))
		require.NoError(t, err)
		r.write(pub)
		r.expectChannelClose(406, `PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,"`+tc.key+`",`+tc.typ+`}`, 60, 40)
		r.send(1, &amqp091.ChannelCloseOk{})
		r.send(1, &amqp091.ChannelOpen{})
		_, ok := r.method().(*amqp091.ChannelOpenOk)
		require.True(t, ok)
	}
}
