package e2e

import (
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// A rejected message arrives in the DLQ with RabbitMQ 4.3's history.
func TestDeadLetterRejectSmoke(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q1", router.Quorum, amqp10.Map{{Key: "x-dead-letter-exchange", Value: ""},
		{Key: "x-dead-letter-routing-key", Value: "dlq"}})
	declareQueue(t, b, "dlq", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	send(t, sender(t, s, "/queues/q1", nil), msg("m"))
	r := receiver(t, s, "/queues/q1", nil)
	m := recv(t, r)
	require.NoError(t, r.RejectMessage(ctxT(t), m, &amqp.Error{Condition: "app:invalid", Description: "bad order"}))

	before := time.Now()
	d := recv(t, receiver(t, s, "/queues/dlq", nil))
	assert.Equal(t, "m", body(d))
	deaths, ok := d.Annotations["x-opt-deaths"].([]map[any]any)
	if !ok {
		t.Fatalf("x-opt-deaths: %T %#v", d.Annotations["x-opt-deaths"], d.Annotations["x-opt-deaths"])
	}
	require.Len(t, deaths, 1)
	assert.Equal(t, "q1", deaths[0]["queue"])
	assert.Equal(t, "rejected", deaths[0]["reason"])
	assert.Equal(t, uint64(1), deaths[0]["count"])
	assert.Equal(t, "", deaths[0]["exchange"])
	assert.Equal(t, []string{"q1"}, deaths[0]["routing-keys"])
	ft := deaths[0]["first-time"].(time.Time)
	assert.WithinDuration(t, before, ft, 5*time.Second)
	assert.Equal(t, "q1", d.Annotations["x-first-death-queue"])
	assert.Equal(t, "rejected", d.Annotations["x-last-death-reason"])
	assert.Equal(t, "app:invalid", d.Annotations["x-last-death-error-condition"])
	assert.Equal(t, "", d.Annotations["x-exchange"])
	assert.Equal(t, "dlq", d.Annotations["x-routing-key"])
	assert.Equal(t, uint32(1), d.Header.DeliveryCount)
	assert.False(t, d.Header.FirstAcquirer)
	st := b.DeadLetters().QueueStats("/", "q1")
	assert.Equal(t, uint64(1), st[router.ReasonRejected].DeadLettered)
}
