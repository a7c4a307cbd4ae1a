package interop

// AMQP 0-9-1 interop: pika (python3-pika), amqplib (npm) and the RabbitMQ
// Java client (librabbitmq-client-java) against epitaph's 0-9-1 front end,
// on the port AMQP 1.0 uses; and dead letters that cross protocols, read
// with go-amqp on one side and a 0-9-1 client on the other, checked against
// RabbitMQ 4.3's conversion (field types included).
//
// Each test starts an in-process broker. EPITAPH_INTEROP091_URL
// (amqp://host:port) points the tests at a running broker instead, to check
// the harness itself against RabbitMQ; EPITAPH_INTEROP091_LEGACY_ADDRESSES=1
// makes go-amqp use /amq/queue/NAME addresses, for RabbitMQ 3.x.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// broker091 is where a 0-9-1 test talks to: host and port, both protocols.
type broker091 struct {
	host, port string
	legacy     bool // go-amqp addresses /amq/queue/NAME (RabbitMQ 3.x)
}

// startBroker091 starts an in-process epitaph (or takes
// EPITAPH_INTEROP091_URL) for one test.
func startBroker091(t *testing.T) broker091 {
	t.Helper()
	if u := os.Getenv("EPITAPH_INTEROP091_URL"); u != "" {
		pu, err := url.Parse(u)
		require.NoError(t, err)
		return broker091{host: pu.Hostname(), port: pu.Port(), legacy: os.Getenv("EPITAPH_INTEROP091_LEGACY_ADDRESSES") == "1"}
	}
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "", true
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	host, port, err := net.SplitHostPort(b.Addr().String())
	require.NoError(t, err)
	return broker091{host: host, port: port}
}

func (b broker091) url091() string {
	return "amqp://guest:guest@" + net.JoinHostPort(b.host, b.port) + "/"
}

// address10 is go-amqp's address of queue q.
func (b broker091) address10(q string) string {
	if b.legacy {
		return "/amq/queue/" + q
	}
	return "/queues/" + url.PathEscape(q)
}

// uniqueName gives each test its own queues, so that a rerun against a
// long-running broker starts empty.
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// topology091 declares queues and exchanges over AMQP 0-9-1 with
// amqp091-go and deletes them when the test ends. It is set-up only: what
// is tested is the other clients' view.
type topology091 struct {
	t    *testing.T
	conn *amqp091.Connection
	ch   *amqp091.Channel
}

func newTopology091(t *testing.T, b broker091) *topology091 {
	t.Helper()
	conn, err := amqp091.Dial(b.url091())
	require.NoError(t, err, "amqp091-go dial")
	ch, err := conn.Channel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &topology091{t: t, conn: conn, ch: ch}
}

func (tp *topology091) queue(name string, args amqp091.Table) {
	tp.t.Helper()
	_, err := tp.ch.QueueDeclare(name, true, false, false, false, args)
	require.NoError(tp.t, err, "declare queue %s", name)
	tp.t.Cleanup(func() { _, _ = tp.ch.QueueDelete(name, false, false, false) })
}

func (tp *topology091) exchange(name, kind string) {
	tp.t.Helper()
	require.NoError(tp.t, tp.ch.ExchangeDeclare(name, kind, true, false, false, false, nil), "declare exchange %s", name)
	tp.t.Cleanup(func() { _ = tp.ch.ExchangeDelete(name, false, false) })
}

func (tp *topology091) bind(queue, key, exchange string) {
	tp.t.Helper()
	require.NoError(tp.t, tp.ch.QueueBind(queue, key, exchange, false, nil), "bind %s to %s", queue, exchange)
}

// waitQueue polls the queue (a passive declare, on a channel of its own
// since a missing queue closes the channel) until ok says so.
func (tp *topology091) waitQueue(queue, what string, ok func(q amqp091.Queue) bool) {
	tp.t.Helper()
	deadline := time.Now().Add(probeTimeout)
	var last string
	for {
		ch, err := tp.conn.Channel()
		require.NoError(tp.t, err)
		q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err == nil {
			_ = ch.Close()
			if ok(q) {
				return
			}
			last = "messages " + strconv.Itoa(q.Messages) + ", consumers " + strconv.Itoa(q.Consumers)
		} else {
			last = err.Error()
		}
		require.True(tp.t, time.Now().Before(deadline), "queue %s: want %s, have %s", queue, what, last)
		time.Sleep(20 * time.Millisecond)
	}
}

// waitConsumers polls until queue exists with n consumers.
func (tp *topology091) waitConsumers(queue string, n int) {
	tp.t.Helper()
	tp.waitQueue(queue, strconv.Itoa(n)+" consumers", func(q amqp091.Queue) bool { return q.Consumers == n })
}

