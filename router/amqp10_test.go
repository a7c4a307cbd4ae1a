package router

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/value"
)

// withHistory returns anns with deaths recorded, as the dead-letterer
// records them (annotations.RecordIn).
func withHistory(anns value.Map, errCond string, deaths ...string) value.Map {
	for i, q := range deaths {
		ev := annotations.Event{Queue: q, Reason: annotations.ReasonExpired, Exchange: "x" + q,
			RoutingKeys: []string{"k", q}, Time: value.Timestamp(1700000000000 + i)}
		if errCond != "" && i == len(deaths)-1 {
			ev.Reason = annotations.ReasonRejected
			ev.Error = &annotations.DeathError{Condition: errCond, Description: "why"}
		}
		anns, _ = annotations.RecordIn(nil, anns, ev, false)
	}
	return anns
}

// TestAMQP10DeliveryBytes pins the AMQP 1.0 delivery writer: the bytes
// written straight from the neutral form (AppendAMQP10Delivery) are the
// bytes of the general path, the annotation map that
// AppendAMQP10Annotations builds (the history expanded into x-opt-deaths
// and the x-*-death-* annotations) with the extra entries set over it.
func TestAMQP10DeliveryBytes(t *testing.T) {
	pubAnns, err := amqp10.AppendMessageAnnotations(nil, value.Map{
		{Key: value.Symbol("x-exchange"), Value: "publisher's"},
		{Key: value.Symbol("x-opt-deaths"), Value: "forged"},
		{Key: value.Symbol("x-last-death-error-condition"), Value: "forged"},
		{Key: value.Symbol("x-app"), Value: int64(1)},
	})
	require.NoError(t, err)
	bare := amqp10.AppendData(nil, []byte("body"))
	trace := value.Map{{Key: value.Symbol("x-opt-traceparent"), Value: "00-1"}}
	modified := value.Map{{Key: value.Symbol("x-n"), Value: int64(7)}, {Key: value.Symbol("x-routing-key"), Value: "set"}}
	cases := []struct {
		name   string
		pub    []byte
		anns   value.Map
		extra  value.Map
		quorum bool
		dc     uint32
		// neverReturned: acquired-count 0 (3 otherwise)
		neverReturned bool
	}{
		{name: "plain"},
		{name: "publisher annotations", pub: pubAnns},
		{name: "trace context", anns: trace, extra: value.Map{{Key: value.Symbol("x-opt-traceparent"), Value: "00-2"}}},
		{name: "first death", anns: withHistory(nil, "", "q1"), pub: pubAnns},
		{name: "deaths after the trace context", anns: withHistory(trace, "", "q1", "q2"), quorum: true, dc: 2},
		{name: "rejected with an error", anns: withHistory(nil, "app:e", "q1", "q2"), pub: pubAnns},
		{name: "modified after the death", anns: append(withHistory(trace, "app:e", "q1"), modified...), quorum: true},
		{name: "new extra entry", anns: withHistory(nil, "", "q1"), extra: value.Map{{Key: value.Symbol("x-new"), Value: "v"}}},
		{name: "quorum first delivery: no counters", quorum: true, neverReturned: true},
		{name: "quorum copy carrying a delivery-count", anns: withHistory(nil, "", "q1"), quorum: true, dc: 2, neverReturned: true},
		{name: "broker entry hidden by the history", anns: append(withHistory(nil, "", "q1"),
			value.KV{Key: value.Symbol("x-first-death-queue"), Value: "stale"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := amqp10.NewMessage(nil, tc.pub, bare, nil)
			m := NewAMQP10Message(w)
			m.Exchange, m.RoutingKeys = "ex", []string{"key"}
			d := &Delivery{Tag: 1, Msg: m, Header: Header{Priority: 4, DeliveryCount: tc.dc},
				anns: tc.anns, acquired: 3, quorum: tc.quorum}
			if tc.neverReturned {
				d.acquired = 0
			}
			var bc BoxCache
			got, err := AppendAMQP10Delivery(nil, d, tc.extra, &bc)
			require.NoError(t, err)

			general := d.AppendAMQP10Annotations(nil, nil)
			for _, kv := range tc.extra {
				general = general.Set(kv.Key, kv.Value)
			}
			h := AMQP10Header(&d.Header)
			want, err := w.AppendDelivery(nil, &h, general)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "written straight:\n%x\ngeneral path:\n%x", got, want)
		})
	}
}

