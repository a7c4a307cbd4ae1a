package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/deadletter"
	"github.com/epitaph-mq/epitaph/router"
)

type testEnv struct {
	b     *router.Broker
	users *auth.Registry
	srv   *httptest.Server
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC) }
	dl := deadletter.New(deadletter.Options{Now: now})
	b := router.New(router.Options{DeadLetterer: dl, Now: now})
	t.Cleanup(b.Close)
	users := auth.New(b)
	users.SetLoginBrake(auth.NewLoginBrake(time.Millisecond, auth.DefaultLoginFailureSources, nil))
	users.SeedDefaults() // guest on "/", as at a broker's first start
	srv := httptest.NewServer(NewHandler(Options{Router: b, Auth: users, DeadLetters: dl, ProductVersion: "test"}))
	t.Cleanup(srv.Close)
	return &testEnv{b: b, users: users, srv: srv}
}

// call sends body (a string, or JSON-encoded) as user:pass ("" user: no auth).
func (e *testEnv) call(t *testing.T, method, path, user, pass string, body any) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out, resp.Header
}

// guest calls as the default user and checks the status.
func (e *testEnv) guest(t *testing.T, method, path string, body any, want int) []byte {
	t.Helper()
	st, out, _ := e.call(t, method, path, "guest", "guest", body)
	require.Equal(t, want, st, "%s %s: %s", method, path, out)
	return out
}

func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	return v
}

func (e *testEnv) publish(t *testing.T, queue, body string) {
	t.Helper()
	raw := amqp10.AppendData(nil, []byte(body))
	w, err := amqp10.ParseMessage(raw)
	require.NoError(t, err)
	m := router.NewAMQP10Message(w)
	m.RoutingKeys = []string{queue}
	v, _ := e.b.VHost("/")
	res, err := v.Publish(router.Publish{Msg: m})
	require.NoError(t, err)
	require.Equal(t, router.Accepted, res.Outcome.Kind)
}

func requireError(t *testing.T, b []byte) map[string]string {
	t.Helper()
	m := decodeJSON[map[string]string](t, b)
	require.NotEmpty(t, m["error"], "%s", b)
	require.Contains(t, m, "reason")
	return m
}

func TestAuth(t *testing.T) {
	e := newTestEnv(t)
	st, out, h := e.call(t, "GET", "/api/overview", "", "", nil)
	require.Equal(t, http.StatusUnauthorized, st)
	require.Contains(t, h.Get("WWW-Authenticate"), "Basic")
	requireError(t, out)
	st, _, _ = e.call(t, "GET", "/api/overview", "guest", "wrong", nil)
	require.Equal(t, http.StatusUnauthorized, st)

	// Health checks need no credentials.
	out = e.guest(t, "GET", "/api/health/checks/alarms", nil, 200)
	require.JSONEq(t, `{"status":"ok"}`, string(out))
	st, _, _ = e.call(t, "GET", "/api/health/checks/ready", "", "", nil)
	require.Equal(t, 200, st)

	ov := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/overview", nil, 200))
	require.Equal(t, "epitaph", ov["product_name"])
	require.Equal(t, "4.3.0", ov["rabbitmq_version"])
	require.Contains(t, ov, "object_totals")
	require.Contains(t, ov, "queue_totals")

	// A user without any management tag may not use the API at all
	// (RabbitMQ's "Not management user").
	e.guest(t, "PUT", "/api/users/nobody", map[string]any{"password": "pw", "tags": ""}, 201)
	for _, p := range []string{"/api/overview", "/api/queues", "/api/bindings", "/api/exchanges", "/api/whoami"} {
		st, out, _ := e.call(t, "GET", p, "nobody", "pw", nil)
		require.Equal(t, http.StatusUnauthorized, st, p)
		require.Contains(t, string(out), "Not management user")
	}

	// A management user without the administrator tag: 403 on admin endpoints.
	e.guest(t, "PUT", "/api/users/bob", map[string]any{"password": "pw", "tags": "management"}, 201)
	for _, p := range []string{"/api/users", "/api/vhosts/%2f/permissions", "/api/permissions", "/api/definitions"} {
		st, out, _ := e.call(t, "GET", p, "bob", "pw", nil)
		require.Equal(t, http.StatusForbidden, st, p)
		requireError(t, out)
	}
	st, _, _ = e.call(t, "PUT", "/api/vhosts/other", "bob", "pw", nil)
	require.Equal(t, http.StatusForbidden, st)
	// Overview without totals.
	st, out, _ = e.call(t, "GET", "/api/overview", "bob", "pw", nil)
	require.Equal(t, 200, st)
	require.NotContains(t, decodeJSON[map[string]any](t, out), "object_totals")
	// guest still works: it became a real user when bob was created.
	users := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/users", nil, 200))
	require.Len(t, users, 3)
	who := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/whoami", nil, 200))
	require.Equal(t, "guest", who["name"])
}

