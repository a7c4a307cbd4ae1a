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
     "arguments": {"x-queue-type": "classic"}},
    {"name": "interop-rhea-dl", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "quorum", "x-dead-letter-exchange": "",
                   "x-dead-letter-routing-key": "interop-rhea-dlq"}},
    {"name": "interop-rhea-dlq", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "classic"}},
    {"name": "interop-proton-dl", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "quorum", "x-dead-letter-exchange": "",
                   "x-dead-letter-routing-key": "interop-proton-dlq"}},
    {"name": "interop-proton-dlq", "vhost": "/", "durable": true, "auto_delete": false,
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
	// dead_lettered events (rhea_dl_probe.js, proton_dl_probe.py)
	Deaths json.RawMessage `json:"deaths"`
	TTL    any             `json:"ttl"`
	// reply events (rhea_mgmt_probe.js): the status and the body's values
	Subject string         `json:"subject"`
	Fields  map[string]any `json:"fields"`
	// attached events (proton_selector_probe.py): the reply source's filter
	Filter map[string]any `json:"filter"`
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
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "", true
	opts.Definitions = []byte(definitions)
	b, err := epitaph.Start(opts)
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

// rheaNode is the path of node, with rhea installed next to the probes;
// without them the test is skipped (or fails, with EPITAPH_REQUIRE_INTEROP=1).
func rheaNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node not found", "install Node.js 20, then `cd e2e/interop && npm install rhea@3.0.5`")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "rhea", "package.json")); err != nil {
		need(t, "rhea not installed", "run `cd e2e/interop && npm install rhea@3.0.5`")
	}
	return node
}

func TestRhea(t *testing.T) {
	node := rheaNode(t)
	host, port := startBroker(t)
	events := runProbe(t, node, "rhea_probe.js", "--host", host, "--port", port, "--queue", "interop-rhea", "--timeout", "10000")
	checkEvents(t, events, "rhea", "rhea")
}

// needProton skips (or fails, see need) a test when Debian's python3 cannot
// import Qpid Proton.
func needProton(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), probeTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, pythonPath, "-c", "import proton").CombinedOutput(); err != nil {
		need(t, "python3-qpid-proton not importable by "+pythonPath+": "+strings.TrimSpace(string(out)),
			"apt-get install -y python3-qpid-proton")
	}
}

func TestProton(t *testing.T) {
	needProton(t)
	host, port := startBroker(t)
	events := runProbe(t, pythonPath, "proton_probe.py", "--host", host, "--port", port, "--queue", "interop-proton", "--timeout", "10")
	checkEvents(t, events, "proton", "proton")
}

// A JMS selector from Qpid Proton (apache.org:selector-filter:string) is not
// applied on a queue, so the broker's attach reply leaves it out of the
// source's filter (AMQP 1.0 section 3.5.3), as RabbitMQ 4.3 does on classic
// and quorum queues.
func TestProtonSelectorNotEchoed(t *testing.T) {
	needProton(t)
	host, port := startBroker(t)
	events := runProbe(t, pythonPath, "proton_selector_probe.py", "--host", host, "--port", port, "--queue", "interop-proton", "--timeout", "10")
	var attached []event
	for _, e := range events {
		if e.Event == "attached" {
			attached = append(attached, e)
		}
	}
	require.Len(t, attached, 1, "one attach reply")
	require.Empty(t, attached[0].Filter, "the selector is not in force, so not in the reply")
}

// dlEvents splits a dead-letter probe's events: it must have published m
// (accepted), rejected it, and read exactly one dead-lettered copy.
func dlEvents(t *testing.T, events []event, id string) event {
	t.Helper()
	var kinds []string
	var dl []event
	for _, e := range events {
		kinds = append(kinds, e.Event)
		if e.Event == "dead_lettered" {
			dl = append(dl, e)
		}
		if e.Event == "sent" {
			require.Equal(t, "accepted", e.Outcome)
		}
	}
	require.Equal(t, []string{"open", "sent", "rejected", "dead_lettered", "accepted", "closed"}, sortedDL(kinds))
	require.Len(t, dl, 1)
	require.Equal(t, id, dl[0].ID)
	require.Equal(t, "dead-letter me", dl[0].Body)
	return dl[0]
}

