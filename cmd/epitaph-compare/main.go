// Command epitaph-compare runs epitaph, the null broker and RabbitMQ 3.10.8
// side by side under epitaph-perf and writes BENCHMARKS.md: medians of
// several runs with min-max, the ratios epitaph/RabbitMQ and epitaph/null,
// the machine and the exact commands.
//
//	go run ./cmd/epitaph-compare -no-rabbit          # builds the three binaries into a temp dir
//	go run ./cmd/epitaph-compare -reps 3 -out BENCHMARKS.md -rabbit PATH/TO/rabbitmq310.sh
//	epitaph-compare -epitaph ./epitaph -null ./epitaph-null -perf ./epitaph-perf -no-rabbit
//
// Brokers run pinned to CPU 0 (taskset -c 0; RabbitMQ's beam threads are
// re-pinned with taskset -a -p), the load client to CPU 1. Runs alternate
// between brokers, rotating the order each repetition. Everything listens
// on 127.0.0.1 only. RabbitMQ is started and stopped with the rabbitmq310.sh
// script, which is not part of this repository: -rabbit names it and is
// required unless -no-rabbit is given; -rabbit-dir is the script's state
// directory (its RMQ_DIR). The server needs `apt-get install -y
// rabbitmq-server curl`; when the named script or the server is missing,
// RabbitMQ is skipped and the report says so.
//
// The latency scenarios also measure the machine's floor alongside: the
// same records at the same rate over raw TCP through epitaph-null
// -tcp-relay (pinned like the null broker), driven by epitaph-perf
// -scenario tcp-latency; the report names it "TCP relay (no AMQP)".
//
// Besides the side-by-side runs, epitaph alone gets a 1,000,000-message
// fill (-fill-count-large, scenario fill-large) and 10,000 idle connections
// (-idle-connections, scenario idle), each on a freshly started process,
// and the codec and per-message micro-benchmarks run last (-micro, -only id
// micro): go test -bench -benchmem, pinned to the client CPU.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

const definitions = `{"vhosts":[{"name":"/"}],
 "exchanges":[{"name":"dlx","vhost":"/","type":"fanout","durable":true,"auto_delete":false,"internal":false,"arguments":{}}],
 "queues":[{"name":"work","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-dead-letter-exchange":"dlx"}},
           {"name":"dlq","vhost":"/","durable":true,"auto_delete":false,"arguments":{}},
           {"name":"plain","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}],
 "bindings":[{"source":"dlx","vhost":"/","destination":"dlq","destination_type":"queue","routing_key":"","arguments":{}}]}
`

type opts struct {
	epitaphBin, nullBin, perfBin string
	rabbit                       string
	rabbitDir                    string
	noRabbit                     bool
	reps                         int
	dur                          time.Duration
	fillCount                    int
	fillCountLarge               int
	idleConns                    int
	micro                        bool
	out                          string
	brokerCPU, clientCPU         string
	only                         string
	durable                      bool
	deep                         bool
	deepCount, deepProbe         int
	deepQueueType                string
	dataRoot                     string
	restartCount, restartReps    int
	rabbitRestart                bool
}

func main() {
	var o opts
	flag.StringVar(&o.epitaphBin, "epitaph", "", "epitaph binary (default: go build ./cmd/epitaph into a temp dir)")
	flag.StringVar(&o.nullBin, "null", "", "epitaph-null binary (default: go build)")
	flag.StringVar(&o.perfBin, "perf", "", "epitaph-perf binary (default: go build)")
	flag.StringVar(&o.rabbit, "rabbit", "", "the rabbitmq310.sh script that starts, stops and inspects RabbitMQ (not in this repository; required unless -no-rabbit)")
	flag.StringVar(&o.rabbitDir, "rabbit-dir", defaultRabbitDir(), "the script's state directory, passed to it as RMQ_DIR; RabbitMQ's data is in its mnesia subdirectory (default $RMQ_DIR, else rabbitmq310 in the temp dir)")
	flag.BoolVar(&o.noRabbit, "no-rabbit", false, "leave RabbitMQ out")
	flag.IntVar(&o.reps, "reps", 3, "runs per scenario and broker (median, min-max)")
	flag.DurationVar(&o.dur, "duration", 5*time.Second, "publishing time of each throughput/deadletter/latency run")
	flag.IntVar(&o.fillCount, "fill-count", 100000, "messages of 1 KiB for the memory (fill) scenario")
	flag.IntVar(&o.fillCountLarge, "fill-count-large", 1000000, "messages of 1 KiB for the extra fill run against epitaph alone, scenario fill-large (0: skip it)")
	flag.IntVar(&o.idleConns, "idle-connections", 10000, "idle connections to epitaph, scenario idle (0: skip it)")
	flag.BoolVar(&o.micro, "micro", true, "run the codec and broker-path micro-benchmarks (go test -bench -benchmem) after the broker runs; its -only id is micro")
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "report file")
	flag.StringVar(&o.brokerCPU, "broker-cpu", "0", "CPU list for the brokers (taskset -c)")
	flag.StringVar(&o.clientCPU, "client-cpu", "1", "CPU list for the load client (taskset -c)")
	flag.StringVar(&o.only, "only", "", "comma-separated scenario ids to run (default all; micro names the micro-benchmark step)")
	flag.BoolVar(&o.durable, "durable", false, "run the durable section instead (epitaph --data-dir vs RabbitMQ durable classic and quorum queues) and splice it into -out")
	flag.StringVar(&o.dataRoot, "data-root", "", "durable: parent of epitaph's data directories (default a temp dir; keep it on RabbitMQ's disk)")
	flag.IntVar(&o.restartCount, "restart-count", 1000000, "durable: stored 1 KiB messages for the restart measurement (0: skip it)")
	flag.IntVar(&o.restartReps, "restart-reps", 3, "durable: epitaph restarts (SIGKILL, SIGTERM, SIGKILL, ...)")
	flag.BoolVar(&o.rabbitRestart, "rabbit-restart", false, "durable: also measure RabbitMQ's restart with -restart-count messages (slow)")
	flag.BoolVar(&o.deep, "deep", false, "run the deep-queue section instead (epitaph alone: -deep-count durable 1 KiB messages in one queue, RSS, rates against a shallow queue, restart, drain) and splice it into -out")
	flag.IntVar(&o.deepCount, "deep-count", 1000000, "deep: messages the deep queue holds")
	flag.IntVar(&o.deepProbe, "deep-probe", 200000, "deep: messages of the rate probes (shallow queue, and published into the deep one)")
	flag.StringVar(&o.deepQueueType, "deep-queue-type", "classic", "deep: the type of both queues, classic or quorum (each type has its own section)")
	flag.Parse()
	if err := checkOpts(o); err != nil {
		fmt.Fprintln(os.Stderr, "epitaph-compare:", err)
		flag.Usage()
		os.Exit(2)
	}
	run := run
	if o.durable {
		run = runDurable
	}
	if o.deep {
		run = runDeep
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "epitaph-compare:", err)
		os.Exit(1)
	}
}

