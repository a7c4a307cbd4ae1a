package main

// The idle-connection scenario (-idle-connections) and the 1,000,000-message
// fill (-fill-count-large): both run against epitaph only, each on a freshly
// started process, and get their own rows in the report.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

// idleConnMargin is what the idle runs add to -idle-connections for
// epitaph's --max-connections: the load tool's final "still serves" check
// and anything else that connects meanwhile.
const idleConnMargin = 100

// idleTargetConns and idleTargetBytes are the idle-connection target: 10,000 connections at most 50 KiB each.
const (
	idleTargetConns = 10000
	idleTargetBytes = 50 * 1024
)

// fillTargetCount is the queue depth of the memory target.
const fillTargetCount = 1000000

// epitaphExtraArgs is what epitaph is started with, besides the standard
// arguments, for the run of scenario id.
func epitaphExtraArgs(o opts, id string) []string {
	if id == "idle" {
		return []string{"--max-connections", strconv.Itoa(o.idleConns + idleConnMargin)}
	}
	return nil
}

// freshEpitaph reports whether scenario id runs on a freshly started
// epitaph (RSS not inflated by earlier runs' heap), and whether epitaph is
// started again with the standard arguments after it (so the next runs do
// not inherit a 1 GiB heap or a raised connection limit).
func freshEpitaph(id string) (before, after bool) {
	switch id {
	case "fill":
		return true, false
	case "fill-large", "idle":
		return true, true
	}
	return false, false
}

// perfTimeout is epitaph-perf's -timeout for a scenario: 3m, and for the
// large fill 300 µs per message (fill and drain at 6,700 msg/s or more
// each; epitaph does both at over 100,000 msg/s).
func perfTimeout(o opts, sc scenario) time.Duration {
	d := 3 * time.Minute
	if sc.id == "fill-large" {
		d = max(d, time.Duration(o.fillCountLarge)*300*time.Microsecond)
	}
	return d.Round(time.Second)
}

// fmtDur prints d as epitaph-perf's flag would take it, without the zero
// units Duration.String adds ("3m", not "3m0s").
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// commas formats n with thousands separators: 1000000 -> 1,000,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// idleSection writes the "Idle connections" section from the idle runs.
func idleSection(p func(string, ...any), o opts, runs []run1) {
	per := func(r *perf.Result) float64 { return r.BrokerRSSPerConn }
	kib := func(r *perf.Result) float64 { return r.BrokerRSSPerConnKiB }
	tot := func(r *perf.Result) float64 { return float64(r.BrokerRSSAfter-r.BrokerRSSBefore) / (1 << 20) }
	rate := func(r *perf.Result) float64 { return r.ConnRate }
	s := func(f func(*perf.Result) float64, format string) string {
		st, ok := stats(collect(runs, f))
		return fmtStat(st, ok, format)
	}
	var counts, serves []string
	for _, r := range runs {
		if r.res == nil {
			counts = append(counts, "no result")
			serves = append(serves, "no result")
			continue
		}
		counts = append(counts, fmt.Sprintf("%d / %d / %d", r.res.ConnOpened, r.res.ConnFailed, r.res.ConnClosedByBroker))
		serves = append(serves, map[bool]string{true: "yes", false: "**no**"}[r.res.BrokerServesAfter])
	}
	p("\n## Idle connections\n\n")
	p("epitaph-perf `-scenario idle` opens %s connections to epitaph, 64 at a time; each does TCP, SASL ANONYMOUS, open and begin (one session) and then stays silent but for an empty frame at half epitaph's advertised idle-time-out. epitaph is started afresh before each run with `--max-connections %d` (its default limit is 10000). RSS growth is epitaph's VmRSS 2 s after the last connection opened minus VmRSS before the first, divided by the connections open; then every connection is checked to be still open, all are closed and one more must be served. RabbitMQ is not measured for idle connections.\n\n",
		commas(o.idleConns), o.idleConns+idleConnMargin)
	p("| | epitaph |\n|---|---|\n")
	p("| RSS growth per idle connection (bytes) | %s |\n", s(per, "%.0f"))
	p("| RSS growth per idle connection (KiB) | %s |\n", s(kib, "%.1f"))
	p("| RSS growth for all connections (MiB) | %s |\n", s(tot, "%.1f"))
	p("| connections opened per second | %s |\n", s(rate, "%.0f"))
	p("| connections opened / failed / closed by epitaph, per run | %s |\n", strings.Join(counts, "; "))
	p("| epitaph served a new connection after they all closed, per run | %s |\n", strings.Join(serves, "; "))
	p("\nTarget: %s idle connections at most 50 KiB (%d bytes) each.", commas(idleTargetConns), idleTargetBytes)
	if o.idleConns != idleTargetConns {
		p(" This compare opened %s.", commas(o.idleConns))
	}
	p("\n\nCommand (last run; the broker: `taskset -c %s epitaph --listen 127.0.0.1:0 --in-memory --http-listen \"\" --definitions DEFS.json --log-level warn --max-connections %d`):\n\n",
		o.brokerCPU, o.idleConns+idleConnMargin)
	if len(runs) > 0 {
		p("```\n%s\n```\n", runs[len(runs)-1].cmd)
	}
}

// idleTarget writes the idle-connection row of the targets table.
func idleTarget(target func(name, measured string, met *bool), o opts, runs []run1) bool {
	st, ok := stats(collect(runs, func(r *perf.Result) float64 { return r.BrokerRSSPerConn }))
	if !ok {
		return false
	}
	name := "10,000 idle connections ≤ 50 KiB each"
	if o.idleConns != idleTargetConns {
		name = fmt.Sprintf("idle connections ≤ 50 KiB each (%s connections, not 10,000)", commas(o.idleConns))
	}
	met := st.med <= idleTargetBytes
	target(name, fmt.Sprintf("%.0f B (%.1f KiB) per connection", st.med, st.med/1024), &met)
	return true
}
