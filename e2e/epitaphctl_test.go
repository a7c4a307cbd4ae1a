package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// ctlBuild builds ./cmd/epitaphctl once per test binary.
var ctlBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// epitaphctlBin returns the path of epitaphctl, built on first use (with
// -race when this test binary has it) into a temporary directory shared by
// every test of the run. Without a TestMain of its own the directory cannot
// be removed after the last test, so it is left in os.TempDir.
func epitaphctlBin(t *testing.T) string {
	t.Helper()
	ctlBuild.once.Do(func() {
		ctlBuild.dir, ctlBuild.err = os.MkdirTemp("", "epitaphctl-e2e-")
		if ctlBuild.err != nil {
			return
		}
		ctlBuild.path = filepath.Join(ctlBuild.dir, "epitaphctl")
		args := []string{"build", "-o", ctlBuild.path}
		if raceEnabled() {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/epitaphctl")...)
		cmd.Dir = ".."
		ctlBuild.out, ctlBuild.err = cmd.CombinedOutput()
	})
	require.NoError(t, ctlBuild.err, "building epitaphctl: %s", ctlBuild.out)
	return ctlBuild.path
}

// ctl runs epitaphctl against base (through EPITAPH_URL, so that args are
// exactly what a user types) and returns stdout, stderr and the exit code.
func ctl(t *testing.T, base, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctxT(t), epitaphctlBin(t), args...)
	cmd.Env = append(os.Environ(), "EPITAPH_URL="+base)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr, "running epitaphctl %v", args)
		code = exitErr.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

// ctlOK runs epitaphctl and requires success.
func ctlOK(t *testing.T, base string, args ...string) string {
	t.Helper()
	out, errOut, code := ctl(t, base, "", args...)
	require.Equal(t, 0, code, "epitaphctl %v: stderr %s", args, errOut)
	return out
}

func ctlJSON[T any](t *testing.T, base string, args ...string) T {
	t.Helper()
	out := ctlOK(t, base, append(args, "--formatter", "json")...)
	var v T
	require.NoError(t, json.Unmarshal([]byte(out), &v), "%s", out)
	return v
}

func queueRow(t *testing.T, base, name string) map[string]any {
	t.Helper()
	for _, r := range ctlJSON[[]map[string]any](t, base, "list_queues") {
		if r["name"] == name {
			return r
		}
	}
	t.Fatalf("queue %q not listed", name)
	return nil
}

// The seeds' rabbitmqctl example, verbatim, with an existing queue; then a
// queue argument override, get (a peek with death history) and clearing.
func TestEpitaphctlSeedPolicy(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	ctlOK(t, base, "declare", "exchange", "name=my-dlx", "type=fanout")
	ctlOK(t, base, "declare", "exchange", "name=other-dlx", "type=fanout")
	ctlOK(t, base, "declare", "queue", "name=dlq", "durable=true")
	ctlOK(t, base, "declare", "queue", "name=other-dlq")
	ctlOK(t, base, "declare", "binding", "source=my-dlx", "destination=dlq")
	ctlOK(t, base, "declare", "binding", "source=other-dlx", "destination=other-dlq", "destination_type=queue", "routing_key=k")
	ctlOK(t, base, "declare", "queue", "name=work", "queue_type=quorum")

	// rabbitmqctl set_policy DLX ".*" '{"dead-letter-exchange":"my-dlx"}' --apply-to queues
	out := ctlOK(t, base, "set_policy", "DLX", ".*", `{"dead-letter-exchange":"my-dlx"}`, "--apply-to", "queues")
	require.Contains(t, out, `Setting policy "DLX"`)
	pols := ctlJSON[[]map[string]any](t, base, "list_policies")
	require.Len(t, pols, 1)
	require.Equal(t, "queues", pols[0]["apply-to"])
	require.Equal(t, map[string]any{"dead-letter-exchange": "my-dlx"}, pols[0]["definition"])
	// The Korean guide's variant with --priority 7.
	ctlOK(t, base, "set_policy", "DLX", ".*", `{"dead-letter-exchange":"my-dlx"}`, "--apply-to", "queues", "--priority", "7")
	pols = ctlJSON[[]map[string]any](t, base, "list_policies")
	require.EqualValues(t, 7, pols[0]["priority"])
	table := ctlOK(t, base, "list_policies")
	require.Contains(t, table, "DLX")
	require.Contains(t, table, "apply-to")

	w := queueRow(t, base, "work")
	require.Equal(t, "quorum", w["type"])
	require.Equal(t, "my-dlx", w["dead_letter_exchange"])
	require.Contains(t, ctlOK(t, base, "list_queues"), "dead_letter_exchange")

	s := session(t, dial(t, b, nil))
	send(t, sender(t, s, "/queues/work", nil), msg("poison"))
	r := receiver(t, s, "/queues/work", nil)
	m := recv(t, r)
	require.NoError(t, r.RejectMessage(ctxT(t), m, nil))
	eventually(t, "the message to reach dlq", func() bool { return queueLen(t, b, "dlq") == 1 })

	// get peeks: same answer twice, and the message stays.
	got := ctlJSON[[]map[string]any](t, base, "get", "queue=dlq", "count=5")
	require.Len(t, got, 1)
	require.Equal(t, "poison", got[0]["payload"])
	deaths := got[0]["deaths"].([]any)
	require.Len(t, deaths, 1)
	require.Equal(t, "rejected", deaths[0].(map[string]any)["reason"])
	require.Equal(t, got, ctlJSON[[]map[string]any](t, base, "get", "queue=dlq", "count=5"))
	require.Equal(t, 1, queueLen(t, b, "dlq"))
	table = ctlOK(t, base, "get", "queue=dlq")
	require.Contains(t, table, "rejected from work x1")
	require.Contains(t, table, "poison")
	dr := receiver(t, s, "/queues/dlq", nil)
	dm := recv(t, dr)
	require.Equal(t, uint32(1), dm.Header.DeliveryCount, "the rejection's count only")
	require.NoError(t, dr.AcceptMessage(ctxT(t), dm))

	// A queue argument overrides the policy.
	ctlOK(t, base, "declare", "queue", "name=work2", `arguments={"x-dead-letter-exchange":"other-dlx"}`)
	require.Equal(t, "other-dlx", queueRow(t, base, "work2")["dead_letter_exchange"])

	ctlOK(t, base, "clear_policy", "DLX")
	require.Empty(t, ctlJSON[[]map[string]any](t, base, "list_policies"))
	require.Nil(t, queueRow(t, base, "work")["dead_letter_exchange"])
	require.Equal(t, "other-dlx", queueRow(t, base, "work2")["dead_letter_exchange"])

	// Bindings and exchanges listings.
	bs := ctlJSON[[]map[string]any](t, base, "list_bindings")
	require.NotEmpty(t, bs)
	require.Contains(t, ctlOK(t, base, "list_exchanges"), "my-dlx")
	ctlOK(t, base, "delete", "binding", "source=other-dlx", "destination=other-dlq", "routing_key=k")
	ctlOK(t, base, "purge_queue", "work2")
}

