package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/epitaph-mq/epitaph/router/ratelog"
	"github.com/epitaph-mq/epitaph/router/store/segment"
)

// PebbleOptions configures OpenPebble. The zero value is a sensible default.
type PebbleOptions struct {
	// FS is the filesystem (nil: the real disk). Tests pass vfs.NewCrashableMem()
	// or an errorfs wrapper to simulate power loss and I/O errors.
	FS vfs.FS
	// MemTableSize in bytes (default 32 MiB).
	MemTableSize uint64
	// CacheSize is the block cache size in bytes (default 32 MiB).
	CacheSize int64
	// MaxGroupBytes caps the payload of one group commit (default 8 MiB); a
	// single larger batch is still committed alone.
	MaxGroupBytes int
	// RangeDeleteMin is the smallest head advance (in seqs) that is removed with
	// one range delete rather than point deletes (default 2).
	RangeDeleteMin uint64
	// CompactEvery: after this many messages of a queue have been settled
	// through range deletes, the settled prefix of that queue is compacted
	// in the background so tombstones do not pile up (default 1<<20; 0 = default;
	// negative disables).
	CompactEvery int64
	// Logger receives Pebble's informational (Debug) and error (Error)
	// messages; nil discards them.
	Logger *slog.Logger
	// DiskFullAnswerAfter: while Pebble's background work fails for lack of
	// space, a commit that has waited this long (behind memtables that
	// cannot be flushed) is answered with ErrDiskFull, and so is every
	// commit that arrives while it waits (default 500ms).
	DiskFullAnswerAfter time.Duration
	// LogInterval: each cause of a repeated error (a failing flush, a full
	// disk) is logged at most once per interval, with the number of lines
	// suppressed (default 10s).
	LogInterval time.Duration
	// Recovery says what opening does when it finds corrupt files: refuse
	// (RecoveryStrict, the default) or keep what is readable
	// (RecoverySalvage).
	Recovery RecoveryMode
	// BodyDir, when set, is where each queue's message bodies are kept, in
	// the queue's own segment log (see bodies.go); Pebble then holds a
	// reference per message. Empty keeps bodies in Pebble. FS does not
	// apply to it; BodyFS does.
	BodyDir string
	// BodyFS is the file system of the queue logs (nil: the real disk).
	// Tests wrap it to inject a full disk or a failing fsync.
	BodyFS segment.FS
}

func (o *PebbleOptions) defaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = 32 << 20
	}
	if o.CacheSize == 0 {
		o.CacheSize = 32 << 20
	}
	if o.MaxGroupBytes == 0 {
		o.MaxGroupBytes = 8 << 20
	}
	if o.RangeDeleteMin == 0 {
		o.RangeDeleteMin = 2
	}
	if o.CompactEvery == 0 {
		o.CompactEvery = 1 << 20
	}
	if o.DiskFullAnswerAfter == 0 {
		o.DiskFullAnswerAfter = 500 * time.Millisecond
	}
	if o.Recovery == "" {
		o.Recovery = RecoveryStrict
	}
}

// ErrUnavailable is returned by reads while the store is recovering from a
// failed commit and could not reopen its database yet.
var ErrUnavailable = errors.New("store: unavailable after a write failure")

