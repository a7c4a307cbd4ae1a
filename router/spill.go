package router

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/router/store/segment"
)

// Transient messages behind the window.
//
// When the broker has a spill directory (Options.SpillDir: it has a data
// directory), a message that is not in the store (a transient message on
// any queue, every message of a non-durable queue) and falls behind its
// queue's window is written to a spill log of its queue's level, a
// segment log (router/store/segment) opened without fsync, and its entry
// dropped: only the paged slot stays in memory, as for a durable paged
// message, plus its mark in the page (spilled). A refill reads the bodies
// back with the log's sequential reader.
//
// Writes are batched: a level collects the entries it pages until they
// reach min(window, spillBatchMax) bytes and writes them with one call, so
// the entries waiting are part of what the queue holds in memory. A queue
// whose consumers keep up never pages and never writes.
//
// The log is released from its head as the paged slots before it go
// (TruncatePrefix up to the first spilled slot still live), so whole
// segment files are deleted as a deep queue drains; a purge releases it
// all and a delete removes its directory. The spill directory is emptied
// at start: a transient message never outlives the process.

// spillBatchMax bounds the bytes a level collects before writing them.
const spillBatchMax = 256 << 10

// spillSegmentSize: spill logs free disk a segment at a time (a variable
// so that tests can use small segments).
var spillSegmentSize int64 = 16 << 20

// spillRetryAfter: after a failed write (a full disk), messages stay in
// memory for this long before the level tries to write again.
const spillRetryAfter = time.Second

// spillLog is one level's spill log and what waits to be written to it.
type spillLog struct {
	dir     string
	log     *segment.Log // nil until the first write
	rd      *segment.Reader
	pending []*entry // paged transient entries not written yet, in seq order
	pendBy  int64
	retryAt int64 // unix ns; no write before it (0: none)
}

// spillLocked notes e, a transient entry just paged in level l, for the
// next write to l's spill log.
func (q *Queue) spillLocked(l *level, e *entry) {
	if q.b.closed.Load() {
		return // the spill logs are gone with the broker (closeSpill)
	}
	sp := l.spill
	if sp == nil {
		sp = &spillLog{dir: filepath.Join(q.b.spillDir, fmt.Sprintf("%d-%d", q.id, l.prio))}
		l.spill = sp
		q.spillLogs = append(q.spillLogs, sp)
	}
	if sp.retryAt != 0 {
		if q.nowNano() < sp.retryAt {
			return // kept in memory
		}
		sp.retryAt = 0
	}
	sp.pending = append(sp.pending, e)
	sp.pendBy += e.size()
	if sp.pendBy >= min(q.b.windowBytes, spillBatchMax) {
		q.flushSpillLocked(l)
	}
}

// flushSpillLocked writes level l's pending entries that are still paged
// to its spill log and drops them from memory. On a failure (a full disk)
// they stay in memory, pinned as before, and the level writes nothing for
// spillRetryAfter; the failure is logged.
func (q *Queue) flushSpillLocked(l *level) {
	sp := l.spill
	pend := sp.pending
	sp.pending, sp.pendBy = sp.pending[:0], 0
	defer clear(pend)
	kept := pend[:0:0]
	var payloads [][]byte
	for _, e := range pend {
		if !e.ready || !e.paged || e.stored {
			continue // taken meanwhile
		}
		p, err := encodeSpilled(e)
		if err != nil || len(p) > segment.MaxEntrySize {
			continue // stays in memory (cannot be encoded, or larger than a log entry may be)
		}
		kept = append(kept, e)
		payloads = append(payloads, p)
	}
	if len(kept) == 0 {
		return
	}
	var first uint64
	err := q.openSpillLocked(sp)
	if err == nil {
		first, err = sp.log.Append(payloads, nil)
	}
	if err != nil {
		sp.retryAt = q.nowNano() + int64(spillRetryAfter)
		q.b.spillFailed.Add(int64(len(kept)))
		q.b.storeLog.Error("spill: "+storeErrCause(err), "transient messages kept in memory: cannot write them to disk",
			"queue", q.name, "vhost", q.vh.name, "messages", len(kept), "err", err)
		return
	}
	for k, e := range kept {
		list := &l.paged
		if q.loading && e.seq > q.loadEnd {
			list = &l.fresh
		}
		p, i, ok := list.find(e.seq)
		if !ok || p.pinned == nil || p.pinned[i] != e {
			continue // (cannot happen: entries are taken only under the lock)
		}
		list.markSpilled(p, i, first+uint64(k))
	}
}

