package seqwin

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// check compares w with the model m (Len, Get, the iteration's content) and
// checks the ring's invariants.
func check[K uint32 | uint64](t testing.TB, w *Window[K, int], m map[K]int) {
	t.Helper()
	if w.Len() != len(m) {
		t.Fatalf("Len %d, want %d", w.Len(), len(m))
	}
	for k, want := range m {
		if v, ok := w.Get(k); !ok || v != want {
			t.Fatalf("Get(%d) = %d, %v; want %d", k, v, ok, want)
		}
	}
	got := make(map[K]int, len(m))
	var first []K // the first w.n keys yielded: the ring's, ascending
	for k, v := range w.All() {
		if _, dup := got[k]; dup {
			t.Fatalf("All yields %d twice", k)
		}
		got[k] = v
		if len(first) < w.n {
			first = append(first, k)
		}
	}
	if !maps.Equal(got, m) {
		t.Fatalf("All yields %v, want %v", got, m)
	}
	var ring []K
	for i := range w.span {
		if w.at(i).ok {
			ring = append(ring, w.base+K(i))
		}
	}
	if len(ring) != w.n {
		t.Fatalf("%d live slots, n = %d", len(ring), w.n)
	}
	if !slices.Equal(first, ring) {
		t.Fatalf("All starts with %v, want the ring's keys %v", first, ring)
	}
	for k := range w.over {
		if s := w.ring(k); s != nil && s.ok {
			t.Fatalf("key %d both in the ring and in the overflow map", k)
		}
	}
	switch {
	case w.span > maxSpan || len(w.slots) > maxSpan:
		t.Fatalf("span %d, %d slots: over the bound %d", w.span, len(w.slots), maxSpan)
	case w.span == 0 && w.n != 0:
		t.Fatalf("empty span with %d values", w.n)
	case w.span > 0 && (!w.at(0).ok || !w.at(w.span-1).ok):
		t.Fatalf("span %d does not start and end with a live slot", w.span)
	}
	for i := w.span; i < len(w.slots); i++ {
		if *w.at(i) != (slot[int]{}) {
			t.Fatalf("slot %d past the span is not zero", i)
		}
	}
}

