package router

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

func publishN(t *testing.T, e *env, q string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		require.Equal(t, Accepted, e.publish(t, "", msg(fmt.Sprintf("m%d", i), q)))
	}
}

func TestCreditAccounting(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	publishN(t, e, "q", 6)
	c := &fakeConsumer{}
	s, err := q.Subscribe(c, ConsumerOptions{})
	require.NoError(t, err)
	assert.Zero(t, c.n(), "no credit yet")

	s.Flow(0, 2, false)
	assert.Equal(t, []string{"m1", "m2"}, c.bodies())
	// The receiver has not seen the deliveries yet: its delivery-count is
	// still 0, so credit 2 grants nothing new.
	s.Flow(0, 2, false)
	assert.Equal(t, 2, c.n())
	// Stale delivery-count 0 with credit 3: 0+3-2 = 1 more.
	s.Flow(0, 3, false)
	assert.Equal(t, 3, c.n())
	s.Flow(3, 2, false)
	assert.Equal(t, 5, c.n())
	assert.Equal(t, 1, q.Len())

	tags := map[uint64]bool{}
	for _, d := range c.all() {
		assert.False(t, tags[d.Tag], "tags are unique")
		tags[d.Tag] = true
	}
	info := q.Info()
	assert.Equal(t, 5, info.MessagesUnacknowledged)
	assert.Equal(t, 1, info.Messages)
	assert.Equal(t, 1, info.Consumers)
}

func TestCreditSerialWrap(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	publishN(t, e, "q", 5)
	c := &fakeConsumer{}
	start := uint32(0xFFFFFFFE)
	s, err := q.Subscribe(c, ConsumerOptions{InitialDeliveryCount: start})
	require.NoError(t, err)
	s.Flow(start, 4, false)
	assert.Equal(t, 4, c.n())
	s.Flow(start+4, 1, false) // wraps to 2
	assert.Equal(t, 5, c.n())
	s.Flow(start+4, 0, true) // drain with no credit left still reports
	assert.Equal(t, []uint32{start + 5}, c.drained)
}

func TestCreditArrivesBeforeMessages(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	_, c := subscribe(t, q, 2)
	publishN(t, e, "q", 3)
	assert.Equal(t, []string{"m1", "m2"}, c.bodies())
	assert.Equal(t, 1, q.Len())
}

func TestDrain(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	publishN(t, e, "q", 2)
	c := &fakeConsumer{}
	s, err := q.Subscribe(c, ConsumerOptions{})
	require.NoError(t, err)
	s.Flow(0, 5, true)
	assert.Equal(t, 2, c.n())
	assert.Equal(t, []uint32{5}, c.drained, "delivery-count advanced to 0+5")
	publishN(t, e, "q", 1)
	assert.Equal(t, 2, c.n(), "credit was consumed by the drain")
	s.Flow(5, 1, false)
	assert.Equal(t, 3, c.n())

	// Drain when all credit was used by deliveries.
	publishN(t, e, "q", 3)
	s.Flow(6, 2, true)
	assert.Equal(t, 5, c.n())
	assert.Equal(t, []uint32{5, 8}, c.drained)
}

func TestRoundRobin(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	_, c1 := subscribe(t, q, 10)
	_, c2 := subscribe(t, q, 10)
	_, c3 := subscribe(t, q, 1)
	assert.Equal(t, int64(21), q.Info().ConsumerCredit)
	publishN(t, e, "q", 7)
	assert.Equal(t, int64(14), q.Info().ConsumerCredit, "7 deliveries used 7 credits")
	assert.Equal(t, []string{"m1", "m4", "m6"}, c1.bodies())
	assert.Equal(t, []string{"m2", "m5", "m7"}, c2.bodies())
	assert.Equal(t, []string{"m3"}, c3.bodies())
}

func TestPreSettled(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	publishN(t, e, "q", 2)
	c := &fakeConsumer{}
	s, err := q.Subscribe(c, ConsumerOptions{PreSettled: true})
	require.NoError(t, err)
	s.Flow(0, 10, false)
	assert.Equal(t, 2, c.n())
	assert.Zero(t, q.Info().MessagesUnacknowledged)
	require.ErrorIs(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleAccept}), ErrNotFound)
	s.Cancel(CancelConnectionLost)
	assert.Zero(t, q.Len(), "nothing returns")
}

