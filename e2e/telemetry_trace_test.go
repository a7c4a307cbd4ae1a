package e2e

import (
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// producerTrace is the producer's context every scenario publishes with.
const (
	producerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerSpanID  = "00f067aa0ba902b7"
	producerParent  = "00-" + producerTraceID + "-" + producerSpanID + "-01"
)

// startTracedBroker starts a broker whose spans go to an in-memory exporter.
func startTracedBroker(t *testing.T) (*epitaph.Broker, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	b := startBroker(t, "", func(o *epitaph.Options) { o.TracerProvider = tp })
	return b, exp
}

func attrOf(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func findSpans(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func tracedMsg(body string) *amqp.Message {
	m := msg(body)
	m.ApplicationProperties = map[string]any{"traceparent": producerParent}
	return m
}

// TestTraceDeadLetterHops follows a message from a producer with a
// traceparent through one dead-letter hop per reason to a DLQ consumer, and
// asserts the span tree: one trace, the hop's attributes, and the
// x-opt-traceparent the DLQ delivery carries.
func TestTraceDeadLetterHops(t *testing.T) {
	for _, reason := range []router.Reason{router.ReasonRejected, router.ReasonExpired, router.ReasonMaxLen} {
		t.Run(string(reason), func(t *testing.T) {
			b, exp := startTracedBroker(t)
			args := dlArgs("", ptr("dlq"))
			switch reason {
			case router.ReasonExpired:
				args = append(args, kv("x-message-ttl", int64(20)))
			case router.ReasonMaxLen:
				args = append(args, kv("x-max-length", int64(1)))
			}
			declareQueue(t, b, "work", router.Classic, args)
			declareQueue(t, b, "dlq", router.Classic, nil)
			s := session(t, dial(t, b, nil))

			publish(t, s, "/queues/work", tracedMsg("m1"))
			switch reason {
			case router.ReasonRejected:
				r := receiver(t, s, "/queues/work", nil)
				reject(t, r, recv(t, r))
			case router.ReasonMaxLen:
				plain := msg("m2") // pushes m1 out at the head; no context: a new trace
				publish(t, s, "/queues/work", plain)
			}

			dlqR := receiver(t, s, "/queues/dlq", nil)
			dead := recv(t, dlqR)
			require.Equal(t, "m1", body(dead))
			accept(t, dlqR, dead)

			// The delivery continues the producer's trace through the
			// annotation the broker wrote.
			tp, ok := dead.Annotations["x-opt-traceparent"].(string)
			require.True(t, ok, "x-opt-traceparent on the DLQ delivery: %v", dead.Annotations)
			sc := telemetry.Parse(tp, "")
			require.True(t, sc.IsValid())
			require.Equal(t, producerTraceID, sc.TraceID().String())
			// The broker never touches application-properties.
			require.Equal(t, producerParent, dead.ApplicationProperties["traceparent"])

			var spans tracetest.SpanStubs
			eventually(t, "the DLQ settle span", func() bool {
				spans = exp.GetSpans()
				return len(findSpans(spans, "ack dlq")) == 1
			})
			byID := map[trace.SpanID]tracetest.SpanStub{}
			for _, sp := range spans {
				if sp.SpanContext.TraceID().String() == producerTraceID {
					byID[sp.SpanContext.SpanID()] = sp
				}
			}
			parentName := func(sp tracetest.SpanStub) string {
				if p, ok := byID[sp.Parent.SpanID()]; ok {
					return p.Name
				}
				return sp.Parent.SpanID().String()
			}
			// The tree, by parent.
			pub := findSpans(spans, "publish work")
			require.NotEmpty(t, pub)
			require.Equal(t, producerTraceID, pub[0].SpanContext.TraceID().String())
			require.Equal(t, producerSpanID, pub[0].Parent.SpanID().String(), "publish is a child of the producer")
			require.True(t, pub[0].Parent.IsRemote())
			res, _ := attrOf(pub[0], telemetry.AttrRoutingQueues)
			require.Equal(t, []string{"work"}, res.AsStringSlice())

			dl := findSpans(spans, "dead-letter work")
			require.Len(t, dl, 1)
			require.Equal(t, producerTraceID, dl[0].SpanContext.TraceID().String())
			require.Equal(t, "publish work", parentName(dl[0]))
			want := map[attribute.Key]any{
				telemetry.AttrDLReason:       string(reason),
				telemetry.AttrDLSourceQueue:  "work",
				telemetry.AttrDLCount:        int64(1),
				telemetry.AttrDLExchange:     "",
				telemetry.AttrDLStrategy:     "at-most-once",
				"messaging.system":           "rabbitmq",
				"messaging.operation.name":   "dead-letter",
				"messaging.destination.name": "dlq",
			}
			for k, v := range want {
				got, ok := attrOf(dl[0], k)
				require.True(t, ok, "attribute %s", k)
				require.Equal(t, v, got.AsInterface(), "attribute %s", k)
			}
			keys, _ := attrOf(dl[0], telemetry.AttrDLRoutingKeys)
			require.Equal(t, []string{"dlq"}, keys.AsStringSlice())
			targets, _ := attrOf(dl[0], telemetry.AttrDLTargetQueues)
			require.Equal(t, []string{"dlq"}, targets.AsStringSlice())

			deliver := findSpans(spans, "deliver dlq")
			require.Len(t, deliver, 1)
			require.Equal(t, "dead-letter work", parentName(deliver[0]))
			require.Equal(t, deliver[0].SpanContext.SpanID(), sc.SpanID(), "the delivered traceparent is the deliver span")
			ack := findSpans(spans, "ack dlq")
			require.Equal(t, "deliver dlq", parentName(ack[0]))

			if reason == router.ReasonRejected {
				d := findSpans(spans, "deliver work")
				require.Len(t, d, 1)
				require.Equal(t, "publish work", parentName(d[0]))
				nack := findSpans(spans, "nack work")
				require.Len(t, nack, 1)
				require.Equal(t, "deliver work", parentName(nack[0]))
				o, _ := attrOf(nack[0], "messaging.operation.type")
				require.Equal(t, "settle", o.AsString())
			}
			// Every span of this message is in the producer's trace.
			for _, sp := range spans {
				if sp.Name == "publish work" && sp.SpanContext.TraceID().String() != producerTraceID {
					continue // m2 in the maxlen case: its own trace
				}
				require.Equal(t, producerTraceID, sp.SpanContext.TraceID().String(), "span %s", sp.Name)
			}
		})
	}
}

// TestTraceDropsAndNewTraces: a message without context starts a new trace;
// a drop without a dead-letter exchange still gets its span.
func TestTraceDropsAndNewTraces(t *testing.T) {
	b, exp := startTracedBroker(t)
	declareQueue(t, b, "short", router.Classic, amqp10.Map{kv("x-max-length", int64(1))})
	s := session(t, dial(t, b, nil))
	publishBodies(t, s, "/queues/short", "a", "b")
	var spans tracetest.SpanStubs
	eventually(t, "the drop span", func() bool {
		spans = exp.GetSpans()
		return len(findSpans(spans, "dead-letter short")) == 1
	})
	dl := findSpans(spans, "dead-letter short")[0]
	got, _ := attrOf(dl, telemetry.AttrDLDropped)
	require.Equal(t, telemetry.DropNoDLX, got.AsString())
	got, _ = attrOf(dl, telemetry.AttrDLStrategy)
	require.Equal(t, "disabled", got.AsString())
	got, _ = attrOf(dl, telemetry.AttrDLReason)
	require.Equal(t, "maxlen", got.AsString())
	pubs := findSpans(spans, "publish short")
	require.Len(t, pubs, 2)
	require.False(t, pubs[0].Parent.IsValid(), "no producer context: a root span")
	require.NotEqual(t, pubs[0].SpanContext.TraceID(), pubs[1].SpanContext.TraceID())
	require.Equal(t, pubs[0].SpanContext.TraceID(), dl.SpanContext.TraceID(), "the head (a) was dropped")

	// Unroutable: released, recorded on the publish span.
	snd := sender(t, s, "/exchanges/amq.direct/nowhere", nil)
	st := send(t, snd, msg("lost"))
	require.IsType(t, &amqp.StateReleased{}, st)
	eventually(t, "the unroutable publish span", func() bool {
		return len(findSpans(exp.GetSpans(), "publish amq.direct:nowhere")) == 1
	})
	p := findSpans(exp.GetSpans(), "publish amq.direct:nowhere")[0]
	got, _ = attrOf(p, telemetry.AttrRoutingResult)
	require.Equal(t, "released", got.AsString())
}
