package segment

import "sort"

// span is the half-open index range [from, to).
type span struct{ from, to uint64 }

// spans is a sorted set of disjoint, non-adjacent ranges: the entries
// settled out of order above the head. Adjacent settled entries merge into
// one span, and two spans are always separated by at least one held entry,
// so its length is bounded by the entries held, not by those passed.
type spans []span

// search returns the first span whose to > i.
func (s spans) search(i uint64) int {
	return sort.Search(len(s), func(k int) bool { return s[k].to > i })
}

func (s spans) contains(i uint64) bool {
	k := s.search(i)
	return k < len(s) && s[k].from <= i
}

// covered counts the indices of [from, to) that s holds.
func (s spans) covered(from, to uint64) uint64 {
	var n uint64
	for k := s.search(from); k < len(s) && s[k].from < to; k++ {
		n += min(s[k].to, to) - max(s[k].from, from)
	}
	return n
}

// add inserts [from, to), merging with neighbours.
func (s *spans) add(from, to uint64) {
	if from >= to {
		return
	}
	v := *s
	// first span that touches or follows from: to >= from
	lo := sort.Search(len(v), func(k int) bool { return v[k].to >= from })
	hi := lo
	for hi < len(v) && v[hi].from <= to {
		from, to = min(from, v[hi].from), max(to, v[hi].to)
		hi++
	}
	if lo == hi {
		v = append(v, span{})
		copy(v[lo+1:], v[lo:])
		v[lo] = span{from, to}
	} else {
		v[lo] = span{from, to}
		v = append(v[:lo+1], v[hi:]...)
	}
	*s = v
}

// dropBelow removes every index < i.
func (s *spans) dropBelow(i uint64) {
	v := *s
	k := v.search(i)
	if k < len(v) && v[k].from < i {
		v[k].from = i
	}
	*s = append(v[:0], v[k:]...)
}

// dropFrom removes every index >= i.
func (s *spans) dropFrom(i uint64) {
	v := *s
	k := v.search(i)
	if k < len(v) && v[k].from < i {
		v[k].to = i
		k++
	}
	*s = v[:k]
}
