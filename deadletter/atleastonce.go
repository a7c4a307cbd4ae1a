package deadletter

import (
	"context"

	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// Durable and at-least-once dead-lettering, as RabbitMQ 4.3's quorum queues do it.
//
// forward hands every dead message with a store identity (Dead.Durable: a
// stored message of a durable queue, or a retained at-least-once message)
// to router.Queue.ForwardDead, which enqueues the copy and removes the
// source's stored copy in one atomic store batch: no loss and no duplicate
// on a single node.
//
// At-most-once: a message that reaches no target is dropped and counted in
// Stats as dropped.
// At-least-once (Dead.Retained): when the dead-letter exchange is missing,
// routes nowhere, or every target would be a cycle, or every target refuses
// the copy, the message stays retained in its source queue (counted in
// RetainedStats) and the router hands it over again on the next topology or
// policy change and every retry interval. The death is recorded with the
// time of the first attempt (Dead.Time), as rabbit_fifo_dlx_worker does.
// Once forwarded it is counted in Stats as dead-lettered and in GlobalStats
// under StrategyAtLeastOnce.

// RetainedStats returns, per source queue and reason, how many times an
// at-least-once dead message could not be forwarded and stayed retained
// (each failed attempt counts).
func (d *DeadLetterer) RetainedStats() map[Key]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[Key]uint64, len(d.retained))
	for k, n := range d.retained {
		out[k] = n
	}
	return out
}

// countRetained counts a failed forwarding attempt of a retained message.
func (d *DeadLetterer) countRetained(ctx context.Context, src *router.Queue, dm *router.Dead, why string) {
	k := Key{VHost: src.VHost().Name(), Queue: src.Name(), Reason: dm.Reason}
	d.mu.Lock()
	d.retained[k]++
	d.mu.Unlock()
	d.log.DebugContext(ctx, "dead-lettered message retained", "vhost", k.VHost, "queue", k.Queue, "reason", string(dm.Reason), "why", why)
}

// retainedWhy words, for the log, why a retained message stays in its
// source: cause is a telemetry.Drop* value or whyRejected.
func retainedWhy(cause string) string {
	switch cause {
	case telemetry.DropNoDLX:
		return "no dead-letter exchange"
	case telemetry.DropNoRoute:
		return "no route"
	case telemetry.DropCycle:
		return "cycle"
	}
	return cause
}