func TestFirstDeliveryHeader(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ)
			m := msg("m1", "q")
			m.Header.Durable = true
			m.Header.Priority = 7
			m.Anns = value.Map{{Key: value.Symbol("x-custom"), Value: "v"}}
			e.publish(t, "", m)
			_, c := subscribe(t, q, 1)
			d := c.last(t)
			assert.Equal(t, Header{Durable: true, Priority: 7, FirstAcquirer: true}, d.Header)
			// No x-acquired-count on a first delivery, quorum queue or not
			// (RabbitMQ 4.3 writes the counters once there is one).
			want := value.Map{
				{Key: value.Symbol("x-exchange"), Value: ""},
				{Key: value.Symbol("x-routing-key"), Value: "q"},
				{Key: value.Symbol("x-custom"), Value: "v"},
			}
			assert.Equal(t, want, d.AMQP10Annotations())

			// Carried delivery count and deaths clear first-acquirer.
			m = msg("m2", "q")
			m.DeliveryCount = 3
			e.publish(t, "", m)
			m = msg("m3", "q")
			m.Anns = value.Map{{Key: value.Symbol("x-opt-deaths"), Value: value.List{}}}
			e.publish(t, "", m)
			s2, c2 := subscribe(t, q, 2)
			_ = s2
			ds := c2.all()
			require.Len(t, ds, 2)
			assert.Equal(t, uint32(3), ds[0].Header.DeliveryCount)
			assert.False(t, ds[0].Header.FirstAcquirer)
			if typ == Quorum {
				// A delivery-count carried in, nothing acquired yet: both
				// counters show it.
				assert.Equal(t, int64(3), ann(ds[0].AMQP10Annotations(), "x-delivery-count"))
				assert.Equal(t, int64(3), ann(ds[0].AMQP10Annotations(), "x-acquired-count"))
			} else {
				assert.False(t, hasAnn(ds[0].AMQP10Annotations(), "x-acquired-count"))
				assert.False(t, hasAnn(ds[0].AMQP10Annotations(), "x-delivery-count"))
			}
			assert.False(t, ds[1].Header.FirstAcquirer)
		})
	}
}

// settleOnce publishes one message, delivers it, settles it with o and
// redelivers whatever is requeued.
func settleOnce(t *testing.T, typ QueueType, o Settlement, args ...any) (*env, *fakeConsumer) {
	t.Helper()
	e := newEnv(t)
	q := e.queue(t, "q", typ, args...)
	e.publish(t, "", msg("m1", "q"))
	s, c := subscribe(t, q, 1)
	require.NoError(t, s.Settle(c.last(t).Tag, o))
	s.Flow(1, 1, false)
	return e, c
}

