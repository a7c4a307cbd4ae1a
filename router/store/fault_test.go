package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failWAL injects an error into WAL syncs while armed (fail > 0 counts down;
// fail < 0 fails until disarmed).
type failWAL struct {
	fail     atomic.Int64
	injected atomic.Int64
}

func (f *failWAL) String() string { return "failWAL" }
func (f *failWAL) MaybeError(op errorfs.Op) error {
	if (op.Kind != errorfs.OpFileSync && op.Kind != errorfs.OpFileSyncData) || !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	for {
		n := f.fail.Load()
		if n == 0 {
			return nil
		}
		if n < 0 || f.fail.CompareAndSwap(n, n-1) {
			f.injected.Add(1)
			return syscall.EIO
		}
	}
}

func TestInjectedSyncFailure(t *testing.T) {
	inj := &failWAL{}
	fs := errorfs.Wrap(vfs.NewMem(), inj)
	p, err := OpenPebble("db", PebbleOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close(); checkNoLeak(t) }()

	must(t, func(d func(error)) { p.Append([]Record{rec(1, 1), rec(1, 2), rec(1, 3)}, d) })
	must(t, func(d func(error)) { p.PutMeta("k", []byte("v1"), d) })

	// One failing fsync: every batch of the group fails, none is durable.
	inj.fail.Store(1)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Add(4)
	cb := func(i int) func(error) { return func(err error) { errs[i] = err; wg.Done() } }
	p.Commit(new(Batch).Append(rec(1, 4), rec(1, 5)), cb(0))                                        // rolled back
	p.Commit(new(Batch).Settle(1, 1).Append(Record{Queue: 2, Seq: 1, Msg: []byte("m-1-1")}), cb(1)) // move: rolled back
	p.Commit(new(Batch).PutMeta("k", []byte("v2")), cb(2))                                          // rolled back
	p.Commit(new(Batch).Settle(1, 3), cb(3))                                                        // rolled forward
	wg.Wait()
	// All four may not share one group (the committer may take the first alone);
	// whatever failed must obey the protocol, and at least the first failed.
	if !errors.Is(errs[0], ErrNotDurable) {
		t.Fatalf("first batch: %v", errs[0])
	}
	if inj.injected.Load() != 1 {
		t.Fatalf("injected %d", inj.injected.Load())
	}
	// The store works again without a restart (this also waits until the
	// committer has finished the reopen that follows the failure callbacks).
	must(t, func(d func(error)) { p.Append([]Record{rec(1, 6)}, d) })
	if st := p.Stats(); st.Failures != 1 || st.Reopens != 1 {
		t.Fatalf("stats %+v", st)
	}

	q1 := fmt.Sprint(seqsOf(dump(t, p, 1)))
	q2 := seqsOf(dump(t, p, 2))
	var meta string
	p.Meta(func(k string, v []byte) error { meta = string(v); return nil })
	want1 := map[bool]string{true: "[2 6]", false: "[1 2 6]"} // settle 3 always completed
	moved := errs[1] == nil
	if q1 != want1[moved] {
		t.Fatalf("q1 %s (move err %v)", q1, errs[1])
	}
	if moved != (len(q2) == 1) {
		t.Fatalf("move half-applied: err %v, q2 %v, q1 %s", errs[1], q2, q1)
	}
	if (errs[2] == nil) != (meta == "v2") {
		t.Fatalf("meta %q err %v", meta, errs[2])
	}
	// Reopen from disk: same picture.
	p.Close()
	p, err = OpenPebble("db", PebbleOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if g := fmt.Sprint(seqsOf(dump(t, p, 1))); g != q1 {
		t.Fatalf("after restart %s, before %s", g, q1)
	}
}

// A failure that persists (disk gone): batches keep failing fast, reads say
// unavailable, and the store comes back by itself once the disk does.
func TestPersistentFailureRecoversWithoutRestart(t *testing.T) {
	inj := &failWAL{}
	fs := errorfs.Wrap(vfs.NewMem(), inj)
	p, err := OpenPebble("db", PebbleOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close(); checkNoLeak(t) }()
	must(t, func(d func(error)) { p.Append([]Record{rec(1, 1)}, d) })
	inj.fail.Store(-1)
	for i := uint64(2); i < 5; i++ {
		if err := wait(t, func(d func(error)) { p.Append([]Record{rec(1, i)}, d) }); !errors.Is(err, ErrNotDurable) {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	inj.fail.Store(0)
	// Reopens of a broken store are spaced (10ms doubling to 1s): the
	// store comes back within a second.
	deadline := time.Now().Add(5 * time.Second)
	for wait(t, func(d func(error)) { p.Append([]Record{rec(1, 10)}, d) }) != nil {
		if time.Now().After(deadline) {
			t.Fatal("appends still fail 5s after the disk came back")
		}
	}
	if g := fmt.Sprint(seqsOf(dump(t, p, 1))); g != "[1 10]" {
		t.Fatalf("got %s", g)
	}
}

// Power loss: random operations on the crashable in-memory FS, crash (drop
// unsynced data) at a random point, reopen: every acknowledged operation is
// there, and open never fails.
func TestPowerLoss(t *testing.T) {
	iters := 30
	if testing.Short() {
		iters = 5
	}
	for it := 0; it < iters; it++ {
		rng := rand.New(rand.NewPCG(uint64(it), 7))
		mem := vfs.NewCrashableMem()
		p, err := OpenPebble("db", PebbleOptions{FS: mem, MemTableSize: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		// model of acknowledged state
		type msg struct {
			q   QueueID
			seq uint64
		}
		live := map[msg]string{}
		next := map[QueueID]uint64{1: 1, 2: 1}
		nops := 50 + rng.IntN(400)
		for i := 0; i < nops; i++ {
			var b Batch
			var apply func()
			switch r := rng.IntN(10); {
			case r < 5:
				q := QueueID(1 + rng.IntN(2))
				var recs []Record
				for k := 0; k < 1+rng.IntN(5); k++ {
					recs = append(recs, Record{Queue: q, Seq: next[q], Msg: []byte(fmt.Sprintf("%d-%d-%d", it, q, next[q]))})
					next[q]++
				}
				b.Append(recs...)
				apply = func() {
					for _, r := range recs {
						live[msg{r.Queue, r.Seq}] = string(r.Msg)
					}
				}
			case r < 8: // settle the oldest few of queue 1 (and sometimes a random one)
				var ss []uint64
				for m := range live {
					if m.q == 1 && (len(ss) < 3 || rng.IntN(4) == 0) {
						ss = append(ss, m.seq)
					}
				}
				b.Settle(1, ss...)
				apply = func() {
					for _, s := range ss {
						delete(live, msg{1, s})
					}
				}
			default: // dead-letter move 1 -> 2
				var from msg
				found := false
				for m := range live {
					if m.q == 1 {
						from, found = m, true
						break
					}
				}
				if !found {
					continue
				}
				to := msg{2, next[2]}
				next[2]++
				body := live[from]
				b.Settle(1, from.seq).Append(Record{Queue: 2, Seq: to.seq, Msg: []byte(body)})
				apply = func() { delete(live, from); live[to] = body }
			}
			must(t, func(d func(error)) { p.Commit(&b, d) })
			apply()
		}
		clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: []int{0, 50, 100}[it%3], RNG: rng})
		p.Close()
		p2, err := OpenPebble("db", PebbleOptions{FS: clone})
		if err != nil {
			t.Fatalf("iteration %d: open after crash: %v", it, err)
		}
		got := map[msg]string{}
		for _, q := range []QueueID{1, 2} {
			for _, e := range dump(t, p2, q) {
				got[msg{q, e.seq}] = e.msg
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(live) {
			t.Fatalf("iteration %d: after crash\n got %v\nwant %v", it, got, live)
		}
		p2.Close()
	}
	checkNoLeak(t)
}
