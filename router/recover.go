package router

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/router/store"
)

// Recover rebuilds the broker from its store: vhosts, exchanges, policies,
// queues (with their QueueIDs) and bindings, then every
// durable queue's messages in seq order. Call it once, after New (and after
// the DeadLetterer is set), before serving. Without a store it does nothing.
//
// Messages whose stored state says they were delivered and not settled
// (unsettled when the previous run ended) come back ready with
// delivery-count and acquired-count incremented, as when a connection is
// lost (a quorum queue dead-letters those now over its delivery limit).
// Retained at-least-once messages come back retained and are retried at
// once. Messages of queues that no longer exist in the metadata (orphans of
// an interrupted delete) are deleted. A message or metadata entry that
// cannot be decoded fails Recover: nothing is served silently.
func (b *Broker) Recover() error {
	if b.st == nil {
		return nil
	}
	b.loading.Store(true)
	err := b.recover()
	b.loading.Store(false)
	if err != nil {
		return err
	}
	if b.retained.Load() > 0 {
		b.RetryDeadLetters()
		b.armRetry()
	}
	return nil
}

type metaKV struct {
	key   string
	value []byte
}

func splitKey(key, prefix string) (string, string, bool) {
	rest := strings.TrimPrefix(key, prefix)
	i := strings.IndexByte(rest, 0)
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

func (b *Broker) recover() error {
	var all []metaKV
	if err := b.st.Meta(func(k string, v []byte) error {
		all = append(all, metaKV{k, append([]byte(nil), v...)})
		return nil
	}); err != nil {
		return fmt.Errorf("router: reading metadata: %w", err)
	}
	by := map[string][]metaKV{}
	seqRes := map[store.QueueID]uint64{}
	for _, kv := range all {
		switch {
		case kv.key == metaQueueID:
			if len(kv.value) == 8 {
				b.qidRes = binary.BigEndian.Uint64(kv.value)
				b.nextQID.Store(max(b.nextQID.Load(), b.qidRes))
			}
		case strings.HasPrefix(kv.key, metaSeq):
			var id uint64
			if _, err := fmt.Sscanf(kv.key[len(metaSeq):], "%x", &id); err == nil && len(kv.value) == 8 {
				seqRes[store.QueueID(id)] = binary.BigEndian.Uint64(kv.value)
			}
		case len(kv.key) >= 2:
			by[kv.key[:2]] = append(by[kv.key[:2]], kv)
		}
	}
	for _, kv := range by[metaVHost] {
		b.AddVHost(kv.key[len(metaVHost):])
	}
	vhost := func(name string) (*VHost, error) {
		v, ok := b.VHost(name)
		if !ok {
			v = b.AddVHost(name)
		}
		return v, nil
	}
	for _, kv := range by[metaExchange] {
		vh, name, ok := splitKey(kv.key, metaExchange)
		l, err := decodeList(kv.value, 5)
		if !ok || err != nil {
			return fmt.Errorf("%w: router: bad exchange metadata %q: %v", store.ErrCorrupt, kv.key, err)
		}
		v, _ := vhost(vh)
		spec := ExchangeSpec{Name: name, Type: listStr(l[0]), Durable: listBool(l[1]), AutoDelete: listBool(l[2]),
			Internal: listBool(l[3]), Arguments: listMap(l[4])}
		if _, err := v.DeclareExchange(spec); err != nil {
			b.log.Error("recover: exchange not restored", "vhost", vh, "exchange", name, "err", err)
		}
	}
	for _, kv := range by[metaPolicy] {
		vh, name, ok := splitKey(kv.key, metaPolicy)
		l, err := decodeList(kv.value, 4)
		if !ok || err != nil {
			return fmt.Errorf("%w: router: bad policy metadata %q: %v", store.ErrCorrupt, kv.key, err)
		}
		v, _ := vhost(vh)
		p := Policy{Name: name, Pattern: listStr(l[0]), ApplyTo: listStr(l[1]), Priority: int(listInt(l[2])), Definition: listMap(l[3])}
		if err := v.putPolicy(p, true); err != nil {
			b.log.Error("recover: policy not restored", "vhost", vh, "policy", name, "err", err)
		}
	}
	var queues []*Queue
	known := map[store.QueueID]bool{}
	for _, kv := range by[metaQueue] {
		vh, name, ok := splitKey(kv.key, metaQueue)
		l, err := decodeList(kv.value, 6)
		if !ok || err != nil {
			return fmt.Errorf("%w: router: bad queue metadata %q: %v", store.ErrCorrupt, kv.key, err)
		}
		id := store.QueueID(listInt(l[0]))
		if id == 0 {
			return fmt.Errorf("router: bad queue metadata %q: no id", kv.key)
		}
		v, _ := vhost(vh)
		if uint64(id) > b.nextQID.Load() {
			b.nextQID.Store(uint64(id))
		}
		q, _, err := v.DeclareQueue(QueueSpec{Name: name, Type: QueueType(listStr(l[1])), Durable: listBool(l[2]),
			Exclusive: listBool(l[3]), AutoDelete: listBool(l[4]), Arguments: listMap(l[5]), recoverID: id})
		if err != nil {
			b.log.Error("recover: queue not restored (its messages are kept)", "vhost", vh, "queue", name, "err", err)
			known[id] = true
			continue
		}
		known[id] = true
		queues = append(queues, q)
	}
	for _, kv := range by[metaBinding] {
		vh, _, ok := splitKey(kv.key, metaBinding)
		bd, err := decodeBinding(kv.value)
		if !ok || err != nil {
			return fmt.Errorf("%w: router: bad binding metadata: %v", store.ErrCorrupt, err)
		}
		v, _ := vhost(vh)
		if err := v.Bind(bd); err != nil {
			b.log.Error("recover: binding not restored", "vhost", vh, "binding", bd.String(), "err", err)
		}
	}

	// Two phases: every queue is loaded (its seq counter set) before any
	// message that died while the broker was down (TTL passed, delivery
	// limit exceeded) is dead-lettered, so a copy never lands in a queue
	// whose stored messages are not loaded yet and overwrites them.
	var deep []*Queue
	for _, q := range queues {
		first, last, err := b.st.SeqSpan(q.id)
		if err != nil {
			return fmt.Errorf("router: %s: reading its stored seqs: %w", q, err)
		}
		if q.persist && b.windowBytes > 0 && last-first >= syncLoadMax {
			q.beginLoad(last, seqRes[q.id])
			deep = append(deep, q)
			continue
		}
		if err := q.load(seqRes[q.id]); err != nil {
			return err
		}
	}
	for _, q := range queues {
		q.mu.Lock()
		q.armTimerLocked(q.nowNano())
		q.unlock()
		q.flushDead()
	}
	var orphans []store.QueueID
	if err := b.st.Queues(func(id store.QueueID) error {
		if !known[id] {
			orphans = append(orphans, id)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("router: listing stored queues: %w", err)
	}
	if len(orphans) > 0 {
		mb := new(store.Batch)
		for _, id := range orphans {
			mb.DeleteQueue(id).DeleteMeta(seqKey(id))
		}
		b.log.Info("recover: deleting orphaned queue data", "queues", len(orphans))
		b.commitMeta(mb)()
	}
	if len(deep) > 0 {
		b.loaderWG.Add(1)
		go b.loadDeep(deep)
	}
	return nil
}

// syncLoadMax: a queue whose stored seqs span fewer than this is read back
// before Recover returns; a deeper one in the background, so that the
// broker serves (that queue too, from its first messages read back) while
// it is read.
var syncLoadMax uint64 = 1 << 16

// loadChunk is how many messages the loader reads back per queue lock.
const loadChunk = 1024

// beginLoad prepares q to be read back in the background: its seq counter
// starts above every stored seq, on a page boundary, so that messages
// enqueued meanwhile (kept in q.fresh) never share a page with recovered ones.
func (q *Queue) beginLoad(last, res uint64) {
	q.mu.Lock()
	q.loading, q.loadEnd = true, last
	q.seqRes = res
	top := max(last, res, q.seq)
	q.seq = top - top%pageSlots + pageSlots - 1
	q.durableSeq.Store(q.seq)
	q.mu.Unlock()
}

// loadDeep reads deep queues back, one after the other, a chunk at a time.
func (b *Broker) loadDeep(qs []*Queue) {
	defer b.loaderWG.Done()
	start := time.Now()
	for _, q := range qs {
		q.loadInBackground()
	}
	if b.closed.Load() {
		return
	}
	b.log.Info("recover: deep queues read back", "queues", len(qs), "took", time.Since(start))
	if b.retained.Load() > 0 {
		b.RetryDeadLetters()
		b.armRetry()
	}
}

var errChunkFull = errors.New("chunk full")

func (q *Queue) loadInBackground() {
	from := uint64(0)
	stepping := false // reading one seq at a time past a damaged region
	for {
		var chunk []*entry
		fed := 0
		var slots []slot   // plain ready messages: indexed, their bodies left in the store
		var levels []uint8 // with priority levels, each slot's level
		var decodeErr error
		to := q.loadEnd + 1
		if stepping {
			to = from + 1
		}
		at := from
		q.mu.Lock()
		feed, room := q.loaderFeedsWindowLocked()
		q.unlock()
		err := q.b.st.IterateRange(q.id, from, to, func(seq uint64, msg, state []byte) error {
			from = seq + 1
			var s slot
			var lvl uint8
			ok := false
			if feed {
				// Consumers wait: the message goes to them decoded, as a
				// refill would read it, rather than indexed and read again.
				room -= int64(len(msg))
				fed++
			} else {
				var f storedIndexFields
				s, f, ok = plainSlot(seq, msg, state)
				if ok && q.prio != nil {
					// Its level, from the stored header.
					lvl = q.priorityLevel(f.prio, f.prioSet)
				}
			}
			if ok {
				slots = append(slots, s)
				levels = append(levels, lvl)
			} else {
				e, err := recoveredEntry(seq, msg, state)
				if err != nil {
					decodeErr = fmt.Errorf("%s: %w", q, err)
					return nil // reported below; the others are still read back
				}
				// Whatever came before it is put in first: order holds.
				chunk = append(chunk, e)
				slots = append(slots, slot{seq: seq})
				levels = append(levels, 0)
			}
			if len(slots) >= loadChunk || (feed && room <= 0) {
				return errChunkFull
			}
			return nil
		})
		if decodeErr != nil {
			q.b.unreadable.Add(1)
			q.b.log.Error("recover: stored message unreadable", "err", decodeErr)
		}
		switch {
		case err == nil && stepping:
			stepping, from = false, max(from, at+1) // past the damage: whole chunks again
		case err != nil && !errors.Is(err, errChunkFull):
			if stepping {
				// This seq lies in the damaged region (or is a settled one
				// whose key would have been there): it cannot be read back.
				q.b.unreadable.Add(1)
				q.b.log.Error("recover: stored message unreadable", "queue", q.name, "vhost", q.vh.name, "seq", at, "err", err)
				from = at + 1
			}
			// Otherwise from is the first seq not read: step from there.
			stepping = true
		}
		done := (err == nil && !stepping && from > q.loadEnd) || (err == nil && to == q.loadEnd+1) ||
			from > q.loadEnd || q.b.closed.Load()
		q.mu.Lock()
		if q.deleted {
			q.loading = false
			q.unlock()
			return
		}
		q.loadFed += fed
		if len(slots) > 0 {
			q.rewindFilteredLocked(slots[0].seq)
		}
		for i, s := range slots {
			var e *entry
			if s.size == 0 { // a decoded entry, in order
				e, chunk = chunk[0], chunk[1:]
			}
			switch {
			case q.loadPurged && e != nil:
				q.settleStoredLocked(e)
			case q.loadPurged:
				q.pend.Settle(q.id, s.seq)
			case e != nil:
				q.recoverEntryLocked(e)
			default:
				q.readyCount++
				q.readyBytes += s.size - 1
				l := &q.level
				if q.prio != nil {
					l = q.levelFor(levels[i])
				}
				l.paged.pushSlot(s.seq, s.size-1, s.deadline)
			}
		}
		if done {
			q.b.log.Debug("recover: queue read back", "queue", q.name, "vhost", q.vh.name,
				"handed_to_consumers_while_read", q.loadFed)
			q.loading, q.loadPurged = false, false
			q.eachLevel(func(l *level) bool {
				if f := l.fresh.front(); f != nil {
					q.rewindFilteredLocked(f.seqAt(f.head))
				}
				l.paged.appendList(&l.fresh)
				return true
			})
		}
		q.pageOutLocked()
		q.dispatchLocked()
		q.armTimerLocked(q.nowNano())
		q.unlock()
		q.flushDead()
		if h := q.b.loadHook; h != nil {
			h(q, done)
		}
		if done {
			return
		}
	}
}

// loaderFeedsWindowLocked reports whether the background loader should
// hand its next messages to the window decoded, and how many bytes the
// window has room for: while consumers have credit for more than the
// window holds and nothing is paged ahead of the loader, a message indexed
// now would be read back from the store by the next refill at once, so
// each message would be read twice.
func (q *Queue) loaderFeedsWindowLocked() (bool, int64) {
	room := q.b.windowBytes - q.windowBytesLocked()
	if room < q.b.windowBytes/2 || q.creditLocked() == 0 {
		return false, 0
	}
	paged := false
	q.eachLevel(func(l *level) bool {
		paged = l.paged.n > 0
		return !paged
	})
	return !paged, room
}

// plainSlot indexes a stored message that comes back as a plain ready
// message (its state says neither delivered nor retained) without decoding
// it; its size is kept plus one, so that zero marks a decoded entry. It
// also returns the record's index fields (a priority queue's level).
func plainSlot(seq uint64, msg, state []byte) (slot, storedIndexFields, bool) {
	var e entry
	if err := decodeState(&e, state); err != nil || e.delivered || e.retained || e.ext != nil {
		return slot{}, storedIndexFields{}, false
	}
	f, err := storedIndex(msg)
	if err != nil {
		return slot{}, storedIndexFields{}, false // decoded (and reported) as an entry
	}
	return slot{seq: seq, size: f.size + 1, deadline: e.deadline}, f, true
}

// recoveredEntry decodes a stored message and its state.
func recoveredEntry(seq uint64, msg, state []byte) (*entry, error) {
	m, err := decodeMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: router: stored message %d: %w", store.ErrCorrupt, seq, err)
	}
	e := &entry{msg: m, seq: seq, dc: m.DeliveryCount, heapIdx: -1, stored: true}
	if err := decodeState(e, state); err != nil {
		return nil, fmt.Errorf("%w: router: stored state of message %d: %w", store.ErrCorrupt, seq, err)
	}
	return e, nil
}

// recoverEntryLocked puts a message read back into q: retained, dead (over
// its delivery limit after a crash took it from its consumer) or ready.
func (q *Queue) recoverEntryLocked(e *entry) {
	if q.prio != nil {
		e.prio = q.priorityOf(e.msg)
	}
	if e.retained {
		q.retained = append(q.retained, e)
		q.retainedBytes += e.size()
		q.b.retained.Add(1)
		return
	}
	if e.delivered {
		e.delivered = false
		e.dc++
		e.acquired++
		if q.overDeliveryLimit(e) {
			q.deadLocked(e, ReasonDeliveryLimit, nil)
			return
		}
		// The consumer went with the broker: a failed return, which the
		// delayed-retry configuration may delay.
		if at, ok := q.retryAtLocked(e, true, nil); ok {
			q.delayLocked(e, at)
			return
		}
		q.updateStoredLocked(e)
		e.statePinned = true
	}
	if e.isDelayed() {
		// Still waiting: back into the delayed set with its stored time
		// (a passed one is promoted by the timer armed after recovery).
		e.ext.delayed = false
		q.pushDelayedLocked(e, e.ext.readyAt)
		return
	}
	q.addReadyLocked(e)
}

// load reads q's stored messages back (Recover, first phase).
func (q *Queue) load(res uint64) error {
	q.mu.Lock()
	// Everything read back is durable: it may be paged out at once.
	q.durableSeq.Store(^uint64(0))
	var maxSeq uint64
	err := q.b.st.Iterate(q.id, func(seq uint64, msg, state []byte) error {
		e, err := recoveredEntry(seq, msg, state)
		if err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		maxSeq = max(maxSeq, seq)
		q.recoverEntryLocked(e)
		return nil
	})
	q.seq = max(q.seq, maxSeq, res)
	q.seqRes = res
	q.durableSeq.Store(q.seq)
	q.unlock() // timers are armed and dead messages flushed once every queue is loaded
	return err
}
