package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/epitaph-mq/epitaph"
)

// redriveTopology: two work queues dead-letter into one DLQ (through the
// default exchange), a short-TTL queue expires into it, and "orders" is
// bound to the direct exchange "shop" with key "new".
const redriveTopology = `{
 "exchanges":[{"name":"shop","vhost":"/","type":"direct","durable":true}],
 "queues":[
  {"name":"work","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}},
  {"name":"other","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}},
  {"name":"orders","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}},
  {"name":"short","vhost":"/","durable":true,"arguments":{"x-message-ttl":1,"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}},
  {"name":"retry","vhost":"/","durable":true,"arguments":{"x-message-ttl":60000,"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}},
  {"name":"dlq","vhost":"/","durable":true,"arguments":{}}],
 "bindings":[{"source":"shop","vhost":"/","destination":"orders","destination_type":"queue","routing_key":"new","arguments":{}}]}`

// rejectAll dead-letters every ready message of queue (reason rejected)
// through the HTTP API's get with reject_requeue_false.
func rejectAll(t *testing.T, base, queue string, n int) {
	t.Helper()
	api(t, base, "POST", "/api/queues/%2f/"+queue+"/get", map[string]any{"count": n, "ackmode": "reject_requeue_false"}, 200)
}

// publishKinds publishes n messages to address, each with message-id
// prefix-i and the application property kind = "x" for every tenth one,
// else "y".
func publishKinds(t *testing.T, s *amqp.Session, address, prefix string, n int) {
	t.Helper()
	snd := sender(t, s, address, nil)
	for i := range n {
		m := msg(fmt.Sprintf("%s-%d", prefix, i))
		m.Properties = &amqp.MessageProperties{MessageID: fmt.Sprintf("%s-%d", prefix, i)}
		kind := "y"
		if i%10 == 0 {
			kind = "x"
		}
		m.ApplicationProperties = map[string]any{"kind": kind}
		require.Equal(t, &amqp.StateAccepted{}, send(t, snd, m))
	}
}

type peekPage struct {
	Queue    string           `json:"queue"`
	VHost    string           `json:"vhost"`
	Depth    int              `json:"depth"`
	Messages []map[string]any `json:"messages"`
	Next     int              `json:"next_position"`
}

func peek(t *testing.T, base, queue string, q url.Values) peekPage {
	t.Helper()
	return apiJSON[peekPage](t, api(t, base, "GET", "/api/queues/%2f/"+queue+"/peek?"+q.Encode(), nil, 200))
}

