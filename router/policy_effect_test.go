package router

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// ---- helpers ----

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// count returns how many records at level contain substr in their message.
func (l *logRecorder) count(level slog.Level, substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, substr) {
			n++
		}
	}
	return n
}

func withLogger(l *logRecorder) func(*Options) {
	return func(o *Options) { o.Logger = slog.New(l) }
}

// def builds a policy definition from key/value pairs.
func def(kv ...any) value.Map {
	var m value.Map
	for i := 0; i+1 < len(kv); i += 2 {
		m = append(m, value.KV{Key: kv[i], Value: kv[i+1]})
	}
	return m
}

func (e *env) policy(t *testing.T, name, pattern, applyTo string, prio int, kv ...any) {
	t.Helper()
	require.NoError(t, e.v.PutPolicy(Policy{Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: prio, Definition: def(kv...)}))
}

func dlxOf(q *Queue) string {
	x, ok := q.DeadLetterExchange()
	if !ok {
		return "<none>"
	}
	return x
}

func dlrkOf(q *Queue) string {
	k, ok := q.DeadLetterRoutingKey()
	if !ok {
		return "<none>"
	}
	return k
}

var bothTypes = []QueueType{Classic, Quorum}

// ---- precedence ----

func TestPolicyDeadLetterExchangeArgumentWins(t *testing.T) {
	for _, typ := range bothTypes {
		for _, policyFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/policyFirst=%v", typ, policyFirst), func(t *testing.T) {
				e := newEnv(t)
				put := func() {
					e.policy(t, "p", "^q", ApplyToQueues, 0, "dead-letter-exchange", "pdlx", "dead-letter-routing-key", "prk")
				}
				if policyFirst {
					put()
				}
				none := e.queue(t, "q-none", typ)
				xOnly := e.queue(t, "q-x", typ, "x-dead-letter-exchange", "adlx")
				both := e.queue(t, "q-both", typ, "x-dead-letter-exchange", "adlx", "x-dead-letter-routing-key", "ark")
				emptyX := e.queue(t, "q-empty", typ, "x-dead-letter-exchange", "")
				if !policyFirst {
					put()
				}
				assert.Equal(t, "pdlx", dlxOf(none))
				assert.Equal(t, "prk", dlrkOf(none))
				assert.Equal(t, "adlx", dlxOf(xOnly), "the argument wins")
				assert.Equal(t, "prk", dlrkOf(xOnly), "each key resolves on its own")
				assert.Equal(t, "adlx", dlxOf(both))
				assert.Equal(t, "ark", dlrkOf(both))
				assert.Equal(t, "", dlxOf(emptyX), "an empty-string argument is set (the default exchange)")
				for _, q := range []*Queue{none, xOnly, both} {
					name, ok := q.EffectivePolicy()
					assert.True(t, ok)
					assert.Equal(t, "p", name)
					assert.Equal(t, "p", q.Info().Policy)
				}
				// Arguments stay as declared.
				assert.Empty(t, none.Arguments())
				assert.Empty(t, none.Info().Arguments)
				assert.Equal(t, def("dead-letter-exchange", "pdlx", "dead-letter-routing-key", "prk"), none.Info().EffectivePolicyDefinition)
			})
		}
	}
}

func TestPolicyNumericKeysTakeTheMinimum(t *testing.T) {
	type cfgField struct {
		arg, pol string
		get      func(*queueConfig) int64
		none     int64
	}
	fields := []cfgField{
		{"x-message-ttl", "message-ttl", func(c *queueConfig) int64 { return c.messageTTL }, -1},
		{"x-max-length", "max-length", func(c *queueConfig) int64 { return c.maxLen }, -1},
		{"x-max-length-bytes", "max-length-bytes", func(c *queueConfig) int64 { return c.maxBytes }, -1},
		{"x-expires", "expires", func(c *queueConfig) int64 { return c.expires }, 0},
	}
	for _, typ := range bothTypes {
		for _, f := range fields {
			t.Run(string(typ)+"/"+f.pol, func(t *testing.T) {
				e := newEnv(t)
				none := e.queue(t, "none", typ)
				argOnly := e.queue(t, "x-argonly", typ, f.arg, int64(500000))
				e.policy(t, "p", "^(none|pol|low|high)", ApplyToAll, 0, f.pol, int64(300000))
				pol := e.queue(t, "pol", typ)
				argLow := e.queue(t, "low", typ, f.arg, int64(100000))
				argHigh := e.queue(t, "high", typ, f.arg, int64(900000))
				assert.Equal(t, int64(300000), f.get(none.config()), "policy only (queue declared before)")
				assert.Equal(t, int64(300000), f.get(pol.config()), "policy only (queue declared after)")
				assert.Equal(t, int64(500000), f.get(argOnly.config()), "argument only")
				assert.Equal(t, int64(100000), f.get(argLow.config()), "min: argument lower")
				assert.Equal(t, int64(300000), f.get(argHigh.config()), "min: policy lower")
				require.NoError(t, e.v.DeletePolicy("p"))
				assert.Equal(t, f.none, f.get(none.config()))
				assert.Equal(t, int64(900000), f.get(argHigh.config()))
				_, ok := argHigh.EffectivePolicy()
				assert.False(t, ok)
				assert.Equal(t, "", argHigh.Info().Policy)
			})
		}
	}
}