func TestWindow(t *testing.T) {
	type op struct {
		put, del bool // neither: Get
		k        uint64
		v        int // Put: the value; Get and Delete: the one expected, -1: none
	}
	put := func(k uint64, v int) op { return op{put: true, k: k, v: v} }
	del := func(k uint64, want int) op { return op{del: true, k: k, v: want} }
	get := func(k uint64, want int) op { return op{k: k, v: want} }
	// puts puts from..to in order, each key its own value; dels deletes them.
	puts := func(from, to uint64) (ops []op) {
		for k := from; k <= to; k++ {
			ops = append(ops, put(k, int(k)))
		}
		return ops
	}
	dels := func(from, to uint64) (ops []op) {
		for k := from; k <= to; k++ {
			ops = append(ops, del(k, int(k)))
		}
		return ops
	}
	keys := func(from, to uint64) (ks []uint64) {
		for k := from; k <= to; k++ {
			ks = append(ks, k)
		}
		return ks
	}
	for _, c := range []struct {
		name       string
		ops        []op
		ring, over []uint64 // the keys expected in each, ascending
	}{
		{"empty", nil, nil, nil},
		{"in order", puts(1, 5), keys(1, 5), nil},
		{"oldest deleted", slices.Concat(puts(1, 5), dels(1, 2)), keys(3, 5), nil},
		{"base skips deleted keys", slices.Concat(puts(1, 5), dels(2, 3), dels(1, 1), []op{get(4, 4)}), keys(4, 5), nil},
		{"newest deleted", slices.Concat(puts(1, 5), dels(4, 5), puts(6, 6)), []uint64{1, 2, 3, 6}, nil},
		{"all deleted", slices.Concat(puts(1, 3), dels(2, 2), dels(1, 1), dels(3, 3), []op{get(2, -1)}), nil, nil},
		{"restart after empty", slices.Concat(puts(1, 3), dels(1, 3), puts(100, 100)), keys(100, 100), nil},
		{"replace", []op{put(1, 1), put(2, 2), put(1, 10), get(1, 10)}, keys(1, 2), nil},
		{"delete absent", []op{put(1, 1), del(2, -1), del(0, -1), del(1, 1), del(1, -1)}, nil, nil},
		{"small gap", []op{put(1, 1), put(10, 10), get(5, -1), get(11, -1)}, []uint64{1, 10}, nil},
		{"largest gap", []op{put(1, 1), put(1+maxGap, 2)}, []uint64{1, 1 + maxGap}, nil},
		{"gap too large", []op{put(1, 1), put(2, 2), put(3+maxGap, 3), get(1, 1), put(4+maxGap, 4)},
			[]uint64{3 + maxGap, 4 + maxGap}, keys(1, 2)},
		{"behind base", []op{put(10, 10), put(5, 5), get(5, 5), put(5, 6), get(5, 6)}, keys(10, 10), keys(5, 5)},
		{"overflow deleted", []op{put(10, 10), put(5, 5), del(5, 5), get(5, -1)}, keys(10, 10), nil},
		{"hole filled", []op{put(1, 1), put(3, 3), put(2, 2)}, keys(1, 3), nil},
		{"behind base in order", slices.Concat([]op{put(10, 10)}, puts(1, 9)), keys(10, 10), keys(1, 9)},
		{"ring covers an overflow key", []op{put(10, 10), put(5, 5), del(10, 10), put(3, 3), put(5, 6), put(6, 6),
			get(5, 6), del(5, 6), get(5, -1)}, []uint64{3, 6}, nil},
		{"hole in overflow", slices.Concat(puts(1, 3), []op{put(1000, 1000), put(3000, 3000), put(1000, 7), get(1000, 7)}),
			keys(3000, 3000), []uint64{1, 2, 3, 1000}},
		{"span bound", slices.Concat(puts(1, maxSpan), dels(2, maxSpan-1), puts(maxSpan+1, maxSpan+1)),
			keys(maxSpan, maxSpan+1), keys(1, 1)},
		{"span bound evicts several",
			slices.Concat(puts(1, maxSpan), dels(3, 999), dels(1001, maxSpan-1), puts(maxSpan+1001, maxSpan+1001)),
			[]uint64{maxSpan, maxSpan + 1001}, []uint64{1, 2, 1000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w Window[uint64, int]
			m := map[uint64]int{}
			for i, o := range c.ops {
				var (
					v    int
					ok   bool
					what = "Get"
				)
				switch {
				case o.put:
					w.Put(o.k, o.v)
					m[o.k] = o.v
				case o.del:
					v, ok = w.Delete(o.k)
					delete(m, o.k)
					what = "Delete"
				default:
					v, ok = w.Get(o.k)
				}
				if !o.put && (ok != (o.v >= 0) || ok && v != o.v) {
					t.Fatalf("op %d: %s(%d) = %d, %v; want %d", i, what, o.k, v, ok, o.v)
				}
				if len(c.ops) < 100 {
					check(t, &w, m)
				}
			}
			check(t, &w, m)
			var ring, over []uint64
			for k := range w.All() {
				if r := w.ring(k); r != nil && r.ok {
					ring = append(ring, k)
				} else {
					over = append(over, k)
				}
			}
			slices.Sort(over)
			if !slices.Equal(ring, c.ring) || !slices.Equal(over, c.over) {
				t.Errorf("ring %v, overflow %v; want %v, %v", ring, over, c.ring, c.over)
			}
		})
	}
}

func TestWindowDeletedSlotIsZero(t *testing.T) {
	// A deleted value is not kept reachable.
	var w Window[uint64, *int]
	for k := range uint64(3) {
		w.Put(k, new(int))
	}
	w.Delete(1)
	w.Delete(2)
	w.DeleteFunc(func(uint64, *int) bool { return true })
	for i, s := range w.slots {
		if s.v != nil {
			t.Fatalf("slot %d still holds a deleted value", i)
		}
	}
}

func TestWindowWrap(t *testing.T) {
	var w Window[uint32, int]
	m := map[uint32]int{}
	start := uint32(math.MaxUint32 - 5)
	for i := range uint32(12) {
		w.Put(start+i, int(i))
		m[start+i] = int(i)
	}
	check(t, &w, m)
	if w.n != 12 || len(w.over) != 0 {
		t.Fatalf("ring holds %d, overflow %d: want all in the ring across the wrap", w.n, len(w.over))
	}
	var order []uint32
	for k := range w.All() {
		order = append(order, k)
	}
	want := []uint32{start, start + 1, start + 2, start + 3, start + 4, math.MaxUint32, 0, 1, 2, 3, 4, 5}
	if !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	// A key just behind base (in serial-number order) goes to the overflow.
	w.Put(start-1, -1)
	m[start-1] = -1
	check(t, &w, m)
	if len(w.over) != 1 {
		t.Fatalf("overflow %v, want the key behind base", w.over)
	}
	for i := range uint32(12) {
		w.Delete(start + i)
		delete(m, start+i)
		check(t, &w, m)
	}
}

