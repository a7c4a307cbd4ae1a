// Package dlevents is the dead-letter event stream: one Event per message
// that died (dead-lettered, dropped, or retained by at-least-once
// dead-lettering), fanned out by a Hub to subscribers with bounded buffers.
//
// The dead-letterer publishes (package deadletter); the front ends
// subscribe (the AMQP 1.0 source /events/dead-letters in package link, the
// Server-Sent Events endpoint in management/httpapi). It sits below all of
// them and imports only the standard library, so that link, which may not
// import deadletter, reaches the stream without an interface of its own.
//
// Costs: with no subscriber, Active is one atomic load and the
// dead-letterer builds no event. With subscribers, Publish takes the hub's
// lock once per event and appends a pointer to each matching
// subscription's ring; it never blocks and never waits for a reader. A
// subscription whose ring is full loses the event: the loss is counted
// (Hub.Lost, per subscription too) and reported in the subscription's
// stream as a gap marker at the place of the loss.
package dlevents

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Event outcomes.
const (
	OutcomeDeadLettered = "dead_lettered" // at least one target queue took the copy
	OutcomeDropped      = "dropped"       // at most once: no target took it; DropCause says why
	OutcomeRetained     = "retained"      // at least once: no target took it; it stays in its queue for a retry
)

// Drop causes (Event.DropCause), the same words as the dead-letter span's
// epitaph.dead_letter.dropped attribute and the dropped counters' cause
// label, plus CauseRejected.
const (
	CauseNoDLX    = "no_dlx"   // the queue has no dead-letter exchange
	CauseNoRoute  = "no_route" // the dead-letter exchange is missing or routed the copy to no queue
	CauseCycle    = "cycle"    // every target queue would have been a dead-letter cycle
	CauseRejected = "rejected" // every target queue refused the copy (its overflow, or it was deleted)
)

// Event is one message's death. It is immutable once published: the hub
// hands the same value to every subscriber.
type Event struct {
	// Seq numbers the hub's events from 1, in the order they were
	// published; a subscriber sees its events in increasing Seq.
	Seq  uint64
	Time time.Time // when the death was recorded (x-opt-deaths last-time)

	VHost     string
	Queue     string // the queue the message died in
	QueueType string // "classic" or "quorum"
	Reason    string // rejected, expired, maxlen, delivery_limit
	// Count is the x-opt-deaths count for {Queue, Reason} with this death.
	Count uint64
	// Strategy is the dead-letter strategy applied: disabled (no DLX),
	// at_most_once or at_least_once.
	Strategy string
	Outcome  string // OutcomeDeadLettered, OutcomeDropped or OutcomeRetained

	// Exchange is the dead-letter exchange (HasExchange false: none
	// configured); RoutingKeys the keys the copy was routed with.
	Exchange    string
	HasExchange bool
	RoutingKeys []string
	// TargetQueues took the copy; RefusedQueues were routed to but refused
	// it; CycleQueues were left out as a dead-letter cycle.
	TargetQueues  []string
	RefusedQueues []string
	CycleQueues   []string
	// DropCause says why no target took the copy (Outcome dropped or
	// retained): a Cause* value.
	DropCause string

	// MessageID is the message's message-id in text (a string as it is,
	// a number in decimal, a UUID in its canonical form, binary in hex);
	// HasMessageID false when it has none.
	MessageID    string
	HasMessageID bool
	// ErrorCondition and ErrorDescription are the consumer's rejection
	// error, when it gave one (x-last-death-error-*).
	ErrorCondition   string
	ErrorDescription string
}

// Item is what a subscription yields: an event, or (Event nil) a gap
// marker saying that Lost events were lost at this place because the
// subscription's buffer was full.
type Item struct {
	Event *Event
	Lost  uint64
}

// Filter selects the events a subscription receives.
type Filter struct {
	VHost string // "" for every vhost
	Queue string // "" for every queue (of VHost)
	// Allow, when set, decides per event whether the subscriber may see
	// the events of vhost and queue (its read permission). It runs on the
	// publishing goroutine with the hub's lock held: it must be quick and
	// must not call back into the hub.
	Allow func(vhost, queue string) bool
}

func (f *Filter) match(e *Event) bool {
	return (f.VHost == "" || f.VHost == e.VHost) && (f.Queue == "" || f.Queue == e.Queue) &&
		(f.Allow == nil || f.Allow(e.VHost, e.Queue))
}

// Defaults of Options.
const (
	DefaultBuffer         = 1024
	DefaultMaxSubscribers = 100
)

// Options configure a Hub.
type Options struct {
	// Buffer is how many items (events, and the gap marker that follows
	// them once one was lost) one subscription holds for its reader before
	// it loses events (0 means DefaultBuffer).
	Buffer int
	// MaxSubscribers bounds the subscriptions open at once; 0 means no
	// bound.
	MaxSubscribers int
}

// ErrTooManySubscribers refuses a subscription beyond Options.MaxSubscribers.
var ErrTooManySubscribers = errors.New("too many dead-letter event subscribers")

