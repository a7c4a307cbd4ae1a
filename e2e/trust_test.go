package e2e

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/management/httpapi"
	"github.com/epitaph-mq/epitaph/router"
)

// nonLoopbackIPv4 returns an IPv4 address of this host that is not
// loopback, or nil when the host has none.
func nonLoopbackIPv4(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	return nil
}

// httpStatusAs sends GET path with basic auth and returns the status.
func httpStatusAs(t *testing.T, base, path, user, pass string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// guest may log in to the HTTP API from loopback only, whatever address
// the listener binds: the peer's address decides. With a non-loopback
// interface, the broker's own listener is bound there and the request
// comes from that address over TCP; without one, the same handler is
// driven with a request whose RemoteAddr is not loopback.
func TestHTTPGuestOnlyFromLoopback(t *testing.T) {
	ip := nonLoopbackIPv4(t)
	if ip != nil {
		b := startBroker(t, "", func(o *epitaph.Options) {
			o.HTTPListen = net.JoinHostPort(ip.String(), "0")
			o.AuthFailureDelay = time.Millisecond
		})
		base := "http://" + b.HTTPAddr().String()
		require.Equal(t, http.StatusUnauthorized, httpStatusAs(t, base, "/api/whoami", "guest", "guest"),
			"guest from %s", ip)
		require.Equal(t, http.StatusUnauthorized, httpStatusAs(t, base, "/api/users", "guest", "guest"))
		// The same broker from loopback: a loopback listener beside it.
		local := startBroker(t, "", withHTTP)
		require.Equal(t, http.StatusOK, httpStatusAs(t, apiServer(t, local), "/api/whoami", "guest", "guest"))
		return
	}
	t.Log("no non-loopback interface: driving the handler with a remote RemoteAddr")
	b := startBroker(t, "")
	h := httpapi.NewHandler(httpapi.Options{Router: b.Router(), Auth: b.Auth()})
	for remote, want := range map[string]int{"192.0.2.7:40000": http.StatusUnauthorized,
		"[2001:db8::1]:40000": http.StatusUnauthorized, "127.0.0.1:40000": http.StatusOK, "[::1]:40000": http.StatusOK} {
		req := httptest.NewRequest(http.MethodGet, "/api/whoami", nil)
		req.RemoteAddr = remote
		req.SetBasicAuth("guest", "guest")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, "guest from %s: %s", remote, rec.Body)
	}
}

// While a resource alarm is in effect the alarm health checks answer 503
// with the alarms, in RabbitMQ's shape; without one, 200.
func TestHTTPHealthAlarmsFailDuringAlarm(t *testing.T) {
	b := startBroker(t, "", withHTTP, func(o *epitaph.Options) { o.MemoryHighWatermark = 1 })
	base := apiServer(t, b)
	require.True(t, b.Router().Alarms().State().Memory, "a 1-byte watermark is exceeded")
	for _, c := range []struct{ path, reason string }{
		{"/api/health/checks/alarms", "There are alarms in effect in the cluster"},
		{"/api/health/checks/local-alarms", "There are alarms in effect on the node"},
	} {
		st, out := apiCall(t, base, "GET", c.path, nil)
		require.Equal(t, http.StatusServiceUnavailable, st, "%s: %s", c.path, out)
		var got struct {
			Status string              `json:"status"`
			Reason string              `json:"reason"`
			Alarms []map[string]string `json:"alarms"`
		}
		require.NoError(t, json.Unmarshal(out, &got))
		require.Equal(t, "failed", got.Status)
		require.Equal(t, c.reason, got.Reason)
		require.Len(t, got.Alarms, 1)
		require.Equal(t, "memory", got.Alarms[0]["resource"])
		require.NotEmpty(t, got.Alarms[0]["node"])
	}
	quiet := startBroker(t, "", withHTTP)
	st, out := apiCall(t, apiServer(t, quiet), "GET", "/api/health/checks/alarms", nil)
	require.Equal(t, http.StatusOK, st, "%s", out)
	require.JSONEq(t, `{"status":"ok"}`, string(out))
}