func TestPolicyOverflowPrecedence(t *testing.T) {
	e := newEnv(t)
	e.policy(t, "p", ".*", ApplyToAll, 0, "overflow", "reject-publish")
	cqArg := e.queue(t, "cq-arg", Classic, "x-overflow", "reject-publish-dlx")
	cqNone := e.queue(t, "cq-none", Classic)
	qqArg := e.queue(t, "qq-arg", Quorum, "x-overflow", "drop-head")
	qqNone := e.queue(t, "qq-none", Quorum)
	assert.Equal(t, OverflowRejectPublishDLX, cqArg.Overflow(), "classic: the argument wins")
	assert.Equal(t, OverflowRejectPublish, cqNone.Overflow())
	assert.Equal(t, OverflowRejectPublish, qqArg.Overflow(), "quorum: the policy wins")
	assert.Equal(t, OverflowRejectPublish, qqNone.Overflow())

	// A quorum queue treats a policy's reject-publish-dlx as drop-head.
	e.policy(t, "p", ".*", ApplyToAll, 0, "overflow", "reject-publish-dlx", "max-length", int64(1))
	assert.Equal(t, OverflowDropHead, qqArg.Overflow())
	assert.Equal(t, OverflowRejectPublishDLX, cqNone.Overflow())
	publishN(t, e, "qq-none", 2)
	assert.Equal(t, 1, qqNone.Len())
	assert.Equal(t, []string{"m1:maxlen"}, e.dl.bodies())
}

func TestPolicyDeliveryLimit(t *testing.T) {
	cases := []struct {
		name     string
		arg, pol any // nil: unset
		want     int64
	}{
		{"neither", nil, nil, DefaultDeliveryLimit},
		{"arg only", int64(5), nil, 5},
		{"policy only", nil, int64(7), 7},
		{"min, policy lower", int64(5), int64(3), 3},
		{"min, arg lower", int64(2), int64(3), 2},
		{"policy -1, arg 5: max", int64(5), int64(-1), 5},
		{"policy 5, arg -1: max", int64(-1), int64(5), 5},
		{"both negative", int64(-2), int64(-1), -1},
		{"policy -1 only: unlimited", nil, int64(-1), -1},
		{"policy zero", int64(4), int64(0), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if c.pol != nil {
				e.policy(t, "p", ".*", ApplyToQueues, 0, "delivery-limit", c.pol)
			}
			var q *Queue
			if c.arg != nil {
				q = e.queue(t, "q", Quorum, "x-delivery-limit", c.arg)
			} else {
				q = e.queue(t, "q", Quorum)
			}
			assert.Equal(t, c.want, q.DeliveryLimit())
		})
	}
	t.Run("classic ignores it", func(t *testing.T) {
		e := newEnv(t)
		e.policy(t, "p", ".*", ApplyToQueues, 0, "delivery-limit", int64(2))
		assert.Equal(t, int64(-1), e.queue(t, "q", Classic).DeliveryLimit())
	})
}

func TestPolicyDeliveryLimitAppliesAtNextReturn(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum)
	e.publish(t, "", msg("m", "q"))
	s, c := subscribe(t, q, 10)
	failed := Settlement{Kind: SettleModify, DeliveryFailed: true}
	require.NoError(t, s.Settle(c.last(t).Tag, failed))
	require.Equal(t, 2, c.n(), "requeued under the default limit")
	e.policy(t, "p", "^q$", ApplyToQuorumQueues, 0, "delivery-limit", int64(1))
	require.NoError(t, s.Settle(c.last(t).Tag, failed))
	assert.Equal(t, []string{"m:delivery_limit"}, e.dl.bodies(), "delivery-count 2 > new limit 1")
	assert.Zero(t, q.Len())
}

