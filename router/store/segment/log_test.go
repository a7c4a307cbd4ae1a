package segment

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/epitaph-mq/epitaph/router/store/storeerr"
	"github.com/epitaph-mq/epitaph/router/store/storetest"
)

// Entries appended in batches across many segments read back in order, by
// a reader and by Get, before and after a reopen; reopening reads the
// segments' headers and footers and continues at the same index.
func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	opt := Options{SegmentSize: 4 << 10, ReadAhead: 512}
	l := openT(t, dir, opt)
	if l.FirstIndex() != 1 || l.LastIndex() != 0 {
		t.Fatalf("empty log: first %d last %d", l.FirstIndex(), l.LastIndex())
	}
	appendN(t, l, 1000, 7)
	if n := len(segFiles(t, dir)); n < 10 {
		t.Fatalf("%d segments, want several", n)
	}
	check := func(l *Log) {
		t.Helper()
		idx, corrupt := readAll(t, l)
		if len(corrupt) > 0 || len(idx) != 1000 || idx[0] != 1 || idx[999] != 1000 {
			t.Fatalf("read %d entries (%v...), corrupt %v", len(idx), idx[:min(3, len(idx))], corrupt)
		}
		for _, i := range []uint64{1, 500, 64, 65, 999, 1000, 3, 2} {
			data, err := l.Get(i)
			if err != nil || string(data) != string(payload(i)) {
				t.Fatalf("Get(%d) = %q, %v", i, data, err)
			}
		}
		if _, err := l.Get(1001); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get past the end: %v", err)
		}
		// A reader from the middle, then caught up, then new entries.
		r := l.NewReader(777)
		defer r.Close()
		if i, _, err := r.Next(); i != 777 || err != nil {
			t.Fatalf("reader from 777: %d %v", i, err)
		}
	}
	check(l)
	l.Close()
	l2 := openT(t, dir, opt)
	if l2.FirstIndex() != 1 || l2.LastIndex() != 1000 {
		t.Fatalf("reopened: first %d last %d", l2.FirstIndex(), l2.LastIndex())
	}
	check(l2)
	appendN(t, l2, 10, 3)
	if l2.LastIndex() != 1010 {
		t.Fatalf("last %d after appending after reopen", l2.LastIndex())
	}
}

// A reader at the end sees entries appended after it was created, before
// their fsync, and io.EOF when caught up.
func TestReaderFollowsAppends(t *testing.T) {
	l := openT(t, t.TempDir(), Options{SegmentSize: 1 << 10})
	r := l.NewReader(1)
	defer r.Close()
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("empty log: %v", err)
	}
	for i := uint64(1); i <= 200; i++ {
		if _, err := l.Append([][]byte{payload(i)}, nil); err != nil {
			t.Fatal(err)
		}
		got, data, err := r.Next()
		if err != nil || got != i || string(data) != string(payload(i)) {
			t.Fatalf("next = %d %q %v, want %d", got, data, err, i)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("caught up: %v", err)
	}
}

