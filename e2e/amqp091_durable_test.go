package e2e

import (
	"testing"

	"github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// TestAMQP091DurableRecovery: persistent 0-9-1 messages in durable queues,
// one dead-lettered, survive a restart in the 0-9-1 store format: the
// properties, body and history come back as they were.
func TestAMQP091DurableRecovery(t *testing.T) {
	dir := t.TempDir()
	start := func() *epitaph.Broker {
		return startBroker(t, "", func(o *epitaph.Options) { o.InMemory, o.DataDir = false, dir })
	}
	b := start()
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("dq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum",
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dq.dlq"})
	require.NoError(t, err)
	_, err = ch.QueueDeclare("dq.dlq", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 2))
	for _, body := range []string{"keep", "die"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "dq", false, false, amqp091.Publishing{
			DeliveryMode: 2, MessageId: body, Expiration: "600000", Headers: amqp091.Table{"k": "v"}, Body: []byte(body)}))
		require.True(t, (<-confirms).Ack)
	}
	keep := get091(t, ch, "dq", false)
	require.Equal(t, "keep", string(keep.Body))
	d := get091(t, ch, "dq", false)
	require.Equal(t, "die", string(d.Body))
	require.NoError(t, keep.Nack(false, true))
	require.NoError(t, d.Reject(false))
	eventually(t, "dead-lettered", func() bool { return queueLen(t, b, "dq.dlq") == 1 })
	require.NoError(t, b.Close())

	b = start()
	ch = channel091(t, dial091(t, b))
	d = get091(t, ch, "dq", true)
	assert.Equal(t, "keep", string(d.Body))
	assert.Equal(t, "keep", d.MessageId)
	assert.Equal(t, "600000", d.Expiration)
	assert.Equal(t, uint8(2), d.DeliveryMode)
	assert.True(t, d.Redelivered)
	assert.Equal(t, "v", d.Headers["k"])
	s := session(t, dial(t, b, nil))
	m := recv(t, receiver(t, s, "/queues/dq.dlq", &amqp.ReceiverOptions{Credit: 1}))
	assert.Equal(t, "die", string(m.GetData()))
	assert.Equal(t, "die", m.Properties.MessageID)
	deaths := deathsOf(t, m)
	require.Len(t, deaths, 1)
	assertDeath(t, deaths[0], "dq", "rejected", 1, "", []string{"dq"}, 600000)
}
