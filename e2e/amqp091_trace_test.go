package e2e

import (
	"strings"
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

// TestAMQP091SettleSpans: a 0-9-1 consumer's delivery carries its deliver
// span's context as the x-opt-traceparent header (as an AMQP 1.0 consumer
// gets it as a message annotation), and basic.ack, basic.nack and
// basic.reject (a consumer's delivery and a basic.get's) each get a settle
// span, child of that delivery's span, named as over AMQP 1.0.
func TestAMQP091SettleSpans(t *testing.T) {
	b, exp := startTracedBroker(t)
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("st", true, false, false, false, nil)
	require.NoError(t, err)
	for _, body := range []string{"one", "two"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "st", false, false, amqp091.Publishing{Body: []byte(body)}))
	}
	require.NoError(t, ch.Qos(1, 0, false))
	ds, err := ch.Consume("st", "c1", false, false, false, false, nil)
	require.NoError(t, err)
	acked := recv091(t, ds)
	require.Equal(t, "one", string(acked.Body))
	require.NoError(t, acked.Ack(false))
	nacked := recv091(t, ds)
	require.Equal(t, "two", string(nacked.Body))
	// Cancelled first, so that the requeued message is not delivered to
	// it again but left for the get.
	require.NoError(t, ch.Cancel("c1", false))
	require.NoError(t, nacked.Nack(false, true))
	got, ok, err := ch.Get("st", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "two", string(got.Body))
	require.True(t, got.Redelivered)
	require.NoError(t, got.Reject(false))

	cases := []struct {
		d    amqp091.Delivery
		span string // the settle span's name
	}{{acked, "ack st"}, {nacked, "requeue st"}, {got, "nack st"}}
	var spans tracetest.SpanStubs
	eventually(t, "deliver and settle spans", func() bool {
		spans = exp.GetSpans()
		return len(findSpans(spans, "deliver st")) == 3 && len(findSpans(spans, "ack st")) == 1 &&
			len(findSpans(spans, "requeue st")) == 1 && len(findSpans(spans, "nack st")) == 1
	})
	for _, c := range cases {
		tp, ok := c.d.Headers["x-opt-traceparent"].(string)
		require.True(t, ok, "x-opt-traceparent header of %q: %v", c.d.Body, c.d.Headers)
		parts := strings.Split(tp, "-")
		require.Len(t, parts, 4, tp)
		var deliver []tracetest.SpanStub
		for _, d := range findSpans(spans, "deliver st") {
			if d.SpanContext.SpanID().String() == parts[2] {
				deliver = append(deliver, d)
			}
		}
		require.Len(t, deliver, 1, "the header names a deliver span: %s", tp)
		assert.Equal(t, deliver[0].SpanContext.TraceID().String(), parts[1])
		var children int
		for _, s := range findSpans(spans, c.span) {
			if s.Parent.SpanID() == deliver[0].SpanContext.SpanID() {
				children++
			}
		}
		assert.Equal(t, 1, children, "%s span, child of the delivery of %q", c.span, c.d.Body)
	}
}