// A quorum queue's counter annotations follow RabbitMQ 4.3's
// add_delivery_count_header: none before a return or a failure, the
// acquired-count once returned, and a delivery-count carried in without an
// acquired-count as both. Classic queues write none.
func TestQuorumCounterAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name          string
		quorum        bool
		acquired, dc  uint32
		wantPresent   bool
		wantAcquired  int64
		wantDeliveryC bool
	}{
		{name: "first delivery", quorum: true},
		{name: "released once", quorum: true, acquired: 1, wantPresent: true, wantAcquired: 1},
		{name: "failed once", quorum: true, acquired: 1, dc: 1, wantPresent: true, wantAcquired: 1, wantDeliveryC: true},
		{name: "dead-letter copy carrying 4", quorum: true, dc: 4, wantPresent: true, wantAcquired: 4, wantDeliveryC: true},
		{name: "that copy released once", quorum: true, acquired: 1, dc: 4, wantPresent: true, wantAcquired: 1, wantDeliveryC: true},
		{name: "classic", acquired: 2, dc: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Delivery{Msg: msg("m", "q"), Header: Header{DeliveryCount: tc.dc}, acquired: tc.acquired, quorum: tc.quorum}
			anns := d.AMQP10Annotations()
			require.Equal(t, tc.wantPresent, hasAnn(anns, "x-acquired-count"))
			if tc.wantPresent {
				require.Equal(t, tc.wantAcquired, ann(anns, "x-acquired-count"))
			}
			require.Equal(t, tc.wantDeliveryC, hasAnn(anns, "x-delivery-count"))
			if tc.wantDeliveryC {
				require.Equal(t, int64(tc.dc), ann(anns, "x-delivery-count"))
			}
		})
	}
}

// TestStoredAnnotationsKeepTheAMQP10Form pins the store's format of broker
// annotations: the history is stored in its AMQP 1.0 form, the bytes a
// store written before the neutral form holds, and read back as the
// neutral form, in its place.
func TestStoredAnnotationsKeepTheAMQP10Form(t *testing.T) {
	trace := value.Map{{Key: value.Symbol("x-opt-traceparent"), Value: "00-1"}}
	anns := append(withHistory(trace, "app:e", "q1", "q2"), value.KV{Key: value.Symbol("x-n"), Value: int64(7)})
	got, err := appendAnns(nil, anns)
	require.NoError(t, err)
	want, err := amqp10.AppendMap(nil, annotations.ExpandAMQP10(nil, anns))
	require.NoError(t, err)
	require.Equal(t, want, got)

	r := &reader{b: got}
	back := r.anns()
	require.NoError(t, r.err)
	require.Len(t, back, len(anns))
	for i := range anns {
		switch anns[i].Key.(type) {
		case annotations.HistoryKey:
			h, ok := annotations.HistoryOf(back)
			require.True(t, ok)
			require.IsType(t, annotations.HistoryKey{}, back[i].Key)
			want, _ := annotations.HistoryOf(anns)
			require.Equal(t, want.Deaths, h.Deaths)
			require.Equal(t, want.First, h.First)
			require.Equal(t, want.Last, h.Last)
			require.Equal(t, want.LastError, h.LastError)
		default:
			require.Equal(t, anns[i], back[i])
		}
	}
}

// Writing a delivery in AMQP 1.0 allocates nothing, the dead-letter
// history and the publisher's annotations included.
func TestAMQP10DeliveryAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	pubAnns, err := amqp10.AppendMessageAnnotations(nil, value.Map{
		{Key: value.Symbol("x-app"), Value: int64(1)}, {Key: value.Symbol("x-opt-deaths"), Value: "forged"}})
	require.NoError(t, err)
	m := NewAMQP10Message(amqp10.NewMessage(nil, pubAnns, amqp10.AppendData(nil, []byte("body")), nil))
	m.Exchange, m.RoutingKeys = "ex", []string{"key"}
	trace := value.Map{{Key: value.Symbol("x-opt-traceparent"), Value: "00-1"}}
	d := &Delivery{Tag: 1, Msg: m, Header: Header{Priority: 4, DeliveryCount: 1},
		anns: withHistory(trace, "app:e", "q1", "q2"), acquired: 1, quorum: true}
	extra := value.Map{{Key: value.Symbol("x-opt-traceparent"), Value: "00-2"}}
	var bc BoxCache
	buf := make([]byte, 0, 4096)
	if got := testing.AllocsPerRun(100, func() {
		// A Delivery on the stack, as the link's loop holds one: writing
		// it must not move it to the heap.
		local := *d
		var err error
		if buf, err = AppendAMQP10Delivery(buf[:0], &local, extra, &bc); err != nil {
			t.Fatal(err)
		}
	}); got != 0 {
		t.Errorf("AppendAMQP10Delivery: %v allocs, want 0", got)
	}
}
