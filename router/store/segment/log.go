package segment

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/epitaph-mq/epitaph/router/store/storeerr"
)

// Options configures a Log. The zero value is usable.
type Options struct {
	// SegmentSize is the size at which the active segment is sealed and a
	// new one started (default 64 MiB). A batch is never split between
	// segments, so a segment may exceed it by one batch.
	SegmentSize int64
	// ReadAhead is the size of each reader's buffer, filled by one read
	// (default 256 KiB).
	ReadAhead int
	// FS is the file system (default OSFS).
	FS FS
	// Logger receives recovery reports (torn tails cut, damage found).
	Logger *slog.Logger
	// NoSync makes no write durable: no fsync of segments, the state file
	// or the directory, and appends without a callback wake no syncer.
	// For data that does not outlive the process (a queue's transient
	// messages spilled to disk, discarded at start): a crash may leave any
	// prefix of what was written, which such a log's owner never reads
	// back. Callbacks still run, in order, once the writes are issued.
	NoSync bool
}

const (
	defaultSegmentSize = 64 << 20
	defaultReadAhead   = 256 << 10
	// sparseEvery: a segment remembers the file offset of every 64th
	// entry, so a reader positions itself with at most 63 frames read and
	// the in-memory cost is 1/8 byte per entry.
	sparseEvery = 64
)

// minCompact: the state file is not rewritten below this size (a variable
// so that tests can reach a rewrite quickly).
var minCompact int64 = 1 << 20

// seg is one segment file. Guarded by Log.mu.
type seg struct {
	base   uint64
	count  uint64 // entries base .. base+count-1 (damaged ones included)
	live   uint64 // entries neither below the head nor settled
	size   int64  // header and frames; the footer of a sealed segment excluded
	sealed bool
	name   string
	f      File    // the active segment's append handle; nil otherwise
	sparse []int64 // sparse[k]: offset of entry base+k*sparseEvery, built as frames are met
	// damaged: stretches found unreadable at open.
	damaged spans
}

func (s *seg) end() uint64 { return s.base + s.count }

// noteSparse records the offset of index idx when it starts the next
// sparse slot.
func (s *seg) noteSparse(idx uint64, off int64) {
	if d := idx - s.base; d%sparseEvery == 0 && uint64(len(s.sparse)) == d/sparseEvery {
		s.sparse = append(s.sparse, off)
	}
}

type waiter struct {
	seq  uint64
	done func(error)
}

type doomed struct {
	seq  uint64
	name string
}

// Log is an append-only log of entries with consecutive indices, kept in
// segment files in one directory. It is safe for concurrent use.
type Log struct {
	dir       string
	fs        FS
	segSize   int64
	readAhead int
	log       *slog.Logger
	noSync    bool

	mu     sync.Mutex
	segs   []*seg // by base; the last one is the active segment unless sealed
	head   uint64 // first index not released
	next   uint64 // index of the next append
	holes  spans  // released out of order, all in [head, next)
	gen    uint64 // bumped by TruncateSuffix: readers re-position
	failed error
	closed bool
	enc    []byte

	// Group commit, guarded by mu; the syncer goroutine does the fsyncs.
	submitted uint64
	synced    uint64
	waiters   []waiter
	segDirty  bool
	dirDirty  bool
	ops       []stateOp
	retired   []File
	doomed    []doomed
	wake      chan struct{}
	stop      chan struct{}
	stopped   chan struct{}

	// The state file, written only by the syncer (and Open).
	state     File
	stateSize int64

	getMu  sync.Mutex
	getter *Reader
}

func segName(base uint64) string { return fmt.Sprintf("%020d.seg", base) }