func TestOutcomes(t *testing.T) {
	rejErr := &Error{Condition: "app:bad", Description: "nope"}
	type want struct {
		redelivered bool
		dc          uint32
		acquired    int64
		dead        Reason
		deadErr     *Error
	}
	tests := []struct {
		name    string
		o       Settlement
		classic want
		quorum  want
	}{
		{"accepted", Settlement{Kind: SettleAccept}, want{}, want{}},
		{"released", Settlement{Kind: SettleRelease},
			want{redelivered: true, dc: 0}, want{redelivered: true, dc: 0, acquired: 1}},
		{"rejected", Settlement{Kind: SettleReject, Error: rejErr},
			want{dead: ReasonRejected, dc: 1, deadErr: rejErr}, want{dead: ReasonRejected, dc: 1, deadErr: rejErr}},
		{"modified", Settlement{Kind: SettleModify},
			want{redelivered: true}, want{redelivered: true, acquired: 1}},
		{"modified failed", Settlement{Kind: SettleModify, DeliveryFailed: true},
			want{redelivered: true, dc: 1}, want{redelivered: true, dc: 1, acquired: 1}},
		{"modified undeliverable", Settlement{Kind: SettleModify, UndeliverableHere: true},
			want{dead: ReasonRejected}, want{dead: ReasonRejected}},
		{"modified failed undeliverable", Settlement{Kind: SettleModify, DeliveryFailed: true, UndeliverableHere: true},
			want{dead: ReasonRejected, dc: 1}, want{dead: ReasonRejected, dc: 1}},
	}
	for _, tt := range tests {
		for _, typ := range []QueueType{Classic, Quorum} {
			t.Run(tt.name+"/"+string(typ), func(t *testing.T) {
				w := tt.classic
				if typ == Quorum {
					w = tt.quorum
				}
				e, c := settleOnce(t, typ, tt.o)
				q, _ := e.v.Queue("q")
				if w.redelivered {
					require.Equal(t, 2, c.n())
					d := c.last(t)
					assert.Equal(t, w.dc, d.Header.DeliveryCount)
					assert.False(t, d.Header.FirstAcquirer)
					if typ == Quorum {
						assert.Equal(t, w.acquired, ann(d.AMQP10Annotations(), "x-acquired-count"))
						if w.dc > 0 {
							assert.Equal(t, int64(w.dc), ann(d.AMQP10Annotations(), "x-delivery-count"))
						} else {
							assert.False(t, hasAnn(d.AMQP10Annotations(), "x-delivery-count"))
						}
					} else {
						assert.False(t, hasAnn(d.AMQP10Annotations(), "x-acquired-count"))
					}
				} else {
					assert.Equal(t, 1, c.n())
				}
				dead := e.dl.all()
				if w.dead == "" {
					assert.Empty(t, dead)
				} else {
					require.Len(t, dead, 1)
					assert.Equal(t, w.dead, dead[0].Reason)
					assert.Equal(t, w.dc, dead[0].Msg.DeliveryCount)
					assert.Equal(t, w.deadErr, dead[0].Error)
					assert.Same(t, q, e.dl.srcs[0])
				}
				assert.Zero(t, q.Len())
			})
		}
	}
}

func TestSettleErrors(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	e.publish(t, "", msg("m1", "q"))
	s, c := subscribe(t, q, 1)
	tag := c.last(t).Tag
	require.ErrorIs(t, s.Settle(tag+100, Settlement{Kind: SettleAccept}), ErrNotFound)
	require.ErrorIs(t, s.Settle(tag, Settlement{Kind: SettleKind(99)}), ErrInvalidArgument)
	require.NoError(t, s.Settle(tag, Settlement{Kind: SettleAccept}))
	require.ErrorIs(t, s.Settle(tag, Settlement{Kind: SettleAccept}), ErrNotFound, "already settled")
}

func TestRequeuePosition(t *testing.T) {
	for _, tt := range []struct {
		typ  QueueType
		want []string
	}{
		{Classic, []string{"m1", "m2", "m3"}}, // back at their original positions
		{Quorum, []string{"m2", "m1", "m3"}},  // returns first, in return order
	} {
		t.Run(string(tt.typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", tt.typ)
			publishN(t, e, "q", 3)
			s, c := subscribe(t, q, 2)
			ds := c.all()
			require.NoError(t, s.Settle(ds[1].Tag, Settlement{Kind: SettleRelease}))
			require.NoError(t, s.Settle(ds[0].Tag, Settlement{Kind: SettleRelease}))
			s.Flow(2, 3, false)
			assert.Equal(t, tt.want, c.bodies()[2:])
		})
	}
}

