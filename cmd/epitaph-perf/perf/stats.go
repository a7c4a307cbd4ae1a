package perf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Histogram is a log-linear latency histogram (HDR style: 64 sub-buckets per
// power of two, under 1.6% relative error) over nanoseconds. Not safe for
// concurrent use.
type Histogram struct {
	counts [64 * 64]uint64
	n      uint64
	max    int64
	min    int64
	sum    float64
}

const subBits = 6

func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u < 1<<subBits {
		return int(u)
	}
	e := bits.Len64(u) - subBits // >= 1
	return e<<subBits + int(u>>(e-1)&(1<<subBits-1))
}

// bucketHigh is the largest value mapped to bucket i.
func bucketHigh(i int) int64 {
	e := i >> subBits
	s := uint64(i & (1<<subBits - 1))
	if e == 0 {
		return int64(s)
	}
	lo := (1<<subBits | s) << (e - 1)
	return int64(lo + 1<<(e-1) - 1)
}

// Record adds one value (ns).
func (h *Histogram) Record(v int64) {
	i := bucketOf(v)
	if i >= len(h.counts) {
		i = len(h.counts) - 1
	}
	h.counts[i]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// RecordCorrected records the latency of an operation whose intended start
// was intended and which completed at done: measuring from the intended
// time (not the actual send) corrects for coordinated omission, so a
// stalled sender shows up as latency for every message it should have sent.
func (h *Histogram) RecordCorrected(intended, done time.Time) {
	h.Record(done.Sub(intended).Nanoseconds())
}

// lockedCopy returns a copy of h, read under mu (a sender's confirm
// histogram, which its reader goroutine records into).
func lockedCopy(mu *sync.Mutex, h *Histogram) *Histogram {
	mu.Lock()
	defer mu.Unlock()
	c := &Histogram{}
	c.Merge(h)
	return c
}

// waitInflight blocks until *inflight (guarded by cond's lock, and
// broadcast on when it falls) is 0, the connection fails (connErr), or ctx
// ends; what names the messages still in flight in that error.
func waitInflight(ctx context.Context, cond *sync.Cond, inflight *int, connErr func() error, what string) error {
	stop := context.AfterFunc(ctx, func() { cond.L.Lock(); cond.Broadcast(); cond.L.Unlock() })
	defer stop()
	cond.L.Lock()
	defer cond.L.Unlock()
	for *inflight > 0 {
		if err := connErr(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d %s: %w", *inflight, what, ctx.Err())
		}
		cond.Wait()
	}
	return nil
}

// Merge adds o into h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest value recorded (exact).
func (h *Histogram) Max() int64 { return h.max }

// Mean is the mean value.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Percentile returns the value at quantile q in [0,100] (upper bound of its
// bucket, capped at the exact maximum).
func (h *Histogram) Percentile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q / 100 * float64(h.n))
	if rank >= h.n {
		rank = h.n - 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			v := bucketHigh(i)
			if v > h.max {
				v = h.max
			}
			if v < h.min {
				v = h.min
			}
			return v
		}
	}
	return h.max
}

// SeqTracker records which sequence numbers were received, counting
// duplicates; Lost is computed against the number sent. Safe for
// concurrent use.
type SeqTracker struct {
	mu     sync.Mutex
	seen   []uint64 // bitmap
	unique uint64
	dups   uint64
	bad    uint64 // sequence numbers never sent / undecodable
	limit  uint64 // sequence numbers >= limit are invalid (0: no limit)
}

// NewSeqTracker tracks sequence numbers below limit (0: unbounded).
func NewSeqTracker(limit uint64) *SeqTracker { return &SeqTracker{limit: limit} }

// Add records seq and reports whether it was new.
func (s *SeqTracker) Add(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit != 0 && seq >= s.limit {
		s.bad++
		return false
	}
	w := seq / 64
	for uint64(len(s.seen)) <= w {
		s.seen = append(s.seen, 0)
	}
	m := uint64(1) << (seq % 64)
	if s.seen[w]&m != 0 {
		s.dups++
		return false
	}
	s.seen[w] |= m
	s.unique++
	return true
}