// Peek over HTTP: pages by position, the history filters and SQL, each
// message with its history, properties and body; nothing is acquired
// (a consumer then gets every message as a first delivery).
func TestPeekDeadLetterQueue(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 20)
	rejectAll(t, base, "work", 20)
	publishKinds(t, s, "/queues/short", "s", 10)
	eventually(t, "10 expired in dlq", func() bool { return queueLen(t, b, "dlq") == 30 })

	all := peek(t, base, "dlq", url.Values{"count": {"12"}})
	assert.Equal(t, "dlq", all.Queue)
	assert.Equal(t, "/", all.VHost)
	assert.Equal(t, 30, all.Depth)
	require.Len(t, all.Messages, 12)
	assert.Equal(t, 12, all.Next)
	first := all.Messages[0]
	assert.EqualValues(t, 0, first["position"])
	assert.Equal(t, "w-0", first["message_id"])
	assert.Equal(t, "w-0", first["body"])
	assert.Equal(t, "text", first["body_encoding"])
	assert.EqualValues(t, 3, first["body_size"])
	// A rejected message's copy keeps its delivery-count (1): redelivered.
	assert.Equal(t, true, first["redelivered"])
	assert.EqualValues(t, 1, first["delivery_count"])
	assert.EqualValues(t, 0, first["redrive_count"])
	assert.Equal(t, map[string]any{"kind": "x"}, first["application_properties"])
	props := first["properties"].(map[string]any)
	assert.Equal(t, "w-0", props["message_id"])
	assert.Contains(t, props, "correlation_id")
	anns := first["annotations"].(map[string]any)
	assert.Equal(t, "work", anns["x-first-death-queue"])
	assert.Equal(t, "rejected", anns["x-last-death-reason"])
	deaths := first["deaths"].([]any)
	require.Len(t, deaths, 1)
	d := deaths[0].(map[string]any)
	assert.Equal(t, "work", d["queue"])
	assert.Equal(t, "rejected", d["reason"])
	assert.EqualValues(t, 1, d["count"])
	assert.Equal(t, []any{"work"}, d["routing_keys"])
	assert.Nil(t, d["ttl"])

	// The next page continues at next_position.
	page2 := peek(t, base, "dlq", url.Values{"position": {"12"}, "count": {"50"}})
	require.Len(t, page2.Messages, 18)
	assert.EqualValues(t, 12, page2.Messages[0]["position"])
	assert.Equal(t, "w-12", page2.Messages[0]["message_id"])
	assert.Equal(t, 30, page2.Next)

	// History filters.
	ids := func(p peekPage) []string {
		var out []string
		for _, m := range p.Messages {
			out = append(out, m["message_id"].(string))
		}
		return out
	}
	exp := peek(t, base, "dlq", url.Values{"reason": {"expired"}})
	assert.Len(t, exp.Messages, 10)
	assert.Equal(t, "s-0", exp.Messages[0]["message_id"])
	assert.EqualValues(t, 20, exp.Messages[0]["position"])
	assert.Len(t, peek(t, base, "dlq", url.Values{"source_queue": {"short"}}).Messages, 10)
	assert.Len(t, peek(t, base, "dlq", url.Values{"source_queue": {"work"}, "reason": {"expired"}}).Messages, 0)
	assert.Len(t, peek(t, base, "dlq", url.Values{"exchange": {"shop"}}).Messages, 0)
	assert.Len(t, peek(t, base, "dlq", url.Values{"min_count": {"1"}}).Messages, 30)
	assert.Len(t, peek(t, base, "dlq", url.Values{"min_count": {"2"}}).Messages, 0)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	assert.Len(t, peek(t, base, "dlq", url.Values{"death_after": {future}}).Messages, 0)
	assert.Len(t, peek(t, base, "dlq", url.Values{"death_after": {past}, "death_before": {future}}).Messages, 30)
	assert.Equal(t, []string{"w-0", "w-10", "s-0"}, ids(peek(t, base, "dlq", url.Values{"sql": {"a.kind = 'x'"}})))
	assert.Equal(t, []string{"s-0"}, ids(peek(t, base, "dlq", url.Values{"sql": {"kind = 'x'"}, "reason": {"expired"}})))
	assert.Equal(t, []string{"w-10"}, ids(peek(t, base, "dlq", url.Values{"sql": {"kind = 'x'"}, "position": {"1"}, "count": {"1"}})))

	// Bad input: 400 with RabbitMQ's error shape.
	for _, q := range []url.Values{
		{"count": {"1001"}}, {"count": {"0"}}, {"count": {"x"}}, {"position": {"-1"}},
		{"reason": {"bored"}}, {"death_after": {"yesterday"}}, {"min_count": {"-1"}},
		{"sql": {"kind = "}}, {"colour": {"red"}},
	} {
		st, out := apiCall(t, base, "GET", "/api/queues/%2f/dlq/peek?"+q.Encode(), nil)
		require.Equal(t, http.StatusBadRequest, st, "%v: %s", q, out)
		e := apiJSON[map[string]string](t, out)
		assert.Equal(t, "bad_request", e["error"])
		assert.NotEmpty(t, e["reason"])
	}
	st, _ := apiCall(t, base, "GET", "/api/queues/%2f/nope/peek", nil)
	assert.Equal(t, http.StatusNotFound, st)

	// Nothing was acquired: depth unchanged, and the consumer gets the
	// delivery-count the message had before the peeks.
	assert.Equal(t, 30, queueLen(t, b, "dlq"))
	r := receiver(t, s, "/queues/dlq", nil)
	m := recv(t, r)
	assert.Equal(t, "w-0", body(m))
	assert.EqualValues(t, 1, m.Header.DeliveryCount)
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
}