// requireVHostRefused requires a connection to url to be refused its vhost:
// open answered by open, then close(amqp:unauthorized-access).
func requireVHostRefused(t *testing.T, url string) {
	t.Helper()
	c, err := amqp.Dial(ctxT(t), url, nil)
	if err == nil {
		select {
		case <-c.Done():
			err = c.Err()
		case <-ctxT(t).Done():
			t.Fatalf("connection to %s stayed open", url)
		}
	}
	var ce *amqp.ConnError
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.RemoteErr, "%v", err)
	require.Equal(t, amqp.ErrCond("amqp:unauthorized-access"), ce.RemoteErr.Condition, "%v", err)
}

// apiCallAs is apiCall as user:pass.
func apiCallAs(t *testing.T, base, user, pass, method, path string, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, base+path, rd)
	require.NoError(t, err)
	req.SetBasicAuth(user, pass)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return httpDo(t, req)
}

// An empty permission table grants nothing. With users admin (no
// permissions) and app (the only one with permissions), deleting app
// empties the table: an anonymous loopback connection (user guest, which
// no longer exists) must then be refused the vhost, and admin's HTTP
// calls on the queue must be refused too.
func TestEmptyPermissionTableGrantsNothing(t *testing.T) {
	defs := `{"users": [
	    {"name": "admin", "password": "pw", "tags": ["administrator"]},
	    {"name": "app", "password": "pw", "tags": []}],
	  "vhosts": [{"name": "/"}],
	  "permissions": [{"user": "app", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
	  "queues": [{"name": "q", "vhost": "/", "durable": true, "arguments": {}}]}`
	b := startBroker(t, defs, withHTTP)
	base := apiServer(t, b)
	st, out := apiCallAs(t, base, "admin", "pw", "DELETE", "/api/users/app", "")
	require.Equal(t, http.StatusNoContent, st, "%s", out)
	require.Empty(t, b.Auth().Permissions())

	requireVHostRefused(t, "amqp://"+b.Addr().String()) // anonymous: user guest
	requireVHostRefused(t, "amqp://admin:pw@"+b.Addr().String())

	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/queues/%2f/q", ""},
		{"POST", "/api/queues/%2f/q/get", `{"count":1,"ackmode":"ack_requeue_true","encoding":"auto"}`},
		{"DELETE", "/api/queues/%2f/q/contents", ""},
	} {
		st, out := apiCallAs(t, base, "admin", "pw", c.method, c.path, c.body)
		require.Equal(t, http.StatusForbidden, st, "%s %s: %s", c.method, c.path, out)
	}
	st, out = apiCallAs(t, base, "admin", "pw", "GET", "/api/queues", "")
	require.Equal(t, http.StatusOK, st, "%s", out)
}

// At first start guest gets full permissions on "/" (RabbitMQ's seeded
// default): a real, stored permission that can be revoked, and a revoked
// default is not granted again at the next start of the same store.
func TestDefaultGuestPermissionIsRevocable(t *testing.T) {
	dir := t.TempDir()
	opts := func(o *epitaph.Options) { o.InMemory = false; o.DataDir = dir; o.DiskFreeLimit = 0; withHTTP(o) }
	o := testOptions()
	opts(&o)
	b, err := epitaph.Start(o)
	require.NoError(t, err)
	base := apiServer(t, b)
	out := api(t, base, "GET", "/api/permissions", nil, http.StatusOK)
	require.JSONEq(t, `[{"user":"guest","vhost":"/","configure":".*","write":".*","read":".*"}]`, string(out))
	declareQueue(t, b, "q0", router.Classic, nil)
	c := dial(t, b, nil)
	snd := sender(t, session(t, c), "/queues/q0", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("m")))
	api(t, base, "DELETE", "/api/permissions/%2f/guest", nil, http.StatusNoContent)
	requireVHostRefused(t, "amqp://"+b.Addr().String())
	require.NoError(t, c.Close())
	require.NoError(t, b.Close())

	again := startBroker(t, "", opts)
	require.Empty(t, again.Auth().Permissions(), "the revoked default stays revoked")
	requireVHostRefused(t, "amqp://"+again.Addr().String())
}

