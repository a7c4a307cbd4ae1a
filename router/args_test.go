package router

import (
	"encoding/json"
	"testing"

	"github.com/epitaph-mq/epitaph/value"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func declare(v *VHost, name string, typ QueueType, args ...any) error {
	var m value.Map
	for i := 0; i+1 < len(args); i += 2 {
		m = append(m, value.KV{Key: args[i], Value: args[i+1]})
	}
	_, _, err := v.DeclareQueue(QueueSpec{Name: name, Type: typ, Durable: true, Arguments: m})
	return err
}

// TestDeclareQueueArgumentValidation: invalid dead-letter, overflow, TTL,
// expiry and length arguments are refused at declaration.
func TestDeclareQueueArgumentValidation(t *testing.T) {
	e := newEnv(t)
	bad := []struct {
		name string
		typ  QueueType
		args []any
		msg  string
	}{
		{"dlrk without dlx", Classic, []any{"x-dead-letter-routing-key", "k"}, "routing_key_but_no_dlx_defined"},
		{"dlrk without dlx quorum", Quorum, []any{"x-dead-letter-routing-key", "k"}, "x-dead-letter-routing-key"},
		{"bad strategy", Quorum, []any{"x-dead-letter-exchange", "dlx", "x-dead-letter-strategy", "foo"}, "x-dead-letter-strategy"},
		{"bad overflow", Classic, []any{"x-overflow", "bar"}, "x-overflow"},
		{"bad overflow quorum", Quorum, []any{"x-overflow", "bar"}, "x-overflow"},
		{"classic delivery limit", Classic, []any{"x-delivery-limit", int64(5)}, "invalid arg 'x-delivery-limit' for queue 'q' of queue type classic"},
		{"classic strategy", Classic, []any{"x-dead-letter-strategy", "at-most-once"}, "invalid arg 'x-dead-letter-strategy' for queue 'q' of queue type classic"},
		{"negative ttl", Classic, []any{"x-message-ttl", int64(-1)}, "x-message-ttl"},
		{"string ttl", Classic, []any{"x-message-ttl", "10"}, "x-message-ttl"},
		{"fractional ttl", Classic, []any{"x-message-ttl", 1.5}, "x-message-ttl"},
		{"huge ttl", Classic, []any{"x-message-ttl", int64(1) << 40}, "x-message-ttl"},
		{"zero expires", Classic, []any{"x-expires", int64(0)}, "x-expires"},
		{"negative max-length", Classic, []any{"x-max-length", int32(-1)}, "x-max-length"},
		{"negative max-length-bytes", Quorum, []any{"x-max-length-bytes", int64(-5)}, "x-max-length-bytes"},
		{"dlx not string", Classic, []any{"x-dead-letter-exchange", int64(1)}, "x-dead-letter-exchange"},
		{"dlrk not string", Classic, []any{"x-dead-letter-exchange", "x", "x-dead-letter-routing-key", true}, "x-dead-letter-routing-key"},
		{"delivery limit not int", Quorum, []any{"x-delivery-limit", "five"}, "x-delivery-limit"},
		{"type mismatch", Classic, []any{"x-queue-type", "quorum"}, "x-queue-type"},
		{"unknown type", "", []any{"x-queue-type", "stream"}, "x-queue-type"},
		{"sac not bool", Classic, []any{"x-single-active-consumer", "yes"}, "x-single-active-consumer"},
		// Arguments epitaph does not implement are refused, never accepted
		// without their effect.
		// x-max-priority as rabbit_amqqueue:check_max_priority_arg/2 checks it.
		{"max-priority negative", Classic, []any{"x-max-priority", int64(-1)}, "invalid arg 'x-max-priority' for queue 'q': must be a non-negative integer, got -1"},
		{"max-priority not an integer", Classic, []any{"x-max-priority", "10"}, "invalid arg 'x-max-priority' for queue 'q': must be an integer, got string"},
		{"max-priority over 255", Classic, []any{"x-max-priority", int64(256)}, "invalid arg 'x-max-priority' for queue 'q': max_value_exceeded: 256 exceeds 255"},
		{"max-priority (quorum)", Quorum, []any{"x-max-priority", int64(10)}, "invalid arg 'x-max-priority' for queue 'q' of queue type quorum"},
		{"delayed-retry on classic", Classic, []any{"x-delayed-retry-type", "all"}, "invalid arg 'x-delayed-retry-type' for queue 'q' of queue type classic"},
		{"consumer-timeout", Quorum, []any{"x-consumer-timeout", int64(60000)}, "consumer timeouts are not supported"},
		{"consumer-timeout on classic", Classic, []any{"x-consumer-timeout", int64(60000)}, "of queue type classic"},
		{"stream max-age", Classic, []any{"x-max-age", "1D"}, "invalid arg 'x-max-age' for queue 'q' of queue type classic"},
		{"stream segment size", Quorum, []any{"x-stream-max-segment-size-bytes", int64(1)}, "x-stream-max-segment-size-bytes"},
		{"queue version 1", Classic, []any{"x-queue-version", int64(1)}, "unsupported queue version '1'"},
		{"leader locator", Quorum, []any{"x-queue-leader-locator", "nearest"}, "x-queue-leader-locator"},
		{"initial group size 0", Quorum, []any{"x-quorum-initial-group-size", int64(0)}, "x-quorum-initial-group-size"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := declare(e.v, "q", tt.typ, tt.args...)
			require.ErrorIs(t, err, ErrPreconditionFailed)
			assert.Contains(t, err.Error(), tt.msg)
			_, ok := e.v.Queue("q")
			assert.False(t, ok)
		})
	}

	good := []struct {
		name string
		typ  QueueType
		args []any
	}{
		{"dlx of a missing exchange", Classic, []any{"x-dead-letter-exchange", "does-not-exist"}},
		{"dlx and dlrk", Classic, []any{"x-dead-letter-exchange", "dlx", "x-dead-letter-routing-key", "k"}},
		{"quorum all", Quorum, []any{"x-delivery-limit", int64(-1), "x-dead-letter-exchange", value.Symbol("dlx"),
			"x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish"}},
		{"ints of every width", Classic, []any{"x-message-ttl", uint32(0), "x-expires", int16(10), "x-max-length", uint8(3), "x-max-length-bytes", uint64(1000)}},
		{"json float numbers", Classic, []any{"x-message-ttl", float64(60000), "x-max-length", json.Number("5")}},
		{"reject-publish-dlx quorum (treated as drop-head)", Quorum, []any{"x-overflow", "reject-publish-dlx"}},
		{"tolerated extras", Classic, []any{"x-single-active-consumer", true, "x-queue-mode", "lazy", "x-custom", "v"}},
		{"no effect on one node", Quorum, []any{"x-quorum-initial-group-size", int64(3), "x-queue-leader-locator", "balanced",
			"x-max-in-memory-length", int64(0), "x-consumer-disconnected-timeout", int64(60000), "x-member-placement-tag", "t"}},
		{"queue version 2", Classic, []any{"x-queue-version", int64(2), "x-queue-leader-locator", "client-local"}},
		// Delayed retry arguments are not validated at declare, as in
		// RabbitMQ 4.3 (a bad value disables it; TestDelayedRetryResolution).
		{"delayed retry all", Quorum, []any{"x-delayed-retry-type", "all", "x-delayed-retry-min", int64(1000)}},
		{"delayed retry returned", Quorum, []any{"x-delayed-retry-type", "returned", "x-delayed-retry-min", uint64(1000), "x-delayed-retry-max", uint64(5000)}},
		{"delayed retry min as a string", Quorum, []any{"x-delayed-retry-type", "failed", "x-delayed-retry-min", "2000"}},
		{"deprecated leader locator", Classic, []any{"x-queue-leader-locator", "random"}},
		{"priorities", Classic, []any{"x-max-priority", int64(10)}},
		{"delayed retry disabled", Quorum, []any{"x-delayed-retry-type", "disabled", "x-delayed-retry-min", int64(1000), "x-delayed-retry-max", int64(2000)}},
		{"delayed retry bounds alone", Quorum, []any{"x-delayed-retry-min", uint64(1000)}},
		{"quorum by argument", "", []any{"x-queue-type", "quorum"}},
	}
	for i, tt := range good {
		t.Run(tt.name, func(t *testing.T) {
			name := "ok" + string(rune('a'+i))
			require.NoError(t, declare(e.v, name, tt.typ, tt.args...))
		})
	}
	qq, ok := e.v.Queue("ok" + string(rune('a'+len(good)-1)))
	require.True(t, ok)
	assert.Equal(t, Quorum, qq.Type())
}