// Pebble is the durable Store.
//
// Group commit: one committer goroutine takes every pending batch (up to
// MaxGroupBytes), writes them as one Pebble batch with pebble.Sync (one WAL
// fsync), then calls their done callbacks in submission order. While it waits
// for the fsync, new batches queue up and form the next group, so concurrent
// publishers share fsyncs; no timer is involved.
//
// Failure protocol (fsync error, write error, ENOSPC): Pebble treats a WAL
// error as fatal (it calls Logger.Fatalf, which by default exits the
// process). The store installs a logger whose Fatalf panics with a private
// value that the committer recovers. Then:
//  1. every batch of the failed group gets done(err), err wrapping ErrNotDurable;
//  2. the database is closed and reopened from what is on disk (never trusting
//     the page cache state of the failed handle), and every key is read once
//     so block checksums are verified;
//  3. the failed group is made definite in one synced batch: batches that
//     append or put metadata are undone (their keys deleted, pre-images of
//     the keys they deleted restored), so a rejected publish or a failed
//     dead-letter move never resurfaces; batches of only deletions/updates
//     (settles, requeue state, queue deletes) are completed.
//
// If reopening fails (disk still full, device gone), the store stays broken:
// a new group first retries the reopen (after a small write probe, at most
// once per back-off interval of 10ms doubling to 1s) and fails with the
// reason if it still cannot, so publishing resumes without a restart within
// a second of the disk recovering. A fatal error on one of Pebble's background goroutines (e.g. a
// MANIFEST sync failing during a flush) panics that goroutine and ends the
// process; a restart recovers from disk.
//
// A full disk usually shows first in flushes (the WAL is preallocated):
// every flush fails, and once the memtables are full a commit waits in
// Pebble for space no flush can free. Failed background jobs back off
// (backgroundError), and a commit that has waited DiskFullAnswerAfter while
// flushes fail with ENOSPC is answered with ErrDiskFull, as is every batch
// queued behind it (answerStalled); if the waiting group later goes through,
// its appends are undone as in step 3. Every error wraps ErrDiskFull when
// the cause is ENOSPC, so the broker answers resource-limit-exceeded.
type Pebble struct {
	dir   string
	opts  PebbleOptions
	popts *pebble.Options
	cache interface{ Unref() }

	dbMu sync.RWMutex
	db   *pebble.DB // nil while broken

	mu      sync.Mutex
	cond    sync.Cond
	pending []pendingBatch
	spare   []pendingBatch
	closed  bool
	exited  chan struct{}

	// committer-only state
	nextReopen  time.Time                 // a broken store is not reopened before
	reopenDelay time.Duration             // the current back-off of retryReopen
	reopenErr   error                     // why the last reopen failed
	settled     map[QueueID]settledRanges // range-deleted since the last compaction
	repairs     []repair

	bodies *bodyLogs // nil: bodies are kept in Pebble

	compactCtx    context.Context
	compactCancel context.CancelFunc
	compactStop   context.CancelFunc // the running compaction's
	compactWG     sync.WaitGroup
	compacting    atomic.Int32

	syncs, batches, failures, reopens, compactions atomic.Uint64
	corruptions, salvaged                          atomic.Uint64

	corruptMu   sync.Mutex
	lastCorrupt *pebble.DataCorruptionInfo // the latest block that failed its checksum

	// A full disk. Pebble reschedules a failed flush at once, and a commit
	// waits without end for memtable space that only a flush frees.
	quit       chan struct{} // closed by Close: ends a back-off early
	diskFullAt atomic.Int64  // UnixNano of the last ENOSPC from background work; 0: none since the last successful flush
	bgFailures atomic.Int64  // consecutive failed background jobs, for the back-off
	diskFull   atomic.Uint64 // commits answered ErrDiskFull
	limiter    *ratelog.Limiter
	answerMu   sync.Mutex  // held while answering stalled commits (keeps callbacks in order)
	stallTimer *time.Timer // set before the committer starts; armed by it around db.Apply
	// under mu: the group inside db.Apply, and whether it was answered
	inApply  []pendingBatch
	answered bool
}

type pendingBatch struct {
	b    *Batch
	done func(error)
	// answered: done was already called with ErrDiskFull while the store
	// was stalled; only batches of deletions and updates stay queued then
	// (to be completed, as after any failure).
	answered bool
}

type kv struct {
	key, value []byte // value nil: delete
}

// repair makes a failed batch definite after the reopen.
type repair struct {
	redo *Batch // roll forward
	undo []kv   // roll back (applied in reverse)
}

// settledRanges counts a queue's messages settled by range deletes since
// its last compaction, and where the highest range ended.
type settledRanges struct {
	n  int64
	hi uint64
}

var _ Store = (*Pebble)(nil)

type fatalError struct{ msg string }

func (e fatalError) Error() string { return "pebble fatal: " + e.msg }

// storeLogger adapts slog to pebble.Logger; Fatalf panics so the committer
// can turn Pebble's fatal WAL errors into failed batches (see commitGroup).
type storeLogger struct {
	log   *slog.Logger
	limit *ratelog.Limiter
}

func (l storeLogger) Infof(format string, args ...any) {
	if l.log != nil && l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug("pebble", "detail", fmt.Sprintf(format, args...))
	}
}
func (l storeLogger) Errorf(format string, args ...any) {
	if l.limit != nil {
		// One line per kind of message per interval: Pebble repeats them
		// as fast as it retries.
		l.limit.Error(format, "pebble error", "detail", fmt.Sprintf(format, args...))
	}
}
func (l storeLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.Errorf("fatal: %s", msg)
	panic(fatalError{msg})
}

// OpenPebble opens (creating if needed) the store in dir and starts its
// committer goroutine.
func OpenPebble(dir string, opts PebbleOptions) (*Pebble, error) {
	opts.defaults()
	cache := pebble.NewCache(opts.CacheSize)
	limit := ratelog.New(opts.Logger, opts.LogInterval)
	popts := &pebble.Options{
		FS:           opts.FS,
		Cache:        cache,
		MemTableSize: opts.MemTableSize,
		Logger:       storeLogger{opts.Logger, limit},
		// Tombstone-heavy FIFO keyspace: let L0 compact early.
		L0CompactionThreshold: 2,
		// WAL chunks that carry the offset synced so far, so that a damaged
		// chunk followed by proof of a later sync is told apart from a torn
		// tail (see integrity.go).
		FormatMajorVersion: pebble.FormatWALSyncChunks,
	}
	p := &Pebble{
		dir: dir, opts: opts, popts: popts, cache: cache,
		exited:  make(chan struct{}),
		quit:    make(chan struct{}),
		limiter: limit,
		settled: map[QueueID]settledRanges{},
	}
	popts.EventListener = &pebble.EventListener{
		// Pebble's default ends the process (Logger.Fatalf) when a block fails
		// its checksum; the read that found it returns the error too, so the
		// store reports it there (ErrCorrupt) and counts it.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			p.corruptions.Add(1)
			p.corruptMu.Lock()
			p.lastCorrupt = &info
			p.corruptMu.Unlock()
			p.popts.Logger.Errorf("corrupt block: %s", info)
		},
		BackgroundError: p.backgroundError,
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				p.bgFailures.Store(0)
				p.diskFullAt.Store(0)
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				p.bgFailures.Store(0)
			}
		},
	}
	p.cond.L = &p.mu
	p.compactCtx, p.compactCancel = context.WithCancel(context.Background())
	if err := p.openFirst(); err != nil {
		cache.Unref()
		return nil, err
	}
	if opts.BodyDir != "" {
		if err := p.openBodies(); err != nil {
			p.breakDB()
			cache.Unref()
			return nil, err
		}
	}
	p.stallTimer = time.AfterFunc(time.Hour, p.answerStalled)
	p.stallTimer.Stop() // armed around each db.Apply
	go p.run()
	return p, nil
}

