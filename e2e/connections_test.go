package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// Connections over the management HTTP API, as RabbitMQ 4.3's management
// plugin shows and closes them; the official client's recovery specs drive
// this API the same way.

const connPassword = "conn-pw"

// connUsers are users with every management tag that matters here, all
// with full permissions on "/".
const connUsers = `{
  "vhosts": [{"name": "/"}, {"name": "other"}],
  "users": [
    {"name": "guest", "password": "guest", "tags": ["administrator"]},
    {"name": "admin", "password": "conn-pw", "tags": ["administrator"]},
    {"name": "mon", "password": "conn-pw", "tags": ["monitoring"]},
    {"name": "alice", "password": "conn-pw", "tags": ["management"]},
    {"name": "bob", "password": "conn-pw", "tags": ["management"]}
  ],
  "permissions": [
    {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "admin", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "mon", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "alice", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "bob", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "bob", "vhost": "other", "configure": ".*", "write": ".*", "read": ".*"}
  ]
}`

// closeWithReason closes a connection over the API as guest, with an
// X-Reason header, and returns the status and body.
func closeWithReason(t *testing.T, base, name, reason string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), "DELETE", base+"/api/connections/"+url.PathEscape(name), nil)
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("X-Reason", reason)
	return httpDo(t, req)
}

