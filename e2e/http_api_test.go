package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// apiServer serves the management HTTP API of b on a loopback port.
// TODO(lead): switch to the broker's own --http-listen listener once wired.
func apiServer(t *testing.T, b *epitaph.Broker) string {
	t.Helper()
	a := b.HTTPAddr()
	require.NotNil(t, a, "start the broker with withHTTP")
	return "http://" + a.String()
}

// withHTTP turns the broker's management HTTP listener on, on a free port.
func withHTTP(o *epitaph.Options) { o.HTTPListen = "127.0.0.1:0" }

// apiCall sends body (string or JSON-encoded value) as guest and returns
// the status and answer.
func apiCall(t *testing.T, base, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		enc, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, base+path, rd)
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return httpDo(t, req)
}

// httpDo sends req and returns the answer's status and body.
func httpDo(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// api calls and requires status want.
func api(t *testing.T, base, method, path string, body any, want int) []byte {
	t.Helper()
	st, out := apiCall(t, base, method, path, body)
	require.Equal(t, want, st, "%s %s: %s", method, path, out)
	return out
}

func apiJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	return v
}

// seedPolicy is the HTTP API example of the dead-lettering guide, verbatim.
const seedPolicy = `{"pattern": ".*",
     "definition": {"dead-letter-exchange":"my-dlx"},
     "priority": 7,
     "apply-to": "queues"}`

// The seeds' policy example: set a DLX policy over HTTP, see it take effect
// on an existing queue, override it with a queue argument, clear it.
func TestHTTPSeedPolicyOnExistingQueue(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	api(t, base, "PUT", "/api/exchanges/%2f/my-dlx", map[string]any{"type": "fanout", "durable": true}, 201)
	api(t, base, "PUT", "/api/exchanges/%2f/other-dlx", map[string]any{"type": "fanout", "durable": true}, 201)
	api(t, base, "PUT", "/api/queues/%2f/dlq", map[string]any{"durable": true}, 201)
	api(t, base, "PUT", "/api/queues/%2f/other-dlq", map[string]any{"durable": true}, 201)
	api(t, base, "POST", "/api/bindings/%2f/e/my-dlx/q/dlq", map[string]any{}, 201)
	api(t, base, "POST", "/api/bindings/%2f/e/other-dlx/q/other-dlq", map[string]any{}, 201)
	api(t, base, "PUT", "/api/queues/%2f/work", map[string]any{"durable": true}, 201) // exists before the policy

	s := session(t, dial(t, b, nil))
	rejectOne := func(queue, body string) {
		t.Helper()
		send(t, sender(t, s, "/queues/"+queue, nil), msg(body))
		r := receiver(t, s, "/queues/"+queue, nil)
		m := recv(t, r)
		require.Equal(t, body, string(m.GetData()))
		require.NoError(t, r.RejectMessage(ctxT(t), m, nil))
		require.NoError(t, r.Close(ctxT(t)))
	}

	api(t, base, "PUT", "/api/policies/%2f/DLX", seedPolicy, 201)
	q := apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2f/work", nil, 200))
	require.Equal(t, "DLX", q["policy"])
	require.Equal(t, "my-dlx", q["dead_letter_exchange"])

	rejectOne("work", "via-policy")
	dead := recv(t, receiver(t, s, "/queues/dlq", nil))
	require.Equal(t, "via-policy", string(dead.GetData()))
	require.Equal(t, "work", dead.Annotations["x-first-death-queue"])

	// A queue argument overrides the policy.
	api(t, base, "PUT", "/api/queues/%2f/work2", map[string]any{"durable": true,
		"arguments": map[string]any{"x-dead-letter-exchange": "other-dlx"}}, 201)
	q = apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2f/work2", nil, 200))
	require.Equal(t, "other-dlx", q["dead_letter_exchange"])
	rejectOne("work2", "via-argument")
	dead = recv(t, receiver(t, s, "/queues/other-dlq", nil))
	require.Equal(t, "via-argument", string(dead.GetData()))
	require.Zero(t, queueLen(t, b, "dlq"))

	// Cleared: rejected messages are dropped again.
	api(t, base, "DELETE", "/api/policies/%2f/DLX", nil, 204)
	q = apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2f/work", nil, 200))
	require.Nil(t, q["policy"])
	require.NotContains(t, q, "dead_letter_exchange")
	rejectOne("work", "dropped")
	eventually(t, "the drop to be counted", func() bool {
		q := apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2f/work", nil, 200))
		dl, _ := q["dead_lettering"].(map[string]any)["rejected"].(map[string]any)
		return dl != nil && dl["dropped_no_dlx"] == float64(1) && dl["dead_lettered"] == float64(1)
	})
	require.Zero(t, queueLen(t, b, "dlq"))
}

