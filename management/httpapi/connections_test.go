package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/router"
)

// fixedConnections is a registry holding the connections the test gives
// it, recording what Close was asked.
type fixedConnections struct {
	mu     sync.Mutex
	conns  []Connection
	closed map[string]string
}

func (f *fixedConnections) List() []Connection {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Connection(nil), f.conns...)
}

func (f *fixedConnections) Close(name, reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.conns {
		if c.Name == name {
			f.closed[name] = reason
			f.conns = append(f.conns[:i], f.conns[i+1:]...)
			return true
		}
	}
	return false
}

func (f *fixedConnections) Sessions(_ context.Context, name string) ([]Session, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		if c.Name == name {
			return []Session{{Channel: 1, HandleMax: 255, IncomingLinks: []SessionLink{{Handle: 0, Name: "pub",
				SndSettleMode: "unsettled", Credit: 10}}, OutgoingLinks: []SessionLink{{Handle: 1, Name: "sub", Queue: "q",
				DeliveryCount: 3, Credit: 7}}}}, true
		}
	}
	return nil, false
}

func connectionsServer(t *testing.T, conns *fixedConnections) *testEnv {
	t.Helper()
	b := router.New(router.Options{})
	t.Cleanup(b.Close)
	users := auth.New(b)
	users.SeedDefaults()
	srv := httptest.NewServer(NewHandler(Options{Router: b, Auth: users, Connections: conns}))
	t.Cleanup(srv.Close)
	return &testEnv{b: b, users: users, srv: srv}
}

func TestConnectionJSONFields(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	conns := &fixedConnections{closed: map[string]string{}, conns: []Connection{{
		Name: "[::1]:40000 -> [::1]:5672", User: "guest", VHost: "/", ContainerID: "c-1", AuthMechanism: "ANONYMOUS",
		ClientProperties: amqp10.Map{{Key: amqp10.Symbol("product"), Value: "go-amqp"}},
		Peer:             netip.MustParseAddrPort("[::1]:40000"), Local: netip.MustParseAddrPort("[::1]:5672"),
		ChannelMax: 255, FrameMax: 65536, IdleTimeout: 60 * time.Second, ConnectedAt: at, Sessions: 3,
		RecvOctets: 10, SendOctets: 20, RecvCount: 1, SendCount: 2,
	}}}
	e := connectionsServer(t, conns)
	rows := decodeJSON[[]map[string]any](t, e.guest(t, "GET", "/api/connections", nil, http.StatusOK))
	require.Len(t, rows, 1)
	want := map[string]any{
		"name": "[::1]:40000 -> [::1]:5672", "node": management.NodeName(), "type": "network", "protocol": "AMQP 1-0",
		"state": "running", "user": "guest", "user_who_performed_action": "guest", "vhost": "/", "container_id": "c-1",
		"auth_mechanism": "ANONYMOUS", "client_properties": map[string]any{"product": "go-amqp"},
		"host": "::1", "port": float64(5672), "peer_host": "::1", "peer_port": float64(40000),
		"ssl": false, "ssl_protocol": nil, "ssl_key_exchange": nil, "ssl_cipher": nil, "ssl_hash": nil,
		"peer_cert_subject": nil, "peer_cert_issuer": nil, "peer_cert_validity": nil,
		"channels": float64(3), "channel_max": float64(255), "frame_max": float64(65536), "timeout": float64(60),
		"connected_at": float64(1_700_000_000_123),
		"recv_oct":     float64(10), "recv_oct_details": map[string]any{"rate": float64(0)}, "recv_cnt": float64(1),
		"send_oct": float64(20), "send_oct_details": map[string]any{"rate": float64(0)}, "send_cnt": float64(2),
		"send_pend": float64(0),
	}
	assert.Equal(t, want, rows[0])

	one := decodeJSON[map[string]any](t, e.guest(t, "GET", "/api/connections/%5B%3A%3A1%5D%3A40000%20-%3E%20%5B%3A%3A1%5D%3A5672", nil, http.StatusOK))
	assert.Equal(t, want["name"], one["name"])
}

