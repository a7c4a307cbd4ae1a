package e2e

import (
	"errors"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// dial091 connects with amqp091-go as guest over loopback.
func dial091(t *testing.T, b *epitaph.Broker) *amqp091.Connection {
	t.Helper()
	c, err := amqp091.Dial("amqp://guest:guest@" + b.Addr().String() + "/")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func channel091(t *testing.T, c *amqp091.Connection) *amqp091.Channel {
	t.Helper()
	ch, err := c.Channel()
	require.NoError(t, err)
	return ch
}

// amqp091Error returns err as the broker's close (channel or connection).
func amqp091Error(t *testing.T, err error) *amqp091.Error {
	t.Helper()
	require.Error(t, err)
	var e *amqp091.Error
	require.True(t, errors.As(err, &e), "not an *amqp091.Error: %v", err)
	return e
}

// recv091 waits for the next delivery.
func recv091(t *testing.T, ds <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case d, ok := <-ds:
		require.True(t, ok, "delivery channel closed")
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	return amqp091.Delivery{}
}

// get091 polls basic.get until a message arrives (or the deadline).
func get091(t *testing.T, ch *amqp091.Channel, q string, autoAck bool) amqp091.Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		d, ok, err := ch.Get(q, autoAck)
		require.NoError(t, err)
		if ok {
			return d
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no message on %s within 10s", q)
	return amqp091.Delivery{}
}
