package e2e

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAMQP091Traces: a 0-9-1 publish gets a publish span carrying the
// client's traceparent header as its parent; its delivery to a 0-9-1
// consumer gets a deliver span in the same trace.
func TestAMQP091Traces(t *testing.T) {
	b, exp := startTracedBroker(t)
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("tr", true, false, false, false, nil)
	require.NoError(t, err)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "tr", false, false, amqp091.Publishing{
		Headers: amqp091.Table{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}, Body: []byte("t")}))
	ds, err := ch.Consume("tr", "", true, false, false, false, nil)
	require.NoError(t, err)
	recv091(t, ds)
	var pub, del []tracetest.SpanStub
	eventually(t, "publish and deliver spans", func() bool {
		spans := exp.GetSpans()
		pub, del = findSpans(spans, "publish tr"), findSpans(spans, "deliver tr")
		return len(pub) == 1 && len(del) == 1
	})
	assert.Equal(t, traceID, pub[0].SpanContext.TraceID().String())
	assert.Equal(t, traceID, del[0].SpanContext.TraceID().String())
	assert.Equal(t, pub[0].SpanContext.SpanID(), del[0].Parent.SpanID())
}