func TestConnectionRates(t *testing.T) {
	var rs rateSampler
	t0 := time.Unix(1000, 0)
	c := Connection{Name: "a", ConnectedAt: t0, RecvOctets: 100, SendOctets: 1000}
	k := rateKey{"a", t0}
	assert.Equal(t, [2]float64{0, 0}, rs.rates([]Connection{c}, t0)[k], "no earlier sample: 0")
	c.RecvOctets, c.SendOctets = 300, 5000
	assert.Equal(t, [2]float64{0, 0}, rs.rates([]Connection{c}, t0.Add(rateInterval/2))[k], "too soon: the last rates")
	assert.Equal(t, [2]float64{100, 2000}, rs.rates([]Connection{c}, t0.Add(2*time.Second))[k])
	assert.Equal(t, [2]float64{100, 2000}, rs.rates([]Connection{c}, t0.Add(2*time.Second))[k], "kept until the next sample")
	rs.rates(nil, t0.Add(3*time.Second))
	assert.Empty(t, rs.samples, "a connection that is gone is forgotten")
}

func TestCloseConnectionPassesReason(t *testing.T) {
	conns := &fixedConnections{closed: map[string]string{}, conns: []Connection{
		{Name: "x", User: "guest", VHost: "/"}, {Name: "y", User: "guest", VHost: "/"}}}
	e := connectionsServer(t, conns)
	req, err := http.NewRequestWithContext(t.Context(), "DELETE", e.srv.URL+"/api/connections/x", nil)
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("X-Reason", "because")
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	e.guest(t, "DELETE", "/api/connections/y", nil, http.StatusNoContent)
	assert.Equal(t, map[string]string{"x": "because", "y": defaultCloseReason}, conns.closed)
	e.guest(t, "DELETE", "/api/connections/y", nil, http.StatusNotFound)
	e.guest(t, "GET", "/api/connections/y/channels", nil, http.StatusNotFound)
	e.guest(t, "GET", "/api/connections/y/sessions", nil, http.StatusNotFound)
}

func TestConnectionSessionsJSON(t *testing.T) {
	conns := &fixedConnections{closed: map[string]string{}, conns: []Connection{{Name: "x", User: "guest", VHost: "/"}}}
	e := connectionsServer(t, conns)
	got := string(e.guest(t, "GET", "/api/connections/x/sessions", nil, http.StatusOK))
	assert.JSONEq(t, `[{"channel_number": 1, "handle_max": 255, "next_incoming_id": 0, "incoming_window": 0,
		"next_outgoing_id": 0, "remote_incoming_window": 0, "outgoing_unsettled_deliveries": 0,
		"incoming_links": [{"handle": 0, "link_name": "pub", "snd_settle_mode": "unsettled", "delivery_count": 0,
			"credit": 10, "unconfirmed_messages": 0}],
		"outgoing_links": [{"handle": 1, "link_name": "sub", "queue_name": "q", "send_settled": false,
			"delivery_count": 3, "credit": 7, "filter": []}]}]`, got)
}

// Without a registry (an embedding without AMQP listener) the lists are empty.
func TestConnectionsWithoutRegistry(t *testing.T) {
	e := newTestEnv(t)
	assert.JSONEq(t, "[]", string(e.guest(t, "GET", "/api/connections", nil, http.StatusOK)))
	assert.JSONEq(t, "[]", string(e.guest(t, "GET", "/api/vhosts/%2F/connections", nil, http.StatusOK)))
	assert.JSONEq(t, "[]", string(e.guest(t, "GET", "/api/channels", nil, http.StatusOK)))
	e.guest(t, "GET", "/api/connections/x", nil, http.StatusNotFound)
	e.guest(t, "DELETE", "/api/connections/x", nil, http.StatusNotFound)
}
