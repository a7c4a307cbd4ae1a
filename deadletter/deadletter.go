// Package deadletter decides where a dead message goes and builds its
// dead-letter copy, as RabbitMQ 4.3 does: it records the death with package annotations, clears the
// message TTL, replaces the exchange and routing keys, routes the copy
// through the dead-letter exchange like any publish, drops cycling targets,
// and counts what it dead-letters, what it drops and, at least once, what
// stays retained in its source queue.
//
// It implements router.DeadLetterer; the root package wires it into the
// router, which never imports this package.
package deadletter

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/ratelog"
	"github.com/epitaph-mq/epitaph/telemetry"
	"github.com/epitaph-mq/epitaph/value"
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
	// Tracer records a span per dead-letter hop and writes its context into
	// the copy's x-opt-traceparent annotation; nil is tracing off.
	Tracer *telemetry.Tracer
	// Events receives an event per death (package dlevents); nil
	// publishes none.
	Events *dlevents.Hub
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

// Strategy labels, as RabbitMQ's dead_letter_strategy metric label.
const (
	StrategyDisabled    = "disabled"      // no dead-letter exchange: the message is dropped
	StrategyAtMostOnce  = "at_most_once"  // RabbitMQ's default: the source has already let go of the message
	StrategyAtLeastOnce = "at_least_once" // quorum queues: retained in the source until a target takes the copy
)

// GlobalKey identifies a counter of RabbitMQ's global dead-letter family
// (rabbitmq_global_messages_dead_lettered_<reason>_total).
type GlobalKey struct {
	QueueType router.QueueType
	Strategy  string // StrategyDisabled, StrategyAtMostOnce or StrategyAtLeastOnce
	Reason    router.Reason
}

// DeadLetterer dead-letters messages with either strategy: at most once
// (RabbitMQ's default: the source queue has already removed the message) or
// at least once (Dead.Retained: the message stays in its source queue until a
// target takes the copy; see atleastonce.go). Both go through forward.
//
// Its counters are its own fields, so a DeadLetterer and everything it
// counted go away with the broker that used it.
type DeadLetterer struct {
	log    *slog.Logger
	now    func() time.Time
	strict bool
	tr     *telemetry.Tracer
	events *dlevents.Hub

	mu     sync.Mutex
	counts map[Key]*Counts
	global map[GlobalKey]uint64
	// retained counts the failed forwarding attempts of at-least-once
	// messages, which stay in their source (RetainedStats).
	retained map[Key]uint64
	// refused counts the at-most-once copies each target queue refused
	// (RefusedCopies); refusedLog reports them, once per target per
	// interval.
	refused    map[QueueKey]uint64
	refusedLog *ratelog.Limiter
}

// QueueKey names a queue.
type QueueKey struct {
	VHost, Queue string
}

// New returns a DeadLetterer.
func New(opts Options) *DeadLetterer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &DeadLetterer{log: opts.Logger, now: opts.Now, strict: opts.Strict, tr: opts.Tracer, events: opts.Events,
		counts: make(map[Key]*Counts), global: make(map[GlobalKey]uint64), retained: make(map[Key]uint64),
		refused: make(map[QueueKey]uint64), refusedLog: ratelog.New(opts.Logger, 0)}
}

// RefusedCopies returns, per target queue, how many at-most-once
// dead-letter copies it refused (x-overflow reject-publish, or deleted
// while the copy was on its way). Such a copy is lost; the message is lost
// when none of its targets took it. RabbitMQ counts these messages as
// dead-lettered and says no more; epitaph counts them there too, and here.
func (d *DeadLetterer) RefusedCopies() map[QueueKey]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.refused)
}

