package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

func TestParseBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/epitaph-mq/epitaph/amqp10
cpu: AMD EPYC
BenchmarkEncodeTransfer               	  200000	        30.95 ns/op	       0 B/op	       0 allocs/op
BenchmarkPerformatives/decode/Open-1  	  200000	       358.8 ns/op	     208 B/op	      14 allocs/op
BenchmarkNoMem 	  200000	        12.0 ns/op
--- FAIL: BenchmarkBroken
BenchmarkNameOnly
PASS
ok  	github.com/epitaph-mq/epitaph/amqp10	1.234s
`
	rows := parseBench(out)
	want := []benchRow{
		{name: "BenchmarkEncodeTransfer", iters: 200000, nsOp: "30.95", bytesOp: "0", allocsOp: "0", allocs: 0},
		{name: "BenchmarkPerformatives/decode/Open-1", iters: 200000, nsOp: "358.8", bytesOp: "208", allocsOp: "14", allocs: 14},
		{name: "BenchmarkNoMem", iters: 200000, nsOp: "12.0", allocs: -1},
	}
	if len(rows) != len(want) {
		t.Fatalf("parseBench: %d rows %+v; want %d", len(rows), rows, len(want))
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v; want %+v", i, rows[i], want[i])
		}
	}
	runs := []microRun{{pkg: "./amqp10", rows: rows}}
	if a, ok := microAllocs(runs, "./amqp10", "BenchmarkEncodeTransfer"); !ok || a != 0 {
		t.Errorf("microAllocs EncodeTransfer = %v, %v; want 0, true", a, ok)
	}
	if _, ok := microAllocs(runs, "./amqp10", "BenchmarkNoMem"); ok {
		t.Error("microAllocs of a line without allocs/op: ok; want not ok")
	}
}

func TestFormatHelpers(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0"}, {500, "500"}, {1000, "1,000"}, {50000, "50,000"}, {1000000, "1,000,000"}, {-12345, "-12,345"}} {
		if got := commas(c.n); got != c.want {
			t.Errorf("commas(%d) = %q; want %q", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{3 * time.Minute, "3m"}, {5 * time.Minute, "5m"}, {330 * time.Second, "5m30s"}, {time.Hour, "1h"}, {90 * time.Minute, "1h30m"}} {
		if got := fmtDur(c.d); got != c.want {
			t.Errorf("fmtDur(%v) = %q; want %q", c.d, got, c.want)
		}
	}
	o := opts{fillCountLarge: 1000000}
	if got := perfTimeout(o, scenario{id: "fill-large"}); got != 5*time.Minute {
		t.Errorf("perfTimeout(fill-large, 1,000,000) = %v; want 5m", got)
	}
	if got := perfTimeout(o, scenario{id: "fill"}); got != 3*time.Minute {
		t.Errorf("perfTimeout(fill) = %v; want 3m", got)
	}
	if got, want := shellQuote([]string{"go", "test", "-run", "^$", "-bench", "A|B", "./x"}), `go test -run '^$' -bench 'A|B' ./x`; got != want {
		t.Errorf("shellQuote = %q; want %q", got, want)
	}
}

// pairedRatio divides run by run within a repetition, skips failed runs,
// and takes the median of what is left.
func TestPairedRatio(t *testing.T) {
	r := func(rate float64) run1 { return run1{res: &perf.Result{Rate: rate}} }
	dl := []run1{r(50), r(40), {err: "failed"}, r(300)}
	plain := []run1{r(100), r(100), r(100), r(400)}
	got, ok := pairedRatio(dl, plain, func(r *perf.Result) float64 { return r.Rate })
	if !ok || got.med != 0.5 || got.lo != 0.4 || got.hi != 0.75 || got.n != 3 {
		t.Errorf("pairedRatio = %+v, %v; want median 0.5 (0.4-0.75) of 3", got, ok)
	}
	if _, ok := pairedRatio(nil, plain, func(r *perf.Result) float64 { return r.Rate }); ok {
		t.Error("pairedRatio of no runs reported a value")
	}
}

func TestDurableSectionKept(t *testing.T) {
	sec := durBegin + "\n## Durable\nrows\n" + durEnd
	if got := durableSection("# Benchmarks\n\nin memory\n\n" + sec + "\n"); got != sec {
		t.Fatalf("durableSection = %q, want %q", got, sec)
	}
	if got := durableSection("# Benchmarks\n"); got != "" {
		t.Fatalf("durableSection of a report without one = %q", got)
	}
	if got := durableSection(durBegin + " unterminated"); got != "" {
		t.Fatalf("durableSection of an unterminated section = %q", got)
	}
}

func TestNotesSectionKept(t *testing.T) {
	notes := notesBegin + "\n## Notes\nfigures\n" + notesEnd
	report := "# Benchmarks\n\n" + durBegin + "\n## Durable\n" + durEnd + "\n\n" + notes + "\n"
	if got := notesSection(report); got != notes {
		t.Fatalf("notesSection = %q, want %q", got, notes)
	}
	if got := durableSection(report); got != durBegin+"\n## Durable\n"+durEnd {
		t.Fatalf("durableSection next to notes = %q", got)
	}
	if got := notesSection("# Benchmarks\n"); got != "" {
		t.Fatalf("notesSection of a report without one = %q", got)
	}
}

// The latency table: the TCP relay gets its own row after the brokers,
// named for what it is, and one sentence says what it measures; without
// relay runs the table is as before.
func TestLatencySectionWithTCPRelay(t *testing.T) {
	lat := func(p50, p99 float64) run1 {
		return run1{res: &perf.Result{LatP50: p50, LatP90: p50, LatP99: p99, LatMax: 2 * p99}}
	}
	scs := []scenario{
		{id: "tp-fast-16", title: "throughput", metric: "rate"},
		{id: "lat-1k", title: "latency at 1,000 msg/s", metric: "latency"},
	}
	res := map[string]map[string][]run1{
		"tp-fast-16": {"epitaph": {{res: &perf.Result{Rate: 1}}}},
		"lat-1k": {
			"epitaph":   {lat(0.15, 0.4), lat(0.16, 0.5), lat(0.14, 0.3)},
			"null":      {lat(0.14, 0.3)},
			"tcp-relay": {lat(0.1, 0.2), lat(0.09, 0.3), {err: "failed"}},
		},
	}
	render := func(res map[string]map[string][]run1) string {
		var w strings.Builder
		latencySection(func(f string, a ...any) { fmt.Fprintf(&w, f, a...) }, scs, res)
		return w.String()
	}
	out := render(res)
	for _, want := range []string{
		"| latency at 1,000 msg/s | epitaph | 0.150 (0.140–0.160) | 0.150 (0.140–0.160) | 0.400 (0.300–0.500) | 0.800 (0.600–1.000) |\n" +
			"| latency at 1,000 msg/s | null | 0.140 (0.140–0.140) | 0.140 (0.140–0.140) | 0.300 (0.300–0.300) | 0.600 (0.600–0.600) |\n" +
			"| latency at 1,000 msg/s | TCP relay (no AMQP) | 0.095 (0.090–0.100) | 0.095 (0.090–0.100) | 0.250 (0.200–0.300) | 0.500 (0.400–0.600) |\n",
		"TCP relay (no AMQP) is no broker: `epitaph-null -tcp-relay`",
		"the machine's floor for a message crossing one relay process on loopback.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("latency section lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "| latency at") != 3 || strings.Contains(out, "throughput") {
		t.Errorf("want exactly the three latency rows:\n%s", out)
	}

	delete(res["lat-1k"], "tcp-relay")
	out = render(res)
	if strings.Contains(out, "TCP relay") || strings.Contains(out, "tcp-relay") {
		t.Errorf("no relay runs, but the section names the relay:\n%s", out)
	}
	if want := "## Latency (ms, fixed rate, from the intended send time: corrected for coordinated omission)\n\n| scenario | broker |"; !strings.Contains(out, want) {
		t.Errorf("without relay runs the table should follow the heading directly:\n%s", out)
	}
}

func TestRabbitScriptRequiredUnlessNoRabbit(t *testing.T) {
	if err := checkOpts(opts{}); !errors.Is(err, errRabbitRequired) {
		t.Errorf("checkOpts without -rabbit = %v; want errRabbitRequired", err)
	}
	if err := checkOpts(opts{noRabbit: true}); err != nil {
		t.Errorf("checkOpts with -no-rabbit = %v; want nil", err)
	}
	if err := checkOpts(opts{rabbit: "tools/rabbitmq310.sh"}); err != nil {
		t.Errorf("checkOpts with -rabbit = %v; want nil", err)
	}
}

func TestReportNamesTheRabbitScriptByFileName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"-reps 3 -rabbit /some/where/rabbitmq310.sh -out B.md", "-reps 3 -rabbit rabbitmq310.sh -out B.md"},
		{"--rabbit=/some/where/rabbitmq310.sh -durable", "--rabbit=rabbitmq310.sh -durable"},
		{"-no-rabbit", "-no-rabbit"},
	} {
		if got := strings.Join(reportArgs(strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("reportArgs(%q) = %q; want %q", c.in, got, c.want)
		}
	}
	if got := rabbitName(opts{rabbit: "/some/where/rabbitmq310.sh"}); got != "rabbitmq310.sh" {
		t.Errorf("rabbitName = %q; want rabbitmq310.sh", got)
	}
}

// A command in the report names this machine's files by their base names,
// and keeps AMQP addresses and relative paths as they are.
func TestReportPathsOmitTheMachine(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "epitaph-perf")
	if err := os.WriteFile(bin, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := shellJoin([]string{"-c", "1", bin, "-target", "/queues/dlq", "--data-dir", dir, "-definitions", "defs.json"})
	want := "-c 1 epitaph-perf -target /queues/dlq --data-dir " + filepath.Base(dir) + " -definitions defs.json"
	if got != want {
		t.Fatalf("shellJoin = %q, want %q", got, want)
	}
}

// Deep sections are kept per depth, and an in-memory run keeps them all.
func TestDeepSections(t *testing.T) {
	b1, e1 := deepMarkers("classic", 1000000)
	b2, e2 := deepMarkers("classic", 20000000)
	b3, e3 := deepMarkers("quorum", 1000000)
	if b3 != "<!-- deep-quorum-1000000:begin -->" {
		t.Fatalf("quorum marker %q", b3)
	}
	report := "# Benchmarks\n\n" + b1 + "\none\n" + e1 + "\n\n" + b2 + "\ntwenty\n" + e2 + "\n\n" + b3 + "\nquorum\n" + e3 + "\n\n" +
		notesBegin + "\nn\n" + notesEnd + "\n"
	want := b1 + "\none\n" + e1 + "\n\n" + b2 + "\ntwenty\n" + e2 + "\n\n" + b3 + "\nquorum\n" + e3 + "\n\n"
	if got := deepSections(report); got != want {
		t.Fatalf("deepSections = %q, want %q", got, want)
	}
	if got := deepSections("# Benchmarks\n" + b1 + " unterminated"); got != "" {
		t.Fatalf("deepSections of an unterminated section = %q", got)
	}
}
