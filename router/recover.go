package router

import (
	"encoding/binary"
	"fmt"
	"strings"

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
	for _, q := range queues {
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
	return nil
}

// load reads q's stored messages back (Recover, first phase).
func (q *Queue) load(res uint64) error {
	q.mu.Lock()
	var maxSeq uint64
	err := q.b.st.Iterate(q.id, func(seq uint64, msg, state []byte) error {
		m, err := decodeMessage(msg)
		if err != nil {
			return fmt.Errorf("%w: router: %s: stored message %d: %w", store.ErrCorrupt, q, seq, err)
		}
		e := &entry{msg: m, seq: seq, dc: m.DeliveryCount, heapIdx: -1, stored: true}
		if err := decodeState(e, state); err != nil {
			return fmt.Errorf("%w: router: %s: stored state of message %d: %w", store.ErrCorrupt, q, seq, err)
		}
		maxSeq = max(maxSeq, seq)
		if e.retained {
			q.retained = append(q.retained, e)
			q.retainedBytes += e.size()
			q.b.retained.Add(1)
			return nil
		}
		if e.delivered {
			e.delivered = false
			e.dc++
			e.acquired++
			if q.overDeliveryLimit(e) {
				q.deadLocked(e, ReasonDeliveryLimit, nil)
				return nil
			}
			q.updateStoredLocked(e)
		}
		q.addReadyLocked(e)
		return nil
	})
	q.seq = max(q.seq, maxSeq, res)
	q.seqRes = res
	q.unlock() // timers are armed and dead messages flushed once every queue is loaded
	return err
}
