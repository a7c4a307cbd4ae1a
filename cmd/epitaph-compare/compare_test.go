package main

import (
	"testing"
	"time"
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