func TestArgumentsNormalised(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, value.Symbol("x-message-ttl"), uint32(100), "x-max-length", float64(7), "x-dead-letter-exchange", value.Symbol("dlx"))
	want := value.Map{
		{Key: "x-message-ttl", Value: int64(100)},
		{Key: "x-max-length", Value: int64(7)},
		{Key: "x-dead-letter-exchange", Value: "dlx"},
	}
	assert.Equal(t, want, q.Arguments())
	dlx, ok := q.DeadLetterExchange()
	assert.True(t, ok)
	assert.Equal(t, "dlx", dlx)
	_, ok = q.DeadLetterRoutingKey()
	assert.False(t, ok)
	assert.Equal(t, int64(-1), q.DeliveryLimit())
	assert.Equal(t, OverflowDropHead, q.Overflow())

	qq := e.queue(t, "qq", Quorum)
	assert.Equal(t, int64(DefaultDeliveryLimit), qq.DeliveryLimit())
	assert.Equal(t, StrategyAtMostOnce, qq.DeadLetterStrategy())
}

func TestRedeclare(t *testing.T) {
	e := newEnv(t)
	spec := QueueSpec{Name: "q", Type: Quorum, Durable: true, Arguments: value.Map{{Key: "x-max-length", Value: int64(10)}}}
	q, created, err := e.v.DeclareQueue(spec)
	require.NoError(t, err)
	require.True(t, created)

	same := spec
	same.Arguments = value.Map{{Key: "x-max-length", Value: uint16(10)}, {Key: "x-queue-type", Value: "quorum"}, {Key: "x-ignored", Value: "z"}}
	q2, created, err := e.v.DeclareQueue(same)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Same(t, q, q2)

	untyped := spec
	untyped.Type = ""
	_, created, err = e.v.DeclareQueue(untyped)
	require.NoError(t, err, "a declare without a type accepts the existing type")
	assert.False(t, created)

	for name, mod := range map[string]func(*QueueSpec){
		"type": func(s *QueueSpec) { s.Type = Classic },
		"type arg": func(s *QueueSpec) {
			s.Type = ""
			s.Arguments = value.Map{{Key: "x-queue-type", Value: "classic"}, {Key: "x-max-length", Value: int64(10)}}
		},
		"durable":     func(s *QueueSpec) { s.Durable = false },
		"args":        func(s *QueueSpec) { s.Arguments = value.Map{{Key: "x-max-length", Value: int64(11)}} },
		"missing arg": func(s *QueueSpec) { s.Arguments = nil },
		"extra arg": func(s *QueueSpec) {
			s.Arguments = append(s.Arguments, value.KV{Key: "x-message-ttl", Value: int64(5)})
		},
		"invalid arg": func(s *QueueSpec) { s.Arguments = value.Map{{Key: "x-overflow", Value: "bad"}} },
	} {
		s := spec
		s.Arguments = cloneMap(spec.Arguments)
		mod(&s)
		_, _, err := e.v.DeclareQueue(s)
		require.ErrorIs(t, err, ErrPreconditionFailed, name)
	}
}

