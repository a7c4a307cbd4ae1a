package amqp10_test

import (
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// TestGoAMQPToEpitaph encodes with go-amqp and parses with this package.
func TestGoAMQPToEpitaph(t *testing.T) {
	to, subj, ct := "q1", "s", "text/plain"
	created := time.UnixMilli(1700000000000).UTC()
	gs := uint32(3)
	msg := &goamqp.Message{
		Header: &goamqp.MessageHeader{Durable: true, Priority: 7, TTL: 5 * time.Second, DeliveryCount: 2},
		Annotations: goamqp.Annotations{
			"x-opt-str": "v",
			"x-opt-deaths": []map[any]any{{
				goamqp.Symbol("queue"): "q1",
				goamqp.Symbol("count"): int64(1),
			}},
		},
		Properties: &goamqp.MessageProperties{MessageID: "id-1", To: &to, Subject: &subj,
			ContentType: &ct, CreationTime: &created, GroupSequence: &gs, UserID: []byte("guest")},
		ApplicationProperties: map[string]any{"k": int32(5), "s": "v"},
		Data:                  [][]byte{[]byte("hello"), []byte("world")},
	}
	raw, err := msg.MarshalBinary()
	require.NoError(t, err)

	m, err := amqp10.ParseMessage(raw)
	require.NoError(t, err)
	require.True(t, m.HasHeader)
	require.Equal(t, amqp10.Header{Durable: true, Priority: 7, TTL: 5000, HasTTL: true, HasPriority: true, DeliveryCount: 2}, m.Header)

	ann, err := m.AnnotationMap()
	require.NoError(t, err)
	v, ok := ann.Get(amqp10.Symbol("x-opt-str"))
	require.True(t, ok)
	require.Equal(t, "v", v)
	deaths, ok := ann.Get(amqp10.Symbol("x-opt-deaths"))
	require.True(t, ok)
	arr, ok := deaths.(*amqp10.Array)
	require.True(t, ok, "%T", deaths)
	require.Len(t, arr.Elems, 1)
	dm := arr.Elems[0].(amqp10.Map)
	q, _ := dm.Get(amqp10.Symbol("queue"))
	require.Equal(t, "q1", q)
	c, _ := dm.Get(amqp10.Symbol("count"))
	require.Equal(t, int64(1), c)

	p, err := m.Properties()
	require.NoError(t, err)
	require.Equal(t, "id-1", p.MessageID)
	require.Equal(t, "q1", *p.To)
	require.Equal(t, "s", *p.Subject)
	require.Equal(t, amqp10.Symbol("text/plain"), *p.ContentType)
	require.Equal(t, amqp10.Timestamp(1700000000000), *p.CreationTime)
	require.Equal(t, uint32(3), *p.GroupSequence)
	require.Equal(t, []byte("guest"), p.UserID)

	ap, err := m.ApplicationProperties()
	require.NoError(t, err)
	k, _ := ap.Get("k")
	require.Equal(t, int32(5), k)
	s, _ := ap.Get("s")
	require.Equal(t, "v", s)

	body, err := m.Body()
	require.NoError(t, err)
	require.Equal(t, append(amqp10.AppendData(nil, []byte("hello")), amqp10.AppendData(nil, []byte("world"))...), body)
}

// TestEpitaphToGoAMQP encodes a delivery with AppendDelivery and decodes it
// with go-amqp (which decodes symbol map keys as plain strings).
func TestEpitaphToGoAMQP(t *testing.T) {
	to := "q1"
	var payload []byte
	payload, err := amqp10.AppendProperties(payload, &amqp10.Properties{MessageID: uint64(9), To: &to})
	require.NoError(t, err)
	payload, err = amqp10.AppendApplicationProperties(payload, amqp10.Map{{Key: "k", Value: "v"}})
	require.NoError(t, err)
	payload = amqp10.AppendData(payload, []byte("body"))
	src, err := amqp10.ParseMessage(payload)
	require.NoError(t, err)

	deaths := []amqp10.Map{{
		{Key: amqp10.Symbol("queue"), Value: "q1"},
		{Key: amqp10.Symbol("reason"), Value: amqp10.Symbol("expired")},
		{Key: amqp10.Symbol("count"), Value: uint64(1)},
		{Key: amqp10.Symbol("first-time"), Value: amqp10.Timestamp(1700000000000)},
		{Key: amqp10.Symbol("routing-keys"), Value: &amqp10.Array{Type: amqp10.TypeStr32, Elems: []any{"q1"}}},
	}}
	for _, h := range []amqp10.Header{
		{Durable: true, Priority: 4, TTL: 1000, HasTTL: true, FirstAcquirer: true, DeliveryCount: 3},
		{Priority: 4},
		{Priority: 9},
	} {
		out, err := src.AppendDelivery(nil, &h, amqp10.Map{{Key: amqp10.Symbol("x-opt-deaths"), Value: deaths}, {Key: amqp10.Symbol("x-opt-n"), Value: int64(-5)}})
		require.NoError(t, err)

		var gm goamqp.Message
		require.NoError(t, gm.UnmarshalBinary(out))
		require.NotNil(t, gm.Header)
		require.Equal(t, h.Durable, gm.Header.Durable)
		require.Equal(t, h.Priority, gm.Header.Priority)
		require.Equal(t, time.Duration(h.TTL)*time.Millisecond, gm.Header.TTL)
		require.Equal(t, h.FirstAcquirer, gm.Header.FirstAcquirer)
		require.Equal(t, h.DeliveryCount, gm.Header.DeliveryCount)
		require.Equal(t, int64(-5), gm.Annotations["x-opt-n"])
		gd, ok := gm.Annotations["x-opt-deaths"].([]map[any]any)
		require.True(t, ok, "%T", gm.Annotations["x-opt-deaths"])
		require.Len(t, gd, 1)
		require.Equal(t, "q1", gd[0]["queue"])
		require.EqualValues(t, "expired", gd[0]["reason"])
		require.Equal(t, uint64(1), gd[0]["count"])
		require.Equal(t, []string{"q1"}, gd[0]["routing-keys"])
		require.Equal(t, uint64(9), gm.Properties.MessageID)
		require.Equal(t, "q1", *gm.Properties.To)
		require.Equal(t, "v", gm.ApplicationProperties["k"])
		require.Equal(t, [][]byte{[]byte("body")}, gm.Data)
	}
}
