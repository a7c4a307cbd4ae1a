package router

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// An x-local-random exchange routes each message to exactly one of its
// bound classic queues, whatever the routing key, and each bound queue gets
// its share.
func TestLocalRandomExchangeRoutesEachMessageToOneBoundQueue(t *testing.T) {
	e := newEnv(t)
	created, err := e.v.DeclareExchange(ExchangeSpec{Name: "lr", Type: ExchangeLocalRandom, Durable: true})
	require.NoError(t, err)
	require.True(t, created)
	qs := []*Queue{e.queue(t, "a", Classic), e.queue(t, "b", Classic), e.queue(t, "c", Classic)}
	for _, q := range qs {
		require.NoError(t, e.v.Bind(Binding{Source: "lr", Destination: q.Name()}))
	}
	const n = 300
	for i := range n {
		keys := []string{"k", ""}[i%2:]
		routed, err := e.v.Route("lr", msg("m", keys...))
		require.NoError(t, err)
		require.Len(t, routed, 1, "one queue per message")
		assert.Equal(t, Accepted, e.publish(t, "lr", msg("m", keys...)))
	}
	total := 0
	for _, q := range qs {
		// Each queue is missed by all 300 picks with probability (2/3)^300.
		assert.Positive(t, q.Len(), "queue %s never picked", q.Name())
		total += q.Len()
	}
	assert.Equal(t, n, total)
}

// With no binding the message is unroutable: released, or to the
// alternate exchange when there is one (as for every exchange type).
func TestLocalRandomExchangeWithoutBindings(t *testing.T) {
	e := newEnv(t)
	_, err := e.v.DeclareExchange(ExchangeSpec{Name: "lr", Type: ExchangeLocalRandom})
	require.NoError(t, err)
	assert.Equal(t, Released, e.publish(t, "lr", msg("m", "k")))

	ae := e.queue(t, "ae-q", Classic)
	require.NoError(t, e.v.Bind(Binding{Source: "amq.fanout", Destination: "ae-q"}))
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "lr-ae", Type: ExchangeLocalRandom,
		Arguments: amqp10.Map{{Key: "alternate-exchange", Value: "amq.fanout"}}})
	require.NoError(t, err)
	assert.Equal(t, Accepted, e.publish(t, "lr-ae", msg("m", "k")))
	assert.Equal(t, 1, ae.Len())

	// The queue's deletion removes its binding: unroutable again.
	q := e.queue(t, "only", Classic)
	require.NoError(t, e.v.Bind(Binding{Source: "lr", Destination: "only"}))
	assert.Equal(t, Accepted, e.publish(t, "lr", msg("m", "k")))
	assert.Equal(t, 1, q.Len())
	_, err = e.v.DeleteQueue("only")
	require.NoError(t, err)
	assert.Equal(t, Released, e.publish(t, "lr", msg("m", "k")))
}

// RabbitMQ's validate_binding for x-local-random: an empty key, and a
// classic queue as destination; each refusal is a precondition failure
// with RabbitMQ's text, and nothing is bound.
func TestLocalRandomExchangeBindingRules(t *testing.T) {
	e := newEnv(t)
	_, err := e.v.DeclareExchange(ExchangeSpec{Name: "lr", Type: ExchangeLocalRandom})
	require.NoError(t, err)
	e.queue(t, "classic", Classic)
	e.queue(t, "quorum", Quorum)
	for _, tc := range []struct {
		name string
		b    Binding
		text string
	}{
		{"key", Binding{Source: "lr", Destination: "classic", Key: "k"}, "Non empty binding 'k' key not permitted"},
		{"quorum queue", Binding{Source: "lr", Destination: "quorum"}, "Queue type rabbit_quorum_queue not valid for this exchange type"},
		{"exchange", Binding{Source: "lr", Destination: "amq.fanout", DestinationIsExchange: true}, "Destination not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.v.Bind(tc.b)
			require.ErrorIs(t, err, ErrPreconditionFailed)
			assert.Contains(t, err.Error(), tc.text)
		})
	}
	for _, b := range e.v.Bindings() {
		assert.NotEqual(t, "lr", b.Source, "refused binding kept: %v", b)
	}
	// The exchange may itself be a destination of another exchange.
	require.NoError(t, e.v.Bind(Binding{Source: "amq.fanout", Destination: "lr", DestinationIsExchange: true}))
}

// Exchange types that RabbitMQ 4.3 has only as plugins, or not at all, are
// refused at declare with RabbitMQ's text naming the type.
func TestUnknownExchangeTypeRefused(t *testing.T) {
	e := newEnv(t)
	for _, typ := range []string{"x-consistent-hash", "x-random", "x-recent-history", "weird"} {
		_, err := e.v.DeclareExchange(ExchangeSpec{Name: "x", Type: typ})
		require.ErrorIs(t, err, ErrInvalidArgument, typ)
		assert.Contains(t, err.Error(), "unknown exchange type '"+typ+"'")
		assert.False(t, e.v.HasExchange("x"))
	}
}
