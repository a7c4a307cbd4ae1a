package management

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits of what a request can make the management plane log: a client
// can send requests as fast as it likes, with paths as long as a message.
const (
	logValueMax  = 256         // bytes of a client-supplied value (path, reason) kept in a log record
	logBurst     = 10          // records per message per logInterval
	logInterval  = time.Minute // after the burst, one summary per interval
	logMaxTopics = 64          // distinct messages tracked; beyond, records pass unthrottled
)

// rateLog passes at most logBurst records per message text and
// logInterval; the rest are counted, and the next record that passes
// carries the count as "suppressed". Message texts are constants of this
// package, so the map stays small.
type rateLog struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	topics map[string]*rateTopic
}

type rateTopic struct {
	start      time.Time
	passed     int
	suppressed int
}

func newRateLog(l *slog.Logger) *rateLog {
	return &rateLog{log: l, now: time.Now, topics: make(map[string]*rateTopic)}
}

// Log writes the record unless msg has used up its burst in this interval.
func (r *rateLog) Log(level slog.Level, msg string, args ...any) {
	if !r.log.Enabled(context.Background(), level) {
		return
	}
	now := r.now()
	r.mu.Lock()
	t := r.topics[msg]
	if t == nil && len(r.topics) < logMaxTopics {
		t = &rateTopic{start: now}
		r.topics[msg] = t
	}
	suppressed := 0
	if t != nil {
		if now.Sub(t.start) >= logInterval {
			t.start, t.passed = now, 0
		}
		if t.passed >= logBurst {
			t.suppressed++
			r.mu.Unlock()
			return
		}
		t.passed++
		suppressed, t.suppressed = t.suppressed, 0
	}
	r.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	r.log.Log(context.Background(), level, msg, args...)
}

// clip shortens a client-supplied string for a log record, on a rune
// boundary, saying how long it was.
func clip(s string) string {
	if len(s) <= logValueMax {
		return s
	}
	cut := logValueMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
