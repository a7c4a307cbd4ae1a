package e2e

import (
	"io"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestAMQP091PublishConsumeAck: declare, bind, publish, consume, ack over
// AMQP 0-9-1 on the AMQP 1.0 port, with the publisher's properties and
// body delivered unchanged.
func TestAMQP091PublishConsumeAck(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	ch := channel091(t, c)
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	require.NoError(t, err)
	require.Contains(t, q.Name, "amq.gen-")
	require.NoError(t, ch.ExchangeDeclare("orders", "direct", false, false, false, false, nil))
	require.NoError(t, ch.QueueBind(q.Name, "new", "orders", false, nil))
	props := amqp091.Publishing{ContentType: "application/json", DeliveryMode: 2, Priority: 5, MessageId: "m-1",
		Headers: amqp091.Table{"tenant": "acme", "attempt": int32(3)}, Body: []byte(`{"id":1}`)}
	require.NoError(t, ch.PublishWithContext(ctxT(t), "orders", "new", false, false, props))
	ds, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	require.NoError(t, err)
	d := recv091(t, ds)
	require.Equal(t, `{"id":1}`, string(d.Body))
	require.Equal(t, "orders", d.Exchange)
	require.Equal(t, "new", d.RoutingKey)
	require.Equal(t, "application/json", d.ContentType)
	require.Equal(t, uint8(2), d.DeliveryMode)
	require.Equal(t, uint8(5), d.Priority)
	require.Equal(t, "m-1", d.MessageId)
	require.Equal(t, amqp091.Table{"attempt": int32(3), "tenant": "acme"}, d.Headers)
	require.False(t, d.Redelivered)
	require.NoError(t, d.Ack(false))
	eventually(t, "queue empty", func() bool { return queueLen(t, b, q.Name) == 0 })
}

// TestAMQP091UnsupportedHeader: a header the broker does not speak gets the
// header it does (0-9-1 for a later 0-9-x, the AMQP 1.0 SASL header
// otherwise), then the socket closes, as RabbitMQ 4.3 does.
func TestAMQP091UnsupportedHeader(t *testing.T) {
	b := startBroker(t, "")
	for _, tc := range []struct {
		hdr, want []byte
	}{
		{[]byte("AMQP\x00\x00\x09\x00"), []byte("AMQP\x00\x00\x09\x01")},
		{[]byte("AMQP\x01\x01\x08\x00"), []byte("AMQP\x03\x01\x00\x00")},
		{[]byte("GET / HT"), []byte("AMQP\x03\x01\x00\x00")},
	} {
		nc, err := net.Dial("tcp", b.Addr().String())
		require.NoError(t, err)
		_, err = nc.Write(tc.hdr)
		require.NoError(t, err)
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(5*time.Second)))
		got, err := io.ReadAll(nc)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "reply to %q", tc.hdr)
		nc.Close()
	}
	// A 0-9-1 client is served on the same port.
	c := dial091(t, b)
	require.False(t, c.IsClosed())
}