// dialFrom connects from the local address src with SASL PLAIN user:pass
// and returns the time until the broker's answer (the client's error, if
// any).
func dialFrom(t *testing.T, b *epitaph.Broker, src, user, pass string) (time.Duration, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	start := time.Now()
	nc, err := d.DialContext(ctxT(t), "tcp", b.Addr().String())
	require.NoError(t, err)
	c, err := amqp.NewConn(ctxT(t), nc, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain(user, pass)})
	took := time.Since(start)
	if err == nil {
		require.NoError(t, c.Close())
	} else {
		_ = nc.Close()
	}
	return took, err
}

// A failed authentication is answered only after the failure delay, times
// the recent failures from the same address; a correct login, here from
// another loopback address, is not held up by them. The failures are
// counted (epitaph_auth_failures_total). HTTP basic auth is braked alike.
func TestFailedAuthenticationIsDelayed(t *testing.T) {
	const delay = 250 * time.Millisecond
	defs := `{"users": [{"name": "alice", "password": "right", "tags": ["administrator"]}],
	  "permissions": [{"user": "alice", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]}`
	b := startBroker(t, defs, withHTTP, func(o *epitaph.Options) {
		o.AuthFailureDelay = delay
		o.Telemetry.Metrics = true
	})
	for n := 1; n <= 3; n++ {
		took, err := dialFrom(t, b, "127.0.0.1", "alice", "wrong")
		require.Error(t, err)
		require.GreaterOrEqual(t, took, time.Duration(n)*delay, "failure %d from one address waits %d delays", n, n)
	}
	// A fourth failure from 127.0.0.1 now waits 4 delays; a correct login
	// from 127.0.0.2 meanwhile gets through before it is answered.
	slow := make(chan error, 1)
	go func() {
		_, err := dialFrom(t, b, "127.0.0.1", "alice", "wrong")
		slow <- err
	}()
	require.Eventually(t, func() bool { return b.Auth().LoginFailures() == 4 }, 10*time.Second, time.Millisecond,
		"the fourth failure is recorded (and waiting)")
	_, err := dialFrom(t, b, "127.0.0.2", "alice", "right")
	require.NoError(t, err)
	select {
	case err := <-slow:
		t.Fatalf("the failing login was answered before the correct one from another address finished: %v", err)
	default:
	}
	require.Error(t, <-slow)

	// HTTP basic auth: the failures from this address go on counting.
	base := apiServer(t, b)
	start := time.Now()
	st, _ := apiCallAs(t, base, "alice", "wrong", "GET", "/api/whoami", "")
	require.Equal(t, http.StatusUnauthorized, st)
	require.GreaterOrEqual(t, time.Since(start), 5*delay, "the fifth failure from 127.0.0.1")
	st, _ = apiCallAs(t, base, "alice", "right", "GET", "/api/whoami", "")
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, uint64(5), b.Auth().LoginFailures())

	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(text), "epitaph_auth_failures_total 5\n")
}

// One HTTP get is bounded: a count above http-get-max-count is refused
// before anything is taken, and the answer's payload bytes stop at
// http-get-max-bytes (fewer messages, flagged by a header); a destructive
// get takes only what it answers with.
func TestHTTPGetIsBounded(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	declareQueue(t, b, "big", router.Classic, nil)
	snd := sender(t, session(t, dial(t, b, nil)), "/queues/big", nil)
	const n, size = 20, 1 << 20 // 20 MiB against the 16 MiB default
	for range n {
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, amqp.NewMessage(make([]byte, size))))
	}

	st, out := apiCall(t, base, "POST", "/api/queues/%2f/big/get", `{"count":100000,"ackmode":"ack_requeue_true","encoding":"auto"}`)
	require.Equal(t, http.StatusBadRequest, st, "count above the cap: %.200s", out)

	get := func(body string) (*http.Response, []map[string]any) {
		req, err := http.NewRequestWithContext(ctxT(t), "POST", base+"/api/queues/%2f/big/get", strings.NewReader(body))
		require.NoError(t, err)
		req.SetBasicAuth("guest", "guest")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var msgs []map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&msgs))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp, msgs
	}
	resp, msgs := get(`{"count":20,"ackmode":"ack_requeue_true","encoding":"base64"}`)
	require.Len(t, msgs, 16, "16 MiB of 1 MiB payloads")
	require.Equal(t, strconv.Itoa(16<<20), resp.Header.Get(httpapi.HeaderGetTruncated))

	resp, msgs = get(`{"count":20,"ackmode":"ack_requeue_true","encoding":"auto","truncate":1000}`)
	require.Len(t, msgs, 20, "truncated payloads all fit")
	require.Empty(t, resp.Header.Get(httpapi.HeaderGetTruncated))

	resp, msgs = get(`{"count":20,"ackmode":"ack_requeue_false","encoding":"base64"}`)
	require.Len(t, msgs, 16)
	require.NotEmpty(t, resp.Header.Get(httpapi.HeaderGetTruncated))
	require.Equal(t, n-16, queueLen(t, b, "big"), "only what was answered was taken")
}