// PebbleStats are counters for tests, benchmarks and metrics.
type PebbleStats struct {
	Syncs       uint64 // successful synced group commits (one WAL fsync each)
	Batches     uint64 // batches committed
	Failures    uint64 // failed group commits
	Reopens     uint64 // reopens after a failure
	Compactions uint64 // background compactions of settled prefixes
	Corruptions uint64 // blocks found failing their checksum (reads, compactions)
	Salvaged    uint64 // records or table entries dropped by RecoverySalvage at open
	DiskFull    uint64 // commits answered ErrDiskFull
}

// Stats returns the counters.
func (p *Pebble) Stats() PebbleStats {
	return PebbleStats{p.syncs.Load(), p.batches.Load(), p.failures.Load(), p.reopens.Load(), p.compactions.Load(),
		p.corruptions.Load(), p.salvaged.Load(), p.diskFull.Load()}
}

// DB exposes the underlying database for metrics (Metrics()) and tests.
// Callers must not write to it. Nil while broken.
func (p *Pebble) DB() *pebble.DB {
	p.dbMu.RLock()
	defer p.dbMu.RUnlock()
	return p.db
}

// Commit queues b for the next group commit.
func (p *Pebble) Commit(b *Batch, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(ErrClosed)
		return
	}
	p.pending = append(p.pending, pendingBatch{b: b, done: done})
	if len(p.pending) == 1 {
		p.cond.Signal()
	}
	p.mu.Unlock()
}

func (p *Pebble) Append(recs []Record, done func(error)) { p.Commit(new(Batch).Append(recs...), done) }
func (p *Pebble) Settle(q QueueID, seqs []uint64, done func(error)) {
	p.Commit(new(Batch).Settle(q, seqs...), done)
}
func (p *Pebble) Move(from QueueID, seqs []uint64, to []Record, done func(error)) {
	p.Commit(new(Batch).Settle(from, seqs...).Append(to...), done)
}
func (p *Pebble) Update(q QueueID, seq uint64, state []byte, done func(error)) {
	p.Commit(new(Batch).Update(q, seq, state), done)
}
func (p *Pebble) DeleteQueue(q QueueID, done func(error)) { p.Commit(new(Batch).DeleteQueue(q), done) }
func (p *Pebble) PutMeta(key string, value []byte, done func(error)) {
	p.Commit(new(Batch).PutMeta(key, value), done)
}
func (p *Pebble) DeleteMeta(key string, done func(error)) { p.Commit(new(Batch).DeleteMeta(key), done) }

// Close commits what is pending, stops the committer and closes the database.
func (p *Pebble) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.exited
		return nil
	}
	p.closed = true
	p.cond.Broadcast()
	close(p.quit)
	p.mu.Unlock()
	<-p.exited
	p.compactCancel()
	p.compactWG.Wait()
	p.dbMu.Lock()
	db := p.db
	p.db = nil
	p.dbMu.Unlock()
	var err error
	if db != nil {
		err = closeDB(db)
	}
	if p.bodies != nil {
		err = errors.Join(err, p.bodies.close())
	}
	p.cache.Unref()
	return err
}

// openBodies opens the queue logs' directory and removes the logs of
// queues that hold nothing (a delete that a crash interrupted).
func (p *Pebble) openBodies() error {
	bl, err := openBodyLogs(p.opts.BodyDir, p.opts.BodyFS, p.opts.Logger)
	if err != nil {
		return err
	}
	holds := map[QueueID]bool{}
	if err := p.Queues(func(q QueueID) error { holds[q] = true; return nil }); err != nil {
		return err
	}
	if err := bl.removeOrphans(holds); err != nil {
		return err
	}
	p.bodies = bl
	for q := range holds {
		if err := p.dropDanglingRefs(q); err != nil {
			// A queue log that cannot be opened (a damaged state file)
			// refuses the start as a damaged table does, unless salvaging:
			// then that queue's messages are reported when read.
			if p.opts.Recovery != RecoverySalvage {
				_ = bl.close()
				p.bodies = nil
				return fmt.Errorf("store: queue %x: %w; restore the data directory from a backup, or start with "+
					"recovery mode salvage (--store-recovery salvage), which serves the other queues and reports "+
					"this queue's stored messages as unreadable", uint64(q), err)
			}
			bl.logger.Error("store: salvage: a queue log cannot be opened; its messages will be reported unreadable",
				"queue", uint64(q), "err", err)
		}
	}
	return nil
}

