package main

// The deep-queue section (-deep): epitaph with its store holds -deep-count
// 1 KiB durable messages in one queue of -deep-queue-type (a dead-letter queue nobody
// consumes), with its RSS while they sit; publish and consume rates into a
// shallow queue and into/from the deep one in the same run; restart time to
// the first delivery with them stored; then everything is drained and
// checked (none lost, none duplicated, in order). The section is spliced
// into the report between <!-- deep-N:begin --> and <!-- deep-N:end -->
// (deep-quorum-N for quorum queues).

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

// Each -deep-count and queue type has its own section, so that runs at
// different depths and of both types stand side by side.
func deepMarkers(queueType string, n int) (begin, end string) {
	name := strconv.Itoa(n)
	if queueType != "classic" {
		name = queueType + "-" + name
	}
	return fmt.Sprintf("<!-- deep-%s:begin -->", name), fmt.Sprintf("<!-- deep-%s:end -->", name)
}

var deepSectionRE = regexp.MustCompile(`(?s)<!-- deep-((?:quorum-)?\d+):begin -->.*?<!-- deep-((?:quorum-)?\d+):end -->`)

// deepDefinitions declares the two queues, both of queueType.
func deepDefinitions(queueType string) string {
	q := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-queue-type":%q}}`, name, queueType)
	}
	return `{"vhosts":[{"name":"/"}],"queues":[` + q("dlq") + "," + q("shallow") + "]}"
}

type deepStep struct {
	what string
	res  *perf.Result
	cmd  string
	err  string
}

