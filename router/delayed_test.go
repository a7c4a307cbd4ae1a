package router

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// The effective configuration from arguments and policies, as
// rabbit_quorum_queue:get_delayed_retry_config/1 resolves it.
func TestDelayedRetryResolution(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		args   []any
		policy value.Map
		want   string
	}{
		{"policy type wins, min is the minimum", []any{"x-delayed-retry-type", "all", "x-delayed-retry-min", int64(5000)},
			def("delayed-retry-type", "failed", "delayed-retry-min", int64(1000), "delayed-retry-max", int64(3000)), "failed (min: 1000ms, max: 3000ms)"},
		{"policy disabled wins over the argument", []any{"x-delayed-retry-type", "all", "x-delayed-retry-min", int64(5000)},
			def("delayed-retry-type", "disabled"), "disabled"},
		{"policy min and max with the argument's type", []any{"x-delayed-retry-type", "returned", "x-delayed-retry-min", int64(5000), "x-delayed-retry-max", int64(9000)},
			def("delayed-retry-min", int64(7000), "delayed-retry-max", int64(8000)), "returned (min: 5000ms, max: 8000ms)"},
		{"type without min", []any{"x-delayed-retry-type", "returned"}, nil, "disabled"},
		{"bogus type", []any{"x-delayed-retry-type", "bogus", "x-delayed-retry-min", int64(100)}, nil, "disabled"},
		{"max below min is kept", []any{"x-delayed-retry-type", "all", "x-delayed-retry-min", int64(5000), "x-delayed-retry-max", int64(1000)}, nil, "all (min: 5000ms, max: 1000ms)"},
		{"no max is min", []any{"x-delayed-retry-type", "failed", "x-delayed-retry-min", uint64(2000)}, nil, "failed (min: 2000ms, max: 2000ms)"},
		{"min as a string disables", []any{"x-delayed-retry-type", "all", "x-delayed-retry-min", "2000"}, nil, "disabled"},
		{"min zero disables", []any{"x-delayed-retry-type", "all", "x-delayed-retry-min", int64(0)}, nil, "disabled"},
		{"policy alone", nil, def("delayed-retry-type", "all", "delayed-retry-min", int64(300)), "all (min: 300ms, max: 300ms)"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "dr" + string(rune('a'+i))
			q := e.queue(t, name, Quorum, tc.args...)
			if tc.policy != nil {
				require.NoError(t, e.v.PutPolicy(Policy{Name: "p" + name, Pattern: "^" + name + "$", Definition: tc.policy}))
			}
			assert.Equal(t, tc.want, q.Info().DelayedRetry)
		})
	}
	cq := e.queue(t, "classic", Classic)
	assert.Equal(t, "disabled", cq.Info().DelayedRetry)
}