func TestPolicyDeadLetterStrategy(t *testing.T) {
	t.Run("classic ignores a policy strategy", func(t *testing.T) {
		e := newEnv(t)
		e.policy(t, "p", ".*", ApplyToAll, 0, "dead-letter-strategy", "at-least-once", "dead-letter-exchange", "dlx", "overflow", "reject-publish")
		q := e.queue(t, "q", Classic)
		assert.Equal(t, StrategyAtMostOnce, q.DeadLetterStrategy())
		assert.Equal(t, "dlx", dlxOf(q))
	})
	t.Run("quorum at-least-once from the policy", func(t *testing.T) {
		e := newEnv(t)
		e.policy(t, "p", ".*", ApplyToAll, 0, "dead-letter-strategy", "at-least-once", "dead-letter-exchange", "dlx", "overflow", "reject-publish")
		q := e.queue(t, "q", Quorum)
		assert.Equal(t, StrategyAtLeastOnce, q.DeadLetterStrategy())
	})
	t.Run("quorum: the argument beats the policy", func(t *testing.T) {
		e := newEnv(t)
		e.policy(t, "p", ".*", ApplyToAll, 0, "dead-letter-strategy", "at-least-once", "dead-letter-exchange", "dlx", "overflow", "reject-publish")
		q := e.queue(t, "q", Quorum, "x-dead-letter-strategy", "at-most-once")
		assert.Equal(t, StrategyAtMostOnce, q.DeadLetterStrategy())
	})
	t.Run("quorum: policy drop-head beats argument reject-publish: fall back", func(t *testing.T) {
		logs := &logRecorder{}
		e := newEnv(t, withLogger(logs))
		q := e.queue(t, "q", Quorum, "x-dead-letter-exchange", "dlx", "x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish")
		assert.Equal(t, StrategyAtLeastOnce, q.DeadLetterStrategy())
		assert.Zero(t, logs.count(slog.LevelWarn, "falling back"))
		e.policy(t, "p", ".*", ApplyToAll, 0, "overflow", "drop-head")
		assert.Equal(t, OverflowDropHead, q.Overflow())
		assert.Equal(t, StrategyAtMostOnce, q.DeadLetterStrategy())
		assert.Equal(t, 1, logs.count(slog.LevelWarn, "falling back"))
		// Re-putting the same policy does not change the config: no new log.
		e.policy(t, "p", ".*", ApplyToAll, 0, "overflow", "drop-head")
		assert.Equal(t, 1, logs.count(slog.LevelWarn, "falling back"), "logged once per config change")
		require.NoError(t, e.v.DeletePolicy("p"))
		assert.Equal(t, StrategyAtLeastOnce, q.DeadLetterStrategy())
	})
	t.Run("quorum at-least-once with default overflow falls back", func(t *testing.T) {
		logs := &logRecorder{}
		e := newEnv(t, withLogger(logs))
		q := e.queue(t, "q", Quorum, "x-dead-letter-exchange", "dlx", "x-dead-letter-strategy", "at-least-once")
		assert.Equal(t, StrategyAtMostOnce, q.DeadLetterStrategy())
		assert.Equal(t, 1, logs.count(slog.LevelWarn, "falling back"))
	})
	t.Run("policy-only strategy and routing key without a DLX are ignored", func(t *testing.T) {
		logs := &logRecorder{}
		e := newEnv(t, withLogger(logs))
		e.policy(t, "p", ".*", ApplyToAll, 0, "dead-letter-strategy", "at-least-once", "dead-letter-routing-key", "rk", "overflow", "reject-publish")
		qq := e.queue(t, "qq", Quorum)
		cq := e.queue(t, "cq", Classic)
		for _, q := range []*Queue{qq, cq} {
			assert.Equal(t, StrategyAtMostOnce, q.DeadLetterStrategy())
			assert.Equal(t, "<none>", dlxOf(q))
			assert.Equal(t, "<none>", dlrkOf(q), "dead-lettering disabled")
		}
		assert.Equal(t, 2, logs.count(slog.LevelWarn, "dead-letter-routing-key because dead-letter-exchange is not configured"))
		assert.Equal(t, 1, logs.count(slog.LevelWarn, "dead-letter-strategy because dead-letter-exchange is not configured"))
		// A DLX argument makes the policy's keys count.
		withX := e.queue(t, "qx", Quorum, "x-dead-letter-exchange", "dlx")
		assert.Equal(t, "rk", dlrkOf(withX))
		assert.Equal(t, StrategyAtLeastOnce, withX.DeadLetterStrategy())
	})
}

// ---- validation ----

func TestPolicyDefinitionValidation(t *testing.T) {
	bad := []struct {
		name string
		def  value.Map
	}{
		{"ttl negative", def("message-ttl", int64(-1))},
		{"ttl fraction", def("message-ttl", 1.5)},
		{"ttl string", def("message-ttl", "10")},
		{"ttl too large", def("message-ttl", int64(1<<33))},
		{"max-length negative", def("max-length", int32(-3))},
		{"max-length bool", def("max-length", true)},
		{"max-length-bytes negative", def("max-length-bytes", float64(-1))},
		{"expires zero", def("expires", int64(0))},
		{"expires negative", def("expires", int64(-10))},
		{"overflow unknown", def("overflow", "bar")},
		{"overflow number", def("overflow", int64(1))},
		{"strategy unknown", def("dead-letter-strategy", "foo")},
		{"dlx number", def("dead-letter-exchange", int64(5))},
		{"dlrk bool", def("dead-letter-routing-key", false)},
		{"delivery-limit string", def("delivery-limit", "5")},
		{"delivery-limit fraction", def("delivery-limit", 2.5)},
		{"uint64 overflow", def("max-length", uint64(1<<63))},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			err := e.v.PutPolicy(Policy{Name: "p", Pattern: ".*", Definition: c.def})
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Contains(t, err.Error(), "policy 'p'")
			_, ok := e.v.Policy("p")
			assert.False(t, ok, "not stored")
		})
	}
	t.Run("pattern", func(t *testing.T) {
		e := newEnv(t)
		require.ErrorIs(t, e.v.PutPolicy(Policy{Name: "p", Pattern: "(", Definition: def("max-length", 1)}), ErrInvalidArgument)
		require.ErrorIs(t, e.v.PutPolicy(Policy{Name: "p", Pattern: strings.Repeat("a", 1001), Definition: def("max-length", 1)}), ErrInvalidArgument)
		require.NoError(t, e.v.PutPolicy(Policy{Name: "p", Pattern: strings.Repeat("a", 1000), Definition: def("max-length", 1)}))
	})
	good := []struct {
		name string
		def  value.Map
	}{
		{"json float integral", def("max-length", float64(10), "message-ttl", float64(0))},
		{"go widths", def("max-length", uint8(3), "max-length-bytes", int16(100), "expires", uint32(1000), "message-ttl", int(5))},
		{"delivery-limit negative", def("delivery-limit", int64(-5))},
		{"symbols", def(value.Symbol("dead-letter-exchange"), value.Symbol("dlx"), "overflow", value.Symbol("reject-publish"))},
		{"empty dlx", def("dead-letter-exchange", "")},
	}
	for _, c := range good {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			require.NoError(t, e.v.PutPolicy(Policy{Name: "p", Pattern: ".*", Definition: c.def}))
		})
	}
	t.Run("widths take effect", func(t *testing.T) {
		e := newEnv(t)
		e.policy(t, "p", ".*", "", 0, "max-length", float64(2), "max-length-bytes", uint16(100), value.Symbol("dead-letter-exchange"), value.Symbol("dlx"))
		q := e.queue(t, "q", Classic)
		assert.Equal(t, int64(2), q.config().maxLen)
		assert.Equal(t, int64(100), q.config().maxBytes)
		assert.Equal(t, "dlx", dlxOf(q))
	})
}

