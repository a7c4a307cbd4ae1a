package annotations

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// AppendDeaths writes exactly the bytes of the generic encoder.
func TestAppendDeathsMatchesDeathsValue(t *testing.T) {
	long := strings.Repeat("q", 300)
	cases := []History{
		{},
		Record(History{}, Event{Queue: "q", Reason: ReasonRejected, Time: 1}),
		Record(History{}, Event{Queue: "q", Reason: ReasonExpired, Exchange: "x", RoutingKeys: []string{"a", "b"},
			TTL: 500, HasTTL: true, Time: 1 << 40}),
		Record(History{}, Event{Queue: long, Reason: ReasonMaxLen, Exchange: long, RoutingKeys: []string{long, long}, Time: 7}),
	}
	var h History
	for i := range 300 {
		h = Record(h, Event{Queue: "q" + strings.Repeat("x", i%7), Reason: ReasonDeliveryLimit, RoutingKeys: []string{"k"},
			Time: value.Timestamp(i)})
	}
	cases = append(cases, h)
	for i, h := range cases {
		want, err := amqp10.AppendValue([]byte{0xaa}, DeathsValue(h))
		require.NoError(t, err)
		require.Equal(t, want, AppendDeaths([]byte{0xaa}, h), "case %d", i)
		got, err := amqp10.AppendValue(nil, EncodedDeaths(h))
		require.NoError(t, err)
		require.Equal(t, want[1:], got, "case %d", i)
	}
}

// A history applied as encoded bytes decodes as before, through Decode
// and after a trip through the wire.
func TestApplyEncodedDecodes(t *testing.T) {
	h := Record(History{}, Event{Queue: "q", Reason: ReasonRejected, Exchange: "x", RoutingKeys: []string{"k"}, Time: 5})
	h = Record(h, Event{Queue: "q", Reason: ReasonRejected, Exchange: "x", RoutingKeys: []string{"k"}, Time: 6})
	anns := Apply(nil, h, false)
	v, ok := anns.Get(KeyDeaths)
	require.True(t, ok)
	require.IsType(t, amqp10.Raw(nil), v)
	dec, ok, err := Decode(anns)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, h, dec)

	sec, err := amqp10.AppendMessageAnnotations(nil, anns)
	require.NoError(t, err)
	wm, err := amqp10.ParseMessage(sec)
	require.NoError(t, err)
	wire, err := wm.AnnotationMap()
	require.NoError(t, err)
	dec2, _, err := Decode(wire)
	require.NoError(t, err)
	require.Equal(t, h, dec2)

	_, _, err = Decode(value.Map{{Key: KeyDeaths, Value: amqp10.Raw{0xff}}})
	require.ErrorIs(t, err, ErrMalformed)
}

// Allocation budgets of the dead-letter annotation path.
func TestDeathsAllocs(t *testing.T) {
	buf := make([]byte, 0, 1024)
	h := Record(History{}, benchEvent)
	require.Zero(t, testing.AllocsPerRun(100, func() { buf = AppendDeaths(buf[:0], h) }), "AppendDeaths")
	// First death: the Deaths slice and routing keys (Record), the encoded
	// value and its interface box, the map, three boxed strings.
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() { Apply(nil, Record(History{}, benchEvent), false) }), 8.0)
}