func TestQuorumDeliveryLimit(t *testing.T) {
	failed := Settlement{Kind: SettleModify, DeliveryFailed: true}
	t.Run("limit 2", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(2))
		e.publish(t, "", msg("m1", "q"))
		s, c := subscribe(t, q, 10)
		for range 2 {
			require.NoError(t, s.Settle(c.last(t).Tag, failed))
		}
		require.Equal(t, 3, c.n(), "failed twice, still redelivered")
		assert.Empty(t, e.dl.all())
		require.NoError(t, s.Settle(c.last(t).Tag, failed))
		dead := e.dl.all()
		require.Len(t, dead, 1)
		assert.Equal(t, ReasonDeliveryLimit, dead[0].Reason)
		assert.Equal(t, uint32(3), dead[0].Msg.DeliveryCount)
		assert.Equal(t, 3, c.n())
	})
	t.Run("limit 0", func(t *testing.T) {
		e, c := settleOnce(t, Quorum, failed, "x-delivery-limit", int64(0))
		assert.Equal(t, 1, c.n())
		assert.Equal(t, []string{"m1:delivery_limit"}, e.dl.bodies())
	})
	t.Run("released never counts", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(0))
		e.publish(t, "", msg("m1", "q"))
		s, c := subscribe(t, q, 100)
		for range 5 {
			require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
			require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleModify}))
		}
		assert.Equal(t, 11, c.n())
		assert.Equal(t, int64(10), ann(c.last(t).AMQP10Annotations(), "x-acquired-count"))
		assert.Empty(t, e.dl.all())
	})
	t.Run("negative is unlimited", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(-1))
		e.publish(t, "", msg("m1", "q"))
		s, c := subscribe(t, q, 100)
		for range 30 {
			require.NoError(t, s.Settle(c.last(t).Tag, failed))
		}
		assert.Equal(t, 31, c.n())
		assert.Empty(t, e.dl.all())
	})
	t.Run("default 20", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum)
		e.publish(t, "", msg("m1", "q"))
		s, c := subscribe(t, q, 100)
		for range 21 {
			require.NoError(t, s.Settle(c.last(t).Tag, failed))
		}
		assert.Equal(t, 21, c.n())
		assert.Equal(t, []string{"m1:delivery_limit"}, e.dl.bodies())
	})
	t.Run("undeliverable skips the limit check", func(t *testing.T) {
		e, _ := settleOnce(t, Quorum, Settlement{Kind: SettleModify, DeliveryFailed: true, UndeliverableHere: true}, "x-delivery-limit", int64(0))
		assert.Equal(t, []string{"m1:rejected"}, e.dl.bodies())
	})
	t.Run("classic has no limit", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Classic)
		e.publish(t, "", msg("m1", "q"))
		s, c := subscribe(t, q, 100)
		for range 25 {
			require.NoError(t, s.Settle(c.last(t).Tag, failed))
		}
		assert.Equal(t, uint32(25), c.last(t).Header.DeliveryCount)
		assert.Empty(t, e.dl.all())
	})
}

func TestModifiedAnnotations(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum)
	m := msg("m1", "q")
	m.Anns = value.Map{{Key: value.Symbol("x-first"), Value: "kept"}}
	e.publish(t, "", m)
	s, c := subscribe(t, q, 10)

	list := value.List{int32(1), "two"}
	inner := value.Map{{Key: "k", Value: int32(1)}}
	arr := &value.Array{Type: amqp10.TypeInt, Elems: []any{int32(1)}}
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleModify, Annotations: value.Map{
		{Key: value.Symbol("x-other"), Value: uint32(99)},
		{Key: value.Symbol("x-sym"), Value: value.Symbol("s")},
		{Key: value.Symbol("x-bin"), Value: []byte("b")},
		{Key: value.Symbol("x-ts"), Value: value.Timestamp(1234)},
		{Key: value.Symbol("x-bool"), Value: true},
		{Key: value.Symbol("x-byte"), Value: int8(-3)},
		{Key: value.Symbol("x-list"), Value: list},
		{Key: value.Symbol("x-map"), Value: inner},
		{Key: value.Symbol("x-array"), Value: arr},
	}}))
	d := c.last(t)
	assert.Equal(t, "kept", ann(d.AMQP10Annotations(), "x-first"))
	assert.Equal(t, int64(99), ann(d.AMQP10Annotations(), "x-other"))
	assert.Equal(t, "s", ann(d.AMQP10Annotations(), "x-sym"))
	assert.Equal(t, "b", ann(d.AMQP10Annotations(), "x-bin"))
	assert.Equal(t, int64(1234), ann(d.AMQP10Annotations(), "x-ts"))
	assert.Equal(t, true, ann(d.AMQP10Annotations(), "x-bool"))
	assert.Equal(t, int64(-3), ann(d.AMQP10Annotations(), "x-byte"))
	assert.Equal(t, list, ann(d.AMQP10Annotations(), "x-list"))
	assert.Equal(t, inner, ann(d.AMQP10Annotations(), "x-map"))
	assert.Same(t, arr, ann(d.AMQP10Annotations(), "x-array"))
	assert.Equal(t, int64(99), ann(d.Msg.Anns, "x-other"), "Delivery.Msg carries the merged annotations")

	// maps:merge: new values overwrite, nothing is removed.
	require.NoError(t, s.Settle(d.Tag, Settlement{Kind: SettleModify, Annotations: value.Map{
		{Key: value.Symbol("x-other"), Value: "new"},
	}}))
	d = c.last(t)
	assert.Equal(t, "new", ann(d.AMQP10Annotations(), "x-other"))
	assert.Equal(t, "s", ann(d.AMQP10Annotations(), "x-sym"))

	// Invalid keys: error, delivery untouched.
	for _, bad := range []any{"x-string-key", value.Symbol("no-prefix"), uint64(1)} {
		err := s.Settle(d.Tag, Settlement{Kind: SettleModify, Annotations: value.Map{{Key: bad, Value: int64(1)}}})
		require.ErrorIs(t, err, ErrInvalidArgument, "%v", bad)
	}
	assert.Equal(t, 1, q.Info().MessagesUnacknowledged)

	// The dead copy carries the merged annotations.
	require.NoError(t, s.Settle(d.Tag, Settlement{Kind: SettleModify, UndeliverableHere: true, Annotations: value.Map{
		{Key: value.Symbol("x-last"), Value: int16(5)},
	}}))
	dead := e.dl.all()
	require.Len(t, dead, 1)
	assert.Equal(t, "new", ann(dead[0].Msg.Anns, "x-other"))
	assert.Equal(t, int64(5), ann(dead[0].Msg.Anns, "x-last"))
	assert.Equal(t, "kept", ann(dead[0].Msg.Anns, "x-first"))
	assert.Len(t, m.Anns, 1, "the published message is not mutated")
}

