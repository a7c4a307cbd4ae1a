package store

import (
	"slices"
	"sync"
)

// Memory is a Store without durability: it keeps everything in maps and calls
// done synchronously, before Commit returns. It retains the caller's slices.
type Memory struct {
	mu     sync.Mutex
	queues map[QueueID]map[uint64]memEntry
	meta   map[string][]byte
	closed bool
}

type memEntry struct{ msg, state []byte }

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{queues: map[QueueID]map[uint64]memEntry{}, meta: map[string][]byte{}}
}

// Commit applies b and calls done(nil) at once.
func (m *Memory) Commit(b *Batch, done func(error)) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		done(ErrClosed)
		return
	}
	for _, o := range b.ops {
		switch o.kind {
		case opAppend:
			for _, r := range o.recs {
				q := m.queues[r.Queue]
				if q == nil {
					q = map[uint64]memEntry{}
					m.queues[r.Queue] = q
				}
				q[r.Seq] = memEntry{msg: r.Msg, state: r.State}
			}
		case opSettle:
			q := m.queues[o.queue]
			for _, s := range o.seqs {
				delete(q, s)
			}
			if q != nil && len(q) == 0 {
				delete(m.queues, o.queue)
			}
		case opUpdate:
			if e, ok := m.queues[o.queue][o.seq]; ok {
				e.state = o.value
				m.queues[o.queue][o.seq] = e
			}
		case opDeleteQueue:
			delete(m.queues, o.queue)
		case opPutMeta:
			m.meta[o.key] = o.value
		case opDeleteMeta:
			delete(m.meta, o.key)
		}
	}
	m.mu.Unlock()
	done(nil)
}

func (m *Memory) Append(recs []Record, done func(error)) { m.Commit(new(Batch).Append(recs...), done) }
func (m *Memory) Settle(q QueueID, seqs []uint64, done func(error)) {
	m.Commit(new(Batch).Settle(q, seqs...), done)
}
func (m *Memory) Move(from QueueID, seqs []uint64, to []Record, done func(error)) {
	m.Commit(new(Batch).Settle(from, seqs...).Append(to...), done)
}
func (m *Memory) Update(q QueueID, seq uint64, state []byte, done func(error)) {
	m.Commit(new(Batch).Update(q, seq, state), done)
}
func (m *Memory) DeleteQueue(q QueueID, done func(error)) { m.Commit(new(Batch).DeleteQueue(q), done) }
func (m *Memory) PutMeta(key string, value []byte, done func(error)) {
	m.Commit(new(Batch).PutMeta(key, value), done)
}
func (m *Memory) DeleteMeta(key string, done func(error)) { m.Commit(new(Batch).DeleteMeta(key), done) }

// Iterate visits q's messages in seq order (on a snapshot taken at the call).
func (m *Memory) Iterate(queue QueueID, fn func(seq uint64, msg, state []byte) error) error {
	return m.IterateRange(queue, 0, ^uint64(0), fn)
}

// IterateRange implements Store.
func (m *Memory) IterateRange(queue QueueID, from, to uint64, fn func(seq uint64, msg, state []byte) error) error {
	m.mu.Lock()
	q := m.queues[queue]
	seqs := make([]uint64, 0, min(len(q), 1024))
	entries := make(map[uint64]memEntry, min(len(q), 1024))
	for s, e := range q {
		if s < from || s >= to {
			continue
		}
		seqs = append(seqs, s)
		entries[s] = e
	}
	m.mu.Unlock()
	slices.Sort(seqs)
	for _, s := range seqs {
		e := entries[s]
		if err := fn(s, e.msg, e.state); err != nil {
			return err
		}
	}
	return nil
}

// SeqSpan implements Store.
func (m *Memory) SeqSpan(queue QueueID) (first, last uint64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.queues[queue] {
		if first == 0 || s < first {
			first = s
		}
		last = max(last, s)
	}
	return first, last, nil
}

// Queues visits the IDs of non-empty queues in order.
func (m *Memory) Queues(fn func(QueueID) error) error {
	m.mu.Lock()
	ids := make([]QueueID, 0, len(m.queues))
	for id, q := range m.queues {
		if len(q) > 0 {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

// Meta visits metadata in key order.
func (m *Memory) Meta(fn func(key string, value []byte) error) error {
	m.mu.Lock()
	keys := make([]string, 0, len(m.meta))
	vals := make(map[string][]byte, len(m.meta))
	for k, v := range m.meta {
		keys = append(keys, k)
		vals[k] = v
	}
	m.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn(k, vals[k]); err != nil {
			return err
		}
	}
	return nil
}

// Close makes later batches fail with ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}
