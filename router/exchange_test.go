package router

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

func TestStandardExchanges(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"", "amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"} {
		assert.True(t, e.v.HasExchange(name), name)
	}
	info, ok := e.v.Exchange("amq.match")
	require.True(t, ok)
	assert.Equal(t, ExchangeHeaders, info.Type)
	assert.Len(t, e.v.Exchanges(), 6)

	v2 := e.b.AddVHost("other")
	assert.Same(t, v2, e.b.AddVHost("other"))
	assert.True(t, v2.HasExchange("amq.topic"))
	assert.Equal(t, []string{"/", "other"}, e.b.VHosts())
}

func TestDefaultExchange(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q1", Classic)
	e.queue(t, "q2", Classic)
	assert.Equal(t, Accepted, e.publish(t, "", msg("m", "q1")))
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, Accepted, e.publish(t, "amq.default", msg("m", "q1")))
	assert.Equal(t, 2, q.Len())
	assert.Equal(t, Released, e.publish(t, "", msg("m", "nope")))

	// x-cc keys: both queues, deduplicated.
	assert.Equal(t, Accepted, e.publish(t, "", msg("m", "q1", "q2", "q1")))
	assert.Equal(t, 3, q.Len())

	err := e.v.Bind(Binding{Source: "", Destination: "q1", Key: "k"})
	require.ErrorIs(t, err, ErrAccessRefused)
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "", Type: "direct"})
	require.ErrorIs(t, err, ErrAccessRefused)
	require.ErrorIs(t, e.v.DeleteExchange(""), ErrAccessRefused)
	require.ErrorIs(t, e.v.DeleteExchange("amq.direct"), ErrAccessRefused)
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "amq.custom", Type: "direct"})
	require.ErrorIs(t, err, ErrAccessRefused)
}

func TestPublishMissingExchange(t *testing.T) {
	e := newEnv(t)
	_, err := e.v.Publish(Publish{Exchange: "nope", Msg: msg("m", "k")})
	require.ErrorIs(t, err, ErrNotFound)
}

func TestExchangeTypesRoute(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"d", "f1", "f2", "t1", "t2"} {
		e.queue(t, n, Classic)
	}
	require.NoError(t, e.v.Bind(Binding{Source: "amq.direct", Destination: "d", Key: "k"}))
	require.NoError(t, e.v.Bind(Binding{Source: "amq.direct", Destination: "d", Key: "k"}), "idempotent")
	require.NoError(t, e.v.Bind(Binding{Source: "amq.fanout", Destination: "f1"}))
	require.NoError(t, e.v.Bind(Binding{Source: "amq.fanout", Destination: "f2", Key: "ignored"}))
	require.NoError(t, e.v.Bind(Binding{Source: "amq.topic", Destination: "t1", Key: "a.*"}))
	require.NoError(t, e.v.Bind(Binding{Source: "amq.topic", Destination: "t2", Key: "#.z"}))

	route := func(x string, keys ...string) []string {
		qs, err := e.v.Route(x, msg("m", keys...))
		require.NoError(t, err)
		var names []string
		for _, q := range qs {
			names = append(names, q.Name())
		}
		return names
	}
	assert.Equal(t, []string{"d"}, route("amq.direct", "k"))
	assert.Empty(t, route("amq.direct", "other"))
	assert.Equal(t, []string{"d"}, route("amq.direct", "other", "k"), "cc key")
	assert.Equal(t, []string{"f1", "f2"}, route("amq.fanout", "anything"))
	assert.Equal(t, []string{"f1", "f2"}, route("amq.fanout"))
	assert.Equal(t, []string{"t1"}, route("amq.topic", "a.b"))
	assert.Equal(t, []string{"t1", "t2"}, route("amq.topic", "a.z"))
	assert.Equal(t, []string{"t2"}, route("amq.topic", "x.y", "q.z"))
	assert.Empty(t, route("amq.topic", "a"))

	require.NoError(t, e.v.Unbind(Binding{Source: "amq.direct", Destination: "d", Key: "k"}))
	assert.Empty(t, route("amq.direct", "k"))
	require.NoError(t, e.v.Unbind(Binding{Source: "amq.direct", Destination: "d", Key: "k"}), "unbinding twice is fine")
	require.ErrorIs(t, e.v.Unbind(Binding{Source: "nope", Destination: "d"}), ErrNotFound)
}