// dropDanglingRefs removes the references at the end of q that name
// entries past the end of its log. A group commit syncs the bodies and
// the references in parallel, so a crash can leave the last group's
// references durable and their entries not (or torn, cut at open); that
// group was never answered, so its publishes were never confirmed. The
// count is logged as an error all the same: a log cut short by damage
// looks the same.
func (p *Pebble) dropDanglingRefs(q QueueID) error {
	l, err := p.bodies.get(q, false)
	if err != nil {
		return err
	}
	end := uint64(0)
	if l != nil {
		end = l.log.LastIndex()
	}
	lo, hi := queueBounds(q)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	pb := p.db.NewBatch()
	defer pb.Close()
	n := 0
	for valid := it.Last(); valid; valid = it.Prev() {
		_, seq, kind, ok := parseQueueKey(it.Key())
		if !ok || kind == kindState {
			continue
		}
		if kind != kindRef {
			break
		}
		idx, _, ok := decodeRef(it.Value())
		if ok && idx <= end {
			break
		}
		deleteMessage(pb, q, seq)
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return readErr(err)
	}
	if n == 0 {
		return nil
	}
	p.bodies.logger.Error("store: messages at the end of a queue log are missing; their references are removed "+
		"(after a crash: the last group commit, whose publishes were never confirmed)",
		"queue", uint64(q), "messages", n, "log_end", end)
	return p.db.Apply(pb, pebble.Sync)
}

func (p *Pebble) run() {
	defer close(p.exited)
	for {
		p.mu.Lock()
		for len(p.pending) == 0 && !p.closed {
			p.cond.Wait()
		}
		if len(p.pending) == 0 {
			p.mu.Unlock()
			return
		}
		group := p.pending
		n, size := 0, 0
		for n < len(group) && (n == 0 || size+group[n].b.bytes <= p.opts.MaxGroupBytes) {
			size += group[n].b.bytes
			n++
		}
		if n == len(group) {
			p.pending = p.spare[:0]
		} else {
			p.pending = append(p.spare[:0], group[n:]...)
			group = group[:n]
		}
		p.spare = nil
		p.mu.Unlock()

		p.commitGroup(group)

		clear(group)
		p.mu.Lock()
		p.spare = group[:0]
		p.mu.Unlock()
	}
}

func (p *Pebble) commitGroup(group []pendingBatch) {
	if p.db == nil {
		if err := p.retryReopen(); err != nil {
			err = p.commitErr(err)
			for _, g := range group {
				if !g.answered {
					g.done(err)
				}
			}
			return
		}
	}
	var refs []uint64
	var err error
	waitBodies := func() error { return nil }
	if p.bodies != nil {
		// The bodies are written first and synced while Pebble commits
		// the references: a crash in between can leave references of
		// this (unanswered) group to entries that did not reach the
		// disk, which the next open removes (dropDanglingRefs).
		refs, waitBodies, err = p.bodies.appendGroup(group)
	}
	pb := p.db.NewBatch()
	undos := make([][]kv, len(group))
	for i, g := range group {
		if !g.b.rollForward() {
			undos[i] = p.undoOf(g.b)
		}
		p.addOps(pb, g.b, &refs)
	}

	answered := false
	if err == nil {
		p.mu.Lock()
		p.inApply, p.answered = group, false
		p.mu.Unlock()
		p.stallTimer.Reset(p.opts.DiskFullAnswerAfter)
		err = p.apply(pb)
		p.mu.Lock()
		answered = p.answered
		p.inApply, p.answered = nil, false
		p.mu.Unlock()
		p.stallTimer.Stop()
		p.awaitAnswering()
	}
	if berr := waitBodies(); err == nil && berr != nil {
		// The references may be durable while their entries are not:
		// the failure path below undoes them.
		err = berr
	}
	_ = pb.Close()

	if err == nil {
		p.syncs.Add(1)
		p.batches.Add(uint64(len(group)))
		if answered {
			// The group was answered ErrDiskFull while it waited, and then
			// went through: undo its appends, as for a failed group.
			for i, g := range group {
				if undos[i] != nil || !g.b.rollForward() {
					p.repairs = append(p.repairs, repair{undo: undos[i]})
				}
			}
			if err := p.applyRepairs(); err != nil {
				p.popts.Logger.Errorf("undo of commits answered as failed: %v", err)
				p.breakDB()
				p.nextReopen, p.reopenDelay = time.Time{}, 0
				if err := p.retryReopen(); err != nil {
					p.popts.Logger.Errorf("reopen after failure: %v", err)
				}
			}
			return
		}
		for _, g := range group {
			if !g.answered {
				g.done(nil)
			}
		}
		p.releaseBodies(group)
		p.maybeCompact()
		return
	}
	p.failures.Add(1)
	err = p.commitErr(err)
	for i, g := range group {
		if undos[i] != nil || !g.b.rollForward() {
			p.repairs = append(p.repairs, repair{undo: undos[i]})
		} else {
			p.repairs = append(p.repairs, repair{redo: g.b})
		}
	}
	if !answered {
		for _, g := range group {
			if !g.answered {
				g.done(err)
			}
		}
	}
	p.breakDB()
	p.nextReopen, p.reopenDelay = time.Time{}, 0
	if err := p.retryReopen(); err != nil { // the next groups retry
		p.limiter.Error("reopen", "store: reopen after a failed commit", "err", err)
	}
}

