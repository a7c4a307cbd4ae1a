package e2e

import (
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// A 0-9-1 consumer's x-priority is the router's consumer priority: while
// the higher-priority consumer has prefetch room it gets every message.
func TestAMQP091ConsumerPriority(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	setup := channel091(t, c)
	_, err := setup.QueueDeclare("prio", true, false, false, false, nil)
	require.NoError(t, err)

	low, high := channel091(t, c), channel091(t, c)
	lowDs, err := low.Consume("prio", "low", false, false, false, false, amqp091.Table{"x-priority": int32(1)})
	require.NoError(t, err)
	highDs, err := high.Consume("prio", "high", false, false, false, false, amqp091.Table{"x-priority": int32(10)})
	require.NoError(t, err)

	for i := range 5 {
		require.NoError(t, setup.Publish("", "prio", false, false, amqp091.Publishing{Body: fmt.Appendf(nil, "m%d", i)}))
	}
	for i := range 5 {
		d := recv091(t, highDs)
		require.Equal(t, fmt.Sprintf("m%d", i), string(d.Body))
	}
	// The low-priority consumer got nothing: a message published after the
	// five reaches the high one too, so none was queued for low before it.
	require.NoError(t, setup.Publish("", "prio", false, false, amqp091.Publishing{Body: []byte("last")}))
	require.Equal(t, "last", string(recv091(t, highDs).Body))
	require.Empty(t, lowDs)
}

func TestAMQP091ConsumeArgumentsRefused(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	setup := channel091(t, c)
	_, err := setup.QueueDeclare("sac", true, false, false, false, amqp091.Table{"x-single-active-consumer": true})
	require.NoError(t, err)

	ch := channel091(t, c)
	_, err = ch.Consume("sac", "", false, false, false, false, amqp091.Table{"x-priority": "high"})
	e := amqp091Error(t, err)
	require.Equal(t, 406, e.Code)
	require.False(t, c.IsClosed(), "a channel error, not a connection error")
	require.Contains(t, e.Reason, "x-priority")

	ch = channel091(t, c)
	_, err = ch.Consume("sac", "", false, true, false, false, nil)
	e = amqp091Error(t, err)
	require.Equal(t, 403, e.Code)
	require.Contains(t, e.Reason, "in exclusive use")

	// The connection survived both channel errors.
	ch = channel091(t, c)
	_, err = ch.Consume("sac", "", false, false, false, false, nil)
	require.NoError(t, err)
}

// Single active consumer over 0-9-1: the second consumer gets nothing
// until the first is cancelled, then everything that was left.
func TestAMQP091SingleActiveConsumer(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	setup := channel091(t, c)
	_, err := setup.QueueDeclare("sac", true, false, false, false, amqp091.Table{"x-single-active-consumer": true})
	require.NoError(t, err)

	first, second := channel091(t, c), channel091(t, c)
	firstDs, err := first.Consume("sac", "first", false, false, false, false, nil)
	require.NoError(t, err)
	secondDs, err := second.Consume("sac", "second", false, false, false, false, nil)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, setup.Publish("", "sac", false, false, amqp091.Publishing{Body: fmt.Appendf(nil, "m%d", i)}))
	}
	for i := range 3 {
		d := recv091(t, firstDs)
		require.Equal(t, fmt.Sprintf("m%d", i), string(d.Body))
		if i < 2 {
			require.NoError(t, d.Ack(false))
		}
	}
	require.Empty(t, secondDs)
	// Cancelling the active consumer with m2 unacknowledged: m2 goes back
	// when the channel closes, and the standby is promoted.
	require.NoError(t, first.Close())
	d := recv091(t, secondDs)
	require.Equal(t, "m2", string(d.Body))
	require.True(t, d.Redelivered)
}

// basic.get is not a consumer (RabbitMQ): an auto-delete queue read only
// with basic.get outlives the channel that read it, its unacknowledged
// message comes back, and the queue shows no consumer meanwhile.
func TestAMQP091GetIsNotAConsumer(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	setup := channel091(t, c)
	_, err := setup.QueueDeclare("getq", true, true, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, setup.Publish("", "getq", false, false, amqp091.Publishing{Body: []byte("m")}))

	getter := channel091(t, c)
	d := get091(t, getter, "getq", false)
	require.Equal(t, "m", string(d.Body))
	q, err := setup.QueueDeclarePassive("getq", true, true, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Consumers, "basic.get is not counted as a consumer")
	require.NoError(t, getter.Close()) // unacknowledged: back to the queue

	again := channel091(t, c)
	d = get091(t, again, "getq", false)
	require.Equal(t, "m", string(d.Body))
	require.True(t, d.Redelivered)
}
