// Package seqwin holds values keyed by sequence numbers that are issued in
// increasing order and mostly retired in order: a session's unsettled
// delivery-ids, a subscription's unsettled delivery tags.
//
// A Window keeps such keys in a ring of slots indexed by key - base, so the
// common operations (insert the next key, look one up, delete the oldest)
// cost an index computation instead of a hash-map operation. Keys that do
// not fit the ring go to an overflow map, so any key is accepted.
package seqwin

import "iter"

const (
	// maxGap is how far past the newest key in the ring a new key may lie
	// and still join it, padded with empty slots; a key further on starts
	// the ring afresh.
	maxGap = 1024
	// maxSpan bounds the ring: when a key would make it cover more slots,
	// the oldest values move to the overflow map.
	maxSpan = 4096
	// minSlots is the ring's first size.
	minSlots = 16
)

// Window is a set of values keyed by sequence number, for keys put in
// increasing order (with gaps allowed) and deleted mostly oldest first. Keys
// compare in serial-number arithmetic (RFC 1982): the key space wraps
// around.
//
// The ring covers the keys base .. base+span-1, the oldest live key to the
// newest; slots in between whose keys were deleted (or never put) are
// empty. A key behind base is held in the overflow map. A key more than
// 1024 past the newest starts the ring afresh: the ring's values move to the
// overflow map. A key that would make the ring cover more than 4096 keys
// moves the oldest values there until it fits, so the ring's memory stays
// bounded when an old key is never deleted. Each value moves at most once,
// and each key is in one place.
//
// In steady state (keys put in order, deleted mostly oldest first) no
// operation allocates: the ring grows by doubling and is reused, and the
// overflow map is made only when needed. The zero value is an empty Window.
// A Window is not safe for concurrent use.
type Window[K uint32 | uint64, V any] struct {
	slots []slot[V] // the ring; its length is zero or a power of two
	head  int       // the slot of base
	base  K         // the oldest key in the ring (live when span > 0)
	span  int       // keys covered, base to the newest (live); 0: empty ring
	n     int       // live slots
	over  map[K]V   // the keys outside the ring; nil until needed
}

// slot is one ring position; slots outside the span are zero.
type slot[V any] struct {
	v  V
	ok bool
}

// Len returns the number of values.
func (w *Window[K, V]) Len() int { return w.n + len(w.over) }

// at returns the slot of the key base+d, d < span.
func (w *Window[K, V]) at(d int) *slot[V] {
	return &w.slots[(w.head+d)&(len(w.slots)-1)]
}

// ring returns the slot of k when k is within the ring's span.
func (w *Window[K, V]) ring(k K) *slot[V] {
	if d := uint64(k - w.base); d < uint64(w.span) {
		return w.at(int(d))
	}
	return nil
}

// Get returns the value of k.
func (w *Window[K, V]) Get(k K) (V, bool) {
	if s := w.ring(k); s != nil && s.ok {
		return s.v, true
	}
	if len(w.over) > 0 {
		v, ok := w.over[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// Put sets the value of k, replacing any value it had.
func (w *Window[K, V]) Put(k K, v V) {
	s := w.ring(k)
	if s != nil && s.ok {
		s.v = v
		return
	}
	if len(w.over) > 0 {
		if _, ok := w.over[k]; ok {
			w.over[k] = v
			return
		}
	}
	if s == nil {
		s = w.extend(k)
		if s == nil {
			w.overflow(k, v)
			return
		}
	}
	s.v, s.ok = v, true
	w.n++
}

// extend makes the ring cover k, which lies outside it, and returns k's
// slot; nil means k belongs in the overflow map.
func (w *Window[K, V]) extend(k K) *slot[V] {
	if w.span > 0 {
		gap := k - (w.base + K(w.span-1)) // from the newest key
		switch {
		case gap > ^K(0)>>1:
			return nil // behind base
		case gap > maxGap:
			// Keys come in order: the next ones follow k, so the ring
			// starts afresh at k rather than sending them all to the map.
			for w.span > 0 {
				w.evictOldest()
			}
		default:
			for w.span > 0 && uint64(k-w.base) >= maxSpan {
				w.evictOldest()
			}
		}
	}
	if w.span == 0 {
		if len(w.slots) == 0 {
			w.slots = make([]slot[V], minSlots)
		}
		w.head, w.base, w.span = 0, k, 1
		return &w.slots[0]
	}
	span := int(k-w.base) + 1
	if span > len(w.slots) {
		w.grow(span)
	}
	w.span = span
	return w.at(span - 1)
}

// grow doubles the ring until it holds span slots, unwrapping it to start
// at slot 0.
func (w *Window[K, V]) grow(span int) {
	size := len(w.slots) * 2
	for size < span {
		size *= 2
	}
	slots := make([]slot[V], size)
	for i := range w.span {
		slots[i] = *w.at(i)
	}
	w.slots, w.head = slots, 0
}

// evictOldest moves the value of base to the overflow map.
func (w *Window[K, V]) evictOldest() {
	s := w.at(0)
	w.overflow(w.base, s.v)
	*s = slot[V]{}
	w.n--
	w.trim()
}

func (w *Window[K, V]) overflow(k K, v V) {
	if w.over == nil {
		w.over = make(map[K]V)
	}
	w.over[k] = v
}

// trim restores the ring's invariant after deletions: the span starts and
// ends with a live slot, or is 0 when none is left.
func (w *Window[K, V]) trim() {
	if w.n == 0 {
		w.head, w.span = 0, 0
		return
	}
	for !w.at(0).ok {
		w.head = (w.head + 1) & (len(w.slots) - 1)
		w.base++
		w.span--
	}
	for !w.at(w.span - 1).ok {
		w.span--
	}
}

// Delete removes k and returns the value it had.
func (w *Window[K, V]) Delete(k K) (V, bool) {
	if s := w.ring(k); s != nil && s.ok {
		v := s.v
		*s = slot[V]{}
		w.n--
		w.trim()
		return v, true
	}
	if len(w.over) > 0 {
		if v, ok := w.over[k]; ok {
			delete(w.over, k)
			return v, true
		}
	}
	var zero V
	return zero, false
}

// DeleteFunc removes every value for which del returns true.
func (w *Window[K, V]) DeleteFunc(del func(K, V) bool) {
	for i := range w.span {
		if s := w.at(i); s.ok && del(w.base+K(i), s.v) {
			*s = slot[V]{}
			w.n--
		}
	}
	if w.span > 0 {
		w.trim()
	}
	for k, v := range w.over {
		if del(k, v) {
			delete(w.over, k)
		}
	}
}

// Clear removes every value and lets go of the window's memory.
func (w *Window[K, V]) Clear() { *w = Window[K, V]{} }

// All returns the keys and values: the ring's in ascending key order
// (serial-number order), then the overflow map's in no particular order.
// Callers that need every key in order sort them. The window must not be
// changed during the iteration.
func (w *Window[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i := range w.span {
			if s := w.at(i); s.ok && !yield(w.base+K(i), s.v) {
				return
			}
		}
		for k, v := range w.over {
			if !yield(k, v) {
				return
			}
		}
	}
}