// AddBad counts a delivery whose sequence number could not be read.
func (s *SeqTracker) AddBad() { s.mu.Lock(); s.bad++; s.mu.Unlock() }

// Unique is the number of distinct sequence numbers received.
func (s *SeqTracker) Unique() uint64 { s.mu.Lock(); defer s.mu.Unlock(); return s.unique }

// Result summarises the tracking against sent messages numbered 0..sent-1.
func (s *SeqTracker) Result(sent uint64) (lost, dups, bad uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var got uint64
	for seq := uint64(0); seq < sent; seq++ {
		w := seq / 64
		if w < uint64(len(s.seen)) && s.seen[w]&(1<<(seq%64)) != 0 {
			got++
		}
	}
	// unique seqs at or above sent were never sent: count them as bad
	return sent - got, s.dups, s.bad + (s.unique - got)
}

// CreditTracker is a receiver's view of its link credit: the sender may
// deliver up to delivery-count + link-credit (as last granted) transfers; any
// transfer past that is beyond credit.
type CreditTracker struct {
	Received uint64 // transfers received (the receiver's delivery-count)
	Limit    uint64 // Received at the last grant + credit granted
	Beyond   uint64
}

// Grant records a flow granting credit at the current delivery-count.
func (c *CreditTracker) Grant(credit uint32) { c.Limit = c.Received + uint64(credit) }

// Deliver records one transfer and reports whether it was within credit.
func (c *CreditTracker) Deliver() bool {
	c.Received++
	if c.Received > c.Limit {
		c.Beyond++
		return false
	}
	return true
}

// Remaining is the credit left.
func (c *CreditTracker) Remaining() uint64 {
	if c.Received >= c.Limit {
		return 0
	}
	return c.Limit - c.Received
}

// ProcSample is a process's CPU time and resident set size.
type ProcSample struct {
	CPU    time.Duration // utime + stime
	RSS    int64         // bytes (VmRSS)
	HWM    int64         // bytes (VmHWM), peak RSS
	Taken  time.Time
	Valid  bool
	Source string
}

// ClockTicks is the kernel's USER_HZ (sysconf(_SC_CLK_TCK)), 100 on Linux.
const ClockTicks = 100

// ParseStat returns utime+stime in clock ticks from /proc/PID/stat content.
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted after the last ')'.
func ParseStat(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no ')'")
	}
	f := strings.Fields(string(b[i+1:]))
	// after ')': state(3) ppid(4) ... utime is field 14, stime 15 => index 11, 12
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after comm", len(f))
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat utime: %w", err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat stime: %w", err)
	}
	return u + s, nil
}

// ParseStatusKB returns the value of a "Key:   N kB" line of /proc/PID/status in bytes.
func ParseStatusKB(b []byte, key string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key+":") {
			continue
		}
		f := strings.Fields(line[len(key)+1:])
		if len(f) < 1 {
			return 0, fmt.Errorf("proc status %s: empty", key)
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc status %s: %w", key, err)
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, fmt.Errorf("proc status %s: unit %q", key, f[1])
		}
		return v * 1024, nil
	}
	return 0, fmt.Errorf("proc status: no %s", key)
}

// SampleProc reads /proc/PID/stat and /proc/PID/status.
func SampleProc(pid int) (ProcSample, error) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, err
	}
	ticks, err := ParseStat(st)
	if err != nil {
		return ProcSample{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, err
	}
	rss, err := ParseStatusKB(status, "VmRSS")
	if err != nil {
		return ProcSample{}, err
	}
	hwm, _ := ParseStatusKB(status, "VmHWM")
	return ProcSample{CPU: time.Duration(ticks) * (time.Second / ClockTicks), RSS: rss, HWM: hwm, Taken: time.Now(), Valid: true}, nil
}