func TestClassicIgnoresModifiedAnnotations(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	e.publish(t, "", msg("m1", "q"))
	s, c := subscribe(t, q, 10)
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleModify, Annotations: value.Map{
		{Key: "not-validated", Value: int64(1)}, {Key: value.Symbol("x-a"), Value: int64(1)},
	}}))
	assert.False(t, hasAnn(c.last(t).AMQP10Annotations(), "x-a"))
}

func TestCancel(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		for _, tt := range []struct {
			reason CancelReason
			dc     uint32
		}{{CancelDetach, 0}, {CancelConnectionLost, 1}} {
			if typ == Classic {
				// A classic queue counts a detached link's unsettled
				// messages as failed deliveries too (RabbitMQ 4.3).
				tt.dc = 1
			}
			t.Run(fmt.Sprintf("%s/%d", typ, tt.reason), func(t *testing.T) {
				e := newEnv(t)
				q := e.queue(t, "q", typ)
				publishN(t, e, "q", 3)
				s, c := subscribe(t, q, 2)
				require.NoError(t, s.Settle(c.all()[0].Tag, Settlement{Kind: SettleAccept}))
				s.Cancel(tt.reason)
				s.Cancel(tt.reason) // idempotent
				assert.Equal(t, 2, q.Len())
				require.ErrorIs(t, s.Settle(c.all()[1].Tag, Settlement{Kind: SettleAccept}), ErrNotFound)
				s.Flow(0, 10, false) // no effect after cancel
				assert.Equal(t, 2, c.n())

				_, c2 := subscribe(t, q, 10)
				ds := c2.all()
				require.Len(t, ds, 2)
				assert.Equal(t, "m2", string(ds[0].Msg.Container.(AMQP10).Wire.Bare()))
				assert.Equal(t, tt.dc, ds[0].Header.DeliveryCount)
				assert.False(t, ds[0].Header.FirstAcquirer)
				assert.True(t, ds[1].Header.FirstAcquirer)
				if typ == Quorum {
					assert.Equal(t, int64(1), ann(ds[0].AMQP10Annotations(), "x-acquired-count"))
				}
			})
		}
	}
	t.Run("connection lost hits the delivery limit", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(0))
		publishN(t, e, "q", 2)
		s, _ := subscribe(t, q, 2)
		s.Cancel(CancelConnectionLost)
		assert.Equal(t, []string{"m1:delivery_limit", "m2:delivery_limit"}, e.dl.bodies())
		assert.Zero(t, q.Len())
	})
	t.Run("detach never hits it", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(0))
		publishN(t, e, "q", 2)
		s, _ := subscribe(t, q, 2)
		s.Cancel(CancelDetach)
		assert.Empty(t, e.dl.all())
		assert.Equal(t, 2, q.Len())
	})
}