// Open opens (creating if needed) the log in dir. It reads the state file,
// each segment's header and footer, and scans only the last segment (to
// find its end after a crash), so its time grows with the number of
// segments and the spans held, not with the entries stored.
func Open(dir string, opt Options) (*Log, error) {
	l := &Log{
		dir: dir, fs: opt.FS, segSize: opt.SegmentSize, readAhead: opt.ReadAhead, log: opt.Logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	if l.fs == nil {
		l.fs = OSFS{}
	}
	if opt.NoSync {
		l.fs, l.noSync = noSyncFS{l.fs}, true
	}
	if l.segSize <= 0 {
		l.segSize = defaultSegmentSize
	}
	if l.readAhead <= 0 {
		l.readAhead = defaultReadAhead
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.log = l.log.With("log", dir)
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	go l.syncLoop()
	if len(l.ops) > 0 {
		if err := l.Sync(); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

func (l *Log) recover() error {
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	ents, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, ".tmp"):
			l.fs.Remove(l.path(n))
		case strings.HasSuffix(n, ".seg"):
			base, err := strconv.ParseUint(strings.TrimSuffix(n, ".seg"), 10, 64)
			if err != nil || base == 0 || n != segName(base) {
				l.log.Warn("ignoring a file that is not a segment", "file", n)
				continue
			}
			l.segs = append(l.segs, &seg{base: base, name: n})
		}
	}
	slices.SortFunc(l.segs, func(a, b *seg) int { return cmpU64(a.base, b.base) })

	st, err := l.readStateFile()
	if err != nil {
		return err
	}
	for i, s := range l.segs {
		last := i == len(l.segs)-1
		nextBase := uint64(0)
		if !last {
			nextBase = l.segs[i+1].base
		}
		if err := l.openSegment(s, last, nextBase); err != nil {
			return err
		}
	}
	l.head, l.holes = max(st.head, 1), st.holes
	if len(l.segs) > 0 {
		l.next = l.segs[len(l.segs)-1].end()
		if st.head == 0 {
			l.head = l.segs[0].base
		}
	}
	l.next = max(l.next, l.head)
	l.normalizeHead()
	if len(l.holes) > 0 && l.holes[len(l.holes)-1].to > l.next {
		// Releases of entries whose appends were lost with the crash:
		// they must not apply to the entries appended at those indices
		// next, so a suffix record goes down before any append.
		l.holes.dropFrom(l.next)
		l.ops = append(l.ops, stateOp{kind: opSuffix, from: l.next})
		l.submitted++
	}
	kept := l.segs[:0]
	for i, s := range l.segs {
		s.live = l.liveIn(s.base, s.end())
		if s.end() <= l.head || (s.live == 0 && i < len(l.segs)-1) {
			if err := l.fs.Remove(l.path(s.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				l.log.Warn("cannot remove a released segment", "file", s.name, "err", err)
			}
			continue
		}
		kept = append(kept, s)
	}
	l.segs = kept
	if n := len(l.segs); n > 0 && !l.segs[n-1].sealed {
		s := l.segs[n-1]
		f, err := l.fs.OpenFile(l.path(s.name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("segment: %w", err)
		}
		s.f = f
	}
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// liveIn counts the entries of [from, to) neither below the head nor settled.
func (l *Log) liveIn(from, to uint64) uint64 {
	from = max(from, l.head)
	if from >= to {
		return 0
	}
	return to - from - l.holes.covered(from, to)
}

// normalizeHead moves the head past a released span that starts at it.
func (l *Log) normalizeHead() {
	if len(l.holes) > 0 && l.holes[0].from <= l.head {
		l.head = max(l.head, l.holes[0].to)
		l.holes = slices.Delete(l.holes, 0, 1)
	}
}

func (l *Log) readStateFile() (releaseState, error) {
	f, err := l.fs.OpenFile(l.path(stateName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return releaseState{}, fmt.Errorf("segment: %w", err)
	}
	l.state = f
	fi, err := f.Stat()
	if err != nil {
		return releaseState{}, fmt.Errorf("segment: %w", err)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return releaseState{}, fmt.Errorf("segment: reading state: %w", err)
	}
	st, good, err := readState(data)
	if err != nil {
		return st, err
	}
	if good < len(data) {
		l.log.Warn("state file: torn tail cut", "offset", good, "bytes", len(data)-good)
		if err := f.Truncate(int64(good)); err != nil {
			return st, fmt.Errorf("segment: %w", err)
		}
		if err := f.Sync(); err != nil {
			return st, fmt.Errorf("segment: %w", err)
		}
	}
	f.Close()
	// Reopened for appending: every record goes at the end.
	if l.state, err = l.fs.OpenFile(l.path(stateName), os.O_WRONLY|os.O_APPEND, 0); err != nil {
		return st, fmt.Errorf("segment: %w", err)
	}
	l.stateSize = int64(good)
	return st, nil
}

// openSegment reads a segment's header and footer; the last segment, and
// one whose footer is missing or damaged, is scanned to find its end.
func (l *Log) openSegment(s *seg, last bool, nextBase uint64) error {
	f, err := l.fs.OpenFile(l.path(s.name), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	size := fi.Size()
	var hdr [headerSize]byte
	if n, _ := f.ReadAt(hdr[:], 0); n < headerSize {
		if last {
			// Created but never synced (a crash while rolling): empty.
			l.log.Warn("segment without a header cut", "file", s.name, "bytes", size)
			s.size, s.count = headerSize, 0
			if err := f.Truncate(0); err != nil {
				return fmt.Errorf("segment: %w", err)
			}
			if _, err := f.Write(encodeHeader(s.base)); err != nil {
				return fmt.Errorf("segment: %w", err)
			}
			return f.Sync()
		}
	} else if base, ok := decodeHeader(hdr[:]); !ok || base != s.base {
		l.log.Error("segment header damaged; reading its frames by their own indices", "file", s.name)
	}
	if !last && size >= headerSize+footerSize {
		var ft [footerSize]byte
		if _, err := f.ReadAt(ft[:], size-footerSize); err == nil {
			if lastIdx, count, ok := decodeFooter(ft[:]); ok && s.base+count == lastIdx+1 && lastIdx < nextBase {
				s.count, s.size, s.sealed = count, size-footerSize, true
				return nil
			}
		}
		l.log.Warn("segment footer missing or damaged; scanning it", "file", s.name)
	}
	torn, err := l.scanSegment(s, f, size)
	if err != nil {
		return err
	}
	if !last {
		s.sealed = true
		if !torn && len(s.damaged) == 0 && s.end() == nextBase && s.count > 0 {
			// A crash while rolling: the next segment was made but this
			// one's footer not written. Seal it now, so later opens read
			// only its footer.
			if _, err := f.WriteAt(encodeFooter(s.end()-1, s.count), s.size); err == nil && f.Sync() == nil {
				l.log.Info("sealed a segment a crash left open", "file", s.name)
			}
			return nil
		}
		if nextBase > s.end() {
			s.damaged.add(s.end(), nextBase)
		} else if nextBase < s.end() {
			s.count = nextBase - s.base
		}
		return nil
	}
	if torn {
		l.log.Warn("torn tail cut (an append that was not synced)", "file", s.name, "offset", s.size, "bytes", size-s.size)
		if err := f.Truncate(s.size); err != nil {
			return fmt.Errorf("segment: %w", err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("segment: %w", err)
		}
	}
	return nil
}

// scanSegment reads every frame of s to find its end. Damage followed by a
// valid frame of a later index is recorded in s.damaged; damage with nothing
// valid after it is a torn tail (torn true, s.size where it starts).
func (l *Log) scanSegment(s *seg, f File, size int64) (torn bool, err error) {
	sc := newScanner(f, l.readAhead)
	off, expect := int64(headerSize), s.base
	s.sparse = s.sparse[:0]
	for off < size {
		if size-off == footerSize {
			if w, err := sc.window(off, footerSize, size); err == nil {
				if _, _, ok := decodeFooter(w); ok {
					s.sealed = true
					break
				}
			}
		}
		fr, ok, err := sc.readFrame(off, size)
		if err != nil {
			return false, fmt.Errorf("segment: reading %s: %w", s.name, err)
		}
		limit := expect + uint64(size-off)/frameHeader
		if !ok || fr.index < expect || fr.index > limit {
			g, at, found, err := sc.resync(off, size, expect-1, limit)
			if err != nil {
				return false, fmt.Errorf("segment: reading %s: %w", s.name, err)
			}
			if !found {
				torn = true
				break
			}
			fr, off = g, at
		}
		if fr.index > expect {
			l.log.Error("damaged entries in segment", "file", s.name, "offset", off, "first", expect, "last", fr.index-1)
			s.damaged.add(expect, fr.index)
		}
		s.noteSparse(fr.index, off)
		off, expect = fr.next, fr.index+1
	}
	s.count, s.size = expect-s.base, off
	return torn, nil
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		if s.f != nil {
			s.f.Close()
			s.f = nil
		}
	}
	for _, f := range l.retired {
		f.Close()
	}
	l.retired = nil
	if l.state != nil {
		l.state.Close()
		l.state = nil
	}
}

// Close waits for the pending group commit, then closes the files. Later
// calls fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.stopped
	l.getMu.Lock()
	if l.getter != nil {
		l.getter.Close()
	}
	l.getMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeFiles()
	return l.failed
}

// usable reports why the log takes no writes. Called with mu held.
func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// FirstIndex is the first index not released by TruncatePrefix (or by
// settling everything below it). An empty log has FirstIndex ==
// LastIndex+1.
func (l *Log) FirstIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head
}

// LastIndex is the index of the last appended entry (FirstIndex-1 when the
// log is empty).
func (l *Log) LastIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// Stats describes the log's footprint.
type Stats struct {
	Segments  int
	Live      uint64 // entries held (not released)
	HoleSpans int    // spans settled out of order
	Bytes     int64  // size of the segment files held (headers and frames)
}

// HeadSegmentEnd returns the index just past the oldest segment still
// held: a TruncatePrefix below it deletes no file (a caller that releases
// only to free disk can wait until its head reaches it). It is 0 when the
// log holds no segment.
func (l *Log) HeadSegmentEnd() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) == 0 {
		return 0
	}
	return l.segs[0].end()
}

func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := Stats{Segments: len(l.segs), HoleSpans: len(l.holes)}
	for _, s := range l.segs {
		st.Live += s.live
		st.Bytes += s.size
	}
	return st
}

// diskErr wraps an error of the file system, marking a full disk.
func diskErr(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("segment: %s: %w: %w", op, storeerr.ErrDiskFull, err)
	}
	return fmt.Errorf("segment: %s: %w", op, err)
}

