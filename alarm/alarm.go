// Package alarm holds the broker's resource alarms (RabbitMQ's disk and
// memory alarms): while the free disk space of Options.DataDir is below
// Options.DiskFreeLimit, or the process's memory is above
// Options.MemoryHighWatermark, publishers are blocked: the link layer stops
// granting them credit (session incoming-window 0) while consumers keep
// draining. The alarm clears by itself on the first check after the
// condition goes away.
//
// Both are checked every Options.Interval on a timer (none when neither
// limit is set), and also where memory and disk are consumed: every publish
// adds its bytes to a counter (Monitor.Consumed), and the publish that takes
// it past the step checks at once, on its own goroutine. A fast publisher
// can otherwise fill memory or a small disk many times over between two
// ticks; the step keeps the check to one runtime/metrics read and one statfs
// per few MiB published, never one per message.
//
// The package imports no other broker package: the router owns the Monitor
// (it feeds it the bytes of every publish), the link layer and management
// read it.
package alarm

import (
	"log/slog"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Monitor. DiskFreeLimit 0 means no disk alarm,
// MemoryHighWatermark 0 no memory alarm; Interval 0 means 1 s. DiskFree and
// MemoryUsed replace the readers (tests).
type Options struct {
	Logger              *slog.Logger
	DataDir             string // "" means the working directory
	DiskFreeLimit       uint64
	MemoryHighWatermark uint64
	Interval            time.Duration
	DiskFree            func(dir string) (uint64, error)
	MemoryUsed          func() uint64
}

// State is the alarm state.
type State struct {
	Disk   bool // free disk below DiskFreeLimit
	Memory bool // memory above MemoryHighWatermark
	// Last readings (0 when not measured).
	DiskFree   uint64
	MemoryUsed uint64
}

// Blocked reports whether publishing is blocked.
func (s State) Blocked() bool { return s.Disk || s.Memory }

// Monitor checks the alarms and keeps their state. The zero value is not
// started: Start it, and Stop it when done. It is meant to be embedded by
// value in its owner, so that Consumed costs no pointer chase.
type Monitor struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	cur     State
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

// step is how many published bytes may pass between two checks: a 64th of
// the memory watermark and a 32nd of the free-disk limit, within [minStep,
// maxStep]. With the 100 MiB disk default that is a statfs per 3.1 MiB; a
// 300 MB watermark reads the runtime's metrics every 4.5 MiB. What a
// watermark can be overshot by is this plus what the publishers sent before
// they saw their session window close.
func step(memoryHighWatermark, diskFreeLimit uint64) int64 {
	const minStep, maxStep = 256 << 10, 16 << 20
	s := uint64(maxStep)
	if memoryHighWatermark > 0 {
		s = min(s, memoryHighWatermark/64)
	}
	if diskFreeLimit > 0 {
		s = min(s, diskFreeLimit/32)
	}
	return int64(max(s, minStep))
}

// Consumed counts n bytes taken in by a publish and checks the alarms when
// the bytes since the last check reach the step. Cheap enough for every
// message: one atomic add while no check is due, nothing when no alarm is
// on. Kept small so that it inlines into the publish path.
func (m *Monitor) Consumed(n int) {
	if m.step == 0 || m.since.Add(int64(n)) < m.step {
		return
	}
	m.checkStep()
}

func (m *Monitor) checkStep() {
	if !m.checking.CompareAndSwap(false, true) {
		return // another publisher is checking
	}
	m.since.Store(0)
	m.Check()
	m.checking.Store(false)
}

// Start applies o, checks once and arms the timer (no timer when neither
// limit is set). Call it once, before any other method.
func (m *Monitor) Start(o Options) {
	m.opts = o
	m.log = o.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.changed = make(chan struct{})
	if o.DiskFreeLimit == 0 && o.MemoryHighWatermark == 0 {
		return
	}
	m.every = o.Interval
	if m.every <= 0 {
		m.every = time.Second
	}
	m.step = step(o.MemoryHighWatermark, o.DiskFreeLimit)
	m.Check()
	m.mu.Lock()
	m.timer = time.AfterFunc(m.every, m.tick)
	m.mu.Unlock()
}

func (m *Monitor) tick() {
	m.Check()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil { // nil once stopped
		m.timer.Reset(m.every)
	}
}

// Stop stops the timer; further calls are no-ops. Consumed and Check keep
// working.
func (m *Monitor) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

// Check reads free disk space and memory now and updates the alarms (the
// timer calls it; tests may too).
func (m *Monitor) Check() State {
	var next State
	if lim := m.opts.DiskFreeLimit; lim > 0 {
		read := m.opts.DiskFree
		if read == nil {
			read = diskFree
		}
		dir := m.opts.DataDir
		if dir == "" {
			dir = "."
		}
		if free, err := read(dir); err != nil {
			m.log.Warn("disk alarm: cannot read free space", "dir", dir, "err", err)
			m.mu.Lock()
			next.Disk = m.cur.Disk // keep the last state
			m.mu.Unlock()
		} else {
			next.DiskFree = free
			next.Disk = free < lim
		}
	}
	if lim := m.opts.MemoryHighWatermark; lim > 0 {
		read := m.opts.MemoryUsed
		if read == nil {
			read = memoryUsed
		}
		next.MemoryUsed = read()
		next.Memory = next.MemoryUsed > lim
	}
	m.mu.Lock()
	prev := m.cur
	m.cur = next
	if prev.Blocked() != next.Blocked() || prev.Disk != next.Disk || prev.Memory != next.Memory {
		close(m.changed)
		m.changed = make(chan struct{})
	}
	m.mu.Unlock()
	if prev.Disk != next.Disk {
		m.log.Warn("disk alarm", "set", next.Disk, "free", next.DiskFree, "limit", m.opts.DiskFreeLimit)
	}
	if prev.Memory != next.Memory {
		m.log.Warn("memory alarm", "set", next.Memory, "used", next.MemoryUsed, "limit", m.opts.MemoryHighWatermark)
	}
	return next
}

// State returns the current alarm state.
func (m *Monitor) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// PublishBlocked reports whether publishers must be blocked (an alarm is
// set) and returns a channel that is closed at the next change of the alarm
// state: the link layer sets its publishers' session incoming-window to 0
// while blocked, and waits on changed to resume.
func (m *Monitor) PublishBlocked() (blocked bool, changed <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur.Blocked(), m.changed
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
