package telemetry

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
)

const validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestParseMalformedIgnored(t *testing.T) {
	for _, tp := range []string{
		"", "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // too few fields
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span id
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // forbidden version
		"00-4bf92f3577b34da6a3ce929d0e0e47zz-00f067aa0ba902b7-01", // not hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"\x00\xff", string(make([]byte, 4096)),
	} {
		require.False(t, Parse(tp, "k=v").IsValid(), "%q", tp)
	}
	sc := Parse(validParent, "congo=t61rcWkgMzE,bad state")
	require.True(t, sc.IsValid(), "a malformed tracestate is dropped, the traceparent kept")
	tp, _ := Format(sc)
	require.Equal(t, validParent, tp)
}

func TestExtractOrderAndRoundTrip(t *testing.T) {
	other := "00-11111111111111111111111111111111-2222222222222222-00"
	anns := Inject(nil, Parse(other, "a=1"))
	require.Equal(t, amqp10.Map{{Key: AnnTraceparent, Value: other}, {Key: AnnTracestate, Value: "a=1"}}, anns)
	require.Equal(t, "11111111111111111111111111111111", FromAnnotations(anns).TraceID().String())
	// String keys and binary values are read too; wrong types are ignored.
	require.True(t, FromAnnotations(amqp10.Map{{Key: "x-opt-traceparent", Value: []byte(validParent)}}).IsValid())
	require.False(t, FromAnnotations(amqp10.Map{{Key: AnnTraceparent, Value: int64(7)}}).IsValid())
	require.False(t, FromAnnotations(nil).IsValid())
	// Injecting an invalid context changes nothing.
	require.Nil(t, Inject(nil, Parse("bad", "")))
	require.False(t, Extract(nil).IsValid())
}

func FuzzParse(f *testing.F) {
	f.Add(validParent, "a=b")
	f.Add("00-", "")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		sc := Parse(tp, ts)
		if sc.IsValid() {
			p, _ := Format(sc)
			require.True(t, Parse(p, "").IsValid())
		}
	})
}
