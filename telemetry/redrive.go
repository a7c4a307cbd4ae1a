package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

// Attributes of redrive spans.
const (
	AttrRedriveTask   = attribute.Key("epitaph.redrive.task")
	AttrRedriveTarget = attribute.Key("epitaph.redrive.target")
	AttrRedriveCause  = attribute.Key("epitaph.redrive.cause") // why a message did not move
)

// StartRedriveTask starts the span of a redrive task's run: the root of a
// trace of its own, whose children are its moves.
func (t *Tracer) StartRedriveTask(id, vhost, source, target string) trace.Span {
	_, span := t.t.Start(context.Background(), "redrive "+source, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithNewRoot(),
		trace.WithAttributes(rabbitmq, AttrVHost.String(vhost), AttrRedriveTask.String(id),
			AttrRedriveTarget.String(target), semconv.MessagingOperationName("redrive")))
	return span
}

// StartRedriveMove starts the span of one message's move by a task: a
// child of the task's span, linked to the message's own trace (the hop
// context its broker annotations anns carry), so that a tracing UI leads
// from the task to each message's original trace and back. It returns
// anns with the move's context written in, for the moved copy, so that its
// next hops continue from the move.
func (t *Tracer) StartRedriveMove(task trace.Span, source string, anns value.Map, c router.Container, targets []*router.Queue) (value.Map, trace.Span) {
	ctx := trace.ContextWithSpan(context.Background(), task)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	if orig := FromAnnotations(anns); orig.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: orig}))
	}
	_, span := t.t.Start(ctx, "redrive "+source, opts...)
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, rabbitmq, semconv.MessagingOperationTypeSend, semconv.MessagingOperationName("redrive"),
			AttrDLSourceQueue.String(source), AttrDLTargetQueues.StringSlice(queueNames(targets)))
		span.SetAttributes(messageAttrs(attrs, c)...)
	}
	return Inject(anns, span.SpanContext()), span
}

// EndRedriveMove records why the message did not move (cause; "" when it
// did) and ends span.
func EndRedriveMove(span trace.Span, cause string) {
	if cause != "" && span.IsRecording() {
		span.SetAttributes(AttrRedriveCause.String(cause), semconv.ErrorTypeKey.String(cause))
	}
	span.End()
}
