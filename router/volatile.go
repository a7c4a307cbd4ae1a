package router

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// ReplyToPrefix starts the name of every volatile queue: RabbitMQ's direct
// reply-to queues ("amq.rabbitmq.reply-to." and a generated part).
const ReplyToPrefix = "amq.rabbitmq.reply-to."

// A volatile queue is RabbitMQ 4.2's direct reply-to queue: a name bound to
// one consumer, with no buffer and no record in the vhost's metadata (not
// listed, not exported, not bindable, never stored). A message routed to
// it by the default exchange goes straight to the consumer, pre-settled,
// if the consumer has credit for it, and is dropped otherwise: delivery is
// at most once, as RabbitMQ's. The queue lives as long as its consumer.

// VolatileConsumer takes the messages routed to its volatile queue.
type VolatileConsumer interface {
	// DeliverVolatile hands d over if the consumer has credit for it and
	// reports whether it did; false drops the message. It is called on
	// the publisher's goroutine with no router lock held and must not
	// block.
	DeliverVolatile(d Delivery) bool
}

// volatileQueues are a vhost's volatile queues by name. count lets a
// publish to the default exchange skip the lookup while there are none.
type volatileQueues struct {
	count atomic.Int64
	mu    sync.RWMutex
	byKey map[string]VolatileConsumer
	// dropped counts the messages dropped for want of credit.
	dropped atomic.Uint64
}

// DeclareVolatile creates a volatile queue for c and returns its name; the
// queue is gone once remove has been called.
func (v *VHost) DeclareVolatile(c VolatileConsumer) (name string, remove func()) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	name = ReplyToPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	vq := &v.volatile
	vq.mu.Lock()
	if vq.byKey == nil {
		vq.byKey = map[string]VolatileConsumer{}
	}
	vq.byKey[name] = c
	vq.mu.Unlock()
	vq.count.Add(1)
	var once sync.Once
	return name, func() {
		once.Do(func() {
			vq.mu.Lock()
			delete(vq.byKey, name)
			vq.mu.Unlock()
			vq.count.Add(-1)
		})
	}
}

// HasVolatile reports whether name is a live volatile queue.
func (v *VHost) HasVolatile(name string) bool {
	if !strings.HasPrefix(name, ReplyToPrefix) || v.volatile.count.Load() == 0 {
		return false
	}
	v.volatile.mu.RLock()
	_, ok := v.volatile.byKey[name]
	v.volatile.mu.RUnlock()
	return ok
}

// VolatileDropped is the number of messages the vhost's volatile queues
// dropped because their consumer had no credit.
func (v *VHost) VolatileDropped() uint64 { return v.volatile.dropped.Load() }

// routeVolatile hands m, published to the default exchange, to the
// volatile queues its routing keys name (each at most once) and returns
// how many they are: the message was routed to each, whether its consumer
// took it or it was dropped.
func (v *VHost) routeVolatile(m *Message) int {
	vq := &v.volatile
	if vq.count.Load() == 0 {
		return 0
	}
	routed := 0
	for i, key := range m.RoutingKeys {
		if !strings.HasPrefix(key, ReplyToPrefix) || slices.Contains(m.RoutingKeys[:i], key) {
			continue
		}
		vq.mu.RLock()
		c, ok := vq.byKey[key]
		vq.mu.RUnlock()
		if !ok {
			continue
		}
		routed++
		h := m.Header
		h.DeliveryCount, h.FirstAcquirer = 0, !hasDeaths(m.Anns)
		if !c.DeliverVolatile(Delivery{Msg: m, Header: h, anns: m.Anns}) {
			// At most once by design, as RabbitMQ's volatile queue (which
			// counts these as dead-lettered maxlen, strategy disabled): the
			// loss is counted and logged, never silent.
			vq.dropped.Add(1)
			v.b.storeLog.Log(slog.LevelInfo, "volatile queue drop",
				"direct reply-to message dropped: its consumer has no credit",
				"vhost", v.name, "queue", key, "dropped_total", vq.dropped.Load())
		}
	}
	return routed
}