// The peek scan bound: a filter that matches nothing in a queue longer
// than peek-max-scan answers what it tested and where to continue.
func TestPeekScanBound(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP, func(o *epitaph.Options) { o.PeekMaxScan = 7 })
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/dlq", "p", 20)
	p := peek(t, base, "dlq", url.Values{"sql": {"kind = 'none'"}})
	assert.Empty(t, p.Messages)
	assert.Equal(t, 7, p.Next)
	p = peek(t, base, "dlq", url.Values{"sql": {"kind = 'x'"}, "position": {"7"}})
	require.Len(t, p.Messages, 1)
	assert.Equal(t, "p-10", p.Messages[0]["message_id"])
	assert.Equal(t, 14, p.Next)
}

type task struct {
	ID        string           `json:"id"`
	State     string           `json:"state"`
	Moved     int64            `json:"moved"`
	Skipped   map[string]int64 `json:"skipped"`
	Failed    map[string]int64 `json:"failed"`
	WouldMove map[string]int64 `json:"would_move"`
	WouldSkip map[string]int64 `json:"would_skip"`
	Target    string           `json:"target"`
	Finished  *string          `json:"finished"`
	Rate      float64          `json:"rate"`
	Max       int64            `json:"max"`
}

func startRedrive(t *testing.T, base string, body map[string]any, want int) task {
	t.Helper()
	return apiJSON[task](t, api(t, base, "POST", "/api/redrives", body, want))
}

func waitTask(t *testing.T, base, id string, done func(task) bool) task {
	t.Helper()
	var last task
	eventually(t, "redrive task "+id, func() bool {
		last = apiJSON[task](t, api(t, base, "GET", "/api/redrives/"+id, nil, 200))
		return done(last)
	})
	return last
}

func finished(tk task) bool { return tk.State != "running" }

// A redrive back to each message's first death queue: the dry run reports
// what would go where and moves nothing; the task moves every message,
// keeps its history and counts the redrive; a redriven message that dies
// again shows both deaths (count 2) and its redrive count.
func TestRedriveToFirstDeathQueue(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 6)
	rejectAll(t, base, "work", 6)
	publishKinds(t, s, "/queues/other", "o", 3)
	rejectAll(t, base, "other", 3)
	publishKinds(t, s, "/queues/dlq", "plain", 1) // no history
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 10 })

	dry := startRedrive(t, base, map[string]any{"vhost": "/", "source_queue": "dlq", "target": "first_death_queue", "dry_run": true}, 200)
	assert.Equal(t, "dry_run", dry.State)
	assert.Equal(t, map[string]int64{"work": 6, "other": 3}, dry.WouldMove)
	assert.Equal(t, map[string]int64{"no_history": 1}, dry.WouldSkip)
	assert.Equal(t, 10, queueLen(t, b, "dlq"))
	assert.Equal(t, 0, queueLen(t, b, "work"))

	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue"}, 201)
	require.NotEmpty(t, tk.ID)
	tk = waitTask(t, base, tk.ID, finished)
	assert.Equal(t, "completed", tk.State)
	assert.EqualValues(t, 9, tk.Moved)
	assert.Equal(t, map[string]int64{"no_history": 1}, tk.Skipped)
	assert.Empty(t, tk.Failed)
	require.NotNil(t, tk.Finished)
	assert.Equal(t, 1, queueLen(t, b, "dlq"))
	assert.Equal(t, 6, queueLen(t, b, "work"))
	assert.Equal(t, 3, queueLen(t, b, "other"))

	list := apiJSON[[]task](t, api(t, base, "GET", "/api/redrives", nil, 200))
	require.Len(t, list, 1)
	assert.Equal(t, tk.ID, list[0].ID)

	// The redriven message: its history and the redrive count.
	r := receiver(t, s, "/queues/work", nil)
	m := recv(t, r)
	assert.Equal(t, "w-0", body(m))
	assert.EqualValues(t, 1, m.Annotations["x-opt-redrive-count"])
	assert.Equal(t, "work", m.Annotations["x-first-death-queue"])
	assertDeath(t, deathsOf(t, m)[0], "work", "rejected", 1, "", []string{"work"})
	// Dies again: both deaths (count 2), redrive count kept.
	require.NoError(t, r.RejectMessage(ctxT(t), m, nil))
	eventually(t, "w-0 back in the dlq", func() bool { return queueLen(t, b, "dlq") == 2 })
	p := peek(t, base, "dlq", url.Values{"min_count": {"2"}})
	require.Len(t, p.Messages, 1)
	assert.Equal(t, "w-0", p.Messages[0]["message_id"])
	assert.EqualValues(t, 1, p.Messages[0]["redrive_count"])
	dr := receiver(t, s, "/queues/dlq", nil)
	require.NoError(t, dr.AcceptMessage(ctxT(t), recv(t, dr))) // the plain message
	again := recv(t, dr)
	assert.Equal(t, "w-0", body(again))
	assertDeath(t, deathsOf(t, again)[0], "work", "rejected", 2, "", []string{"work"})
	assert.EqualValues(t, 1, again.Annotations["x-opt-redrive-count"])
}

