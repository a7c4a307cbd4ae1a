package e2e

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A message published and rejected over AMQP 0-9-1, redriven home, comes
// back to a 0-9-1 consumer with its own properties, its x-death history
// and the redrive count as the header x-opt-redrive-count (an x- message
// annotation is a header over 0-9-1); rejected again, its history counts
// both deaths and the redrive count stays.
func TestRedriveOverAMQP091KeepsPropertiesHistoryAndCount(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	ch := channel091(t, dial091(t, b))
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "work", false, false, amqp091.Publishing{
		ContentType: "text/plain", MessageId: "m-1", Headers: amqp091.Table{"tenant": "acme"}, Body: []byte("order")}))
	work, err := ch.Consume("work", "", false, false, false, false, nil)
	require.NoError(t, err)
	first := recv091(t, work)
	require.NoError(t, first.Reject(false))
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 1 })

	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue"}, 201)
	tk = waitTask(t, base, tk.ID, finished)
	require.Equal(t, "completed", tk.State)
	require.EqualValues(t, 1, tk.Moved)

	again := recv091(t, work)
	assert.Equal(t, "order", string(again.Body))
	assert.Equal(t, "text/plain", again.ContentType)
	assert.Equal(t, "m-1", again.MessageId)
	assert.Equal(t, "acme", again.Headers["tenant"])
	assert.Equal(t, int64(1), again.Headers["x-opt-redrive-count"])
	assert.Equal(t, "work", again.Headers["x-first-death-queue"])
	deaths, ok := again.Headers["x-death"].([]any)
	require.True(t, ok, "x-death: %v", again.Headers)
	require.Len(t, deaths, 1)
	assert.Equal(t, int64(1), deaths[0].(amqp091.Table)["count"])

	require.NoError(t, again.Reject(false))
	dlq, err := ch.Consume("dlq", "", false, false, false, false, nil)
	require.NoError(t, err)
	dead := recv091(t, dlq)
	assert.Equal(t, int64(1), dead.Headers["x-opt-redrive-count"])
	deaths, ok = dead.Headers["x-death"].([]any)
	require.True(t, ok, "x-death: %v", dead.Headers)
	require.Len(t, deaths, 1)
	assert.Equal(t, int64(2), deaths[0].(amqp091.Table)["count"])
	assert.Equal(t, "rejected", deaths[0].(amqp091.Table)["reason"])
	require.NoError(t, dead.Ack(false))
}
