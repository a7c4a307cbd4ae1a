package segment

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/epitaph-mq/epitaph/router/store/storetest"
)

const crashEnv = "EPITAPH_SEGMENT_CRASH_CHILD"

// crashPayload is entry index's content written with counter c: the
// parent recognises what it reads back.
func crashPayload(index, c uint64, pad int) []byte {
	return fmt.Appendf(nil, "%d %d %s", index, c, strings.Repeat("x", pad))
}

func parseCrashPayload(b []byte) (index, c uint64, ok bool) {
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, false
	}
	i, err1 := strconv.ParseUint(f[0], 10, 64)
	c, err2 := strconv.ParseUint(f[1], 10, 64)
	return i, c, err1 == nil && err2 == nil
}

// crashChild runs in the child process. It appends batches without
// waiting (up to 64 in flight, so fsyncs are shared), releases ranges out
// of order, moves the head, and cuts the tail now and then. Before each
// release or cut it prints its intent (lower case) and after it is durable
// its acknowledgement (upper case); an append is printed once durable:
//
//	A first n c     entries first..first+n-1 hold counters c..c+n-1
//	s/S from to     Settle(from, to)
//	h/H index       TruncatePrefix(index)
//	t/T index c     TruncateSuffix(index) with the counter at that moment
func crashChild(dir string) {
	l, err := Open(dir, Options{SegmentSize: 16 << 10, ReadAhead: 4 << 10})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	emit := func(format string, a ...any) { os.Stdout.WriteString(fmt.Sprintf(format, a...)) }
	run, _ := strconv.ParseUint(os.Getenv(crashEnv+"_RUN"), 10, 64)
	counter := run << 32
	rng := rand.New(rand.NewPCG(run, uint64(os.Getpid())))
	var acked atomic.Uint64 // last index whose append is durable
	acked.Store(l.LastIndex())
	inflight := make(chan struct{}, 64)
	fail := func(err error) {
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
	}
	for {
		switch p := rng.IntN(100); {
		case p < 85:
			n := 1 + rng.IntN(8)
			first := l.LastIndex() + 1
			c0 := counter
			b := make([][]byte, n)
			for k := range b {
				b[k] = crashPayload(first+uint64(k), counter, rng.IntN(300))
				counter++
			}
			inflight <- struct{}{}
			_, err := l.Append(b, func(err error) {
				fail(err)
				acked.Store(first + uint64(n) - 1)
				emit("A %d %d %d\n", first, n, c0)
				<-inflight
			})
			fail(err)
		case p < 96:
			lo, hi := l.FirstIndex(), acked.Load()
			if hi < lo {
				continue
			}
			from := lo + rng.Uint64N(hi-lo+1)
			to := min(from+1+rng.Uint64N(5), hi+1)
			emit("s %d %d\n", from, to)
			fail(l.Settle(from, to, func(err error) { fail(err); emit("S %d %d\n", from, to) }))
		case p < 98:
			lo, hi := l.FirstIndex(), acked.Load()
			if hi < lo {
				continue
			}
			idx := lo + rng.Uint64N(min(hi-lo+1, 20))
			emit("h %d\n", idx)
			fail(l.TruncatePrefix(idx, func(err error) { fail(err); emit("H %d\n", idx) }))
		default:
			last, lo := l.LastIndex(), l.FirstIndex()
			k := rng.Uint64N(20)
			if last < lo+k {
				continue
			}
			idx := last - k
			emit("t %d %d\n", idx, counter)
			fail(l.TruncateSuffix(idx))
			if a := acked.Load(); a >= idx {
				acked.Store(idx - 1)
			}
			emit("T %d %d\n", idx, counter)
		}
	}
}