// ErrClosed refuses a subscription to a closed hub.
var ErrClosed = errors.New("dead-letter events closed")

// Hub fans events out to subscriptions. The zero value is not usable: use
// New. A nil *Hub is a hub nobody listens to.
type Hub struct {
	buffer, maxSubs int

	active atomic.Int32 // len(subs), read without the lock by Active
	lost   atomic.Uint64

	mu     sync.Mutex // owns subs, seq, closed
	subs   []*Subscription
	seq    uint64
	closed bool
}

// New returns a hub.
func New(opts Options) *Hub {
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	return &Hub{buffer: opts.Buffer, maxSubs: opts.MaxSubscribers}
}

// Active reports whether anyone listens: publishers build no event
// otherwise. One atomic load; false for a nil hub.
func (h *Hub) Active() bool { return h != nil && h.active.Load() > 0 }

// Lost is the number of events lost by full subscription buffers, over
// all subscriptions, since the hub was made.
func (h *Hub) Lost() uint64 {
	if h == nil {
		return 0
	}
	return h.lost.Load()
}

// MaxSubscribers is the bound on open subscriptions (0: none).
func (h *Hub) MaxSubscribers() int { return h.maxSubs }

// Subscribers is the number of open subscriptions.
func (h *Hub) Subscribers() int {
	if h == nil {
		return 0
	}
	return int(h.active.Load())
}

// Publish hands e to every subscription whose filter matches it, after
// numbering it (e.Seq). It never blocks: a subscription whose buffer is
// full loses e. e must not be changed afterwards.
func (h *Hub) Publish(e *Event) {
	if !h.Active() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	e.Seq = h.seq
	for _, s := range h.subs {
		if s.filter.match(e) {
			s.push(e)
		}
	}
}

// Subscribe opens a subscription. notify is called, without blocking and
// possibly with the hub's lock held, when the subscription has something
// to read after it was found empty, and when it is closed by the hub: the
// reader then calls Next until it reports nothing. notify must not call
// into the hub or the subscription.
func (h *Hub) Subscribe(f Filter, notify func()) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.maxSubs > 0 && len(h.subs) >= h.maxSubs {
		return nil, ErrTooManySubscribers
	}
	s := &Subscription{h: h, filter: f, notify: notify, ring: make([]Item, h.buffer+1)}
	h.subs = append(h.subs, s)
	h.active.Store(int32(len(h.subs)))
	return s, nil
}

// Close closes every subscription (their readers see Closed) and refuses
// new ones. Idempotent.
func (h *Hub) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, s := range h.subs {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		if s.notify != nil {
			s.notify()
		}
	}
	h.subs = nil
	h.active.Store(0)
}

func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.subs {
		if x == s {
			// A new slice: Publish never sees a half-removed list (it holds
			// the lock anyway; this keeps removed subscriptions unreachable).
			h.subs = append(h.subs[:i:i], h.subs[i+1:]...)
			break
		}
	}
	h.active.Store(int32(len(h.subs)))
}

// Subscription is one subscriber's bounded buffer of events. Its reader
// calls Next; the hub pushes. Safe for one reader and the hub at once.
type Subscription struct {
	h      *Hub
	filter Filter
	notify func()

	mu sync.Mutex // owns the fields below
	// ring holds up to len(ring)-1 items; the last slot is kept for the
	// gap marker of events lost while it was full, so that a loss always
	// has a place in the stream.
	ring   []Item
	head   int // index of the oldest item
	n      int // items held
	lost   uint64
	closed bool
	done   bool // Close was called by the reader
}

// push appends e, or counts it lost when the buffer is full. Called with
// the hub's lock held.
func (s *Subscription) push(e *Event) {
	s.mu.Lock()
	wasEmpty := s.n == 0
	switch {
	case s.n < len(s.ring)-1:
		s.ring[(s.head+s.n)%len(s.ring)] = Item{Event: e}
		s.n++
	default:
		s.lost++
		s.h.lost.Add(1)
		last := &s.ring[(s.head+s.n-1)%len(s.ring)]
		if last.Event == nil {
			last.Lost++ // the gap marker already ends the ring
		} else {
			s.ring[(s.head+s.n)%len(s.ring)] = Item{Lost: 1}
			s.n++
		}
	}
	s.mu.Unlock()
	if wasEmpty && s.notify != nil {
		s.notify()
	}
}

// Next takes the oldest item; ok is false when there is none now.
func (s *Subscription) Next() (it Item, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return Item{}, false
	}
	it = s.ring[s.head]
	s.ring[s.head] = Item{} // keep no event reachable from the ring
	s.head = (s.head + 1) % len(s.ring)
	s.n--
	return it, true
}

// Len is the number of items waiting.
func (s *Subscription) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Lost is the number of events this subscription lost.
func (s *Subscription) Lost() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Closed reports whether the hub closed the subscription (broker
// shutdown); what it held can still be read.
func (s *Subscription) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends the subscription: the hub forgets it. Idempotent.
func (s *Subscription) Close() {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	s.mu.Unlock()
	s.h.remove(s)
}
