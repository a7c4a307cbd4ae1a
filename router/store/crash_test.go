package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/epitaph-mq/epitaph/router/store/storetest"
)

const crashEnv = "EPITAPH_STORE_CRASH_CHILD"

// crashChild runs in the child process: 8 producers append to queue 1, a
// consumer settles acknowledged messages (mostly FIFO) and dead-letters every
// 10th to queue 2 with a Move. Each acknowledged operation is printed after
// its done(nil): "A seq producer n", "S seq", "M seq newseq".
func crashChild(dir string) {
	s, err := OpenPebble(dir, crashOptions(dir, os.Getenv(crashEnv+"_LOGS") != ""))
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	// One write syscall per line (atomic on a pipe), issued before the next
	// dependent step, so the parent sees every acknowledgement made before the kill.
	emit := func(l string) { os.Stdout.WriteString(l) }
	// seqs continue after what survived earlier runs
	var maxSeq [3]uint64
	for q := QueueID(1); q <= 2; q++ {
		s.Iterate(q, func(seq uint64, _, _ []byte) error { maxSeq[q] = seq; return nil })
	}
	var seq1, seq2 atomic.Uint64
	acked := make(chan uint64, 1<<16)
	var mu sync.Mutex // orders seq allocation with submission per queue
	run, _ := strconv.Atoi(os.Getenv(crashEnv + "_RUN"))
	// Settled tail seqs are gone from the store; start each run above any seq
	// an earlier run can have used (a run acknowledges far fewer than 1<<20)
	// so the parent's ledger never sees a seq reused.
	seq1.Store(max(maxSeq[1], uint64(run)<<20))
	seq2.Store(max(maxSeq[2], uint64(run)<<20))
	for p := run * 8; p < run*8+8; p++ {
		go func() {
			for n := 0; ; n++ {
				ch := make(chan error, 1)
				mu.Lock()
				seq := seq1.Add(1)
				s.Append([]Record{{Queue: 1, Seq: seq, Msg: fmt.Appendf(nil, "%d-%d", p, n)}}, func(err error) { ch <- err })
				mu.Unlock()
				if err := <-ch; err != nil {
					fmt.Println("ERR", err)
					os.Exit(2)
				}
				emit(fmt.Sprintf("A %d %d %d\n", seq, p, n))
				acked <- seq
			}
		}()
	}
	for i := 0; ; i++ {
		seq := <-acked
		if i%10 == 0 {
			ns := seq2.Add(1)
			emit(fmt.Sprintf("I %d\n", seq))
			s.Move(1, []uint64{seq}, []Record{{Queue: 2, Seq: ns, Msg: fmt.Appendf(nil, "moved-%d", seq)}}, func(err error) {
				if err == nil {
					emit(fmt.Sprintf("M %d %d\n", seq, ns))
				}
			})
		} else if i%3 != 0 { // leave a third in the queue
			emit(fmt.Sprintf("I %d\n", seq))
			s.Settle(1, []uint64{seq}, func(err error) {
				if err == nil {
					emit(fmt.Sprintf("S %d\n", seq))
				}
			})
		}
	}
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// TestCrashKill is TestCrashLedger's shape (e2e) at the store level: the test binary re-executes
// itself as a child that writes to a store, the parent SIGKILLs it after a
// random number of acknowledgements, reopens the directory, and checks that
// every acknowledged append is present (unless acknowledged as settled or
// moved), in per-producer order, every acknowledged settle is gone, every
// acknowledged move is in the target and not the source, and no message is in
// both queues. Several kills hit the same directory in a row.
func TestCrashKill(t *testing.T) {
	t.Run("bodies-in-pebble", func(t *testing.T) { testCrashKill(t, false) })
	t.Run("queue-logs", func(t *testing.T) { testCrashKill(t, true) })
}

// crashOptions: with logs, bodies are in queue logs under dir.
func crashOptions(dir string, logs bool) PebbleOptions {
	if logs {
		return PebbleOptions{BodyDir: filepath.Join(dir, "queues")}
	}
	return PebbleOptions{}
}

func testCrashKill(t *testing.T, logs bool) {
	// Each kill takes seconds (a child process doing thousands of synced
	// appends); the default keeps the suite quick, CI and long runs set
	// EPITAPH_STORE_CRASH_KILLS for more.
	kills, spread := 2, 5000
	if raceEnabled || testing.Short() {
		kills, spread = 1, 2000
	}
	kills = storetest.Kills("EPITAPH_STORE_CRASH_KILLS", kills)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(42, uint64(os.Getpid())))
	type info struct {
		prod, n int
	}
	appended := map[uint64]info{}
	settled := map[uint64]bool{}
	moved := map[uint64]uint64{}
	intent := map[uint64]bool{} // a settle or move was submitted (maybe not acknowledged)
	total := 0
	for k := 0; k < kills; k++ {
		env := []string{crashEnv + "=" + dir, fmt.Sprintf("%s_RUN=%d", crashEnv, k)}
		if logs {
			env = append(env, crashEnv+"_LOGS=1")
		}
		cmd, sc := storetest.StartChild(t, env...)
		target := 1000 + rng.IntN(spread)
		acks := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch f[0] {
			case "A":
				seq, _ := strconv.ParseUint(f[1], 10, 64)
				p, _ := strconv.Atoi(f[2])
				n, _ := strconv.Atoi(f[3])
				appended[seq] = info{p, n}
			case "S":
				seq, _ := strconv.ParseUint(f[1], 10, 64)
				settled[seq] = true
			case "I":
				seq, _ := strconv.ParseUint(f[1], 10, 64)
				intent[seq] = true
			case "M":
				seq, _ := strconv.ParseUint(f[1], 10, 64)
				ns, _ := strconv.ParseUint(f[2], 10, 64)
				moved[seq] = ns
			default:
				t.Fatalf("child: %s", sc.Text())
			}
			if acks++; acks == target {
				cmd.Process.Kill() // SIGKILL; lines already written are still read below
			}
		}
		cmd.Wait()
		if acks < target {
			t.Fatalf("child exited early after %d acks", acks)
		}
		total += acks

		s, err := OpenPebble(dir, crashOptions(dir, logs))
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		q1 := map[uint64]string{}
		lastN := map[int]int{}
		var prev uint64
		s.Iterate(1, func(seq uint64, msg, _ []byte) error {
			if seq <= prev {
				t.Errorf("out of order %d after %d", seq, prev)
			}
			prev = seq
			q1[seq] = string(msg)
			var p, n int
			fmt.Sscanf(string(msg), "%d-%d", &p, &n)
			if l, ok := lastN[p]; ok && n <= l {
				t.Errorf("producer %d: %d after %d", p, n, l)
			}
			lastN[p] = n
			return nil
		})
		q2 := map[string]uint64{}
		s.Iterate(2, func(seq uint64, msg, _ []byte) error {
			if _, dup := q2[string(msg)]; dup {
				t.Errorf("duplicate in q2: %s", msg)
			}
			q2[string(msg)] = seq
			return nil
		})
		lost := 0
		for seq, in := range appended {
			body, inQ1 := q1[seq]
			ns, inQ2 := q2[fmt.Sprintf("moved-%d", seq)]
			switch {
			case inQ1 && inQ2:
				t.Errorf("seq %d in both queues (half move)", seq)
			case settled[seq] && (inQ1 || inQ2):
				t.Errorf("settled seq %d still present", seq)
			case moved[seq] != 0 && (inQ1 || ns != moved[seq]):
				t.Errorf("moved seq %d: inQ1=%v q2seq=%d want %d", seq, inQ1, ns, moved[seq])
			case !settled[seq] && !intent[seq] && !inQ1 && !inQ2:
				lost++
			case inQ1 && in.prod >= 0 && body != fmt.Sprintf("%d-%d", in.prod, in.n):
				t.Errorf("seq %d body %q", seq, body)
			}
		}
		// queue 1 must hold nothing that was never acknowledged-appended, except
		// appends in flight at the kill (at most 8, one per producer).
		unknown := 0
		for seq := range q1 {
			if _, ok := appended[seq]; !ok {
				unknown++
				appended[seq] = info{-1, -1} // recovered: treat as appended from now on
			}
		}
		t.Logf("kill %d after %d acks: q1=%d q2=%d lost=%d recovered-unacked=%d", k, acks, len(q1), len(q2), lost, unknown)
		if lost > 0 {
			t.Errorf("lost %d acknowledged messages", lost)
		}
		if unknown > 8 {
			t.Errorf("%d unacknowledged messages recovered (> in-flight)", unknown)
		}
		// unacknowledged settles/moves may have landed: record what the store says
		for seq := range appended {
			if _, ok := q1[seq]; !ok && moved[seq] == 0 {
				if ns, ok := q2[fmt.Sprintf("moved-%d", seq)]; ok {
					moved[seq] = ns
				} else {
					settled[seq] = true
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d kills, %d acknowledged operations checked", kills, total)
}
