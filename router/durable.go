package router

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// Durable queues.
//
// A queue persists when the broker has a store and the queue is durable and
// not exclusive (quorum queues are always durable); it stores the durable
// messages (header durable=true) it holds, under its QueueID and the entry's
// seq. Every store operation of a queue is collected in q.pend under q.mu
// and submitted by q.unlock, so the store applies a queue's operations in
// the order they happened; an operation that spans queues (a durable
// publish, a dead-letter move) locks all of them, lowest QueueID first, and
// submits its batch before unlocking. That is the only place where more
// than one queue lock is held.
//
// The in-memory copies (the window, pinned paged entries) and the queue's
// index are authoritative while running: a consumer may get a message
// before its append is synced (RabbitMQ does the same), but the publisher's
// `accepted` waits for the sync. A paged message's body is read back from
// the store only after its append is durable (paged.go).

// metaOn reports whether metadata changes are written (a store, and not
// while Recover reads them back).
func (b *Broker) metaOn() bool { return b.st != nil && !b.loading.Load() }

func (b *Broker) logStoreErr(err error) {
	if err != nil {
		b.storeLog.Error(storeErrCause(err), "store batch failed", "err", err)
	}
}

// storeErrCause is the rate-limiting key of a store error.
func storeErrCause(err error) string {
	if errors.Is(err, store.ErrDiskFull) {
		return "disk full"
	}
	return "store failure"
}

// commitMeta submits mb now and returns a function that waits for it.
func (b *Broker) commitMeta(mb *store.Batch) (wait func()) {
	if b.st == nil || mb.Len() == 0 {
		return func() {}
	}
	ch := make(chan error, 1)
	b.st.Commit(mb, func(err error) { ch <- err })
	return func() {
		if err := <-ch; err != nil {
			b.log.Error("metadata not stored", "err", err)
		}
	}
}

// putMeta writes one metadata blob without waiting.
func (b *Broker) putMeta(key string, value []byte) {
	if b.metaOn() {
		b.st.PutMeta(key, value, b.logStoreErr)
	}
}

// unlockMeta submits the vhost's collected metadata writes, releases v.mu,
// waits for their sync, and retries retained dead messages when the
// topology or a policy changed.
func (v *VHost) unlockMeta() {
	var wait func()
	if v.meta.Len() > 0 {
		mb := new(store.Batch)
		*mb = v.meta
		v.meta = store.Batch{}
		wait = v.b.commitMeta(mb)
	}
	changed := v.topoChanged
	v.topoChanged = false
	v.mu.Unlock()
	if wait != nil {
		wait()
	}
	if changed && v.b.retained.Load() > 0 {
		v.retryDeadLetters()
	}
}

// durableDestLocked reports whether a binding's destination survives a restart.
func (v *VHost) durableDestLocked(b Binding) bool {
	if b.DestinationIsExchange {
		x, ok := v.exchanges[b.Destination]
		return ok && x.spec.Durable
	}
	q, ok := v.queues[b.Destination]
	return ok && q.persist
}

func (v *VHost) putPolicyMetaLocked(p Policy) {
	if v.b.metaOn() {
		v.meta.PutMeta(joinKey(metaPolicy, v.name, p.Name), encodeList(value.List{
			p.Pattern, p.ApplyTo, int64(p.Priority), mapOrEmpty(p.Definition)}))
	}
}

// allocQueueID returns a fresh queue ID. IDs of persisting queues are
// reserved in the metadata in blocks (in mb, ahead of the queue's own
// metadata), so an ID is never reused across restarts either.
func (b *Broker) allocQueueID(mb *store.Batch, persist bool) store.QueueID {
	id := b.nextQID.Add(1)
	if persist && b.metaOn() {
		b.qidMu.Lock()
		if id >= b.qidRes {
			b.qidRes = id + 1024
			var v [8]byte
			binary.BigEndian.PutUint64(v[:], b.qidRes)
			mb.PutMeta(metaQueueID, v[:])
		}
		b.qidMu.Unlock()
	}
	return store.QueueID(id)
}