type broker struct {
	name       string
	url        string
	pid        int
	addr       func(queue string) string
	creditMode string
	cmd        *exec.Cmd
	restart    func() error
	// scenario, when set, is the epitaph-perf -scenario run against this
	// system in place of the scenario's own (the TCP relay: tcp-latency)
	scenario string
}

// tcpRelay is the id of the TCP relay (epitaph-null -tcp-relay) among the
// brokers: no AMQP, the machine's floor in the latency scenarios.
const tcpRelay = "tcp-relay"

// brokerLabel is how the latency table names a broker.
func brokerLabel(b string) string {
	if b == tcpRelay {
		return "TCP relay (no AMQP)"
	}
	return b
}

type scenario struct {
	id, title string
	args      []string // epitaph-perf args besides url/addresses/pid
	brokers   []string
	metric    string // rate, latency, rss
}

type run1 struct {
	res *perf.Result
	cmd string
	err string
}

func run(o opts) error {
	tmp, err := os.MkdirTemp("", "epitaph-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := buildBins(tmp, bin{&o.epitaphBin, "./cmd/epitaph"}, bin{&o.nullBin, "./cmd/epitaph-null"}, bin{&o.perfBin, "./cmd/epitaph-perf"}); err != nil {
		return err
	}
	defs := filepath.Join(tmp, "definitions.json")
	if err := os.WriteFile(defs, []byte(definitions), 0o644); err != nil {
		return err
	}
	loadBefore := readFile("/proc/loadavg")
	started := time.Now()

	brokers := map[string]*broker{}
	var order []string
	// epitaph
	ep := &broker{name: "epitaph", addr: func(q string) string { return "/queues/" + q }, creditMode: "half"}
	epArgs := []string{"-c", o.brokerCPU, o.epitaphBin, "--listen", "127.0.0.1:0", "--in-memory", "--http-listen", "", "--definitions", defs, "--log-level", "warn"}
	// startEp (re)starts epitaph with the standard arguments plus extra.
	startEp := func(extra ...string) error {
		if ep.cmd != nil {
			stopProc(ep.cmd)
			ep.cmd = nil
		}
		cmd, addr, err := startListening("taskset", append(epArgs[:len(epArgs):len(epArgs)], extra...)...)
		if err != nil {
			return fmt.Errorf("epitaph: %w", err)
		}
		ep.cmd, ep.url, ep.pid = cmd, "amqp://"+addr, cmd.Process.Pid
		return nil
	}
	ep.restart = func() error { return startEp() }
	if err := ep.restart(); err != nil {
		return err
	}
	defer func() { stopProc(ep.cmd) }()
	brokers["epitaph"] = ep
	order = append(order, "epitaph")
	// null
	ncmd, naddr, err := startListening("taskset", "-c", o.brokerCPU, o.nullBin, "--listen", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("epitaph-null: %w", err)
	}
	defer stopProc(ncmd)
	brokers["null"] = &broker{name: "null", url: "amqp://" + naddr, pid: ncmd.Process.Pid, addr: func(q string) string { return "/queues/" + q }, creditMode: "half"}
	order = append(order, "null")
	// the machine's floor for the latency scenarios: raw TCP through one relay process
	rcmd, raddr, err := startListening("taskset", "-c", o.brokerCPU, o.nullBin, "-tcp-relay", "--listen", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("epitaph-null -tcp-relay: %w", err)
	}
	defer stopProc(rcmd)
	brokers[tcpRelay] = &broker{name: tcpRelay, url: "tcp://" + raddr, pid: rcmd.Process.Pid, scenario: "tcp-latency"}
	order = append(order, tcpRelay)
	// RabbitMQ
	rabbitNote := ""
	rabbitVersion := ""
	if !o.noRabbit {
		rb, note, err := startRabbit(o)
		if err != nil {
			rabbitNote = "RabbitMQ left out: " + err.Error()
			logf("%s", rabbitNote)
		} else {
			rabbitNote = note
			brokers["rabbitmq"] = rb
			order = append(order, "rabbitmq")
			rabbitVersion = rabbitVersionOf()
			defer func() {
				out, _ := rabbitScript(o, "stop").CombinedOutput()
				logf("rabbitmq stop: %s", strings.TrimSpace(string(out)))
			}()
		}
	} else {
		rabbitNote = "RabbitMQ left out (-no-rabbit)."
	}

	dur := o.dur.String()
	all := []string{"epitaph", "rabbitmq", "null"}
	withRelay := []string{"epitaph", "rabbitmq", "null", tcpRelay}
	common := []string{"-window", "100", "-credit", "1000"}
	scenarios := []scenario{
		{"tp-fast-16", "throughput, fast engine, 16 B", append([]string{"-engine", "fast", "-scenario", "throughput", "-size", "16", "-duration", dur}, common...), all, "rate"},
		{"tp-fast-1k", "throughput, fast engine, 1 KiB", append([]string{"-engine", "fast", "-scenario", "throughput", "-size", "1024", "-duration", dur}, common...), all, "rate"},
		{"tp-go-16", "throughput, go-amqp engine, 16 B", append([]string{"-engine", "goamqp", "-scenario", "throughput", "-size", "16", "-duration", dur}, common...), all, "rate"},
		{"tp-go-1k", "throughput, go-amqp engine, 1 KiB", append([]string{"-engine", "goamqp", "-scenario", "throughput", "-size", "1024", "-duration", dur}, common...), all, "rate"},
		{"dl-fast-1k", "dead-letter (reject into DLQ, drain DLQ), fast engine, 1 KiB", append([]string{"-engine", "fast", "-scenario", "deadletter", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"lat-1k", "latency at 1,000 msg/s, fast engine, 1 KiB", append([]string{"-engine", "fast", "-scenario", "latency", "-rate", "1000", "-size", "1024", "-duration", dur}, common...), withRelay, "latency"},
		{"lat-10k", "latency at 10,000 msg/s, fast engine, 1 KiB", append([]string{"-engine", "fast", "-scenario", "latency", "-rate", "10000", "-size", "1024", "-duration", dur}, common...), withRelay, "latency"},
		// AMQP 0-9-1 (the fast091 engine, pipelined on the amqp091 codec:
		// publisher confirms with 100 in flight, basic.qos 1000, one ack per
		// delivery), and messages that cross protocols: published with one,
		// consumed (or dead-lettered and consumed) with the other. amqp091-go
		// spends more CPU per message than epitaph does, so with it the
		// client was the limit; tp-091go-1k keeps one amqp091-go row, what an
		// application on that library sees.
		{"tp-091-1k", "throughput, AMQP 0-9-1 (fast091 engine), 1 KiB", append([]string{"-engine", "fast091", "-scenario", "throughput", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"tp-091-10-1k", "throughput, 0-9-1 in (fast091 engine), 1.0 out (fast engine), 1 KiB", append([]string{"-engine", "fast091", "-consume-engine", "fast", "-scenario", "throughput", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"tp-10-091-1k", "throughput, 1.0 in (fast engine), 0-9-1 out (fast091 engine), 1 KiB", append([]string{"-engine", "fast", "-consume-engine", "fast091", "-scenario", "throughput", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"dl-091-1k", "dead-letter, AMQP 0-9-1 (fast091 engine: basic.reject), 1 KiB", append([]string{"-engine", "fast091", "-scenario", "deadletter", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"dl-091-10-1k", "dead-letter, published and rejected over 0-9-1 (fast091 engine), DLQ drained over 1.0 (fast engine), 1 KiB", append([]string{"-engine", "fast091", "-dlq-engine", "fast", "-scenario", "deadletter", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"dl-10-091-1k", "dead-letter, published and rejected over 1.0 (fast engine), DLQ drained over 0-9-1 (fast091 engine), 1 KiB", append([]string{"-engine", "fast", "-dlq-engine", "fast091", "-scenario", "deadletter", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"tp-091go-1k", "throughput, AMQP 0-9-1 (amqp091-go engine), 1 KiB", append([]string{"-engine", "amqp091", "-scenario", "throughput", "-size", "1024", "-duration", dur}, common...), []string{"epitaph", "rabbitmq"}, "rate"},
		{"fill", fmt.Sprintf("memory: fill %d x 1 KiB into a classic queue", o.fillCount), append([]string{"-engine", "fast", "-scenario", "fill", "-size", "1024", "-count", strconv.Itoa(o.fillCount), "-drain", "-settle", "2s"}, common...), []string{"epitaph", "rabbitmq"}, "rss"},
	}
	// epitaph only, each run on a fresh process (see freshEpitaph)
	if o.fillCountLarge > 0 {
		scenarios = append(scenarios, scenario{"fill-large", fmt.Sprintf("memory: fill %s x 1 KiB into a classic queue, epitaph only", commas(o.fillCountLarge)),
			append([]string{"-engine", "fast", "-scenario", "fill", "-size", "1024", "-count", strconv.Itoa(o.fillCountLarge), "-drain", "-settle", "2s"}, common...), []string{"epitaph"}, "rss"})
	}
	if o.idleConns > 0 {
		scenarios = append(scenarios, scenario{"idle", fmt.Sprintf("%s idle connections, epitaph only", commas(o.idleConns)),
			[]string{"-engine", "fast", "-scenario", "idle", "-connections", strconv.Itoa(o.idleConns), "-settle", "2s"}, []string{"epitaph"}, "idle"})
	}
	runMicroStep := o.micro
	if o.only != "" {
		known := map[string]bool{"fill-large": true, "idle": true, "micro": true} // known even when their flag skips them
		for _, s := range scenarios {
			known[s.id] = true
		}
		keep := map[string]bool{}
		for _, s := range strings.Split(o.only, ",") {
			if !known[s] {
				return fmt.Errorf("-only: unknown scenario id %q", s)
			}
			keep[s] = true
		}
		var ss []scenario
		for _, s := range scenarios {
			if keep[s.id] {
				ss = append(ss, s)
			}
		}
		scenarios = ss
		runMicroStep = runMicroStep && keep["micro"]
	}

	results := map[string]map[string][]run1{} // scenario -> broker -> runs
	for rep := 0; rep < o.reps; rep++ {
		for _, sc := range scenarios {
			bs := present(sc.brokers, brokers)
			// rotate the order each repetition so no broker always goes first
			if len(bs) > 0 {
				k := rep % len(bs)
				bs = append(bs[k:], bs[:k]...)
			}
			for _, bn := range bs {
				b := brokers[bn]
				freshBefore, freshAfter := freshEpitaph(sc.id)
				if freshBefore && bn == "epitaph" {
					if err := startEp(epitaphExtraArgs(o, sc.id)...); err != nil { // a fresh process: RSS not inflated by earlier runs' heap
						return err
					}
				}
				if bn == "rabbitmq" {
					_ = rabbitScript(o, "purge").Run()
				}
				r := runPerf(o, sc, b)
				if results[sc.id] == nil {
					results[sc.id] = map[string][]run1{}
				}
				results[sc.id][bn] = append(results[sc.id][bn], r)
				logf("rep %d %-10s %-8s %s", rep+1, sc.id, bn, summary(sc, r))
				if freshAfter && bn == "epitaph" {
					if err := startEp(); err != nil { // the standard broker again for the runs after this one
						return err
					}
				}
			}
		}
	}
	loadAfter := readFile("/proc/loadavg")
	var micro []microRun
	if runMicroStep {
		micro = runMicro(o)
	}
	report := buildReport(o, scenarios, results, order, brokers, loadBefore, loadAfter, rabbitNote, rabbitVersion, micro, time.Since(started))
	if old, err := os.ReadFile(o.out); err == nil {
		// Keep the durable section of an earlier -durable run, and the
		// notes, which no run writes.
		if sec := durableSection(string(old)); sec != "" {
			report += "\n" + sec + "\n"
		}
		if sec := deepSections(string(old)); sec != "" {
			report += "\n" + strings.TrimRight(sec, "\n") + "\n"
		}
		if sec := notesSection(string(old)); sec != "" {
			report += "\n" + sec + "\n"
		}
	}
	if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
		return err
	}
	logf("wrote %s (%s)", o.out, time.Since(started).Round(time.Second))
	return nil
}

func present(want []string, have map[string]*broker) []string {
	var out []string
	for _, w := range want {
		if have[w] != nil {
			out = append(out, w)
		}
	}
	return out
}

func runPerf(o opts, sc scenario, b *broker) run1 {
	timeout := perfTimeout(o, sc)
	args := []string{"-c", o.clientCPU, o.perfBin}
	args = append(args, sc.args...)
	if b.scenario != "" {
		for i := range len(args) - 1 {
			if args[i] == "-scenario" {
				args[i+1] = b.scenario
			}
		}
	}
	q := "plain"
	if strings.Contains(strings.Join(sc.args, " "), "deadletter") {
		q = "work"
	}
	args = append(args, "-url", b.url)
	if b.addr != nil { // the TCP relay has no addresses and no credit
		args = append(args, "-target", b.addr(q), "-source", b.addr(q), "-dlq-source", b.addr("dlq"))
	}
	if b.creditMode != "" {
		args = append(args, "-credit-mode", b.creditMode)
	}
	args = append(args, "-broker-pid", strconv.Itoa(b.pid), "-json", "-quiet", "-timeout", fmtDur(timeout))
	cmdline := "taskset " + shellJoin(args)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "taskset", args...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	r := run1{cmd: cmdline}
	var res perf.Result
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr == nil && res.Scenario != "" {
		r.res = &res
	}
	if err != nil {
		r.err = strings.TrimSpace(err.Error() + ": " + lastLine(stderr.String()))
	}
	return r
}

func summary(sc scenario, r run1) string {
	if r.res == nil {
		return "ERROR " + r.err
	}
	s := ""
	switch sc.metric {
	case "rate":
		s = fmt.Sprintf("%.0f msg/s, broker %.2f µs/msg", r.res.Rate, r.res.BrokerCPUPerMsg)
	case "latency":
		s = fmt.Sprintf("p50 %.3f p99 %.3f max %.3f ms", r.res.LatP50, r.res.LatP99, r.res.LatMax)
	case "rss":
		s = fmt.Sprintf("%.0f B RSS/msg", r.res.BrokerRSSPerMsg)
	case "idle":
		s = fmt.Sprintf("%.0f B RSS/conn (%.1f KiB), opened %d, failed %d, closed by the broker %d",
			r.res.BrokerRSSPerConn, r.res.BrokerRSSPerConnKiB, r.res.ConnOpened, r.res.ConnFailed, r.res.ConnClosedByBroker)
	}
	if r.err != "" {
		s += " (" + r.err + ")"
	}
	return s
}

// startListening starts a broker and waits for its "amqp listening on" line.
func startListening(name string, args ...string) (*exec.Cmd, string, error) {
	c := exec.Command(name, args...)
	c.Stderr = os.Stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := c.Start(); err != nil {
		return nil, "", err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "amqp listening on "); ok {
				lines <- a
			}
		}
		close(lines)
	}()
	select {
	case a, ok := <-lines:
		if !ok {
			_ = c.Wait()
			return nil, "", errors.New("exited before listening")
		}
		return c, a, nil
	case <-time.After(20 * time.Second):
		stopProc(c)
		return nil, "", errors.New("no 'amqp listening on' line within 20 s")
	}
}

func stopProc(c *exec.Cmd) {
	if c == nil || c.Process == nil {
		return
	}
	_ = c.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

// errRabbitRequired: the RabbitMQ script is not part of this repository, so
// there is no path to default to; a run names it or leaves RabbitMQ out.
var errRabbitRequired = errors.New("-rabbit PATH/TO/rabbitmq310.sh is required unless -no-rabbit is given")

// checkOpts rejects flag combinations that cannot run.
func checkOpts(o opts) error {
	if o.rabbit == "" && !o.noRabbit && !o.deep {
		return errRabbitRequired
	}
	return nil
}

// defaultRabbitDir is the script's own default state directory: $RMQ_DIR,
// else rabbitmq310 in the temp dir.
func defaultRabbitDir() string {
	if d := os.Getenv("RMQ_DIR"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "rabbitmq310")
}

// rabbitScript is the command that runs the rabbitmq310.sh script with args,
// on the state directory of -rabbit-dir.
func rabbitScript(o opts, args ...string) *exec.Cmd {
	c := exec.Command("bash", append([]string{o.rabbit}, args...)...)
	c.Env = append(os.Environ(), "RMQ_DIR="+o.rabbitDir)
	return c
}

func startRabbit(o opts) (*broker, string, error) {
	if _, err := os.Stat(o.rabbit); err != nil {
		return nil, "", fmt.Errorf("no script %s", o.rabbit)
	}
	if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
		return nil, "", errors.New("rabbitmq-server is not installed (apt-get install -y rabbitmq-server curl)")
	}
	for _, step := range []string{"start", "topology"} {
		out, err := rabbitScript(o, step).CombinedOutput()
		if err != nil {
			return nil, "", fmt.Errorf("rabbitmq310.sh %s: %v: %s", step, err, lastLine(string(out)))
		}
	}
	out, err := rabbitScript(o, "pid").Output()
	if err != nil {
		return nil, "", fmt.Errorf("rabbitmq310.sh pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, "", fmt.Errorf("rabbitmq pid %q", out)
	}
	note := ""
	if out, err := exec.Command("taskset", "-a", "-p", "-c", o.brokerCPU, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		note = fmt.Sprintf("could not pin RabbitMQ (%v: %s)", err, lastLine(string(out)))
	}
	port := os.Getenv("RMQ_PORT")
	if port == "" {
		port = "5673"
	}
	return &broker{name: "rabbitmq", url: "amqp://127.0.0.1:" + port, pid: pid,
		addr: func(q string) string { return "/amq/queue/" + q }, creditMode: "exhausted"}, note, nil
}

func rabbitVersionOf() string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server").Output()
	if err != nil {
		return "unknown"
	}
	return string(out)
}

// ---- report ----

type stat struct {
	med, lo, hi float64
	n           int
}

func stats(vals []float64) (stat, bool) {
	if len(vals) == 0 {
		return stat{}, false
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{m, s[0], s[len(s)-1], len(s)}, true
}

func collect(runs []run1, f func(*perf.Result) float64) []float64 {
	var v []float64
	for _, r := range runs {
		if r.res != nil && r.err == "" {
			v = append(v, f(r.res))
		}
	}
	return v
}

// pairedRatio is the median over repetitions of a's value ÷ b's value in
// the same repetition. A repetition's two runs are about a minute apart, so
// the host's drift between repetitions (±15% within minutes on a shared VM)
// cancels out, which it does not in a ratio of the two medians.
func pairedRatio(a, b []run1, f func(*perf.Result) float64) (stat, bool) {
	var v []float64
	for i := range min(len(a), len(b)) {
		if a[i].res == nil || a[i].err != "" || b[i].res == nil || b[i].err != "" || f(b[i].res) == 0 {
			continue
		}
		v = append(v, f(a[i].res)/f(b[i].res))
	}
	return stats(v)
}

func fmtStat(s stat, ok bool, format string) string {
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", s.med, s.lo, s.hi)
}

func ratio(a, b stat, aok, bok bool) string {
	if !aok || !bok || b.med == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a.med/b.med)
}

func buildReport(o opts, scs []scenario, res map[string]map[string][]run1, order []string, brokers map[string]*broker,
	loadBefore, loadAfter, rabbitNote, rabbitVersion string, micro []microRun, took time.Duration) string {
	var w strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&w, f, a...) }
	get := func(sc, b string, f func(*perf.Result) float64) (stat, bool) { return stats(collect(res[sc][b], f)) }
	rate := func(r *perf.Result) float64 { return r.Rate }
	cpu := func(r *perf.Result) float64 { return r.BrokerCPUPerMsg }
	brokerUtil := func(r *perf.Result) float64 { return 100 * r.BrokerCPUSeconds / max(r.Elapsed, 1e-9) }
	clientUtil := func(r *perf.Result) float64 { return 100 * r.ClientCPUSeconds / max(r.Elapsed, 1e-9) }

	p("# Benchmarks\n\n")
	p("Generated by `go run ./cmd/epitaph-compare` on %s (took %s). Medians of %d runs per broker, min–max in parentheses; runs alternate between brokers (order rotated every repetition). Broker pinned to CPU %s (`taskset -c %s`; RabbitMQ's beam threads with `taskset -a -p`), load client to CPU %s. Loopback only. On a shared 2-core machine absolute figures drift: read the ratios, which come from the same run.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second), o.reps, o.brokerCPU, o.brokerCPU, o.clientCPU)
	p("## Machine\n\n")
	p("| | |\n|---|---|\n")
	p("| nproc | %s |\n", strings.TrimSpace(cmdOut("nproc")))
	p("| CPU | %s |\n", cpuModel())
	p("| kernel | %s |\n", strings.TrimSpace(cmdOut("uname", "-sr")))
	p("| Go | %s |\n", runtime.Version())
	p("| memory | %s |\n", memTotal())
	p("| RabbitMQ | %s |\n", orNA(rabbitVersion))
	p("| epitaph built from | %s |\n", sourceState())
	p("| load average before / after (1, 5, 15 min) | %s / %s |\n\n", fields3(loadBefore), fields3(loadAfter))
	if la := parseLoad(loadBefore); la > 0.5 || parseLoad(loadAfter) > 2.5 {
		p("The machine was not idle (load average above 0.5 before the compare, or above 2.5 after it; the brokers and the client need about 2 cores themselves), so tails and absolute rates are noisier than on an idle machine.\n\n")
	}
	if rabbitNote != "" {
		p("%s\n\n", rabbitNote)
	}

	p("## Throughput (msgs/s, end to end: publish → queue → consume)\n\n")
	p("1 sender with 100 unsettled transfers in flight, 1 receiver with credit 1000 (epitaph and null: refilled at half; RabbitMQ: granted again when exhausted, as 3.10 mishandles refills), %s of publishing per run.\n\n", o.dur)
	p("| scenario | epitaph | RabbitMQ 3.10.8 | null broker | epitaph/RabbitMQ | epitaph/null |\n|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		if sc.metric != "rate" {
			continue
		}
		e, eok := get(sc.id, "epitaph", rate)
		r, rok := get(sc.id, "rabbitmq", rate)
		n, nok := get(sc.id, "null", rate)
		en := ratio(e, n, eok, nok)
		if !contains(sc.brokers, "null") {
			en = "—"
		}
		p("| %s | %s | %s | %s | %s | %s |\n", sc.title, fmtStat(e, eok, "%.0f"), fmtStat(r, rok, "%.0f"), dash(sc, "null", fmtStat(n, nok, "%.0f")), ratio(e, r, eok, rok), en)
	}
	// dead-letter vs plain
	if _, ok := res["dl-fast-1k"]; ok {
		p("\nDead-letter path relative to the plain path (1 KiB, fast engine): ")
		var parts []string
		for _, b := range []string{"epitaph", "rabbitmq"} {
			d, dok := get("dl-fast-1k", b, rate)
			t, tok := get("tp-fast-1k", b, rate)
			pr, pok := pairedRatio(res["dl-fast-1k"][b], res["tp-fast-1k"][b], rate)
			parts = append(parts, fmt.Sprintf("%s %s per repetition, %s as a ratio of the median rates", b, fmtStat(pr, pok, "%.2f"), ratio(d, t, dok, tok)))
		}
		p("%s. Per repetition is the median of each repetition's dead-letter rate ÷ its plain rate; the two runs of a repetition are about a minute apart, so the host's drift between repetitions cancels out.\n", strings.Join(parts, "; "))
	}

	p("\n## Broker CPU per message (µs of utime+stime from /proc/PID/stat over the run ÷ messages delivered)\n\n")
	p("| scenario | epitaph | RabbitMQ 3.10.8 | null broker | epitaph/RabbitMQ |\n|---|---|---|---|---|\n")
	for _, sc := range scs {
		if sc.metric != "rate" {
			continue
		}
		e, eok := get(sc.id, "epitaph", cpu)
		r, rok := get(sc.id, "rabbitmq", cpu)
		n, nok := get(sc.id, "null", cpu)
		p("| %s | %s | %s | %s | %s |\n", sc.title, fmtStat(e, eok, "%.2f"), fmtStat(r, rok, "%.1f"), dash(sc, "null", fmtStat(n, nok, "%.2f")), ratio(e, r, eok, rok))
	}
	p("\nCPU time is read with 10 ms tick resolution; over runs of several seconds that is well under 1%% of the figure.\n")

	p("\n## Core utilisation during the throughput runs (CPU seconds ÷ run time; 100%% = the one pinned core)\n\n")
	p("Which side is the limit: a side near 100%% is saturated. Other processes on the machine also take time from both cores.\n\n")
	p("| scenario | broker | broker core | client core |\n|---|---|---|---|\n")
	for _, sc := range scs {
		if sc.metric != "rate" {
			continue
		}
		for _, b := range []string{"epitaph", "rabbitmq", "null"} {
			if res[sc.id][b] == nil {
				continue
			}
			bu, bok := get(sc.id, b, brokerUtil)
			cu, cok := get(sc.id, b, clientUtil)
			p("| %s | %s | %s | %s |\n", sc.title, b, fmtStat(bu, bok, "%.0f%%"), fmtStat(cu, cok, "%.0f%%"))
		}
	}

	latencySection(p, scs, res)

	_, hasFill := res["fill"]
	_, hasLarge := res["fill-large"]
	if hasFill || hasLarge {
		p("\n## Memory (in-memory classic queue)\n\n")
		p("| | epitaph | RabbitMQ 3.10.8 | epitaph/RabbitMQ |\n|---|---|---|---|\n")
		per := func(r *perf.Result) float64 { return r.BrokerRSSPerMsg }
		tot := func(r *perf.Result) float64 { return float64(r.BrokerRSSAfter-r.BrokerRSSBefore) / (1 << 20) }
		if hasFill {
			e, eok := get("fill", "epitaph", per)
			r, rok := get("fill", "rabbitmq", per)
			p("| RSS growth per queued 1 KiB message (bytes) | %s | %s | %s |\n", fmtStat(e, eok, "%.0f"), fmtStat(r, rok, "%.0f"), ratio(e, r, eok, rok))
			e2, eok2 := get("fill", "epitaph", tot)
			r2, rok2 := get("fill", "rabbitmq", tot)
			p("| RSS growth for %d messages (MiB) | %s | %s | |\n", o.fillCount, fmtStat(e2, eok2, "%.1f"), fmtStat(r2, rok2, "%.1f"))
		}
		if hasLarge {
			e, eok := get("fill-large", "epitaph", per)
			p("| RSS growth per queued 1 KiB message at %s (epitaph only; bytes) | %s | — | — |\n", commas(o.fillCountLarge), fmtStat(e, eok, "%.0f"))
			e2, eok2 := get("fill-large", "epitaph", tot)
			p("| RSS growth for %s messages (epitaph only; MiB) | %s | — | |\n", commas(o.fillCountLarge), fmtStat(e2, eok2, "%.1f"))
		}
		p("\nVmRSS from /proc/PID/status before the fill and 2 s after the last publish settled; epitaph is restarted before each fill run so its heap is fresh (RabbitMQ is purged instead). The messages are then drained and checked (`-drain`).")
		switch {
		case hasLarge && o.fillCountLarge == fillTargetCount:
			p(" Target: at most 1.3 × 1024 + 150 = 1481 bytes per message at 1,000,000 messages, measured by the epitaph-only row")
		case hasLarge:
			p(" Target: at most 1.3 × 1024 + 150 = 1481 bytes per message (the target is at 1,000,000 messages; the epitaph-only row uses %s)", commas(o.fillCountLarge))
		default:
			p(" Target: at most 1.3 × 1024 + 150 = 1481 bytes per message (the target is at 1,000,000 messages; this run uses %d)", o.fillCount)
		}
		if hasFill && hasLarge {
			p("; the %d-message row runs against both brokers for the ratio", o.fillCount)
		}
		p(".\n")
	}
	if runs := res["idle"]["epitaph"]; len(runs) > 0 {
		idleSection(p, o, runs)
	}
	if len(micro) > 0 {
		microSection(p, micro)
	}

	// targets
	p("\n## Targets (from the figures above)\n\n| target | measured | met |\n|---|---|---|\n")
	target := func(name, measured string, met *bool) {
		m := "n/a"
		if met != nil {
			m = map[bool]string{true: "yes", false: "**no**"}[*met]
		}
		p("| %s | %s | %s |\n", name, measured, m)
	}
	bp := func(b bool) *bool { return &b }
	if e, eok := get("tp-fast-1k", "epitaph", cpu); eok {
		if r, rok := get("tp-fast-1k", "rabbitmq", cpu); rok {
			target("broker CPU/msg, 1 KiB, credit 1000 ≤ 1/10 of RabbitMQ's", fmt.Sprintf("%.2f vs %.1f µs (%.3f)", e.med, r.med, e.med/r.med), bp(e.med <= r.med/10))
		}
	}
	for _, id := range []string{"tp-fast-16", "tp-fast-1k"} {
		e, eok := get(id, "epitaph", rate)
		r, rok := get(id, "rabbitmq", rate)
		n, nok := get(id, "null", rate)
		if eok && rok {
			target(id+": ≥ 5 × RabbitMQ", fmt.Sprintf("%.1f ×", e.med/r.med), bp(e.med >= 5*r.med))
		}
		if eok && nok {
			target(id+": ≥ 0.5 × null broker", fmt.Sprintf("%.2f ×", e.med/n.med), bp(e.med >= 0.5*n.med))
		}
	}
	for _, id := range []string{"tp-go-16", "tp-go-1k"} {
		e, eok := get(id, "epitaph", rate)
		n, nok := get(id, "null", rate)
		bu, bok := get(id, "epitaph", brokerUtil)
		cu, cok := get(id, "epitaph", clientUtil)
		if eok && nok && bok && cok {
			// The client is the limit when its core is saturated and epitaph
			// is as fast as the null broker, which does nothing but queue:
			// a faster broker could not raise the rate.
			target(id+": the go-amqp client, not the broker, is the limit (client core ≥ 90%, epitaph ≥ 0.9 × the null broker's rate with the same client)",
				fmt.Sprintf("client core %.0f%%, epitaph core %.0f%%; epitaph %.0f vs null %.0f msg/s (%.2f)", cu.med, bu.med, e.med, n.med, e.med/n.med),
				bp(cu.med >= 90 && e.med >= 0.9*n.med))
		}
	}
	if pr, ok := pairedRatio(res["dl-fast-1k"]["epitaph"], res["tp-fast-1k"]["epitaph"], rate); ok {
		d, _ := get("dl-fast-1k", "epitaph", rate)
		t, _ := get("tp-fast-1k", "epitaph", rate)
		target("dead-letter rate ≥ 0.7 × plain (median of the per-repetition ratios)",
			fmt.Sprintf("%s; ratio of the median rates %.2f", fmtStat(pr, true, "%.2f"), d.med/t.med), bp(pr.med >= 0.7))
	}
	// AMQP 0-9-1 against RabbitMQ 3.10.8's 0-9-1, and the cross-protocol
	// paths against the same-protocol 0-9-1 path
	if e, eok := get("tp-091-1k", "epitaph", cpu); eok {
		if r, rok := get("tp-091-1k", "rabbitmq", cpu); rok {
			target("0-9-1, 1 KiB, confirms 100 in flight, prefetch 1000: broker CPU/msg ≤ 1/5 of RabbitMQ's 0-9-1", fmt.Sprintf("%.2f vs %.1f µs (%.3f)", e.med, r.med, e.med/r.med), bp(e.med <= r.med/5))
		}
	}
	if e, eok := get("tp-091-1k", "epitaph", rate); eok {
		if r, rok := get("tp-091-1k", "rabbitmq", rate); rok {
			target("0-9-1, 1 KiB: throughput ≥ 3 × RabbitMQ's 0-9-1", fmt.Sprintf("%.1f ×", e.med/r.med), bp(e.med >= 3*r.med))
		}
	}
	for _, pair := range [][2]string{{"tp-091-10-1k", "tp-091-1k"}, {"tp-10-091-1k", "tp-091-1k"}, {"dl-091-10-1k", "dl-091-1k"}, {"dl-10-091-1k", "dl-091-1k"}} {
		if pr, ok := pairedRatio(res[pair[0]]["epitaph"], res[pair[1]]["epitaph"], rate); ok {
			target(pair[0]+": cross-protocol rate ≥ 0.8 × "+pair[1]+" (median of the per-repetition ratios)", fmtStat(pr, true, "%.2f"), bp(pr.med >= 0.8))
		}
	}
	if s, ok := get("lat-1k", "epitaph", func(r *perf.Result) float64 { return r.LatP99 }); ok {
		target("p99 ≤ 0.25 ms at 1,000 msg/s", fmt.Sprintf("%.3f ms", s.med), bp(s.med <= 0.25))
	}
	if s, ok := get("lat-10k", "epitaph", func(r *perf.Result) float64 { return r.LatP99 }); ok {
		target("p99 < 1 ms at 10,000 msg/s", fmt.Sprintf("%.3f ms", s.med), bp(s.med < 1))
	}
	if s, ok := get("fill-large", "epitaph", func(r *perf.Result) float64 { return r.BrokerRSSPerMsg }); ok {
		name := "RSS ≤ 1481 B per queued 1 KiB message at 1,000,000 messages"
		if o.fillCountLarge != fillTargetCount {
			name = fmt.Sprintf("RSS ≤ 1481 B per queued 1 KiB message (%s messages, not 1,000,000)", commas(o.fillCountLarge))
		}
		target(name, fmt.Sprintf("%.0f B (%.0f–%.0f)", s.med, s.lo, s.hi), bp(s.med <= 1481))
	} else if s, ok := get("fill", "epitaph", func(r *perf.Result) float64 { return r.BrokerRSSPerMsg }); ok {
		target(fmt.Sprintf("RSS ≤ 1481 B per queued 1 KiB message (%d messages, not 1,000,000)", o.fillCount), fmt.Sprintf("%.0f B", s.med), bp(s.med <= 1481))
	}
	if !idleTarget(target, o, res["idle"]["epitaph"]) {
		target("10,000 idle connections ≤ 50 KiB each", "not measured in this compare (-idle-connections 0 or -only without idle, or every run failed)", nil)
	}
	if len(micro) > 0 {
		microTargets(target, micro)
	} else {
		target("codec allocations", "not measured in this compare (-micro=false or -only without micro)", nil)
	}

	fails := failedRuns(scs, order, res)
	p("\n## Integrity\n\n")
	if len(fails) == 0 {
		p("Every run delivered every message exactly once: no lost, duplicated, beyond-credit or undecodable deliveries, and every publish was accepted.\n")
	} else {
		p("Runs that failed (excluded from the medians):\n\n%s\n", strings.Join(fails, "\n"))
	}

	idleBrokerCmd := ""
	if len(res["idle"]["epitaph"]) > 0 {
		idleBrokerCmd = fmt.Sprintf("\nFor the idle-connection runs epitaph gets `--max-connections %d` added.\n", o.idleConns+idleConnMargin)
	}
	p("\n## Commands\n\nThe compare itself:\n\n```\n%s\n```\n\nBrokers (ports are picked by the OS; RabbitMQ with `%s start && %s topology`, then `taskset -a -p -c %s $(%s pid)`):\n\n```\ntaskset -c %s epitaph --listen 127.0.0.1:0 --in-memory --http-listen \"\" --definitions DEFS.json --log-level warn\ntaskset -c %s epitaph-null --listen 127.0.0.1:0\ntaskset -c %s epitaph-null -tcp-relay --listen 127.0.0.1:0\n```\n%s\nDEFS.json:\n\n```json\n%s```\n\nLoad runs (last repetition, exact):\n\n```\n",
		"go run ./cmd/epitaph-compare "+shellJoin(reportArgs(os.Args[1:])), rabbitName(o), rabbitName(o), o.brokerCPU, rabbitName(o), o.brokerCPU, o.brokerCPU, o.brokerCPU, idleBrokerCmd, definitions)
	for _, sc := range scs {
		for _, b := range order {
			if rs := res[sc.id][b]; len(rs) > 0 {
				p("%s\n", rs[len(rs)-1].cmd)
			}
		}
	}
	p("```\n")
	if len(micro) > 0 {
		p("\nMicro-benchmarks (from the module root):\n\n```\n")
		for _, m := range micro {
			if m.cmd != "" {
				p("%s\n", m.cmd)
			}
		}
		p("```\n")
	}
	return w.String()
}

// failedRuns lists the runs that failed, a markdown bullet each, in
// scenario, system and run order.
func failedRuns(scs []scenario, systems []string, res map[string]map[string][]run1) []string {
	var fails []string
	for _, sc := range scs {
		for _, b := range systems {
			for i, r := range res[sc.id][b] {
				if r.err != "" {
					fails = append(fails, fmt.Sprintf("- %s on %s, run %d: %s", sc.id, b, i+1, r.err))
				}
			}
		}
	}
	return fails
}

// latencySection writes the latency table: a row per scenario and system,
// the TCP relay (the machine's floor, no AMQP) after the brokers.
func latencySection(p func(string, ...any), scs []scenario, res map[string]map[string][]run1) {
	get := func(sc, b string, f func(*perf.Result) float64) (stat, bool) { return stats(collect(res[sc][b], f)) }
	p("\n## Latency (ms, fixed rate, from the intended send time: corrected for coordinated omission)\n\n")
	for _, sc := range scs {
		if sc.metric == "latency" && res[sc.id][tcpRelay] != nil {
			p("%s is no broker: `epitaph-null -tcp-relay`, pinned like the brokers, copies the same records, sent at the same rate by `epitaph-perf -scenario tcp-latency`, from one raw TCP connection to another, so its row is the machine's floor for a message crossing one relay process on loopback.\n\n", brokerLabel(tcpRelay))
			break
		}
	}
	p("| scenario | broker | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n")
	for _, sc := range scs {
		if sc.metric != "latency" {
			continue
		}
		for _, b := range []string{"epitaph", "rabbitmq", "null", tcpRelay} {
			if res[sc.id][b] == nil {
				continue
			}
			f := func(g func(*perf.Result) float64) string { s, ok := get(sc.id, b, g); return fmtStat(s, ok, "%.3f") }
			p("| %s | %s | %s | %s | %s | %s |\n", sc.title, brokerLabel(b), f(func(r *perf.Result) float64 { return r.LatP50 }), f(func(r *perf.Result) float64 { return r.LatP90 }),
				f(func(r *perf.Result) float64 { return r.LatP99 }), f(func(r *perf.Result) float64 { return r.LatMax }))
		}
	}
	p("\nThe first 500 ms of each run are left out (warm-up). Each value is the median over runs of that run's percentile.\n")
}

func dash(sc scenario, b, s string) string {
	if !contains(sc.brokers, b) {
		return "—"
	}
	return s
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// sourceState names the commit the brokers were built from and whether the
// work tree had uncommitted changes (they are part of the build).
func sourceState() string {
	head := strings.TrimSpace(cmdOut("git", "rev-parse", "--short", "HEAD"))
	if head == "" {
		return "unknown (not a git checkout)"
	}
	if strings.TrimSpace(cmdOut("git", "status", "--porcelain", "--untracked-files=no")) != "" {
		return "commit " + head + " plus uncommitted changes in the work tree"
	}
	return "commit " + head
}

func orNA(s string) string {
	if s == "" {
		return "not run"
	}
	return s
}

func cpuModel() string {
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() string {
	for _, l := range strings.Split(readFile("/proc/meminfo"), "\n") {
		if strings.HasPrefix(l, "MemTotal:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "MemTotal:"))
		}
	}
	return "unknown"
}

func fields3(s string) string {
	f := strings.Fields(s)
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

func parseLoad(s string) float64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }

func cmdOut(name string, args ...string) string {
	out, _ := exec.Command(name, args...).Output()
	return string(out)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		a = reportPath(a)
		if a == "" || strings.ContainsAny(a, " \t\"'$") {
			q[i] = strconv.Quote(a)
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// reportPath is how the report names an argument that is a file or
// directory of this machine (a binary, a definitions file, a data
// directory, mostly in a temporary directory): by its base name, since
// where it lives is a fact of the machine, not of the run. Other arguments
// (an address such as /queues/dlq) are kept as they are.
func reportPath(a string) string {
	if !filepath.IsAbs(a) {
		return a
	}
	if _, err := os.Stat(a); err != nil {
		return a
	}
	return filepath.Base(a)
}

// rabbitName is how the report names the -rabbit script: by its file name,
// since where it lives is a fact of the machine, not of the run.
func rabbitName(o opts) string {
	if o.rabbit == "" {
		return "rabbitmq310.sh"
	}
	return filepath.Base(o.rabbit)
}

// reportArgs are the command-line arguments as the report shows them: the
// -rabbit script by its file name (see rabbitName).
func reportArgs(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		switch a := out[i]; {
		case a == "-rabbit" || a == "--rabbit":
			if i+1 < len(out) {
				out[i+1] = filepath.Base(out[i+1])
				i++
			}
		case strings.HasPrefix(a, "-rabbit=") || strings.HasPrefix(a, "--rabbit="):
			k, v, _ := strings.Cut(a, "=")
			out[i] = k + "=" + filepath.Base(v)
		}
	}
	return out
}

func logf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

var _ = io.Discard