// openSpillLocked opens sp's log on its first write.
func (q *Queue) openSpillLocked(sp *spillLog) error {
	if sp.log != nil {
		return nil
	}
	lg, err := segment.Open(sp.dir, segment.Options{NoSync: true, SegmentSize: spillSegmentSize,
		FS: q.b.spillFS, Logger: q.b.log.With("queue", q.name, "vhost", q.vh.name)})
	if err != nil {
		return fmt.Errorf("spill log: %w", err)
	}
	sp.log = lg
	return nil
}

// encodeSpilled is a spilled entry's payload: the message as the store
// encodes it, then its state, then the state's length (2 bytes).
func encodeSpilled(e *entry) ([]byte, error) {
	enc, err := encodeMessage(e.msg)
	if err != nil {
		return nil, err
	}
	st := encodeState(e)
	if len(st) > math.MaxUint16 {
		return nil, errors.New("router: state too large to spill")
	}
	enc = append(enc, st...)
	return binary.BigEndian.AppendUint16(enc, uint16(len(st))), nil
}

// decodeSpilled reads a spilled payload back into an entry of level prio.
func decodeSpilled(seq uint64, prio uint8, data []byte) (*entry, error) {
	if len(data) < 2 {
		return nil, errCorrupt
	}
	n := int(binary.BigEndian.Uint16(data[len(data)-2:]))
	if n+2 > len(data) {
		return nil, errCorrupt
	}
	msg, st := data[:len(data)-2-n], data[len(data)-2-n:len(data)-2]
	m, err := decodeMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	e := &entry{msg: m, seq: seq, dc: m.DeliveryCount, heapIdx: -1, prio: prio}
	if err := decodeState(e, st); err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	e.delivered, e.retained = false, false
	return e, nil
}

// readSpilledLocked reads the bodies of slots (spilled slots of level l,
// in seq order, so in log order) with one pass of l's log reader, into
// loaded by seq. What it cannot read is logged; the caller reports it.
func (q *Queue) readSpilledLocked(l *level, slots []slot, loaded map[uint64]*entry) {
	sp := l.spill
	if sp == nil || sp.log == nil {
		return
	}
	if sp.rd == nil {
		sp.rd = sp.log.NewReader(slots[0].spill)
	}
	// The reader's file is let go after each pass, so that a segment the
	// log deletes frees its disk at once.
	defer sp.rd.Close()
	sp.rd.Seek(slots[0].spill)
	k := 0
	for k < len(slots) {
		idx, data, err := sp.rd.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			q.b.storeLog.Error("spill read", "spilled message unreadable", "queue", q.String(), "err", err)
			if errors.Is(err, store.ErrCorrupt) {
				continue // the reader goes on after the damage
			}
			return
		}
		for k < len(slots) && slots[k].spill < idx {
			k++
		}
		if k == len(slots) || slots[k].spill != idx {
			continue
		}
		e, err := decodeSpilled(slots[k].seq, l.prio, data)
		if err != nil {
			q.b.storeLog.Error("spill read", "spilled message unreadable", "queue", q.String(),
				"seq", slots[k].seq, "err", fmt.Errorf("%w: %w", store.ErrCorrupt, err))
		} else {
			loaded[slots[k].seq] = e
		}
		k++
	}
}

// spillReleasable is how many pages of a list a release looks at for its
// first spilled slot still live (it is normally in the first).
const spillReleasable = 16

