// Package dlops holds the management plane's operations on dead letters
// that every front end offers the same way: peeking at a queue with
// filters on the death history, and redrive tasks that move dead messages
// back to where they came from (or to a named queue), durably, with a rate
// limit and a report.
package dlops

import (
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/router"
)

// Peek page sizes: the default and the most one request may ask for (the
// HTTP API contract's).
const (
	DefaultPeekCount = 50
	MaxPeekCount     = 1000
)

// DefaultPeekMaxScan is how many messages one peek tests at most before it
// answers with what it found and where to continue (config
// peek-max-scan).
const DefaultPeekMaxScan = 10000

// PeekRequest is one page of a peek.
type PeekRequest struct {
	Position int
	Count    int
	Filter   Filter
}

// Page is a peek's answer.
type Page struct {
	// Depth is the queue's number of ready messages; Delayed the number of
	// its delayed ones (quorum delayed retry), whose positions come after
	// the ready ones.
	Depth    int
	Delayed  int
	Messages []router.BrowsedMessage
	// Next is the position the next page starts at.
	Next int
}

// Peek reads one page of q without acquiring anything: up to req.Count
// messages matching req.Filter from req.Position on, testing at most
// maxScan messages (so the cost is bounded by the page, not the queue).
// The caller has checked the read permission.
func Peek(q *router.Queue, req PeekRequest, maxScan int, lim filter.Limits) (Page, error) {
	if req.Position < 0 {
		return Page{}, badRequest("position must be a non-negative integer")
	}
	if req.Count < 1 || req.Count > MaxPeekCount {
		return Page{}, badRequest("count must be between 1 and %d, not %d", MaxPeekCount, req.Count)
	}
	m, err := req.Filter.Compile(lim)
	if err != nil {
		return Page{}, err
	}
	var mf router.MessageFilter
	if m != nil {
		mf = m
	}
	if maxScan <= 0 {
		maxScan = DefaultPeekMaxScan
	}
	msgs, next, depth := q.Browse(req.Position, req.Count, maxScan, mf)
	return Page{Depth: depth, Delayed: q.DelayedLen(), Messages: msgs, Next: next}, nil
}