func TestPolicyNoEffectKeysAccepted(t *testing.T) {
	logs := &logRecorder{}
	e := newEnv(t, withLogger(logs))
	q := e.queue(t, "q", Classic)
	// Keys that have no effect on one node's classic and quorum queues in
	// RabbitMQ 4.3 either: accepted, so that RabbitMQ's exports load.
	require.NoError(t, e.v.PutPolicy(Policy{Name: "p", Pattern: ".*", Definition: def(
		"queue-mode", "lazy", "queue-version", int64(2), "max-age", "1D",
		"queue-leader-locator", "balanced", "initial-cluster-size", int64(3),
		"max-in-memory-length", int64(10), "consumer-disconnected-timeout", int64(60000),
		"delayed-retry-type", "disabled", "delayed-retry-min", int64(1000), "delayed-retry-max", int64(2000),
		"max-length", int64(5),
	)}))
	assert.Equal(t, int64(5), q.config().maxLen, "the applied keys still apply")
	name, ok := q.EffectivePolicy()
	assert.True(t, ok)
	assert.Equal(t, "p", name)
	assert.Equal(t, 1, logs.count(slog.LevelDebug, "policy keys accepted without effect"))
	assert.Zero(t, logs.count(slog.LevelWarn, ""))
	assert.Zero(t, logs.count(slog.LevelError, ""))

	// A policy made only of such keys matches but changes nothing.
	require.NoError(t, e.v.PutPolicy(Policy{Name: "p", Pattern: ".*", Definition: def("queue-mode", "lazy")}))
	assert.Equal(t, int64(-1), q.config().maxLen)
	name, _ = q.EffectivePolicy()
	assert.Equal(t, "p", name)
}

// Policy keys that would be accepted without their effect are refused:
// the ones epitaph does not implement, and the ones RabbitMQ 4.3 does not
// recognise (with its text).
func TestPolicyRefusedKeys(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum)
	cases := []struct {
		name string
		def  value.Map
		want string
	}{
		// Delayed retry is implemented: its keys are validated as RabbitMQ
		// 4.3 validates them (TestDelayedRetryPolicyValidation has the rest).
		{"delayed-retry-type all without min", def("delayed-retry-type", "all"), "delayed-retry-min is required when delayed-retry-type is all"},
		{"bad delayed-retry-type", def("delayed-retry-type", "sometimes"), "sometimes is not a valid delayed retry type. Must be one of: all, failed, returned, disabled"},
		{"bad delayed-retry-min", def("delayed-retry-min", int64(0)), "'delayed-retry-min'"},
		{"delayed-retry-max below min", def("delayed-retry-type", "disabled", "delayed-retry-min", int64(2000), "delayed-retry-max", int64(1000)),
			"delayed-retry-max (1000) must not be smaller than delayed-retry-min (2000)"},
		{"consumer-timeout", def("consumer-timeout", int64(60000)), "'consumer-timeout': consumer timeouts are not supported"},
		{"ha-mode", def("ha-mode", "all", "max-length", int64(5)), `["ha-mode"] are not recognised policy settings`},
		{"plugin keys", def("federation-upstream-set", "all", "some-flag", true), `["federation-upstream-set" "some-flag"] are not recognised policy settings`},
		{"bad queue-mode", def("queue-mode", "fast"), "'queue-mode'"},
		{"bad queue-version", def("queue-version", int64(3)), "'queue-version'"},
		{"bad alternate-exchange", def("alternate-exchange", int64(1)), "'alternate-exchange'"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			err := e.v.PutPolicy(Policy{Name: "p", Pattern: ".*", Definition: tt.def})
			require.ErrorIs(t, err, ErrInvalidArgument)
			assert.Contains(t, err.Error(), tt.want)
			_, ok := e.v.Policy("p")
			assert.False(t, ok)
			assert.Equal(t, int64(-1), q.config().maxLen)
		})
	}
}

