// Command epitaph-perf is a load tool for any AMQP 1.0 or 0-9-1 broker
// (like RabbitMQ's PerfTest): throughput, dead-letter, fixed-rate latency
// and fill scenarios with four client engines, go-amqp and a fast
// pipelining client on epitaph's amqp10 codec for AMQP 1.0, amqp091-go and
// a fast pipelining client on epitaph's amqp091 codec (fast091) for AMQP
// 0-9-1; publishers and consumers may use different engines, so
// messages cross protocols. Every message carries a sequence number; lost,
// duplicated and beyond-credit deliveries are reported and make it exit 1.
// The idle scenario opens -connections silent connections (one session
// each) and reports the broker's resident memory per connection. The
// tcp-latency scenario is the latency scenario without AMQP: the same
// records at the same paced rate, written raw over TCP through
// epitaph-null -tcp-relay, the machine's floor for that latency.
//
//	epitaph-perf -engine fast -scenario throughput -url amqp://127.0.0.1:5672 -queue plain -size 1024 -duration 10s
//	epitaph-perf -scenario latency -rate 1000 -duration 10s
//	epitaph-perf -scenario tcp-latency -url tcp://127.0.0.1:5674 -rate 1000 -duration 10s   # against epitaph-null -tcp-relay
//	epitaph-perf -scenario deadletter -queue work -dlq dlq
//	epitaph-perf -scenario fill -count 100000 -broker-pid $(pidof epitaph) -drain
//	epitaph-perf -scenario idle -connections 10000 -broker-pid $(pidof epitaph)
//	epitaph-perf -url amqp://127.0.0.1:5673 -target /amq/queue/plain -source /amq/queue/plain -credit-mode exhausted   # RabbitMQ 3.10
//	epitaph-perf -engine amqp091 -window 100 -credit 1000   # AMQP 0-9-1: confirms, prefetch
//	epitaph-perf -engine amqp091 -consume-engine fast -scenario deadletter -dlq-engine fast   # 0-9-1 in, 1.0 out
//	epitaph-perf -engine fast091 -url amqp://guest:guest@127.0.0.1:5672   # 0-9-1, pipelined: the broker is the bottleneck
//
// Exit status: 0 clean, 1 loss/duplicates/beyond-credit/refused publishes
// or run errors, 2 bad usage or the run could not start.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"text/tabwriter"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	// The idle scenario holds one file descriptor per connection. Go 1.19+
	// raises the soft limit at start-up already; this makes it explicit.
	_, _, fdErr := perf.RaiseFileLimit()
	fs := flag.NewFlagSet("epitaph-perf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c perf.Config
	var queue, dlq string
	var asJSON, quiet bool
	fs.StringVar(&c.Engine, "engine", "fast", "client engine: fast (amqp10, pipelined, coalesced writes), goamqp (github.com/Azure/go-amqp) amqp091 (AMQP 0-9-1 with github.com/rabbitmq/amqp091-go: publisher confirms with -window in flight, basic.qos -credit) or fast091 (AMQP 0-9-1 on amqp091, pipelined, coalesced writes: the same confirms and prefetch; PLAIN login, guest/guest without user info)")
	fs.StringVar(&c.ConsumeEngine, "consume-engine", "", "the consumers' engine (default -engine): publish over one protocol, consume over the other")
	fs.StringVar(&c.DLQEngine, "dlq-engine", "", "deadletter: the dead-letter queue consumer's engine (default -consume-engine)")
	fs.StringVar(&c.Scenario, "scenario", "throughput", "throughput, deadletter, latency, tcp-latency (latency over raw TCP through epitaph-null -tcp-relay, -url tcp://host:port; no AMQP), fill, consume (drain -count messages a fill left, e.g. after a restart; reports the first delivery) or idle (open -connections idle connections; broker RSS per connection, needs -broker-pid)")
	fs.StringVar(&c.URL, "url", "amqp://127.0.0.1:5672", "broker URL (amqp://[user:pass@]host:port; tcp-latency: tcp://host:port or host:port)")
	fs.StringVar(&c.SASL, "sasl", "auto", "auto (PLAIN with user info, else ANONYMOUS), anonymous, plain or none")
	fs.StringVar(&queue, "queue", "", "queue name: target and source default to /queues/NAME (default plain; work for deadletter)")
	fs.StringVar(&dlq, "dlq", "dlq", "deadletter: the dead-letter queue to drain")
	fs.StringVar(&c.Target, "target", "", "sender target address (overrides -queue; e.g. /amq/queue/NAME for RabbitMQ 3.10)")
	fs.StringVar(&c.Source, "source", "", "receiver source address (overrides -queue)")
	fs.StringVar(&c.DLQSource, "dlq-source", "", "deadletter: source address of the dead-letter queue (overrides -dlq)")
	fs.IntVar(&c.Size, "size", 1024, "message body size in bytes (>= 16)")
	fs.DurationVar(&c.Duration, "duration", 0, "publish for this long (default 10s when -count is not given)")
	fs.Uint64Var(&c.Count, "count", 0, "publish this many messages (with -duration: whichever ends first)")
	fs.Uint64Var(&c.SeqStart, "seq-start", 0, "fill: the first sequence number in the bodies (a second fill into the same queue continues the first)")
	fs.IntVar(&c.Senders, "senders", 1, "sender links (one connection each)")
	fs.IntVar(&c.Receivers, "receivers", 1, "receiver links (one connection each)")
	fs.IntVar(&c.Window, "window", 100, "unsettled transfers in flight per sender")
	var credit uint
	fs.UintVar(&credit, "credit", 1000, "link credit per receiver")
	fs.StringVar(&c.CreditMode, "credit-mode", "half", "half: top up when half the credit is used; exhausted: grant again only at zero (RabbitMQ 3.10)")
	fs.Float64Var(&c.Rate, "rate", 0, "latency, tcp-latency: messages per second in total")
	fs.DurationVar(&c.Warmup, "warmup", 500*time.Millisecond, "latency, tcp-latency: leave out messages intended in the first part of the run")
	fs.IntVar(&c.BrokerPID, "broker-pid", 0, "broker pid: report broker CPU per message and RSS from /proc")
	fs.BoolVar(&c.Durable, "durable", false, "set header durable=true on every message")
	fs.BoolVar(&c.AckMultiple, "ack-multiple", false, "fast091 consumers: acknowledge with basic.ack multiple=true once per batch instead of once per delivery")
	fs.BoolVar(&c.Drain, "drain", false, "fill: consume (and check) the messages after measuring")
	fs.DurationVar(&c.Settle, "settle", time.Second, "fill: wait this long after the last publish settles before sampling RSS; idle: after the last connection opened (default 2s for idle)")
	fs.IntVar(&c.Connections, "connections", perf.DefaultIdleConnections, "idle: connections to open (each needs a file descriptor here and in the broker)")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Minute, "hard bound on the whole run")
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	fs.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	c.Credit = uint32(credit)
	if fdErr != nil {
		fmt.Fprintln(stderr, "epitaph-perf: raising the file descriptor limit:", fdErr)
	}
	if c.Scenario == "idle" {
		settleSet := false
		fs.Visit(func(f *flag.Flag) { settleSet = settleSet || f.Name == "settle" })
		if !settleSet {
			c.Settle = 2 * time.Second
		}
	}
	if queue == "" {
		queue = "plain"
		if c.Scenario == "deadletter" {
			queue = "work"
		}
	}
	if c.Target == "" {
		c.Target = "/queues/" + queue
	}
	if c.Source == "" {
		c.Source = "/queues/" + queue
	}
	if c.DLQSource == "" {
		c.DLQSource = "/queues/" + dlq
	}
	if c.Duration == 0 && c.Count == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Duration > time.Hour || c.Count > 1<<32 {
		fmt.Fprintln(stderr, "epitaph-perf: keep runs bounded: -duration at most 1h, -count at most 2^32")
		return 2
	}
	if !quiet {
		c.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := perf.Run(ctx, c)
	if err != nil {
		fmt.Fprintln(stderr, "epitaph-perf:", err)
		return 2
	}
	if asJSON {
		e := json.NewEncoder(stdout)
		e.SetIndent("", "  ")
		_ = e.Encode(res)
	} else {
		printTable(stdout, res)
	}
	if res.Failed() {
		fmt.Fprintf(stderr, "epitaph-perf: FAILED: lost %d, duplicated %d, beyond credit %d, undecodable %d, publishes refused %d, errors %v\n",
			res.Lost, res.Duplicated, res.BeyondCredit, res.Undecodable, res.PubRejected+res.PubReleased+res.PubOther, res.Errors)
		return 1
	}
	return 0
}

