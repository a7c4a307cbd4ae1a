// Package store is the durable message store of durable queues and the
// broker's metadata (topology, policies, users, permissions).
//
// The router talks to it through the narrow Store interface. Every mutation is
// asynchronous: the caller hands over a Batch (or uses one of the single-op
// helpers) together with a done callback, and done is called exactly once,
// after the batch is durable (nil) or has definitely failed (non-nil). The
// connection loop therefore never blocks on fsync: it sends `accepted` from
// the callback.
//
// Two implementations exist: NewMemory (no durability, done is called at once;
// for --in-memory and tests) and OpenPebble (a Pebble LSM with a single
// committer goroutine doing group commit: concurrent batches share one synced
// WAL write; there is no timer, and NoSync is never used).
//
// Ordering: batches are applied in the order they were submitted (the order in
// which Commit/Append/... returned), across all goroutines. A Settle submitted
// after an Append of the same message is therefore always applied after it,
// even if it is submitted before the Append's done has run.
//
// Sequence numbers are per queue, chosen by the caller, and never reused within
// a queue (a requeue keeps the message's seq and rewrites its state with
// Update; a dead-letter move gives the message a new seq in the target queue).
package store

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/epitaph-mq/epitaph/router/store/storeerr"
)

// QueueID names a queue inside the store. The router maps (vhost, name) to an
// ID and keeps that mapping in the metadata, so a re-declared queue with the
// same name gets a fresh ID and never sees a deleted queue's messages.
type QueueID uint64

// Record is one message stored in a queue.
type Record struct {
	Queue QueueID
	Seq   uint64
	// Msg is the immutable message (the encoded bare message plus its
	// immutable annotations). Pebble copies it; Memory keeps the slice, so the
	// caller must not modify it after handing it over.
	Msg []byte
	// State is the mutable part (delivery-count, acquired-count, mutable
	// annotations such as x-opt-deaths), opaque to the store. Nil means none.
	State []byte
}

// Store keeps durable queues' messages and the broker's metadata.
//
// All mutating methods are asynchronous and call done exactly once, from a
// goroutine owned by the store (never from inside the mutating call for
// Pebble; Memory calls it synchronously). done must not block for long: it
// runs on the committer goroutine and delays other callbacks. It may submit
// further batches.
//
// After an error, the batch did not take effect, with one exception: batches
// made only of deletions and state updates (Settle, Update, DeleteQueue,
// DeleteMeta with no Append/PutMeta in the same batch) are completed during
// the store's recovery from the failure (the consumer really did settle).
// See Pebble for the failure protocol.
type Store interface {
	// Commit applies every operation of b atomically and durably, then calls done.
	// The Batch must not be modified or reused after Commit.
	Commit(b *Batch, done func(error))

	// Append adds messages to queues atomically and durably.
	Append(recs []Record, done func(error))
	// Settle removes messages (accepted, dropped), durably.
	Settle(queue QueueID, seqs []uint64, done func(error))
	// Move atomically removes seqs from one queue and appends recs (to other
	// queues): a dead-letter move as one durable step.
	Move(from QueueID, seqs []uint64, to []Record, done func(error))
	// Update rewrites a message's mutable state (e.g. on requeue).
	Update(queue QueueID, seq uint64, state []byte, done func(error))
	// DeleteQueue removes every message of a queue (a range delete).
	DeleteQueue(queue QueueID, done func(error))
	// PutMeta and DeleteMeta maintain opaque keyed metadata blobs.
	PutMeta(key string, value []byte, done func(error))
	DeleteMeta(key string, done func(error))

	// Iterate visits a queue's messages in seq order (recovery). msg and state
	// are only valid during the call; state is nil if the message has none.
	// It sees every batch whose done has been called.
	Iterate(queue QueueID, fn func(seq uint64, msg, state []byte) error) error
	// IterateRange is Iterate over the seqs in [from, to) only: a paged
	// queue reads the bodies of its next messages back with it, in one
	// sequential pass.
	IterateRange(queue QueueID, from, to uint64, fn func(seq uint64, msg, state []byte) error) error
	// SeqSpan returns the lowest and highest seq stored for queue (0, 0
	// when it holds nothing) without reading its messages: recovery sizes
	// a queue and sets its seq counter with it.
	SeqSpan(queue QueueID) (first, last uint64, err error)
	// Queues visits the IDs of all queues that hold at least one message, in
	// order (to find orphaned queues at recovery).
	Queues(fn func(QueueID) error) error
	// Meta visits all metadata in key order.
	Meta(fn func(key string, value []byte) error) error

	// Close waits for pending batches to be committed (their done is called),
	// then releases everything. Batches submitted after Close fail with ErrClosed.
	Close() error
}

var (
	// ErrClosed is passed to done for batches submitted after Close.
	ErrClosed = errors.New("store: closed")
	// ErrNotDurable wraps every commit failure: the batch was not made durable.
	ErrNotDurable = errors.New("store: not durable")
	// ErrDiskFull also wraps commit failures caused by a full disk (ENOSPC),
	// whether the write itself failed or it waited behind flushes that
	// could not write their tables.
	ErrDiskFull = storeerr.ErrDiskFull
)

type opKind uint8

const (
	opAppend opKind = iota + 1
	opSettle
	opUpdate
	opDeleteQueue
	opPutMeta
	opDeleteMeta
)