// A policy with alternate-exchange gives exchanges without the argument
// their alternate exchange; the argument wins.
func TestPolicyAlternateExchange(t *testing.T) {
	e := newEnv(t)
	for _, x := range []ExchangeSpec{
		{Name: "x", Type: ExchangeDirect},
		{Name: "y", Type: ExchangeDirect, Arguments: value.Map{{Key: "alternate-exchange", Value: "ae2"}}},
		{Name: "ae", Type: ExchangeFanout},
		{Name: "ae2", Type: ExchangeFanout},
	} {
		_, err := e.v.DeclareExchange(x)
		require.NoError(t, err)
	}
	unrouted := e.queue(t, "unrouted", Classic)
	unrouted2 := e.queue(t, "unrouted2", Classic)
	require.NoError(t, e.v.Bind(Binding{Source: "ae", Destination: "unrouted"}))
	require.NoError(t, e.v.Bind(Binding{Source: "ae2", Destination: "unrouted2"}))

	assert.Equal(t, Released, e.publish(t, "x", msg("before", "k")), "no alternate exchange yet")
	e.policy(t, "ae", "^[xy]$", ApplyToExchanges, 0, "alternate-exchange", "ae")
	assert.Equal(t, Accepted, e.publish(t, "x", msg("m1", "k")))
	assert.Equal(t, 1, unrouted.Len())
	assert.Equal(t, Accepted, e.publish(t, "y", msg("m2", "k")))
	assert.Equal(t, 1, unrouted2.Len(), "the argument wins over the policy")
	assert.Equal(t, 1, unrouted.Len())

	// An exchange declared after the policy gets it too; deleting the
	// policy takes it away.
	_, err := e.v.DeclareExchange(ExchangeSpec{Name: "x2", Type: ExchangeTopic})
	require.NoError(t, err)
	e.policy(t, "ae", "^x", ApplyToExchanges, 0, "alternate-exchange", "ae")
	assert.Equal(t, Accepted, e.publish(t, "x2", msg("m3", "k")))
	assert.Equal(t, 2, unrouted.Len())
	require.NoError(t, e.v.DeletePolicy("ae"))
	assert.Equal(t, Released, e.publish(t, "x", msg("m4", "k")))

	// A queue policy does not touch exchanges.
	e.policy(t, "qonly", ".*", ApplyToQueues, 0, "alternate-exchange", "ae")
	assert.Equal(t, Released, e.publish(t, "x", msg("m5", "k")))
}

// ---- matching ----

func TestPolicyApplyTo(t *testing.T) {
	e := newEnv(t)
	cq := e.queue(t, "cq", Classic)
	qq := e.queue(t, "qq", Quorum)
	cases := []struct {
		applyTo  string
		cq, qq   bool
		polExchg bool
	}{
		{ApplyToAll, true, true, false},
		{"", true, true, false},
		{ApplyToQueues, true, true, false},
		{ApplyToClassicQueues, true, false, false},
		{ApplyToQuorumQueues, false, true, false},
		{ApplyToExchanges, false, false, true},
		{ApplyToStreams, false, false, false},
	}
	for _, c := range cases {
		t.Run(cmpOr(c.applyTo, "empty"), func(t *testing.T) {
			e.policy(t, "p", ".*", c.applyTo, 0, "dead-letter-exchange", "dlx")
			_, ok := cq.EffectivePolicy()
			assert.Equal(t, c.cq, ok)
			assert.Equal(t, c.cq, dlxOf(cq) == "dlx")
			_, ok = qq.EffectivePolicy()
			assert.Equal(t, c.qq, ok)
			assert.Equal(t, c.qq, dlxOf(qq) == "dlx")
			require.NoError(t, e.v.DeletePolicy("p"))
			assert.Equal(t, "<none>", dlxOf(cq))
			assert.Equal(t, "<none>", dlxOf(qq))
		})
	}
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func TestPolicyPatternIsAnUnanchoredRegexp(t *testing.T) {
	e := newEnv(t)
	e.policy(t, "p", "ord.rs$", ApplyToQueues, 0, "max-length", int64(1))
	a := e.queue(t, "eu.orders", Classic)
	b := e.queue(t, "orders.dlq", Classic)
	assert.Equal(t, int64(1), a.config().maxLen)
	assert.Equal(t, int64(-1), b.config().maxLen)
}

func TestPolicyPriority(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	e.policy(t, "low", ".*", ApplyToAll, 1, "dead-letter-exchange", "low", "max-length", int64(10))
	e.policy(t, "high", "^q", ApplyToAll, 5, "dead-letter-exchange", "high")
	assert.Equal(t, "high", dlxOf(q))
	assert.Equal(t, int64(-1), q.config().maxLen, "only one policy applies: keys are not merged")
	name, _ := q.EffectivePolicy()
	assert.Equal(t, "high", name)

	// Equal priorities: the greater name wins (deterministic).
	e.policy(t, "zeta", ".*", ApplyToAll, 5, "dead-letter-exchange", "zeta")
	assert.Equal(t, "zeta", dlxOf(q))
	e.policy(t, "alpha", ".*", ApplyToAll, 5, "dead-letter-exchange", "alpha")
	assert.Equal(t, "zeta", dlxOf(q))

	// Deleting the winner falls back to the next one at once.
	require.NoError(t, e.v.DeletePolicy("zeta"))
	assert.Equal(t, "high", dlxOf(q))
	require.NoError(t, e.v.DeletePolicy("high"))
	require.NoError(t, e.v.DeletePolicy("alpha"))
	assert.Equal(t, "low", dlxOf(q))
	assert.Equal(t, int64(10), q.config().maxLen)

	// Raising a priority re-selects.
	e.policy(t, "other", ".*", ApplyToAll, 0, "dead-letter-exchange", "other")
	assert.Equal(t, "low", dlxOf(q))
	e.policy(t, "other", ".*", ApplyToAll, 2, "dead-letter-exchange", "other")
	assert.Equal(t, "other", dlxOf(q))
}

// ---- run-time effects ----

// accessorDL records the source queue's effective dead-letter settings at
// the moment each message is handed over, as the dead-letter component
// reads them.
type accessorDL struct {
	mu   sync.Mutex
	seen []string
}

func (a *accessorDL) DeadLetter(src *Queue, dead []Dead) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range dead {
		a.seen = append(a.seen, fmt.Sprintf("%s:%s:%s/%s", d.Msg.Container.(AMQP10).Wire.Bare(), d.Reason, dlxOf(src), dlrkOf(src)))
	}
}