func TestRoutingErrors(t *testing.T) {
	e := newTestEnv(t)
	st, out, _ := e.call(t, "GET", "/api/nothing", "guest", "guest", nil)
	require.Equal(t, 404, st)
	requireError(t, out)
	st, out, h := e.call(t, "POST", "/api/queues/%2f/q", "guest", "guest", "{}")
	require.Equal(t, 405, st)
	require.Contains(t, h.Get("Allow"), "PUT")
	requireError(t, out)
	st, _, _ = e.call(t, "GET", "/api/queues/nosuchvhost", "guest", "guest", nil)
	require.Equal(t, 404, st)
	st, _, _ = e.call(t, "GET", "/api/queues/%2f/missing", "guest", "guest", nil)
	require.Equal(t, 404, st)
}

func TestQueues(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/queues/%2f/q1", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 3}}, 201)
	e.guest(t, "PUT", "/api/queues/%2f/q1", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 3}}, 204)
	out := e.guest(t, "PUT", "/api/queues/%2f/q1", map[string]any{"durable": true, "arguments": map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 4}}, 400)
	require.Contains(t, requireError(t, out)["reason"], "inequivalent arg")
	e.guest(t, "PUT", "/api/queues/%2f/amq.nope", nil, 403)
	e.guest(t, "PUT", "/api/queues/%2f/"+strings.Repeat("x", 256), nil, 400)

	e.publish(t, "q1", "hello")
	q := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/queues/%2f/q1", nil, 200))
	for _, k := range []string{"name", "vhost", "type", "durable", "auto_delete", "exclusive", "arguments", "messages",
		"messages_ready", "messages_unacknowledged", "consumers", "policy", "effective_policy_definition", "state", "dead_lettering"} {
		require.Contains(t, q, k)
	}
	require.Equal(t, "quorum", q["type"])
	require.Equal(t, "running", q["state"])
	require.EqualValues(t, 1, q["messages"])
	require.EqualValues(t, 3, q["delivery_limit"])
	require.Nil(t, q["policy"])

	list := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/queues", nil, 200))
	require.Len(t, list, 1)
	list = decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/queues/%2f", nil, 200))
	require.Len(t, list, 1)

	e.guest(t, "DELETE", "/api/queues/%2f/q1?if-empty=true", nil, 400)
	e.guest(t, "DELETE", "/api/queues/%2f/q1/contents", nil, 204)
	q = decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/queues/%2f/q1", nil, 200))
	require.EqualValues(t, 0, q["messages"])
	e.guest(t, "DELETE", "/api/queues/%2f/q1", nil, 204)
	e.guest(t, "DELETE", "/api/queues/%2f/q1", nil, 404)

	// A vhost with a slash in it.
	e.guest(t, "PUT", "/api/vhosts/a%2Fb", nil, 201)
	e.guest(t, "PUT", "/api/queues/a%2Fb/x%2Fy", nil, 201)
	q = decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/queues/a%2Fb/x%2Fy", nil, 200))
	require.Equal(t, "x/y", q["name"])
	require.Equal(t, "a/b", q["vhost"])
}