// Policy validation, with RabbitMQ 4.3's texts.
func TestDelayedRetryPolicyValidation(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		def  value.Map
		want string
	}{
		{def("delayed-retry-type", "sometimes"), "sometimes is not a valid delayed retry type. Must be one of: all, failed, returned, disabled"},
		{def("delayed-retry-type", int64(1)), "1 is not a valid delayed retry type"},
		{def("delayed-retry-min", int64(0)), "0 is not a valid delayed retry minimum delay. Must be a positive integer"},
		{def("delayed-retry-min", "1000"), "1000 is not a valid delayed retry minimum delay. Must be a positive integer"},
		{def("delayed-retry-max", int64(-5)), "-5 is not a valid delayed retry maximum delay. Must be a positive integer"},
		{def("delayed-retry-type", "failed", "delayed-retry-max", int64(10)), "delayed-retry-min is required when delayed-retry-type is failed"},
		{def("delayed-retry-type", "all", "delayed-retry-min", int64(2000), "delayed-retry-max", int64(1000)),
			"delayed-retry-max (1000) must not be smaller than delayed-retry-min (2000)"},
	} {
		err := e.v.PutPolicy(Policy{Name: "p", Pattern: ".*", Definition: tc.def})
		require.ErrorIs(t, err, ErrInvalidArgument, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	for _, d := range []value.Map{
		def("delayed-retry-type", "disabled"),
		def("delayed-retry-min", int64(10)), // min without a type: accepted (no effect alone)
		def("delayed-retry-type", "returned", "delayed-retry-min", int64(10), "delayed-retry-max", int64(10)),
	} {
		require.NoError(t, e.v.PutPolicy(Policy{Name: "p", Pattern: ".*", Definition: d}))
	}
}

func modify(failed bool, anns ...any) Settlement {
	var m value.Map
	for i := 0; i+1 < len(anns); i += 2 {
		m = append(m, value.KV{Key: value.Symbol(anns[i].(string)), Value: anns[i+1]})
	}
	return Settlement{Kind: SettleModify, DeliveryFailed: failed, Annotations: m}
}

// waitFor advances the bubble's clock by d and lets the queue's timer run.
func waitFor(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// DR1: linear backoff, min 1000, max 2500: 1000, 2000, 2500 ms, and the
// delivery-count and acquired-count on each redelivery.
func TestDelayedRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delayed-retry-type", "all",
			"x-delayed-retry-min", uint64(1000), "x-delayed-retry-max", uint64(2500))
		s, c := subscribe(t, q, 10)
		require.Equal(t, Accepted, e.publish(t, "", msg("m", "q")))
		require.Equal(t, 1, c.n())
		for i, want := range []time.Duration{1000, 2000, 2500, 2500} {
			require.NoError(t, s.Settle(c.last(t).Tag, modify(true)))
			info := q.Info()
			assert.Equal(t, 1, info.MessagesDelayed, "return %d", i+1)
			assert.Zero(t, info.Messages, "a delayed message is not ready")
			assert.Zero(t, info.MessagesUnacknowledged)
			assert.Equal(t, time.Now().Add(want*time.Millisecond).UnixMilli(), info.NextDelayedAt)
			assert.Equal(t, info.NextDelayedAt, info.LastDelayedAt)
			waitFor(want*time.Millisecond - time.Millisecond)
			require.Equal(t, i+1, c.n(), "not redelivered before %d ms", want)
			waitFor(time.Millisecond)
			require.Equal(t, i+2, c.n(), "redelivered after %d ms", want)
			d := c.last(t)
			assert.Equal(t, uint32(i+1), d.Header.DeliveryCount)
			assert.Equal(t, uint32(i+1), d.acquired)
			assert.False(t, d.Header.FirstAcquirer)
			assert.Zero(t, q.Info().MessagesDelayed)
		}
		s.Cancel(CancelDetach)
	})
}

// DR2: type failed delays failed returns only, type returned the others.
func TestDelayedRetryTypeSelectivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		for _, tc := range []struct {
			typ                string
			delayed, immediate Settlement
		}{
			{RetryFailed, modify(true), modify(false)},
			{RetryFailed, modify(true), Settlement{Kind: SettleRelease}},
			{RetryReturned, modify(false), modify(true)},
			{RetryReturned, Settlement{Kind: SettleRelease}, modify(true)},
		} {
			q := e.queue(t, "q", Quorum, "x-delayed-retry-type", tc.typ, "x-delayed-retry-min", int64(2000))
			s, c := subscribe(t, q, 10)
			require.Equal(t, Accepted, e.publish(t, "", msg("m", "q")))
			require.NoError(t, s.Settle(c.last(t).Tag, tc.immediate))
			require.Equal(t, 2, c.n(), "%s: %+v is redelivered at once", tc.typ, tc.immediate)
			require.NoError(t, s.Settle(c.last(t).Tag, tc.delayed))
			waitFor(1999 * time.Millisecond)
			require.Equal(t, 2, c.n(), "%s: %+v is delayed", tc.typ, tc.delayed)
			waitFor(time.Millisecond)
			require.Equal(t, 3, c.n())
			s.Cancel(CancelDetach)
			_, err := e.v.DeleteQueue("q")
			require.NoError(t, err)
		}
	})
}

// Type returned with repeated releases: every delay is min, dc stays 0.
func TestDelayedRetryReturnedKeepsMin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delayed-retry-type", "returned", "x-delayed-retry-min", int64(2000), "x-delayed-retry-max", int64(10000))
		s, c := subscribe(t, q, 10)
		require.Equal(t, Accepted, e.publish(t, "", msg("m", "q")))
		for i := range 3 {
			require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
			waitFor(1999 * time.Millisecond)
			require.Equal(t, i+1, c.n())
			waitFor(time.Millisecond)
			require.Equal(t, i+2, c.n())
			assert.Zero(t, c.last(t).Header.DeliveryCount)
		}
		s.Cancel(CancelDetach)
	})
}