func printTable(w io.Writer, r *perf.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(k, f string, v ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, v...)...) }
	if r.Scenario == "idle" {
		printIdle(p, r)
		tw.Flush()
		return
	}
	engines := r.Engine
	if r.ConsumeEngine != "" || r.DLQEngine != "" {
		engines = "publish " + r.Engine + ", consume " + cmp.Or(r.ConsumeEngine, r.Engine)
		if r.DLQEngine != "" {
			engines += ", dead-letter queue " + r.DLQEngine
		}
	}
	p("scenario", "%s (engine %s, %s)", r.Scenario, engines, r.URL)
	dur := ""
	if r.Durable {
		dur = "durable, "
	}
	if r.Engine == "tcp" {
		p("shape", "%d B records, %d sender(s) paired with %d receiver(s) by the relay, no AMQP", r.Size, r.Senders, r.Receivers)
	} else {
		p("shape", dur+"%d B, %d sender(s) window %d, %d receiver(s) credit %d (%s)", r.Size, r.Senders, r.Window, r.Receivers, r.Credit, r.CreditMode)
	}
	p("messages", "sent %d, received %d in %.3f s", r.Sent, r.Received, r.Elapsed)
	p("rate", "%.0f msg/s", r.Rate)
	if r.Engine != "tcp" { // raw TCP has no publish outcomes
		p("publish outcomes", "accepted %d, rejected %d, released %d, other %d", r.PubAccepted, r.PubRejected, r.PubReleased, r.PubOther)
	}
	p("integrity", "lost %d, duplicated %d, beyond credit %d, undecodable %d", r.Lost, r.Duplicated, r.BeyondCredit, r.Undecodable)
	if r.LatN > 0 {
		p("latency (ms)", "p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  mean %.3f  (%d samples, end to end, from %s)", r.LatP50, r.LatP90, r.LatP99, r.LatMax, r.LatMean, r.LatN, map[bool]string{true: "intended send time", false: "the send"}[r.TargetRate > 0])
	}
	if r.ConfN > 0 {
		from := "from the send"
		if r.TargetRate > 0 {
			from = "from intended send time"
		}
		p("confirm latency (ms)", "p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  mean %.3f  (%d samples, send -> accepted, %s)", r.ConfP50, r.ConfP90, r.ConfP99, r.ConfMax, r.ConfMean, r.ConfN, from)
	}
	if r.FirstDeliveryUnixNs > 0 {
		p("first delivery", "%.1f ms after the receiver connected", r.FirstDeliveryMs)
	}
	if r.ClientCPUSeconds > 0 && r.Elapsed > 0 {
		p("client CPU", "%.3f s (%.0f%% of one core)", r.ClientCPUSeconds, 100*r.ClientCPUSeconds/r.Elapsed)
	}
	if r.BrokerRSSAfter > 0 {
		p("broker CPU", "%.3f s (%.0f%% of one core), %.2f µs/msg", r.BrokerCPUSeconds, 100*r.BrokerCPUSeconds/max(r.Elapsed, 1e-9), r.BrokerCPUPerMsg)
		p("broker RSS", "%.1f MiB -> %.1f MiB", float64(r.BrokerRSSBefore)/(1<<20), float64(r.BrokerRSSAfter)/(1<<20))
		if r.BrokerRSSPerMsg != 0 {
			p("broker RSS/msg", "%.0f B", r.BrokerRSSPerMsg)
		}
	}
	for _, e := range r.Errors {
		p("error", "%s", e)
	}
	tw.Flush()
}