func TestSeedPolicy(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/queues/%2f/work", nil, 201)
	e.guest(t, "PUT", "/api/policies/%2f/DLX",
		`{"pattern": ".*", "definition": {"dead-letter-exchange":"my-dlx"}, "priority": 7, "apply-to": "queues"}`, 201)
	e.guest(t, "PUT", "/api/policies/%2f/DLX",
		`{"pattern": ".*", "definition": {"dead-letter-exchange":"my-dlx"}, "priority": 7, "apply-to": "queues"}`, 204)
	p := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/policies/%2f/DLX", nil, 200))
	require.Equal(t, map[string]any{"vhost": "/", "name": "DLX", "pattern": ".*", "apply-to": "queues",
		"priority": float64(7), "definition": map[string]any{"dead-letter-exchange": "my-dlx"}}, p)
	q := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/queues/%2f/work", nil, 200))
	require.Equal(t, "DLX", q["policy"])
	require.Equal(t, "my-dlx", q["dead_letter_exchange"])
	require.Equal(t, map[string]any{"dead-letter-exchange": "my-dlx"}, q["effective_policy_definition"])

	list := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/policies", nil, 200))
	require.Len(t, list, 1)
	e.guest(t, "PUT", "/api/policies/%2f/bad", `{"pattern": "(", "definition": {"x": 1}}`, 400)
	e.guest(t, "PUT", "/api/policies/%2f/bad", `{"pattern": ".*", "definition": {"message-ttl": "soon"}}`, 400)
	e.guest(t, "PUT", "/api/policies/%2f/bad", `{"pattern": ".*", "definition": {"a": 1}, "apply-to": "nothing"}`, 400)
	e.guest(t, "DELETE", "/api/policies/%2f/DLX", nil, 204)
	e.guest(t, "DELETE", "/api/policies/%2f/DLX", nil, 404)
	q = decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/queues/%2f/work", nil, 200))
	require.Nil(t, q["policy"])
	require.NotContains(t, q, "dead_letter_exchange")
}

func TestExchangesAndBindings(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/exchanges/%2f/x", map[string]any{"type": "direct"}, 201)
	e.guest(t, "PUT", "/api/exchanges/%2f/x", map[string]any{"type": "direct"}, 204)
	e.guest(t, "PUT", "/api/exchanges/%2f/x", map[string]any{"type": "fanout"}, 400)
	e.guest(t, "PUT", "/api/exchanges/%2f/y", map[string]any{}, 400)
	e.guest(t, "PUT", "/api/exchanges/%2f/y", map[string]any{"type": "nonsense"}, 400)
	e.guest(t, "PUT", "/api/exchanges/%2f/amq.x", map[string]any{"type": "direct"}, 403)
	x := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/exchanges/%2f/x", nil, 200))
	require.Equal(t, "direct", x["type"])
	def := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/exchanges/%2f/amq.default", nil, 200))
	require.Equal(t, "", def["name"])
	e.guest(t, "PUT", "/api/queues/%2f/q", nil, 201)

	_, _, h := e.call(t, "POST", "/api/bindings/%2f/e/x/q/q", "guest", "guest", map[string]any{"routing_key": "a b"})
	require.Equal(t, "/api/bindings/%2F/e/x/q/q/a%20b", h.Get("Location"))
	e.guest(t, "POST", "/api/bindings/%2f/e/x/q/q", map[string]any{"routing_key": ""}, 201)
	e.guest(t, "POST", "/api/bindings/%2f/e/x/q/missing", map[string]any{}, 404)
	e.guest(t, "POST", "/api/bindings/%2f/e/amq.default/q/q", map[string]any{}, 403)
	bs := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/bindings/%2f/e/x/q/q", nil, 200))
	require.Len(t, bs, 2)
	keys := []any{bs[0]["properties_key"], bs[1]["properties_key"]}
	require.ElementsMatch(t, []any{"~", "a%20b"}, keys)
	src := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/exchanges/%2f/x/bindings/source", nil, 200))
	require.Len(t, src, 2)
	qb := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/queues/%2f/q/bindings", nil, 200))
	require.Len(t, qb, 3, "the default exchange's binding too")

	e.guest(t, "PUT", "/api/exchanges/%2f/x2", map[string]any{"type": "fanout"}, 201)
	e.guest(t, "POST", "/api/bindings/%2f/e/x/e/x2", map[string]any{"routing_key": "k"}, 201)
	dst := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/exchanges/%2f/x2/bindings/destination", nil, 200))
	require.Len(t, dst, 1)
	e.guest(t, "DELETE", "/api/bindings/%2f/e/x/e/x2/k", nil, 204)

	e.guest(t, "DELETE", "/api/bindings/%2f/e/x/q/q/~", nil, 204)
	e.guest(t, "DELETE", "/api/bindings/%2f/e/x/q/q/~", nil, 404)
	e.guest(t, "GET", "/api/bindings/%2f/e/x/q/q/a%2520b", nil, 200)
	e.guest(t, "DELETE", "/api/bindings/%2f/e/x/q/q/a%2520b", nil, 204)
	all := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/bindings", nil, 200))
	require.Len(t, all, 1)
	e.guest(t, "DELETE", "/api/exchanges/%2f/x", nil, 204)
	e.guest(t, "DELETE", "/api/exchanges/%2f/x", nil, 404)
	out := e.guest(t, "GET", "/api/exchanges/%2f/x/bindings/source", nil, 404)
	require.Equal(t, "no exchange 'x' in vhost '/'", requireError(t, out)["reason"])
	e.guest(t, "GET", "/api/exchanges/nosuchvhost/x/bindings/destination", nil, 404)
	e.guest(t, "DELETE", "/api/exchanges/nosuchvhost/x", nil, 404)
	// amq.default in a path is the default exchange, which binds every queue
	fromDefault := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/exchanges/%2f/amq.default/bindings/source", nil, 200))
	require.NotEmpty(t, fromDefault)
	require.Equal(t, "", fromDefault[0]["source"])
}

