package channel

import (
	"cmp"
	"slices"

	"github.com/epitaph-mq/epitaph/link"
)

// forgetChannel removes a closed channel (the reader).
func (c *conn) forgetChannel(id uint16) {
	c.chMu.Lock()
	delete(c.channels, id)
	c.chMu.Unlock()
}

// listChannels lists the open channels for the HTTP API, in channel
// number order; any goroutine.
func (c *conn) listChannels() []link.AMQP091Channel {
	c.chMu.Lock()
	chans := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chans = append(chans, ch)
	}
	c.chMu.Unlock()
	out := make([]link.AMQP091Channel, 0, len(chans))
	for _, ch := range chans {
		ch.mu.Lock()
		if !ch.ended {
			out = append(out, link.AMQP091Channel{Number: ch.id, Consumers: len(ch.consumers),
				Unacknowledged: len(ch.unacked), Unconfirmed: len(ch.unconfirmed), Prefetch: ch.prefetch,
				Confirm: ch.confirm, Transactional: ch.tx != nil})
		}
		ch.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b link.AMQP091Channel) int { return cmp.Compare(a.Number, b.Number) })
	return out
}