// DR4: x-opt-delivery-time in a modified outcome delays one return until
// that time whatever the configuration; a past or non-integer value does
// not; the annotation stays on the message; classic queues ignore it.
func TestDeliveryTimeAnnotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum)
		require.Equal(t, Accepted, e.publish(t, "", msg("m1", "q")))
		require.Equal(t, Accepted, e.publish(t, "", msg("m2", "q")))
		s, c := subscribe(t, q, 1)
		require.Equal(t, []string{"m1"}, c.bodies())
		at := time.Now().Add(2 * time.Second).UnixMilli()
		require.NoError(t, s.Settle(c.last(t).Tag, modify(false, "x-opt-delivery-time", value.Timestamp(at))))
		s.Flow(1, 1, false)
		require.Equal(t, []string{"m1", "m2"}, c.bodies(), "m2 is delivered while m1 waits")
		require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleAccept}))
		s.Flow(2, 1, false)
		waitFor(1999 * time.Millisecond)
		require.Equal(t, 2, c.n())
		waitFor(time.Millisecond)
		require.Equal(t, []string{"m1", "m2", "m1"}, c.bodies())
		d := c.last(t)
		assert.Zero(t, d.Header.DeliveryCount)
		assert.False(t, d.Header.FirstAcquirer)
		assert.Equal(t, at, ann(d.BrokerAnnotations(), "x-opt-delivery-time"), "kept as a long")

		// In the past, or not an integer: returned at once.
		for i, v := range []any{int64(1), float64(time.Now().Add(time.Hour).UnixMilli()), "tomorrow"} {
			s.Flow(uint32(3+i), 1, false)
			require.NoError(t, s.Settle(c.last(t).Tag, modify(false, "x-opt-delivery-time", v)))
			require.Equal(t, 4+i, c.n(), "%v", v)
		}
		s.Cancel(CancelDetach)

		cq := e.queue(t, "cq", Classic)
		require.Equal(t, Accepted, e.publish(t, "", msg("c", "cq")))
		cs, cc := subscribe(t, cq, 2)
		require.NoError(t, cs.Settle(cc.last(t).Tag, modify(false, "x-opt-delivery-time", time.Now().Add(time.Hour).UnixMilli())))
		require.Equal(t, 2, cc.n(), "a classic queue requeues at once")
		cs.Cancel(CancelDetach)
	})
}

// DR5: the delivery limit is checked first; over it, the message is
// dead-lettered at once, a delivery time in that settle notwithstanding.
func TestDelayedRetryLimitBeatsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(1), "x-delayed-retry-type", "failed",
			"x-delayed-retry-min", int64(1000), "x-dead-letter-exchange", "")
		s, c := subscribe(t, q, 10)
		require.Equal(t, Accepted, e.publish(t, "", msg("m", "q")))
		require.NoError(t, s.Settle(c.last(t).Tag, modify(true)))
		assert.Equal(t, 1, q.Info().MessagesDelayed)
		waitFor(time.Second)
		require.Equal(t, 2, c.n())
		assert.Equal(t, uint32(1), c.last(t).Header.DeliveryCount)
		at := time.Now().Add(time.Hour).UnixMilli()
		require.NoError(t, s.Settle(c.last(t).Tag, modify(true, "x-opt-delivery-time", at)))
		require.Equal(t, []string{"m:delivery_limit"}, e.dl.bodies())
		dead := e.dl.all()[0]
		assert.Equal(t, uint32(2), dead.Msg.DeliveryCount)
		assert.Equal(t, at, ann(dead.Msg.Anns, "x-opt-delivery-time"), "the annotation goes with the dead letter")
		assert.Zero(t, q.Info().MessagesDelayed)
		s.Cancel(CancelDetach)
	})
}