func TestPermissionMatrix(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/exchanges/%2f/dlx", map[string]any{"type": "fanout"}, 201)
	e.guest(t, "PUT", "/api/users/u", map[string]any{"password": "pw", "tags": "management"}, 201)
	dlxQueue := map[string]any{"arguments": map[string]any{"x-dead-letter-exchange": "dlx"}}
	for _, tc := range []struct {
		name                   string
		configure, write, read string
		plain, withDLX         int
		purge                  int
	}{
		{"nothing", "", "", "", 403, 403, 403},
		{"configure only", ".*", "", "", 201, 403, 403},
		{"configure+read", ".*", "", ".*", 201, 403, 204},
		{"configure+write on dlx", ".*", "^dlx$", "", 201, 403, 403},
		{"dlx rule satisfied", ".*", "^dlx$", "^q", 201, 201, 204},
		{"read and write but no configure", "", ".*", ".*", 403, 403, 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.guest(t, "PUT", "/api/permissions/%2f/u", map[string]any{"configure": tc.configure, "write": tc.write, "read": tc.read}, 0+func() int {
				if _, ok := e.users.Permission("u", "/"); ok {
					return 204
				}
				return 201
			}())
			p := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/permissions/%2f/u", nil, 200))
			require.Equal(t, tc.configure, p["configure"])
			v, _ := e.b.VHost("/")
			_, _ = v.DeleteQueue("q1")
			_, _ = v.DeleteQueue("q2")
			st, out, _ := e.call(t, "PUT", "/api/queues/%2f/q1", "u", "pw", nil)
			require.Equal(t, tc.plain, st, "%s", out)
			st, out, _ = e.call(t, "PUT", "/api/queues/%2f/q2", "u", "pw", dlxQueue)
			require.Equal(t, tc.withDLX, st, "%s", out)
			_, _, _ = v.DeclareQueue(router.QueueSpec{Name: "q1", Durable: true})
			st, _, _ = e.call(t, "DELETE", "/api/queues/%2f/q1/contents", "u", "pw", nil)
			require.Equal(t, tc.purge, st)
		})
	}
	// guest kept its access when the first permission was defined.
	e.guest(t, "PUT", "/api/queues/%2f/g", nil, 201)
	// No permission in a vhost: 403.
	e.guest(t, "PUT", "/api/vhosts/v2", nil, 201)
	st, _, _ := e.call(t, "GET", "/api/queues/v2", "u", "pw", nil)
	require.Equal(t, 403, st)
	e.guest(t, "GET", "/api/queues/v2", nil, 200)
}