// retryReopen reopens a broken store, at most once per back-off interval
// (10ms doubling to 1s): while the disk stays full or gone, the groups in
// between fail at once with the last reason instead of each paying for an
// open.
func (p *Pebble) retryReopen() error {
	if time.Now().Before(p.nextReopen) {
		return p.reopenErr
	}
	err := p.probeWrite()
	if err == nil {
		// Opening replays and flushes the WAL, which waits as long as
		// flushes fail: batches queued meanwhile are answered as during a
		// stalled commit.
		p.mu.Lock()
		p.inApply, p.answered = []pendingBatch{}, true
		p.mu.Unlock()
		p.stallTimer.Reset(p.opts.DiskFullAnswerAfter)
		err = p.reopen(true)
		p.mu.Lock()
		p.inApply, p.answered = nil, false
		p.mu.Unlock()
		p.stallTimer.Stop()
		p.awaitAnswering()
	}
	if err == nil {
		p.reopenDelay, p.reopenErr = 0, nil
		return nil
	}
	p.reopenDelay = min(max(2*p.reopenDelay, 10*time.Millisecond), time.Second)
	p.nextReopen, p.reopenErr = time.Now().Add(p.reopenDelay), err
	return err
}

// probeWrite writes and syncs a small file in the store's directory. A
// pebble.Open that fails after it has started its background scheduler
// (as when it cannot create the new WAL on a full disk) leaks that
// goroutine, so a broken store checks it can write before trying.
func (p *Pebble) probeWrite() error {
	fs := p.opts.FS
	path := fs.PathJoin(p.dir, "write-probe.tmp")
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, 64<<10))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := fs.Remove(path); err == nil {
		err = rerr
	}
	return err
}

// commitErr wraps a commit failure: always ErrNotDurable, and ErrDiskFull
// when the cause is a full disk.
func (p *Pebble) commitErr(err error) error {
	if isDiskFull(err) {
		p.diskFull.Add(1)
		return fmt.Errorf("%w: %w: %w", ErrNotDurable, ErrDiskFull, err)
	}
	return fmt.Errorf("%w: %w", ErrNotDurable, err)
}

// isDiskFull reports an ENOSPC (Pebble's fatal WAL errors reach the store
// only as text).
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), syscall.ENOSPC.Error())
}

// diskFullRecently reports whether background work failed for lack of
// space since the last successful flush, within the last few seconds.
func (p *Pebble) diskFullRecently() bool {
	at := p.diskFullAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < 5*time.Second
}

// backgroundError is Pebble's hook for a failed flush or compaction. It
// logs (rate-limited) and backs off: it runs on the failed job's goroutine
// just before Pebble schedules the job again, so sleeping here is what
// spaces the retries (10ms doubling to 1s).
func (p *Pebble) backgroundError(err error) {
	n := p.bgFailures.Add(1)
	cause := "pebble background error"
	if isDiskFull(err) {
		p.diskFullAt.Store(time.Now().UnixNano())
		cause = "disk full"
	}
	p.limiter.Error(cause, "store: background flush or compaction failed; retrying with back-off",
		"cause", cause, "err", err, "consecutive_failures", n)
	t := time.NewTimer(min(10*time.Millisecond<<min(n-1, 7), time.Second))
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.quit:
	}
}

// answerStalled runs while a group waits in db.Apply for longer than
// DiskFullAnswerAfter. If the disk is full, the waiting group and every
// queued batch are answered ErrDiskFull at once: appends leave the queue
// (never applied), deletions and updates stay queued, to be completed as
// after any failure. The waiting group may still go through later; its
// appends are then undone (commitGroup). It re-arms itself while the group
// waits.
func (p *Pebble) answerStalled() {
	p.answerMu.Lock()
	defer p.answerMu.Unlock()
	p.mu.Lock()
	if p.inApply == nil {
		p.mu.Unlock()
		return
	}
	if !p.diskFullRecently() {
		p.stallTimer.Reset(p.opts.DiskFullAnswerAfter)
		p.mu.Unlock()
		return
	}
	var answer []func(error)
	if !p.answered {
		p.answered = true
		for _, g := range p.inApply {
			if !g.answered {
				answer = append(answer, g.done)
			}
		}
	}
	keep := p.pending[:0]
	for _, g := range p.pending {
		if !g.answered {
			answer = append(answer, g.done)
			g.answered = true
		}
		if g.b.rollForward() {
			keep = append(keep, g)
		}
	}
	clear(p.pending[len(keep):])
	p.pending = keep
	// Commits arriving while the group waits are answered within 50ms.
	p.stallTimer.Reset(min(p.opts.DiskFullAnswerAfter, 50*time.Millisecond))
	p.mu.Unlock()
	if len(answer) == 0 {
		return
	}
	p.diskFull.Add(uint64(len(answer)))
	err := fmt.Errorf("%w: %w: waited %v for memtable space while every flush fails for lack of space",
		ErrNotDurable, ErrDiskFull, p.opts.DiskFullAnswerAfter)
	p.limiter.Error("disk full: commits answered", "store: disk full, commits refused", "refused", len(answer))
	for _, done := range answer {
		done(err)
	}
}