// Redrive to the original exchange and routing keys, to a named queue,
// with a filter and a maximum.
func TestRedriveOriginalExchangeNamedQueueFilterMax(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/exchanges/shop/new", "order", 4)
	rejectAll(t, base, "orders", 4)
	publishKinds(t, s, "/queues/work", "w", 20)
	rejectAll(t, base, "work", 20)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 24 })

	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "original_exchange",
		"filter": map[string]any{"source_queue": "orders"}}, 201)
	tk = waitTask(t, base, tk.ID, finished)
	assert.Equal(t, "completed", tk.State)
	assert.EqualValues(t, 4, tk.Moved)
	assert.Equal(t, 4, queueLen(t, b, "orders"))
	r := receiver(t, s, "/queues/orders", nil)
	m := recv(t, r)
	assert.Equal(t, "order-0", body(m))
	assert.Equal(t, "shop", m.Annotations["x-exchange"])
	assert.Equal(t, "new", m.Annotations["x-routing-key"])
	require.NoError(t, r.AcceptMessage(ctxT(t), m))

	tk = startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "queue", "target_queue": "other",
		"filter": map[string]any{"sql": "a.kind = 'y'"}, "max": 5}, 201)
	tk = waitTask(t, base, tk.ID, finished)
	assert.Equal(t, "completed", tk.State)
	assert.EqualValues(t, 5, tk.Moved)
	assert.EqualValues(t, 5, tk.Max)
	assert.Equal(t, 5, queueLen(t, b, "other"))
	assert.Equal(t, 15, queueLen(t, b, "dlq"))
}

// Bad input is refused with 400 before anything moves; a loop is refused
// at start; a missing target fails each message's move with a cause and
// leaves it in the DLQ.
func TestRedriveBadInputAndLoops(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 3)
	rejectAll(t, base, "work", 3)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 3 })

	for _, body := range []map[string]any{
		{"source_queue": "dlq"},
		{"source_queue": "dlq", "target": "somewhere"},
		{"source_queue": "dlq", "target": "queue"},
		{"source_queue": "dlq", "target": "first_death_queue", "target_queue": "work"},
		{"source_queue": "dlq", "target": "first_death_queue", "rate": -1},
		{"source_queue": "dlq", "target": "first_death_queue", "rate": "fast"},
		{"source_queue": "dlq", "target": "first_death_queue", "rate": 1e9},
		{"source_queue": "dlq", "target": "first_death_queue", "max": -3},
		{"source_queue": "dlq", "target": "first_death_queue", "filter": map[string]any{"reason": "bored"}},
		{"source_queue": "dlq", "target": "first_death_queue", "filter": map[string]any{"sql": "(("}},
		{"source_queue": "dlq", "target": "first_death_queue", "filter": map[string]any{"nope": "1"}},
		{"source_queue": "dlq", "target": "first_death_queue", "filter": map[string]any{"min_count": true}},
		{"source_queue": "dlq", "target": "queue", "target_queue": "dlq"},   // into itself
		{"source_queue": "dlq", "target": "queue", "target_queue": "retry"}, // expires back into the dlq
	} {
		st, out := apiCall(t, base, "POST", "/api/redrives", body)
		require.Equal(t, http.StatusBadRequest, st, "%v: %s", body, out)
		assert.Equal(t, "bad_request", apiJSON[map[string]string](t, out)["error"])
	}
	st, out := apiCall(t, base, "POST", "/api/redrives", map[string]any{"source_queue": "nope", "target": "first_death_queue"})
	assert.Equal(t, http.StatusNotFound, st, "%s", out)
	st, _ = apiCall(t, base, "POST", "/api/redrives", map[string]any{"vhost": "nope", "source_queue": "dlq", "target": "first_death_queue"})
	assert.Equal(t, http.StatusNotFound, st)
	st, _ = apiCall(t, base, "GET", "/api/redrives/r-999", nil)
	assert.Equal(t, http.StatusNotFound, st)
	st, _ = apiCall(t, base, "DELETE", "/api/redrives/r-999", nil)
	assert.Equal(t, http.StatusNotFound, st)
	assert.Empty(t, apiJSON[[]task](t, api(t, base, "GET", "/api/redrives", nil, 200)))

	// A missing target: each message fails with target_missing and stays.
	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "queue", "target_queue": "gone"}, 201)
	tk = waitTask(t, base, tk.ID, finished)
	assert.Equal(t, "completed", tk.State)
	assert.EqualValues(t, 0, tk.Moved)
	assert.Equal(t, map[string]int64{"target_missing": 3}, tk.Failed)
	assert.Equal(t, 3, queueLen(t, b, "dlq"))
	// The origin deleted: the same.
	_, err := rootVHost(t, b).DeleteQueue("work")
	require.NoError(t, err)
	tk = startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue"}, 201)
	tk = waitTask(t, base, tk.ID, finished)
	assert.Equal(t, map[string]int64{"target_missing": 3}, tk.Failed)
	assert.Equal(t, 3, queueLen(t, b, "dlq"))
}