// copiesRefused records n at-most-once copies refused by target and logs
// it (at most once per target every ten seconds).
func (d *DeadLetterer) copiesRefused(src, target *router.Queue, n int) {
	if n <= 0 {
		return
	}
	k := QueueKey{VHost: target.VHost().Name(), Queue: target.Name()}
	d.mu.Lock()
	d.refused[k] += uint64(n)
	total := d.refused[k]
	d.mu.Unlock()
	d.refusedLog.Warn("refused "+k.VHost+"/"+k.Queue,
		"dead-letter copies refused by their target queue and lost (at most once); a message no other target took is lost",
		"vhost", k.VHost, "target_queue", k.Queue, "source_queue", src.Name(), "refused", n, "refused_total", total)
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

// GlobalStats returns a snapshot of RabbitMQ's global dead-letter counters:
// every message that died, by source queue type, strategy and reason, as
// rabbit_global_counters counts them (a message dropped for want of a
// dead-letter exchange counts under StrategyDisabled; one dead-lettered,
// or dropped for no route or as a cycle, under StrategyAtMostOnce; an
// at-least-once message once it is forwarded, under StrategyAtLeastOnce).
func (d *DeadLetterer) GlobalStats() map[GlobalKey]uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[GlobalKey]uint64, len(d.global))
	for k, n := range d.global {
		out[k] = n
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

// add adds delta to the counters of src and reason; strategy is the global
// counters' label of all but the messages dropped for want of a DLX.
func (d *DeadLetterer) add(src *router.Queue, reason router.Reason, strategy string, delta *Counts) {
	k := Key{VHost: src.VHost().Name(), Queue: src.Name(), Reason: reason}
	d.mu.Lock()
	c := d.counts[k]
	if c == nil {
		c = new(Counts)
		d.counts[k] = c
	}
	c.DeadLettered += delta.DeadLettered
	c.DroppedNoDLX += delta.DroppedNoDLX
	c.DroppedNoRoute += delta.DroppedNoRoute
	c.DroppedCycle += delta.DroppedCycle
	if n := delta.DeadLettered + delta.DroppedNoRoute + delta.DroppedCycle; n > 0 {
		d.global[GlobalKey{QueueType: src.Type(), Strategy: strategy, Reason: reason}] += n
	}
	if delta.DroppedNoDLX > 0 {
		d.global[GlobalKey{QueueType: src.Type(), Strategy: StrategyDisabled, Reason: reason}] += delta.DroppedNoDLX
	}
	d.mu.Unlock()
}

// batch gathers what one DeadLetter call does, so that it takes each lock
// once per run rather than once per message: the counters of a run of one
// reason and strategy, and the at-most-once copies of a run bound for one
// queue.
type batch struct {
	d        *DeadLetterer
	src      *router.Queue
	reason   router.Reason
	strategy string
	now      time.Time // the deaths' time (first-time, last-time)
	counts   Counts
	q        *router.Queue
	msgs     []*router.Message
	// targets is the last message's routing result, reused for the next.
	targets []*router.Queue
}

// batches keeps batch values between DeadLetter calls: a call usually
// dead-letters a few messages, and reusing the storage of its slices saves
// several allocations per call.
var batches = sync.Pool{New: func() any { return new(batch) }}

// release clears what the batch refers to and returns it to the pool.
func (b *batch) release() {
	clear(b.targets)
	*b = batch{msgs: b.msgs[:0], targets: b.targets[:0]}
	batches.Put(b)
}

// copyAlloc is a dead-letter copy with room for the broker annotations of
// a first death of a message without any: the history entry and the error
// entry of a rejection that carries one.
type copyAlloc struct {
	msg  router.Message
	anns [2]value.KV
}

// tally counts one message's fate under reason and strategy: dead-lettered
// when cause is "", else dropped for cause (a telemetry.Drop* value).
func (b *batch) tally(reason router.Reason, strategy, cause string) {
	if b.reason != reason || b.strategy != strategy {
		b.flushCounts()
		b.reason, b.strategy = reason, strategy
	}
	switch cause {
	case "":
		b.counts.DeadLettered++
	case telemetry.DropNoDLX:
		b.counts.DroppedNoDLX++
	case telemetry.DropNoRoute:
		b.counts.DroppedNoRoute++
	case telemetry.DropCycle:
		b.counts.DroppedCycle++
	}
}

func (b *batch) flushCounts() {
	if b.counts != (Counts{}) {
		b.d.add(b.src, b.reason, b.strategy, &b.counts)
		b.counts = Counts{}
	}
}

// enqueue puts m on q after the copies before it (§2.9 order).
func (b *batch) enqueue(q *router.Queue, m *router.Message) {
	if b.q != q {
		b.flushCopies()
		b.q = q
	}
	b.msgs = append(b.msgs, m)
}

func (b *batch) flushCopies() {
	if len(b.msgs) > 0 {
		// At most once: a target that refuses a copy (reject-publish) loses
		// it, which is counted and logged.
		b.d.copiesRefused(b.src, b.q, b.q.EnqueueBatch(b.msgs))
		clear(b.msgs)
		b.msgs = b.msgs[:0]
	}
	b.q = nil
}

func (b *batch) flush() {
	b.flushCopies()
	b.flushCounts()
}

// DeadLetter implements router.DeadLetterer. It handles the messages in the
// order they died (§2.9).
func (d *DeadLetterer) DeadLetter(src *router.Queue, dead []router.Dead) {
	b := batches.Get().(*batch)
	defer b.release()
	// One clock read per batch: its deaths happen in the same instant.
	b.d, b.src, b.now = d, src, d.now()
	for i := range dead {
		if dead[i].Retained {
			// An at-least-once attempt is counted as soon as it is made,
			// after everything before it.
			b.flush()
			d.forward(src, &dead[i], b)
			b.flushCounts()
			continue
		}
		d.forward(src, &dead[i], b)
	}
	b.flush()
}

// whyRejected is the cause of an at-least-once message that every target
// refused (reject-publish): it stays retained.
const whyRejected = "rejected by every target"

// forward dead-letters one message with its queue's strategy: it builds the
// copy, routes it through the dead-letter exchange, drops the targets that
// would be a cycle and hands the copy to the others. A message that reaches
// no target is dropped (at most once) or stays retained (Dead.Retained, at
// least once) through notForwarded.
func (d *DeadLetterer) forward(src *router.Queue, dm *router.Dead, b *batch) {
	var (
		ctx  = context.Background()
		span trace.Span
		hop  *telemetry.DeadLetter
	)
	dlx, ok := src.DeadLetterExchange()
	// ev is this death's event, built only while someone listens.
	var ev *dlevents.Event
	if d.events.Active() {
		at := b.now
		if dm.Retained && !dm.Time.IsZero() {
			at = dm.Time
		}
		ev = newEvent(src, dm, at)
		ev.Exchange, ev.HasExchange = dlx, ok
	}
	// Retained (at-least-once) attempts get no span yet; the README lists
	// this among the gaps.
	if d.tr != nil && !dm.Retained {
		hop = &telemetry.DeadLetter{Source: src, Reason: dm.Reason, Exchange: dlx, HasExchange: ok,
			Strategy: src.DeadLetterStrategy(), RoutingKeys: dm.Msg.RoutingKeys}
		if !ok {
			hop.Strategy = StrategyDisabled
			hop.Count = deathCount(dm.Msg.Anns, src.Name(), dm.Reason)
			_, span = d.tr.StartDeadLetter(ctx, dm.Msg.Anns, dm.Msg.Container, hop)
		}
	}
	if !ok {
		if ev != nil {
			ev.Count = deathCount(dm.Msg.Anns, src.Name(), dm.Reason)
			if !dm.Retained {
				ev.Strategy = StrategyDisabled
			}
		}
		b.notForwarded(ctx, dm, telemetry.DropNoDLX, dlx, nil, ev)
		if span != nil {
			telemetry.EndDeadLetter(span, nil, nil, telemetry.DropNoDLX, nil)
		}
		return
	}
	at := b.now
	if dm.Retained {
		// The death of a retained message is its first attempt, kept
		// across retries and restarts, as rabbit_fifo_dlx_worker records it.
		if at = dm.Time; at.IsZero() {
			at = d.now()
		}
	}
	cp, h := d.copyAt(src, dm, dlx, at)
	if ev != nil {
		ev.RoutingKeys = cp.RoutingKeys
		if len(h.Deaths) > 0 {
			ev.Count = h.Deaths[0].Count
		}
	}
	if hop != nil {
		hop.RoutingKeys = cp.RoutingKeys
		if len(h.Deaths) > 0 {
			hop.Count = h.Deaths[0].Count // Record puts this death's {queue, reason} entry first
		}
		ctx, span = d.tr.StartDeadLetter(ctx, dm.Msg.Anns, dm.Msg.Container, hop)
		// The copy carries this hop's context: its deliveries, and any
		// further dead-lettering, continue the producer's trace from here.
		cp.Anns = telemetry.Inject(cp.Anns, span.SpanContext())
	}
	targets, err := src.VHost().RouteAppend(b.targets, dlx, cp)
	b.targets = targets
	if err != nil || len(targets) == 0 {
		b.notForwarded(ctx, dm, telemetry.DropNoRoute, dlx, err, ev)
		if span != nil {
			if err == nil {
				err = errors.New("the dead-letter exchange routed the message to no queue")
			}
			telemetry.EndDeadLetter(span, nil, nil, telemetry.DropNoRoute, err)
		}
		return
	}
	// §2.6: drop targets that would be a cycle; the others still get it.
	targets, cycles := dropCycles(h, targets, span != nil || ev != nil)
	if ev != nil {
		ev.CycleQueues = queueNames(cycles)
	}
	if len(targets) == 0 {
		b.notForwarded(ctx, dm, telemetry.DropCycle, dlx, nil, ev)
		if span != nil {
			telemetry.EndDeadLetter(span, nil, cycles, telemetry.DropCycle, errors.New("dead-letter cycle"))
		}
		return
	}
	strategy := StrategyAtMostOnce
	if dm.Durable() || dm.Retained {
		// Stored in its source (or retained there): the copies and the
		// removal of the source's stored copy are one atomic store step,
		// and for a retained message only if a target took the copy.
		b.flushCopies()
		states, moved := src.ForwardDead(dm, cp, targets)
		if ev != nil {
			ev.TargetQueues, ev.RefusedQueues = outcomesSplit(targets, states)
		}
		if !dm.Retained {
			for i, q := range targets {
				if i < len(states) && states[i].Kind != router.Accepted {
					d.copiesRefused(src, q, 1)
				}
			}
		}
		if dm.Retained {
			if !moved {
				// nil states: no longer retained (already moved, or
				// dropped by a switch to at-most-once); nothing to count.
				if states != nil {
					b.notForwarded(ctx, dm, whyRejected, dlx, nil, ev)
				}
				return
			}
			strategy = StrategyAtLeastOnce
		}
	} else if ev != nil {
		// Someone listens: enqueue one by one to learn which target
		// refused the copy (the batch would not tell).
		b.flushCopies()
		ev.TargetQueues, ev.RefusedQueues = d.enqueueReporting(src, cp, targets)
	} else {
		for _, q := range targets {
			b.enqueue(q, cp)
		}
	}
	b.tally(dm.Reason, strategy, "")
	if ev != nil {
		ev.Outcome = dlevents.OutcomeDeadLettered
		if len(ev.TargetQueues) == 0 {
			// At most once, every target refused the copy: it is lost.
			ev.Outcome, ev.DropCause = dlevents.OutcomeDropped, dlevents.CauseRejected
		}
		d.events.Publish(ev)
	}
	if span != nil {
		b.flushCopies() // the span covers the enqueue
		telemetry.EndDeadLetter(span, targets, cycles, "", nil)
	}
}

// notForwarded counts and logs a dead message that reached no target for
// cause (a telemetry.Drop* value, or whyRejected): at most once it is
// dropped; at least once it stays retained in its source for the next retry.
// ev, when someone listens, is the death's event, published here.
func (b *batch) notForwarded(ctx context.Context, dm *router.Dead, cause, dlx string, err error, ev *dlevents.Event) {
	d, src := b.d, b.src
	if ev != nil {
		ev.Outcome, ev.DropCause = dlevents.OutcomeDropped, eventCause(cause)
		if dm.Retained {
			ev.Outcome = dlevents.OutcomeRetained
		}
		d.events.Publish(ev)
	}
	if dm.Retained {
		d.countRetained(ctx, src, dm, retainedWhy(cause))
		return
	}
	b.tally(dm.Reason, StrategyAtMostOnce, cause)
	switch cause {
	case telemetry.DropNoRoute:
		d.log.DebugContext(ctx, "dead-lettered message dropped: no route", "vhost", src.VHost().Name(), "queue", src.Name(),
			"reason", string(dm.Reason), "dlx", dlx, "err", err)
	case telemetry.DropCycle:
		d.log.WarnContext(ctx, "dead-letter cycle: message dropped", "vhost", src.VHost().Name(), "queue", src.Name(),
			"reason", string(dm.Reason), "dlx", dlx)
	}
}

// dropCycles removes, in place, the targets that would be a dead-letter
// cycle (§2.6) and, with keep, returns those too (for the span).
func dropCycles(h annotations.History, targets []*router.Queue, keep bool) (rest, cycles []*router.Queue) {
	n := 0
	for _, q := range targets {
		if annotations.IsCycle(h, q.Name()) {
			if keep {
				cycles = append(cycles, q)
			}
			continue
		}
		targets[n] = q
		n++
	}
	return targets[:n], cycles
}

// deathCount is the x-opt-deaths count for {queue, reason} once this death
// is recorded (for the span of a message dropped without a DLX, which gets
// no copy).
func deathCount(anns value.Map, queue string, reason router.Reason) uint64 {
	h, ok := annotations.HistoryOf(anns)
	if !ok {
		return 1
	}
	for _, d := range h.Deaths {
		if d.Queue == queue && d.Reason == string(reason) {
			return d.Count + 1
		}
	}
	return 1
}

// Copy builds the dead-letter copy of dm leaving src for exchange dlx
// (§3.1) and returns it with its updated history. The bare message is shared,
// byte for byte; the header loses its TTL (kept in the death's ttl); the
// exchange becomes dlx; the routing keys become the dead-letter routing key
// or else all the original keys (x-cc included); the delivery count is
// carried; the death is recorded in the copy's history (the neutral form
// of x-opt-deaths and the x-*-death-* annotations, which the front ends
// write on delivery).
func (d *DeadLetterer) Copy(src *router.Queue, dm *router.Dead, dlx string) (*router.Message, annotations.History) {
	return d.copyAt(src, dm, dlx, d.now())
}

// copyAt is Copy with the death recorded at t (for a retained message: its
// first attempt, kept across retries and restarts).
func (d *DeadLetterer) copyAt(src *router.Queue, dm *router.Dead, dlx string, t time.Time) (*router.Message, annotations.History) {
	m := &dm.Msg
	keys := m.RoutingKeys // never modified once published: the copy shares them
	if dlrk, ok := src.DeadLetterRoutingKey(); ok {
		keys = []string{dlrk}
	}
	hdr := m.Header
	hdr.TTL, hdr.HasTTL = 0, false
	var cp *router.Message
	var anns value.Map
	if len(m.Anns) == 0 {
		// A first death: the copy and its annotations in one allocation.
		ca := new(copyAlloc)
		cp, anns = &ca.msg, ca.anns[:0]
	} else {
		cp = new(router.Message)
	}
	anns, h := annotations.RecordIn(anns, m.Anns, annotations.Event{
		Queue:       src.Name(),
		Reason:      string(dm.Reason),
		Exchange:    m.Exchange,
		RoutingKeys: m.RoutingKeys,
		TTL:         m.Header.TTL,
		HasTTL:      m.Header.HasTTL,
		Time:        value.Timestamp(t.UnixMilli()),
		Error:       deathError(dm.Error),
	}, d.strict)
	*cp = router.Message{
		Container:     m.Container,
		Header:        hdr,
		Exchange:      dlx,
		RoutingKeys:   keys,
		DeliveryCount: m.DeliveryCount,
		Anns:          anns,
	}
	return cp, *h
}

// deathError is the consumer's rejected error as the history records it.
func deathError(e *router.Error) *annotations.DeathError {
	if e == nil {
		return nil
	}
	return &annotations.DeathError{Condition: e.Condition, Description: e.Description}
}