// encode encodes a message for the store; nil if it cannot be (then it is
// kept in memory only, and the error logged).
func (b *Broker) encode(m *Message) []byte {
	enc, err := encodeMessage(m)
	if err != nil {
		b.log.Error("message not stored: cannot encode its annotations", "err", err)
		return nil
	}
	return enc
}

// lockQueues locks qs (deduplicated) in QueueID order and returns them in
// that order.
func lockQueues(qs []*Queue) []*Queue {
	ls := slices.Clone(qs)
	slices.SortFunc(ls, func(a, b *Queue) int { return cmp.Compare(a.id, b.id) })
	ls = slices.Compact(ls)
	for _, q := range ls {
		q.mu.Lock()
	}
	return ls
}

// unlockQueues submits each queue's pending store operations, unlocks, and
// flushes the dead messages.
func unlockQueues(ls []*Queue) {
	for _, q := range ls {
		q.unlock()
	}
	for _, q := range ls {
		q.flushDead()
	}
}

type placed struct {
	q *Queue
	e *entry
}

// publishDurable enqueues a durable m into queues (at least one persists):
// every persisting target's record goes into one store batch.
func (b *Broker) publishDurable(m *Message, queues []*Queue, confirm func(Outcome)) (Outcome, bool) {
	enc := b.encode(m)
	ls := lockQueues(queues)
	var (
		recs       []store.Record
		rejectedBy *Queue
		accepted   bool
	)
	for _, q := range queues { // routing order, for the outcome
		switch q.enqueueLocked(m, enc, &recs) {
		case enqueued:
			accepted = true
		case enqueueRejected:
			if rejectedBy == nil {
				rejectedBy = q
			}
		}
	}
	st := publishOutcome(rejectedBy, accepted)
	if len(recs) == 0 {
		unlockQueues(ls)
		return st, false
	}
	var entries []placed
	for _, r := range recs {
		for _, q := range ls {
			if q.id == r.Queue {
				entries = append(entries, placed{q, q.entryBySeqLocked(r.Seq)})
			}
		}
	}
	// 0: running; 1: done before publishDurable returned; 2: pending.
	var phase atomic.Int32
	var final Outcome
	b.st.Commit(new(store.Batch).Append(recs...), appendDone(ls, recs, func(err error) {
		out := st
		if err != nil {
			b.storeLog.Error("publish: "+storeErrCause(err), "durable publish failed", "err", err)
			out = Outcome{Kind: Rejected, Error: &Error{
				Condition: CondInternalError, Description: "not durable: " + err.Error()}}
			if errors.Is(err, store.ErrDiskFull) {
				// As RabbitMQ's disk alarm: the publisher may retry once space is freed.
				out.Error = &Error{Condition: CondResourceLimitExceeded,
					Description: "disk full: the message could not be stored; retry once space is freed"}
			}
			go withdraw(entries)
		}
		final = out
		// The bytes are on disk now: count them again, so that the disk
		// alarm also checks behind the committer, which may lag the
		// publishes (package alarm).
		b.alarms.Consumed(m.size())
		if !phase.CompareAndSwap(0, 1) {
			confirm(out)
		}
	}))
	unlockQueues(ls)
	if phase.CompareAndSwap(0, 2) {
		return Outcome{}, true
	}
	return final, false
}

// entryBySeqLocked finds a just-enqueued entry (at the tail of main, or
// handed out or retained meanwhile: then nil, nothing to withdraw).
func (q *Queue) entryBySeqLocked(seq uint64) *entry {
	var found *entry
	q.eachLevel(func(lv *level) bool {
		if e := lv.main.findTail(seq, 4); e != nil {
			found = e
			return false
		}
		for _, l := range []*pagedList{&lv.paged, &lv.fresh} {
			if p, i, ok := l.find(seq); ok && p.pinned != nil {
				found = p.pinned[i]
				return false
			}
		}
		return true
	})
	return found
}