func TestCancelHandsToOtherConsumer(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic)
	publishN(t, e, "q", 2)
	s1, _ := subscribe(t, q, 2)
	_, c2 := subscribe(t, q, 5)
	s1.Cancel(CancelDetach)
	assert.Equal(t, []string{"m1", "m2"}, c2.bodies())
}

func TestAutoDeleteQueue(t *testing.T) {
	e := newEnv(t)
	q, _, err := e.v.DeclareQueue(QueueSpec{Name: "ad", AutoDelete: true})
	require.NoError(t, err)
	s1, _ := subscribe(t, q, 1)
	s2, _ := subscribe(t, q, 1)
	s1.Cancel(CancelDetach)
	_, ok := e.v.Queue("ad")
	assert.True(t, ok, "one consumer left")
	s2.Cancel(CancelDetach)
	_, ok = e.v.Queue("ad")
	assert.False(t, ok)
	assert.True(t, q.Deleted())
	_, err = q.Subscribe(&fakeConsumer{}, ConsumerOptions{})
	require.ErrorIs(t, err, ErrNotFound)

	// Never consumed: stays.
	_, _, err = e.v.DeclareQueue(QueueSpec{Name: "ad2", AutoDelete: true})
	require.NoError(t, err)
	e.publish(t, "", msg("m", "ad2"))
	_, ok = e.v.Queue("ad2")
	assert.True(t, ok)
}

func TestPurge(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-message-ttl", int64(60000))
	publishN(t, e, "q", 3)
	s, c := subscribe(t, q, 1)
	assert.Equal(t, 2, q.Purge())
	assert.Zero(t, q.Len())
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
	assert.Equal(t, 1, q.Len())
	assert.Empty(t, e.dl.all(), "purge never dead-letters")
}

// TestCancelOrderAfterLongHeld: deliveries held while thousands of later ones
// are settled (so the subscription keeps them apart from the recent ones)
// still return to the queue in delivery order.
func TestCancelOrderAfterLongHeld(t *testing.T) {
	const n = 6000
	e := newEnv(t)
	q := e.queue(t, "q", Quorum) // returns are delivered in return order
	publishN(t, e, "q", n)
	s, c := subscribe(t, q, n)
	ds := c.all()
	require.Len(t, ds, n)
	tags := make([]uint64, 0, n)
	for _, d := range ds[2 : n-1] {
		tags = append(tags, d.Tag)
	}
	errs := make([]error, len(tags))
	s.SettleBatch(tags, Settlement{Kind: SettleAccept}, errs)
	for _, err := range errs {
		require.NoError(t, err)
	}
	s.Cancel(CancelDetach)
	_, c2 := subscribe(t, q, 10)
	assert.Equal(t, []string{"m1", "m2", fmt.Sprint("m", n)}, c2.bodies())
}

// BenchmarkSettleOutstanding is BenchmarkPublishDeliverSettle with 1000
// deliveries outstanding: after each publish the consumer settles the oldest
// one, as a consumer with prefetch does.
func BenchmarkSettleOutstanding(b *testing.B) {
	const outstanding = 1000
	h := newHotPath(b, "")
	publish := func() {
		m := NewAMQP10Message(h.wire)
		m.RoutingKeys = h.keys
		if res, err := h.vh.Publish(Publish{Exchange: "", Msg: m}); err != nil || res.Outcome.Kind != Accepted {
			b.Fatalf("publish: %v %v", res.Outcome, err)
		}
	}
	h.sub.Flow(0, 2*outstanding, false)
	for range outstanding {
		publish()
	}
	b.ReportAllocs()
	for b.Loop() {
		publish()
		if err := h.sub.Settle(h.c.last.Tag-outstanding, Settlement{Kind: SettleAccept}); err != nil {
			b.Fatal(err)
		}
		h.n++
		if h.n%500 == 0 {
			h.sub.Flow(h.n, 2*outstanding, false)
		}
	}
}