// waitMessages polls until queue exists with n ready messages.
func (tp *topology091) waitMessages(queue string, n int) {
	tp.t.Helper()
	tp.waitQueue(queue, strconv.Itoa(n)+" messages", func(q amqp091.Queue) bool { return q.Messages == n })
}

// ---- the 0-9-1 clients ----

// client091 runs one of the 0-9-1 probes.
type client091 struct {
	name string   // pika, amqplib, java
	cmd  []string // interpreter and script
	// argv, when set, builds the command line of an operation instead (the
	// Java probe, which has only get)
	argv func(b broker091, op string, args []string) []string
}

func pika(t *testing.T) client091 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), probeTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, pythonPath, "-c", "import pika").CombinedOutput(); err != nil {
		need(t, "python3-pika not importable by "+pythonPath+": "+strings.TrimSpace(string(out)),
			"apt-get install -y python3-pika")
	}
	return client091{name: "pika", cmd: []string{pythonPath, "pika_probe091.py"}}
}

func amqplib(t *testing.T) client091 {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node not found", "install Node.js 20, then `cd e2e/interop && npm ci`")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "amqplib", "package.json")); err != nil {
		need(t, "amqplib not installed", "run `cd e2e/interop && npm ci`")
	}
	return client091{name: "amqplib", cmd: []string{node, "amqplib_probe091.js"}}
}

// run runs the probe's operation op with args and returns its events. The
// probe must exit 0 and print only JSON lines, none of them a timeout or an
// error.
func (c client091) run(t *testing.T, b broker091, op string, args ...string) []event091 {
	t.Helper()
	all := append(append([]string{}, c.cmd[1:]...), "--host", b.host, "--port", b.port, "--op", op, "--timeout", "10")
	all = append(all, args...)
	if c.argv != nil {
		all = c.argv(b, op, args)
	}
	ctx, cancel := context.WithTimeout(t.Context(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.cmd[0], all...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("%s %s\nstdout:\n%s\nstderr:\n%s", c.name, strings.Join(all, " "), stdout.String(), stderr.String())
	require.NoError(t, ctx.Err(), "probe did not finish within %v", probeTimeout)
	var events []event091
	for _, line := range strings.Split(stdout.String(), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		var e event091
		if jerr := json.Unmarshal([]byte(line), &e); jerr != nil {
			t.Errorf("probe printed a non-JSON line %q: %v", line, jerr)
			continue
		}
		events = append(events, e)
	}
	for _, e := range events {
		require.NotEqual(t, "timeout", e.Event, "probe timed out at %s", e.Where)
		require.NotEqual(t, "error", e.Event, "probe error at %s: %v %v", e.Where, e.Error, e.Description)
	}
	require.NoError(t, err, "probe exit status")
	return events
}

// only returns the one event of kind, failing unless there is exactly one.
func only(t *testing.T, events []event091, kind string) event091 {
	t.Helper()
	var got []event091
	for _, e := range events {
		if e.Event == kind {
			got = append(got, e)
		}
	}
	require.Len(t, got, 1, "events %q", kind)
	return got[0]
}

// event091 is an event of a 0-9-1 probe, with its delivery.
type event091 struct {
	event
	Redelivered  bool         `json:"redelivered"`
	Seq          any          `json:"seq"`
	ReplyCode    int          `json:"reply_code"`
	ReplyText    string       `json:"reply_text"`
	Capabilities []string     `json:"capabilities"`
	Delivery     *delivery091 `json:"delivery"`
}

// delivery091 is a delivery as a 0-9-1 probe printed it.
type delivery091 struct {
	Exchange    string                `json:"exchange"`
	RoutingKey  string                `json:"routing_key"`
	Redelivered bool                  `json:"redelivered"`
	Body        string                `json:"body"`
	Properties  map[string]any        `json:"properties"`
	HeaderKeys  []string              `json:"header_keys"`
	Headers     map[string]typedValue `json:"headers"`
}

// typedValue is a decoded field value and the type the client decoded it
// to (pika: str, bytes, int, datetime, dict, list, bool, None; amqplib:
// string, number, Buffer, timestamp, object, array, boolean, null; Java:
// the class name).
type typedValue struct {
	Type  string          `json:"type"`
	Keys  []string        `json:"keys"`
	Value json.RawMessage `json:"value"`
}

func (v typedValue) str(t *testing.T) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(v.Value, &s), "value %s", v.Value)
	return s
}

func (v typedValue) num(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, json.Unmarshal(v.Value, &n), "value %s", v.Value)
	return n
}

func (v typedValue) list(t *testing.T) []typedValue {
	t.Helper()
	var l []typedValue
	require.NoError(t, json.Unmarshal(v.Value, &l), "value %s", v.Value)
	return l
}

func (v typedValue) table(t *testing.T) map[string]typedValue {
	t.Helper()
	var m map[string]typedValue
	require.NoError(t, json.Unmarshal(v.Value, &m), "value %s", v.Value)
	return m
}
