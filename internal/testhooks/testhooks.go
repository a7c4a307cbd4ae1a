// Package testhooks carries what this module's own tests may replace in a
// broker and an embedding program may not: the readings the disk and
// memory alarms take. Being internal, it is out of reach of other modules,
// so none of it is part of epitaph.Options' public fields.
package testhooks

import "time"

// Alarms replaces the alarms' readings; a nil or zero field keeps the real
// one.
type Alarms struct {
	// DiskFree replaces the reading of the data directory's free space.
	DiskFree func(dir string) (uint64, error)
	// MemoryUsed replaces the reading of the process's memory.
	MemoryUsed func() uint64
	// Interval is how often both are checked on a timer (default 1s); a
	// long one leaves only the checks made as publishes use memory and
	// disk.
	Interval time.Duration
}

// setAlarms is installed by package epitaph, the only package that can set
// the unexported field of epitaph.Options; it takes an any because this
// package sits below epitaph and cannot name its types.
var setAlarms func(opts any, a Alarms)

// InstallAlarms is called once, by package epitaph's init.
func InstallAlarms(f func(opts any, a Alarms)) { setAlarms = f }

// SetAlarms makes a broker started with opts, an *epitaph.Options, read
// its alarms through a.
func SetAlarms(opts any, a Alarms) { setAlarms(opts, a) }
