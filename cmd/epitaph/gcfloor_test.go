package main

import (
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/config"
)

const mib = 1 << 20

// runtimeGoal is the runtime's heap goal for GC percent p (mgcpacer.go):
// live + (live+roots) × p/100, at least 4 MiB × p/100.
func runtimeGoal(live, roots uint64, p int) uint64 {
	return max(live+(live+roots)*uint64(p)/100, runtimeHeapMinimum*uint64(p)/100)
}

func TestGCPercentFor(t *testing.T) {
	for _, tc := range []struct {
		name               string
		live, roots, floor uint64
		base, want         int
	}{
		{"no collection yet", 0, 0, 32 * mib, 100, 100},
		{"tiny heap: the runtime's minimum reaches the floor", 2 * mib, 0, 32 * mib, 100, 800},
		{"small heap", 10 * mib, 0, 32 * mib, 100, 220},
		{"roots count", 2 * mib, 2 * mib, 64 * mib, 100, 1550},
		{"twice live reaches the floor", 20 * mib, 0, 32 * mib, 100, 100},
		{"live above the floor", 40 * mib, 0, 32 * mib, 100, 100},
		{"a lower base is raised only to the floor", 20 * mib, 0, 32 * mib, 50, 60},
		{"GC off stays off", 2 * mib, 0, 32 * mib, -1, -1},
		{"huge floor is capped", 1, 0, 1 << 60, 100, maxGCPercent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, gcPercentFor(tc.live, tc.roots, tc.floor, tc.base))
		})
	}
}

// For any heap the percent chosen gives the runtime a goal of the floor
// (within rounding) when the base percent's goal is below it, and is the
// base otherwise.
func TestGCPercentForReachesTheFloor(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		floor := uint64(1+r.IntN(512)) * mib
		live := 1 + r.Uint64N(2*floor)
		roots := r.Uint64N(live/2 + 1)
		base := []int{50, 100, 200}[r.IntN(3)]
		p := gcPercentFor(live, roots, floor, base)
		if runtimeGoal(live, roots, base) >= floor {
			require.Equal(t, base, p, "live %d roots %d floor %d base %d", live, roots, floor, base)
			continue
		}
		goal := runtimeGoal(live, roots, p)
		require.LessOrEqual(t, goal, floor+floor/100, "live %d roots %d floor %d base %d: p %d", live, roots, floor, base, p)
		require.GreaterOrEqual(t, goal, floor-floor/100-(live+roots)/100, "live %d roots %d floor %d base %d: p %d", live, roots, floor, base, p)
	}
}

func gcPercentNow(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	require.Equal(t, metrics.KindUint64, s[0].Value.Kind())
	return int(s[0].Value.Uint64())
}

// The floor raises GOGC after a collection while this test binary's heap
// is far below it, and stop puts the process's own percent back for good.
func TestHeapFloorTunesAfterCollections(t *testing.T) {
	base := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(base) })

	stop := startHeapFloor(256*mib, slog.New(slog.DiscardHandler))
	deadline := time.Now().Add(10 * time.Second)
	for gcPercentNow(t) == 100 {
		require.True(t, time.Now().Before(deadline), "GOGC never raised after collections")
		runtime.GC()
		runtime.Gosched()
	}
	require.Greater(t, gcPercentNow(t), 100)

	stop()
	require.Equal(t, 100, gcPercentNow(t))
	for range 5 {
		runtime.GC()
	}
	// Cleanups run on their own goroutine: give a late one every chance
	// to (wrongly) raise the percent again.
	for range 100 {
		runtime.Gosched()
	}
	require.Equal(t, 100, gcPercentNow(t), "a stopped floor changed GOGC")
	stop() // idempotent
}

func TestHeapFloorLeavesGCOffAlone(t *testing.T) {
	base := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(base) })
	stop := startHeapFloor(256*mib, slog.New(slog.DiscardHandler))
	defer stop()
	runtime.GC()
	require.Equal(t, -1, debug.SetGCPercent(-1))
}

func TestHeapFloorBytes(t *testing.T) {
	cfg := config.Default()
	require.Equal(t, cfg.GCHeapFloor, heapFloorBytes(&cfg))
	cfg.MemoryHighWatermark = 40 * mib
	require.Equal(t, uint64(20*mib), heapFloorBytes(&cfg), "capped at half the memory watermark")
	cfg.MemoryHighWatermark = 1 << 40
	require.Equal(t, cfg.GCHeapFloor, heapFloorBytes(&cfg))
	cfg.GCHeapFloor = 0
	require.Equal(t, uint64(0), heapFloorBytes(&cfg))
}