// dialAs opens a go-amqp connection as user over a socket of our own, so
// the test knows the connection's name, "LOCAL -> BROKER" as the broker
// sees it.
func dialAs(t *testing.T, b *epitaph.Broker, user, vhost string, opts *amqp.ConnOptions) (*amqp.Conn, string) {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	if opts == nil {
		opts = &amqp.ConnOptions{}
	}
	password := connPassword
	if user == "guest" {
		password = "guest"
	}
	opts.SASLType = amqp.SASLTypePlain(user, password)
	opts.HostName = "vhost:" + vhost
	c, err := amqp.NewConn(ctxT(t), nc, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, nc.LocalAddr().String() + " -> " + nc.RemoteAddr().String()
}

func connectionNames(t *testing.T, rows []map[string]any) []string {
	t.Helper()
	var names []string
	for _, r := range rows {
		names = append(names, r["name"].(string))
	}
	return names
}

func TestHTTPConnectionsListShowAndClose(t *testing.T) {
	b := startBroker(t, connUsers, withHTTP)
	base := apiServer(t, b)
	c, name := dialAs(t, b, "alice", "/", &amqp.ConnOptions{ContainerID: "alice-container", MaxFrameSize: 32768,
		Properties: map[string]any{"connection_name": "orders-service"}})
	s := session(t, c)
	declareQueue(t, b, "conn-q", "classic", nil)
	sender(t, s, "/queues/conn-q", nil)
	s2, err := c.NewSession(ctxT(t), nil)
	require.NoError(t, err)
	receiver(t, s2, "/queues/conn-q", &amqp.ReceiverOptions{Name: "conn-q-reader", Credit: 7})

	var row map[string]any
	eventually(t, "the connection shows its two sessions", func() bool {
		st, out := apiCallAs(t, base, "guest", "guest", "GET", "/api/connections", "")
		require.Equal(t, http.StatusOK, st, "%s", out)
		rows := apiJSON[[]map[string]any](t, out)
		require.Len(t, rows, 1, "%s", out)
		row = rows[0]
		return row["channels"] == float64(2)
	})
	local, remote, _ := strings.Cut(name, " -> ")
	lhost, lport, _ := net.SplitHostPort(local)
	rhost, rport, _ := net.SplitHostPort(remote)
	assert.Equal(t, name, row["name"])
	assert.Equal(t, "alice", row["user"])
	assert.Equal(t, "/", row["vhost"])
	assert.Equal(t, "alice-container", row["container_id"])
	assert.Equal(t, "AMQP 1-0", row["protocol"])
	assert.Equal(t, "network", row["type"])
	assert.Equal(t, "running", row["state"])
	assert.Equal(t, "PLAIN", row["auth_mechanism"])
	assert.Equal(t, false, row["ssl"])
	assert.Equal(t, float64(32768), row["frame_max"], "the client's max-frame-size, which bounds what the broker sends")
	assert.Equal(t, float64(60), row["timeout"], "the broker's idle-timeout, in seconds")
	assert.Equal(t, lhost, row["peer_host"])
	assert.Equal(t, lport, fmt.Sprint(row["peer_port"]))
	assert.Equal(t, rhost, row["host"])
	assert.Equal(t, rport, fmt.Sprint(row["port"]))
	assert.Equal(t, "orders-service", row["client_properties"].(map[string]any)["connection_name"])
	assert.Greater(t, row["recv_oct"].(float64), float64(0))
	assert.Greater(t, row["send_oct"].(float64), float64(0))
	assert.Contains(t, row, "recv_oct_details")
	assert.Contains(t, row["send_oct_details"], "rate")
	assert.InDelta(t, float64(time.Now().UnixMilli()), row["connected_at"].(float64), float64(time.Minute.Milliseconds()))
	overview := apiJSON[map[string]any](t, api(t, base, "GET", "/api/overview", nil, http.StatusOK))
	assert.Equal(t, overview["node"], row["node"], "one node name")

	path := "/api/connections/" + url.PathEscape(name)
	st, out := apiCallAs(t, base, "guest", "guest", "GET", path, "")
	require.Equal(t, http.StatusOK, st, "%s", out)
	assert.Equal(t, name, apiJSON[map[string]any](t, out)["name"])
	// go-amqp grants the reader's credit in a flow after the attach, which
	// may reach the broker after NewReceiver has returned.
	var sessions []map[string]any
	eventually(t, "the reader's credit reaches the broker", func() bool {
		st, out = apiCallAs(t, base, "guest", "guest", "GET", path+"/sessions", "")
		require.Equal(t, http.StatusOK, st, "%s", out)
		sessions = apiJSON[[]map[string]any](t, out)
		require.Len(t, sessions, 2, "%s", out)
		links, _ := sessions[1]["outgoing_links"].([]any)
		return len(links) == 1 && links[0].(map[string]any)["credit"] == float64(7)
	})
	assert.Equal(t, float64(0), sessions[0]["channel_number"])
	require.Len(t, sessions[0]["incoming_links"], 1, "%s", out)
	assert.Equal(t, "mixed", sessions[0]["incoming_links"].([]any)[0].(map[string]any)["snd_settle_mode"], "go-amqp leaves snd-settle-mode out: mixed")
	require.Len(t, sessions[1]["outgoing_links"], 1, "%s", out)
	reader := sessions[1]["outgoing_links"].([]any)[0].(map[string]any)
	assert.Equal(t, "conn-q-reader", reader["link_name"])
	assert.Equal(t, "conn-q", reader["queue_name"])
	assert.Equal(t, float64(7), reader["credit"])
	st, out = apiCallAs(t, base, "guest", "guest", "GET", "/api/vhosts/%2F/connections", "")
	require.Equal(t, http.StatusOK, st, "%s", out)
	assert.Equal(t, []string{name}, connectionNames(t, apiJSON[[]map[string]any](t, out)))
	st, out = apiCallAs(t, base, "guest", "guest", "GET", "/api/vhosts/other/connections", "")
	require.Equal(t, http.StatusForbidden, st, "guest has no permission on other: %s", out)
	st, out = apiCallAs(t, base, "guest", "guest", "GET", "/api/channels", "")
	require.Equal(t, http.StatusOK, st, "%s", out)
	assert.JSONEq(t, "[]", string(out), "AMQP 1.0 sessions are not channels, as in RabbitMQ 4")

	st, out = closeWithReason(t, base, name, "maintenance window")
	require.Equal(t, http.StatusNoContent, st, "%s", out)
	select {
	case <-c.Done():
	case <-ctxT(t).Done():
		t.Fatal("the connection was not closed")
	}
	var ce *amqp.ConnError
	require.ErrorAs(t, c.Err(), &ce)
	require.NotNil(t, ce.RemoteErr, "closed by the broker with an error")
	assert.Equal(t, amqp.ErrCond("amqp:internal-error"), ce.RemoteErr.Condition)
	assert.Equal(t, `Connection forced: "maintenance window"`, ce.RemoteErr.Description)
	eventually(t, "the closed connection leaves the list", func() bool {
		_, out := apiCallAs(t, base, "guest", "guest", "GET", "/api/connections", "")
		return len(apiJSON[[]map[string]any](t, out)) == 0
	})
	st, _ = apiCallAs(t, base, "guest", "guest", "GET", path, "")
	assert.Equal(t, http.StatusNotFound, st)
	st, _ = apiCallAs(t, base, "guest", "guest", "DELETE", path, "")
	assert.Equal(t, http.StatusNotFound, st)
}

// The default reason, when DELETE carries no X-Reason, is RabbitMQ's.
func TestHTTPConnectionCloseDefaultReason(t *testing.T) {
	b := startBroker(t, connUsers, withHTTP)
	base := apiServer(t, b)
	c, name := dialAs(t, b, "guest", "/", nil)
	eventually(t, "the connection is listed", func() bool {
		_, out := apiCallAs(t, base, "guest", "guest", "GET", "/api/connections", "")
		return len(apiJSON[[]map[string]any](t, out)) == 1
	})
	st, out := apiCallAs(t, base, "guest", "guest", "DELETE", "/api/connections/"+url.PathEscape(name), "")
	require.Equal(t, http.StatusNoContent, st, "%s", out)
	<-c.Done()
	var ce *amqp.ConnError
	require.ErrorAs(t, c.Err(), &ce)
	require.NotNil(t, ce.RemoteErr)
	assert.Equal(t, `Connection forced: "Closed via management plugin"`, ce.RemoteErr.Description)
}

// RabbitMQ's rules: administrator and monitoring users see every
// connection, others their own; only administrators close others'
// connections (is_authorized_user, filter_conn_ch_list).
func TestHTTPConnectionsPermissions(t *testing.T) {
	b := startBroker(t, connUsers, withHTTP)
	base := apiServer(t, b)
	_, alice := dialAs(t, b, "alice", "/", nil)
	bobConn, bob := dialAs(t, b, "bob", "other", nil)
	list := func(user string) []string {
		st, out := apiCallAs(t, base, user, connPassword, "GET", "/api/connections", "")
		require.Equal(t, http.StatusOK, st, "%s", out)
		return connectionNames(t, apiJSON[[]map[string]any](t, out))
	}
	eventually(t, "both connections are listed", func() bool { return len(list("admin")) == 2 })
	assert.ElementsMatch(t, []string{alice, bob}, list("mon"))
	assert.Equal(t, []string{alice}, list("alice"))
	assert.Equal(t, []string{bob}, list("bob"))
	st, out := apiCallAs(t, base, "bob", connPassword, "GET", "/api/vhosts/other/connections", "")
	require.Equal(t, http.StatusOK, st, "%s", out)
	assert.Equal(t, []string{bob}, connectionNames(t, apiJSON[[]map[string]any](t, out)))

	bobPath := "/api/connections/" + url.PathEscape(bob)
	for _, tc := range []struct {
		user, method string
		want         int
	}{
		{"alice", "GET", http.StatusUnauthorized},
		{"alice", "DELETE", http.StatusUnauthorized},
		{"mon", "GET", http.StatusOK},
		{"mon", "DELETE", http.StatusUnauthorized}, // monitoring sees, but does not close
		{"bob", "GET", http.StatusOK},
	} {
		st, out := apiCallAs(t, base, tc.user, connPassword, tc.method, bobPath, "")
		assert.Equal(t, tc.want, st, "%s %s as %s: %s", tc.method, bobPath, tc.user, out)
	}
	st, out = apiCallAs(t, base, "alice", connPassword, "GET", bobPath+"/sessions", "")
	assert.Equal(t, http.StatusUnauthorized, st, "another user's sessions: %s", out)
	st, out = apiCallAs(t, base, "mon", connPassword, "GET", bobPath+"/sessions", "")
	assert.Equal(t, http.StatusOK, st, "monitoring sees any connection's sessions: %s", out)
	st, out = apiCallAs(t, base, "alice", connPassword, "GET", "/api/connections/"+url.PathEscape("1.2.3.4:5 -> 6.7.8.9:10"), "")
	assert.Equal(t, http.StatusUnauthorized, st, "a missing connection is not revealed to a non-monitor: %s", out)
	st, _ = apiCallAs(t, base, "mon", connPassword, "GET", "/api/connections/"+url.PathEscape("1.2.3.4:5 -> 6.7.8.9:10"), "")
	assert.Equal(t, http.StatusNotFound, st)

	st, out = apiCallAs(t, base, "bob", connPassword, "DELETE", bobPath, "")
	require.Equal(t, http.StatusNoContent, st, "a user closes its own connection: %s", out)
	<-bobConn.Done()
	st, out = apiCallAs(t, base, "admin", connPassword, "DELETE", "/api/connections/"+url.PathEscape(alice), "")
	require.Equal(t, http.StatusNoContent, st, "an administrator closes any: %s", out)
	eventually(t, "both connections are gone", func() bool { return len(list("admin")) == 0 })
}

// The official client's connection-recovery spec, as it runs against
// RabbitMQ: find the connection by container id over the HTTP API, close
// it there, and see the client report "Connection forced", reconnect, and
// publish again.
func TestRabbitMQClientRecoversFromHTTPClose(t *testing.T) {
	b := startBroker(t, connUsers, withHTTP)
	base := apiServer(t, b)
	const container = "recovery-under-test"
	env := rmq.NewEnvironment("amqp://guest:guest@"+b.Addr().String()+"/", &rmq.AmqpConnOptions{
		SASLType:    amqp.SASLTypePlain("guest", "guest"),
		ContainerID: container,
		RecoveryConfiguration: &rmq.RecoveryConfiguration{ActiveRecovery: true,
			BackOffReconnectInterval: 1100 * time.Millisecond, MaxReconnectAttempts: 10},
	})
	conn, err := env.NewConnection(ctxT(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = env.CloseConnections(ctx)
	})
	changes := make(chan *rmq.StateChanged, 8)
	conn.NotifyStatusChange(changes)
	_, err = conn.Management().DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "recovered"})
	require.NoError(t, err)
	pub, err := conn.NewPublisher(ctxT(t), &rmq.QueueAddress{Queue: "recovered"}, nil)
	require.NoError(t, err)

	byContainer := func() string {
		_, out := apiCallAs(t, base, "guest", "guest", "GET", "/api/connections/", "")
		for _, row := range apiJSON[[]map[string]any](t, out) {
			if row["container_id"] == container {
				return row["name"].(string)
			}
		}
		return ""
	}
	name := byContainer()
	require.NotEmpty(t, name)
	st, out := apiCallAs(t, base, "guest", "guest", "DELETE", "/api/connections/"+name, "")
	require.Equal(t, http.StatusNoContent, st, "the client's unescaped name works: %s", out)

	next := func() *rmq.StateChanged {
		select {
		case ch := <-changes:
			return ch
		case <-ctxT(t).Done():
			t.Fatal("no state change")
			return nil
		}
	}
	closed := next()
	require.IsType(t, &rmq.StateClosed{}, closed.To)
	require.ErrorContains(t, closed.To.(*rmq.StateClosed).GetError(), "Connection forced")
	require.IsType(t, &rmq.StateReconnecting{}, next().To)
	require.IsType(t, &rmq.StateOpen{}, next().To)
	eventually(t, "the recovered connection is listed again", func() bool {
		n := byContainer()
		return n != "" && n != name
	})
	res, err := pub.Publish(ctxT(t), amqp.NewMessage([]byte("after recovery")))
	require.NoError(t, err)
	require.Equal(t, &rmq.StateAccepted{}, res.Outcome)
}