type op struct {
	kind  opKind
	queue QueueID
	seqs  []uint64 // opSettle
	owned bool     // opSettle: seqs is the batch's own (may be appended to)
	recs  []Record // opAppend
	seq   uint64   // opUpdate
	key   string   // meta
	value []byte   // opPutMeta; opUpdate state
}

// Batch collects operations that must be applied atomically (for instance a
// queue delete together with its metadata, or a dead-letter move). Build it,
// then pass it to Store.Commit.
type Batch struct {
	ops   []op
	bytes int
}

// Append adds records.
func (b *Batch) Append(recs ...Record) *Batch {
	if len(recs) == 0 {
		return b
	}
	for _, r := range recs {
		b.bytes += len(r.Msg) + len(r.State) + 2*keyLen
	}
	b.ops = append(b.ops, op{kind: opAppend, recs: recs})
	return b
}

// Settle removes messages from a queue.
func (b *Batch) Settle(queue QueueID, seqs ...uint64) *Batch {
	if len(seqs) == 0 {
		return b
	}
	b.bytes += len(seqs) * keyLen
	if n := len(b.ops); n > 0 && b.ops[n-1].kind == opSettle && b.ops[n-1].queue == queue {
		// Settles of one queue in a row become one operation, so that the
		// store sees their runs of consecutive seqs (a purge, a consumer's
		// ranged disposition) and deletes each with one range delete.
		o := &b.ops[n-1]
		if !o.owned {
			o.seqs, o.owned = slices.Clone(o.seqs), true
		}
		o.seqs = append(o.seqs, seqs...)
		return b
	}
	b.ops = append(b.ops, op{kind: opSettle, queue: queue, seqs: seqs})
	return b
}

// Update rewrites a message's mutable state (nil removes it).
func (b *Batch) Update(queue QueueID, seq uint64, state []byte) *Batch {
	b.bytes += len(state) + keyLen
	b.ops = append(b.ops, op{kind: opUpdate, queue: queue, seq: seq, value: state})
	return b
}

// DeleteQueue removes all messages of a queue.
func (b *Batch) DeleteQueue(queue QueueID) *Batch {
	b.bytes += 2 * keyLen
	b.ops = append(b.ops, op{kind: opDeleteQueue, queue: queue})
	return b
}

// PutMeta sets a metadata blob.
func (b *Batch) PutMeta(key string, value []byte) *Batch {
	b.bytes += len(key) + len(value) + 1
	b.ops = append(b.ops, op{kind: opPutMeta, key: key, value: value})
	return b
}

// DeleteMeta removes a metadata blob.
func (b *Batch) DeleteMeta(key string) *Batch {
	b.bytes += len(key) + 1
	b.ops = append(b.ops, op{kind: opDeleteMeta, key: key})
	return b
}

// Len is the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// rollForward reports whether a failed batch is completed (rather than undone)
// when the store recovers: batches that only delete or rewrite state.
func (b *Batch) rollForward() bool {
	for _, o := range b.ops {
		if o.kind == opAppend || o.kind == opPutMeta {
			return false
		}
	}
	return true
}

// Key layout (all integers big-endian, so byte order is numeric order):
//
//	'q' queueID(8) seq(8) kind(1)   kind 0 = state, 1 = message, 2 = reference
//	'm' key                          metadata
//
// A message is either its encoded body (kind 1) or, with queue logs, a
// reference to its body in its queue's log (kind 2, bodies.go). The state
// key sorts just before its message key, so Iterate reads the (small)
// state first and hands the message value to fn without copying it.
const (
	prefixQueue = 'q'
	prefixMeta  = 'm'
	kindState   = 0
	kindMsg     = 1
	kindRef     = 2 // the message's body is in its queue's log (bodies.go)
	keyLen      = 18
)

func queueKey(q QueueID, seq uint64, kind byte) []byte {
	k := make([]byte, keyLen)
	k[0] = prefixQueue
	binary.BigEndian.PutUint64(k[1:9], uint64(q))
	binary.BigEndian.PutUint64(k[9:17], seq)
	k[17] = kind
	return k
}

// seqBound is the first key of seq in q (inclusive lower bound / exclusive
// upper bound for ranges of seqs).
func seqBound(q QueueID, seq uint64) []byte {
	k := make([]byte, 17)
	k[0] = prefixQueue
	binary.BigEndian.PutUint64(k[1:9], uint64(q))
	binary.BigEndian.PutUint64(k[9:17], seq)
	return k
}

// queueBounds returns [lower, upper) covering every key of q.
func queueBounds(q QueueID) (lower, upper []byte) {
	lower = make([]byte, 9)
	lower[0] = prefixQueue
	binary.BigEndian.PutUint64(lower[1:9], uint64(q))
	upper = make([]byte, 9)
	if q == ^QueueID(0) {
		upper[0] = prefixQueue + 1
	} else {
		upper[0] = prefixQueue
		binary.BigEndian.PutUint64(upper[1:9], uint64(q)+1)
	}
	return lower, upper
}

func parseQueueKey(k []byte) (q QueueID, seq uint64, kind byte, ok bool) {
	if len(k) != keyLen || k[0] != prefixQueue {
		return 0, 0, 0, false
	}
	return QueueID(binary.BigEndian.Uint64(k[1:9])), binary.BigEndian.Uint64(k[9:17]), k[17], true
}

func metaKey(key string) []byte {
	k := make([]byte, 1+len(key))
	k[0] = prefixMeta
	copy(k[1:], key)
	return k
}
