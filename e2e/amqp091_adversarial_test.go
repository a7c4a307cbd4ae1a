package e2e

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

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
