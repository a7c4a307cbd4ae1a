package main

// The micro-benchmark step (-micro): go test -bench with -benchmem for the
// codec and the per-message broker path, pinned to the client CPU after the
// broker runs, reported as one table per package with the allocations the
// codec's targets are judged by.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// microBenchtime is the fixed iteration count of every benchmark: enough
// for stable allocs/op, short enough for the whole step to take a minute
// or two besides the build.
const microBenchtime = "200000x"

// microPkgs are the packages and -bench patterns of the micro step.
var microPkgs = []struct{ pkg, pattern string }{
	{"./amqp10", "BenchmarkPerformatives|BenchmarkEncodeTransfer|BenchmarkDecodeTransfer|BenchmarkEncodeFlow|BenchmarkDecodeFlow|BenchmarkEncodeDisposition|BenchmarkDecodeDisposition|BenchmarkParseMessage|BenchmarkAppendDelivery"},
	{"./annotations", "BenchmarkDeaths"},
	{"./router", "BenchmarkPublishDeliverSettle|BenchmarkRoute|BenchmarkEnqueue"},
	{"./deadletter", "BenchmarkDeadLetterPath|BenchmarkCopy"},
}

// benchRow is one result line of go test -bench -benchmem. The figures are
// kept as go test printed them; allocs is allocsOp parsed, -1 when the
// line had none.
type benchRow struct {
	name                    string
	iters                   int64
	nsOp, bytesOp, allocsOp string
	allocs                  float64
}

// microRun is one package's go test run.
type microRun struct {
	pkg, cmd string
	rows     []benchRow
	err      string
	took     time.Duration
}

// microArgs is the go test command line of one package, without taskset.
func microArgs(pkg, pattern string) []string {
	// -cpu 1: the client CPU is one core anyway (GOMAXPROCS 1), and it
	// keeps go test from appending -N to the names.
	return []string{"go", "test", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", microBenchtime, "-cpu", "1", pkg}
}

// runMicro runs every package of microPkgs from the module root, one after
// the other, pinned to the client CPU. A package that does not build or
// whose benchmarks fail is reported with its error; the others still run.
func runMicro(o opts) (runs []microRun) {
	gomod := strings.TrimSpace(cmdOut("go", "env", "GOMOD"))
	if gomod == "" || gomod == os.DevNull {
		return []microRun{{pkg: "(all)", err: "no module: `go env GOMOD` is empty"}}
	}
	root := filepath.Dir(gomod)
	for _, mp := range microPkgs {
		args := append([]string{"-c", o.clientCPU}, microArgs(mp.pkg, mp.pattern)...)
		r := microRun{pkg: mp.pkg, cmd: "taskset " + shellQuote(args)}
		logf("micro: %s", r.cmd)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		c := exec.CommandContext(ctx, "taskset", args...)
		c.Dir = root
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		cancel()
		r.took = time.Since(start)
		r.rows = parseBench(stdout.String())
		if err != nil {
			r.err = strings.TrimSpace(err.Error() + ": " + lastLine(stderr.String()+"\n"+stdout.String()))
		} else if len(r.rows) == 0 {
			r.err = "no benchmark matched " + mp.pattern
		}
		logf("micro: %s: %d benchmarks in %s %s", mp.pkg, len(r.rows), r.took.Round(time.Second), r.err)
		runs = append(runs, r)
	}
	return runs
}

// parseBench picks the result lines out of go test -bench output:
//
//	BenchmarkName/sub  200000  123.4 ns/op  0 B/op  0 allocs/op
func parseBench(out string) []benchRow {
	var rows []benchRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		r := benchRow{name: f[0], iters: n, allocs: -1}
		for i := 2; i+1 < len(f); i += 2 {
			switch f[i+1] {
			case "ns/op":
				r.nsOp = f[i]
			case "B/op":
				r.bytesOp = f[i]
			case "allocs/op":
				r.allocsOp = f[i]
				if v, err := strconv.ParseFloat(f[i], 64); err == nil {
					r.allocs = v
				}
			}
		}
		if r.nsOp != "" {
			rows = append(rows, r)
		}
	}
	return rows
}

// microAllocs returns the allocs/op of the named benchmark of pkg.
func microAllocs(runs []microRun, pkg, name string) (float64, bool) {
	for _, r := range runs {
		if r.pkg != pkg {
			continue
		}
		for _, b := range r.rows {
			if b.name == name && b.allocs >= 0 {
				return b.allocs, true
			}
		}
	}
	return 0, false
}

// microSection writes the "Micro-benchmarks (allocations)" section.
func microSection(p func(string, ...any), runs []microRun) {
	p("\n## Micro-benchmarks (allocations)\n\n")
	p("`go test -bench` with `-benchmem -benchtime %s` (that many iterations of each benchmark), run from the module root after the broker runs, pinned to the client CPU. The ns/op figures come from a shared 2-core machine and drift from run to run; only the allocation counts are stable.\n", microBenchtime)
	for _, r := range runs {
		p("\n### %s\n\n", r.pkg)
		if r.cmd != "" {
			p("```\n%s\n```\n\n", r.cmd)
		}
		if r.err != "" {
			p("This run failed: %s\n\n", r.err)
		}
		if len(r.rows) == 0 {
			continue
		}
		p("| benchmark | ns/op | B/op | allocs/op |\n|---|---|---|---|\n")
		for _, b := range r.rows {
			p("| %s | %s | %s | %s |\n", b.name, b.nsOp, orDash(b.bytesOp), orDash(b.allocsOp))
		}
	}
}

// microTargets writes the codec rows of the targets table.
func microTargets(target func(name, measured string, met *bool), runs []microRun) {
	for _, t := range []struct {
		name, verb string
		most       float64
	}{
		{"encode Transfer/Flow/Disposition: 0 allocs", "Encode", 0},
		{"decode Transfer/Flow/Disposition: ≤ 1 alloc", "Decode", 1},
	} {
		var parts, missing []string
		met := true
		for _, pf := range []string{"Transfer", "Flow", "Disposition"} {
			a, ok := microAllocs(runs, "./amqp10", "Benchmark"+t.verb+pf)
			if !ok {
				missing = append(missing, "Benchmark"+t.verb+pf)
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %g", pf, a))
			met = met && a <= t.most
		}
		if len(missing) > 0 {
			target(t.name, "no result for "+strings.Join(missing, ", "), nil)
			continue
		}
		target(t.name, strings.Join(parts, ", ")+" allocs/op", &met)
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// shellQuote joins args for a POSIX shell, single-quoting those with any
// character outside a safe set (the -bench patterns hold | and ^$).
func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		safe := a != ""
		for _, c := range a {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:=,+@%", c)) {
				safe = false
				break
			}
		}
		if safe {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