func TestBindErrors(t *testing.T) {
	e := newEnv(t)
	e.queue(t, "q", Classic)
	require.ErrorIs(t, e.v.Bind(Binding{Source: "nope", Destination: "q"}), ErrNotFound)
	require.ErrorIs(t, e.v.Bind(Binding{Source: "amq.direct", Destination: "nope"}), ErrNotFound)
	require.ErrorIs(t, e.v.Bind(Binding{Source: "amq.direct", Destination: "nope", DestinationIsExchange: true}), ErrNotFound)
	require.ErrorIs(t, e.v.Bind(Binding{Source: "amq.direct", Destination: "", DestinationIsExchange: true}), ErrAccessRefused)
	err := e.v.Bind(Binding{Source: "amq.headers", Destination: "q", Arguments: value.Map{{Key: "x-match", Value: "most"}}})
	require.ErrorIs(t, err, ErrPreconditionFailed)
}

func TestDeclareExchangeEquivalence(t *testing.T) {
	e := newEnv(t)
	spec := ExchangeSpec{Name: "x", Type: "topic", Durable: true, Arguments: value.Map{{Key: "alternate-exchange", Value: "ae"}}}
	created, err := e.v.DeclareExchange(spec)
	require.NoError(t, err)
	assert.True(t, created)
	same := spec
	same.Arguments = value.Map{{Key: value.Symbol("alternate-exchange"), Value: value.Symbol("ae")}}
	created, err = e.v.DeclareExchange(same)
	require.NoError(t, err)
	assert.False(t, created)

	for name, mod := range map[string]func(*ExchangeSpec){
		"type":        func(s *ExchangeSpec) { s.Type = "direct" },
		"durable":     func(s *ExchangeSpec) { s.Durable = false },
		"auto-delete": func(s *ExchangeSpec) { s.AutoDelete = true },
		"internal":    func(s *ExchangeSpec) { s.Internal = true },
		"args":        func(s *ExchangeSpec) { s.Arguments = nil },
	} {
		s := spec
		mod(&s)
		_, err := e.v.DeclareExchange(s)
		require.ErrorIs(t, err, ErrPreconditionFailed, name)
	}
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "y", Type: "x-delayed"})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestAlternateExchange(t *testing.T) {
	e := newEnv(t)
	e.queue(t, "main", Classic)
	unrouted := e.queue(t, "unrouted", Classic)
	_, err := e.v.DeclareExchange(ExchangeSpec{Name: "ae", Type: "fanout"})
	require.NoError(t, err)
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "x", Type: "direct", Arguments: value.Map{{Key: "alternate-exchange", Value: "ae"}}})
	require.NoError(t, err)
	require.NoError(t, e.v.Bind(Binding{Source: "x", Destination: "main", Key: "k"}))
	require.NoError(t, e.v.Bind(Binding{Source: "ae", Destination: "unrouted"}))

	assert.Equal(t, Accepted, e.publish(t, "x", msg("m", "k")))
	assert.Equal(t, 0, unrouted.Len())
	assert.Equal(t, Accepted, e.publish(t, "x", msg("m", "other")))
	assert.Equal(t, 1, unrouted.Len())

	// AE loops terminate: a -> b -> a, neither routes.
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "la", Type: "direct", Arguments: value.Map{{Key: "alternate-exchange", Value: "lb"}}})
	require.NoError(t, err)
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "lb", Type: "direct", Arguments: value.Map{{Key: "alternate-exchange", Value: "la"}}})
	require.NoError(t, err)
	assert.Equal(t, Released, e.publish(t, "la", msg("m", "k")))

	// A missing AE is ignored.
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "lc", Type: "direct", Arguments: value.Map{{Key: "alternate-exchange", Value: "missing"}}})
	require.NoError(t, err)
	assert.Equal(t, Released, e.publish(t, "lc", msg("m", "k")))
}