// Permissions: read on the source to start (403 without), write on each
// target as messages go (access_refused for the others, which stay).
func TestRedrivePermissions(t *testing.T) {
	users := []permUser{{name: "ops", configure: "^$", write: "^work$", read: "^dlq$"},
		{name: "blind", configure: "^$", write: ".*", read: "^work$"}}
	defs := permDefinitions(t, users)
	var topo, d map[string]any
	require.NoError(t, json.Unmarshal([]byte(redriveTopology), &topo))
	require.NoError(t, json.Unmarshal([]byte(defs), &d))
	for _, k := range []string{"queues", "exchanges", "bindings"} {
		d[k] = topo[k]
	}
	for _, u := range d["users"].([]any) {
		u.(map[string]any)["tags"] = []string{"management"}
	}
	d["users"] = append(d["users"].([]any), map[string]any{"name": "admin", "password": permPassword, "tags": []string{"administrator"}})
	d["permissions"] = append(d["permissions"].([]any), map[string]any{"user": "admin", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"})
	doc, err := json.Marshal(d)
	require.NoError(t, err)
	b := startBroker(t, string(doc), withHTTP, func(o *epitaph.Options) { o.AuthFailureDelay = 0 })
	base := apiServer(t, b)
	as := func(user, method, path string, body any) (int, []byte) {
		enc, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctxT(t), method, base+path, bytes.NewReader(enc))
		require.NoError(t, err)
		req.SetBasicAuth(user, permPassword)
		req.Header.Set("Content-Type", "application/json")
		return httpDo(t, req)
	}
	vh := rootVHost(t, b)
	c, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("admin", permPassword)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := session(t, c)
	publishKinds(t, s, "/queues/work", "w", 2)
	publishKinds(t, s, "/queues/other", "o", 2)
	for _, q := range []string{"work", "other"} {
		wq, _ := vh.Queue(q)
		wq.Reject(2)
	}
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 4 })

	st, out := as("blind", "POST", "/api/redrives", map[string]any{"source_queue": "dlq", "target": "first_death_queue"})
	assert.Equal(t, http.StatusForbidden, st, "%s", out)
	st, out = as("blind", "GET", "/api/queues/%2f/dlq/peek", nil)
	assert.Equal(t, http.StatusForbidden, st, "%s", out)

	st, out = as("ops", "POST", "/api/redrives", map[string]any{"source_queue": "dlq", "target": "first_death_queue"})
	require.Equal(t, http.StatusCreated, st, "%s", out)
	id := apiJSON[task](t, out).ID
	var tk task
	eventually(t, "ops's task ends", func() bool {
		st, out := as("admin", "GET", "/api/redrives/"+id, nil)
		require.Equal(t, http.StatusOK, st, "%s", out)
		tk = apiJSON[task](t, out)
		return finished(tk)
	})
	assert.EqualValues(t, 2, tk.Moved)
	assert.Equal(t, map[string]int64{"access_refused": 2}, tk.Failed)
	assert.Equal(t, 2, queueLen(t, b, "work"))
	assert.Equal(t, 0, queueLen(t, b, "other"))
	assert.Equal(t, 2, queueLen(t, b, "dlq"))
	// blind cannot cancel ops's task (no read on its source).
	st, _ = as("blind", "DELETE", "/api/redrives/"+tk.ID, nil)
	assert.Equal(t, http.StatusForbidden, st)
}

