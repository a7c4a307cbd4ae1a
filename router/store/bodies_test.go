package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph/router/store/segment"
)

// bodyFaults is the real file system with a switchable full disk (writes
// and creations fail with ENOSPC) and fsyncs that fail with EIO while set.
type bodyFaults struct {
	segment.OSFS
	full      atomic.Bool
	failSyncs atomic.Bool
}

func (fs *bodyFaults) OpenFile(name string, flag int, perm os.FileMode) (segment.File, error) {
	if flag&os.O_CREATE != 0 && fs.full.Load() {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &bodyFaultFile{File: f, fs: fs}, nil
}

type bodyFaultFile struct {
	*os.File
	fs *bodyFaults
}

func (f *bodyFaultFile) Write(b []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(b)
}

func (f *bodyFaultFile) Sync() error {
	if f.fs.failSyncs.Load() {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

func openWithLogs(t *testing.T, dir string, fs segment.FS) *Pebble {
	t.Helper()
	p, err := OpenPebble(dir, PebbleOptions{BodyDir: filepath.Join(dir, "queues"), BodyFS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func body(seq uint64, size int) []byte {
	b := bytes.Repeat([]byte{byte(seq)}, size)
	copy(b, fmt.Sprintf("m%d:", seq))
	return b
}

// intactSeqs returns the seqs q holds, each checked to have its body(seq,
// size).
func intactSeqs(t *testing.T, p *Pebble, q QueueID, size int) []uint64 {
	t.Helper()
	var seqs []uint64
	if err := p.Iterate(q, func(seq uint64, msg, _ []byte) error {
		if !bytes.Equal(msg, body(seq, size)) {
			return fmt.Errorf("seq %d: wrong body", seq)
		}
		seqs = append(seqs, seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func segFiles(t *testing.T, dir string, q QueueID) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "queues", fmt.Sprintf("%016x", uint64(q)), "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The bodies are in the queue's log, not in Pebble; settling the head frees
// the log's segments as the head passes them, a purge frees them all, and
// what stays is read back intact after a restart.
func TestQueueLogHoldsBodiesAndFreesDisk(t *testing.T) {
	dir := t.TempDir()
	p := openWithLogs(t, dir, nil)
	const n, size = 3000, 16 << 10 // about 48 MiB: three segments and a bit
	for lo := uint64(1); lo <= n; lo += 100 {
		var recs []Record
		for s := lo; s < lo+100; s++ {
			recs = append(recs, Record{Queue: 7, Seq: s, Msg: body(s, size)})
		}
		must(t, func(done func(error)) { p.Append(recs, done) })
	}
	if got := segFiles(t, dir, 7); got < 3 {
		t.Fatalf("%d segments for %d MiB of bodies", got, n*size>>20)
	}
	if sst, _ := filepath.Glob(filepath.Join(dir, "*.sst")); len(sst) != 0 {
		t.Logf("tables: %v", sst)
	}
	if m := p.DB().Metrics(); m.MemTable.Size > 8<<20 {
		t.Fatalf("bodies went to Pebble: memtable %d bytes", m.MemTable.Size)
	}
	before := segFiles(t, dir, 7)
	var head []uint64
	for s := uint64(1); s <= 2000; s++ {
		head = append(head, s)
	}
	must(t, func(done func(error)) { p.Settle(7, head, done) })
	pollUntil(t, "segments below the head deleted", func() bool { return segFiles(t, dir, 7) < before })

	p = reopenPebble(t, p, dir, nil)
	seqs := intactSeqs(t, p, 7, size)
	if len(seqs) != 1000 || seqs[0] != 2001 || seqs[999] != n {
		t.Fatalf("after restart: %d messages, %v..", len(seqs), seqs[:min(3, len(seqs))])
	}
	must(t, func(done func(error)) { p.Settle(7, seqs, done) })
	pollUntil(t, "every segment deleted after the purge", func() bool { return segFiles(t, dir, 7) == 0 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoLeak(t)
}

func reopenPebble(t *testing.T, p *Pebble, dir string, fs segment.FS) *Pebble {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return openWithLogs(t, dir, fs)
}

// Deleting a queue removes its log; a log left by a delete that a crash
// interrupted (its queue holds nothing) is removed at open.
func TestQueueLogDeleteAndOrphans(t *testing.T) {
	dir := t.TempDir()
	p := openWithLogs(t, dir, nil)
	must(t, func(done func(error)) { p.Append([]Record{rec(1, 1), rec(2, 1)}, done) })
	must(t, func(done func(error)) { p.DeleteQueue(1, done) })
	logDir := func(q QueueID) string { return filepath.Join(dir, "queues", fmt.Sprintf("%016x", uint64(q))) }
	pollUntil(t, "the deleted queue's log removed", func() bool {
		_, err := os.Stat(logDir(1))
		return errors.Is(err, os.ErrNotExist)
	})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(logDir(9), 0o750); err != nil {
		t.Fatal(err)
	}
	p = openWithLogs(t, dir, nil)
	defer p.Close()
	if _, err := os.Stat(logDir(9)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphaned log kept: %v", err)
	}
	if _, err := os.Stat(logDir(2)); err != nil {
		t.Fatalf("a live queue's log removed: %v", err)
	}
	if got := dump(t, p, 2); len(got) != 1 {
		t.Fatalf("queue 2 holds %d messages", len(got))
	}
}

// A store written with bodies in Pebble is opened with queue logs: the old
// messages are read from Pebble, the new ones from the log, in seq order.
func TestQueueLogAfterInlineBodies(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 10; s++ {
		must(t, func(done func(error)) { p.Append([]Record{{Queue: 3, Seq: s, Msg: body(s, 100)}}, done) })
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p = openWithLogs(t, dir, nil)
	for s := uint64(11); s <= 20; s++ {
		must(t, func(done func(error)) { p.Append([]Record{{Queue: 3, Seq: s, Msg: body(s, 100)}}, done) })
	}
	must(t, func(done func(error)) { p.Settle(3, []uint64{1, 2, 3, 11, 12}, done) })
	p = reopenPebble(t, p, dir, nil)
	defer p.Close()
	seqs := intactSeqs(t, p, 3, 100)
	want := []uint64{4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 16, 17, 18, 19, 20}
	if fmt.Sprint(seqs) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", seqs, want)
	}
}

// A reader racing settles never sees a settled message's body as missing:
// an iteration that read a reference before the settle skips the message
// whose body was released since.
func TestQueueLogIterationRacingSettles(t *testing.T) {
	dir := t.TempDir()
	p := openWithLogs(t, dir, nil)
	defer p.Close()
	const n = 60000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			prev := uint64(0)
			if err := p.Iterate(5, func(seq uint64, msg, _ []byte) error {
				if seq <= prev || !bytes.Equal(msg, body(seq, 1024)) {
					return fmt.Errorf("seq %d after %d: wrong body or order", seq, prev)
				}
				prev = seq
				return nil
			}); err != nil {
				errs <- err
				return
			}
		}
	}()
	for lo := uint64(1); lo <= n; lo += 200 {
		var recs []Record
		var seqs []uint64
		for s := lo; s < lo+200; s++ {
			recs = append(recs, Record{Queue: 5, Seq: s, Msg: body(s, 1024)})
			seqs = append(seqs, s)
		}
		must(t, func(done func(error)) { p.Append(recs, done) })
		must(t, func(done func(error)) { p.Settle(5, seqs[:150], done) })
		if lo > 1 {
			must(t, func(done func(error)) { p.Settle(5, seqAll(lo-50, lo), done) })
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func seqAll(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// A full disk under a queue log fails the appends of that group with
// ErrDiskFull and stores nothing of them; a settle is completed; once
// space returns, appends succeed, and a restart finds exactly what was
// acknowledged.
func TestQueueLogDiskFull(t *testing.T) {
	dir := t.TempDir()
	fs := &bodyFaults{}
	p := openWithLogs(t, dir, fs)
	must(t, func(done func(error)) { p.Append([]Record{rec(4, 1), rec(4, 2)}, done) })
	fs.full.Store(true)
	settled := make(chan error, 1)
	appended := make(chan error, 1)
	p.Settle(4, []uint64{1}, func(err error) { settled <- err })
	p.Append([]Record{rec(4, 3)}, func(err error) { appended <- err })
	if err := <-appended; !errors.Is(err, ErrDiskFull) || !errors.Is(err, ErrNotDurable) {
		t.Fatalf("append on a full disk: %v", err)
	}
	// The settle may have shared the failed group: it is then answered
	// with the error and completed when the store recovers.
	<-settled
	fs.full.Store(false)
	pollUntil(t, "the settle applied", func() bool {
		var seqs []uint64
		err := p.Iterate(4, func(seq uint64, _, _ []byte) error { seqs = append(seqs, seq); return nil })
		return err == nil && fmt.Sprint(seqs) == "[2]" // ErrUnavailable while it reopens
	})
	must(t, func(done func(error)) { p.Append([]Record{rec(4, 4)}, done) })
	p = reopenPebble(t, p, dir, fs)
	defer p.Close()
	if got := fmt.Sprint(seqsOf(dump(t, p, 4))); got != "[2 4]" {
		t.Fatalf("after restart: %s", got)
	}
}

// A failing fsync of a queue log fails its group (ErrNotDurable), and the
// log is opened again for the next append, which succeeds.
func TestQueueLogSyncFailure(t *testing.T) {
	dir := t.TempDir()
	fs := &bodyFaults{}
	p := openWithLogs(t, dir, fs)
	must(t, func(done func(error)) { p.Append([]Record{rec(6, 1)}, done) })
	fs.failSyncs.Store(true)
	if err := wait(t, func(done func(error)) { p.Append([]Record{rec(6, 2)}, done) }); !errors.Is(err, ErrNotDurable) ||
		!errors.Is(err, segment.ErrFailed) {
		t.Fatalf("append with a failing fsync: %v", err)
	}
	fs.failSyncs.Store(false)
	must(t, func(done func(error)) { p.Append([]Record{rec(6, 3)}, done) })
	p = reopenPebble(t, p, dir, fs)
	defer p.Close()
	if got := fmt.Sprint(seqsOf(dump(t, p, 6))); got != "[1 3]" {
		t.Fatalf("after restart: %s", got)
	}
}

// References whose entries are past the end of the queue log (the last
// group commit of a crash, synced to Pebble before its bodies reached the
// disk) are removed at open; the messages before them are kept.
func TestQueueLogDanglingReferencesRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	p := openWithLogs(t, dir, nil)
	for s := uint64(1); s <= 10; s++ {
		must(t, func(done func(error)) { p.Append([]Record{{Queue: 8, Seq: s, Msg: body(s, 1000)}}, done) })
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "queues", fmt.Sprintf("%016x", 8), "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatal(segs, err)
	}
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Cut the last two frames and half of the third: a torn tail.
	if err := os.Truncate(segs[0], fi.Size()-int64(2.5*float64(1000+16))); err != nil {
		t.Fatal(err)
	}
	p = openWithLogs(t, dir, nil)
	defer p.Close()
	seqs := intactSeqs(t, p, 8, 1000)
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("got %v", seqs)
	}
	must(t, func(done func(error)) { p.Append([]Record{{Queue: 8, Seq: 11, Msg: body(11, 1000)}}, done) })
	if got := seqsOf(dump(t, p, 8)); fmt.Sprint(got) != "[1 2 3 4 5 6 7 11]" {
		t.Fatalf("after a new append: %v", got)
	}
}

// A queue log that cannot be opened (here its state file is a directory)
// refuses the start unless salvaging; salvage serves the other queues and
// reports the damaged queue's messages when they are read. (A state file
// cut or overwritten is a torn tail to the segment log: it opens, and
// since Pebble's references say which entries are live, nothing returns.)
func TestQueueLogDamagedStateFile(t *testing.T) {
	dir := t.TempDir()
	p := openWithLogs(t, dir, nil)
	must(t, func(done func(error)) { p.Append([]Record{rec(1, 1), rec(2, 1)}, done) })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "queues", fmt.Sprintf("%016x", 1), "state")
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(state, 0o750); err != nil {
		t.Fatal(err)
	}
	opts := PebbleOptions{BodyDir: filepath.Join(dir, "queues")}
	if _, err := OpenPebble(dir, opts); err == nil {
		t.Fatal("strict open of a queue log that cannot be opened succeeded")
	}
	checkNoLeak(t)
	opts.Recovery = RecoverySalvage
	p, err := OpenPebble(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := dump(t, p, 2); len(got) != 1 || got[0].msg != "m-2-1" {
		t.Fatalf("other queue: %v", got)
	}
	if err := p.Iterate(1, func(uint64, []byte, []byte) error { return nil }); err == nil {
		t.Fatal("reading the damaged queue succeeded")
	}
}

// Seqs appended out of order turn the head release off for that queue,
// also after a restart: a settle never releases an entry a stored message
// still names.
func TestQueueLogOutOfOrderSeqsKeepEntries(t *testing.T) {
	dir := t.TempDir()
	p := openWithLogs(t, dir, nil)
	var first, later []Record
	for s := uint64(1); s <= 600; s++ {
		first = append(first, Record{Queue: 3, Seq: s + 1000, Msg: body(s+1000, 16<<10)})
		later = append(later, Record{Queue: 3, Seq: s, Msg: body(s, 16<<10)})
	}
	must(t, func(done func(error)) { p.Append(first, done) }) // seqs 1001..1600: indices 1..600
	must(t, func(done func(error)) { p.Append(later, done) }) // seqs 1..600: indices 601..1200
	p = reopenPebble(t, p, dir, nil)
	defer p.Close()
	// Settle seqs 1..500: the first stored message by seq is then seq
	// 501, at index 1101, past the first 16 MiB segment (indices 1..1024);
	// a release up to it would take seqs 1001..1600 (indices 1..600).
	var low []uint64
	for s := uint64(1); s <= 500; s++ {
		low = append(low, s)
	}
	must(t, func(done func(error)) { p.Settle(3, low, done) })
	n := len(intactSeqs(t, p, 3, 16<<10))
	if n != 700 {
		t.Fatalf("%d messages left, want 700", n)
	}
}