// wipeAll deletes every policy, binding, non-default exchange, queue and
// non-default vhost through the API.
func wipeAll(t *testing.T, base string) {
	t.Helper()
	for _, p := range apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/policies", nil, 200)) {
		api(t, base, "DELETE", "/api/policies/"+escSeg(p["vhost"])+"/"+escSeg(p["name"]), nil, 204)
	}
	for _, q := range apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/queues", nil, 200)) {
		api(t, base, "DELETE", "/api/queues/"+escSeg(q["vhost"])+"/"+escSeg(q["name"]), nil, 204)
	}
	for _, x := range apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/exchanges", nil, 200)) {
		name := x["name"].(string)
		if name == "" || strings.HasPrefix(name, "amq.") {
			continue
		}
		api(t, base, "DELETE", "/api/exchanges/"+escSeg(x["vhost"])+"/"+escSeg(name), nil, 204)
	}
	for _, v := range apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/vhosts", nil, 200)) {
		if v["name"] != "/" {
			api(t, base, "DELETE", "/api/vhosts/"+escSeg(v["name"]), nil, 204)
		}
	}
	require.Empty(t, apiJSON[[]any](t, api(t, base, "GET", "/api/queues", nil, 200)))
}

func escSeg(v any) string {
	return strings.ReplaceAll(strings.ReplaceAll(v.(string), "%", "%25"), "/", "%2F")
}

func TestHTTPDefinitionsRoundTrip(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	api(t, base, "PUT", "/api/vhosts/staging", nil, 201)
	api(t, base, "PUT", "/api/exchanges/%2f/my-dlx", map[string]any{"type": "topic"}, 201)
	api(t, base, "PUT", "/api/exchanges/%2f/ae", map[string]any{"type": "fanout"}, 201)
	api(t, base, "PUT", "/api/exchanges/%2f/in", map[string]any{"type": "direct", "arguments": map[string]any{"alternate-exchange": "ae"}}, 201)
	api(t, base, "PUT", "/api/queues/%2f/dlq", nil, 201)
	api(t, base, "PUT", "/api/queues/%2f/work", map[string]any{"arguments": map[string]any{
		"x-queue-type": "quorum", "x-delivery-limit": 3, "x-dead-letter-exchange": "my-dlx", "x-dead-letter-routing-key": "dead"}}, 201)
	api(t, base, "POST", "/api/bindings/%2f/e/my-dlx/q/dlq", map[string]any{"routing_key": "#"}, 201)
	api(t, base, "POST", "/api/bindings/%2f/e/in/q/work", map[string]any{"routing_key": "work"}, 201)
	api(t, base, "POST", "/api/bindings/%2f/e/in/e/my-dlx", map[string]any{"routing_key": "x"}, 201)
	api(t, base, "PUT", "/api/policies/%2f/DLX", seedPolicy, 201)
	api(t, base, "PUT", "/api/queues/staging/sq", map[string]any{"arguments": map[string]any{"x-message-ttl": 60000}}, 201)
	api(t, base, "PUT", "/api/policies/staging/limits", `{"pattern":"^s","definition":{"max-length":10},"apply-to":"queues"}`, 201)

	before := api(t, base, "GET", "/api/definitions", nil, 200)
	topology := func() map[string]any {
		out := map[string]any{}
		for _, p := range []string{"queues", "exchanges", "bindings", "policies", "vhosts"} {
			out[p] = apiJSON[any](t, api(t, base, "GET", "/api/"+p, nil, 200))
		}
		return out
	}
	want := topology()

	wipeAll(t, base)
	require.NotEqual(t, want, topology())
	api(t, base, "POST", "/api/definitions", string(before), 204)
	require.Equal(t, want, topology())
	require.JSONEq(t, string(before), string(api(t, base, "GET", "/api/definitions", nil, 200)))
}