func TestEpitaphctlDefinitionsRoundTrip(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	ctlOK(t, base, "declare", "exchange", "name=my-dlx", "type=topic")
	ctlOK(t, base, "declare", "queue", "name=dlq")
	ctlOK(t, base, "declare", "queue", "name=work", "queue_type=quorum", `arguments={"x-delivery-limit":5}`)
	ctlOK(t, base, "declare", "binding", "source=my-dlx", "destination=dlq", "routing_key=#")
	ctlOK(t, base, "set_policy", "DLX", ".*", `{"dead-letter-exchange":"my-dlx"}`, "--apply-to", "queues", "--priority", "7")
	ctlOK(t, base, "declare", "exchange", "name=staged", "type=direct", "-p", "/")

	file := filepath.Join(t.TempDir(), "defs.json")
	ctlOK(t, base, "export_definitions", file)
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	topology := func() []string {
		return []string{ctlOK(t, base, "list_queues", "name", "type", "arguments", "policy"), ctlOK(t, base, "list_exchanges"),
			ctlOK(t, base, "list_bindings"), ctlOK(t, base, "list_policies")}
	}
	want := topology()

	// Wipe.
	ctlOK(t, base, "clear_policy", "DLX")
	for _, q := range []string{"dlq", "work"} {
		ctlOK(t, base, "delete", "queue", "name="+q)
	}
	for _, x := range []string{"my-dlx", "staged"} {
		ctlOK(t, base, "delete", "exchange", "name="+x)
	}
	require.NotEqual(t, want, topology())

	ctlOK(t, base, "import_definitions", file)
	require.Equal(t, want, topology())
	after := ctlOK(t, base, "export_definitions", "-")
	require.JSONEq(t, string(before), after)

	// Import from stdin is idempotent.
	_, errOut, code := ctl(t, base, string(before), "import_definitions", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want, topology())
}

func TestEpitaphctlErrors(t *testing.T) {
	b := startBroker(t, "", withHTTP, func(o *epitaph.Options) { o.AuthFailureDelay = time.Millisecond }) // a wrong password below
	base := apiServer(t, b)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"no_such_command"}, "unknown command"},
		{[]string{"purge_queue", "missing"}, "404"},
		{[]string{"set_policy", "DLX", ".*", "{not json"}, "not a JSON object"},
		{[]string{"set_policy", "DLX", ".*"}, "NAME PATTERN DEFINITION"},
		{[]string{"set_policy", "P", "(", `{"a":1}`}, "invalid pattern"},
		{[]string{"declare", "queue"}, "mandatory argument \"name\""},
		{[]string{"declare", "queue", "name=amq.x"}, "403"},
		{[]string{"get", "queue=missing"}, "404"},
		{[]string{"--formatter", "xml", "list_queues"}, "unknown formatter"},
		{[]string{"--user", "guest", "--password", "wrong", "list_queues"}, "401"},
		{[]string{"import_definitions", "/nonexistent/defs.json"}, "no such file"},
	} {
		out, errOut, code := ctl(t, base, "", tc.args...)
		require.Equal(t, 1, code, "%v: stdout %s", tc.args, out)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	// Unreachable broker.
	_, errOut, code := ctl(t, "http://127.0.0.1:1", "", "list_queues")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "Error:")
}