// Cancel: a rate-limited task stops where it is; what it moved stays
// moved, the rest stays in the DLQ.
func TestRedriveCancel(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 40)
	rejectAll(t, base, "work", 40)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 40 })
	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue", "rate": 20}, 201)
	assert.EqualValues(t, 20, tk.Rate)
	waitTask(t, base, tk.ID, func(tk task) bool { return tk.Moved >= 2 })
	got := apiJSON[task](t, api(t, base, "DELETE", "/api/redrives/"+tk.ID, nil, 200))
	assert.Equal(t, "cancelled", got.State)
	assert.Less(t, got.Moved, int64(40))
	assert.Equal(t, int(got.Moved), queueLen(t, b, "work"))
	assert.Equal(t, 40-int(got.Moved), queueLen(t, b, "dlq"))
	// Cancelling again answers the ended task.
	again := apiJSON[task](t, api(t, base, "DELETE", "/api/redrives/"+tk.ID, nil, 200))
	assert.Equal(t, got.Moved, again.Moved)
}

// A task survives a restart in the middle: it resumes from its stored
// progress, and no message is moved twice (the move and the progress are
// one atomic store batch).
func TestRedriveResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	durable := func(o *epitaph.Options) { o.InMemory, o.DataDir = false, dir }
	opts := testOptions()
	opts.Definitions = []byte(redriveTopology)
	withHTTP(&opts)
	durable(&opts)
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	base := apiServer(t, b)
	c, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), nil)
	require.NoError(t, err)
	s := session(t, c)
	snd := sender(t, s, "/queues/work", nil)
	const n = 30
	for i := range n {
		require.Equal(t, &amqp.StateAccepted{}, send(t, snd, durableMsg(fmt.Sprintf("m-%02d", i))))
	}
	rejectAll(t, base, "work", n)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == n })
	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue", "rate": 25}, 201)
	mid := waitTask(t, base, tk.ID, func(tk task) bool { return tk.Moved >= 5 })
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
	assert.Equal(t, 0, queueLen(t, b2, "dlq"))
	require.Equal(t, n, queueLen(t, b2, "work"))
	s2 := session(t, dial(t, b2, nil))
	seen := map[string]int{}
	r := receiver(t, s2, "/queues/work", &amqp.ReceiverOptions{Credit: n})
	for range n {
		m := recv(t, r)
		seen[body(m)]++
		assert.EqualValues(t, 1, m.Annotations["x-opt-redrive-count"])
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	assert.Len(t, seen, n, "every message once")
}

