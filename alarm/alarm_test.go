package alarm

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// start returns a started Monitor, stopped at the end of the test.
func start(t *testing.T, o Options) *Monitor {
	t.Helper()
	m := new(Monitor)
	m.Start(o)
	t.Cleanup(m.Stop)
	return m
}

func TestAlarms(t *testing.T) {
	var free, mem atomicU64
	free.set(100 << 20)
	mem.set(10 << 20)
	m := start(t, Options{
		DataDir:             "/data",
		DiskFreeLimit:       50 << 20,
		MemoryHighWatermark: 64 << 20,
		Interval:            time.Hour, // checked by hand below
		DiskFree:            func(dir string) (uint64, error) { require.Equal(t, "/data", dir); return free.get(), nil },
		MemoryUsed:          mem.get,
	})
	blocked, ch := m.PublishBlocked()
	require.False(t, blocked)
	free.set(10 << 20)
	a := m.Check()
	require.True(t, a.Disk)
	require.False(t, a.Memory)
	<-ch // closed on the change
	blocked, ch = m.PublishBlocked()
	require.True(t, blocked)
	mem.set(100 << 20)
	m.Check()
	<-ch
	require.True(t, m.State().Memory)
	free.set(100 << 20)
	m.Check()
	blocked, ch = m.PublishBlocked()
	require.True(t, blocked, "memory alarm still set")
	mem.set(1 << 20)
	m.Check()
	<-ch
	blocked, _ = m.PublishBlocked()
	require.False(t, blocked)
}

func TestAlarmTimerClearsByItself(t *testing.T) {
	var free atomicU64
	free.set(1)
	m := start(t, Options{
		DiskFreeLimit: 10,
		Interval:      time.Millisecond,
		DiskFree:      func(string) (uint64, error) { return free.get(), nil },
	})
	blocked, ch := m.PublishBlocked()
	require.True(t, blocked)
	free.set(100)
	<-ch
	blocked, _ = m.PublishBlocked()
	require.False(t, blocked)
}

// The bytes counted by Consumed trigger a check once they reach the step,
// without waiting for the timer; below the step nothing is read.
func TestConsumedChecksAtTheStep(t *testing.T) {
	var mem atomicU64
	var reads atomic.Int64
	mem.set(1 << 20)
	m := start(t, Options{
		MemoryHighWatermark: 64 << 20,
		Interval:            time.Hour,
		MemoryUsed:          func() uint64 { reads.Add(1); return mem.get() },
	})
	require.Equal(t, int64(1), reads.Load(), "Start checks once")
	mem.set(100 << 20)
	s := step(64<<20, 0)
	require.Equal(t, int64(1<<20), s, "a 64th of the watermark")
	m.Consumed(int(s) - 1)
	require.Equal(t, int64(1), reads.Load(), "below the step nothing is read")
	blocked, _ := m.PublishBlocked()
	require.False(t, blocked)
	m.Consumed(1)
	require.Equal(t, int64(2), reads.Load())
	blocked, _ = m.PublishBlocked()
	require.True(t, blocked)
}

// Without limits there is no timer and Consumed does nothing.
func TestNoLimitsNoChecks(t *testing.T) {
	var reads atomic.Int64
	m := start(t, Options{MemoryUsed: func() uint64 { reads.Add(1); return 1 << 40 }})
	m.Consumed(1 << 30)
	require.Zero(t, reads.Load())
	require.Equal(t, State{}, m.State())
	blocked, changed := m.PublishBlocked()
	require.False(t, blocked)
	require.NotNil(t, changed)
}

func TestStep(t *testing.T) {
	require.Equal(t, int64(16<<20), step(0, 0), "no limit: the largest step")
	require.Equal(t, int64(100<<20/32), step(0, 100<<20), "the 100 MiB disk default: a statfs per 3.1 MiB")
	require.Equal(t, int64(256<<10), step(1<<20, 0), "never below 256 KiB")
}

func TestConsumedAllocatesNothing(t *testing.T) {
	m := start(t, Options{MemoryHighWatermark: 1 << 40, Interval: time.Hour, MemoryUsed: func() uint64 { return 0 }})
	require.Zero(t, testing.AllocsPerRun(1000, func() { m.Consumed(100) }))
}

type atomicU64 struct{ v atomic.Uint64 }

func (a *atomicU64) set(n uint64) { a.v.Store(n) }
func (a *atomicU64) get() uint64  { return a.v.Load() }