// A delayed message whose TTL passes while it waits is dead-lettered as
// expired at its deadline (RabbitMQ would wait for the promotion).
func TestDelayedMessageExpiresAtItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-message-ttl", int64(1000), "x-delayed-retry-type", "all",
			"x-delayed-retry-min", int64(5000), "x-dead-letter-exchange", "")
		start := time.Now()
		require.Equal(t, Accepted, e.publish(t, "", msg("m", "q")))
		s, c := subscribe(t, q, 10)
		waitFor(100 * time.Millisecond)
		require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
		assert.Equal(t, 1, q.Info().MessagesDelayed)
		waitFor(899 * time.Millisecond)
		assert.Zero(t, e.dl.n())
		waitFor(time.Millisecond)
		require.Equal(t, []string{"m:expired"}, e.dl.bodies())
		assert.Equal(t, time.Second, e.dl.at[0].Sub(start))
		assert.Zero(t, q.Info().MessagesDelayed)
		waitFor(10 * time.Second)
		assert.Equal(t, 1, c.n(), "never redelivered")
		s.Cancel(CancelDetach)
	})
}

// DR6: delayed messages count toward the length limit.
func TestDelayedCountsTowardLengthLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delayed-retry-type", "all", "x-delayed-retry-min", int64(10000),
			"x-max-length", int64(2), "x-overflow", "reject-publish")
		require.Equal(t, Accepted, e.publish(t, "", msg("m1", "q")))
		s, c := subscribe(t, q, 1)
		require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
		info := q.Info()
		assert.Equal(t, []int{0, 0, 1}, []int{info.Messages, info.MessagesUnacknowledged, info.MessagesDelayed})
		s.Cancel(CancelDetach)
		require.Equal(t, Accepted, e.publish(t, "", msg("m2", "q")))
		require.Equal(t, Accepted, e.publish(t, "", msg("m3", "q")), "the quorum overshoot by one")
		require.Equal(t, Rejected, e.publish(t, "", msg("m4", "q")))

		// Drop-head cannot drop a delayed message, and does not loop over it.
		q2 := e.queue(t, "q2", Quorum, "x-delayed-retry-type", "all", "x-delayed-retry-min", int64(10000),
			"x-max-length", int64(1))
		require.Equal(t, Accepted, e.publish(t, "", msg("a", "q2")))
		s2, c2 := subscribe(t, q2, 1)
		require.NoError(t, s2.Settle(c2.last(t).Tag, Settlement{Kind: SettleRelease}))
		s2.Cancel(CancelDetach)
		require.Equal(t, Accepted, e.publish(t, "", msg("b", "q2")))
		assert.Equal(t, 1, q2.Info().MessagesDelayed)
		assert.Zero(t, q2.Info().Messages, "b was dropped from the head")

		// Purge takes delayed messages and counts them.
		assert.Equal(t, 1, q2.Purge())
		assert.Zero(t, q2.Info().MessagesDelayed)
		waitFor(20 * time.Second)
		assert.Zero(t, q2.Info().Messages)
	})
}

// A consumer that goes away (connection lost: a failed return) or detaches
// (a plain return on a quorum queue) returns its messages through the same
// decision.
func TestDelayedRetryOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delayed-retry-type", "failed", "x-delayed-retry-min", int64(3000))
		require.Equal(t, Accepted, e.publish(t, "", msg("m", "q")))
		s, _ := subscribe(t, q, 1)
		s.Cancel(CancelDetach)
		assert.Equal(t, 1, q.Info().Messages, "a detach is not a failure")
		s, _ = subscribe(t, q, 1)
		s.Cancel(CancelConnectionLost)
		info := q.Info()
		assert.Equal(t, []int{0, 1}, []int{info.Messages, info.MessagesDelayed})
		s2, c2 := subscribe(t, q, 1)
		waitFor(2999 * time.Millisecond)
		assert.Zero(t, c2.n())
		waitFor(time.Millisecond)
		require.Equal(t, 1, c2.n())
		assert.Equal(t, uint32(1), c2.last(t).Header.DeliveryCount)
		s2.Cancel(CancelDetach)
	})
}

