package router

import (
	"runtime/metrics"
	"sync"
	"time"
)

// Resource alarms (RabbitMQ's disk and memory alarms): while free disk space
// of Options.DataDir is below Options.DiskFreeLimit, or the process's memory
// is above Options.MemoryHighWatermark, publishers are blocked: the link
// layer stops granting them credit (session incoming-window 0) while
// consumers keep draining. The alarm clears by itself on the first check
// after the condition goes away. Both are checked every
// Options.AlarmInterval on a timer (no goroutine when neither is set).

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
