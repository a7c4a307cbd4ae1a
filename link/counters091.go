package link

import "github.com/epitaph-mq/epitaph/router"

// The AMQP 0-9-1 front end counts into the same Counters, so that the
// metrics cover both protocols: a connection is a connection, a channel
// counts as a session, a consumer as a consumer link.

// ConnectionAdded counts a connection opened (delta 1) or closed (-1).
func (c *Counters) ConnectionAdded(delta int64) { c.connections.Add(delta) }

// ChannelAdded counts an AMQP 0-9-1 channel (as a session).
func (c *Counters) ChannelAdded(delta int64) { c.sessions.Add(delta) }

// ConsumerAdded counts a consumer started (1) or ended (-1).
func (c *Counters) ConsumerAdded(delta int64) {
	c.links.Add(delta)
	c.consumers.Add(delta)
}

// Published counts one publish as RabbitMQ's global counters do:
// confirm says the publisher expects an outcome (AMQP 0-9-1: confirm
// mode), returned that an unroutable message went back (basic.return).
func (c *Counters) Published(queues []*router.Queue, kind router.OutcomeKind, confirm, returned bool) {
	c.received.Add(1)
	if confirm {
		c.receivedConfirm.Add(1)
		if kind == router.Accepted {
			c.confirmed.Add(1)
		}
	}
	switch {
	case len(queues) > 0:
		c.routed.Add(uint64(len(queues)))
		for _, q := range queues {
			c.queue(q).Routed.Add(1)
		}
	case kind != router.Released:
	case returned:
		c.unroutableRetd.Add(1)
	default:
		c.unroutableDropped.Add(1)
	}
}

// Delivered counts a delivery from q (autoAck: no acknowledgement expected).
func (c *Counters) Delivered(q *router.Queue, autoAck bool) {
	qc := c.queue(q)
	qc.Delivered.Add(1)
	if autoAck {
		qc.DeliveredAutoAck.Add(1)
	}
}

// Settled counts n consumer outcomes o on q.
func (c *Counters) Settled(q *router.Queue, o router.Settlement, n int) {
	qc := c.queue(q)
	for range n {
		qc.settled(&o)
	}
}