// epitaphctl: peek_queue with filters, a dry run, start_redrive,
// list_redrives and redrive_status.
func TestEpitaphctlPeekAndRedrive(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 12)
	rejectAll(t, base, "work", 12)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 12 })

	page := ctlJSON[peekPage](t, base, "peek_queue", "queue=dlq", "count=5", "sql=kind = 'x'", "reason=rejected")
	require.Len(t, page.Messages, 2)
	assert.Equal(t, "w-0", page.Messages[0]["message_id"])
	assert.Equal(t, "w-10", page.Messages[1]["message_id"])
	table := ctlOK(t, base, "peek_queue", "queue=dlq", "count=2")
	assert.Contains(t, table, "w-1")
	assert.Contains(t, table, "rejected from work x1")
	_, errOut, code := ctl(t, base, "", "peek_queue", "queue=dlq", "count=5000")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "count must be")

	dry := ctlJSON[task](t, base, "start_redrive", "queue=dlq", "target=first_death_queue", "dry_run=true", "min_count=1")
	assert.Equal(t, "dry_run", dry.State)
	assert.Equal(t, map[string]int64{"work": 12}, dry.WouldMove)
	tk := ctlJSON[task](t, base, "start_redrive", "queue=dlq", "target=first_death_queue", "max=4")
	tk = waitTask(t, base, tk.ID, finished)
	assert.EqualValues(t, 4, tk.Moved)
	st := ctlJSON[task](t, base, "redrive_status", tk.ID)
	assert.Equal(t, "completed", st.State)
	list := ctlJSON[[]task](t, base, "list_redrives")
	require.Len(t, list, 1)
	assert.Contains(t, ctlOK(t, base, "list_redrives"), tk.ID)
	assert.Equal(t, "completed", ctlJSON[task](t, base, "cancel_redrive", tk.ID).State)
	_, errOut, code = ctl(t, base, "", "start_redrive", "queue=dlq", "target=nowhere")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "target must be")
	assert.Equal(t, 4, queueLen(t, b, "work"))
}

// A source with distribution-mode copy browses its queue: it gets copies
// of the ready messages in order (with the attach's filters), nothing is
// acquired or counted as delivered, and a drain at the end of the queue
// ends at once.
func TestBrowseDistributionModeCopy(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 12)
	rejectAll(t, base, "work", 12)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 12 })

	br := receiver(t, s, "/queues/dlq", &amqp.ReceiverOptions{SourceDistributionMode: amqp.SourceDistributionModeCopy, Credit: -1})
	require.NoError(t, br.IssueCredit(20))
	for i := range 12 {
		m := recv(t, br)
		assert.Equal(t, fmt.Sprintf("w-%d", i), body(m))
		assert.Equal(t, "work", m.Annotations["x-first-death-queue"])
		assert.EqualValues(t, 1, m.Header.DeliveryCount, "the delivery-count the queue holds, unchanged")
	}
	// The end: a drain returns with nothing more.
	ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
	defer cancel()
	require.NoError(t, br.DrainCredit(ctx, nil))
	require.NoError(t, br.Close(ctxT(t)))
	assert.Equal(t, 12, queueLen(t, b, "dlq"))
	assert.Equal(t, 0, unacked(t, b, "dlq"))

	// A second browse with a filter sees only what matches; a consumer
	// then gets every message with its delivery-count unchanged.
	fb := receiver(t, s, "/queues/dlq", &amqp.ReceiverOptions{SourceDistributionMode: amqp.SourceDistributionModeCopy,
		Filters: []amqp.LinkFilter{sqlFilter("a.kind = 'x'")}, Credit: -1})
	require.NoError(t, fb.IssueCredit(10))
	assert.Equal(t, "w-0", body(recv(t, fb)))
	assert.Equal(t, "w-10", body(recv(t, fb)))
	require.NoError(t, fb.DrainCredit(ctx, nil))
	require.NoError(t, fb.Close(ctxT(t)))
	c := receiver(t, s, "/queues/dlq", nil)
	m := recv(t, c)
	assert.Equal(t, "w-0", body(m))
	assert.EqualValues(t, 1, m.Header.DeliveryCount)
	require.NoError(t, c.AcceptMessage(ctxT(t), m))
}

