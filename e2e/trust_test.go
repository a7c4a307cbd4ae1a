package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/management"
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
		b := startBroker(t, "", func(o *epitaph.Options) { o.HTTPListen = net.JoinHostPort(ip.String(), "0") })
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
	h := management.NewHTTPHandler(management.HTTPOptions{Router: b.Router()})
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
	require.True(t, b.Router().Alarms().Memory, "a 1-byte watermark is exceeded")
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