// apply commits pb with a synced WAL write, turning Pebble's fatal commit
// error into an error.
func (p *Pebble) apply(pb *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = fe
		}
	}()
	return p.db.Apply(pb, pebble.Sync)
}

func openDB(dir string, opts *pebble.Options) (db *pebble.DB, err error) {
	defer recoverPanic(&err)
	return pebble.Open(dir, opts)
}

func closeDB(db *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: close after failure: %v", r)
		}
	}()
	return db.Close()
}

func (p *Pebble) breakDB() {
	p.dbMu.Lock()
	db := p.db
	p.db = nil
	p.dbMu.Unlock()
	if p.compactStop != nil {
		p.compactStop()
	}
	p.compactWG.Wait()
	if db != nil {
		if err := closeDB(db); err != nil {
			p.popts.Logger.Infof("close after failure: %v", err)
		}
	}
	clear(p.settled)
}

// reopen opens the database, verifies every block by reading every key, and
// applies pending repairs in one synced batch.
func (p *Pebble) reopen(afterFailure bool) error {
	if err := p.popts.FS.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	db, err := openDB(p.dir, p.popts)
	if err != nil {
		return err
	}
	if afterFailure {
		if err := verify(db); err != nil {
			_ = closeDB(db)
			return err
		}
	}
	p.dbMu.Lock()
	p.db = db
	p.dbMu.Unlock()
	if err := p.applyRepairs(); err != nil {
		p.breakDB()
		return err
	}
	if afterFailure {
		p.reopens.Add(1)
	}
	return nil
}

// applyRepairs makes failed groups definite in one synced batch.
func (p *Pebble) applyRepairs() error {
	if len(p.repairs) == 0 {
		return nil
	}
	rb := p.db.NewBatch()
	for _, r := range p.repairs {
		if r.redo != nil {
			addPlain(rb, r.redo)
		}
	}
	for i := len(p.repairs) - 1; i >= 0; i-- {
		u := p.repairs[i].undo
		for j := len(u) - 1; j >= 0; j-- {
			if u[j].value == nil {
				_ = rb.Delete(u[j].key, nil)
			} else {
				_ = rb.Set(u[j].key, u[j].value, nil)
			}
		}
	}
	err := p.apply(rb)
	_ = rb.Close()
	if err != nil {
		return err
	}
	p.repairs = nil
	return nil
}

// verify reads every key and value so that corrupt blocks are detected now.
func verify(db *pebble.DB) error {
	it, err := db.NewIter(nil)
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if _, err := it.ValueAndErr(); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	return it.Close()
}

// messageKinds are the keys one stored message may have: its state, and
// its body inline or a reference to it in its queue log.
var messageKinds = [...]byte{kindState, kindMsg, kindRef}

// deleteMessage deletes every key of message seq of q.
func deleteMessage(pb *pebble.Batch, q QueueID, seq uint64) {
	for _, k := range messageKinds {
		_ = pb.Delete(queueKey(q, seq, k), nil)
	}
}

// addPlain writes b's operations with point deletes only (repairs).
func addPlain(pb *pebble.Batch, b *Batch) {
	for _, o := range b.ops {
		switch o.kind {
		case opAppend:
			for _, r := range o.recs {
				_ = pb.Set(queueKey(r.Queue, r.Seq, kindMsg), r.Msg, nil)
				if r.State != nil {
					_ = pb.Set(queueKey(r.Queue, r.Seq, kindState), r.State, nil)
				}
			}
		case opSettle:
			for _, s := range o.seqs {
				deleteMessage(pb, o.queue, s)
			}
		case opUpdate:
			// A state key without its message is ignored by Iterate.
			_ = pb.Set(queueKey(o.queue, o.seq, kindState), o.value, nil)
		case opDeleteQueue:
			lo, hi := queueBounds(o.queue)
			_ = pb.DeleteRange(lo, hi, nil)
		case opPutMeta:
			_ = pb.Set(metaKey(o.key), o.value, nil)
		case opDeleteMeta:
			_ = pb.Delete(metaKey(o.key), nil)
		}
	}
}

