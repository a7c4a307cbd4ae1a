// Package ratelog limits repeated log lines: for each key (a cause, such as
// "disk full" or "pebble background error"), at most one line per interval
// is written; the lines dropped in between are counted and reported, as
// "suppressed", on the next line written for that key. A failure that
// repeats thousands of times a second then costs one line per interval
// instead of filling the disk it may be complaining about.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the interval of New(logger, 0).
const DefaultInterval = 10 * time.Second

// Limiter writes to its logger at most one line per key per interval. Safe
// for concurrent use. The zero value is not usable: call New.
type Limiter struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	keys map[string]*keyState
}

type keyState struct {
	last       time.Time
	suppressed uint64
}

// New returns a Limiter writing to log (nil discards) with the interval
// (0 means DefaultInterval).
func New(log *slog.Logger, interval time.Duration) *Limiter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Limiter{log: log, interval: interval, now: time.Now, keys: map[string]*keyState{}}
}

// Log writes msg with args at level unless a line for key was written less
// than an interval ago; then it only counts it. It reports whether the line
// was written.
func (l *Limiter) Log(level slog.Level, key, msg string, args ...any) bool {
	if !l.log.Enabled(context.Background(), level) {
		return false
	}
	now := l.now()
	l.mu.Lock()
	st := l.keys[key]
	if st == nil {
		st = &keyState{}
		l.keys[key] = st
	} else if now.Sub(st.last) < l.interval {
		st.suppressed++
		l.mu.Unlock()
		return false
	}
	suppressed := st.suppressed
	st.last, st.suppressed = now, 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	l.log.Log(context.Background(), level, msg, args...)
	return true
}

// Error is Log at slog.LevelError.
func (l *Limiter) Error(key, msg string, args ...any) bool {
	return l.Log(slog.LevelError, key, msg, args...)
}

// Warn is Log at slog.LevelWarn.
func (l *Limiter) Warn(key, msg string, args ...any) bool {
	return l.Log(slog.LevelWarn, key, msg, args...)
}
