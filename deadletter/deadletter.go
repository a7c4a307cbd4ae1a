// Package deadletter decides where a dead message goes and builds its
// dead-letter copy, as RabbitMQ 4.3 does (shared/spec/dead-lettering.md §2.5,
// §2.6, §3): it records the death with package annotations, clears the
// message TTL, replaces the exchange and routing keys, routes the copy
// through the dead-letter exchange like any publish, drops cycling targets,
// and counts what it dead-letters and what it drops.
//
// It implements router.DeadLetterer; the root package wires it into the
// router, which never imports this package.
package deadletter

import (
	"log/slog"
	"sync"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
)

// Options configure a DeadLetterer. Zero values mean defaults.
type Options struct {
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Strict turns off epitaph's additions to RabbitMQ's annotations (the
	// x-last-death-error-condition and -description annotations), for strict
	// RabbitMQ 4.3 parity.
	Strict bool
}

// Counts are what happened to the messages that died in one queue for one reason.
type Counts struct {
	// DeadLettered messages reached at least one target queue.
	DeadLettered uint64
	// DroppedNoDLX: the queue has no dead-letter exchange configured.
	DroppedNoDLX uint64
	// DroppedNoRoute: the dead-letter exchange is missing or routed the
	// message to no queue.
	DroppedNoRoute uint64
	// DroppedCycle: every target queue would have been a dead-letter cycle.
	DroppedCycle uint64
}

// Key identifies a queue and reason in Stats.
type Key struct {
	VHost  string
	Queue  string
	Reason router.Reason
}

// DeadLetterer dead-letters messages at most once (RabbitMQ's default
// strategy): the source queue has already removed the message.
type DeadLetterer struct {
	log    *slog.Logger
	now    func() time.Time
	strict bool

	mu     sync.Mutex
	counts map[Key]*Counts
}

// New returns a DeadLetterer.
func New(opts Options) *DeadLetterer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &DeadLetterer{log: opts.Logger, now: opts.Now, strict: opts.Strict, counts: make(map[Key]*Counts)}
}

// Stats returns a snapshot of the counters.
func (d *DeadLetterer) Stats() map[Key]Counts {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[Key]Counts, len(d.counts))
	for k, c := range d.counts {
		out[k] = *c
	}
	return out
}

// QueueStats returns the counters of one queue, by reason.
func (d *DeadLetterer) QueueStats(vhost, queue string) map[router.Reason]Counts {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[router.Reason]Counts)
	for k, c := range d.counts {
		if k.VHost == vhost && k.Queue == queue {
			out[k.Reason] = *c
		}
	}
	return out
}

func (d *DeadLetterer) count(src *router.Queue, reason router.Reason, f func(*Counts)) {
	k := Key{VHost: src.VHost().Name(), Queue: src.Name(), Reason: reason}
	d.mu.Lock()
	c := d.counts[k]
	if c == nil {
		c = new(Counts)
		d.counts[k] = c
	}
	f(c)
	d.mu.Unlock()
}

// DeadLetter implements router.DeadLetterer. It handles the messages in the
// order they died (§2.9).
func (d *DeadLetterer) DeadLetter(src *router.Queue, dead []router.Dead) {
	for i := range dead {
		d.deadLetter(src, &dead[i])
	}
}

func (d *DeadLetterer) deadLetter(src *router.Queue, dm *router.Dead) {
	dlx, ok := src.DeadLetterExchange()
	if !ok {
		d.count(src, dm.Reason, func(c *Counts) { c.DroppedNoDLX++ })
		return
	}
	cp, h := d.Copy(src, dm, dlx)
	targets, err := src.VHost().Route(dlx, cp)
	if err != nil || len(targets) == 0 {
		d.count(src, dm.Reason, func(c *Counts) { c.DroppedNoRoute++ })
		d.log.Debug("dead-lettered message dropped: no route", "vhost", src.VHost().Name(), "queue", src.Name(),
			"reason", string(dm.Reason), "dlx", dlx, "err", err)
		return
	}
	// §2.6: drop targets that would be a cycle; the others still get it.
	n := 0
	for _, q := range targets {
		if annotations.IsCycle(h, q.Name()) {
			continue
		}
		targets[n] = q
		n++
	}
	if n == 0 {
		d.count(src, dm.Reason, func(c *Counts) { c.DroppedCycle++ })
		d.log.Warn("dead-letter cycle: message dropped", "vhost", src.VHost().Name(), "queue", src.Name(),
			"reason", string(dm.Reason), "dlx", dlx)
		return
	}
	for _, q := range targets[:n] {
		// At most once: a target that refuses the copy (reject-publish) loses it.
		q.Enqueue(cp)
	}
	d.count(src, dm.Reason, func(c *Counts) { c.DeadLettered++ })
}

// Copy builds the dead-letter copy of dm leaving src for exchange dlx
// (§3.1) and returns it with its updated history. The bare message is shared,
// byte for byte; the header loses its TTL (kept in the death's ttl); the
// exchange becomes dlx; the routing keys become the dead-letter routing key
// or else all the original keys (x-cc included); the delivery count is
// carried; x-opt-deaths and the x-*-death-* annotations are written.
func (d *DeadLetterer) Copy(src *router.Queue, dm *router.Dead, dlx string) (*router.Message, annotations.History) {
	m := dm.Msg
	h, _, err := annotations.Decode(m.Anns)
	if err != nil {
		// Only the broker writes Anns, so this is a bug; start afresh rather than lose the message.
		d.log.Error("unreadable dead-letter history; starting a new one", "queue", src.Name(), "err", err)
		h = annotations.History{}
	}
	h = annotations.Record(h, annotations.Event{
		Queue:       src.Name(),
		Reason:      string(dm.Reason),
		Exchange:    m.Exchange,
		RoutingKeys: m.RoutingKeys,
		TTL:         m.Header.TTL,
		HasTTL:      m.Header.HasTTL,
		Time:        amqp10.Timestamp(d.now().UnixMilli()),
		Error:       dm.Error,
	})
	keys := m.RoutingKeys
	if dlrk, ok := src.DeadLetterRoutingKey(); ok {
		keys = []string{dlrk}
	}
	hdr := m.Header
	hdr.TTL, hdr.HasTTL = 0, false
	cp := &router.Message{
		Wire:          m.Wire,
		Header:        hdr,
		Exchange:      dlx,
		RoutingKeys:   append([]string(nil), keys...),
		DeliveryCount: m.DeliveryCount,
		Anns:          annotations.Apply(append(amqp10.Map(nil), m.Anns...), h, d.strict),
	}
	return cp, h
}
