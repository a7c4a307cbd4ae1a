package deadletter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

func setup(t *testing.T, strict bool) (*router.VHost, *DeadLetterer) {
	t.Helper()
	now := time.UnixMilli(1700000000000)
	dl := New(Options{Now: func() time.Time { return now }, Strict: strict})
	b := router.New(router.Options{DeadLetterer: dl, Now: func() time.Time { return now }})
	t.Cleanup(b.Close)
	vh, ok := b.VHost("/")
	require.True(t, ok)
	return vh, dl
}

func declare(t *testing.T, vh *router.VHost, name string, args value.Map) *router.Queue {
	t.Helper()
	q, _, err := vh.DeclareQueue(router.QueueSpec{Name: name, Durable: true, Arguments: args})
	require.NoError(t, err)
	return q
}

func TestCopy(t *testing.T) {
	vh, dl := setup(t, false)
	src := declare(t, vh, "src", value.Map{{Key: "x-dead-letter-exchange", Value: "amq.direct"},
		{Key: "x-dead-letter-routing-key", Value: "dlk"}})
	wire := amqp10.NewMessage(nil, nil, []byte{0x00, 0x53, 0x75, 0xa0, 0x01, 'b'}, nil)
	m := router.NewAMQP10Message(wire)
	m.Header.TTL, m.Header.HasTTL = 500, true
	m.Exchange, m.RoutingKeys, m.DeliveryCount = "x", []string{"k", "cc"}, 3
	cp, h := dl.Copy(src, &router.Dead{Msg: *m, Reason: router.ReasonRejected,
		Error: &router.Error{Condition: "app:e", Description: "d"}}, "amq.direct")

	assert.Same(t, wire, cp.Container.(router.AMQP10).Wire, "the bare message is shared, not copied")
	assert.False(t, cp.Header.HasTTL, "the TTL is cleared")
	assert.Equal(t, "amq.direct", cp.Exchange)
	assert.Equal(t, []string{"dlk"}, cp.RoutingKeys)
	assert.Equal(t, uint32(3), cp.DeliveryCount)
	require.Len(t, h.Deaths, 1)
	d := h.Deaths[0]
	assert.Equal(t, annotations.Death{Queue: "src", Reason: "rejected", Count: 1, FirstTime: 1700000000000,
		LastTime: 1700000000000, Exchange: "x", RoutingKeys: []string{"k", "cc"}, TTL: 500, HasTTL: true}, d)
	// As an AMQP 1.0 consumer gets it:
	v, ok := annotations.ExpandAMQP10(nil, cp.Anns).Get(annotations.KeyLastDeathErrorCond)
	require.True(t, ok)
	assert.Equal(t, "app:e", v)
	assert.Nil(t, m.Anns, "the original message is not modified")
}

func TestStrictOmitsErrorAnnotations(t *testing.T) {
	vh, dl := setup(t, true)
	src := declare(t, vh, "src", value.Map{{Key: "x-dead-letter-exchange", Value: ""}})
	cp, _ := dl.Copy(src, &router.Dead{Msg: *router.NewAMQP10Message(&amqp10.Message{}), Reason: router.ReasonRejected,
		Error: &router.Error{Condition: "app:e"}}, "")
	_, ok := annotations.ExpandAMQP10(nil, cp.Anns).Get(annotations.KeyLastDeathErrorCond)
	assert.False(t, ok)
}

func TestRoutesAndCountsAndDropsCycles(t *testing.T) {
	vh, dl := setup(t, false)
	_, err := vh.DeclareExchange(router.ExchangeSpec{Name: "fan", Type: "fanout"})
	require.NoError(t, err)
	src := declare(t, vh, "src", value.Map{{Key: "x-dead-letter-exchange", Value: "fan"}})
	other := declare(t, vh, "other", nil)
	for _, q := range []string{"src", "other"} {
		require.NoError(t, vh.Bind(router.Binding{Source: "fan", Destination: q}))
	}
	noDLX := declare(t, vh, "plain", nil)
	missing := declare(t, vh, "missing", value.Map{{Key: "x-dead-letter-exchange", Value: "nope"}})

	msg := func() *router.Message {
		m := router.NewAMQP10Message(&amqp10.Message{})
		m.RoutingKeys = []string{"src"}
		return m
	}
	// expired from src: src itself would be a cycle, "other" is not.
	dl.DeadLetter(src, []router.Dead{{Msg: *msg(), Reason: router.ReasonExpired}})
	assert.Equal(t, 0, src.Len(), "the cycling target is dropped")
	assert.Equal(t, 1, other.Len())
	// rejected: no cycle, both targets get it.
	dl.DeadLetter(src, []router.Dead{{Msg: *msg(), Reason: router.ReasonRejected}})
	assert.Equal(t, 1, src.Len())
	assert.Equal(t, 2, other.Len())

	dl.DeadLetter(noDLX, []router.Dead{{Msg: *msg(), Reason: router.ReasonMaxLen}})
	dl.DeadLetter(missing, []router.Dead{{Msg: *msg(), Reason: router.ReasonExpired}})
	assert.Equal(t, Counts{DeadLettered: 1}, dl.QueueStats("/", "src")[router.ReasonExpired])
	assert.Equal(t, Counts{DeadLettered: 1}, dl.QueueStats("/", "src")[router.ReasonRejected])
	assert.Equal(t, Counts{DroppedNoDLX: 1}, dl.QueueStats("/", "plain")[router.ReasonMaxLen])
	assert.Equal(t, Counts{DroppedNoRoute: 1}, dl.QueueStats("/", "missing")[router.ReasonExpired])

	// An expired message whose only target is its own queue is a dropped cycle.
	self := declare(t, vh, "self", value.Map{{Key: "x-dead-letter-exchange", Value: ""}})
	m := msg()
	m.RoutingKeys = []string{"self"}
	dl.DeadLetter(self, []router.Dead{{Msg: *m, Reason: router.ReasonExpired}})
	assert.Equal(t, 0, self.Len())
	assert.Equal(t, Counts{DroppedCycle: 1}, dl.QueueStats("/", "self")[router.ReasonExpired])
	assert.Len(t, dl.Stats(), 5)
}
