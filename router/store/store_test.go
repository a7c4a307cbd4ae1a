package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// wait submits through f and waits for its done.
func wait(t testing.TB, f func(done func(error))) error {
	t.Helper()
	ch := make(chan error, 1)
	f(func(err error) { ch <- err })
	return <-ch
}

func must(t testing.TB, f func(done func(error))) {
	t.Helper()
	if err := wait(t, f); err != nil {
		t.Fatal(err)
	}
}

type entry struct {
	seq        uint64
	msg, state string
}

func dump(t testing.TB, s Store, q QueueID) []entry {
	t.Helper()
	var out []entry
	if err := s.Iterate(q, func(seq uint64, msg, state []byte) error {
		e := entry{seq: seq, msg: string(msg)}
		if state != nil {
			e.state = string(state)
		}
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func seqsOf(es []entry) []uint64 {
	var s []uint64
	for _, e := range es {
		s = append(s, e.seq)
	}
	return s
}

func rec(q QueueID, seq uint64) Record {
	return Record{Queue: q, Seq: seq, Msg: []byte(fmt.Sprintf("m-%d-%d", q, seq))}
}

// stores runs f against Memory and Pebble; reopen simulates a restart (for
// Memory, it returns the same store: no durability is claimed).
func stores(t *testing.T, f func(t *testing.T, s Store, reopen func() Store)) {
	t.Run("memory", func(t *testing.T) {
		m := NewMemory()
		f(t, m, func() Store { return m })
	})
	for _, logs := range []bool{false, true} {
		name := "pebble"
		if logs {
			name = "pebble-queue-logs"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := PebbleOptions{}
			if logs {
				opts.BodyDir = filepath.Join(dir, "queues")
			}
			p, err := OpenPebble(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			cur := p
			defer func() { cur.Close(); checkNoLeak(t) }()
			f(t, p, func() Store {
				if err := cur.Close(); err != nil {
					t.Fatal(err)
				}
				cur, err = OpenPebble(dir, opts)
				if err != nil {
					t.Fatal(err)
				}
				return cur
			})
		})
	}
}

func TestOrderingAndRecovery(t *testing.T) {
	stores(t, func(t *testing.T, s Store, reopen func() Store) {
		// Appends from many goroutines with interleaved seqs; Iterate is in seq order.
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					seq := uint64(i*8 + g)
					must(t, func(d func(error)) { s.Append([]Record{rec(1, seq)}, d) })
				}
			}()
		}
		wg.Wait()
		must(t, func(d func(error)) { s.Append([]Record{rec(2, 7), rec(2, 3)}, d) })
		s = reopen()
		got := dump(t, s, 1)
		if len(got) != 400 {
			t.Fatalf("got %d messages", len(got))
		}
		for i, e := range got {
			if e.seq != uint64(i) || e.msg != fmt.Sprintf("m-1-%d", i) {
				t.Fatalf("at %d: %+v", i, e)
			}
		}
		if g := seqsOf(dump(t, s, 2)); fmt.Sprint(g) != "[3 7]" {
			t.Fatalf("queue 2: %v", g)
		}
		var qs []QueueID
		s.Queues(func(q QueueID) error { qs = append(qs, q); return nil })
		if fmt.Sprint(qs) != "[1 2]" {
			t.Fatalf("queues %v", qs)
		}
	})
}

func TestSettleHeadAndHoles(t *testing.T) {
	stores(t, func(t *testing.T, s Store, reopen func() Store) {
		var recs []Record
		for i := uint64(10); i < 210; i++ {
			recs = append(recs, rec(5, i))
		}
		recs = append(recs, rec(6, 1)) // neighbour queue must be untouched
		must(t, func(d func(error)) { s.Append(recs, d) })
		// FIFO head settle (range delete), out-of-order settles (point deletes),
		// then the head catches up over the holes, an unknown seq is a no-op.
		must(t, func(d func(error)) { s.Settle(5, []uint64{10, 11, 12, 13}, d) })
		must(t, func(d func(error)) { s.Settle(5, []uint64{20, 22, 30, 999}, d) })
		must(t, func(d func(error)) { s.Settle(5, []uint64{14, 15, 16, 17, 18, 19, 21}, d) })
		s = reopen()
		want := []uint64{23, 24, 25, 26, 27, 28, 29}
		for i := uint64(31); i < 210; i++ {
			want = append(want, i)
		}
		if g := seqsOf(dump(t, s, 5)); fmt.Sprint(g) != fmt.Sprint(want) {
			t.Fatalf("after settle: %v", g)
		}
		// settle everything after a restart (window reloaded from disk), then append again
		var all []uint64
		for i := uint64(0); i < 210; i++ {
			all = append(all, i)
		}
		must(t, func(d func(error)) { s.Settle(5, all, d) })
		if g := dump(t, s, 5); len(g) != 0 {
			t.Fatalf("left %v", g)
		}
		must(t, func(d func(error)) { s.Append([]Record{rec(5, 300)}, d) })
		s = reopen()
		if g := seqsOf(dump(t, s, 5)); fmt.Sprint(g) != "[300]" {
			t.Fatalf("got %v", g)
		}
		if g := seqsOf(dump(t, s, 6)); fmt.Sprint(g) != "[1]" {
			t.Fatalf("neighbour %v", g)
		}
	})
}