// A policy change applies to later returns; messages already delayed keep
// their time.
func TestDelayedRetryPolicyChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum)
		require.NoError(t, e.v.PutPolicy(Policy{Name: "p", Pattern: "^q$", Definition: def("delayed-retry-type", "returned", "delayed-retry-min", int64(1000))}))
		require.Equal(t, Accepted, e.publish(t, "", msg("m", "q")))
		s, c := subscribe(t, q, 10)
		require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
		require.Equal(t, 1, q.Info().MessagesDelayed, "delayed by the policy")
		require.NoError(t, e.v.DeletePolicy("p"))
		assert.Equal(t, "disabled", q.Info().DelayedRetry)
		waitFor(999 * time.Millisecond)
		require.Equal(t, 1, c.n(), "the delayed message keeps its time")
		waitFor(time.Millisecond)
		require.Equal(t, 2, c.n())
		require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
		require.Equal(t, 3, c.n(), "no delay without the policy")
		s.Cancel(CancelDetach)
	})
}

// A durable delayed message keeps its ready-at time across a restart, and
// one whose time passed during the stop is ready after it.
func TestDelayedRetrySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clock := newClock()
	d := openDurable(t, dir, withClock(clock))
	q := d.queue(t, "q", Quorum, "x-delayed-retry-type", "all", "x-delayed-retry-min", int64(3_600_000))
	for _, b := range []string{"a", "b", "c"} {
		require.Equal(t, Accepted, d.publish(t, "", durableMsg(t, b, "q")))
	}
	s, c := subscribe(t, q, 2)
	require.Len(t, c.all(), 2)
	require.NoError(t, s.Settle(c.all()[0].Tag, modify(true)))
	clock.Advance(time.Minute)
	require.NoError(t, s.Settle(c.all()[1].Tag, Settlement{Kind: SettleRelease}))
	info := q.Info()
	require.Equal(t, 2, info.MessagesDelayed)
	d.close(t)

	d = openDurable(t, dir, withClock(clock))
	q, ok := d.v.Queue("q")
	require.True(t, ok)
	got := q.Info()
	assert.Equal(t, []int{1, 2}, []int{got.Messages, got.MessagesDelayed})
	assert.Equal(t, info.NextDelayedAt, got.NextDelayedAt)
	assert.Equal(t, info.LastDelayedAt, got.LastDelayedAt)
	d.close(t)

	// The first one's time passes while the broker is stopped.
	clock.Advance(time.Hour - 30*time.Second)
	d = openDurable(t, dir, withClock(clock))
	q, _ = d.v.Queue("q")
	eventually(t, func() bool { return q.Info().MessagesDelayed == 1 }, 5*time.Second)
	s, c = subscribe(t, q, 3)
	require.Equal(t, []string{"a", "c"}, bodiesOf(t, c.all()), "the promoted one is a return, delivered first")
	assert.Equal(t, uint32(1), c.all()[0].Header.DeliveryCount)
	s.Cancel(CancelDetach)
	d.close(t)
}

// A message delivered but unsettled when the broker stopped comes back as a
// failed return, which a failed-type queue delays.
func TestDelayedRetryUnsettledAtStop(t *testing.T) {
	dir := t.TempDir()
	clock := newClock()
	d := openDurable(t, dir, withClock(clock))
	q := d.queue(t, "q", Quorum, "x-delayed-retry-type", "failed", "x-delayed-retry-min", int64(60_000))
	require.Equal(t, Accepted, d.publish(t, "", durableMsg(t, "held", "q")))
	_, c := subscribe(t, q, 1)
	require.Equal(t, 1, c.n())
	d.close(t)

	d = openDurable(t, dir, withClock(clock))
	q, _ = d.v.Queue("q")
	info := q.Info()
	assert.Equal(t, []int{0, 1}, []int{info.Messages, info.MessagesDelayed})
	assert.Equal(t, clock.Now().Add(time.Minute).UnixMilli(), info.NextDelayedAt)
	d.close(t)

	clock.Advance(time.Minute)
	d = openDurable(t, dir, withClock(clock))
	q, _ = d.v.Queue("q")
	eventually(t, func() bool { return q.Info().Messages == 1 }, 5*time.Second)
	_, c = subscribe(t, q, 1)
	require.Equal(t, []string{"held"}, bodiesOf(t, c.all()))
	assert.Equal(t, uint32(1), c.all()[0].Header.DeliveryCount)
	d.close(t)
}