// A get with ack_requeue_true is a true peek: a consumer afterwards still
// sees first-acquirer true and delivery-count 0.
func TestHTTPGetIsAPeek(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	api(t, base, "PUT", "/api/queues/%2f/q", map[string]any{"arguments": map[string]any{"x-queue-type": "quorum"}}, 201)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/q", nil)
	send(t, snd, msg("a"))
	send(t, snd, msg("b"))

	for range 3 {
		ms := apiJSON[[]map[string]any](t, api(t, base, "POST", "/api/queues/%2f/q/get",
			map[string]any{"count": 10, "ackmode": "ack_requeue_true", "encoding": "auto"}, 200))
		require.Len(t, ms, 2)
		require.Equal(t, "a", ms[0]["payload"])
		require.Equal(t, false, ms[0]["redelivered"])
		require.EqualValues(t, 0, ms[0]["delivery_count"])
	}
	require.Equal(t, 2, queueLen(t, b, "q"))

	r := receiver(t, s, "/queues/q", nil)
	for _, want := range []string{"a", "b"} {
		m := recv(t, r)
		require.Equal(t, want, string(m.GetData()))
		require.NotNil(t, m.Header)
		require.True(t, m.Header.FirstAcquirer, "first-acquirer after a peek")
		require.Zero(t, m.Header.DeliveryCount)
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
}

// Dead letters read over HTTP show their history with RFC 3339 times.
func TestHTTPGetShowsDeaths(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	api(t, base, "PUT", "/api/exchanges/%2f/dlx", map[string]any{"type": "fanout"}, 201)
	api(t, base, "PUT", "/api/queues/%2f/dlq", nil, 201)
	api(t, base, "POST", "/api/bindings/%2f/e/dlx/q/dlq", nil, 201)
	api(t, base, "PUT", "/api/queues/%2f/work", map[string]any{"arguments": map[string]any{
		"x-dead-letter-exchange": "dlx", "x-message-ttl": 1}}, 201)
	s := session(t, dial(t, b, nil))
	before := time.Now().Add(-time.Second)
	send(t, sender(t, s, "/queues/work", nil), msg("late"))
	eventually(t, "the message to expire into dlq", func() bool { return queueLen(t, b, "dlq") == 1 })

	ms := apiJSON[[]map[string]any](t, api(t, base, "POST", "/api/queues/%2f/dlq/get",
		map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50000}, 200))
	require.Len(t, ms, 1)
	m := ms[0]
	require.Equal(t, "late", m["payload"])
	require.Equal(t, "dlx", m["exchange"])
	deaths := m["deaths"].([]any)
	require.Len(t, deaths, 1)
	d := deaths[0].(map[string]any)
	require.Equal(t, "work", d["queue"])
	require.Equal(t, "expired", d["reason"])
	require.EqualValues(t, 1, d["count"])
	require.Equal(t, []any{"work"}, d["routing_keys"])
	for _, k := range []string{"first_time", "last_time"} {
		ts, err := time.Parse(time.RFC3339, d[k].(string))
		require.NoError(t, err, k)
		require.WithinDuration(t, before, ts, time.Minute)
	}
	require.Equal(t, map[string]any{"queue": "work", "reason": "expired", "exchange": ""}, m["last_death"])
	headers := m["properties"].(map[string]any)["headers"].(map[string]any)
	require.Equal(t, "expired", headers["x-first-death-reason"])

	// Still there, untouched.
	r := receiver(t, s, "/queues/dlq", nil)
	got := recv(t, r)
	require.Equal(t, "late", string(got.GetData()))
	require.NoError(t, r.AcceptMessage(ctxT(t), got))
}
