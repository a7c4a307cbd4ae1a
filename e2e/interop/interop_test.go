// Package interop runs third-party AMQP 1.0 clients (rhea for Node, Qpid
// Proton for Python) against an in-process epitaph broker. Each client runs
// a probe script that prints one JSON event per line; the tests assert the
// outcomes and the redelivery.
//
// Missing clients skip the tests unless EPITAPH_REQUIRE_INTEROP=1 (CI), in
// which case they fail.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// pythonPath is Debian's interpreter, which sees python3-qpid-proton; the
// python3 on PATH may be a pyenv shim that does not.
const pythonPath = "/usr/bin/python3"

// probeTimeout bounds a whole probe run; the probes give up after 10 s.
const probeTimeout = 30 * time.Second

// traceparent is the W3C trace context both probes send.
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// definitions declares the probes' queues, in RabbitMQ's definitions format.
const definitions = `{
  "vhosts": [{"name": "/"}],
  "queues": [
    {"name": "interop-rhea", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "classic"}},
    {"name": "interop-proton", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "classic"}}
  ]
}`

// event is one JSON line printed by a probe.
type event struct {
	Event                 string         `json:"event"`
	ID                    string         `json:"id"`
	Outcome               string         `json:"outcome"`
	Body                  any            `json:"body"`
	DeliveryCount         *float64       `json:"delivery_count"`
	FirstAcquirer         *bool          `json:"first_acquirer"`
	Annotations           map[string]any `json:"annotations"`
	ApplicationProperties map[string]any `json:"application_properties"`
	Where                 string         `json:"where"`
	Error                 any            `json:"error"`
	Description           any            `json:"description"`
}

// need skips the test, or fails it when EPITAPH_REQUIRE_INTEROP=1, because a
// client is missing.
func need(t *testing.T, why, fix string) {
	t.Helper()
	if os.Getenv("EPITAPH_REQUIRE_INTEROP") == "1" {
		t.Fatalf("%s (EPITAPH_REQUIRE_INTEROP=1): %s", why, fix)
	}
	t.Skipf("%s: %s", why, fix)
}

// startBroker starts an in-process broker on a free loopback port with the
// probes' queues declared, and returns its host and port.
func startBroker(t *testing.T) (host, port string) {
	t.Helper()
	b, err := epitaph.Start(epitaph.Options{
		Listen:      "127.0.0.1:0",
		InMemory:    true,
		Definitions: []byte(definitions),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	host, port, err = net.SplitHostPort(b.Addr().String())
	require.NoError(t, err)
	return host, port
}

// runProbe runs a probe to completion and returns its events. The probe must
// exit 0 and print only JSON lines.
func runProbe(t *testing.T, name string, args ...string) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("%s %s\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), stdout.String(), stderr.String())
	require.NoError(t, ctx.Err(), "probe did not finish within %v", probeTimeout)

	var events []event
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var e event
		if jerr := json.Unmarshal([]byte(line), &e); jerr != nil {
			t.Errorf("probe printed a non-JSON line %q: %v", line, jerr)
			continue
		}
		events = append(events, e)
	}
	for _, e := range events {
		require.NotEqual(t, "timeout", e.Event, "probe timed out")
		require.NotEqual(t, "error", e.Event, "probe error at %s: %v %v", e.Where, e.Error, e.Description)
	}
	require.NoError(t, err, "probe exit status")
	return events
}

// checkEvents asserts the publish/accept, publish/reject, publish/release/
// redeliver/accept sequence of a probe whose message ids are prefix-1..3.
func checkEvents(t *testing.T, events []event, prefix, client string) {
	t.Helper()
	id := func(n int) string { return prefix + "-" + string(rune('0'+n)) }

	var sent, consumer []event
	var messages []event
	for _, e := range events {
		switch e.Event {
		case "sent":
			sent = append(sent, e)
		case "accepted", "rejected", "released":
			consumer = append(consumer, e)
		case "message":
			messages = append(messages, e)
		}
	}
	require.NotEmpty(t, events)
	require.Equal(t, "open", events[0].Event)
	require.Equal(t, "closed", events[len(events)-1].Event)

	// The broker accepted every publish.
	require.Len(t, sent, 3)
	for i, e := range sent {
		require.Equal(t, id(i+1), e.ID)
		require.Equal(t, "accepted", e.Outcome)
	}

	// The consumer saw m1, m2, m3, m3 again, in that order.
	require.Len(t, messages, 4)
	for i, want := range []string{id(1), id(2), id(3), id(3)} {
		require.Equal(t, want, messages[i].ID, "message %d", i)
	}
	require.Equal(t, []event{
		{Event: "accepted", ID: id(1)},
		{Event: "rejected", ID: id(2)},
		{Event: "released", ID: id(3)},
		{Event: "accepted", ID: id(3)},
	}, consumer)

	for i, m := range messages {
		n := []int{1, 2, 3, 3}[i]
		require.Equal(t, "hello from "+client+" "+string(rune('0'+n)), m.Body)
		require.Equal(t, client, m.Annotations["x-opt-probe"], "message-annotations survive the queue")
		require.EqualValues(t, n, m.Annotations["x-opt-seq"])
		require.Equal(t, traceparent, m.ApplicationProperties["traceparent"], "application-properties survive the queue")
		require.EqualValues(t, n, m.ApplicationProperties["seq"])
		require.NotNil(t, m.DeliveryCount)
		require.NotNil(t, m.FirstAcquirer)
	}

	// First deliveries: never acquired before, no failed attempts.
	for _, m := range messages[:3] {
		require.Zero(t, *m.DeliveryCount, "%s delivery-count", m.ID)
		require.True(t, *m.FirstAcquirer, "%s first-acquirer on its first delivery", m.ID)
	}
	// The redelivery after released: acquired before, but released is not a
	// failed attempt, so delivery-count stays 0 (RabbitMQ 4.3 semantics).
	redelivered := messages[3]
	require.False(t, *redelivered.FirstAcquirer, "first-acquirer after released")
	require.Zero(t, *redelivered.DeliveryCount, "delivery-count after released")
}

func TestRhea(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node not found", "install Node.js 20, then `cd e2e/interop && npm install rhea@3.0.5`")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "rhea", "package.json")); err != nil {
		need(t, "rhea not installed", "run `cd e2e/interop && npm install rhea@3.0.5`")
	}
	host, port := startBroker(t)
	events := runProbe(t, node, "rhea_probe.js", "--host", host, "--port", port, "--queue", "interop-rhea", "--timeout", "10000")
	checkEvents(t, events, "rhea", "rhea")
}

func TestProton(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), probeTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, pythonPath, "-c", "import proton").CombinedOutput(); err != nil {
		need(t, "python3-qpid-proton not importable by "+pythonPath+": "+strings.TrimSpace(string(out)),
			"apt-get install -y python3-qpid-proton")
	}
	host, port := startBroker(t)
	events := runProbe(t, pythonPath, "proton_probe.py", "--host", host, "--port", port, "--queue", "interop-proton", "--timeout", "10")
	checkEvents(t, events, "proton", "proton")
}
