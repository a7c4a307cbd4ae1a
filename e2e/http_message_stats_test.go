package e2e

import (
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A queue's message_stats, as RabbitMQ's management API has them: counts
// since the queue was declared and their rates per second.
func TestHTTPQueueMessageStats(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	// get reads the queue's message_stats: the counts, and publish's rate.
	get := func() (counts map[string]int, publishRate float64) {
		raw := apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2f/dlq", nil, 200))
		ms := raw["message_stats"].(map[string]any)
		counts = map[string]int{}
		for _, k := range []string{"publish", "deliver_get", "deliver", "deliver_no_ack", "redeliver", "ack"} {
			counts[k] = int(ms[k].(float64))
		}
		return counts, ms["publish_details"].(map[string]any)["rate"].(float64)
	}
	// No messages yet: zero counts and rates (and the first reading).
	counts, _ := get()
	require.Zero(t, counts["publish"])

	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/dlq", "1", "2", "3", "4", "5")
	r := receiver(t, s, "/queues/dlq", &amqp.ReceiverOptions{Credit: 1})
	accept(t, r, recv(t, r))
	m := recv(t, r)
	require.NoError(t, r.ReleaseMessage(ctxT(t), m)) // back to the queue: delivered again
	accept(t, r, recv(t, r))
	pre := receiver(t, s, "/queues/dlq", &amqp.ReceiverOptions{SettlementMode: amqp.ReceiverSettleModeFirst.Ptr(),
		RequestedSenderSettleMode: amqp.SenderSettleModeSettled.Ptr(), Credit: 1})
	recv(t, pre)

	var rate float64
	eventually(t, "the counts and a publish rate", func() bool {
		counts, rate = get()
		return counts["publish"] == 5 && counts["ack"] == 2 && rate > 0
	})
	assert.GreaterOrEqual(t, counts["deliver_get"], 4)
	// The consumers' credit may have taken one more each meanwhile.
	assert.GreaterOrEqual(t, counts["deliver_no_ack"], 1)
	assert.Equal(t, counts["deliver_get"]-counts["deliver_no_ack"], counts["deliver"])
	assert.GreaterOrEqual(t, counts["redeliver"], 1)
}