// The node a queue's leader names over /management is the node the HTTP
// API reports.
func TestNodeNameSameOverBothAPIs(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	conn := rmqConnect(t, b, "guest", "guest")
	info, err := conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "where"})
	require.NoError(t, err)
	overview := apiJSON[map[string]any](t, api(t, base, "GET", "/api/overview", nil, http.StatusOK))
	assert.Equal(t, overview["node"], info.Leader())
	assert.Equal(t, []string{info.Leader()}, info.Members())
	q := apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2F/where", nil, http.StatusOK))
	assert.Equal(t, overview["node"], q["node"])
	assert.True(t, strings.HasPrefix(info.Leader(), "epitaph@"), info.Leader())
}

// rabbitmqctl's list_connections and close_connection, by name.
func TestEpitaphctlConnections(t *testing.T) {
	b := startBroker(t, connUsers, withHTTP)
	base := apiServer(t, b)
	c, name := dialAs(t, b, "alice", "/", nil)
	var rows []map[string]any
	eventually(t, "list_connections shows the connection", func() bool {
		rows = ctlJSON[[]map[string]any](t, base, "list_connections")
		return len(rows) == 1
	})
	assert.Equal(t, name, rows[0]["name"])
	assert.Equal(t, "alice", rows[0]["user"])
	assert.Equal(t, "running", rows[0]["state"])
	table := ctlOK(t, base, "list_connections", "name", "container_id", "protocol")
	assert.Contains(t, table, name)
	assert.Contains(t, table, "AMQP 1-0")

	_, errOut, code := ctl(t, base, "", "close_connection", "1.2.3.4:5 -> 6.7.8.9:10")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "404")
	_, errOut, code = ctl(t, base, "", "close_connection")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "close_connection takes NAME [REASON]")

	out := ctlOK(t, base, "close_connection", name, "go home")
	assert.Contains(t, out, name)
	<-c.Done()
	var ce *amqp.ConnError
	require.ErrorAs(t, c.Err(), &ce)
	require.NotNil(t, ce.RemoteErr)
	assert.Equal(t, `Connection forced: "go home"`, ce.RemoteErr.Description)
}
