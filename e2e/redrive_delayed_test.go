package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// Peek, an AMQP browse and a redrive see the messages a quorum queue holds
// for their delayed retry: peek shows them after the ready ones with
// their delivery time, a browse sends them after the ready ones, and a
// redrive moves them out of the delayed set.
func TestPeekBrowseRedriveDelayedMessages(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	declareQueue(t, b, "qdlq", router.Quorum, amqp10.Map{kv("x-delayed-retry-type", "all"), kv("x-delayed-retry-min", int64(60_000))})
	declareQueue(t, b, "qwork", router.Classic, amqp10.Map{kv("x-dead-letter-exchange", ""), kv("x-dead-letter-routing-key", "qdlq")})
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/qwork", "d", 1)
	rejectAll(t, base, "qwork", 1)
	eventually(t, "qdlq has d-0", func() bool { return queueLen(t, b, "qdlq") == 1 })
	r := receiver(t, s, "/queues/qdlq", nil)
	released := time.Now()
	require.NoError(t, r.ReleaseMessage(ctxT(t), recv(t, r)))
	require.NoError(t, r.Close(ctxT(t)))
	eventually(t, "d-0 delayed", func() bool { return queueInfo(t, b, "qdlq").MessagesDelayed == 1 })
	snd := sender(t, s, "/queues/qwork", nil)
	for _, id := range []string{"d-1", "d-2"} {
		m := msg(id)
		m.Properties = &amqp.MessageProperties{MessageID: id}
		send(t, snd, m)
	}
	rejectAll(t, base, "qwork", 2)
	eventually(t, "qdlq has 2 ready", func() bool { return queueLen(t, b, "qdlq") == 2 })

	// Peek: the ready ones, then the delayed one with its delivery time.
	p := apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2f/qdlq/peek", nil, 200))
	assert.EqualValues(t, 2, p["depth"])
	assert.EqualValues(t, 1, p["delayed"])
	msgs := p["messages"].([]any)
	require.Len(t, msgs, 3)
	var ids []any
	for i, m := range msgs {
		m := m.(map[string]any)
		ids = append(ids, m["message_id"])
		assert.EqualValues(t, i, m["position"])
		if i < 2 {
			assert.Nil(t, m["delivery_time"], "a ready message has no delivery time")
		}
	}
	assert.Equal(t, []any{"d-1", "d-2", "d-0"}, ids)
	at, err := time.Parse(time.RFC3339Nano, msgs[2].(map[string]any)["delivery_time"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, released.Add(time.Minute), at, 10*time.Second)
	assert.Equal(t, "qwork", msgs[2].(map[string]any)["first_death"].(map[string]any)["queue"])
	// A page starting at the delayed one.
	p2 := peek(t, base, "qdlq", url.Values{"position": {"2"}})
	require.Len(t, p2.Messages, 1)
	assert.Equal(t, "d-0", p2.Messages[0]["message_id"])
	assert.Equal(t, 3, p2.Next)

	// An AMQP browse: the ready ones, then the delayed one; nothing taken.
	br := receiver(t, s, "/queues/qdlq", &amqp.ReceiverOptions{SourceDistributionMode: amqp.SourceDistributionModeCopy, Credit: -1})
	require.NoError(t, br.IssueCredit(10))
	var browsed []string
	for range 3 {
		browsed = append(browsed, body(recv(t, br)))
	}
	assert.Equal(t, []string{"d-1", "d-2", "d-0"}, browsed)
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	require.NoError(t, br.DrainCredit(ctx, nil))
	require.NoError(t, br.Close(ctxT(t)))
	assert.Equal(t, 1, queueInfo(t, b, "qdlq").MessagesDelayed)

	// A redrive moves all three, the delayed one out of the delayed set.
	tk := startRedrive(t, base, map[string]any{"source_queue": "qdlq", "target": "first_death_queue"}, 201)
	tk = waitTask(t, base, tk.ID, finished)
	assert.Equal(t, "completed", tk.State)
	assert.EqualValues(t, 3, tk.Moved)
	info := queueInfo(t, b, "qdlq")
	assert.Zero(t, info.MessagesDelayed)
	assert.Zero(t, info.Messages)
	assert.Equal(t, 3, queueLen(t, b, "qwork"))
	c := receiver(t, s, "/queues/qwork", &amqp.ReceiverOptions{Credit: 3})
	var got []string
	for range 3 {
		m := recv(t, c)
		got = append(got, body(m))
		assert.EqualValues(t, 1, m.Annotations["x-opt-redrive-count"])
		require.NoError(t, c.AcceptMessage(ctxT(t), m))
	}
	assert.ElementsMatch(t, []string{"d-0", "d-1", "d-2"}, got)
}
