package deadletter

import (
	"sync"

	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
)

// Durable and at-least-once dead-lettering (dead-lettering.md §3.3, §4.2).
//
// DeadLetter hands every dead message with a store identity (Dead.Durable:
// a stored message of a durable queue, or a retained at-least-once message)
// to deadLetterDurable. Either way the copy reaches its targets through
// router.Queue.ForwardDead, which enqueues it and removes the source's
// stored copy in one atomic store batch: no loss and no duplicate on a
// single node.
//
// At-most-once: as deadLetter, but the move is atomic.
// At-least-once (Dead.Retained): when the dead-letter exchange is missing,
// routes nowhere, or every target would be a cycle, or every target refuses
// the copy, the message stays retained in its source queue (counted in
// RetainedStats) and the router hands it over again on the next topology or
// policy change and every retry interval. The death is recorded with the
// time of the first attempt (Dead.Time), as rabbit_fifo_dlx_worker does.

type retainedCounts struct {
	mu sync.Mutex
	n  map[Key]uint64
}

var retainedByDL sync.Map // *DeadLetterer → *retainedCounts

func (d *DeadLetterer) retainedCounts() *retainedCounts {
	if c, ok := retainedByDL.Load(d); ok {
		return c.(*retainedCounts)
	}
	c, _ := retainedByDL.LoadOrStore(d, &retainedCounts{n: map[Key]uint64{}})
	return c.(*retainedCounts)
}

// RetainedStats returns, per source queue and reason, how many times an
// at-least-once dead message could not be forwarded and stayed retained
// (each failed attempt counts).
func (d *DeadLetterer) RetainedStats() map[Key]uint64 {
	c := d.retainedCounts()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Key]uint64, len(c.n))
	for k, n := range c.n {
		out[k] = n
	}
	return out
}

func (d *DeadLetterer) countRetained(src *router.Queue, dm *router.Dead, why string) {
	c := d.retainedCounts()
	k := Key{VHost: src.VHost().Name(), Queue: src.Name(), Reason: dm.Reason}
	c.mu.Lock()
	c.n[k]++
	c.mu.Unlock()
	d.log.Debug("dead-lettered message retained", "vhost", k.VHost, "queue", k.Queue, "reason", string(dm.Reason), "why", why)
}

func (d *DeadLetterer) countForwarded(src *router.Queue, dm *router.Dead, strategy string) {
	k := Key{VHost: src.VHost().Name(), Queue: src.Name(), Reason: dm.Reason}
	d.mu.Lock()
	c := d.counts[k]
	if c == nil {
		c = new(Counts)
		d.counts[k] = c
	}
	c.DeadLettered++
	d.global[GlobalKey{QueueType: src.Type(), Strategy: strategy, Reason: dm.Reason}]++
	d.mu.Unlock()
}

// deadLetterRetained tries to forward a message retained by an
// at-least-once quorum queue: it moves atomically once at least one
// non-cycling target takes the copy; otherwise it stays retained for the
// next retry (topology or policy change, or the retry interval).
func (d *DeadLetterer) deadLetterRetained(src *router.Queue, dm *router.Dead) {
	dlx, ok := src.DeadLetterExchange()
	if !ok {
		d.countRetained(src, dm, "no dead-letter exchange")
		return
	}
	at := dm.Time
	if at.IsZero() {
		at = d.now()
	}
	cp, h := d.copyAt(src, dm, dlx, at, nil)
	targets, err := src.VHost().Route(dlx, cp)
	if err != nil || len(targets) == 0 {
		d.countRetained(src, dm, "no route")
		return
	}
	targets = dropCycles(h, targets)
	if len(targets) == 0 {
		d.countRetained(src, dm, "cycle")
		return
	}
	states, moved := src.ForwardDead(dm, cp, targets)
	switch {
	case moved:
		d.countForwarded(src, dm, StrategyAtLeastOnce)
	case states != nil:
		d.countRetained(src, dm, "rejected by every target")
	}
}

// dropCycles removes the targets that would be a dead-letter cycle (§2.6).
func dropCycles(h annotations.History, targets []*router.Queue) []*router.Queue {
	n := 0
	for _, q := range targets {
		if !annotations.IsCycle(h, q.Name()) {
			targets[n] = q
			n++
		}
	}
	return targets[:n]
}