// Out-of-order settles are spans bounded by what is held; a segment whose
// entries are all settled is deleted once that is durable; the head moves
// over settled entries; all of it survives a reopen.
func TestSettleOutOfOrder(t *testing.T) {
	dir, opt, l := filledT(t, Options{SegmentSize: 2 << 10}, 2000, 10)
	segs := len(segFiles(t, dir))
	// Settle every other entry: one span per settled entry, never more
	// than the entries held.
	for i := uint64(2); i <= 2000; i += 2 {
		if err := l.Settle(i, i+1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := l.Stats(); st.HoleSpans != 1000 || st.Live != 1000 {
		t.Fatalf("stats %+v, want 1000 spans and 1000 live", st)
	}
	// Settle the rest of the middle third: its segments go.
	for i := uint64(701); i < 1400; i += 2 {
		if err := l.Settle(i, i+1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, dir)); n >= segs-2 {
		t.Fatalf("%d segments left of %d after settling a third", n, segs)
	}
	want := func() []uint64 {
		var w []uint64
		for i := uint64(1); i <= 2000; i += 2 {
			if i < 701 || i >= 1400 {
				w = append(w, i)
			}
		}
		return w
	}()
	check := func(l *Log) {
		t.Helper()
		idx, corrupt := readAll(t, l)
		if len(corrupt) > 0 || !slices.Equal(idx, want) {
			t.Fatalf("read %d entries, want %d; corrupt %v", len(idx), len(want), corrupt)
		}
		if _, err := l.Get(2); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a settled entry: %v", err)
		}
	}
	check(l)
	l.Close()
	l = openT(t, dir, opt)
	check(l)
	// Settling the head advances FirstIndex over the settled spans.
	if err := l.Settle(1, 2, nil); err != nil {
		t.Fatal(err)
	}
	if l.FirstIndex() != 3 {
		t.Fatalf("first %d after settling the head, want 3", l.FirstIndex())
	}
	// Settling everything leaves no span and an empty log.
	if err := l.Settle(1, 2001, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.HoleSpans != 0 || st.Live != 0 || l.FirstIndex() != 2001 || l.LastIndex() != 2000 {
		t.Fatalf("after settling all: %+v first %d last %d", st, l.FirstIndex(), l.LastIndex())
	}
	l.Close()
	l = openT(t, dir, opt)
	if l.FirstIndex() != 2001 || l.LastIndex() != 2000 {
		t.Fatalf("reopened: first %d last %d", l.FirstIndex(), l.LastIndex())
	}
	if n := len(segFiles(t, dir)); n > 1 {
		t.Fatalf("%d segment files left of an empty log", n)
	}
}

// TruncatePrefix releases the head and deletes whole segments below it;
// past the end it empties the log and sets the next index (a snapshot
// install). Both survive a reopen.
func TestTruncatePrefix(t *testing.T) {
	dir, opt, l := filledT(t, Options{SegmentSize: 2 << 10}, 1000, 10)
	before := len(segFiles(t, dir))
	done := make(chan error, 1)
	if err := l.TruncatePrefix(600, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil { // the removals follow the callbacks
		t.Fatal(err)
	}
	if after := len(segFiles(t, dir)); after > before/2 {
		t.Fatalf("%d segments of %d left after releasing 60%%", after, before)
	}
	idx, _ := readAll(t, l)
	if len(idx) != 401 || idx[0] != 600 {
		t.Fatalf("read %d from %v", len(idx), idx[:1])
	}
	l.Close()
	l = openT(t, dir, opt)
	if l.FirstIndex() != 600 || l.LastIndex() != 1000 {
		t.Fatalf("reopened: first %d last %d", l.FirstIndex(), l.LastIndex())
	}
	if _, err := l.Get(599); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get below the head: %v", err)
	}
	// Past the end: empty, next append at 5000.
	if err := l.TruncatePrefix(5000, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.FirstIndex() != 5000 || l.LastIndex() != 4999 || len(segFiles(t, dir)) != 0 {
		t.Fatalf("after reset: first %d last %d files %v", l.FirstIndex(), l.LastIndex(), segFiles(t, dir))
	}
	if first, err := l.Append([][]byte{payload(5000)}, nil); err != nil || first != 5000 {
		t.Fatalf("append after reset: %d %v", first, err)
	}
	l.Close()
	l = openT(t, dir, opt)
	if l.FirstIndex() != 5000 || l.LastIndex() != 5000 {
		t.Fatalf("reopened after reset: first %d last %d", l.FirstIndex(), l.LastIndex())
	}
}

// TruncateSuffix cuts a sealed segment (later ones deleted) and the next
// appends reuse the indices with new data; settles above the cut are
// forgotten; a reader past the cut reads the new entries.
func TestTruncateSuffix(t *testing.T) {
	dir, opt, l := filledT(t, Options{SegmentSize: 2 << 10}, 1000, 10)
	if err := l.Settle(500, 501, nil); err != nil {
		t.Fatal(err)
	}
	r := l.NewReader(450)
	defer r.Close()
	if i, _, err := r.Next(); i != 450 || err != nil {
		t.Fatalf("reader: %d %v", i, err)
	}
	if err := l.TruncateSuffix(430); err != nil {
		t.Fatal(err)
	}
	if l.LastIndex() != 429 {
		t.Fatalf("last %d after truncating at 430", l.LastIndex())
	}
	// New content at the same indices.
	var b [][]byte
	for i := uint64(430); i < 520; i++ {
		b = append(b, []byte("new-"+string(payload(i))))
	}
	if first, err := l.Append(b, nil); err != nil || first != 430 {
		t.Fatalf("append after suffix truncation: %d %v", first, err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if i, data, err := r.Next(); err != nil || i != 451 || string(data) != "new-"+string(payload(451)) {
		t.Fatalf("reader after truncation: %d %q %v", i, data, err)
	}
	checkNew := func(l *Log) {
		t.Helper()
		if l.LastIndex() != 519 {
			t.Fatalf("last %d", l.LastIndex())
		}
		for _, i := range []uint64{429, 430, 500, 519} {
			data, err := l.Get(i)
			want := payload(i)
			if i >= 430 {
				want = []byte("new-" + string(payload(i)))
			}
			if err != nil || string(data) != string(want) {
				t.Fatalf("Get(%d) = %q %v, want %q", i, data, err, want)
			}
		}
	}
	checkNew(l)
	l.Close()
	l = openT(t, dir, opt)
	checkNew(l)
}

// A torn tail (an append cut by a crash before its fsync) is cut at open:
// every synced entry is still there and the next append follows them.
func TestTornTailCut(t *testing.T) {
	dir, opt, l := filledT(t, Options{SegmentSize: 1 << 20}, 100, 10)
	l.Close()
	files := segFiles(t, dir)
	last := files[len(files)-1]
	full := appendFrame(nil, 101, payload(101))
	for _, cut := range []int{1, 5, frameHeader, len(full) - 1} {
		f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		f.Write(full[:cut])
		f.Close()
		logs := &storetest.LineCounter{}
		l := openT(t, dir, Options{SegmentSize: opt.SegmentSize, Logger: slog.New(logs)})
		if logs.N.Load() != 1 {
			t.Fatalf("cut %d: %d log records, want the cut reported once", cut, logs.N.Load())
		}
		idx, corrupt := readAll(t, l)
		if len(idx) != 100 || len(corrupt) > 0 || l.LastIndex() != 100 {
			t.Fatalf("cut %d: read %d, last %d, corrupt %v", cut, len(idx), l.LastIndex(), corrupt)
		}
		l.Close()
		if fi2, _ := os.Stat(last); fi2.Size() != fi.Size() {
			t.Fatalf("cut %d: file is %d bytes, want the torn tail cut to %d", cut, fi2.Size(), fi.Size())
		}
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// entryOffset is the file offset of entry idx's frame in a segment file.
func entryOffset(t *testing.T, path string, idx uint64) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := DecodeSegment(data)
	off := int64(headerSize)
	for _, e := range entries {
		if e.Index == idx {
			return off
		}
		off += frameHeader + int64(len(e.Data))
	}
	t.Fatalf("entry %d not in %s", idx, path)
	return 0
}

// A bit flip in a sealed segment is found when read: the reader reports
// exactly the damaged entry (a CorruptError wrapping storeerr.ErrCorrupt) and
// goes on with the next; a flip in the middle of the last segment is found
// at open, is not taken for a torn tail (the entries after it stay), and is
// reported at read the same way.
func TestBitFlipReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		segIdx func(n int) int // which segment file
		entry  uint64
		inData bool // flip a payload byte rather than the length
	}{
		{"sealed payload", func(int) int { return 1 }, 0, true},
		{"sealed length", func(int) int { return 1 }, 0, false},
		{"last segment payload", func(n int) int { return n - 1 }, 0, true},
		{"last segment length", func(n int) int { return n - 1 }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, opt, l := filledT(t, Options{SegmentSize: 4 << 10}, 500, 5)
			l.Close()
			files := segFiles(t, dir)
			path := files[tc.segIdx(len(files))]
			data, _ := os.ReadFile(path)
			entries, _ := DecodeSegment(data)
			victim := entries[len(entries)/2].Index
			off := entryOffset(t, path, victim)
			if tc.inData {
				off += frameHeader + 3
			}
			flipByte(t, path, off)

			l = openT(t, dir, opt)
			if l.LastIndex() != 500 {
				t.Fatalf("last %d after a flip in %s", l.LastIndex(), filepath.Base(path))
			}
			idx, corrupt := readAll(t, l)
			if len(corrupt) != 1 || corrupt[0].First != victim || corrupt[0].Last != victim || !errors.Is(corrupt[0], storeerr.ErrCorrupt) {
				t.Fatalf("corruption reported %v, want entry %d alone", corrupt, victim)
			}
			if len(idx) != 499 || slices.Contains(idx, victim) {
				t.Fatalf("read %d entries, want every other one", len(idx))
			}
			if _, err := l.Get(victim); !errors.Is(err, storeerr.ErrCorrupt) {
				t.Fatalf("Get of the damaged entry: %v", err)
			}
			if data, err := l.Get(victim + 1); err != nil || string(data) != string(payload(victim+1)) {
				t.Fatalf("Get of its neighbour: %q %v", data, err)
			}
		})
	}
}

// A damaged state file (a bit flip with valid records after it) refuses to
// open: a lost release would bring settled entries back.
func TestStateFileDamageRefused(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 100, 10)
	for i := uint64(10); i < 20; i += 2 {
		l.Settle(i, i+1, nil)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	flipByte(t, filepath.Join(dir, stateName), 10)
	if _, err := Open(dir, Options{}); !errors.Is(err, storeerr.ErrCorrupt) {
		t.Fatalf("open with a damaged state file: %v", err)
	}
}

// Concurrent appends share fsyncs: while one fsync is in progress, the
// appends made meanwhile all complete with the next one.
func TestGroupCommit(t *testing.T) {
	fs := newFaultFS()
	l := openT(t, t.TempDir(), Options{FS: fs})
	appendN(t, l, 1, 1) // creates the segment (synced by the appending goroutine)
	fs.mu.Lock()
	fs.gate, fs.entered = make(chan struct{}), make(chan struct{}, 1)
	gate := fs.gate
	fs.mu.Unlock()
	before := fs.syncs.Load()
	done := make(chan error, 100)
	if _, err := l.Append([][]byte{payload(2)}, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	<-fs.entered // the first fsync is under way
	for i := uint64(3); i <= 101; i++ {
		if _, err := l.Append([][]byte{payload(i)}, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	fs.mu.Lock()
	fs.gate = nil
	fs.mu.Unlock()
	close(gate)
	for range 100 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := fs.syncs.Load() - before; n != 2 {
		t.Fatalf("%d segment fsyncs for 100 appends, want 2 (one in progress, one for the rest)", n)
	}
}

// A full disk fails the append with storeerr.ErrDiskFull and leaves no
// partial frame; the log keeps every entry appended before, takes appends
// again once space returns, and all of it reads back after a reopen. A
// roll that cannot create its segment fails the same way.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	opt := Options{FS: fs, SegmentSize: 4 << 10}
	l := openT(t, dir, opt)
	appendN(t, l, 100, 5)
	for _, room := range []int64{0, 10, 100, 3000} {
		fs.quota.Store(room)
		var err error
		for err == nil {
			_, err = l.Append([][]byte{payload(l.LastIndex() + 1), payload(l.LastIndex() + 2)}, nil)
		}
		if !errors.Is(err, storeerr.ErrDiskFull) {
			t.Fatalf("room %d: append failed with %v, want ErrDiskFull", room, err)
		}
		fs.quota.Store(-1)
		appendN(t, l, 10, 3)
	}
	last := l.LastIndex()
	l.Close()
	l = openT(t, dir, opt)
	idx, corrupt := readAll(t, l)
	if len(corrupt) > 0 || uint64(len(idx)) != last || l.LastIndex() != last {
		t.Fatalf("after disk full: read %d of %d, corrupt %v", len(idx), last, corrupt)
	}
}

// A segment emptied by settles waits for the group commit to be deleted;
// a suffix cut at its base followed by appends creates a segment of the
// same name, which that deletion must not take.
func TestSuffixCutAtReleasedSegmentBase(t *testing.T) {
	dir := t.TempDir()
	opt := Options{SegmentSize: 2 << 10}
	fs := newFaultFS()
	opt.FS = fs
	l := openT(t, dir, opt)
	appendN(t, l, 300, 10)
	files := segFiles(t, dir)
	data, _ := os.ReadFile(files[1])
	entries, _ := DecodeSegment(data)
	first, last := entries[0].Index, entries[len(entries)-1].Index
	// Hold the syncer so the emptied segment stays doomed, not deleted.
	fs.mu.Lock()
	fs.gate, fs.entered = make(chan struct{}), make(chan struct{}, 1)
	gate := fs.gate
	fs.mu.Unlock()
	if _, err := l.Append([][]byte{payload(301)}, nil); err != nil {
		t.Fatal(err)
	}
	<-fs.entered
	if err := l.Settle(first, last+1, nil); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	fs.gate = nil
	fs.mu.Unlock()
	close(gate)
	if err := l.TruncateSuffix(first); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 20, 5)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openT(t, dir, Options{SegmentSize: 2 << 10})
	if l.LastIndex() != first+19 {
		t.Fatalf("last %d, want %d", l.LastIndex(), first+19)
	}
	for i := first; i < first+20; i++ {
		if data, err := l.Get(i); err != nil || string(data) != string(payload(i)) {
			t.Fatalf("Get(%d) = %q %v", i, data, err)
		}
	}
}

// Open reads each sealed segment's header and footer, the state file and
// the last segment, not the entries of the others; a reader then fills its
// buffer with one read for many entries.
func TestOpenAndReadAreLazy(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	opt := Options{FS: fs, SegmentSize: 64 << 10, ReadAhead: 32 << 10}
	l := openT(t, dir, opt)
	appendN(t, l, 20000, 100) // about 1.5 MB: 25 segments
	l.Close()
	var total, lastSize int64
	files := segFiles(t, dir)
	for _, f := range files {
		fi, _ := os.Stat(f)
		total += fi.Size()
		lastSize = fi.Size()
	}
	fs.readN.Store(0)
	l = openT(t, dir, opt)
	if max := lastSize + int64(len(files))*(headerSize+footerSize) + 4096; fs.readN.Load() > max {
		t.Fatalf("open read %d bytes of %d (%d segments), want at most %d", fs.readN.Load(), total, len(files), max)
	}
	fs.reads.Store(0)
	idx, corrupt := readAll(t, l)
	if len(idx) != 20000 || len(corrupt) > 0 {
		t.Fatalf("read %d, corrupt %v", len(idx), corrupt)
	}
	if calls, max := fs.reads.Load(), total/(32<<10)+2*int64(len(files)); calls > max {
		t.Fatalf("%d read calls for %d entries, want at most %d", calls, len(idx), max)
	}
}

// Releases that reached the disk while the appends they released did not
// (a crash between the segment's and the state file's writes, or a cut
// segment) do not release the entries appended at those indices later,
// across two reopens.
func TestReleaseOfLostEntriesDropped(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 100, 10)
	if err := l.Settle(90, 95, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Lose entries 81..100 as if never written.
	seg := segFiles(t, dir)[0]
	if err := os.Truncate(seg, entryOffset(t, seg, 81)); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		l = openT(t, dir, Options{})
		if l.LastIndex() != 80+uint64(round)*20 {
			t.Fatalf("round %d: last %d", round, l.LastIndex())
		}
		if round == 0 {
			appendN(t, l, 20, 4)
		}
		for i := uint64(81); i <= 100; i++ {
			if _, err := l.Get(i); round == 1 && err != nil {
				t.Fatalf("round %d: entry %d appended after the loss: %v", round, i, err)
			}
		}
		l.Close()
	}
}

// The state file is rewritten as one checkpoint when it grows past four
// checkpoints' size, and what it says survives the rewrite.
func TestStateCompaction(t *testing.T) {
	defer func(v int64) { minCompact = v }(minCompact)
	minCompact = 512
	dir := t.TempDir()
	l := openT(t, dir, Options{})
	appendN(t, l, 2000, 50)
	var sizes []int64
	for i := uint64(3); i < 2000; i += 2 {
		if err := l.Settle(i, i+1, nil); err != nil {
			t.Fatal(err)
		}
		if i%64 == 1 && i > 100 {
			if err := l.TruncatePrefix(i-100, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(dir, stateName))
		sizes = append(sizes, fi.Size())
	}
	// At most 64 spans are held (the head follows 100 behind).
	if slices.Max(sizes) > 4*(21+16*64)+512 {
		t.Fatalf("state file grew to %d bytes", slices.Max(sizes))
	}
	shrunk := false
	for k := 1; k < len(sizes); k++ {
		shrunk = shrunk || sizes[k] < sizes[k-1]
	}
	if !shrunk {
		t.Fatal("the state file was never rewritten")
	}
	first, st := l.FirstIndex(), l.Stats()
	l.Close()
	l = openT(t, dir, Options{})
	if l.FirstIndex() != first || l.Stats() != st {
		t.Fatalf("reopened: first %d stats %+v, want %d %+v", l.FirstIndex(), l.Stats(), first, st)
	}
	idx, _ := readAll(t, l)
	var want []uint64
	for i := first; i <= 2000; i++ {
		if i%2 == 0 {
			want = append(want, i)
		}
	}
	if !slices.Equal(idx, want) {
		t.Fatalf("read %v after the rewrite, want %v", idx, want)
	}
	for _, i := range idx {
		if i%2 == 1 && i >= 3 {
			t.Fatalf("settled entry %d read back", i)
		}
	}
}

// A release whose state record cannot be written for lack of space is
// answered with storeerr.ErrDiskFull, stays in effect, and is written with
// the next group commit once there is room: after a reopen it holds.
func TestDiskFullOnRelease(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	l := openT(t, dir, Options{FS: fs})
	appendN(t, l, 50, 10)
	fs.quota.Store(3)
	done := make(chan error, 1)
	if err := l.Settle(10, 20, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, storeerr.ErrDiskFull) {
		t.Fatalf("settle on a full disk: %v, want ErrDiskFull", err)
	}
	if _, err := l.Get(15); !errors.Is(err, ErrNotFound) {
		t.Fatalf("settled entry readable after the failed write: %v", err)
	}
	fs.quota.Store(-1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openT(t, dir, Options{})
	idx, _ := readAll(t, l)
	if len(idx) != 40 || slices.Contains(idx, 15) {
		t.Fatalf("after space returned and a reopen: %d entries", len(idx))
	}
}

// Appenders, a settler, the head moving and readers all at once (for the
// race detector): every reader sees strictly increasing indices with the
// content written at each, and at the end the held entries are exactly
// those neither settled nor below the head.
func TestConcurrentUse(t *testing.T) {
	l := openT(t, t.TempDir(), Options{SegmentSize: 8 << 10, ReadAhead: 1 << 10})
	const appenders, perAppender = 4, 500
	var wg sync.WaitGroup
	acked := make(chan uint64, appenders*perAppender)
	var owner sync.Mutex // index and content chosen together, as a queue's owner would
	for range appenders {
		wg.Go(func() {
			for range perAppender {
				owner.Lock()
				i := l.LastIndex() + 1
				_, err := l.Append([][]byte{payload(i)}, func(err error) {
					if err == nil {
						acked <- i
					}
				})
				owner.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	settled := map[uint64]bool{}
	var settler sync.WaitGroup
	settler.Go(func() {
		n := 0
		for i := range acked {
			if n++; i%3 == 0 {
				settled[i] = true
				if err := l.Settle(i, i+1, nil); err != nil {
					t.Error(err)
				}
			}
			if n == appenders*perAppender {
				return
			}
		}
	})
	readerErr := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			r := l.NewReader(1)
			defer r.Close()
			var prev uint64
			for seen := 0; seen < 300; {
				i, data, err := r.Next()
				if err == io.EOF {
					runtime.Gosched() // caught up: let the appenders run
					continue
				}
				if err != nil {
					readerErr <- err
					return
				}
				if i <= prev || string(data) != string(payload(i)) {
					readerErr <- fmt.Errorf("read %d %q after %d", i, data, prev)
					return
				}
				prev = i
				seen++
			}
		})
	}
	wg.Wait()
	settler.Wait()
	close(readerErr)
	for err := range readerErr {
		t.Fatal(err)
	}
	if err := l.TruncatePrefix(100, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	idx, corrupt := readAll(t, l)
	var want []uint64
	for i := uint64(100); i <= appenders*perAppender; i++ {
		if !settled[i] {
			want = append(want, i)
		}
	}
	if len(corrupt) > 0 || !slices.Equal(idx, want) {
		t.Fatalf("held %d entries, want %d (corrupt %v)", len(idx), len(want), corrupt)
	}
}

// A segment left without its footer (a crash while rolling) is scanned
// once, sealed at open, and read in full; a segment file that is missing
// altogether is reported at read as the exact range of indices it held,
// and the entries around it stay readable.
func TestMissingFooterAndMissingSegment(t *testing.T) {
	dir, opt, l := filledT(t, Options{SegmentSize: 2 << 10}, 600, 6)
	l.Close()
	files := segFiles(t, dir)
	fi, _ := os.Stat(files[2])
	if err := os.Truncate(files[2], fi.Size()-footerSize); err != nil {
		t.Fatal(err)
	}
	logs := &storetest.LineCounter{}
	opt.Logger = slog.New(logs)
	l = openT(t, dir, opt)
	if idx, corrupt := readAll(t, l); len(idx) != 600 || len(corrupt) > 0 {
		t.Fatalf("read %d, corrupt %v", len(idx), corrupt)
	}
	l.Close()
	if fi2, _ := os.Stat(files[2]); fi2.Size() != fi.Size() {
		t.Fatalf("footer not restored: %d bytes, want %d", fi2.Size(), fi.Size())
	}
	if logs.N.Load() == 0 {
		t.Fatal("the repair was not logged")
	}

	data, _ := os.ReadFile(files[4])
	entries, _ := DecodeSegment(data)
	first, last := entries[0].Index, entries[len(entries)-1].Index
	if err := os.Remove(files[4]); err != nil {
		t.Fatal(err)
	}
	l = openT(t, dir, opt)
	idx, corrupt := readAll(t, l)
	if len(corrupt) != 1 || corrupt[0].First != first || corrupt[0].Last != last || !errors.Is(corrupt[0], storeerr.ErrCorrupt) {
		t.Fatalf("missing segment %d..%d reported as %v", first, last, corrupt)
	}
	if len(idx) != 600-len(entries) {
		t.Fatalf("read %d entries around the missing segment, want %d", len(idx), 600-len(entries))
	}
}

// A NoSync log writes, reads, releases and deletes released segments
// without a single fsync, and calls callbacks once the writes are issued.
func TestNoSyncLogNeverSyncs(t *testing.T) {
	fs := newFaultFS()
	dir := t.TempDir()
	l := openT(t, dir, Options{NoSync: true, FS: fs, SegmentSize: 4096, Logger: discardLogger()})
	for i := range 200 {
		if _, err := l.Append([][]byte{payload(uint64(i + 1))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	idx, corrupt := readAll(t, l)
	if len(idx) != 200 || len(corrupt) != 0 {
		t.Fatalf("read %d entries, %d damaged", len(idx), len(corrupt))
	}
	before := len(segFiles(t, dir))
	done := make(chan error, 1)
	if err := l.TruncatePrefix(150, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if after := len(segFiles(t, dir)); after >= before {
		t.Fatalf("released segments kept: %d files before, %d after", before, after)
	}
	if n := fs.syncs.Load(); n != 0 {
		t.Fatalf("%d segment fsyncs", n)
	}
}