// sortedDL orders the events that may interleave (sent/rejected both follow
// open; the publish outcome can arrive after the rejection).
func sortedDL(kinds []string) []string {
	rank := map[string]int{"open": 0, "sent": 1, "rejected": 2, "dead_lettered": 3, "accepted": 4, "closed": 5}
	out := append([]string(nil), kinds...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && rank[out[j]] < rank[out[j-1]]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// pyValue is a value described by proton_dl_probe.py.
type pyValue struct {
	Type        string          `json:"type"`
	Value       json.RawMessage `json:"value"`
	ElementType string          `json:"element_type"`
	Elements    []pyValue       `json:"elements"`
	Entries     [][2]pyValue    `json:"entries"`
}

func (v pyValue) str(t *testing.T) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(v.Value, &s), "value %s", v.Value)
	return s
}

func (v pyValue) num(t *testing.T) int64 {
	t.Helper()
	var n int64
	require.NoError(t, json.Unmarshal(v.Value, &n), "value %s", v.Value)
	return n
}

// TestProtonDeadLetter checks the exact AMQP types of every x-opt-deaths
// field as Qpid Proton decodes them.
func TestProtonDeadLetter(t *testing.T) {
	needProton(t)
	host, port := startBroker(t)
	before := time.Now()
	events := runProbe(t, pythonPath, "proton_dl_probe.py", "--host", host, "--port", port,
		"--queue", "interop-proton-dl", "--dlq", "interop-proton-dlq", "--timeout", "10")
	dl := dlEvents(t, events, "proton-dl")
	require.NotNil(t, dl.DeliveryCount)
	require.EqualValues(t, 1, *dl.DeliveryCount)
	require.False(t, *dl.FirstAcquirer)
	require.EqualValues(t, 0, dl.TTL) // proton reports an absent ttl as 0

	var deaths pyValue
	require.NoError(t, json.Unmarshal(dl.Deaths, &deaths))
	require.Equal(t, "Array", deaths.Type, "x-opt-deaths must be an AMQP array")
	require.Equal(t, "map", deaths.ElementType, "x-opt-deaths element type")
	require.Len(t, deaths.Elements, 1)
	death := deaths.Elements[0]
	require.Equal(t, "dict", death.Type)

	var keys []string
	fields := map[string]pyValue{}
	for _, kv := range death.Entries {
		require.Equal(t, "symbol", kv[0].Type, "death keys are symbols")
		k := kv[0].str(t)
		keys = append(keys, k)
		fields[k] = kv[1]
	}
	require.Equal(t, []string{"queue", "reason", "count", "first-time", "last-time", "exchange", "routing-keys"}, keys)
	require.Equal(t, "str", fields["queue"].Type)
	require.Equal(t, "interop-proton-dl", fields["queue"].str(t))
	require.Equal(t, "symbol", fields["reason"].Type)
	require.Equal(t, "rejected", fields["reason"].str(t))
	require.Equal(t, "ulong", fields["count"].Type)
	require.EqualValues(t, 1, fields["count"].num(t))
	for _, k := range []string{"first-time", "last-time"} {
		require.Equal(t, "timestamp", fields[k].Type, k)
		require.InDelta(t, before.UnixMilli(), fields[k].num(t), 5000, k)
	}
	require.Equal(t, fields["first-time"].num(t), fields["last-time"].num(t))
	require.Equal(t, "str", fields["exchange"].Type)
	require.Equal(t, "", fields["exchange"].str(t))
	rks := fields["routing-keys"]
	require.Equal(t, "Array", rks.Type, "routing-keys must be an AMQP array")
	require.Equal(t, "string", rks.ElementType)
	require.Len(t, rks.Elements, 1)
	require.Equal(t, "str", rks.Elements[0].Type)
	require.Equal(t, "interop-proton-dl", rks.Elements[0].str(t))

	// The six first/last annotations and epitaph's error annotations are strings.
	var anns map[string]pyValue
	raw, err := json.Marshal(dl.Annotations)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &anns))
	for k, want := range map[string]string{
		"x-first-death-queue": "interop-proton-dl", "x-first-death-reason": "rejected", "x-first-death-exchange": "",
		"x-last-death-queue": "interop-proton-dl", "x-last-death-reason": "rejected", "x-last-death-exchange": "",
		"x-last-death-error-condition": "app:bad-order", "x-last-death-error-description": "rejected by proton_dl_probe",
		"x-exchange": "", "x-routing-key": "interop-proton-dlq", "x-opt-probe": "proton",
	} {
		require.Contains(t, anns, k)
		require.Equal(t, "str", anns[k].Type, "%s must be a string", k)
		require.Equal(t, want, anns[k].str(t), k)
	}
}

