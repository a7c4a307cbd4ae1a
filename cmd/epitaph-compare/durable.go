package main

// The durable section (-durable): epitaph with its Pebble store (--data-dir,
// not --in-memory) against RabbitMQ 3.10.8, both with durable classic and
// quorum queues and 1 KiB messages marked durable, plus restart time with
// 1,000,000 stored messages. The section is spliced into the report file
// between <!-- durable:begin --> and <!-- durable:end -->, so the in-memory
// sections of an earlier compare stay as they are.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

const durableDefinitions = `{"vhosts":[{"name":"/"}],
 "queues":[{"name":"plain","vhost":"/","durable":true,"auto_delete":false,"arguments":{}},
           {"name":"qq","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-queue-type":"quorum"}}]}
`

const (
	durBegin = "<!-- durable:begin -->"
	durEnd   = "<!-- durable:end -->"
	// The notes section holds measurements made by hand (for example the
	// figures behind a constant's value); every run keeps it as it is.
	notesBegin = "<!-- notes:begin -->"
	notesEnd   = "<!-- notes:end -->"
)

// durable targets: broker process + queue
var durTargets = []struct{ id, title string }{
	{"ep-classic", "epitaph classic"},
	{"ep-quorum", "epitaph quorum"},
	{"rmq-classic", "RabbitMQ classic"},
	{"rmq-quorum", "RabbitMQ quorum"},
}

type restartRun struct {
	signal              string
	fill                *perf.Result
	fillCmd, consumeCmd string
	listenMs, firstMs   float64 // from exec of the restarted broker
	consume             *perf.Result
	storeBytes          int64
	err                 string
}