func TestExchangeToExchange(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	_, err := e.v.DeclareExchange(ExchangeSpec{Name: "src", Type: "topic"})
	require.NoError(t, err)
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "dst", Type: "fanout", Internal: true})
	require.NoError(t, err)
	require.NoError(t, e.v.Bind(Binding{Source: "src", Destination: "dst", DestinationIsExchange: true, Key: "a.#"}))
	require.NoError(t, e.v.Bind(Binding{Source: "dst", Destination: "q"}))
	// A loop back to src and a second path to q must not duplicate.
	require.NoError(t, e.v.Bind(Binding{Source: "dst", Destination: "src", DestinationIsExchange: true}))
	require.NoError(t, e.v.Bind(Binding{Source: "src", Destination: "q", Key: "a.b"}))

	assert.Equal(t, Accepted, e.publish(t, "src", msg("m", "a.b")))
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, Released, e.publish(t, "src", msg("m", "b")))

	_, err = e.v.Publish(Publish{Exchange: "dst", Msg: msg("m")})
	require.ErrorIs(t, err, ErrAccessRefused, "internal exchange")

	require.NoError(t, e.v.DeleteExchange("dst"))
	for _, b := range e.v.Bindings() {
		assert.NotEqual(t, "dst", b.Source)
		assert.False(t, b.DestinationIsExchange && b.Destination == "dst")
	}
	require.ErrorIs(t, e.v.DeleteExchange("dst"), ErrNotFound)
}

func TestAutoDeleteExchange(t *testing.T) {
	e := newEnv(t)
	e.queue(t, "q", Classic)
	_, err := e.v.DeclareExchange(ExchangeSpec{Name: "ad", Type: "direct", AutoDelete: true})
	require.NoError(t, err)
	require.NoError(t, e.v.Bind(Binding{Source: "ad", Destination: "q", Key: "k"}))
	_, err = e.v.DeleteQueue("q")
	require.NoError(t, err)
	assert.False(t, e.v.HasExchange("ad"), "deleted with its last binding")
}

func TestDeleteQueueRemovesBindings(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	c := &fakeConsumer{}
	_, err := q.Subscribe(c, ConsumerOptions{})
	require.NoError(t, err)
	require.NoError(t, e.v.Bind(Binding{Source: "amq.fanout", Destination: "q"}))
	e.publish(t, "amq.fanout", msg("a"))
	e.publish(t, "amq.fanout", msg("b"))
	n, err := e.v.DeleteQueue("q")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.True(t, c.deleted)
	assert.True(t, q.Deleted())
	assert.Equal(t, Released, e.publish(t, "amq.fanout", msg("c")))
	_, err = e.v.DeleteQueue("q")
	require.ErrorIs(t, err, ErrNotFound)
	assert.Zero(t, e.dl.n(), "deletion never dead-letters")
}

func TestPublishSetsExchange(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	require.NoError(t, e.v.Bind(Binding{Source: "amq.direct", Destination: "q", Key: "k"}))
	m := msg("m", "k")
	e.publish(t, "amq.direct", m)
	assert.Empty(t, m.Exchange, "the caller's message is not mutated")
	_, c := subscribe(t, q, 1)
	d := c.last(t)
	assert.Equal(t, "amq.direct", ann(d.AMQP10Annotations(), "x-exchange"))
	assert.Equal(t, "k", ann(d.AMQP10Annotations(), "x-routing-key"))
}