func TestWindowDeleteFunc(t *testing.T) {
	var w Window[uint32, int]
	m := map[uint32]int{}
	for k := range uint32(40) {
		w.Put(k, int(k%3))
		m[k] = int(k % 3)
	}
	w.Put(5000, 0) // in the overflow map
	m[5000] = 0
	w.Put(5001, 1)
	m[5001] = 1
	odd := func(_ uint32, v int) bool { return v != 1 }
	w.DeleteFunc(odd)
	maps.DeleteFunc(m, odd)
	check(t, &w, m)
	w.DeleteFunc(func(uint32, int) bool { return true })
	check(t, &w, map[uint32]int{})
}

func TestWindowClear(t *testing.T) {
	var w Window[uint64, int]
	for k := range uint64(100) {
		w.Put(k, 1)
	}
	w.Put(1<<40, 1)
	w.Clear()
	check(t, &w, map[uint64]int{})
	w.Put(3, 3)
	check(t, &w, map[uint64]int{3: 3})
}

// TestWindowBounded: one key never deleted while newer ones keep coming and
// going must not grow the ring past maxSpan.
func TestWindowBounded(t *testing.T) {
	for _, start := range []uint32{0, math.MaxUint32 - 3*maxSpan} {
		var w Window[uint32, int]
		stuck := start
		w.Put(stuck, -1)
		const outstanding = 100
		for i := uint32(1); i < 20*maxSpan; i++ {
			w.Put(start+i, int(i))
			if i > outstanding {
				if _, ok := w.Delete(start + i - outstanding); !ok {
					t.Fatalf("key %d missing", start+i-outstanding)
				}
			}
			if len(w.slots) > maxSpan {
				t.Fatalf("after %d keys: %d slots", i, len(w.slots))
			}
		}
		if v, ok := w.Get(stuck); !ok || v != -1 {
			t.Fatalf("the stuck key: %d, %v", v, ok)
		}
		if w.Len() != outstanding+1 || len(w.over) != 1 {
			t.Fatalf("Len %d, overflow %d", w.Len(), len(w.over))
		}
		if w.span > outstanding {
			t.Errorf("span %d for %d outstanding keys in the ring", w.span, outstanding)
		}
	}
}

func TestWindowNoAllocs(t *testing.T) {
	var w Window[uint32, int]
	var next uint32
	for ; next < 500; next++ {
		w.Put(next, 1)
	}
	allocs := testing.AllocsPerRun(10000, func() {
		w.Put(next, 1)
		w.Get(next - 250)
		w.Delete(next - 500)
		next++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per put+get+delete, want 0", allocs)
	}
}

// model applies random operations to a Window and a map and checks that
// they agree. Keys are put mostly in order with some gaps and some out of
// order, and deleted mostly oldest first, some at random, some never.
type model[K uint32 | uint64] struct {
	t    testing.TB
	r    *rand.Rand
	w    Window[K, int]
	m    map[K]int
	next K   // the next key in order
	fifo []K // keys put in order, for deleting the oldest
	val  int
	// target is the number of keys the model grows or shrinks to.
	target int
}

func (md *model[K]) key() K {
	switch md.r.IntN(10) {
	case 0:
		return md.next + K(md.r.IntN(3000)) // ahead
	default:
		return md.next - 1 - K(md.r.IntN(6000)) // behind
	}
}

func (md *model[K]) put(k K) {
	md.val++
	md.w.Put(k, md.val)
	md.m[k] = md.val
}

func (md *model[K]) get(k K) {
	v, ok := md.w.Get(k)
	if want, wantOK := md.m[k]; v != want || ok != wantOK {
		md.t.Fatalf("Get(%d) = %d, %v; want %d, %v", k, v, ok, want, wantOK)
	}
}

func (md *model[K]) del(k K) {
	v, ok := md.w.Delete(k)
	if want, wantOK := md.m[k]; v != want || ok != wantOK {
		md.t.Fatalf("Delete(%d) = %d, %v; want %d, %v", k, v, ok, want, wantOK)
	}
	delete(md.m, k)
}

func (md *model[K]) step() {
	r := md.r
	if r.IntN(3000) == 0 {
		md.target = r.IntN(3000) // outstanding keys to aim for
	}
	switch p := r.IntN(1000); {
	case p < 5: // out of order, or a replacement
		md.put(md.next - 1 - K(r.IntN(6000)))
	case p < 6: // far ahead
		md.put(md.key())
	case p < 130:
		md.get(md.key())
	case p < 150: // at random
		if len(md.fifo) > 0 && r.IntN(2) == 0 {
			md.del(md.fifo[r.IntN(len(md.fifo))])
		} else {
			md.del(md.key())
		}
	case p < 152:
		mod := 2 + r.IntN(5)
		del := func(_ K, v int) bool { return v%mod == 0 }
		md.w.DeleteFunc(del)
		maps.DeleteFunc(md.m, del)
	case p == 152 && r.IntN(10) == 0:
		md.w.Clear()
		clear(md.m)
		md.fifo = md.fifo[:0]
	case len(md.m) < md.target || len(md.m) == md.target && r.IntN(2) == 0: // in order, sometimes after a gap
		switch q := r.IntN(1000); {
		case q < 50:
			md.next += K(r.IntN(50))
		case q < 52:
			md.next += K(r.IntN(5000))
		}
		k := md.next
		md.next++
		md.put(k)
		if r.IntN(200) != 0 { // else never deleted oldest first
			md.fifo = append(md.fifo, k)
		}
	default: // the oldest
		for len(md.fifo) > 0 {
			k := md.fifo[0]
			md.fifo = md.fifo[1:]
			if _, ok := md.m[k]; ok {
				md.del(k)
				break
			}
		}
	}
}

func runModel[K uint32 | uint64](t *testing.T, start K, seed uint64, steps int) {
	md := &model[K]{t: t, r: rand.New(rand.NewPCG(seed, 1)), m: map[K]int{}, next: start, target: 100}
	for i := range steps {
		md.step()
		if i%53 == 0 {
			check(t, &md.w, md.m)
		}
	}
	check(t, &md.w, md.m)
}

func TestWindowRandom(t *testing.T) {
	steps := 50000
	if testing.Short() {
		steps = 10000
	}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("uint32/", seed), func(t *testing.T) { runModel(t, uint32(1), seed, steps) })
		t.Run(fmt.Sprint("uint32-wrap/", seed), func(t *testing.T) {
			runModel(t, uint32(math.MaxUint32-20000), seed, steps)
		})
		t.Run(fmt.Sprint("uint64/", seed), func(t *testing.T) { runModel(t, uint64(1), seed, steps) })
		t.Run(fmt.Sprint("uint64-wrap/", seed), func(t *testing.T) {
			runModel(t, uint64(math.MaxUint64-20000), seed, steps)
		})
	}
}

