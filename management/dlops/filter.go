package dlops

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

// ErrBadRequest is wrapped by every refusal of a caller's input (a filter,
// a page size, a rate, a target): the front ends answer it as a client
// error (HTTP 400).
var ErrBadRequest = errors.New("bad request")

func badRequest(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, a...))
}

// Filter selects dead messages by their death history and, through SQL,
// by anything the filter package reads. Every field given must match.
type Filter struct {
	// Reason is the last death's reason.
	Reason string `json:"reason,omitempty"`
	// SourceQueue is a queue the message died in (x-first-death-queue or
	// any x-opt-deaths entry's queue).
	SourceQueue string `json:"source_queue,omitempty"`
	// Exchange is an exchange of a death (any x-opt-deaths entry's).
	Exchange string `json:"exchange,omitempty"`
	// DeathAfter and DeathBefore bound the last death's time (RFC 3339):
	// after <= time < before.
	DeathAfter  string `json:"death_after,omitempty"`
	DeathBefore string `json:"death_before,omitempty"`
	// ErrorCondition is x-last-death-error-condition.
	ErrorCondition string `json:"error_condition,omitempty"`
	// MinCount: some death entry's count is at least this (0: no bound).
	MinCount int64 `json:"min_count,omitempty"`
	// SQL is an AMQP SQL filter expression (package filter).
	SQL string `json:"sql,omitempty"`
}

// FilterKeys are the names of the filter fields, as query parameters and
// JSON keys.
var FilterKeys = []string{"reason", "source_queue", "exchange", "death_after", "death_before", "error_condition", "min_count", "sql"}

var reasons = []string{"rejected", "expired", "maxlen", "delivery_limit"}

// ParseFilter reads a filter from its named fields (query parameters, or
// the JSON object's values as text). An unknown name or a bad value is
// refused with ErrBadRequest.
func ParseFilter(fields map[string]string) (Filter, error) {
	var f Filter
	for k, v := range fields {
		switch k {
		case "reason":
			f.Reason = v
		case "source_queue":
			f.SourceQueue = v
		case "exchange":
			f.Exchange = v
		case "death_after":
			f.DeathAfter = v
		case "death_before":
			f.DeathBefore = v
		case "error_condition":
			f.ErrorCondition = v
		case "min_count":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return f, badRequest("min_count must be a non-negative integer, not %q", v)
			}
			f.MinCount = n
		case "sql":
			f.SQL = v
		default:
			return f, badRequest("unknown filter %q (known: reason, source_queue, exchange, death_after, death_before, error_condition, min_count, sql)", k)
		}
	}
	return f, nil
}

// Matcher is a compiled Filter; it implements router.MessageFilter (no
// allocation, no lock: it may run under a queue's lock).
type Matcher struct {
	f             Filter
	after, before time.Time
	history       bool // some history field is set
	sql           *filter.Expr
}

var _ router.MessageFilter = (*Matcher)(nil)

// Compile checks f and returns its matcher; nil when f selects everything.
func (f Filter) Compile(lim filter.Limits) (*Matcher, error) {
	m := &Matcher{f: f}
	if f.Reason != "" && !slices.Contains(reasons, f.Reason) {
		return nil, badRequest("reason must be rejected, expired, maxlen or delivery_limit, not %q", f.Reason)
	}
	var err error
	if f.DeathAfter != "" {
		if m.after, err = time.Parse(time.RFC3339Nano, f.DeathAfter); err != nil {
			return nil, badRequest("death_after must be an RFC 3339 time, not %q", f.DeathAfter)
		}
	}
	if f.DeathBefore != "" {
		if m.before, err = time.Parse(time.RFC3339Nano, f.DeathBefore); err != nil {
			return nil, badRequest("death_before must be an RFC 3339 time, not %q", f.DeathBefore)
		}
	}
	if f.MinCount < 0 {
		return nil, badRequest("min_count must be a non-negative integer")
	}
	if f.SQL != "" {
		if m.sql, err = filter.ParseSQLWithin(f.SQL, lim); err != nil {
			return nil, badRequest("sql: %v", err)
		}
	}
	m.history = f.Reason != "" || f.SourceQueue != "" || f.Exchange != "" || f.DeathAfter != "" ||
		f.DeathBefore != "" || f.ErrorCondition != "" || f.MinCount > 0
	if !m.history && m.sql == nil {
		return nil, nil
	}
	return m, nil
}

// Match implements router.MessageFilter.
func (m *Matcher) Match(msg *router.Message, anns value.Map) bool {
	if m.history && !m.matchHistory(anns) {
		return false
	}
	return m.sql == nil || m.sql.Match(msg, anns)
}

func (m *Matcher) matchHistory(anns value.Map) bool {
	h, ok := annotations.HistoryOf(anns)
	if !ok || len(h.Deaths) == 0 {
		return false
	}
	f := &m.f
	if f.Reason != "" && h.Last.Reason != f.Reason {
		return false
	}
	if f.ErrorCondition != "" && (h.LastError == nil || h.LastError.Condition != f.ErrorCondition) {
		return false
	}
	if f.SourceQueue != "" && h.First.Queue != f.SourceQueue &&
		!slices.ContainsFunc(h.Deaths, func(d annotations.Death) bool { return d.Queue == f.SourceQueue }) {
		return false
	}
	if f.Exchange != "" && !slices.ContainsFunc(h.Deaths, func(d annotations.Death) bool { return d.Exchange == f.Exchange }) {
		return false
	}
	if f.MinCount > 0 && !slices.ContainsFunc(h.Deaths, func(d annotations.Death) bool { return d.Count >= uint64(f.MinCount) }) {
		return false
	}
	if !m.after.IsZero() || !m.before.IsZero() {
		// The entries are most recently updated first: the first one's
		// last-time is the last death's.
		last := int64(h.Deaths[0].LastTime)
		if !m.after.IsZero() && last < m.after.UnixMilli() {
			return false
		}
		if !m.before.IsZero() && last >= m.before.UnixMilli() {
			return false
		}
	}
	return true
}
