package link

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/epitaph-mq/epitaph/router"
)

// Counters count what a Server's connections do, for metrics. Pass one in
// Options.Counters; nil counts nothing (metrics off), which costs a nil
// check per message. The counting is lock-free on the message paths; per
// queue counters are looked up when a link attaches (consumers) or per
// routed queue (publishes, under a read lock).
type Counters struct {
	connections, sessions, links atomic.Int64
	publishers, consumers        atomic.Int64

	received, receivedConfirm, routed atomic.Uint64
	unroutableDropped, unroutableRetd atomic.Uint64
	confirmed                         atomic.Uint64

	mu     sync.RWMutex
	queues map[QueueKey]*QueueCounters
}

// NewCounters returns zeroed counters.
func NewCounters() *Counters { return &Counters{queues: make(map[QueueKey]*QueueCounters)} }

// QueueKey names a queue in the per-queue counters.
type QueueKey struct{ VHost, Queue string }

// QueueCounters count one queue's traffic through links (all since start;
// they outlive the queue).
type QueueCounters struct {
	Type router.QueueType
	// Routed: messages published (not dead-lettered) into the queue.
	Routed atomic.Uint64
	// Delivered to consumers; DeliveredAutoAck of them pre-settled.
	Delivered, DeliveredAutoAck atomic.Uint64
	// Acknowledged: accepted. Requeued: released, or modified without
	// undeliverable-here. Rejected: rejected, or modified undeliverable-here.
	Acknowledged, Requeued, Rejected atomic.Uint64
}

// queue returns q's counters, creating them.
func (c *Counters) queue(q *router.Queue) *QueueCounters {
	k := QueueKey{VHost: q.VHost().Name(), Queue: q.Name()}
	c.mu.RLock()
	qc := c.queues[k]
	c.mu.RUnlock()
	if qc != nil {
		return qc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if qc = c.queues[k]; qc == nil {
		qc = &QueueCounters{Type: q.Type()}
		c.queues[k] = qc
	}
	return qc
}

// Snapshot is a point-in-time copy of Counters.
type Snapshot struct {
	Connections, Sessions, Links int64
	// Publishers and Consumers are attached links (management links excluded).
	Publishers, Consumers int64
	// Received messages from publishers; ReceivedConfirm of them unsettled
	// (the publisher expects an outcome).
	Received, ReceivedConfirm uint64
	// Routed counts queue deliveries: a message routed to 3 queues adds 3,
	// as RabbitMQ's messages_routed_total.
	Routed uint64
	// UnroutableDropped: pre-settled unroutable messages; UnroutableReturned:
	// unsettled ones, answered with released.
	UnroutableDropped, UnroutableReturned uint64
	// Confirmed: publishes answered with accepted.
	Confirmed uint64
	Queues    []QueueSnapshot // sorted by vhost, queue
}

// QueueSnapshot is one queue's counters.
type QueueSnapshot struct {
	QueueKey
	Type                                                                  router.QueueType
	Routed, Delivered, DeliveredAutoAck, Acknowledged, Requeued, Rejected uint64
}

// Snapshot reads the counters.
func (c *Counters) Snapshot() Snapshot {
	s := Snapshot{
		Connections: c.connections.Load(), Sessions: c.sessions.Load(), Links: c.links.Load(),
		Publishers: c.publishers.Load(), Consumers: c.consumers.Load(),
		Received: c.received.Load(), ReceivedConfirm: c.receivedConfirm.Load(), Routed: c.routed.Load(),
		UnroutableDropped: c.unroutableDropped.Load(), UnroutableReturned: c.unroutableRetd.Load(),
		Confirmed: c.confirmed.Load(),
	}
	c.mu.RLock()
	for k, q := range c.queues {
		s.Queues = append(s.Queues, QueueSnapshot{QueueKey: k, Type: q.Type,
			Routed: q.Routed.Load(), Delivered: q.Delivered.Load(), DeliveredAutoAck: q.DeliveredAutoAck.Load(),
			Acknowledged: q.Acknowledged.Load(), Requeued: q.Requeued.Load(), Rejected: q.Rejected.Load()})
	}
	c.mu.RUnlock()
	slices.SortFunc(s.Queues, func(a, b QueueSnapshot) int {
		if c := strings.Compare(a.VHost, b.VHost); c != 0 {
			return c
		}
		return strings.Compare(a.Queue, b.Queue)
	})
	return s
}

// settled counts a consumer's outcome.
func (qc *QueueCounters) settled(o *router.Settlement) {
	switch o.Kind {
	case router.SettleAccept:
		qc.Acknowledged.Add(1)
	case router.SettleReject:
		qc.Rejected.Add(1)
	case router.SettleRelease:
		qc.Requeued.Add(1)
	case router.SettleModify:
		if o.UndeliverableHere {
			qc.Rejected.Add(1)
		} else {
			qc.Requeued.Add(1)
		}
	}
}

// linkAdded keeps the link gauges: delta is 1 when l is attached and -1
// when it goes.
func (c *Counters) linkAdded(l endpoint, delta int64) {
	c.links.Add(delta)
	switch l := l.(type) {
	case *senderLink:
		c.consumers.Add(delta)
	case *receiverLink:
		if !l.mgmt {
			c.publishers.Add(delta)
		}
	}
}
