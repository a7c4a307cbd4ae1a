package store

import "math/bits"

// window tracks which seqs of one queue are live, so that settling the head of
// a FIFO queue becomes one range delete. Bit i of words is seq base+i. Every
// seq below head and at or above tail is absent. Owned by the committer.
type window struct {
	head, tail uint64
	base       uint64 // multiple of 64, <= head
	words      []uint64
	n          int // live count
}

func (w *window) has(s uint64) bool {
	if s < w.head || s >= w.tail {
		return false
	}
	i := s - w.base
	return w.words[i/64]&(1<<(i%64)) != 0
}

func (w *window) add(s uint64) {
	if w.has(s) {
		return
	}
	if w.n == 0 {
		w.base = s &^ 63
		w.head, w.tail = s, s+1
		w.words = w.words[:0]
	}
	if s < w.base {
		nb := s &^ 63
		grow := int((w.base - nb) / 64)
		nw := make([]uint64, grow+len(w.words))
		copy(nw[grow:], w.words)
		w.words, w.base = nw, nb
	}
	i := s - w.base
	for uint64(len(w.words)) <= i/64 {
		w.words = append(w.words, 0)
	}
	w.words[i/64] |= 1 << (i % 64)
	if s < w.head {
		w.head = s
	}
	if s >= w.tail {
		w.tail = s + 1
	}
	w.n++
}

// remove clears s; it reports whether s was live. head moves up to the next
// live seq (or tail) when s was the head.
func (w *window) remove(s uint64) bool {
	if !w.has(s) {
		return false
	}
	i := s - w.base
	w.words[i/64] &^= 1 << (i % 64)
	w.n--
	if w.n == 0 {
		w.head = w.tail
		w.base = w.tail &^ 63
		w.words = w.words[:0]
		return true
	}
	if s == w.head {
		w.advance()
	}
	return true
}

func (w *window) advance() {
	i := w.head - w.base
	wi := i / 64
	word := w.words[wi] &^ (1<<(i%64) - 1)
	for word == 0 {
		wi++
		word = w.words[wi] // n > 0 guarantees a set bit before the end
	}
	w.head = w.base + wi*64 + uint64(bits.TrailingZeros64(word))
	// Drop leading empty words; copy down when more than half is dead so the
	// slice does not keep growing on a FIFO queue.
	if drop := (w.head - w.base) / 64; drop > 0 {
		if drop*2 > uint64(len(w.words)) {
			n := copy(w.words, w.words[drop:])
			w.words = w.words[:n]
		} else {
			w.words = w.words[drop:]
		}
		w.base += drop * 64
	}
}