// A client that sends /management requests without ever attaching the
// response link gets its request link detached with
// amqp:resource-limit-exceeded once the held responses reach the bound;
// the failed requests' 60 KB paths are logged clipped, and no more than a
// burst of them.
func TestManagementHeldResponsesAreBounded(t *testing.T) {
	logs := &syncBuffer{}
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	s := session(t, dial(t, b, nil))
	snd, err := s.NewSender(ctxT(t), "/management", &amqp.SenderOptions{Name: "mgmt", SettlementMode: amqp.SenderSettleModeUnsettled.Ptr()})
	require.NoError(t, err)
	path := "/unknown/" + strings.Repeat("x", 60_000) // the 400 answer quotes it
	subject := "GET"
	var sendErr error
	sent := 0
	for range 100 { // 6 MB of responses without a bound; the bound is 1 MiB
		m := &amqp.Message{Properties: &amqp.MessageProperties{MessageID: uint64(sent), To: &path, Subject: &subject, ReplyTo: ptr("$me")}}
		if sendErr = snd.Send(ctxT(t), m, nil); sendErr != nil {
			break
		}
		sent++
	}
	require.Error(t, sendErr, "no bound: all %d requests were taken", sent)
	var le *amqp.LinkError
	require.ErrorAs(t, sendErr, &le)
	require.NotNil(t, le.RemoteErr, "%v", sendErr)
	require.Equal(t, amqp.ErrCond("amqp:resource-limit-exceeded"), le.RemoteErr.Condition)
	require.Less(t, sent, 30, "about 1 MiB of 60 KB responses")

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	failed := 0
	for _, l := range lines {
		if strings.Contains(l, "management request failed") {
			failed++
			require.Less(t, len(l), 4096, "a logged path is clipped")
		}
	}
	require.Positive(t, failed)
	require.LessOrEqual(t, failed, 10, "a burst of failures, then silence")
}