func runDeep(o opts) error {
	if o.deepQueueType != "classic" && o.deepQueueType != "quorum" {
		return fmt.Errorf("-deep-queue-type %q: want classic or quorum", o.deepQueueType)
	}
	tmp, err := os.MkdirTemp("", "epitaph-compare-deep-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := buildBins(tmp, bin{&o.epitaphBin, "./cmd/epitaph"}, bin{&o.perfBin, "./cmd/epitaph-perf"}); err != nil {
		return err
	}
	defs := filepath.Join(tmp, "definitions.json")
	if err := os.WriteFile(defs, []byte(deepDefinitions(o.deepQueueType)), 0o644); err != nil {
		return err
	}
	dataRoot := o.dataRoot
	if dataRoot == "" {
		dataRoot = tmp
	}
	dataDir := filepath.Join(dataRoot, "epitaph-deep-data")
	_ = os.RemoveAll(dataDir)
	defer os.RemoveAll(dataDir)
	loadBefore := readFile("/proc/loadavg")
	started := time.Now()
	args := []string{"-c", o.brokerCPU, o.epitaphBin, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--http-listen", "",
		"--definitions", defs, "--log-level", "warn"}
	cmd, addr, err := startListening("taskset", args...)
	if err != nil {
		return fmt.Errorf("epitaph: %w", err)
	}
	pid := cmd.Process.Pid
	url := "amqp://" + addr
	defer func() { stopProc(cmd) }()

	n, m := o.deepCount, o.deepProbe
	var steps []deepStep
	step := func(what string, timeout time.Duration, a ...string) *perf.Result {
		res, c, err := perfJSON(o, timeout, append(a, "-url", url, "-broker-pid", strconv.Itoa(pid))...)
		s := deepStep{what: what, res: res, cmd: c}
		if err != nil {
			s.err = err.Error()
		}
		steps = append(steps, s)
		logf("deep: %s: %s", what, deepSummary(s))
		return res
	}
	fill := func(what, queue string, count, seqStart int) *perf.Result {
		return step(what, 2*time.Hour, "-engine", "fast", "-scenario", "fill", "-durable", "-size", "1024",
			"-count", strconv.Itoa(count), "-seq-start", strconv.Itoa(seqStart), "-senders", "1", "-window", "100",
			"-settle", "3s", "-target", "/queues/"+queue)
	}
	consume := func(what, queue string, count int) *perf.Result {
		return step(what, 2*time.Hour, "-engine", "fast", "-scenario", "consume", "-count", strconv.Itoa(count),
			"-size", "1024", "-credit", "1000", "-duration", "30s", "-source", "/queues/"+queue)
	}
	// Shallow first: the same queue type, empty at the start.
	shallowPub := fill("publish into an empty queue", "shallow", m, 0)
	shallowCon := consume("consume from a queue of "+commas(m), "shallow", m)
	// The deep queue, then a probe into it while it is deep.
	deepFill := fill("fill the DLQ", "dlq", n, 0)
	rssSitting := procRSS(pid)
	deepPub := fill("publish into the DLQ "+commas(n)+" deep", "dlq", m, n)
	// Shallow again, with the store as the deep fill left it: the ratios
	// compare runs on the same store, minutes apart at most.
	shallowPub2 := fill("publish into an empty queue, after the deep fill", "shallow", m, 0)
	shallowCon2 := consume("consume from a queue of "+commas(m)+", after the deep fill", "shallow", m)
	storeBytes := dirSize(dataDir)
	// Restart: SIGKILL, then time listening and the first delivery; the
	// consumer drains the whole DLQ from its head and checks it.
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	t0 := time.Now()
	cmd, addr, err = startListening("taskset", args...)
	if err != nil {
		return fmt.Errorf("epitaph restart: %w", err)
	}
	listenMs := float64(time.Since(t0).Microseconds()) / 1e3
	pid, url = cmd.Process.Pid, "amqp://"+addr
	rssRestarted := procRSS(pid)
	drain := consume("restart, then drain the DLQ ("+commas(n+m)+")", "dlq", n+m)
	firstMs := 0.0
	if drain != nil && drain.FirstDeliveryUnixNs > 0 {
		firstMs = float64(drain.FirstDeliveryUnixNs-t0.UnixNano()) / 1e6
	}
	rssAfterDrain := procRSS(pid)
	loadAfter := readFile("/proc/loadavg")

	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	deepBegin, deepEnd := deepMarkers(o.deepQueueType, n)
	p("%s\n## Deep queue (epitaph's store, one %s queue of %s 1 KiB durable messages)\n\n", deepBegin, o.deepQueueType, commas(n))
	p("Generated by `go run ./cmd/epitaph-compare -deep -deep-count %d -deep-probe %d -deep-queue-type %s` on %s (took %s). One run (a deep fill takes minutes). "+
		"Broker pinned to CPU %s, load client (epitaph-perf, fast engine, 1 publisher with 100 in flight, consumer credit 1000) to CPU %s, loopback only; "+
		"epitaph built from %s, default `queue-window-bytes` (4 MiB). Load average before / after: %s / %s.\n\n",
		n, m, o.deepQueueType, started.UTC().Format("2006-01-02 15:04 UTC"), time.Since(started).Round(time.Second), o.brokerCPU, o.clientCPU,
		sourceState(), fields3(loadBefore), fields3(loadAfter))
	rate := func(r *perf.Result) string {
		if r == nil {
			return "—"
		}
		return fmt.Sprintf("%.0f", r.Rate)
	}
	ratioOf := func(a, c *perf.Result) string {
		if a == nil || c == nil || c.Rate == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a.Rate/c.Rate)
	}
	p("| measurement | value |\n|---|---|\n")
	p("| fill rate into the DLQ, 0 → %s (msg/s, accepted) | %s |\n", commas(n), rate(deepFill))
	p("| broker RSS with %s messages sitting in the DLQ | %.0f MiB (%.1f bytes per message) |\n", commas(n), float64(rssSitting)/(1<<20), float64(rssSitting)/float64(max(n, 1)))
	p("| store on disk | %.0f MiB |\n", float64(storeBytes)/(1<<20))
	p("| publish %s into an empty queue (msg/s), before / after the deep fill | %s / %s |\n", commas(m), rate(shallowPub), rate(shallowPub2))
	p("| publish %s into the DLQ %s deep (msg/s) | %s (%s of shallow after the fill, %s of before) |\n", commas(m), commas(n), rate(deepPub),
		ratioOf(deepPub, shallowPub2), ratioOf(deepPub, shallowPub))
	p("| consume %s from a queue of %s (msg/s), before / after the deep fill | %s / %s |\n", commas(m), commas(m), rate(shallowCon), rate(shallowCon2))
	p("| consume the DLQ's %s from its head after a restart (msg/s, whole drain) | %s (%s of shallow after the fill, %s of before) |\n", commas(n+m), rate(drain),
		ratioOf(drain, shallowCon2), ratioOf(drain, shallowCon))
	p("| restart (SIGKILL) with %s stored: listening after | %.2f s |\n", commas(n+m), listenMs/1e3)
	p("| restart: first delivery after (from the exec) | %.2f s |\n", firstMs/1e3)
	p("| broker RSS right after the restart / after the drain | %.0f MiB / %.0f MiB |\n", float64(rssRestarted)/(1<<20), float64(rssAfterDrain)/(1<<20))
	if drain != nil {
		p("| drained after the restart: lost / duplicated / out of order | %d / %d / %d of %s |\n", drain.Lost, drain.Duplicated, drain.OutOfOrder, commas(n+m))
	}
	p("\nErrors: ")
	errs := 0
	for _, s := range steps {
		if s.err != "" || (s.res != nil && s.res.Failed()) {
			p("%s: %s; ", s.what, deepSummary(s))
			errs++
		}
	}
	if errs == 0 {
		p("none.")
	}
	p("\n\n### Commands\n\n```\ntaskset %s\n", shellJoin(args))
	for _, s := range steps {
		p("%s\n", s.cmd)
	}
	p("```\n%s", deepEnd)

	old := readFile(o.out)
	var out string
	if i, j, ok := sectionBounds(old, deepBegin, deepEnd); ok {
		out = old[:i] + b.String() + old[j:]
	} else if i, _, ok := sectionBounds(old, notesBegin, notesEnd); ok {
		out = old[:i] + b.String() + "\n\n" + old[i:]
	} else {
		out = strings.TrimRight(old, "\n") + "\n\n" + b.String() + "\n"
	}
	if err := os.WriteFile(o.out, []byte(out), 0o644); err != nil {
		return err
	}
	logf("wrote the deep section of %s (%s)", o.out, time.Since(started).Round(time.Second))
	return nil
}

func deepSummary(s deepStep) string {
	if s.res == nil {
		return "ERROR " + s.err
	}
	r := s.res
	out := fmt.Sprintf("%.0f msg/s, sent %d, received %d, lost %d, duplicated %d, out of order %d, RSS after %d MiB",
		r.Rate, r.Sent, r.Received, r.Lost, r.Duplicated, r.OutOfOrder, r.BrokerRSSAfter>>20)
	if s.err != "" {
		out += " (" + s.err + ")"
	}
	return out
}

// procRSS is the resident set size of pid in bytes (0 if unreadable).
func procRSS(pid int) int64 {
	for _, l := range strings.Split(readFile(fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// deepSections returns the deep sections of a report, markers included,
// each followed by a blank line, or "".
func deepSections(report string) string {
	var out strings.Builder
	for _, m := range deepSectionRE.FindAllStringSubmatch(report, -1) {
		if m[1] == m[2] {
			out.WriteString(m[0] + "\n\n")
		}
	}
	return out.String()
}