// printIdle prints the idle scenario's result lines.
func printIdle(p func(k, f string, v ...any), r *perf.Result) {
	p("scenario", "idle (%s)", r.URL)
	p("connections", "opened %d of %d in %.3f s (%.0f/s), failed %d, closed by the broker %d", r.ConnOpened, r.Connections,
		r.Elapsed, r.ConnRate, r.ConnFailed, r.ConnClosedByBroker)
	if r.KeepaliveFrames > 0 {
		p("keepalive", "%d empty frames sent", r.KeepaliveFrames)
	}
	if r.BrokerRSSAfter > 0 {
		p("broker RSS", "%.1f MiB -> %.1f MiB", float64(r.BrokerRSSBefore)/(1<<20), float64(r.BrokerRSSAfter)/(1<<20))
		p("broker RSS/conn", "%.0f B (%.1f KiB)", r.BrokerRSSPerConn, r.BrokerRSSPerConnKiB)
		p("broker CPU", "%.3f s", r.BrokerCPUSeconds)
	}
	if r.ClientCPUSeconds > 0 {
		p("client CPU", "%.3f s", r.ClientCPUSeconds)
	}
	p("broker serves after", "%v", r.BrokerServesAfter)
	for _, e := range r.Errors {
		p("error", "%s", e)
	}
}