// properties.user-id must name the authenticated user (RabbitMQ's
// validated user-id): bob claiming "admin" gets his link detached with
// amqp:unauthorized-access and nothing is enqueued; his own name passes,
// and a user with the impersonator tag may claim any.
func TestUserIDMustMatchTheAuthenticatedUser(t *testing.T) {
	defs := `{"users": [{"name": "bob", "password": "pw", "tags": []},
	    {"name": "relay", "password": "pw", "tags": ["impersonator"]}],
	  "permissions": [{"user": "bob", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
	    {"user": "relay", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
	  "queues": [{"name": "q", "vhost": "/", "durable": true, "arguments": {}}]}`
	b := startBroker(t, defs)
	asUser := func(user string) *amqp.Sender {
		c, err := amqp.Dial(ctxT(t), "amqp://"+user+":pw@"+b.Addr().String(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return sender(t, session(t, c), "/queues/q", nil)
	}
	claim := func(id string) *amqp.Message {
		m := msg("as " + id)
		m.Properties = &amqp.MessageProperties{UserID: []byte(id)}
		return m
	}
	bob := asUser("bob")
	require.IsType(t, &amqp.StateAccepted{}, send(t, bob, claim("bob")))
	require.IsType(t, &amqp.StateAccepted{}, send(t, bob, msg("no claim")))
	err := bob.Send(ctxT(t), claim("admin"), nil)
	require.Error(t, err)
	var le *amqp.LinkError
	require.ErrorAs(t, err, &le)
	require.NotNil(t, le.RemoteErr, "%v", err)
	require.Equal(t, amqp.ErrCond("amqp:unauthorized-access"), le.RemoteErr.Condition)
	require.Contains(t, le.RemoteErr.Description, "user_id property set to 'admin' but authenticated user was 'bob'")
	require.Equal(t, 2, queueLen(t, b, "q"))

	relay := asUser("relay")
	require.IsType(t, &amqp.StateAccepted{}, send(t, relay, claim("admin")))
	require.Equal(t, 3, queueLen(t, b, "q"))
}

// The HTTP API is for users with a management tag (management,
// policymaker, monitoring or administrator), as in RabbitMQ: a user with
// permissions but no tag is refused 401 "Not management user" everywhere.
func TestHTTPNeedsAManagementTag(t *testing.T) {
	defs := `{"users": [{"name": "app", "password": "pw", "tags": []},
	    {"name": "ops", "password": "pw", "tags": ["management"]}],
	  "permissions": [{"user": "app", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
	    {"user": "ops", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
	  "queues": [{"name": "q", "vhost": "/", "durable": true, "arguments": {}}]}`
	b := startBroker(t, defs, withHTTP)
	base := apiServer(t, b)
	for _, p := range []string{"/api/overview", "/api/queues", "/api/bindings", "/api/queues/%2f/q"} {
		st, out := apiCallAs(t, base, "app", "pw", "GET", p, "")
		require.Equal(t, http.StatusUnauthorized, st, "%s: %s", p, out)
		require.Contains(t, string(out), "Not management user")
		st, out = apiCallAs(t, base, "ops", "pw", "GET", p, "")
		require.Equal(t, http.StatusOK, st, "%s: %s", p, out)
	}
}

// Queue, exchange and vhost names are at most 255 bytes of valid UTF-8
// without NUL, wherever they come in: HTTP, definitions, AMQP addresses
// (the /management node goes through the same declarations). Nothing
// refused is created or stored.
func TestNamesAreValidatedEverywhere(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	long := strings.Repeat("v", 70_000)
	for _, p := range []string{
		"/api/vhosts/" + long,
		"/api/vhosts/a%00b",
		"/api/queues/%2f/a%00b",
		"/api/queues/%2f/%FF%FE",
		"/api/queues/%2f/" + strings.Repeat("q", 256),
		"/api/exchanges/%2f/x%00",
		"/api/exchanges/%2f/" + strings.Repeat("x", 256),
	} {
		st, out := apiCall(t, base, "PUT", p, map[string]any{"type": "direct"})
		require.Equal(t, http.StatusBadRequest, st, "%.80s: %s", p, out)
	}
	api(t, base, "PUT", "/api/queues/%2f/"+strings.Repeat("q", 255), nil, http.StatusCreated)
	for _, defs := range []string{
		`{"vhosts":[{"name":"` + long + `"}]}`,
		`{"queues":[{"name":"a\u0000b","vhost":"/","durable":true,"arguments":{}}]}`,
		`{"exchanges":[{"name":"x\u0000","vhost":"/","type":"direct","durable":true,"arguments":{}}]}`,
	} {
		st, out := apiCall(t, base, "POST", "/api/definitions", defs)
		require.Equal(t, http.StatusBadRequest, st, "%.80s: %s", defs, out)
	}
	require.Equal(t, []string{"/"}, b.Router().VHosts())
	vh := rootVHost(t, b)
	require.Len(t, vh.Queues(), 1)

	s := session(t, dial(t, b, nil))
	for _, addr := range []string{"/queues/a%00b", "/queues/%FF", "/queues/" + strings.Repeat("q", 256), "/exchanges/x%00"} {
		_, err := s.NewSender(ctxT(t), addr, nil)
		require.Error(t, err, "%.80s", addr)
		require.Equal(t, amqp.ErrCond("amqp:invalid-field"), amqpErr(t, err).Condition, "%.80s: %v", addr, err)
	}
	_, err := s.NewReceiver(ctxT(t), "/queues/"+strings.Repeat("q", 256), nil)
	require.Error(t, err)
	require.Equal(t, amqp.ErrCond("amqp:invalid-field"), amqpErr(t, err).Condition)
}