// submit registers done for the next group commit. Called with mu held.
func (l *Log) submit(done func(error)) {
	l.submitted++
	if done != nil {
		l.waiters = append(l.waiters, waiter{l.submitted, done})
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Append writes entries at LastIndex()+1 onwards, in one write to the
// active segment, and returns the first index. done (which may be nil) is
// called once the entries are durable, from the log's syncer goroutine,
// shared with every other operation submitted before that fsync (group
// commit). The entries are visible to readers at once, before the fsync.
//
// If Append returns an error, nothing was appended and done is not called.
// A full disk is reported as an error wrapping storeerr.ErrDiskFull; the log
// stays usable and later appends succeed once space returns.
func (l *Log) Append(entries [][]byte, done func(error)) (first uint64, err error) {
	if len(entries) == 0 {
		return 0, errors.New("segment: empty append")
	}
	size := int64(0)
	for _, e := range entries {
		if len(e) > MaxEntrySize {
			return 0, fmt.Errorf("segment: entry of %d bytes exceeds %d", len(e), MaxEntrySize)
		}
		size += frameHeader + int64(len(e))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	s, err := l.activeFor(size)
	if err != nil {
		return 0, err
	}
	first = l.next
	sparseBefore := len(s.sparse)
	l.enc = l.enc[:0]
	for i, e := range entries {
		idx := first + uint64(i)
		s.noteSparse(idx, s.size+int64(len(l.enc)))
		l.enc = appendFrame(l.enc, idx, e)
	}
	if n, err := s.f.Write(l.enc); err != nil {
		s.sparse = s.sparse[:sparseBefore]
		if n > 0 {
			if terr := s.f.Truncate(s.size); terr != nil {
				l.failed = fmt.Errorf("%w: cannot cut a partial append: %w", ErrFailed, terr)
			}
		}
		return 0, diskErr("append", err)
	}
	s.size += int64(len(l.enc))
	if cap(l.enc) > 4<<20 {
		l.enc = nil // a large batch's buffer is not kept
	}
	s.count += uint64(len(entries))
	s.live += uint64(len(entries))
	l.next += uint64(len(entries))
	l.segDirty = true
	if done != nil || !l.noSync {
		l.submit(done)
	}
	return first, nil
}

// activeFor returns the segment to append size bytes to, rolling to a new
// one when the active one is sealed, missing or would grow past
// SegmentSize. Called with mu held.
func (l *Log) activeFor(size int64) (*seg, error) {
	var cur *seg
	if n := len(l.segs); n > 0 && !l.segs[n-1].sealed {
		cur = l.segs[n-1]
		if cur.size == headerSize || cur.size+size <= l.segSize {
			return cur, nil
		}
	}
	// Create and sync the new segment before sealing the old one, so a
	// crash in between leaves a readable log: a segment without a footer
	// is scanned at open.
	s := &seg{base: l.next, name: segName(l.next), size: headerSize}
	// A released segment of the same name waiting for its deletion (not
	// possible today: a suffix cut waits for the sync that deletes it)
	// must not take the new one with it.
	l.doomed = slices.DeleteFunc(l.doomed, func(d doomed) bool { return d.name == s.name })
	f, err := l.fs.OpenFile(l.path(s.name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, diskErr("create segment", err)
	}
	fail := func(op string, err error) (*seg, error) {
		f.Close()
		l.fs.Remove(l.path(s.name))
		return nil, diskErr(op, err)
	}
	if _, err := f.Write(encodeHeader(s.base)); err != nil {
		return fail("segment header", err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync segment", err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fail("sync directory", err)
	}
	if cur != nil {
		if _, err := cur.f.Write(encodeFooter(cur.end()-1, cur.count)); err != nil {
			if terr := cur.f.Truncate(cur.size); terr != nil {
				l.failed = fmt.Errorf("%w: cannot cut a partial footer: %w", ErrFailed, terr)
			}
			return fail("segment footer", err)
		}
		if err := cur.f.Sync(); err != nil {
			l.failed = fmt.Errorf("%w: %w", ErrFailed, diskErr("sync sealed segment", err))
			return fail("sync sealed segment", err)
		}
		cur.sealed = true
		l.retired = append(l.retired, cur.f)
		cur.f = nil
	}
	s.f = f
	l.segs = append(l.segs, s)
	return s, nil
}

// segFor returns the segment holding index i, or nil when no segment does
// (released, or missing). Called with mu held.
func (l *Log) segFor(i uint64) *seg {
	k := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].end() > i })
	if k < len(l.segs) && l.segs[k].base <= i {
		return l.segs[k]
	}
	return nil
}

// nextSegBase is the base of the first segment above i, or l.next.
func (l *Log) nextSegBase(i uint64) uint64 {
	k := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].base > i })
	if k < len(l.segs) {
		return l.segs[k].base
	}
	return l.next
}

