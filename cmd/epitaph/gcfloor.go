package main

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// A heapFloor keeps the garbage collector's heap goal at or above a floor.
//
// With the default GOGC of 100 the runtime collects whenever the heap has
// grown by as much as is live. A broker under load with few messages queued
// has a small live heap (a few MiB of in-flight messages) and allocates
// hundreds of MiB a second (every inbound frame, every dead-letter copy), so
// it collected about a hundred times a second (384 collections in a 4 s
// dead-letter run), and collecting cost it 15-20% of its CPU per message.
// After each collection the floor raises GOGC just enough
// that the next goal is the floor, and puts it back to the base value once
// twice the live heap exceeds the floor: a broker holding a million messages
// collects exactly as it would with GOGC 100, and one holding few may let
// up to the floor of garbage build up between collections.
//
// It owns the process's GC percent while it runs; it is process-wide state,
// which is why it lives in the command and not in the embeddable package.
type heapFloor struct {
	floor uint64
	base  int // the GC percent to return to (the process's own, normally 100)
	log   *slog.Logger

	mu      sync.Mutex // orders cycle against stop
	stopped bool
	cur     int // the percent last set
	sample  []metrics.Sample
}

// gcSentinel is allocated and dropped once per collection: its cleanup runs
// after the collection that found it unreachable. It holds a pointer so that
// it is never a tiny allocation, whose cleanups may not run.
type gcSentinel struct{ _ *int }

// The runtime's heap goal is live + (live + stacks + globals) × GOGC/100,
// where stacks and globals are the bytes of them the last cycle scanned.
var gcMetrics = []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// startHeapFloor starts tuning after every collection and returns the
// function that stops it and restores the base percent. A floor of 0, or a
// GC percent already turned off (GOGC=off), leaves the runtime alone.
func startHeapFloor(floor uint64, log *slog.Logger) (stop func()) {
	if floor == 0 {
		return func() {}
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		log.Info("gc heap floor not applied: garbage collection is off (GOGC=off)")
		return func() {}
	}
	h := &heapFloor{floor: floor, base: base, cur: base, log: log,
		sample: make([]metrics.Sample, len(gcMetrics))}
	for i, name := range gcMetrics {
		h.sample[i].Name = name
	}
	h.arm()
	log.Debug("gc heap floor", "floor_bytes", floor, "base_gc_percent", base)
	return h.stop
}

func (h *heapFloor) arm() {
	runtime.AddCleanup(&gcSentinel{}, (*heapFloor).cycle, h)
}

// cycle runs once after each collection (on the runtime's cleanup
// goroutine): it sets the percent for the next one and re-arms.
func (h *heapFloor) cycle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	metrics.Read(h.sample)
	var v [3]uint64
	for i := range h.sample {
		if h.sample[i].Value.Kind() == metrics.KindUint64 {
			v[i] = h.sample[i].Value.Uint64()
		}
	}
	if p := gcPercentFor(v[0], v[1]+v[2], h.floor, h.base); p != h.cur {
		debug.SetGCPercent(p)
		h.cur = p
	}
	h.arm()
}

func (h *heapFloor) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped {
		h.stopped = true
		debug.SetGCPercent(h.base)
		h.cur = h.base
	}
}

// maxGCPercent bounds the percent for a nearly empty heap; the goal it
// gives is still the floor.
const maxGCPercent = 1 << 20

// runtimeHeapMinimum is the runtime's smallest heap goal at GOGC=100; it
// scales with GOGC (runtime/mgcpacer.go, defaultHeapMinimum).
const runtimeHeapMinimum = 4 << 20

// gcPercentFor is the GC percent that makes the next heap goal
// max(floor, the goal base gives): base when that goal reaches the floor,
// else the percent whose goal is the floor. live is the live heap, roots
// the stack and global bytes scanned; until the first collection has
// measured a live heap it is base.
//
// The runtime's goal for a percent p is the larger of live + (live+roots)
// × p/100 and its heap minimum, 4 MiB × p/100, so p is also capped where
// that minimum alone reaches the floor.
func gcPercentFor(live, roots, floor uint64, base int) int {
	scan := live + roots
	if live == 0 || base < 0 || live >= floor {
		return base
	}
	gap := floor - live
	if gap <= scan/100*uint64(base) {
		return base
	}
	p := uint64(maxGCPercent)
	if gap/scan < maxGCPercent/100 {
		p = gap/scan*100 + gap%scan*100/scan
	}
	if floor/runtimeHeapMinimum < maxGCPercent/100 {
		p = min(p, floor*100/runtimeHeapMinimum)
	}
	return max(int(p), base)
}