func (a *accessorDL) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// A policy DLX/DLRK on a queue without arguments takes effect for
// messages rejected after the policy applies; arguments beat the policy.
func TestPolicyDeadLetterAtRunTime(t *testing.T) {
	for _, typ := range bothTypes {
		t.Run(string(typ), func(t *testing.T) {
			dl := &accessorDL{}
			b := New(Options{DeadLetterer: dl})
			t.Cleanup(b.Close)
			v, _ := b.VHost("/")
			plain, _, err := v.DeclareQueue(QueueSpec{Name: "plain", Type: typ, Durable: true})
			require.NoError(t, err)
			withArgs, _, err := v.DeclareQueue(QueueSpec{Name: "args", Type: typ, Durable: true, Arguments: def("x-dead-letter-exchange", "adlx", "x-dead-letter-routing-key", "ark")})
			require.NoError(t, err)
			for i := 1; i <= 3; i++ {
				for _, q := range []string{"plain", "args"} {
					_, err := v.Publish(Publish{Exchange: "", Msg: msg(fmt.Sprintf("%s%d", q, i), q)})
					require.NoError(t, err)
				}
			}
			sp, cp := subscribe(t, plain, 10)
			sa, ca := subscribe(t, withArgs, 10)
			reject := func(s *Subscription, c *fakeConsumer, i int) {
				require.NoError(t, s.Settle(c.all()[i].Tag, Settlement{Kind: SettleReject}))
			}
			reject(sp, cp, 0)
			reject(sa, ca, 0)
			require.NoError(t, b.PutPolicy(Policy{Name: "dlx", Pattern: ".*", Definition: def("dead-letter-exchange", "pdlx", "dead-letter-routing-key", "prk")}))
			reject(sp, cp, 1)
			reject(sa, ca, 1)
			require.NoError(t, b.DeletePolicy("/", "dlx"))
			reject(sp, cp, 2)
			assert.Equal(t, []string{
				"plain1:rejected:<none>/<none>",
				"args1:rejected:adlx/ark",
				"plain2:rejected:pdlx/prk",
				"args2:rejected:adlx/ark",
				"plain3:rejected:<none>/<none>",
			}, dl.all())
		})
	}
}

func TestPolicyMaxLengthLoweredDropsAtOnce(t *testing.T) {
	for _, typ := range bothTypes {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			other := e.queue(t, "other", typ)
			publishN(t, e, "q", 5)
			e.publish(t, "", msg("o", "other"))
			require.NoError(t, e.b.PutPolicy(Policy{Name: "len", Pattern: "^q$", Definition: def("max-length", int64(2))}))
			// Synchronous: the dropped messages are handed over before PutPolicy returns.
			assert.Equal(t, []string{"m1:maxlen", "m2:maxlen", "m3:maxlen"}, e.dl.bodies(), "dropped from the head, in FIFO order")
			assert.Equal(t, 2, q.Len())
			assert.Equal(t, 1, other.Len(), "a queue the policy does not match is untouched")
			e.dl.mu.Lock()
			for _, src := range e.dl.srcs {
				assert.Same(t, q, src)
			}
			e.dl.mu.Unlock()
			e.publish(t, "", msg("m6", "q"))
			assert.Equal(t, []string{"m1:maxlen", "m2:maxlen", "m3:maxlen", "m4:maxlen"}, e.dl.bodies())
			_, c := subscribe(t, q, 10)
			assert.Equal(t, []string{"m5", "m6"}, c.bodies())

			// Deleting the policy lifts the limit.
			require.NoError(t, e.b.DeletePolicy("/", "len"))
			for i := range 4 {
				e.publish(t, "", msg(fmt.Sprintf("n%d", i), "q"))
			}
			assert.Equal(t, 4, e.dl.n())
		})
	}
}

