package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/epitaph-mq/epitaph/router/store/segment"
)

// Queue logs.
//
// With PebbleOptions.BodyDir set, the message bodies of each queue are the
// entries of that queue's own segment log (BodyDir/<queue id in hex>, see
// router/store/segment), appended in the order the queue's messages were
// published; Pebble keeps, per message, a 12-byte reference (the entry's
// log index and length, under a kindRef key) and the message's state, as
// before. A Pebble batch is still the one atomic commit of every batch: a
// multi-queue publish and a dead-letter move stay one step.
//
// Order of durability: the committer appends a group's bodies, one write
// per queue log, then commits the Pebble batch that refers to them while
// the logs sync, and answers the group once both are durable. A crash in
// between leaves entries no reference names (released with the head) or,
// for that one unanswered group, references past the end of a log, which
// the next open removes (Pebble.dropDanglingRefs). A log whose fsync fails
// after Pebble committed has the group's references undone.
//
// Release: after a group that settled a queue's messages is durable, the
// queue's log is released (TruncatePrefix) up to the entry of its first
// message still stored, found with one seek, when that frees a segment
// file (tried once per releaseEvery settled messages); whole segment files
// below it are deleted once that release is durable. An empty queue's log
// is emptied once it holds emptyReleaseBytes, so a purged deep queue frees
// its disk at once; entries settled out of order (behind a message still
// held) are freed when the head passes them. Deleting a queue removes its
// log's directory once the delete is durable; at open, the directories of
// queues with no stored message are removed.
//
// Why a log per queue: it is the log a Raft library replicates for a
// quorum queue (see the segment package's documentation and the README's
// "Queue logs"), the reads of a queue's next messages are one sequential
// pass over one file, and a body is written once (Pebble wrote it to its
// WAL, then to a table, then again at each compaction).

// bodySegmentSize: disk is freed a segment at a time.
const bodySegmentSize = 16 << 20

// emptyReleaseBytes: a queue log whose queue holds nothing is emptied
// (its files deleted) once it holds this much.
const emptyReleaseBytes = 4 << 20

// refLen is the size of a kindRef value: log index (8), body length (4).
const refLen = 12

func encodeRef(idx uint64, n int) []byte {
	v := make([]byte, refLen)
	binary.BigEndian.PutUint64(v, idx)
	binary.BigEndian.PutUint32(v[8:], uint32(n))
	return v
}