// The /management node's /redrives paths (epitaph's own): a dry run, a
// task started and read back, the list, a cancel, and bad input.
func TestRedriveOverManagementNode(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	publishKinds(t, s, "/queues/work", "w", 5)
	rejectAll(t, base, "work", 5)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 5 })

	st, body := mgmtCall(t, b, "POST", "/redrives", map[string]any{"source_queue": "dlq", "target": "first_death_queue",
		"dry_run": true, "filter": map[string]any{"reason": "rejected"}})
	require.Equal(t, "200", st, "%v", body)
	dry := body.(map[string]any)
	assert.Equal(t, "dry_run", dry["state"])
	assert.Equal(t, map[string]any{"work": int64(5)}, dry["would_move"])

	st, body = mgmtCall(t, b, "POST", "/redrives", map[string]any{"source_queue": "dlq", "target": "first_death_queue", "max": int64(2)})
	require.Equal(t, "201", st, "%v", body)
	id := body.(map[string]any)["id"].(string)
	done := waitTask(t, base, id, finished)
	assert.EqualValues(t, 2, done.Moved)
	st, body = mgmtCall(t, b, "GET", "/redrives/"+id, nil)
	require.Equal(t, "200", st)
	assert.Equal(t, int64(2), body.(map[string]any)["moved"])
	st, body = mgmtCall(t, b, "GET", "/redrives", nil)
	require.Equal(t, "200", st)
	assert.Len(t, body.([]any), 1)
	st, body = mgmtCall(t, b, "DELETE", "/redrives/"+id, nil)
	require.Equal(t, "200", st)
	assert.Equal(t, "completed", body.(map[string]any)["state"])

	st, _ = mgmtCall(t, b, "POST", "/redrives", map[string]any{"source_queue": "dlq", "target": "up"})
	assert.Equal(t, "400", st)
	st, _ = mgmtCall(t, b, "POST", "/redrives", map[string]any{"source_queue": "dlq", "target": "queue", "target_queue": "dlq"})
	assert.Equal(t, "400", st)
	st, _ = mgmtCall(t, b, "POST", "/redrives", "not a map")
	assert.Equal(t, "400", st)
	st, _ = mgmtCall(t, b, "POST", "/redrives", map[string]any{"source_queue": "nope", "target": "first_death_queue"})
	assert.Equal(t, "404", st)
	st, _ = mgmtCall(t, b, "GET", "/redrives/r-77", nil)
	assert.Equal(t, "404", st)
	st, _ = mgmtCall(t, b, "PUT", "/redrives", nil)
	assert.Equal(t, "405", st)
	assert.Equal(t, 3, queueLen(t, b, "dlq"))
}

// Each task run is a span of its own trace, and each moved message's
// move a child of it, linked to the message's original trace; the moved
// copy carries the move's context (its delivery continues from it).
func TestRedriveTraceSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	b := startBroker(t, redriveTopology, withHTTP, func(o *epitaph.Options) { o.TracerProvider = tp })
	base := apiServer(t, b)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/work", nil)
	require.Equal(t, &amqp.StateAccepted{}, send(t, snd, tracedMsg("traced")))
	rejectAll(t, base, "work", 1)
	eventually(t, "dlq filled", func() bool { return queueLen(t, b, "dlq") == 1 })
	dl := findSpans(exp.GetSpans(), "dead-letter work")
	require.Len(t, dl, 1)
	origTrace := dl[0].SpanContext.TraceID()

	tk := startRedrive(t, base, map[string]any{"source_queue": "dlq", "target": "first_death_queue"}, 201)
	waitTask(t, base, tk.ID, finished)
	r := receiver(t, s, "/queues/work", nil)
	m := recv(t, r)
	require.NoError(t, r.AcceptMessage(ctxT(t), m))

	var task, move tracetest.SpanStub
	eventually(t, "redrive spans", func() bool {
		for _, sp := range findSpans(exp.GetSpans(), "redrive dlq") {
			if sp.Parent.IsValid() {
				move = sp
			} else {
				task = sp
			}
		}
		return task.Name != "" && move.Name != ""
	})
	assert.NotEqual(t, origTrace, task.SpanContext.TraceID(), "the task has a trace of its own")
	assert.Equal(t, task.SpanContext.SpanID(), move.Parent.SpanID())
	require.Len(t, move.Links, 1)
	assert.Equal(t, origTrace, move.Links[0].SpanContext.TraceID(), "the move links to the message's trace")
	assert.Equal(t, dl[0].SpanContext.SpanID(), move.Links[0].SpanContext.SpanID())
	v, ok := attrOf(task, "epitaph.redrive.task")
	require.True(t, ok)
	assert.Equal(t, tk.ID, v.AsString())
	// The delivery of the moved copy continues from the move.
	var deliver tracetest.SpanStub
	for _, sp := range findSpans(exp.GetSpans(), "deliver work") {
		if sp.Parent.SpanID() == move.SpanContext.SpanID() {
			deliver = sp
		}
	}
	assert.NotEmpty(t, deliver.Name, "deliver work under the move span")
}