// Settle releases the entries [from, to) that are still held, out of order
// (a consumer's non-contiguous acknowledgements, an expiry, a dead-letter
// move in the middle). A segment whose entries are all released is deleted
// once the release is durable. done is called when it is.
func (l *Log) Settle(from, to uint64, done func(error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	from, to = max(from, l.head), min(to, l.next)
	if from < to {
		for k := sort.Search(len(l.segs), func(k int) bool { return l.segs[k].end() > from }); k < len(l.segs) && l.segs[k].base < to; k++ {
			s := l.segs[k]
			s.live -= l.liveIn(max(from, s.base), min(to, s.end()))
		}
		l.holes.add(from, to)
		l.normalizeHead()
		l.ops = append(l.ops, stateOp{kind: opSettle, from: from, to: to})
		l.dropReleased()
	}
	l.submit(done)
	return nil
}

// TruncatePrefix releases every entry below index: FirstIndex becomes
// index. Segments below it are deleted once that is durable (done). An
// index beyond LastIndex+1 empties the log and makes it the next index
// appended (a Raft follower installing a snapshot).
func (l *Log) TruncatePrefix(index uint64, done func(error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	if index > l.head {
		for _, s := range l.segs {
			if s.base >= index {
				break
			}
			s.live -= l.liveIn(s.base, min(index, s.end()))
		}
		l.head = index
		l.holes.dropBelow(index)
		l.normalizeHead()
		if l.head > l.next {
			l.next = l.head
		}
		l.ops = append(l.ops, stateOp{kind: opHead, from: l.head})
		l.dropReleased()
	}
	l.submit(done)
	return nil
}

// dropReleased takes every segment with no live entry out of the log and
// dooms its file for deletion after the next group commit; the active
// segment goes too when the head has passed its end (the next append
// starts a new one). Called with mu held.
func (l *Log) dropReleased() {
	kept := l.segs[:0]
	for i, s := range l.segs {
		last := i == len(l.segs)-1
		if s.live > 0 || (last && s.f != nil && s.end() == l.next) {
			kept = append(kept, s)
			continue
		}
		if s.f != nil {
			l.retired = append(l.retired, s.f)
			s.f = nil
		}
		l.doomed = append(l.doomed, doomed{l.submitted + 1, s.name})
	}
	clear(l.segs[len(kept):])
	l.segs = kept
}

// TruncateSuffix removes every entry at or above index (a Raft follower's
// conflicting tail); the next append gets index. It returns once that is
// durable. Readers positioned past index re-position themselves.
func (l *Log) TruncateSuffix(index uint64) error {
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	index = max(index, l.head)
	if index >= l.next {
		l.mu.Unlock()
		return nil
	}
	ch := make(chan error, 1)
	err := l.truncateSuffix(index)
	if err == nil {
		l.submit(func(err error) { ch <- err })
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return <-ch
}

func (l *Log) truncateSuffix(index uint64) error {
	l.gen++
	for len(l.segs) > 0 {
		s := l.segs[len(l.segs)-1]
		if s.base < index {
			break
		}
		if s.f != nil {
			l.retired = append(l.retired, s.f)
			s.f = nil
		}
		if err := l.fs.Remove(l.path(s.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.failed = fmt.Errorf("%w: removing %s: %w", ErrFailed, s.name, err)
			return l.failed
		}
		l.segs = l.segs[:len(l.segs)-1]
		l.dirDirty = true
	}
	l.holes.dropFrom(index)
	l.next = index
	l.ops = append(l.ops, stateOp{kind: opSuffix, from: index})
	if len(l.segs) == 0 {
		return nil
	}
	s := l.segs[len(l.segs)-1]
	if s.end() <= index {
		return nil
	}
	off, err := l.offsetOf(s, index)
	if err != nil {
		l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		return l.failed
	}
	if s.f == nil {
		f, err := l.fs.OpenFile(l.path(s.name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
			return l.failed
		}
		s.f = f
	}
	if err := s.f.Truncate(off); err != nil {
		l.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		return l.failed
	}
	s.size, s.count, s.sealed = off, index-s.base, false
	s.live = l.liveIn(s.base, s.end())
	s.damaged.dropFrom(index)
	if k := int((s.count + sparseEvery - 1) / sparseEvery); len(s.sparse) > k {
		s.sparse = s.sparse[:k]
	}
	l.segDirty = true
	return nil
}

// offsetOf finds the file offset of entry idx of s. Called with mu held.
func (l *Log) offsetOf(s *seg, idx uint64) (int64, error) {
	f, err := l.fs.OpenFile(l.path(s.name), os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("segment: %w", err)
	}
	defer f.Close()
	sc := newScanner(f, l.readAhead)
	pos, off := s.base, int64(headerSize)
	if k := (idx - s.base) / sparseEvery; k < uint64(len(s.sparse)) {
		pos, off = s.base+k*sparseEvery, s.sparse[k]
	} else if n := len(s.sparse); n > 0 {
		pos, off = s.base+uint64(n-1)*sparseEvery, s.sparse[n-1]
	}
	for pos < idx {
		fr, ok, err := sc.readFrame(off, s.size)
		if err != nil {
			return 0, fmt.Errorf("segment: reading %s: %w", s.name, err)
		}
		if !ok || fr.index != pos {
			return 0, &CorruptError{Segment: s.name, Offset: off, First: pos, Last: pos, Reason: "bad frame before a suffix truncation point"}
		}
		s.noteSparse(pos, off)
		pos, off = pos+1, fr.next
	}
	return off, nil
}

// Sync waits until everything submitted before it is durable.
func (l *Log) Sync() error {
	ch := make(chan error, 1)
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	l.submit(func(err error) { ch <- err })
	l.mu.Unlock()
	return <-ch
}

func (l *Log) syncLoop() {
	defer close(l.stopped)
	for {
		select {
		case <-l.wake:
			l.syncRound()
		case <-l.stop:
			l.syncRound()
			return
		}
	}
}

// syncRound makes everything submitted so far durable: the active segment
// first, then the directory, then the state file, so that a release never
// reaches the disk before the entries it releases. Then it calls the
// waiters and removes the segments their releases emptied.
func (l *Log) syncRound() {
	l.mu.Lock()
	target := l.submitted
	retired := l.retired
	l.retired = nil
	if target == l.synced {
		l.mu.Unlock()
		closeAll(retired)
		return
	}
	var f File
	if l.segDirty && len(l.segs) > 0 {
		f = l.segs[len(l.segs)-1].f
	}
	l.segDirty = false
	syncDir := l.dirDirty
	l.dirDirty = false
	ops := l.ops
	l.ops = nil
	var ckpt []byte
	if len(ops) > 0 && l.stateSize > max(minCompact, 4*(21+16*int64(len(l.holes)))) {
		ckpt = encodeCheckpoint(l.head, l.holes)
	}
	failed := l.failed
	l.mu.Unlock()
	closeAll(retired)

	err := failed
	var stateErr error
	if err == nil && f != nil {
		if serr := f.Sync(); serr != nil {
			err = fmt.Errorf("%w: %w", ErrFailed, diskErr("sync", serr))
		}
	}
	if err == nil && syncDir {
		if serr := l.fs.SyncDir(l.dir); serr != nil {
			err = fmt.Errorf("%w: %w", ErrFailed, diskErr("sync directory", serr))
		}
	}
	if err == nil && len(ops) > 0 {
		stateErr = l.writeState(ops, ckpt)
	}

	l.mu.Lock()
	if err != nil && l.failed == nil {
		l.failed = err
		l.log.Error("fsync failed; the log takes no more writes until reopened", "err", err)
	}
	if stateErr != nil {
		// The releases stay in effect in memory and are written with
		// the next group commit.
		l.ops = append(ops, l.ops...)
		err = stateErr
	}
	l.synced = target
	n := 0
	for n < len(l.waiters) && l.waiters[n].seq <= target {
		n++
	}
	ws := slices.Clone(l.waiters[:n])
	l.waiters = slices.Delete(l.waiters, 0, n)
	var rm []string
	if err == nil {
		k := 0
		for k < len(l.doomed) && l.doomed[k].seq <= target {
			rm = append(rm, l.doomed[k].name)
			k++
		}
		l.doomed = slices.Delete(l.doomed, 0, k)
	}
	l.mu.Unlock()
	for _, name := range rm {
		if rerr := l.fs.Remove(l.path(name)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			l.log.Warn("cannot remove a released segment", "file", name, "err", rerr)
		}
	}
	for _, w := range ws {
		w.done(err)
	}
}

func closeAll(fs []File) {
	for _, f := range fs {
		f.Close()
	}
}

// writeState appends ops to the state file and syncs it, or, with a
// checkpoint, replaces the file by it. A failed append is cut off again,
// so a retry does not follow a partial record.
func (l *Log) writeState(ops []stateOp, ckpt []byte) error {
	if ckpt != nil {
		tmp := l.path(stateName + ".tmp")
		f, err := l.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return diskErr("state checkpoint", err)
		}
		if _, err = f.Write(ckpt); err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = l.fs.Rename(tmp, l.path(stateName))
		}
		if err == nil {
			err = l.fs.SyncDir(l.dir)
		}
		if err != nil {
			f.Close()
			l.fs.Remove(tmp)
			return diskErr("state checkpoint", err)
		}
		l.state.Close()
		l.state, l.stateSize = f, int64(len(ckpt))
		return nil
	}
	b := encodeOps(nil, ops)
	if n, err := l.state.Write(b); err != nil {
		if n > 0 {
			if terr := l.state.Truncate(l.stateSize); terr != nil {
				return fmt.Errorf("%w: %w", ErrFailed, terr)
			}
		}
		return diskErr("state", err)
	}
	l.stateSize += int64(len(b))
	if err := l.state.Sync(); err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, diskErr("state sync", err))
	}
	return nil
}