// jsField is a death field described by rhea_dl_probe.js.
type jsField struct {
	JSType         string          `json:"js_type"`
	Value          json.RawMessage `json:"value"`
	ElementJSTypes []string        `json:"element_js_types"`
}

// TestRheaDeadLetter checks the x-opt-deaths values as rhea reads them
// (symbols become strings, timestamps Dates).
func TestRheaDeadLetter(t *testing.T) {
	node := rheaNode(t)
	host, port := startBroker(t)
	before := time.Now()
	events := runProbe(t, node, "rhea_dl_probe.js", "--host", host, "--port", port,
		"--queue", "interop-rhea-dl", "--dlq", "interop-rhea-dlq", "--timeout", "10000")
	dl := dlEvents(t, events, "rhea-dl")
	require.NotNil(t, dl.DeliveryCount)
	require.EqualValues(t, 1, *dl.DeliveryCount)
	require.False(t, *dl.FirstAcquirer)
	require.Nil(t, dl.TTL)

	var deaths []map[string]jsField
	require.NoError(t, json.Unmarshal(dl.Deaths, &deaths), "x-opt-deaths must decode as an array: %s", dl.Deaths)
	require.Len(t, deaths, 1)
	d := deaths[0]
	require.Len(t, d, 7, "no ttl key: %v", d)
	val := func(k string, into any) {
		t.Helper()
		require.Contains(t, d, k)
		require.NoError(t, json.Unmarshal(d[k].Value, into), k)
	}
	var s string
	val("queue", &s)
	require.Equal(t, "interop-rhea-dl", s)
	require.Equal(t, "string", d["reason"].JSType)
	val("reason", &s)
	require.Equal(t, "rejected", s)
	require.Equal(t, "number", d["count"].JSType)
	var n int64
	val("count", &n)
	require.EqualValues(t, 1, n)
	var ft, lt int64
	require.Equal(t, "Date", d["first-time"].JSType)
	require.Equal(t, "Date", d["last-time"].JSType)
	val("first-time", &ft)
	val("last-time", &lt)
	require.InDelta(t, before.UnixMilli(), ft, 5000)
	require.Equal(t, ft, lt)
	val("exchange", &s)
	require.Equal(t, "", s)
	require.Equal(t, "Array", d["routing-keys"].JSType)
	require.Equal(t, []string{"string"}, d["routing-keys"].ElementJSTypes)
	var rks []string
	val("routing-keys", &rks)
	require.Equal(t, []string{"interop-rhea-dl"}, rks)

	for k, want := range map[string]string{
		"x-first-death-queue": "interop-rhea-dl", "x-first-death-reason": "rejected", "x-first-death-exchange": "",
		"x-last-death-queue": "interop-rhea-dl", "x-last-death-reason": "rejected", "x-last-death-exchange": "",
		"x-last-death-error-condition": "app:bad-order", "x-last-death-error-description": "rejected by rhea_dl_probe",
		"x-exchange": "", "x-routing-key": "interop-rhea-dlq", "x-opt-probe": "rhea",
	} {
		f, ok := dl.Annotations[k].(map[string]any)
		require.True(t, ok, "annotation %s missing: %v", k, dl.Annotations)
		require.Equal(t, "string", f["js_type"], k)
		require.Equal(t, want, f["value"], k)
	}
}

// A /management reply decodes in rhea as in RabbitMQ 4.3's: the queue's
// booleans are tagged booleans (0x56), which rhea reads as the numbers 1
// and 0 (clients written against RabbitMQ check durable === 1).
func TestRheaManagementReply(t *testing.T) {
	node := rheaNode(t)
	host, port := startBroker(t)
	events := runProbe(t, node, "rhea_mgmt_probe.js", "--host", host, "--port", port, "--queue", "declared-by-rhea", "--timeout", "10000")
	var reply *event
	for i := range events {
		if events[i].Event == "reply" {
			reply = &events[i]
		}
	}
	require.NotNil(t, reply, "no reply event")
	require.Equal(t, "201", reply.Subject)
	body := reply.Fields
	for key, want := range map[string]any{
		"durable":        map[string]any{"value": float64(1), "type": "number"},
		"auto_delete":    map[string]any{"value": float64(0), "type": "number"},
		"exclusive":      map[string]any{"value": float64(0), "type": "number"},
		"message_count":  map[string]any{"value": float64(0), "type": "number"},
		"consumer_count": map[string]any{"value": float64(0), "type": "number"},
		"name":           map[string]any{"value": "declared-by-rhea", "type": "string"},
	} {
		require.Equal(t, want, body[key], "%s", key)
	}
}