func TestSettleAndAppendInOneGroup(t *testing.T) {
	stores(t, func(t *testing.T, s Store, reopen func() Store) {
		// Submitted without waiting: they share group commits. Settle of a seq
		// appended earlier in the same group, then a new append below the
		// settled range end must survive.
		var wg sync.WaitGroup
		wg.Add(4)
		d := func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		}
		s.Append([]Record{rec(1, 1), rec(1, 2), rec(1, 3), rec(1, 5)}, d)
		s.Settle(1, []uint64{1, 2, 3, 5}, d)
		s.Append([]Record{rec(1, 4)}, d)
		s.Update(1, 4, []byte("st"), d)
		wg.Wait()
		s = reopen()
		if g := dump(t, s, 1); fmt.Sprint(g) != "[{4 m-1-4 st}]" {
			t.Fatalf("got %v", g)
		}
	})
}

func TestMoveUpdateDeleteQueue(t *testing.T) {
	stores(t, func(t *testing.T, s Store, reopen func() Store) {
		must(t, func(d func(error)) {
			s.Append([]Record{rec(1, 1), rec(1, 2), {Queue: 1, Seq: 3, Msg: []byte("x"), State: []byte("s0")}}, d)
		})
		must(t, func(d func(error)) { s.Update(1, 2, []byte("dc=1"), d) })
		must(t, func(d func(error)) { s.Update(1, 9, []byte("ghost"), d) }) // unknown: no-op
		must(t, func(d func(error)) {
			s.Move(1, []uint64{1, 3}, []Record{
				{Queue: 2, Seq: 100, Msg: []byte("m-1-1"), State: []byte("deaths=1")},
				{Queue: 3, Seq: 7, Msg: []byte("x")},
			}, d)
		})
		s = reopen()
		if g := fmt.Sprint(dump(t, s, 1)); g != "[{2 m-1-2 dc=1}]" {
			t.Fatalf("q1 %s", g)
		}
		if g := fmt.Sprint(dump(t, s, 2)); g != "[{100 m-1-1 deaths=1}]" {
			t.Fatalf("q2 %s", g)
		}
		if g := fmt.Sprint(dump(t, s, 3)); g != "[{7 x }]" {
			t.Fatalf("q3 %s", g)
		}
		must(t, func(d func(error)) { s.Update(1, 2, nil, d) })
		must(t, func(d func(error)) { s.DeleteQueue(2, d) })
		s = reopen()
		if g := fmt.Sprint(dump(t, s, 1)); g != "[{2 m-1-2 }]" {
			t.Fatalf("q1 %s", g)
		}
		if g := dump(t, s, 2); len(g) != 0 {
			t.Fatalf("q2 %v", g)
		}
		must(t, func(d func(error)) { s.Append([]Record{rec(2, 1)}, d) })
		if g := seqsOf(dump(t, s, 2)); fmt.Sprint(g) != "[1]" {
			t.Fatalf("q2 %v", g)
		}
	})
}

func TestMeta(t *testing.T) {
	stores(t, func(t *testing.T, s Store, reopen func() Store) {
		must(t, func(d func(error)) { s.PutMeta("queue/%2f/a", []byte("1"), d) })
		must(t, func(d func(error)) { s.PutMeta("user/guest", []byte("pw"), d) })
		must(t, func(d func(error)) { s.PutMeta("queue/%2f/a", []byte("2"), d) })
		must(t, func(d func(error)) { s.PutMeta("policy/p", []byte("x"), d) })
		must(t, func(d func(error)) { s.Append([]Record{rec(9, 1)}, d) })
		// queue delete with its metadata in one atomic batch
		must(t, func(d func(error)) { s.Commit(new(Batch).DeleteMeta("policy/p").DeleteQueue(9), d) })
		s = reopen()
		var got []string
		if err := s.Meta(func(k string, v []byte) error { got = append(got, k+"="+string(v)); return nil }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[queue/%2f/a=2 user/guest=pw]" {
			t.Fatalf("meta %v", got)
		}
		if g := dump(t, s, 9); len(g) != 0 {
			t.Fatal(g)
		}
		stop := errors.New("stop")
		if err := s.Meta(func(string, []byte) error { return stop }); err != stop {
			t.Fatal(err)
		}
	})
}

func TestClosed(t *testing.T) {
	stores(t, func(t *testing.T, s Store, reopen func() Store) {
		s.Close()
		if err := wait(t, func(d func(error)) { s.Append([]Record{rec(1, 1)}, d) }); !errors.Is(err, ErrClosed) {
			t.Fatal(err)
		}
	})
}

// checkNoLeak fails if a store or pebble goroutine outlives Close. Goroutines
// may take a moment to unwind after their channels close, so it polls for
// that condition with a deadline (it is not used to order events).
func checkNoLeak(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var bad []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "cockroachdb/pebble") || strings.Contains(g, "router/store.(*Pebble)") {
				bad = append(bad, g)
			}
		}
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaked goroutines:\n%s", strings.Join(bad, "\n\n"))
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond)
	}
}