func runDurable(o opts) error {
	tmp, err := os.MkdirTemp("", "epitaph-compare-dur-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := buildBins(tmp, bin{&o.epitaphBin, "./cmd/epitaph"}, bin{&o.perfBin, "./cmd/epitaph-perf"}); err != nil {
		return err
	}
	defs := filepath.Join(tmp, "definitions.json")
	if err := os.WriteFile(defs, []byte(durableDefinitions), 0o644); err != nil {
		return err
	}
	dataRoot := o.dataRoot
	if dataRoot == "" {
		dataRoot = tmp
	}
	loadBefore := readFile("/proc/loadavg")
	started := time.Now()

	// epitaph with a durable store; a fresh data directory per start
	var ep *broker
	dataN := 0
	var dataDir string
	epArgs := func(dir string) []string {
		return []string{"-c", o.brokerCPU, o.epitaphBin, "--listen", "127.0.0.1:0", "--data-dir", dir, "--http-listen", "",
			"--definitions", defs, "--log-level", "warn"}
	}
	startEp := func() error {
		if ep != nil && ep.cmd != nil {
			stopProc(ep.cmd)
		}
		if dataDir != "" {
			_ = os.RemoveAll(dataDir)
		}
		dataN++
		dataDir = filepath.Join(dataRoot, fmt.Sprintf("epitaph-data-%d", dataN))
		cmd, addr, err := startListening("taskset", epArgs(dataDir)...)
		if err != nil {
			return fmt.Errorf("epitaph: %w", err)
		}
		ep = &broker{name: "epitaph", url: "amqp://" + addr, pid: cmd.Process.Pid, cmd: cmd, creditMode: "half"}
		return nil
	}
	if err := startEp(); err != nil {
		return err
	}
	defer func() {
		if ep != nil {
			stopProc(ep.cmd)
		}
		_ = os.RemoveAll(dataDir)
	}()
	sameDisk := sameFS(dataDir, o.rabbitDir)

	var rb *broker
	rabbitNote, rabbitVersion := "", ""
	if !o.noRabbit {
		r, note, err := startRabbit(o)
		if err == nil {
			err = declareRabbitQuorum()
		}
		if err != nil {
			rabbitNote = "RabbitMQ left out: " + err.Error()
			logf("%s", rabbitNote)
		} else {
			rb, rabbitNote, rabbitVersion = r, note, rabbitVersionOf()
			defer func() {
				out, _ := rabbitScript(o, "stop").CombinedOutput()
				logf("rabbitmq stop: %s", strings.TrimSpace(string(out)))
			}()
		}
	}
	target := func(id string) *broker {
		switch id {
		case "ep-classic", "ep-quorum":
			q := map[bool]string{true: "plain", false: "qq"}[id == "ep-classic"]
			return &broker{name: id, url: ep.url, pid: ep.pid, creditMode: "half", addr: func(string) string { return "/queues/" + q }}
		default:
			if rb == nil {
				return nil
			}
			q := map[bool]string{true: "plain", false: "qq"}[id == "rmq-classic"]
			return &broker{name: id, url: rb.url, pid: rb.pid, creditMode: "exhausted", addr: func(string) string { return "/amq/queue/" + q }}
		}
	}

	dur := o.dur.String()
	common := []string{"-engine", "fast", "-size", "1024", "-durable", "-credit", "1000"}
	all := []string{"ep-classic", "ep-quorum", "rmq-classic", "rmq-quorum"}
	scs := []scenario{
		{"dur-1pub-1k", "end to end, 1 publisher (window 100), 1 consumer", append([]string{"-scenario", "throughput", "-senders", "1", "-window", "100", "-duration", dur}, common...), all, "rate"},
		{"dur-64pub-1k", "end to end, 64 publishers (64 connections, window 100 each), 1 consumer", append([]string{"-scenario", "throughput", "-senders", "64", "-window", "100", "-duration", dur}, common...), all, "rate"},
		{"dur-fill-1pub-1k", "publish only, 1 publisher (window 100)", append([]string{"-scenario", "fill", "-senders", "1", "-window", "100", "-duration", dur, "-drain", "-settle", "0s"}, common...), all, "rate"},
		{"dur-fill-64pub-1k", "publish only, 64 publishers (window 100 each)", append([]string{"-scenario", "fill", "-senders", "64", "-window", "100", "-duration", dur, "-drain", "-settle", "0s"}, common...), all, "rate"},
		{"dur-lat-1k", "fixed rate 1,000 msg/s, 1 publisher, 1 consumer", append([]string{"-scenario", "latency", "-rate", "1000", "-window", "100", "-duration", dur}, common...), all, "latency"},
	}
	if o.only != "" {
		keep := map[string]bool{}
		for _, s := range strings.Split(o.only, ",") {
			keep[s] = true
		}
		var ss []scenario
		for _, s := range scs {
			if keep[s.id] {
				ss = append(ss, s)
			}
		}
		scs = ss
	}
	results := map[string]map[string][]run1{}
	for rep := 0; rep < o.reps; rep++ {
		for _, sc := range scs {
			ts := append([]string(nil), sc.brokers...)
			k := rep % len(ts)
			ts = append(ts[k:], ts[:k]...)
			for _, id := range ts {
				b := target(id)
				if b == nil {
					continue
				}
				if strings.HasPrefix(id, "rmq") {
					_ = rabbitScript(o, "purge", "plain", "qq").Run()
				}
				r := runPerf(o, sc, b)
				if results[sc.id] == nil {
					results[sc.id] = map[string][]run1{}
				}
				results[sc.id][id] = append(results[sc.id][id], r)
				logf("rep %d %-18s %-12s %s", rep+1, sc.id, id, durSummary(sc, r))
				if r.err != "" && strings.HasPrefix(id, "ep") { // leftovers: start over with an empty store
					if err := startEp(); err != nil {
						return err
					}
				}
			}
		}
	}

	// restart with N stored messages
	var restarts []restartRun
	var rmqRestart *restartRun
	if o.restartCount > 0 {
		sigs := []string{"KILL", "TERM", "KILL"}
		for i := 0; i < o.restartReps; i++ {
			if err := startEp(); err != nil {
				return err
			}
			rr := epitaphRestart(o, ep, sigs[i%len(sigs)], dataDir, epArgs(dataDir))
			restarts = append(restarts, rr)
			logf("restart %s: listening %.0f ms, first delivery %.0f ms, %s", rr.signal, rr.listenMs, rr.firstMs, rr.err)
			if rr.err != "" {
				ep.cmd = nil
			}
		}
		if rb != nil && o.rabbitRestart {
			rr := rabbitRestart(o, rb)
			rmqRestart = &rr
			logf("rabbitmq restart: listening %.0f ms, first delivery %.0f ms, %s", rr.listenMs, rr.firstMs, rr.err)
		}
	}
	loadAfter := readFile("/proc/loadavg")
	sec := durableReport(o, scs, results, restarts, rmqRestart, loadBefore, loadAfter, rabbitNote, rabbitVersion, sameDisk, dataRoot, time.Since(started))
	old := readFile(o.out)
	var out string
	if i, j, ok := durableBounds(old); ok {
		out = old[:i] + sec + old[j:]
	} else {
		out = strings.TrimRight(old, "\n") + "\n\n" + sec + "\n"
	}
	if err := os.WriteFile(o.out, []byte(out), 0o644); err != nil {
		return err
	}
	logf("wrote the durable section of %s (%s)", o.out, time.Since(started).Round(time.Second))
	return nil
}