// undoOf computes what restores the state before b (pre-images are read from
// the database as committed before this group).
func (p *Pebble) undoOf(b *Batch) []kv {
	var u []kv
	pre := func(k []byte) {
		v, c, err := p.db.Get(k)
		if err == nil {
			u = append(u, kv{k, append([]byte{}, v...)})
			_ = c.Close()
		} else {
			u = append(u, kv{k, nil})
		}
	}
	for _, o := range b.ops {
		switch o.kind {
		case opAppend:
			for _, r := range o.recs {
				for _, k := range messageKinds {
					u = append(u, kv{queueKey(r.Queue, r.Seq, k), nil})
				}
			}
		case opSettle:
			for _, s := range o.seqs {
				for _, k := range messageKinds {
					pre(queueKey(o.queue, s, k))
				}
			}
		case opUpdate:
			pre(queueKey(o.queue, o.seq, kindState))
		case opPutMeta, opDeleteMeta:
			pre(metaKey(o.key))
		case opDeleteQueue:
			// completed rather than undone (no pre-image of a whole queue)
		}
	}
	return u
}

// addOps adds b's operations to pb. With queue logs, refs holds the log
// index of each appended record's body, in order; addOps takes them.
func (p *Pebble) addOps(pb *pebble.Batch, b *Batch, refs *[]uint64) {
	for _, o := range b.ops {
		switch o.kind {
		case opAppend:
			for _, r := range o.recs {
				if p.bodies != nil && len(*refs) > 0 {
					_ = pb.Set(queueKey(r.Queue, r.Seq, kindRef), encodeRef((*refs)[0], len(r.Msg)), nil)
					*refs = (*refs)[1:]
				} else {
					_ = pb.Set(queueKey(r.Queue, r.Seq, kindMsg), r.Msg, nil)
				}
				if r.State != nil { // seqs are never reused: no older state to delete
					_ = pb.Set(queueKey(r.Queue, r.Seq, kindState), r.State, nil)
				}
			}
		case opSettle:
			p.addSettle(pb, o.queue, o.seqs)
		case opUpdate:
			// The router never updates a message it settled; a state key
			// without its message would be ignored by Iterate anyway.
			if o.value == nil {
				_ = pb.Delete(queueKey(o.queue, o.seq, kindState), nil)
			} else {
				_ = pb.Set(queueKey(o.queue, o.seq, kindState), o.value, nil)
			}
		case opDeleteQueue:
			lo, hi := queueBounds(o.queue)
			_ = pb.DeleteRange(lo, hi, nil)
			delete(p.settled, o.queue)
		case opPutMeta:
			_ = pb.Set(metaKey(o.key), o.value, nil)
		case opDeleteMeta:
			_ = pb.Delete(metaKey(o.key), nil)
		}
	}
}

// addSettle deletes q's seqs: each run of at least RangeDeleteMin
// consecutive seqs (a FIFO head settled in order, a purge) with one range
// delete, the others with point deletes. Nothing is kept per queue but the
// count of range-deleted messages and the end of the last range (for
// maybeCompact): no structure grows with the messages passed.
func (p *Pebble) addSettle(pb *pebble.Batch, q QueueID, seqs []uint64) {
	if !slices.IsSorted(seqs) {
		seqs = slices.Clone(seqs)
		slices.Sort(seqs)
	}
	for i := 0; i < len(seqs); {
		j := i + 1
		for j < len(seqs) && seqs[j] <= seqs[j-1]+1 {
			j++
		}
		lo, hi := seqs[i], seqs[j-1]+1
		if hi-lo >= max(p.opts.RangeDeleteMin, 2) {
			_ = pb.DeleteRange(seqBound(q, lo), seqBound(q, hi), nil)
			st := p.settled[q]
			st.n += int64(hi - lo)
			st.hi = max(st.hi, hi)
			p.settled[q] = st
		} else {
			for _, s := range seqs[i:j] {
				deleteMessage(pb, q, s)
			}
		}
		i = j
	}
}

// maybeCompact compacts the settled prefix of queues that have range-deleted
// CompactEvery messages since their last compaction (one at a time, in the
// background, cancelled by Close).
func (p *Pebble) maybeCompact() {
	if p.opts.CompactEvery < 0 {
		return
	}
	for q, st := range p.settled {
		if st.n < p.opts.CompactEvery || !p.compacting.CompareAndSwap(0, 1) {
			continue
		}
		p.settled[q] = settledRanges{hi: st.hi}
		lo, _ := queueBounds(q)
		hi := seqBound(q, st.hi)
		db := p.db
		ctx, stop := context.WithCancel(p.compactCtx)
		p.compactStop = stop
		p.compactWG.Add(1)
		go func() {
			defer p.compactWG.Done()
			defer p.compacting.Store(0)
			defer stop()
			defer func() {
				if r := recover(); r != nil { // the db was closed under us after a failure
					if _, ok := r.(fatalError); !ok {
						if _, ok := r.(error); !ok {
							panic(r)
						}
					}
				}
			}()
			if err := db.Compact(ctx, lo, hi, false); err == nil {
				p.compactions.Add(1)
			}
		}()
		return
	}
}

// Iterate visits q's messages in seq order.
func (p *Pebble) Iterate(queue QueueID, fn func(seq uint64, msg, state []byte) error) error {
	lo, hi := queueBounds(queue)
	return p.iterate(queue, lo, hi, fn)
}