func TestPolicyMaxLengthBytesLoweredDropsAtOnce(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	for _, b := range []string{"aaaa", "bbbb", "cccc"} {
		e.publish(t, "", msg(b, "q"))
	}
	e.policy(t, "p", ".*", "", 0, "max-length-bytes", int64(5))
	assert.Equal(t, []string{"aaaa:maxlen", "bbbb:maxlen"}, e.dl.bodies())
	assert.Equal(t, int64(4), q.Info().MessageBytes)
}

func TestPolicyMaxLengthRejectPublish(t *testing.T) {
	for _, typ := range bothTypes {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			publishN(t, e, "q", 3)
			e.policy(t, "p", ".*", "", 0, "max-length", int64(2), "overflow", "reject-publish")
			assert.Empty(t, e.dl.all(), "reject-publish drops nothing already queued")
			assert.Equal(t, 3, q.Len())
			assert.Equal(t, Rejected, e.publish(t, "", msg("x", "q")))
			// Back to drop-head (the policy's overflow removed): drops at once.
			e.policy(t, "p", ".*", "", 0, "max-length", int64(2))
			assert.Equal(t, []string{"m1:maxlen"}, e.dl.bodies())
			assert.Equal(t, Accepted, e.publish(t, "", msg("y", "q")))
			// No limit at all: a quorum queue's block is lifted.
			e.policy(t, "p", ".*", "", 0, "overflow", "reject-publish")
			assert.Equal(t, Accepted, e.publish(t, "", msg("z", "q")))
		})
	}
}

func TestPolicyMessageTTL(t *testing.T) {
	for _, typ := range bothTypes {
		t.Run(string(typ), func(t *testing.T) {
			clock := newClock()
			e := newEnv(t, withClock(clock))
			q := e.queue(t, "q", typ)
			// Minutes, so that the real timer never fires during the test:
			// only the fake clock moves time.
			e.publish(t, "", msg("before", "q"))
			e.publish(t, "", ttlMsg("own", 600_000, "q"))
			e.policy(t, "ttl", ".*", "", 0, "message-ttl", int64(300_000))
			e.publish(t, "", msg("after", "q"))
			e.publish(t, "", ttlMsg("after-own", 60_000, "q"))
			clock.Advance(time.Minute)
			assert.Equal(t, 3, q.Len())
			clock.Advance(4 * time.Minute)
			assert.Equal(t, 2, q.Len(), "the policy TTL applies to messages enqueued afterwards")
			assert.Equal(t, []string{"after-own:expired", "after:expired"}, e.dl.bodies())
			clock.Advance(5 * time.Minute)
			// The policy change itself re-runs expiry: "own" (10 min) is due.
			e.policy(t, "ttl", ".*", "", 0, "message-ttl", int64(3_600_000))
			assert.Equal(t, []string{"after-own:expired", "after:expired", "own:expired"}, e.dl.bodies())
			_, c := subscribe(t, q, 10)
			assert.Equal(t, []string{"before"}, c.bodies(), "messages enqueued before keep their (absent) expiry")
		})
	}
}

func TestPolicyMessageTTLExpiresOnTimer(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-message-ttl", int64(60_000))
	e.policy(t, "ttl", ".*", "", 0, "message-ttl", int64(20))
	publishN(t, e, "q", 2)
	eventually(t, func() bool { return e.dl.n() == 2 }, 2*time.Second)
	assert.Equal(t, []string{"m1:expired", "m2:expired"}, e.dl.bodies())
	assert.Zero(t, q.Len())
}

func TestPolicyExpiresDeletesUnusedQueue(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	idle := e.queue(t, "idle", Classic)
	consumed := e.queue(t, "consumed", Classic)
	_, _ = subscribe(t, consumed, 0)
	e.publish(t, "", msg("m", "q"))
	e.policy(t, "exp", ".*", "", 0, "expires", int64(30))
	eventually(t, func() bool { _, ok := e.v.Queue("q"); return !ok }, 2*time.Second, "x-expires armed by the policy")
	assert.True(t, q.Deleted())
	assert.Empty(t, e.dl.all(), "whole-queue expiry never dead-letters")
	_, ok := e.v.Queue("consumed")
	assert.True(t, ok, "a consumed queue does not expire")
	eventually(t, idle.Deleted, 2*time.Second, "an empty unused queue expires too")
}

func TestPolicyExpiresLoweredByPolicyAndRaisedByDelete(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withClock(clock))
	q := e.queue(t, "q", Classic, "x-expires", int64(3_600_000))
	e.policy(t, "exp", ".*", "", 0, "expires", int64(1_000))
	assert.Equal(t, int64(1_000), q.config().expires)
	require.NoError(t, e.v.DeletePolicy("exp"))
	assert.Equal(t, int64(3_600_000), q.config().expires)
	clock.Advance(2 * time.Second)
	e.v.expireQueue(q)
	assert.False(t, q.Deleted(), "the argument's hour applies again")
}

// ---- definitions ----