func TestQuorumFlags(t *testing.T) {
	e := newEnv(t)
	for name, s := range map[string]QueueSpec{
		"exclusive":   {Name: "q", Type: Quorum, Durable: true, Exclusive: true},
		"auto-delete": {Name: "q", Type: Quorum, Durable: true, AutoDelete: true},
		"non-durable": {Name: "q", Type: Quorum},
	} {
		_, _, err := e.v.DeclareQueue(s)
		require.ErrorIs(t, err, ErrPreconditionFailed, name)
	}
}

func TestQueueNames(t *testing.T) {
	e := newEnv(t)
	_, _, err := e.v.DeclareQueue(QueueSpec{Name: "amq.mine"})
	require.ErrorIs(t, err, ErrAccessRefused)
	q, created, err := e.v.DeclareQueue(QueueSpec{})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Regexp(t, `^amq\.gen-`, q.Name())
	_, created, err = e.v.DeclareQueue(QueueSpec{Name: q.Name()})
	require.NoError(t, err)
	assert.False(t, created)
}

func TestExclusiveQueue(t *testing.T) {
	e := newEnv(t)
	type conn struct{ id int }
	a, b := &conn{1}, &conn{2}
	q, _, err := e.v.DeclareQueue(QueueSpec{Name: "ex", Exclusive: true, Owner: a})
	require.NoError(t, err)
	_, err = q.Subscribe(&fakeConsumer{}, ConsumerOptions{Owner: b})
	require.ErrorIs(t, err, ErrResourceLocked)
	_, _, err = e.v.DeclareQueue(QueueSpec{Name: "ex", Exclusive: true, Owner: b})
	require.ErrorIs(t, err, ErrResourceLocked)
	c := &fakeConsumer{}
	_, err = q.Subscribe(c, ConsumerOptions{Owner: a})
	require.NoError(t, err)

	_, _, err = e.v.DeclareQueue(QueueSpec{Name: "other", Exclusive: true, Owner: b})
	require.NoError(t, err)
	e.v.DeleteExclusive(a)
	_, ok := e.v.Queue("ex")
	assert.False(t, ok)
	assert.True(t, c.deleted)
	_, ok = e.v.Queue("other")
	assert.True(t, ok)
}

func TestResolve(t *testing.T) {
	e := newEnv(t)
	_, err := e.v.Resolve("auto")
	require.ErrorIs(t, err, ErrNotFound)

	e2 := newEnv(t, func(o *Options) { o.AutoCreateQueues = true })
	q, err := e2.v.Resolve("auto")
	require.NoError(t, err)
	assert.Equal(t, Classic, q.Type())
	q2, err := e2.v.Resolve("auto")
	require.NoError(t, err)
	assert.Same(t, q, q2)
}
