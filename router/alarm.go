package router

import (
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Resource alarms (RabbitMQ's disk and memory alarms): while free disk space
// of Options.DataDir is below Options.DiskFreeLimit, or the process's memory
// is above Options.MemoryHighWatermark, publishers are blocked: the link
// layer stops granting them credit (session incoming-window 0) while
// consumers keep draining. The alarm clears by itself on the first check
// after the condition goes away. Both are checked every
// Options.AlarmInterval on a timer (no goroutine when neither is set), and
// also where memory and disk are consumed: every publish adds its bytes to
// a counter, and the publish that takes it past alarmStep checks at once,
// on its own goroutine. A fast publisher can otherwise fill memory or a
// small disk many times over between two ticks; the step keeps the check
// to one runtime/metrics read and one statfs per few MiB published, never
// one per message.

// Alarms is the broker's alarm state.
type Alarms struct {
	Disk   bool // free disk below DiskFreeLimit
	Memory bool // memory above MemoryHighWatermark
	// Last readings (0 when not measured).
	DiskFree   uint64
	MemoryUsed uint64
}

// Blocked reports whether publishing is blocked.
func (a Alarms) Blocked() bool { return a.Disk || a.Memory }

type alarmState struct {
	mu      sync.Mutex
	cur     Alarms
	changed chan struct{}
	timer   *time.Timer
	every   time.Duration

	// step is how many published bytes trigger a check (0: no alarm is
	// on); since counts them since the last check; checking lets one
	// publisher check at a time.
	step     int64
	since    atomic.Int64
	checking atomic.Bool
}

// alarmStep is how many published bytes may pass between two checks: a
// 64th of the memory watermark and a 32nd of the free-disk limit, within
// [minAlarmStep, maxAlarmStep]. With the 100 MiB disk default that is a
// statfs per 3.1 MiB; a 300 MB watermark reads the runtime's metrics every
// 4.5 MiB. What a watermark can be overshot by is this plus what the
// publishers sent before they saw their session window close.
func alarmStep(memoryHighWatermark, diskFreeLimit uint64) int64 {
	const minAlarmStep, maxAlarmStep = 256 << 10, 16 << 20
	step := uint64(maxAlarmStep)
	if memoryHighWatermark > 0 {
		step = min(step, memoryHighWatermark/64)
	}
	if diskFreeLimit > 0 {
		step = min(step, diskFreeLimit/32)
	}
	return int64(max(step, minAlarmStep))
}

// consumed counts n bytes taken in by a publish and checks the alarms when
// the bytes since the last check reach the step. Cheap enough for every
// message: one atomic add while no alarm is due, nothing when none is on.
func (b *Broker) consumed(n int) {
	a := &b.alarms
	if a.step == 0 || a.since.Add(int64(n)) < a.step {
		return
	}
	if !a.checking.CompareAndSwap(false, true) {
		return // another publisher is checking
	}
	a.since.Store(0)
	b.CheckAlarms()
	a.checking.Store(false)
}

func (b *Broker) startAlarms() {
	a := &b.alarms
	a.changed = make(chan struct{})
	if b.opts.DiskFreeLimit == 0 && b.opts.MemoryHighWatermark == 0 {
		return
	}
	a.every = b.opts.AlarmInterval
	if a.every <= 0 {
		a.every = time.Second
	}
	a.step = alarmStep(b.opts.MemoryHighWatermark, b.opts.DiskFreeLimit)
	b.CheckAlarms()
	a.mu.Lock()
	a.timer = time.AfterFunc(a.every, b.alarmTick)
	a.mu.Unlock()
}

func (b *Broker) alarmTick() {
	b.CheckAlarms()
	a := &b.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timer != nil && !b.closed.Load() {
		a.timer.Reset(a.every)
	}
}

func (b *Broker) stopAlarms() {
	a := &b.alarms
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

// CheckAlarms reads free disk space and memory now and updates the alarms
// (the timer calls it; tests may too).
func (b *Broker) CheckAlarms() Alarms {
	var next Alarms
	if lim := b.opts.DiskFreeLimit; lim > 0 {
		read := b.opts.DiskFree
		if read == nil {
			read = diskFree
		}
		dir := b.opts.DataDir
		if dir == "" {
			dir = "."
		}
		if free, err := read(dir); err != nil {
			b.log.Warn("disk alarm: cannot read free space", "dir", dir, "err", err)
			b.alarms.mu.Lock()
			next.Disk = b.alarms.cur.Disk // keep the last state
			b.alarms.mu.Unlock()
		} else {
			next.DiskFree = free
			next.Disk = free < lim
		}
	}
	if lim := b.opts.MemoryHighWatermark; lim > 0 {
		read := b.opts.MemoryUsed
		if read == nil {
			read = memoryUsed
		}
		next.MemoryUsed = read()
		next.Memory = next.MemoryUsed > lim
	}
	a := &b.alarms
	a.mu.Lock()
	prev := a.cur
	a.cur = next
	if prev.Blocked() != next.Blocked() || prev.Disk != next.Disk || prev.Memory != next.Memory {
		close(a.changed)
		a.changed = make(chan struct{})
	}
	a.mu.Unlock()
	if prev.Disk != next.Disk {
		b.log.Warn("disk alarm", "set", next.Disk, "free", next.DiskFree, "limit", b.opts.DiskFreeLimit)
	}
	if prev.Memory != next.Memory {
		b.log.Warn("memory alarm", "set", next.Memory, "used", next.MemoryUsed, "limit", b.opts.MemoryHighWatermark)
	}
	return next
}

// Alarms returns the current alarm state.
func (b *Broker) Alarms() Alarms {
	b.alarms.mu.Lock()
	defer b.alarms.mu.Unlock()
	return b.alarms.cur
}

// PublishBlocked reports whether publishers must be blocked (a resource
// alarm is set) and returns a channel that is closed at the next change of
// the alarm state: the link layer sets its publishers' session
// incoming-window to 0 while blocked, and waits on changed to resume.
func (b *Broker) PublishBlocked() (blocked bool, changed <-chan struct{}) {
	b.alarms.mu.Lock()
	defer b.alarms.mu.Unlock()
	return b.alarms.cur.Blocked(), b.alarms.changed
}

var memSamples = []metrics.Sample{
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
}
var memMu sync.Mutex

// memoryUsed is the memory the Go runtime holds from the OS, minus what it
// has released (close to RSS for a Go process).
func memoryUsed() uint64 {
	memMu.Lock()
	defer memMu.Unlock()
	metrics.Read(memSamples)
	total, released := memSamples[0].Value.Uint64(), memSamples[1].Value.Uint64()
	if released > total {
		return 0
	}
	return total - released
}