func TestLoadDefinitionsAppliesPolicies(t *testing.T) {
	e := newEnv(t)
	pre := e.queue(t, "app.pre", Classic)
	doc := `{
  "queues": [
    {"name": "app.early", "vhost": "/", "durable": true, "arguments": {"x-queue-type": "quorum", "x-delivery-limit": 5}},
    {"name": "other", "vhost": "/", "durable": true, "arguments": {}}
  ],
  "policies": [
    {"vhost": "/", "name": "app", "pattern": "^app\\.", "apply-to": "queues", "priority": 1,
     "definition": {"dead-letter-exchange": "dlx", "max-length": 100, "delivery-limit": -1, "queue-mode": "lazy"}}
  ],
  "exchanges": [{"name": "dlx", "vhost": "/", "type": "fanout", "durable": true}]
}`
	require.NoError(t, e.b.LoadDefinitions([]byte(doc)))
	early, ok := e.v.Queue("app.early")
	require.True(t, ok)
	other, _ := e.v.Queue("other")
	for _, q := range []*Queue{pre, early} {
		assert.Equal(t, "dlx", dlxOf(q), q.Name())
		assert.Equal(t, int64(100), q.config().maxLen, q.Name())
		assert.Equal(t, "app", q.Info().Policy, q.Name())
	}
	assert.Equal(t, int64(5), early.DeliveryLimit(), "policy -1 and argument 5 give 5")
	assert.Equal(t, "<none>", dlxOf(other))

	// A queue declared after the load gets it too.
	late := e.queue(t, "app.late", Quorum)
	assert.Equal(t, "dlx", dlxOf(late))
	assert.Equal(t, int64(-1), late.DeliveryLimit())

	// The export still carries the policy and the declared arguments only.
	out, err := e.b.ExportDefinitions()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"queue-mode": "lazy"`)
	assert.NotContains(t, string(out), `"x-dead-letter-exchange"`)
}

func TestLoadDefinitionsRefusesBadPolicy(t *testing.T) {
	e := newEnv(t)
	err := e.b.LoadDefinitions([]byte(`{"policies": [{"vhost": "/", "name": "p", "pattern": ".*", "definition": {"message-ttl": -5}}]}`))
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "policy 'p'")
}

// ---- concurrency ----

// Policy changes race with publishes, settlements, declarations and a
// DeadLetterer that re-enters the broker; nothing deadlocks and the final
// configuration is that of the final policies.
func TestPolicyChangesConcurrently(t *testing.T) {
	r := &republisher{}
	b := New(Options{DeadLetterer: r})
	t.Cleanup(b.Close)
	v, _ := b.VHost("/")
	r.v = v
	var queues []*Queue
	for i := range 4 {
		typ := bothTypes[i%2]
		q, _, err := v.DeclareQueue(QueueSpec{Name: fmt.Sprintf("q%d", i), Type: typ, Durable: true,
			Arguments: def("x-dead-letter-exchange", "", "x-dead-letter-routing-key", "sink")})
		require.NoError(t, err)
		queues = append(queues, q)
	}
	_, _, err := v.DeclareQueue(QueueSpec{Name: "sink", Durable: true})
	require.NoError(t, err)

	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				_, _ = v.Publish(Publish{Exchange: "", Msg: msg(fmt.Sprintf("m%d", n), q.Name())})
			}
		})
		wg.Go(func() {
			c := &settlingConsumer{}
			s, err := q.Subscribe(c, ConsumerOptions{})
			if !assert.NoError(t, err) {
				return
			}
			var handed uint32
			for !stop.Load() {
				s.Flow(handed, 5, false)
				tags := c.take()
				handed += uint32(len(tags))
				for _, tag := range tags {
					_ = s.Settle(tag, Settlement{Kind: SettleReject})
				}
				_ = q.Info()
				_, _ = q.DeadLetterExchange()
				_ = q.Overflow()
			}
			s.Cancel(CancelDetach)
		})
	}
	wg.Go(func() {
		for n := 0; !stop.Load(); n++ {
			_, _, _ = v.DeclareQueue(QueueSpec{Name: fmt.Sprintf("d%d", n%8), Durable: true})
		}
	})
	deadline := time.Now().Add(300 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		require.NoError(t, v.PutPolicy(Policy{Name: "len", Pattern: "^q", Definition: def("max-length", int64(n%5), "message-ttl", int64(1+n%3))}))
		require.NoError(t, v.PutPolicy(Policy{Name: "dlx", Pattern: ".*", Priority: 1, Definition: def("dead-letter-exchange", "x", "delivery-limit", int64(n%3))}))
		if n%2 == 0 {
			require.NoError(t, v.DeletePolicy("dlx"))
		}
	}
	stop.Store(true)
	wg.Wait()
	require.NoError(t, v.PutPolicy(Policy{Name: "dlx", Pattern: ".*", Priority: 1, Definition: def("max-length", int64(7))}))
	for _, q := range queues {
		name, ok := q.EffectivePolicy()
		assert.True(t, ok)
		assert.Equal(t, "dlx", name)
		assert.Equal(t, int64(7), q.config().maxLen)
		assert.Equal(t, "", dlxOf(q), "the argument")
		assert.LessOrEqual(t, q.Len(), 7)
	}
}