func decodeRef(v []byte) (idx uint64, n int, ok bool) {
	if len(v) != refLen {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(v), int(binary.BigEndian.Uint32(v[8:])), true
}

// bodyLogs are the queue logs of one store. Logs are opened on first use
// and stay open until the queue is deleted or the store closed.
type bodyLogs struct {
	dir    string
	fs     segment.FS // nil: the real disk
	logger *slog.Logger

	mu   sync.Mutex
	logs map[QueueID]*bodyLog
}

type bodyLog struct {
	log *segment.Log
	// lastSeq is the highest seq appended since the log was opened. The
	// head release assumes that a queue's seqs and log indices grow
	// together (the router appends a queue's messages in seq order); a
	// seq appended below it turns the release off for this log.
	lastSeq   uint64
	unordered bool
	// headSeq: no message below this seq is stored any more (the first
	// one the last release found), so the next one seeks from there
	// instead of stepping over every settled key again.
	headSeq uint64
	// settled counts the messages settled since the last release (owned
	// by the committer): releases are tried every releaseEvery of them.
	settled int
}

// releaseEvery: a release needs a Pebble iterator, whose creation costs
// in proportion to the range deletions in the memtable; trying once per
// this many settled messages keeps it off the per-commit path.
const releaseEvery = 1024

func openBodyLogs(dir string, fs segment.FS, logger *slog.Logger) (*bodyLogs, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("store: queue logs: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &bodyLogs{dir: dir, fs: fs, logger: logger, logs: map[QueueID]*bodyLog{}}, nil
}

func (bl *bodyLogs) path(q QueueID) string {
	return filepath.Join(bl.dir, fmt.Sprintf("%016x", uint64(q)))
}

// get returns q's log, opening it (creating it only when create is set;
// nil, nil when it does not exist).
func (bl *bodyLogs) get(q QueueID, create bool) (*bodyLog, error) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if l := bl.logs[q]; l != nil {
		return l, nil
	}
	dir := bl.path(q)
	if !create {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	sl, err := segment.Open(dir, segment.Options{SegmentSize: bodySegmentSize, FS: bl.fs, Logger: bl.logger})
	if err != nil {
		return nil, fmt.Errorf("store: queue log %s: %w", dir, err)
	}
	l := &bodyLog{log: sl}
	if _, err := os.Stat(filepath.Join(dir, unorderedMarker)); err == nil {
		l.unordered = true
	}
	bl.logs[q] = l
	return l, nil
}

// drop closes q's log after a failure (an fsync error leaves a segment log
// refusing writes): the next use opens it again, reading back what is on disk.
func (bl *bodyLogs) drop(l *bodyLog) {
	bl.mu.Lock()
	for q, cur := range bl.logs {
		if cur == l {
			delete(bl.logs, q)
		}
	}
	bl.mu.Unlock()
	_ = l.log.Close()
}

// remove deletes q's log (its queue was deleted, durably).
func (bl *bodyLogs) remove(q QueueID) {
	bl.mu.Lock()
	l := bl.logs[q]
	delete(bl.logs, q)
	bl.mu.Unlock()
	if l != nil {
		_ = l.log.Close()
	}
	if err := os.RemoveAll(bl.path(q)); err != nil {
		bl.logger.Warn("cannot remove a deleted queue's log", "dir", bl.path(q), "err", err)
	}
}

// removeOrphans removes the logs of queues that hold no stored message:
// left by a delete interrupted by a crash, or emptied.
func (bl *bodyLogs) removeOrphans(holds map[QueueID]bool) error {
	ents, err := os.ReadDir(bl.dir)
	if err != nil {
		return fmt.Errorf("store: queue logs: %w", err)
	}
	for _, e := range ents {
		id, err := strconv.ParseUint(e.Name(), 16, 64)
		if err != nil || !e.IsDir() || holds[QueueID(id)] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(bl.dir, e.Name())); err != nil {
			return fmt.Errorf("store: removing the log of queue %x: %w", id, err)
		}
	}
	return nil
}

func (bl *bodyLogs) close() error {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	var errs []error
	for q, l := range bl.logs {
		errs = append(errs, l.log.Close())
		delete(bl.logs, q)
	}
	return errors.Join(errs...)
}

// appendGroup appends the bodies of every record the group appends, one
// Append per queue log. It returns each record's log index in the order
// addOps visits them, and wait, which returns once the logs have synced
// them (nil) or failed. An error from appendGroup itself means a write
// failed: the group fails, and wait must still be called.
func (bl *bodyLogs) appendGroup(group []pendingBatch) (idxs []uint64, wait func() error, err error) {
	type perQueue struct {
		entries [][]byte
		seqs    []uint64
		at      []int // positions in idxs
	}
	var order []QueueID
	byQueue := map[QueueID]*perQueue{}
	for _, g := range group {
		for _, o := range g.b.ops {
			if o.kind != opAppend {
				continue
			}
			for _, r := range o.recs {
				pq := byQueue[r.Queue]
				if pq == nil {
					pq = &perQueue{}
					byQueue[r.Queue] = pq
					order = append(order, r.Queue)
				}
				pq.entries = append(pq.entries, r.Msg)
				pq.seqs = append(pq.seqs, r.Seq)
				pq.at = append(pq.at, len(idxs))
				idxs = append(idxs, 0)
			}
		}
	}
	if len(idxs) == 0 {
		return nil, func() error { return nil }, nil
	}
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	var failed []*bodyLog // to be opened again: an fsync failed
	var writeErr error
	fail := func(q QueueID, l *bodyLog, err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil {
			firstErr = fmt.Errorf("store: queue log of %x: %w", uint64(q), err)
		}
		if l != nil && errors.Is(err, segment.ErrFailed) && !slices.Contains(failed, l) {
			failed = append(failed, l)
		}
	}
	for _, q := range order {
		pq := byQueue[q]
		l, err := bl.get(q, true)
		if err != nil {
			writeErr = fmt.Errorf("store: queue log of %x: %w", uint64(q), err)
			break
		}
		wg.Add(1)
		first, err := l.log.Append(pq.entries, func(err error) {
			defer wg.Done()
			if err != nil {
				fail(q, l, err)
			}
		})
		if err != nil {
			wg.Done()
			fail(q, l, err)
			writeErr = fmt.Errorf("store: queue log of %x: %w", uint64(q), err)
			break
		}
		for i, at := range pq.at {
			idxs[at] = first + uint64(i)
		}
		bl.noteSeqs(l, q, pq.seqs)
	}
	wait = func() error {
		wg.Wait()
		// Closed here, not in the callback: that runs on the log's
		// syncer, which Close waits for.
		for _, l := range failed {
			bl.drop(l)
		}
		if writeErr != nil {
			return writeErr
		}
		return firstErr
	}
	if writeErr != nil {
		return nil, wait, writeErr
	}
	return idxs, wait, nil
}

// unorderedMarker is the file in a queue log's directory that says its
// seqs were once appended out of order (see noteSeqs).
const unorderedMarker = "unordered"

func writeSynced(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// noteSeqs keeps l.lastSeq and turns the head release off if q's seqs
// did not grow with their log indices.
func (bl *bodyLogs) noteSeqs(l *bodyLog, q QueueID, seqs []uint64) {
	for _, seq := range seqs {
		if seq <= l.lastSeq && !l.unordered {
			l.unordered = true
			bl.logger.Warn("queue log: seqs appended out of order; its head is no longer released",
				"queue", uint64(q), "seq", seq, "after", l.lastSeq)
			// Remembered across restarts: a release after one would
			// take the first stored message's entry for the lowest.
			if err := writeSynced(filepath.Join(bl.path(q), unorderedMarker)); err != nil {
				bl.logger.Error("queue log: cannot write the out-of-order marker", "queue", uint64(q), "err", err)
			}
		}
		l.lastSeq = max(l.lastSeq, seq)
	}
}

// releaseHead releases q's log up to the entry of its first stored
// message (everything when it holds none), once releaseEvery messages of
// q were settled since the last try, or a quarter of that in this group. Called by the committer after a
// group that settled some of q's messages is durable, so no append is in
// flight and the references it sees are durable.
func (bl *bodyLogs) releaseHead(db *pebble.DB, q QueueID, settled int) error {
	l, err := bl.get(q, false)
	if err != nil || l == nil || l.unordered {
		return err
	}
	// A group that settles many at once (a purge, a large ranged
	// acknowledgement) tries at once.
	if l.settled += settled; l.settled < releaseEvery && settled < releaseEvery/4 {
		return nil
	}
	l.settled = 0
	_, hi := queueBounds(q)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: seqBound(q, l.headSeq), UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	// With nothing stored, the release goes one past the end, which the
	// log takes as a fresh start: its emptied active segment goes too.
	// A queue that its consumers keep empty would then start a segment
	// file per commit: it waits until the log holds emptyReleaseBytes.
	to := l.log.LastIndex() + 2
	if l.log.Stats().Bytes < emptyReleaseBytes {
		to = 0
	}
	headSeq := l.lastSeq + 1
	// The first reference; a queue written before its bodies moved to the
	// log starts with inline messages, passed over for a while.
	for n, valid := 0, it.First(); valid; n, valid = n+1, it.Next() {
		if n == 256 {
			return nil
		}
		_, seq, kind, ok := parseQueueKey(it.Key())
		if !ok || kind != kindRef {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		idx, _, ok := decodeRef(v)
		if !ok {
			return fmt.Errorf("%w: queue %x: bad body reference", ErrCorrupt, uint64(q))
		}
		to, headSeq = idx, seq
		break
	}
	if err := it.Error(); err != nil {
		return err
	}
	l.headSeq = max(l.headSeq, headSeq)
	// Release only when it frees a segment file: a release is a state
	// record and an fsync of the log, worth paying once per 16 MiB.
	if to <= l.log.FirstIndex() || to < l.log.HeadSegmentEnd() {
		return nil
	}
	return l.log.TruncatePrefix(to, nil)
}

// bodyReader reads the bodies of one queue's references during an
// iteration, sequentially from one positioned reader.
type bodyReader struct {
	bl *bodyLogs
	q  QueueID
	l  *bodyLog
	r  *segment.Reader
}

func (br *bodyReader) close() {
	if br.r != nil {
		_ = br.r.Close()
	}
}

// errReleased: the body was released after the iteration read its
// reference, because the message was settled in between (an iteration
// reads a Pebble snapshot taken at its start; releases follow durable
// settles). The message is no longer stored: the iteration skips it.
var errReleased = errors.New("store: body released")

// body returns the body that ref names for message seq; it is valid until
// the next call.
func (br *bodyReader) body(seq uint64, ref []byte) ([]byte, error) {
	idx, n, ok := decodeRef(ref)
	if !ok {
		return nil, fmt.Errorf("%w: queue %x seq %d: bad body reference", ErrCorrupt, uint64(br.q), seq)
	}
	if br.bl == nil {
		return nil, fmt.Errorf("%w: queue %x seq %d: a body reference, and no queue logs configured", ErrCorrupt, uint64(br.q), seq)
	}
	if br.r == nil {
		l, err := br.bl.get(br.q, false)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, fmt.Errorf("%w: queue %x seq %d: its queue log is missing", ErrCorrupt, uint64(br.q), seq)
		}
		br.l, br.r = l, l.log.NewReader(idx)
	}
	br.r.Seek(idx)
	got, data, err := br.r.Next()
	switch {
	case (errors.Is(err, io.EOF) || (err == nil && got != idx)) && idx < br.l.log.FirstIndex():
		return nil, errReleased
	case errors.Is(err, io.EOF) || (err == nil && got != idx):
		return nil, fmt.Errorf("%w: queue %x seq %d: its body (log index %d) is missing", ErrCorrupt, uint64(br.q), seq, idx)
	case err != nil:
		return nil, fmt.Errorf("queue %x seq %d: %w", uint64(br.q), seq, err)
	case len(data) != n:
		return nil, fmt.Errorf("%w: queue %x seq %d: its body has %d bytes, %d expected", ErrCorrupt, uint64(br.q), seq, len(data), n)
	}
	return data, nil
}