func TestGetPeekAndDeaths(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/exchanges/%2f/dlx", map[string]any{"type": "fanout"}, 201)
	e.guest(t, "PUT", "/api/queues/%2f/dlq", nil, 201)
	e.guest(t, "POST", "/api/bindings/%2f/e/dlx/q/dlq", map[string]any{}, 201)
	e.guest(t, "PUT", "/api/queues/%2f/work", map[string]any{"arguments": map[string]any{"x-dead-letter-exchange": "dlx"}}, 201)
	e.publish(t, "work", "one")
	e.publish(t, "work", "two")

	get := func(q, mode string, want int) []map[string]any {
		return decodeJSON[[]map[string]any](t, e.guest(t, "POST", "/api/queues/%2f/"+q+"/get",
			map[string]any{"count": 5, "ackmode": mode, "encoding": "auto", "truncate": 50000}, want))
	}
	for range 2 {
		ms := get("work", "ack_requeue_true", 200)
		require.Len(t, ms, 2)
		require.Equal(t, "one", ms[0]["payload"])
		require.Equal(t, "string", ms[0]["payload_encoding"])
		require.EqualValues(t, 3, ms[0]["payload_bytes"])
		require.Equal(t, false, ms[0]["redelivered"])
		require.EqualValues(t, 1, ms[0]["message_count"])
		require.Equal(t, "work", ms[0]["routing_key"])
		require.Contains(t, ms[0], "properties")
		require.Empty(t, ms[0]["deaths"])
	}
	// reject_requeue_false dead-letters into dlq.
	ms := get("work", "reject_requeue_false", 200)
	require.Len(t, ms, 2)
	dead := get("dlq", "ack_requeue_true", 200)
	require.Len(t, dead, 2)
	deaths := dead[0]["deaths"].([]any)
	require.Len(t, deaths, 1)
	d := deaths[0].(map[string]any)
	require.Equal(t, "work", d["queue"])
	require.Equal(t, "rejected", d["reason"])
	require.EqualValues(t, 1, d["count"])
	require.Equal(t, "2026-01-02T03:04:05.006Z", d["first_time"])
	_, err := time.Parse(time.RFC3339, d["last_time"].(string))
	require.NoError(t, err)
	require.Equal(t, []any{"work"}, d["routing_keys"])
	require.Equal(t, map[string]any{"queue": "work", "reason": "rejected", "exchange": ""}, dead[0]["first_death"])
	headers := dead[0]["properties"].(map[string]any)["headers"].(map[string]any)
	require.Len(t, headers["x-death"], 1)
	require.Equal(t, "work", headers["x-first-death-queue"])
	require.EqualValues(t, 1, dead[0]["delivery_count"])

	q := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/queues/%2f/work", nil, 200))
	require.EqualValues(t, 2, q["dead_lettering"].(map[string]any)["rejected"].(map[string]any)["dead_lettered"])

	// reject_requeue_true: back in the queue, redelivered afterwards.
	ms = get("dlq", "reject_requeue_true", 200)
	require.Len(t, ms, 2)
	again := get("dlq", "ack_requeue_true", 200)
	require.Equal(t, true, again[0]["redelivered"])
	// base64 and truncation.
	b64 := decodeJSON[[]map[string]any](t, e.guest(t, "POST", "/api/queues/%2f/dlq/get",
		map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "base64", "truncate": 2}, 200))
	require.Equal(t, "base64", b64[0]["payload_encoding"])
	require.Equal(t, "b24=", b64[0]["payload"])
	// ack_requeue_false removes.
	require.Len(t, get("dlq", "ack_requeue_false", 200), 2)
	require.Empty(t, get("dlq", "ack_requeue_true", 200))
	e.guest(t, "POST", "/api/queues/%2f/dlq/get", map[string]any{"ackmode": "maybe"}, 400)
	e.guest(t, "POST", "/api/queues/%2f/missing/get", map[string]any{}, 404)
}