// TestCrashKill re-executes the test binary as a child that appends,
// settles and truncates, SIGKILLs it after a random number of
// acknowledgements, reopens the log and checks that no durable entry is
// lost (every acknowledged append is there with its content unless it was
// released or cut), that nothing released or cut is back, that a crash
// leaves nothing reported as damaged, and that whatever else is there was
// written by the killed run at that index. Several kills hit the same
// directory in a row; each check's result is the next run's baseline.
func TestCrashKill(t *testing.T) {
	kills, spread := 3, 3000
	if raceEnabled || testing.Short() {
		kills, spread = 1, 1000
	}
	kills = storetest.Kills("EPITAPH_SEGMENT_CRASH_KILLS", kills)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, uint64(os.Getpid())))
	baseline := map[uint64]uint64{} // index -> counter, as read after the previous kill
	for k := 0; k < kills; k++ {
		run := uint64(k + 1)
		model := map[uint64]uint64{}
		for i, c := range baseline {
			model[i] = c
		}
		released := map[uint64]bool{} // acknowledged releases
		maybe := map[uint64]bool{}    // released or cut, not acknowledged
		var head, cutFrom uint64      // acknowledged head; lowest unacknowledged cut (0: none)
		type cut struct{ index, c uint64 }
		var cuts []cut
		cmd, sc := storetest.StartChild(t, crashEnv+"="+dir, fmt.Sprintf("%s_RUN=%d", crashEnv, run))
		target, lines := 200+rng.IntN(spread), 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			n := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
			switch f[0] {
			case "ERR":
				t.Fatalf("child: %s", sc.Text())
			case "A":
				for j := range n(2) {
					model[n(1)+j] = n(3) + j
					delete(released, n(1)+j)
					delete(maybe, n(1)+j)
				}
			case "s":
				for i := n(1); i < n(2); i++ {
					maybe[i] = true
				}
			case "S":
				for i := n(1); i < n(2); i++ {
					released[i] = true
				}
			case "h":
				for i := head; i < n(1); i++ {
					maybe[i] = true
				}
			case "H":
				head = max(head, n(1))
			case "t":
				cutFrom = n(1)
			case "T":
				for i := range model {
					if i >= n(1) {
						delete(model, i)
						delete(released, i)
						delete(maybe, i)
					}
				}
				cuts = append(cuts, cut{n(1), n(2)})
				cutFrom = 0
			}
			if lines++; lines == target {
				cmd.Process.Kill() // SIGKILL; the lines already written are still read
			}
		}
		cmd.Wait()

		l, err := Open(dir, Options{SegmentSize: 16 << 10})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		if l.FirstIndex() < head {
			t.Fatalf("kill %d: first index %d below the acknowledged head %d", k, l.FirstIndex(), head)
		}
		present := map[uint64]uint64{}
		r := l.NewReader(1)
		for {
			i, data, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("kill %d: read after a crash: %v", k, err)
			}
			pi, c, ok := parseCrashPayload(data)
			if !ok || pi != i {
				t.Fatalf("kill %d: entry %d holds %q", k, i, data)
			}
			present[i] = c
		}
		r.Close()
		for i, c := range model {
			got, ok := present[i]
			switch {
			case released[i] || i < head:
				if ok {
					t.Fatalf("kill %d: entry %d was released (acknowledged) and is back", k, i)
				}
			case maybe[i] || (cutFrom != 0 && i >= cutFrom):
				if ok && got != c && c < run<<32 {
					t.Fatalf("kill %d: entry %d holds counter %d, want %d", k, i, got, c)
				}
			case !ok:
				t.Fatalf("kill %d: acknowledged entry %d (counter %d) lost; first %d last %d", k, i, c, l.FirstIndex(), l.LastIndex())
			case got != c:
				t.Fatalf("kill %d: entry %d holds counter %d, want %d", k, i, got, c)
			}
		}
		for i, c := range present {
			if _, known := model[i]; known {
				continue
			}
			if c < run<<32 {
				t.Fatalf("kill %d: entry %d with counter %d from an earlier run is back", k, i, c)
			}
			for _, cu := range cuts {
				if i >= cu.index && c < cu.c {
					t.Fatalf("kill %d: entry %d (counter %d) cut at %d (counter %d) is back", k, i, c, cu.index, cu.c)
				}
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("kill %d after %d lines: %d entries held, %d acknowledged in the model", k, lines, len(present), len(model))
		baseline = present
	}
}
