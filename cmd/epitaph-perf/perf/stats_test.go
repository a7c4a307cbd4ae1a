package perf

import (
	"testing"
	"time"
)

func TestHistogramPercentiles(t *testing.T) {
	var h Histogram
	for v := int64(1); v <= 10000; v++ {
		h.Record(v * 1000) // 1 µs .. 10 ms
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{50, 5_000_000}, {90, 9_000_000}, {99, 9_900_000}, {100, 10_000_000}} {
		got := h.Percentile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.02 || d > 0.02 {
			t.Errorf("p%v = %d, want %d within 2%%", c.q, got, c.want)
		}
	}
	if h.Max() != 10_000_000 || h.Count() != 10000 {
		t.Errorf("max %d count %d", h.Max(), h.Count())
	}
}

func TestHistogramSmallValuesExact(t *testing.T) {
	var h Histogram
	for v := int64(0); v < 64; v++ {
		h.Record(v)
	}
	if got := h.Percentile(50); got != 32 {
		t.Errorf("p50 = %d, want 32", got)
	}
}

func TestBucketBounds(t *testing.T) {
	for _, v := range []int64{0, 1, 63, 64, 65, 127, 128, 1000, 123456789, 1 << 40} {
		i := bucketOf(v)
		if hi := bucketHigh(i); hi < v {
			t.Errorf("value %d in bucket %d whose high is %d", v, i, hi)
		}
		if i > 0 && bucketHigh(i-1) >= v {
			t.Errorf("value %d also fits bucket %d", v, i-1)
		}
	}
}

// A sender that stalls for 100 ms in a 1 ms schedule: measured from the
// actual send time only one message looks slow; measured from the intended
// time (coordinated-omission correction) all the messages that should have
// gone out during the stall carry the delay.
func TestCoordinatedOmissionCorrection(t *testing.T) {
	start := time.Unix(0, 0)
	interval := time.Millisecond
	service := 100 * time.Microsecond
	var corrected, naive Histogram
	now := start
	for i := 0; i < 1000; i++ {
		intended := start.Add(time.Duration(i) * interval)
		if now.Before(intended) {
			now = intended
		}
		if i == 500 {
			now = now.Add(100 * time.Millisecond) // stall
		}
		sent := now
		done := sent.Add(service)
		corrected.RecordCorrected(intended, done)
		naive.RecordCorrected(sent, done)
		now = done
	}
	if p := naive.Percentile(99); p > int64(200*time.Microsecond) {
		t.Errorf("naive p99 %v: expected the stall to be hidden", time.Duration(p))
	}
	// about 110 of the 1000 messages are delayed, by 100 ms down to 0
	if p := corrected.Percentile(95); p < int64(30*time.Millisecond) {
		t.Errorf("corrected p95 %v: expected about 110 messages delayed by up to 100 ms", time.Duration(p))
	}
	if m := corrected.Max(); m < int64(100*time.Millisecond) {
		t.Errorf("corrected max %v", time.Duration(m))
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b Histogram
	a.Record(10)
	b.Record(1000)
	b.Record(5)
	a.Merge(&b)
	if a.Count() != 3 || a.Max() != 1000 || a.Percentile(0) != 5 {
		t.Errorf("merged: count %d max %d min %d", a.Count(), a.Max(), a.Percentile(0))
	}
}

func TestSeqTracker(t *testing.T) {
	s := NewSeqTracker(0)
	for _, q := range []uint64{0, 1, 2, 2, 4, 5, 5, 5, 200} {
		s.Add(q)
	}
	lost, dups, bad := s.Result(6) // sent 0..5: 3 is missing; 200 was never sent
	if lost != 1 || dups != 3 || bad != 1 {
		t.Errorf("lost %d dups %d bad %d, want 1 3 1", lost, dups, bad)
	}
	if s.Unique() != 6 {
		t.Errorf("unique %d", s.Unique())
	}
	lim := NewSeqTracker(10)
	if lim.Add(10) {
		t.Error("seq beyond the limit accepted")
	}
	if _, _, bad := lim.Result(10); bad != 1 {
		t.Errorf("bad %d", bad)
	}
}

func TestCreditTracker(t *testing.T) {
	var c CreditTracker
	c.Grant(3)
	for i := 0; i < 3; i++ {
		if !c.Deliver() {
			t.Fatalf("delivery %d within credit refused", i)
		}
	}
	if c.Remaining() != 0 {
		t.Fatalf("remaining %d", c.Remaining())
	}
	if c.Deliver() {
		t.Fatal("delivery beyond credit accepted")
	}
	if c.Beyond != 1 {
		t.Fatalf("beyond %d", c.Beyond)
	}
	// a refill at half: granted at delivery-count 4 with credit 2 -> limit 6
	c.Grant(2)
	c.Deliver()
	c.Deliver()
	c.Deliver()
	if c.Beyond != 2 || c.Received != 7 {
		t.Fatalf("beyond %d received %d", c.Beyond, c.Received)
	}
}

func TestParseStat(t *testing.T) {
	// comm with spaces and a ')' inside, as a process can name itself
	line := "4242 (beam.smp) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 30 0 100 2000000 5000 18446744073709551615 0 0 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n"
	ticks, err := ParseStat([]byte(line))
	if err != nil || ticks != 1234+567 {
		t.Fatalf("ticks %d err %v, want 1801", ticks, err)
	}
	if _, err := ParseStat([]byte("garbage")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tepitaph\nVmPeak:\t  200000 kB\nVmHWM:\t   90000 kB\nVmRSS:\t   81234 kB\nThreads:\t7\n"
	rss, err := ParseStatusKB([]byte(status), "VmRSS")
	if err != nil || rss != 81234*1024 {
		t.Fatalf("rss %d err %v", rss, err)
	}
	if _, err := ParseStatusKB([]byte(status), "VmSwap"); err == nil {
		t.Error("missing key found")
	}
}

func TestSampleProcSelf(t *testing.T) {
	s, err := SampleProc(osGetpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if s.RSS <= 0 {
		t.Errorf("rss %d", s.RSS)
	}
}

func TestDataBody(t *testing.T) {
	for _, n := range []int{16, 255, 256, 1024} {
		body := make([]byte, n)
		body[0], body[n-1] = 7, 9
		payload := append([]byte{0x00, 0x53, 0x70, 0x45}, dataSection(body)...) // an empty header list first
		got, ok := DataBody(payload, n)
		if !ok || len(got) != n || got[0] != 7 || got[n-1] != 9 {
			t.Errorf("size %d: ok %v len %d", n, ok, len(got))
		}
		if _, ok := DataBody(payload, n+1); ok {
			t.Errorf("size %d: wrong length accepted", n)
		}
	}
}