// bin is a command the compare runs: its path (given by a flag, or empty
// to build it) and its package.
type bin struct {
	p   *string
	pkg string
}

// buildBins builds into tmp each of bins whose path was not given.
func buildBins(tmp string, bins ...bin) error {
	for _, b := range bins {
		if *b.p != "" {
			continue
		}
		out := filepath.Join(tmp, filepath.Base(b.pkg))
		logf("go build -o %s %s", out, b.pkg)
		c := exec.Command("go", "build", "-o", out, b.pkg)
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		if err := c.Run(); err != nil {
			return fmt.Errorf("go build %s: %w", b.pkg, err)
		}
		*b.p = out
	}
	return nil
}

func declareRabbitQuorum() error {
	port := os.Getenv("RMQ_HTTP_PORT")
	if port == "" {
		port = "15673"
	}
	out, err := exec.Command("curl", "-sS", "--fail-with-body", "-u", "guest:guest", "-H", "content-type:application/json", "-X", "PUT",
		"http://127.0.0.1:"+port+"/api/queues/%2F/qq", "-d", `{"durable":true,"arguments":{"x-queue-type":"quorum"}}`).CombinedOutput()
	if err != nil {
		return fmt.Errorf("declare quorum queue qq: %v: %s", err, out)
	}
	return nil
}

func sameFS(a, b string) string {
	var sa, sb syscall.Stat_t
	if syscall.Stat(a, &sa) != nil || syscall.Stat(b, &sb) != nil {
		return "unknown"
	}
	if sa.Dev == sb.Dev {
		return "yes"
	}
	return "no"
}

func durSummary(sc scenario, r run1) string {
	if r.res == nil {
		return "ERROR " + r.err
	}
	s := fmt.Sprintf("%.0f msg/s, confirm p50 %.3f p99 %.3f ms, e2e p50 %.3f p99 %.3f ms, broker %.2f µs/msg", r.res.Rate, r.res.ConfP50, r.res.ConfP99,
		r.res.LatP50, r.res.LatP99, r.res.BrokerCPUPerMsg)
	if r.err != "" {
		s += " (" + r.err + ")"
	}
	return s
}