// FuzzWindow applies the operations encoded in data (3 bytes each) to a
// Window and a map, with uint32 keys that wrap.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 3, 0, 2, 1, 1, 0, 2, 4, 0})
	f.Add([]byte{1, 0xff, 0xff, 0, 0, 0, 2, 0x10, 0, 5, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		md := &model[uint32]{t: t, m: map[uint32]int{}, next: math.MaxUint32 - 300}
		for ; len(data) >= 3; data = data[3:] {
			off := uint32(data[1])<<8 | uint32(data[2])
			switch data[0] % 6 {
			case 0:
				md.put(md.next)
				md.next++
			case 1: // a gap
				md.next += off
				md.put(md.next)
				md.next++
			case 2:
				md.put(md.next - off)
			case 3:
				md.del(md.next - off)
			case 4:
				md.get(md.next - off)
			case 5:
				del := func(k uint32, _ int) bool { return k%(1+off%8) == 0 }
				md.w.DeleteFunc(del)
				maps.DeleteFunc(md.m, del)
			}
			check(t, &md.w, md.m)
		}
	})
}

// benchValue has the size of a session's unsettled delivery.
type benchValue struct {
	tag  uint64
	_, _ *int
}

// BenchmarkWindow and BenchmarkMap: deliveries put in order and settled
// oldest first, with n outstanding. The map's settle is a lookup (for the
// value) and a delete, as its callers did.
func BenchmarkWindow(b *testing.B) {
	for _, n := range []uint32{100, 1000} {
		b.Run(fmt.Sprint("outstanding=", n), func(b *testing.B) {
			var w Window[uint32, benchValue]
			next := uint32(math.MaxUint32 - 5000)
			for ; w.Len() < int(n); next++ {
				w.Put(next, benchValue{tag: uint64(next)})
			}
			b.ReportAllocs()
			for b.Loop() {
				w.Put(next, benchValue{tag: uint64(next)})
				if v, ok := w.Delete(next - n); !ok || v.tag != uint64(next-n) {
					b.Fatal("lost", next-n)
				}
				next++
			}
		})
	}
}

func BenchmarkMap(b *testing.B) {
	for _, n := range []uint32{100, 1000} {
		b.Run(fmt.Sprint("outstanding=", n), func(b *testing.B) {
			m := map[uint32]benchValue{}
			next := uint32(math.MaxUint32 - 5000)
			for ; len(m) < int(n); next++ {
				m[next] = benchValue{tag: uint64(next)}
			}
			b.ReportAllocs()
			for b.Loop() {
				m[next] = benchValue{tag: uint64(next)}
				v, ok := m[next-n]
				if !ok || v.tag != uint64(next-n) {
					b.Fatal("lost", next-n)
				}
				delete(m, next-n)
				next++
			}
		})
	}
}
