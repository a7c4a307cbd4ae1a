// Package telemetry is epitaph's OpenTelemetry layer: broker spans with the
// messaging semantic conventions, W3C trace-context propagation through
// AMQP 1.0 messages, a slog handler that stamps trace and span ids, the
// Prometheus text exposition of collected metrics, and the set-up of
// providers and OTLP exporters from configuration and the standard OTEL_*
// environment variables.
//
// It sits beside link and deadletter, which call it on their per-message
// paths; a nil *Tracer means tracing is off and costs a nil check.
package telemetry

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// Message-annotation and application-property keys that carry trace context
// (W3C traceparent/tracestate). AMQP 1.0 reserves message-annotation keys
// that do not start with "x-", so the broker's hop context goes under x-opt-*.
const (
	AnnTraceparent  = amqp10.Symbol("x-opt-traceparent")
	AnnTracestate   = amqp10.Symbol("x-opt-tracestate")
	PropTraceparent = "traceparent"
	PropTracestate  = "tracestate"
)

// carrier is a propagation.TextMapCarrier over one traceparent/tracestate pair.
type carrier struct{ parent, state string }

func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Parse returns the span context of a W3C traceparent and tracestate. A
// malformed traceparent gives an invalid (zero) span context, and a malformed
// tracestate is dropped; neither is an error.
func Parse(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	c := carrier{parent: traceparent, state: tracestate}
	ctx := propagation.TraceContext{}.Extract(context.Background(), &c)
	return trace.SpanContextFromContext(ctx)
}

// Format returns sc as a W3C traceparent ("00-traceid-spanid-flags") and its
// tracestate ("" when empty). An invalid sc gives "".
func Format(sc trace.SpanContext) (traceparent, tracestate string) {
	if !sc.IsValid() {
		return "", ""
	}
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[0:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:]), sc.TraceState().String()
}

// stringValue reads a trace-context value: a string, a symbol, or binary
// holding the text (the W3C AMQP draft's binary form is not produced by
// clients in practice).
func stringValue(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case amqp10.Symbol:
		return string(s), true
	case []byte:
		return string(s), true
	}
	return "", false
}

// lookup finds key in m, whether it is encoded as a symbol or a string.
func lookup(m amqp10.Map, key string) (string, bool) {
	for _, kv := range m {
		var k string
		switch kk := kv.Key.(type) {
		case amqp10.Symbol:
			k = string(kk)
		case string:
			k = kk
		default:
			continue
		}
		if k == key {
			return stringValue(kv.Value)
		}
	}
	return "", false
}

// FromAnnotations returns the context in the x-opt-traceparent and
// x-opt-tracestate entries of a message-annotations map (invalid when absent
// or malformed).
func FromAnnotations(anns amqp10.Map) trace.SpanContext {
	tp, ok := lookup(anns, string(AnnTraceparent))
	if !ok {
		return trace.SpanContext{}
	}
	ts, _ := lookup(anns, string(AnnTracestate))
	return Parse(tp, ts)
}

// Extract returns the producer's context carried by c: the x- headers
// x-opt-traceparent / x-opt-tracestate (AMQP 1.0 message annotations), else
// the application's headers traceparent / tracestate (AMQP 1.0
// application-properties). Sections that do not decode and malformed
// values are ignored: the result is then invalid, and the broker starts a
// new trace.
func Extract(c router.Container) trace.SpanContext {
	if c == nil {
		return trace.SpanContext{}
	}
	if anns, err := c.XHeaders(); err == nil && anns != nil {
		if sc := FromAnnotations(anns); sc.IsValid() {
			return sc
		}
	}
	props, err := c.RoutingHeaders()
	if err != nil || props == nil {
		return trace.SpanContext{}
	}
	tp, ok := lookup(props, PropTraceparent)
	if !ok {
		return trace.SpanContext{}
	}
	ts, _ := lookup(props, PropTracestate)
	return Parse(tp, ts)
}

// Inject returns anns with sc written as x-opt-traceparent (and
// x-opt-tracestate when sc has one; a stale one is removed). anns may be
// nil. An invalid sc leaves anns as it is.
func Inject(anns amqp10.Map, sc trace.SpanContext) amqp10.Map {
	tp, ts := Format(sc)
	if tp == "" {
		return anns
	}
	anns = anns.Set(AnnTraceparent, tp)
	if ts != "" {
		return anns.Set(AnnTracestate, ts)
	}
	return anns.Delete(AnnTracestate)
}