// IterateRange implements Store.
func (p *Pebble) IterateRange(queue QueueID, from, to uint64, fn func(seq uint64, msg, state []byte) error) error {
	if from >= to {
		return nil
	}
	return p.iterate(queue, seqBound(queue, from), seqBound(queue, to), fn)
}

func (p *Pebble) iterate(queue QueueID, lo, hi []byte, fn func(seq uint64, msg, state []byte) error) (err error) {
	defer func() { err = readErr(err) }()
	defer recoverPanic(&err)
	p.dbMu.RLock()
	defer p.dbMu.RUnlock()
	if p.db == nil {
		return ErrUnavailable
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	var state []byte
	stateSeq, haveState := uint64(0), false
	bodies := bodyReader{bl: p.bodies, q: queue}
	defer bodies.close()
	for it.First(); it.Valid(); it.Next() {
		_, seq, kind, ok := parseQueueKey(it.Key())
		if !ok {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		if kind == kindState {
			state = append(state[:0], v...)
			stateSeq, haveState = seq, true
			continue
		}
		var st []byte
		if haveState && stateSeq == seq {
			st = state
		}
		haveState = false
		if kind == kindRef {
			if v, err = bodies.body(seq, v); errors.Is(err, errReleased) {
				// Settled since the iterator's snapshot, as the release
				// implies; if the reference is still there, the release
				// was wrong and the body is lost: say so.
				if _, c, gerr := p.db.Get(queueKey(queue, seq, kindRef)); gerr == nil {
					_ = c.Close()
					_ = it.Close()
					return fmt.Errorf("%w: queue %x seq %d: its body was released while it is still stored",
						ErrCorrupt, uint64(queue), seq)
				}
				continue
			} else if err != nil {
				_ = it.Close()
				return err
			}
		}
		if err := fn(seq, v, st); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	return it.Close()
}

// SeqSpan implements Store: two seeks, whatever the queue holds.
func (p *Pebble) SeqSpan(queue QueueID) (first, last uint64, err error) {
	defer func() { err = readErr(err) }()
	defer recoverPanic(&err)
	p.dbMu.RLock()
	defer p.dbMu.RUnlock()
	if p.db == nil {
		return 0, 0, ErrUnavailable
	}
	lo, hi := queueBounds(queue)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, 0, err
	}
	if it.First() {
		_, first, _, _ = parseQueueKey(it.Key())
	}
	if it.Last() {
		_, last, _, _ = parseQueueKey(it.Key())
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return 0, 0, err
	}
	return first, last, it.Close()
}

// Queues visits the IDs of non-empty queues in order.
func (p *Pebble) Queues(fn func(QueueID) error) (err error) {
	defer func() { err = readErr(err) }()
	defer recoverPanic(&err)
	p.dbMu.RLock()
	defer p.dbMu.RUnlock()
	if p.db == nil {
		return ErrUnavailable
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixQueue}, UpperBound: []byte{prefixQueue + 1}})
	if err != nil {
		return err
	}
	for valid := it.First(); valid; {
		q, _, kind, ok := parseQueueKey(it.Key())
		if !ok {
			valid = it.Next()
			continue
		}
		if kind == kindMsg || kind == kindRef {
			if err := fn(q); err != nil {
				_ = it.Close()
				return err
			}
			if q == ^QueueID(0) {
				break
			}
			_, next := queueBounds(q)
			valid = it.SeekGE(next)
			continue
		}
		valid = it.Next() // orphan state key: keep looking in this queue
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	return it.Close()
}

// Meta visits metadata in key order.
func (p *Pebble) Meta(fn func(key string, value []byte) error) (err error) {
	defer func() { err = readErr(err) }()
	defer recoverPanic(&err)
	p.dbMu.RLock()
	defer p.dbMu.RUnlock()
	if p.db == nil {
		return ErrUnavailable
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMeta}, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		if err := fn(string(it.Key()[1:]), v); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	return it.Close()
}

// awaitAnswering returns once an answerStalled under way has finished its
// callbacks: a barrier, not a critical section.
func (p *Pebble) awaitAnswering() {
	p.answerMu.Lock()
	defer p.answerMu.Unlock()
}

// releaseBodies frees the queue logs after a durable group: the head of
// each log whose queue had messages settled, and the whole log of each
// deleted queue. Errors are logged; the next settle retries the release.
func (p *Pebble) releaseBodies(group []pendingBatch) {
	if p.bodies == nil {
		return
	}
	var settled map[QueueID]int
	for _, g := range group {
		for _, o := range g.b.ops {
			switch o.kind {
			case opSettle:
				if settled == nil {
					settled = map[QueueID]int{}
				}
				settled[o.queue] += len(o.seqs)
			case opDeleteQueue:
				p.bodies.remove(o.queue)
				delete(settled, o.queue)
			}
		}
	}
	for q, n := range settled {
		if err := p.bodies.releaseHead(p.db, q, n); err != nil {
			p.limiter.Error("queue log release", "store: releasing a queue log's head", "queue", uint64(q), "err", err)
		}
	}
}