func TestDefinitionsRoundTrip(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/exchanges/%2f/my-dlx", map[string]any{"type": "fanout"}, 201)
	e.guest(t, "PUT", "/api/queues/%2f/dlq", nil, 201)
	e.guest(t, "POST", "/api/bindings/%2f/e/my-dlx/q/dlq", map[string]any{"routing_key": "k"}, 201)
	e.guest(t, "PUT", "/api/policies/%2f/DLX", `{"pattern":".*","definition":{"dead-letter-exchange":"my-dlx"},"priority":7,"apply-to":"queues"}`, 201)
	e.guest(t, "PUT", "/api/vhosts/v2", nil, 201)
	e.guest(t, "PUT", "/api/queues/v2/q", map[string]any{"arguments": map[string]any{"x-queue-type": "quorum"}}, 201)

	before := e.guest(t, "GET", "/api/definitions", nil, 200)
	perVHost := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/definitions/v2", nil, 200))
	require.Len(t, perVHost["queues"], 1)
	require.NotContains(t, perVHost["queues"].([]any)[0], "vhost")

	e.guest(t, "DELETE", "/api/vhosts/v2", nil, 204)
	e.guest(t, "DELETE", "/api/policies/%2f/DLX", nil, 204)
	e.guest(t, "DELETE", "/api/queues/%2f/dlq", nil, 204)
	e.guest(t, "DELETE", "/api/exchanges/%2f/my-dlx", nil, 204)

	e.guest(t, "POST", "/api/definitions", string(before), 204)
	after := e.guest(t, "GET", "/api/definitions", nil, 200)
	require.JSONEq(t, string(before), string(after))

	// Per-vhost import into a fresh vhost.
	e.guest(t, "PUT", "/api/vhosts/v3", nil, 201)
	enc, err := json.Marshal(perVHost)
	require.NoError(t, err)
	e.guest(t, "POST", "/api/definitions/v3", string(enc), 204)
	e.guest(t, "GET", "/api/queues/v3/q", nil, 200)

	out := e.guest(t, "POST", "/api/definitions", `{"queues":[{"name":"x","vhost":"nope"}]}`, 404)
	requireError(t, out)
	e.guest(t, "POST", "/api/definitions", `{"queues":[{"name":"x","vhost":"/","arguments":{"x-message-ttl":"x"}}]}`, 400)
}

// TestHTTPBadBodiesNever500 sends malformed bodies to every writing endpoint.
func TestBadBodiesNever500(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/exchanges/%2f/x", map[string]any{"type": "direct"}, 201)
	e.guest(t, "PUT", "/api/queues/%2f/q", nil, 201)
	paths := []struct{ method, path string }{
		{"PUT", "/api/queues/%2f/q2"}, {"PUT", "/api/queues/%2f/q"}, {"PUT", "/api/exchanges/%2f/x2"},
		{"POST", "/api/bindings/%2f/e/x/q/q"}, {"PUT", "/api/policies/%2f/p"}, {"POST", "/api/definitions"},
		{"POST", "/api/definitions/%2f"}, {"POST", "/api/queues/%2f/q/get"}, {"PUT", "/api/users/u"},
		{"PUT", "/api/permissions/%2f/guest"}, {"PUT", "/api/vhosts/v"},
	}
	bodies := []string{
		`{`, `[]`, `"str"`, `42`, `null`, `{"durable":"yes"}`, `{"arguments":[1]}`, `{"arguments":{"x-max-length":-1}}`,
		`{"arguments":{"x-max-length":1e400}}`, `{"arguments":{"x-message-ttl":null}}`, `{"arguments":{"x-queue-type":"stream"}}`,
		`{"arguments":{"x-dead-letter-exchange":5}}`, `{"arguments":{"x-overflow":{"a":1}}}`,
		`{"type":7}`, `{"type":"topic","arguments":{"alternate-exchange":1}}`, `{"routing_key":5}`,
		`{"routing_key":"k","arguments":{"x-match":"some"}}`, `{"pattern":7}`, `{"pattern":".*","definition":[]}`,
		`{"pattern":".*","definition":{"max-length":"x"},"priority":"high"}`, `{"pattern":".*","definition":{"a":1},"priority":1.5}`,
		`{"queues":"x"}`, `{"users":[{"name":"","password":"x"}]}`, `{"permissions":[{"user":"nobody","vhost":"/"}]}`,
		`{"bindings":[{"source":"x","destination":"q","destination_type":"table"}]}`, `{"vhosts":[{"name":""}]}`,
		`{"count":-1}`, `{"count":"all"}`, `{"ackmode":"nack"}`, `{"encoding":"hex"}`, `{"truncate":-5}`,
		`{"password":5}`, `{"password_hash":"!!"}`, `{"password_hash":"aGVsbG8=","hashing_algorithm":"rot13"}`, `{"tags":5}`,
		`{"configure":"(","write":".*","read":".*"}`, `{"configure":".*"}`, `{"count":1e30}`,
		`{"policies":[{"name":"p","pattern":"(","definition":{"a":1}}]}`, strings.Repeat("[", 100000),
	}
	for _, p := range paths {
		for _, b := range bodies {
			st, out, _ := e.call(t, p.method, p.path, "guest", "guest", b)
			require.Less(t, st, 500, "%s %s %s: %s", p.method, p.path, b, out)
			if st >= 400 {
				requireError(t, out)
			}
		}
	}
}

