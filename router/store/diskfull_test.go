package store

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/epitaph-mq/epitaph/router/store/storetest"
)

// With the disk full, commits are answered (ErrDiskFull) instead of hanging
// behind flushes that cannot complete; the failing flushes are retried with
// a back-off and logged a bounded number of times; once space is freed,
// commits succeed again without a restart, and nothing acknowledged is lost.
func TestDiskFullAnswersCommitsAndBacksOff(t *testing.T) {
	fs, inj, logs := storetest.FullDisk()
	p, err := OpenPebble("db", PebbleOptions{FS: fs, MemTableSize: 256 << 10, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if !t.Failed() { // a store stuck in a commit cannot close
			p.Close()
			checkNoLeak(t)
		}
	}()

	body := make([]byte, 4<<10)
	var (
		mu      sync.Mutex
		acked   []uint64
		refused int
		seq     atomic.Uint64
	)
	// publish submits one append and waits for its answer, failing the test
	// if none comes within the deadline (a hang).
	publish := func() error {
		s := seq.Add(1)
		ch := make(chan error, 1)
		p.Append([]Record{{Queue: 1, Seq: s, Msg: body}}, func(err error) { ch <- err })
		select {
		case err := <-ch:
			mu.Lock()
			if err == nil {
				acked = append(acked, s)
			} else {
				refused++
			}
			mu.Unlock()
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("append %d: no answer within 20s with the disk full", s)
			return nil
		}
	}
	for range 100 {
		if err := publish(); err != nil {
			t.Fatal(err)
		}
	}

	inj.On.Store(true)
	logsBefore := logs.N.Load()
	start := time.Now()
	// Publish until the store refuses for lack of space (the memtables fill
	// up first), then a little longer: every append gets an answer.
	var diskErr error
	for i := 0; i < 10000 && diskErr == nil; i++ {
		if err := publish(); err != nil {
			if !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrNotDurable) {
				t.Fatalf("refused with %v, want ErrDiskFull and ErrNotDurable", err)
			}
			diskErr = err
		}
	}
	if diskErr == nil {
		t.Fatal("10000 appends of 4 KiB taken with every flush failing")
	}
	for range 20 {
		if err := publish(); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("append while the disk is full: %v", err)
		}
	}
	// Hold the disk full for a while: the flush retries back off.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if err := publish(); !errors.Is(err, ErrDiskFull) {
			t.Fatalf("append while the disk is full: %v", err)
		}
	}
	full := time.Since(start)
	injected, lines := inj.Injected.Load(), logs.N.Load()-logsBefore
	t.Logf("disk full for %v: %d failed table writes, %d log lines, %d appends refused", full, injected, lines, refused)
	if perSec := float64(injected) / full.Seconds(); perSec > 50 {
		t.Fatalf("%.0f failed table writes per second: the flush is retried in a busy loop", perSec)
	}
	if perSec := float64(lines) / full.Seconds(); perSec > 20 {
		t.Fatalf("%.0f log lines per second while the disk is full", perSec)
	}

	// Space is freed: commits succeed again, without a restart.
	inj.On.Store(false)
	deadline = time.Now().Add(20 * time.Second)
	for publish() != nil {
		if time.Now().After(deadline) {
			t.Fatal("appends still refused 20s after space was freed")
		}
	}
	for range 50 {
		if err := publish(); err != nil {
			t.Fatal(err)
		}
	}

	// Everything acknowledged is there after a restart, nothing refused is.
	p.Close()
	p, err = OpenPebble("db", PebbleOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	got, err := contents(t, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range acked {
		if _, ok := got[s]; !ok {
			t.Fatalf("acknowledged append %d lost", s)
		}
	}
	if len(got) != len(acked) {
		t.Fatalf("%d messages stored, %d acknowledged (a refused append came back)", len(got), len(acked))
	}
	t.Logf("%d acknowledged, %d refused", len(acked), refused)
}

// allFull fails every file creation and write with ENOSPC while on.
type allFull struct{ on atomic.Bool }

func (w *allFull) String() string { return "allFull" }
func (w *allFull) MaybeError(op errorfs.Op) error {
	if w.on.Load() && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpCreate) {
		return syscall.ENOSPC
	}
	return nil
}

// A WAL write refused for lack of space fails the group with ErrDiskFull;
// while the disk stays full every commit fails the same way, fast; once
// space is freed commits succeed again.
func TestWALWriteDiskFull(t *testing.T) {
	inj := &allFull{}
	fs := errorfs.Wrap(vfs.NewMem(), inj)
	p, err := OpenPebble("db", PebbleOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Close(); checkNoLeak(t) }()
	must(t, func(d func(error)) { p.Append([]Record{rec(1, 1)}, d) })
	inj.on.Store(true)
	for i := uint64(2); i < 50; i++ {
		err := wait(t, func(d func(error)) { p.Append([]Record{rec(1, i)}, d) })
		if !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrNotDurable) {
			t.Fatalf("append %d with the WAL full: %v", i, err)
		}
	}
	if r := p.Stats().Reopens; r > 20 {
		t.Fatalf("%d reopens for 48 failed commits: no back-off", r)
	}
	inj.on.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for wait(t, func(d func(error)) { p.Append([]Record{rec(1, 100)}, d) }) != nil {
		if time.Now().After(deadline) {
			t.Fatal("appends still fail 10s after space was freed")
		}
	}
	if g := fmt.Sprint(seqsOf(dump(t, p, 1))); g != "[1 100]" {
		t.Fatalf("stored %s, want [1 100]", g)
	}
}