// withdraw removes the in-memory copies of a publish the store refused,
// where they are still ready.
func withdraw(ps []placed) {
	for _, p := range ps {
		if p.e == nil {
			continue
		}
		q := p.q
		q.mu.Lock()
		if p.e.ready && p.e.paged {
			q.takePagedLocked(p.e)
			p.e.forwarded = true
		} else if p.e.ready {
			inReturns := p.e.inReturns
			q.takeReadyLocked(p.e)
			q.holeLocked(p.e, inReturns)
			p.e.forwarded = true
		}
		q.unlock()
	}
}

// ForwardDead enqueues cp, the dead-letter copy of d (which died in src),
// into targets as a dead-letter move: the copies appended to durable
// targets and the removal of d's stored copy from src are one atomic store
// batch. It returns each target's outcome (as Queue.Enqueue).
//
// For a retained (at-least-once) d, the move happens only when at least one
// target accepted the copy (moved is true); otherwise d stays retained for
// a later retry. ForwardDead of a retained d that is no longer retained
// (already moved, or dropped by a switch to at-most-once) enqueues nothing
// and returns moved=false.
func (src *Queue) ForwardDead(d *Dead, cp *Message, targets []*Queue) (outcomes []Outcome, moved bool) {
	var enc []byte
	if cp.Header.Durable && src.b.st != nil && slices.ContainsFunc(targets, func(q *Queue) bool { return q.persist }) {
		enc = src.b.encode(cp)
	}
	lockSet := targets
	if d.e != nil {
		lockSet = append(slices.Clone(targets), src)
	}
	ls := lockQueues(lockSet)
	e := d.e
	if e != nil && d.Retained && !e.retained {
		unlockQueues(ls)
		return nil, false
	}
	var recs []store.Record
	outcomes = make([]Outcome, len(targets))
	accepted := false
	for i, q := range targets {
		switch q.enqueueLocked(cp, enc, &recs) {
		case enqueued:
			outcomes[i] = Outcome{Kind: Accepted}
			accepted = true
		case enqueueRejected:
			outcomes[i] = Outcome{Kind: Rejected, Error: maxLenError(q.name)}
		default:
			outcomes[i] = Outcome{Kind: Released}
		}
	}
	batch := new(store.Batch).Append(recs...)
	moved = accepted || !d.Retained
	if e != nil && moved {
		if d.Retained {
			src.unretainLocked(e)
		}
		if e.stored && !e.forwarded {
			e.forwarded = true
			batch.Settle(src.id, e.seq)
		}
	}
	if batch.Len() > 0 {
		src.b.st.Commit(batch, appendDone(ls, recs, src.b.logStoreErr))
	}
	unlockQueues(ls)
	return outcomes, moved
}

// ---- at-least-once retries ----

// armRetry starts the retry timer if it is not running.
func (b *Broker) armRetry() {
	if b.closed.Load() {
		return
	}
	b.retryMu.Lock()
	defer b.retryMu.Unlock()
	if b.retryTimer == nil {
		b.retryTimer = time.AfterFunc(b.retryEvery, b.retryTick)
	}
}

func (b *Broker) retryTick() {
	b.RetryDeadLetters()
	b.retryMu.Lock()
	defer b.retryMu.Unlock()
	if b.closed.Load() || b.retained.Load() == 0 {
		b.retryTimer = nil
		return
	}
	b.retryTimer.Reset(b.retryEvery)
}

// RetryDeadLetters hands every retained dead message to the DeadLetterer
// again (the periodic retry does this; tests may call it).
func (b *Broker) RetryDeadLetters() {
	for _, n := range b.VHosts() {
		if v, ok := b.VHost(n); ok {
			v.retryDeadLetters()
		}
	}
}

func (v *VHost) retryDeadLetters() {
	for _, q := range v.Queues() {
		q.mu.Lock()
		has := len(q.retained) > 0
		q.mu.Unlock()
		if has {
			q.retryRetained()
		}
	}
}

// ---- errors ----

// ErrRecovered is returned by a second Recover.
var ErrRecovered = errors.New("router: already recovered")