// The list endpoints answer the path's vhost, or every vhost the user may
// see; an unknown vhost is a 404, one the user may not use a 403, and an
// empty list is [] (not null).
func TestListsAreScopedByVHost(t *testing.T) {
	e := newTestEnv(t)
	e.guest(t, "PUT", "/api/vhosts/v2", nil, 201) // guest gets full access to it
	for _, vh := range []string{"%2f", "v2"} {
		e.guest(t, "PUT", "/api/queues/"+vh+"/q", nil, 201)
		e.guest(t, "PUT", "/api/exchanges/"+vh+"/x", map[string]any{"type": "fanout"}, 201)
		e.guest(t, "POST", "/api/bindings/"+vh+"/e/x/q/q", map[string]any{"routing_key": "k"}, 201)
		e.guest(t, "PUT", "/api/policies/"+vh+"/p", `{"pattern": "^q$", "definition": {"max-length": 5}}`, 201)
	}
	e.guest(t, "PUT", "/api/users/m", map[string]any{"password": "pw", "tags": "management,policymaker"}, 201)
	e.guest(t, "PUT", "/api/permissions/v2/m", map[string]any{"configure": ".*", "write": ".*", "read": ".*"}, 201)

	// vhostsOf lists the vhosts the items of a list answer are in.
	vhostsOf := func(user, pass, path string) []string {
		t.Helper()
		st, out, _ := e.call(t, "GET", path, user, pass, nil)
		require.Equal(t, 200, st, "%s: %s", path, out)
		var vhosts []string
		for _, item := range decodeJSON[[]map[string]any](t, out) {
			vhosts = append(vhosts, item["vhost"].(string))
		}
		slices.Sort(vhosts)
		return slices.Compact(vhosts) // each vhost once
	}
	for _, kind := range []string{"queues", "exchanges", "bindings", "policies"} {
		require.Equal(t, []string{"/", "v2"}, vhostsOf("guest", "guest", "/api/"+kind), kind)
		require.Equal(t, []string{"v2"}, vhostsOf("guest", "guest", "/api/"+kind+"/v2"), kind)
		require.Equal(t, []string{"v2"}, vhostsOf("m", "pw", "/api/"+kind), kind)
		st, out, _ := e.call(t, "GET", "/api/"+kind+"/%2f", "m", "pw", nil)
		require.Equal(t, 403, st, "%s: %s", kind, out)
		st, out, _ = e.call(t, "GET", "/api/"+kind+"/nosuchvhost", "guest", "guest", nil)
		require.Equal(t, 404, st, "%s: %s", kind, out)
	}

	e.guest(t, "PUT", "/api/vhosts/empty", nil, 201)
	for _, kind := range []string{"queues", "bindings", "policies"} {
		require.Equal(t, "[]", string(e.guest(t, "GET", "/api/"+kind+"/empty", nil, 200)), kind)
	}
}
