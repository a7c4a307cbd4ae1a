package e2e

import (
	"strings"
	"testing"

	"github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Direct reply-to over AMQP 0-9-1, as RabbitMQ 4.3's channel has it: a
// requester consumes from the pseudo-queue amq.rabbitmq.reply-to (no-ack,
// one per channel) and publishes with reply_to amq.rabbitmq.reply-to,
// which the broker replaces with the channel's own volatile queue; a
// responder publishes to the default exchange with that name as the
// routing key, and the reply goes straight to the requester's consumer.

func TestAMQP091DirectReplyToRPC(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "rpc", "classic", nil)
	requester := channel091(t, dial091(t, b))
	replies, err := requester.Consume("amq.rabbitmq.reply-to", "replies", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, requester.PublishWithContext(ctxT(t), "", "rpc", false, false, amqp091.Publishing{
		ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: "c-1", Body: []byte("ping")}))

	responder := channel091(t, dial091(t, b))
	requests, err := responder.Consume("rpc", "", false, false, false, false, nil)
	require.NoError(t, err)
	req := recv091(t, requests)
	require.True(t, strings.HasPrefix(req.ReplyTo, "amq.rabbitmq.reply-to."), "reply_to %q", req.ReplyTo)
	assert.Equal(t, "c-1", req.CorrelationId)

	// A live reply-to queue answers a (passive) declare with one consumer.
	info, err := responder.QueueDeclarePassive(req.ReplyTo, false, false, false, false, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, info.Consumers)

	require.NoError(t, responder.PublishWithContext(ctxT(t), "", req.ReplyTo, true, false, amqp091.Publishing{
		CorrelationId: req.CorrelationId, Body: []byte("pong")}))
	require.NoError(t, req.Ack(false))
	reply := recv091(t, replies)
	assert.Equal(t, "pong", string(reply.Body))
	assert.Equal(t, "c-1", reply.CorrelationId)
	assert.Equal(t, "replies", reply.ConsumerTag)
	assert.Equal(t, req.ReplyTo, reply.RoutingKey)
	assert.False(t, reply.Redelivered)

	// The consumer cancelled, its queue is gone: a declare is 404 and a
	// mandatory reply comes back as unroutable.
	returns := responder.NotifyReturn(make(chan amqp091.Return, 1))
	require.NoError(t, requester.Cancel("replies", false))
	require.NoError(t, responder.PublishWithContext(ctxT(t), "", req.ReplyTo, true, false, amqp091.Publishing{Body: []byte("late")}))
	select {
	case r := <-returns:
		assert.Equal(t, uint16(amqp091.NoRoute), r.ReplyCode)
	case <-ctxT(t).Done():
		t.Fatal("no basic.return for a reply to a cancelled reply consumer")
	}
	gone := channel091(t, dial091(t, b))
	_, err = gone.QueueDeclarePassive(req.ReplyTo, false, false, false, false, nil)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, amqp091.NotFound, ae.Code)
}

// Each refusal is RabbitMQ 4.3's reply code and text, at channel scope.
func TestAMQP091DirectReplyToRefusals(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	channelError := func(t *testing.T, f func(ch *amqp091.Channel) error) *amqp091.Error {
		t.Helper()
		ch := channel091(t, c)
		// Registered first: a close that came before a later registration
		// would reach it as a closed channel (nil).
		closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
		err := f(ch)
		if err == nil {
			// A publish is asynchronous: the channel's close tells.
			select {
			case e := <-closed:
				require.NotNil(t, e)
				return e
			case <-ctxT(t).Done():
				t.Fatal("channel not closed")
			}
		}
		var ae *amqp091.Error
		require.ErrorAs(t, err, &ae)
		return ae
	}
	e := channelError(t, func(ch *amqp091.Channel) error {
		_, err := ch.Consume("amq.rabbitmq.reply-to", "", false, false, false, false, nil)
		return err
	})
	assert.Equal(t, amqp091.PreconditionFailed, e.Code)
	assert.Equal(t, "PRECONDITION_FAILED - reply consumer cannot acknowledge", e.Reason)

	e = channelError(t, func(ch *amqp091.Channel) error {
		if _, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil); err != nil {
			return err
		}
		_, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
		return err
	})
	assert.Equal(t, amqp091.PreconditionFailed, e.Code)
	assert.Equal(t, "PRECONDITION_FAILED - reply consumer already set", e.Reason)

	e = channelError(t, func(ch *amqp091.Channel) error {
		return ch.PublishWithContext(ctxT(t), "", "anywhere", false, false, amqp091.Publishing{ReplyTo: "amq.rabbitmq.reply-to"})
	})
	assert.Equal(t, amqp091.PreconditionFailed, e.Code)
	assert.Equal(t, "PRECONDITION_FAILED - fast reply consumer does not exist", e.Reason)

	e = channelError(t, func(ch *amqp091.Channel) error {
		return ch.QueueBind("amq.rabbitmq.reply-to.abc", "k", "amq.direct", false, nil)
	})
	assert.Equal(t, amqp091.AccessRefused, e.Code)
	assert.Equal(t, "ACCESS_REFUSED - cannot bind or unbind to a volatile (direct reply-to) queue", e.Reason)

	// The pseudo-queue itself always exists.
	ch := channel091(t, c)
	info, err := ch.QueueDeclarePassive("amq.rabbitmq.reply-to", false, false, false, false, nil)
	require.NoError(t, err)
	assert.Equal(t, amqp091.Queue{Name: "amq.rabbitmq.reply-to", Consumers: 1}, info)
	_, err = ch.QueueDeclare("amq.rabbitmq.reply-to.none", false, false, false, false, nil)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, amqp091.NotFound, ae.Code)
	assert.Equal(t, "NOT_FOUND - no queue 'amq.rabbitmq.reply-to.none' in vhost '/'", ae.Reason)
}

// An AMQP 0-9-1 requester and an AMQP 1.0 responder: the request's
// reply_to reaches the 1.0 side as the address of the volatile queue, and
// a reply sent there through the anonymous terminus's 'to' reaches the
// 0-9-1 reply consumer.
func TestAMQP091DirectReplyToAnsweredOverAMQP10(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "rpc", "classic", nil)
	requester := channel091(t, dial091(t, b))
	replies, err := requester.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, requester.PublishWithContext(ctxT(t), "", "rpc", false, false, amqp091.Publishing{
		ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: "c-2", Body: []byte("ping")}))

	s := session(t, dial(t, b, nil))
	req := recv(t, receiver(t, s, "/queues/rpc", nil))
	require.NotNil(t, req.Properties)
	require.NotNil(t, req.Properties.ReplyTo)
	replyTo := *req.Properties.ReplyTo
	require.True(t, strings.HasPrefix(replyTo, "/queues/amq.rabbitmq.reply-to."), "reply-to %q", replyTo)
	anon := sender(t, s, "", nil)
	reply := msg("pong")
	reply.Properties = &amqp.MessageProperties{To: &replyTo, CorrelationID: req.Properties.CorrelationID}
	assert.Equal(t, &amqp.StateAccepted{}, send(t, anon, reply))
	got := recv091(t, replies)
	assert.Equal(t, "pong", string(got.Body))
	assert.Equal(t, "c-2", got.CorrelationId)
}