// releaseSpillLocked releases the head of each spill log of q up to its
// first spilled slot still live (all of it when there is none), and the
// spilled slots taken behind that out of order (an expiry, a filtered
// consumer's match, a move), after a refill or such a take: a segment
// whose entries are all released is deleted.
func (q *Queue) releaseSpillLocked() {
	if !q.spillDirty {
		return
	}
	q.spillDirty = false
	q.eachLevel(func(l *level) bool {
		sp := l.spill
		if sp == nil || sp.log == nil {
			return true
		}
		released := append(l.paged.released, l.fresh.released...)
		l.paged.released, l.fresh.released = l.paged.released[:0], nil
		if cap(l.paged.released) > 4096 {
			l.paged.released = nil
		}
		sp.pending = slices.DeleteFunc(sp.pending, func(e *entry) bool { return !e.ready || !e.paged })
		if l.paged.nspilled+l.fresh.nspilled == 0 && len(sp.pending) == 0 {
			// Nothing spilled is left: the files go (the active segment
			// too, which a release would keep).
			q.removeSpillLogLocked(sp)
			return true
		}
		first, last := sp.log.FirstIndex(), sp.log.LastIndex()
		if last < first {
			return true // empty
		}
		list := &l.paged
		if list.nspilled == 0 {
			list = &l.fresh
		}
		to := firstSpilled(list)
		if to == 0 && l.paged.nspilled+l.fresh.nspilled == 0 {
			to = last + 1
		}
		if to > first {
			if err := sp.log.TruncatePrefix(to, nil); err != nil {
				q.b.storeLog.Error("spill: release", "cannot release spilled messages", "queue", q.String(), "err", err)
			}
			first = to
		}
		// What was taken behind the head, as runs of consecutive indices.
		released = slices.DeleteFunc(released, func(i uint64) bool { return i < first })
		slices.Sort(released)
		for k := 0; k < len(released); {
			j := k + 1
			for j < len(released) && released[j] == released[j-1]+1 {
				j++
			}
			if err := sp.log.Settle(released[k], released[j-1]+1, nil); err != nil {
				q.b.storeLog.Error("spill: release", "cannot release spilled messages", "queue", q.String(), "err", err)
				break
			}
			k = j
		}
		return true
	})
}

// firstSpilled returns the log index of l's first live spilled slot, 0
// when it is not in l's first pages.
func firstSpilled(l *pagedList) uint64 {
	for k, p := range l.pages[l.first:] {
		if k == spillReleasable {
			break
		}
		if p.spilled == nil {
			continue
		}
		for i := p.head; i < len(p.sizes); i++ {
			if p.sizes[i] != 0 {
				if idx := p.spillIndex(i); idx != 0 {
					return idx
				}
			}
		}
	}
	return 0
}

// clearSpillLocked drops every spilled and pending message of q (purge,
// delete, the broker's close): the paged lists were cleared, so nothing
// refers to the logs any more; their files are removed at once.
func (q *Queue) clearSpillLocked() {
	for _, sp := range q.spillLogs {
		clear(sp.pending)
		sp.pending, sp.pendBy = sp.pending[:0], 0
		q.removeSpillLogLocked(sp)
	}
}

// removeSpillLogLocked closes sp's log and removes its files; the next
// write opens a new one.
func (q *Queue) removeSpillLogLocked(sp *spillLog) {
	if sp.log == nil {
		return
	}
	if sp.rd != nil {
		sp.rd.Close()
	}
	if err := sp.log.Close(); err != nil {
		q.b.log.Warn("spill log close", "queue", q.String(), "err", err)
	}
	sp.log, sp.rd = nil, nil
	if err := os.RemoveAll(sp.dir); err != nil {
		q.b.log.Warn("cannot remove a spill log", "dir", sp.dir, "err", err)
	}
}

// SpilledMessagesKeptInMemory is the number of transient messages that
// could not be written to disk when they fell behind their queue's window
// (a full disk) and stayed in memory instead.
func (b *Broker) SpilledMessagesKeptInMemory() int64 { return b.spillFailed.Load() }

// wipeSpillDir empties the spill directory at start: what a previous run
// wrote there were transient messages, which do not survive a restart.
func wipeSpillDir(dir string, log interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
}) {
	files, bytes := 0, int64(0)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files++
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		log.Warn("cannot empty the transient spill directory", "dir", dir, "err", err)
		return
	}
	if files > 0 {
		log.Info("discarded transient messages spilled by the previous run", "dir", dir, "files", files, "bytes", bytes)
	}
}
