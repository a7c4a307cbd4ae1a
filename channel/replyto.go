package channel

import (
	"strings"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/router"
)

// replyToQueue is the pseudo-queue a direct reply-to consumer consumes
// from and a requester names as its reply_to.
const replyToQueue = "amq.rabbitmq.reply-to"

// replyConsumer is a channel's direct reply-to consumer (RabbitMQ's
// basic.consume on amq.rabbitmq.reply-to): a volatile queue of the router
// whose messages go straight to the client, no-ack, never stored. A
// channel has at most one.
type replyConsumer struct {
	ch     *channel
	tag    string
	name   string // the volatile queue: amq.rabbitmq.reply-to.<random>
	remove func()
	buf    []byte
}

// DeliverVolatile implements router.VolatileConsumer. A 0-9-1 reply
// consumer has no credit limit (RabbitMQ's simple_prefetch 0): it takes
// every message while its channel is open.
func (r *replyConsumer) DeliverVolatile(d router.Delivery) bool {
	r.ch.mu.Lock()
	live := !r.ch.ended && r.ch.reply == r
	r.ch.mu.Unlock()
	if !live {
		return false
	}
	r.ch.c.post(mailItem{reply: r, d: d})
	return true
}

// write appends one reply to the connection's output (the deliverer's
// goroutine) and returns the output's length. A reply that arrives after
// its consumer was cancelled is dropped, as RabbitMQ's volatile queue does.
func (r *replyConsumer) write(d *router.Delivery) (int, error) {
	ch := r.ch
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.ended || ch.reply != r {
		return 0, nil
	}
	out, err := router.Delivery091Of(d, r.buf)
	if err != nil {
		ch.c.log.Warn("direct reply-to message not convertible to AMQP 0-9-1; dropped", "queue", r.name, "err", err)
		return 0, nil
	}
	ch.nextTag++
	deliver := amqp091.BasicDeliver{ConsumerTag: r.tag, DeliveryTag: ch.nextTag, Exchange: out.Exchange, RoutingKey: out.RoutingKey}
	n, err := ch.c.appendContent(ch.id, &deliver, out.Props, out.Body)
	if cap(out.Props) <= 4096 {
		r.buf = out.Props[:0]
	}
	return n, err
}

// consumeReply starts the channel's direct reply-to consumer, as RabbitMQ
// 4.3's channel does: no-ack only, one per channel.
func (ch *channel) consumeReply(m *amqp091.BasicConsume) error {
	tag := m.ConsumerTag
	if tag == "" {
		tag = newTag()
	}
	ch.mu.Lock()
	_, reused := ch.consumers[tag]
	current := ch.reply
	ch.mu.Unlock()
	switch {
	case reused || current != nil && current.tag == tag:
		return connErr(amqp091.NotAllowed, 60, 20, "attempt to reuse consumer tag '%s'", tag)
	case !m.NoAck:
		return ch.err(amqp091.PreconditionFailed, 60, 20, "reply consumer cannot acknowledge")
	case current != nil:
		return ch.err(amqp091.PreconditionFailed, 60, 20, "reply consumer already set")
	}
	r := &replyConsumer{ch: ch, tag: tag}
	ch.mu.Lock()
	ch.reply = r
	ch.mu.Unlock()
	r.name, r.remove = ch.c.vhost.DeclareVolatile(r)
	return ch.okUnlessNoWait(m.NoWait, &amqp091.BasicConsumeOk{ConsumerTag: tag})
}

// cancelReply ends the direct reply-to consumer if tag is its tag.
func (ch *channel) cancelReply(tag string) bool {
	ch.mu.Lock()
	r := ch.reply
	if r == nil || r.tag != tag {
		ch.mu.Unlock()
		return false
	}
	ch.reply = nil
	ch.mu.Unlock()
	r.remove()
	return true
}

// replyTo is the reply_to a publish on this channel carries: the bare
// amq.rabbitmq.reply-to is replaced by the channel's volatile queue
// (RabbitMQ's override_reply_to), and is refused without a reply
// consumer on the channel.
func (ch *channel) replyTo(p *amqp091.Properties) (rewritten bool, err error) {
	if !p.Has(amqp091.FlagReplyTo) || p.ReplyTo != replyToQueue {
		return false, nil
	}
	ch.mu.Lock()
	r := ch.reply
	ch.mu.Unlock()
	if r == nil {
		return false, ch.err(amqp091.PreconditionFailed, 60, 40, "fast reply consumer does not exist")
	}
	p.ReplyTo = r.name
	return true, nil
}

// isVolatileName reports whether name is a direct reply-to queue's.
func isVolatileName(name string) bool { return strings.HasPrefix(name, router.ReplyToPrefix) }

// declareReplyTo answers queue.declare of a direct reply-to name: every
// such declare is passive (RabbitMQ 4.3). The pseudo-queue and a live
// volatile queue exist, with no messages and one consumer.
func (ch *channel) declareReplyTo(name string, noWait bool) error {
	vh := ch.c.vhost
	if name != replyToQueue && !vh.HasVolatile(name) {
		return ch.err(amqp091.NotFound, 50, 10, "no queue '%s' in vhost '%s'", name, vh.Name())
	}
	return ch.okUnlessNoWait(noWait, &amqp091.QueueDeclareOk{Queue: name, MessageCount: 0, ConsumerCount: 1})
}
