package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// An ended redrive task can be deleted with its report (a running one is
// refused with 409 until cancelled), over HTTP and with epitaphctl; at most
// redrive-task-retention ended tasks are kept, the oldest ended removed
// first, in memory and in the store (a restart, also with a lower
// retention, sees what was kept).
func TestRedriveTaskDeleteAndRetention(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Definitions = []byte(redriveTopology)
	opts.InMemory, opts.DataDir = false, dir
	opts.RedriveTaskRetention = 2
	withHTTP(&opts)
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 20)
	rejectAll(t, base, "work", 20)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 20 })

	// A running task cannot be deleted; once cancelled it can.
	slow := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue", "rate": 1}, 201)
	st, out := apiCall(t, base, "DELETE", "/api/redrives/"+slow.ID+"/report", nil)
	require.Equal(t, http.StatusConflict, st, "%s", out)
	assert.Equal(t, "precondition_failed", apiJSON[map[string]string](t, out)["error"])
	assert.Equal(t, "cancelled", apiJSON[task](t, api(t, base, "DELETE", "/api/redrives/"+slow.ID, nil, 200)).State)
	gone := apiJSON[task](t, api(t, base, "DELETE", "/api/redrives/"+slow.ID+"/report", nil, 200))
	assert.Equal(t, slow.ID, gone.ID)
	assert.Equal(t, "cancelled", gone.State)
	api(t, base, "GET", "/api/redrives/"+slow.ID, nil, 404)
	api(t, base, "DELETE", "/api/redrives/"+slow.ID+"/report", nil, 404)
	assert.Empty(t, apiJSON[[]task](t, api(t, base, "GET", "/api/redrives", nil, 200)))

	// epitaphctl delete_redrive.
	one := ctlJSON[task](t, base, "start_redrive", "queue=dlq", "target=first_death_queue", "max=1")
	waitTask(t, base, one.ID, finished)
	assert.Equal(t, one.ID, ctlJSON[task](t, base, "delete_redrive", one.ID).ID)
	_, errOut, code := ctl(t, base, "", "delete_redrive", one.ID)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no such redrive task")

	// Retention 2: three tasks end, the first one to end goes.
	var ids []string
	for range 3 {
		tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue", "max": 1}, 201)
		waitTask(t, base, tk.ID, finished)
		ids = append(ids, tk.ID)
	}
	listIDs := func(base string) []string {
		var out []string
		for _, tk := range apiJSON[[]task](t, api(t, base, "GET", "/api/redrives", nil, 200)) {
			out = append(out, tk.ID)
		}
		return out
	}
	assert.Equal(t, ids[1:], listIDs(base))
	api(t, base, "GET", "/api/redrives/"+ids[0], nil, 404)
	require.NoError(t, b.Close())

	// The store kept only those two (and none of the deleted ones).
	b2, err := epitaph.Start(opts)
	require.NoError(t, err)
	assert.Equal(t, ids[1:], listIDs(apiServer(t, b2)))
	require.NoError(t, b2.Close())
	// A lower retention applies at the next start.
	opts.RedriveTaskRetention = 1
	b3, err := epitaph.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b3.Close()) })
	assert.Equal(t, ids[2:], listIDs(apiServer(t, b3)))
}

// A task moving in batches of several messages (rate 500: batches of 10)
// stopped by a restart in the middle resumes without moving any message
// twice or losing one: each batch's moves and its progress are one store
// batch.
func TestRedriveBatchesResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.Definitions = []byte(redriveTopology)
	opts.InMemory, opts.DataDir = false, dir
	withHTTP(&opts)
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	base := apiServer(t, b)
	c, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), nil)
	require.NoError(t, err)
	s := session(t, c)
	snd := sender(t, s, "/queues/work", nil)
	const n = 300
	for i := range n {
		require.Equal(t, &amqp.StateAccepted{}, send(t, snd, durableMsg(fmt.Sprintf("m-%03d", i))))
	}
	rejectAll(t, base, "work", n)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == n })
	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue", "rate": 500}, 201)
	mid := waitTask(t, base, tk.ID, func(tk task) bool { return tk.Moved >= 30 })
	require.Less(t, mid.Moved, int64(n))
	_ = c.Close()
	require.NoError(t, b.Close())

	b2, err := epitaph.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b2.Close()) })
	base2 := apiServer(t, b2)
	done := waitTask(t, base2, tk.ID, finished)
	assert.Equal(t, "completed", done.State)
	assert.EqualValues(t, n, done.Moved)
	assert.Empty(t, done.Failed)
	assert.Empty(t, done.Skipped)
	assert.Equal(t, 0, queueLen(t, b2, "dlq"))
	require.Equal(t, n, queueLen(t, b2, "work"))
	r := receiver(t, session(t, dial(t, b2, nil)), "/queues/work", &amqp.ReceiverOptions{Credit: n})
	seen := map[string]int{}
	for range n {
		m := recv(t, r)
		seen[body(m)]++
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	assert.Len(t, seen, n, "every message once")
}
