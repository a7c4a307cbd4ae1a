package filter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

// testMsg describes a message to build over the real AMQP 1.0 codec.
type testMsg struct {
	header   *amqp10.Header
	props    *amqp10.Properties
	appProps value.Map
	anns     value.Map // the publisher's message annotations
}

func (tm testMsg) build(t testing.TB) *router.Message {
	t.Helper()
	var b []byte
	var err error
	if tm.anns != nil {
		b, err = amqp10.AppendMessageAnnotations(b, tm.anns)
		require.NoError(t, err)
	}
	if tm.props != nil {
		b, err = amqp10.AppendProperties(b, tm.props)
		require.NoError(t, err)
	}
	if tm.appProps != nil {
		b, err = amqp10.AppendApplicationProperties(b, tm.appProps)
		require.NoError(t, err)
	}
	b, err = amqp10.AppendAMQPValue(b, value.Symbol("some message body"))
	require.NoError(t, err)
	w, err := amqp10.ParseMessage(b)
	require.NoError(t, err)
	if tm.header != nil {
		w.Header, w.HasHeader = *tm.header, true
	}
	return router.NewAMQP10Message(w)
}

// appProps are the application properties most cases are evaluated
// against (the filter-expressions examples' message).
func appProps() value.Map {
	return value.Map{
		{Key: "country", Value: value.Symbol("UK")},
		{Key: "city", Value: "London"},
		{Key: "description", Value: "This is a test message"},
		{Key: "currency", Value: value.Symbol("GBP")},
		{Key: "product_id", Value: value.Symbol("ABC_123")},
		{Key: "weight", Value: uint16(5)},
		{Key: "price", Value: float64(10.5)},
		{Key: "quantity", Value: uint32(100)},
		{Key: "discount", Value: float64(0.25)},
		{Key: "temperature", Value: int32(-5)},
		{Key: "score", Value: uint64(0)},
		{Key: "distance", Value: float32(1.2e6)},
		{Key: "tiny_value", Value: float64(3.5e-4)},
		{Key: "large_value", Value: float64(6.02e23)},
		{Key: "active", Value: true},
		{Key: "premium", Value: false},
		{Key: "missing", Value: nil},
		{Key: "percentage", Value: uint8(75)},
	}
}

func str(s string) *string { return &s }

func sqlMatch(t testing.TB, expr string, tm testMsg) bool {
	t.Helper()
	e, err := ParseSQL(expr)
	require.NoError(t, err, "parse %q", expr)
	return e.Match(tm.build(t), nil)
}
