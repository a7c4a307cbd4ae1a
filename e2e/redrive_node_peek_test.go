package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The /management node's GET /queues/{q}/peek (epitaph's own, as
// /redrives): the HTTP API's page as AMQP values, with its filters,
// positions and errors; nothing is taken. DELETE /redrives/{id}/report
// removes an ended task there too.
func TestPeekOverManagementNode(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 12)
	rejectAll(t, base, "work", 12)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 12 })

	st, body := mgmtCall(t, b, "GET", "/queues/dlq/peek?count=3&reason=rejected&sql=a.kind%20%3D%20%27x%27", nil)
	require.Equal(t, "200", st, "%v", body)
	page := body.(map[string]any)
	assert.Equal(t, "dlq", page["queue"])
	assert.Equal(t, "/", page["vhost"])
	assert.Equal(t, int64(12), page["depth"])
	assert.Equal(t, int64(0), page["delayed"])
	assert.Equal(t, int64(12), page["next_position"])
	msgs := page["messages"].([]any)
	require.Len(t, msgs, 2)
	m := msgs[0].(map[string]any)
	assert.Equal(t, int64(0), m["position"])
	assert.Equal(t, "w-0", m["message_id"])
	assert.Equal(t, []byte("w-0"), m["body"])
	assert.Equal(t, int64(3), m["body_size"])
	assert.Equal(t, map[string]any{"kind": "x"}, m["application_properties"])
	assert.Equal(t, "w-0", m["properties"].(map[string]any)["message_id"])
	assert.Nil(t, m["delivery_time"])
	assert.Equal(t, int64(0), m["redrive_count"])
	assert.Equal(t, "work", m["first_death"].(map[string]any)["queue"])
	d := m["deaths"].([]any)[0].(map[string]any)
	assert.Equal(t, "work", d["queue"])
	assert.Equal(t, "rejected", d["reason"])
	assert.Equal(t, "work", m["annotations"].(map[string]any)["x-first-death-queue"])
	assert.Equal(t, int64(10), msgs[1].(map[string]any)["position"])

	st, body = mgmtCall(t, b, "GET", "/queues/dlq/peek?position=11", nil)
	require.Equal(t, "200", st, "%v", body)
	require.Len(t, body.(map[string]any)["messages"].([]any), 1)
	assert.Equal(t, "w-11", body.(map[string]any)["messages"].([]any)[0].(map[string]any)["message_id"])
	for _, bad := range []string{"?count=0", "?count=5000", "?position=-1", "?reason=bored", "?nope=1", "?sql=(("} {
		st, body = mgmtCall(t, b, "GET", "/queues/dlq/peek"+bad, nil)
		assert.Equal(t, "400", st, "%s: %v", bad, body)
	}
	st, _ = mgmtCall(t, b, "GET", "/queues/nope/peek", nil)
	assert.Equal(t, "404", st)
	st, _ = mgmtCall(t, b, "POST", "/queues/dlq/peek", nil)
	assert.Equal(t, "405", st)
	assert.Equal(t, 12, queueLen(t, b, "dlq"))
	assert.Equal(t, 0, unacked(t, b, "dlq"))

	st, body = mgmtCall(t, b, "POST", "/redrives", map[string]any{"source_queue": "dlq", "target": "first_death_queue", "max": int64(1)})
	require.Equal(t, "201", st, "%v", body)
	id := body.(map[string]any)["id"].(string)
	waitTask(t, base, id, finished)
	st, body = mgmtCall(t, b, "DELETE", "/redrives/"+id+"/report", nil)
	require.Equal(t, "200", st, "%v", body)
	assert.Equal(t, id, body.(map[string]any)["id"])
	st, _ = mgmtCall(t, b, "GET", "/redrives/"+id, nil)
	assert.Equal(t, "404", st)
}