func perfJSON(o opts, timeout time.Duration, args ...string) (*perf.Result, string, error) {
	full := append([]string{"-c", o.clientCPU, o.perfBin}, args...)
	full = append(full, "-json", "-quiet", "-timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "taskset", full...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var res perf.Result
	cmd := "taskset " + shellJoin(full)
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil || res.Scenario == "" {
		if err == nil {
			err = errors.New("no result")
		}
		return nil, cmd, fmt.Errorf("%v: %s", err, lastLine(stderr.String()))
	}
	if err != nil {
		return &res, cmd, fmt.Errorf("%v: %s", err, lastLine(stderr.String()))
	}
	return &res, cmd, nil
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// epitaphRestart fills N durable messages, kills the broker with sig,
// restarts it on the same data directory and times "amqp listening on" and
// the first delivery (both from the exec of the new process); the consumer
// then drains and checks all N.
func epitaphRestart(o opts, ep *broker, sig, dataDir string, args []string) restartRun {
	rr := restartRun{signal: "SIG" + sig}
	n := strconv.Itoa(o.restartCount)
	fill, cmd, err := perfJSON(o, 10*time.Minute, "-engine", "fast", "-scenario", "fill", "-durable", "-size", "1024", "-count", n,
		"-senders", "4", "-window", "100", "-settle", "0s", "-url", ep.url, "-target", "/queues/plain", "-broker-pid", strconv.Itoa(ep.pid))
	rr.fill, rr.fillCmd = fill, cmd
	if err != nil {
		rr.err = "fill: " + err.Error()
		return rr
	}
	s := map[string]syscall.Signal{"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM}[sig]
	// taskset execs the broker, so the pid is the broker's
	_ = ep.cmd.Process.Signal(s)
	_ = ep.cmd.Wait()
	rr.storeBytes = dirSize(dataDir)
	t0 := time.Now()
	c, addr, err := startListening("taskset", args...)
	if err != nil {
		rr.err = "restart: " + err.Error()
		return rr
	}
	rr.listenMs = float64(time.Since(t0).Microseconds()) / 1e3
	ep.cmd, ep.url, ep.pid = c, "amqp://"+addr, c.Process.Pid
	res, cmd, err := perfJSON(o, 10*time.Minute, "-engine", "fast", "-scenario", "consume", "-count", n, "-size", "1024", "-credit", "1000",
		"-url", ep.url, "-source", "/queues/plain", "-broker-pid", strconv.Itoa(ep.pid))
	rr.consume, rr.consumeCmd = res, cmd
	if res != nil && res.FirstDeliveryUnixNs > 0 {
		rr.firstMs = float64(res.FirstDeliveryUnixNs-t0.UnixNano()) / 1e6
	}
	if err != nil {
		rr.err = "consume: " + err.Error()
	}
	return rr
}

// rabbitRestart does the same for RabbitMQ's durable classic queue, with
// `rabbitmqctl stop` (the script's stop) and start; listening is the first
// accepted TCP connection on its AMQP port.
func rabbitRestart(o opts, rb *broker) restartRun {
	rr := restartRun{signal: "rabbitmqctl stop"}
	n := strconv.Itoa(o.restartCount)
	_ = rabbitScript(o, "purge", "plain", "qq").Run()
	fill, cmd, err := perfJSON(o, 15*time.Minute, "-engine", "fast", "-scenario", "fill", "-durable", "-size", "1024", "-count", n,
		"-senders", "4", "-window", "100", "-settle", "0s", "-url", rb.url, "-target", "/amq/queue/plain", "-credit-mode", "exhausted", "-broker-pid", strconv.Itoa(rb.pid))
	rr.fill, rr.fillCmd = fill, cmd
	if err != nil {
		rr.err = "fill: " + err.Error()
		return rr
	}
	if out, err := rabbitScript(o, "stop").CombinedOutput(); err != nil {
		rr.err = fmt.Sprintf("stop: %v: %s", err, out)
		return rr
	}
	rr.storeBytes = dirSize(filepath.Join(o.rabbitDir, "mnesia"))
	t0 := time.Now()
	startDone := make(chan error, 1)
	go func() {
		out, err := rabbitScript(o, "start").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, lastLine(string(out)))
		}
		startDone <- err
	}()
	u := strings.TrimPrefix(rb.url, "amqp://")
	for time.Since(t0) < 10*time.Minute {
		c, err := net.DialTimeout("tcp", u, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	rr.listenMs = float64(time.Since(t0).Microseconds()) / 1e3
	res, cmd, err := perfJSON(o, 15*time.Minute, "-engine", "fast", "-scenario", "consume", "-count", n, "-size", "1024", "-credit", "1000",
		"-credit-mode", "exhausted", "-url", rb.url, "-source", "/amq/queue/plain", "-duration", "30s")
	rr.consume, rr.consumeCmd = res, cmd
	if res != nil && res.FirstDeliveryUnixNs > 0 {
		rr.firstMs = float64(res.FirstDeliveryUnixNs-t0.UnixNano()) / 1e6
	}
	if err != nil {
		rr.err = "consume: " + err.Error()
	}
	if serr := <-startDone; serr != nil && rr.err == "" {
		rr.err = "start: " + serr.Error()
	}
	return rr
}

func durableReport(o opts, scs []scenario, res map[string]map[string][]run1, restarts []restartRun, rmq *restartRun,
	loadBefore, loadAfter, rabbitNote, rabbitVersion, sameDisk, dataRoot string, took time.Duration) string {
	var w strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&w, f, a...) }
	get := func(sc, b string, f func(*perf.Result) float64) (stat, bool) { return stats(collect(res[sc][b], f)) }
	rate := func(r *perf.Result) float64 { return r.Rate }
	cpu := func(r *perf.Result) float64 { return r.BrokerCPUPerMsg }

	p("%s\n## Durable (epitaph's Pebble store vs RabbitMQ 3.10.8, 1 KiB messages with header durable=true)\n\n", durBegin)
	p("Generated by `go run ./cmd/epitaph-compare -durable` on %s (took %s). Medians of %d runs per target, min–max in parentheses; runs alternate between targets (order rotated every repetition). Brokers pinned to CPU %s, load client (epitaph-perf, fast engine) to CPU %s, loopback only; same machine as above (%s, %s, %s).\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second), o.reps, o.brokerCPU, o.clientCPU, strings.TrimSpace(cmdOut("nproc"))+" cores", cpuModel(), strings.TrimSpace(cmdOut("uname", "-sr")))
	p("- epitaph built from %s, Go %s: `--data-dir` a fresh directory under %s (not `--in-memory`); it sends `accepted` for a durable message only after the fsync of its Pebble batch (group commit).\n", sourceState(), runtime.Version(), reportPath(dataRoot))
	p("- RabbitMQ %s (AMQP 1.0 plugin), data in %s; same filesystem as epitaph's data directory: %s. Its AMQP 1.0 plugin settles a durable publish with `accepted` after the queue confirms it (classic: written and fsynced by the message store; quorum: committed to the Raft log).\n", orNA(rabbitVersion), filepath.Join(reportPath(o.rabbitDir), "mnesia"), sameDisk)
	p("- Queues: `plain` (durable classic) and `qq` (quorum, `x-queue-type: quorum`) on both brokers. RabbitMQ 3.10's AMQP 1.0 plugin publishes to and consumes from quorum queues without trouble, so quorum is included.\n")
	p("- Load average (1, 5, 15 min) before / after: %s / %s.", fields3(loadBefore), fields3(loadAfter))
	if parseLoad(loadBefore) > 0.5 || parseLoad(loadAfter) > 2.5 {
		p(" The machine was not idle (load average above 0.5 before, or above 2.5 after), so absolute figures and tails are noisier than on an idle machine; the ratios come from alternating runs in the same compare.")
	}
	p("\n")
	if rabbitNote != "" {
		p("- %s\n", rabbitNote)
	}

	ids := []string{"ep-classic", "ep-quorum", "rmq-classic", "rmq-quorum"}
	hdr := "| scenario | epitaph classic | epitaph quorum | RabbitMQ classic | RabbitMQ quorum | epitaph/RabbitMQ classic | epitaph/RabbitMQ quorum |\n|---|---|---|---|---|---|---|\n"
	p("\n### Throughput (msgs/s; end to end = delivered to the consumer, publish only = accepted)\n\n%s run per target; %s.\n\n", o.dur, "consumer credit 1000 (epitaph: refilled at half; RabbitMQ: granted again when exhausted); publish-only runs drain and check the queue afterwards (`-drain`)")
	p("%s", hdr)
	for _, sc := range scs {
		if sc.metric != "rate" {
			continue
		}
		var s [4]stat
		var ok [4]bool
		for i, id := range ids {
			s[i], ok[i] = get(sc.id, id, rate)
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", sc.title, fmtStat(s[0], ok[0], "%.0f"), fmtStat(s[1], ok[1], "%.0f"), fmtStat(s[2], ok[2], "%.0f"), fmtStat(s[3], ok[3], "%.0f"),
			ratio(s[0], s[2], ok[0], ok[2]), ratio(s[1], s[3], ok[1], ok[3]))
	}

	p("\n### Broker CPU per message (µs of utime+stime from /proc ÷ messages delivered, or accepted for publish only)\n\n")
	p("| scenario | epitaph classic | epitaph quorum | RabbitMQ classic | RabbitMQ quorum |\n|---|---|---|---|---|\n")
	for _, sc := range scs {
		if sc.metric != "rate" {
			continue
		}
		var cells []string
		for _, id := range ids {
			s, ok := get(sc.id, id, cpu)
			cells = append(cells, fmtStat(s, ok, "%.1f"))
		}
		p("| %s | %s |\n", sc.title, strings.Join(cells, " | "))
	}

	p("\n### Latency (ms): publish confirm (send → `accepted`) and end to end (send → delivered)\n\n")
	p("Throughput runs measure from when the publisher took the message (so at saturation it includes waiting for a window slot); the fixed-rate run from the intended send time (corrected for coordinated omission). The first 500 ms are left out. Median over runs of each run's percentile.\n\n")
	p("| scenario | target | confirm p50 | confirm p99 | end-to-end p50 | end-to-end p99 |\n|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		for i, id := range ids {
			if res[sc.id][id] == nil {
				continue
			}
			f := func(g func(*perf.Result) float64) string {
				s, ok := get(sc.id, id, g)
				if ok && s.med == 0 {
					return "—"
				}
				return fmtStat(s, ok, "%.2f")
			}
			p("| %s | %s | %s | %s | %s | %s |\n", sc.title, durTargets[i].title, f(func(r *perf.Result) float64 { return r.ConfP50 }), f(func(r *perf.Result) float64 { return r.ConfP99 }),
				f(func(r *perf.Result) float64 { return r.LatP50 }), f(func(r *perf.Result) float64 { return r.LatP99 }))
		}
	}

	// target
	p("\n### Target\n\n")
	e, eok := get("dur-1pub-1k", "ep-classic", rate)
	r, rok := get("dur-1pub-1k", "rmq-classic", rate)
	eq, eqok := get("dur-1pub-1k", "ep-quorum", rate)
	rq, rqok := get("dur-1pub-1k", "rmq-quorum", rate)
	if eok && rok {
		met := map[bool]string{true: "yes", false: "**no**"}
		p("| target | measured | met |\n|---|---|---|\n")
		p("| durable 1 KiB end to end, 1 publisher with 100 in flight: ≥ 2 × RabbitMQ 3.10.8 (classic durable queue on both) | %.0f vs %.0f msg/s = %.2f × | %s |\n", e.med, r.med, e.med/r.med, met[e.med >= 2*r.med])
		if eqok && rqok {
			p("| the same on quorum queues | %.0f vs %.0f msg/s = %.2f × | %s |\n", eq.med, rq.med, eq.med/rq.med, met[eq.med >= 2*rq.med])
		}
		p("| ≥ 18,000 msg/s (2 × RabbitMQ's figure on a CI-like 2-core machine) | %.0f msg/s (classic), %.0f msg/s (quorum) | %s |\n", e.med, eq.med, met[e.med >= 18000])
		p("\nEvery publish in these runs was `accepted` by the broker only after its fsync (epitaph: the broker's own contract, group commit, never NoSync; the CPU/latency figures above are consistent with that, but this compare does not trace the fsyncs itself).\n")
	} else {
		p("Not measured (a side is missing).\n")
	}

	// restart
	if len(restarts) > 0 || rmq != nil {
		p("\n### Restart with %d stored 1 KiB durable messages\n\n", o.restartCount)
		p("Fill the durable classic queue `plain` with %d messages (fast engine, 4 publishers × window 100, every one `accepted`), stop the broker, start it again on the same data, and time from the exec of the new process until it prints `amqp listening on` (RabbitMQ: until its AMQP port accepts a TCP connection; `rabbitmq310.sh start`) and until a consumer started right then gets the first message. The consumer then drains all of them and checks that none is missing or duplicated.\n\n", o.restartCount)
		p("| broker | stop | fill rate (msg/s) | store on disk | listening after | first delivery after | drain after restart (msg/s) | lost / duplicated |\n|---|---|---|---|---|---|---|---|\n")
		row := func(name string, rr restartRun) {
			fr, dr, ld := "n/a", "n/a", "n/a"
			if rr.fill != nil {
				fr = fmt.Sprintf("%.0f", rr.fill.Rate)
			}
			if rr.consume != nil {
				dr = fmt.Sprintf("%.0f", rr.consume.Rate)
				ld = fmt.Sprintf("%d / %d of %d", rr.consume.Lost, rr.consume.Duplicated, rr.consume.Sent)
			}
			ls, fs := "n/a", "n/a"
			if rr.listenMs > 0 {
				ls = fmt.Sprintf("%.2f s", rr.listenMs/1e3)
			}
			if rr.firstMs > 0 {
				fs = fmt.Sprintf("%.2f s", rr.firstMs/1e3)
			}
			p("| %s | %s | %s | %.0f MiB | %s | %s | %s | %s |\n", name, rr.signal, fr, float64(rr.storeBytes)/(1<<20), ls, fs, dr, ld)
		}
		for _, rr := range restarts {
			row("epitaph", rr)
		}
		if rmq != nil {
			row("RabbitMQ 3.10.8", *rmq)
		} else if !o.noRabbit {
			p("\nRabbitMQ's restart with %d messages was not measured in this run (-rabbit-restart off: it did not fit the time budget).\n", o.restartCount)
		}
		for _, rr := range append(restarts, ptrOr(rmq)...) {
			if rr.err != "" {
				p("\n- %s: %s\n", rr.signal, rr.err)
			}
		}
	}

	fails := failedRuns(scs, ids, res)
	p("\n### Integrity\n\n")
	if len(fails) == 0 {
		p("Every durable run delivered every message exactly once (no lost, duplicated, beyond-credit or undecodable deliveries) and every publish was accepted.\n")
	} else {
		p("Runs that failed (excluded from the medians):\n\n%s\n", strings.Join(fails, "\n"))
	}

	p("\n### Commands\n\n```\ngo run ./cmd/epitaph-compare %s\n```\n\nBrokers:\n\n```\ntaskset -c %s epitaph --listen 127.0.0.1:0 --data-dir DIR --http-listen \"\" --definitions DEFS.json --log-level warn\n%s start && %s topology && curl -u guest:guest -H content-type:application/json -X PUT http://127.0.0.1:15673/api/queues/%%2F/qq -d '{\"durable\":true,\"arguments\":{\"x-queue-type\":\"quorum\"}}'\ntaskset -a -p -c %s $(%s pid)\n```\n\nDEFS.json:\n\n```json\n%s```\n\nLoad runs (last repetition, exact):\n\n```\n",
		shellJoin(reportArgs(os.Args[1:])), o.brokerCPU, rabbitName(o), rabbitName(o), o.brokerCPU, rabbitName(o), durableDefinitions)
	for _, sc := range scs {
		for _, id := range ids {
			if rs := res[sc.id][id]; len(rs) > 0 {
				p("%s\n", rs[len(rs)-1].cmd)
			}
		}
	}
	// One example of the fill and consume commands (every run uses the same shape).
	if all := append(restarts, ptrOr(rmq)...); len(all) > 0 {
		if all[0].fillCmd != "" {
			p("%s\n", all[0].fillCmd)
		}
		if all[0].consumeCmd != "" {
			p("%s\n", all[0].consumeCmd)
		}
	}
	p("```\n%s", durEnd)
	return w.String()
}

func ptrOr(r *restartRun) []restartRun {
	if r == nil {
		return nil
	}
	return []restartRun{*r}
}

// durableBounds returns where the durable section of a report starts and
// ends (markers included); ok is false when it has none.
func durableBounds(report string) (start, end int, ok bool) {
	return sectionBounds(report, durBegin, durEnd)
}

// sectionBounds returns where the section between the markers begin and end
// starts and ends (markers included); ok is false when it has none.
func sectionBounds(report, begin, end string) (start, stop int, ok bool) {
	i := strings.Index(report, begin)
	if i < 0 {
		return 0, 0, false
	}
	j := strings.Index(report[i:], end)
	if j < 0 {
		return 0, 0, false
	}
	return i, i + j + len(end), true
}

// durableSection returns the durable section of a report, markers
// included, or "" when it has none.
func durableSection(report string) string {
	if i, j, ok := durableBounds(report); ok {
		return report[i:j]
	}
	return ""
}

// notesSection returns the hand-kept notes section of a report, markers
// included, or "" when it has none.
func notesSection(report string) string {
	if i, j, ok := sectionBounds(report, notesBegin, notesEnd); ok {
		return report[i:j]
	}
	return ""
}
