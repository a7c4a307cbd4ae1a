package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

// ScopeName is the instrumentation scope of epitaph's spans and metrics.
const ScopeName = "github.com/epitaph-mq/epitaph"

// epitaph's own span attributes (the semantic conventions have none for a
// broker's routing and dead-lettering).
const (
	AttrVHost          = attribute.Key("epitaph.vhost")
	AttrRoutingResult  = attribute.Key("epitaph.routing.result") // routed, released, rejected
	AttrRoutingQueues  = attribute.Key("epitaph.routing.queues")
	AttrDeliveryCount  = attribute.Key("epitaph.delivery_count")
	AttrOutcome        = attribute.Key("epitaph.outcome") // accepted, rejected, released, modified
	AttrDLReason       = attribute.Key("epitaph.dead_letter.reason")
	AttrDLSourceQueue  = attribute.Key("epitaph.dead_letter.source_queue")
	AttrDLExchange     = attribute.Key("epitaph.dead_letter.exchange")
	AttrDLRoutingKeys  = attribute.Key("epitaph.dead_letter.routing_keys")
	AttrDLCount        = attribute.Key("epitaph.dead_letter.count")
	AttrDLStrategy     = attribute.Key("epitaph.dead_letter.strategy")
	AttrDLTargetQueues = attribute.Key("epitaph.dead_letter.target_queues")
	AttrDLCycleQueues  = attribute.Key("epitaph.dead_letter.cycle_queues")
	AttrDLDropped      = attribute.Key("epitaph.dead_letter.dropped") // no_dlx, no_route, cycle
)

// Drop causes of a dead-lettered message (AttrDLDropped and the metrics' cause label).
const (
	DropNoDLX   = "no_dlx"
	DropNoRoute = "no_route"
	DropCycle   = "cycle"
)

// Tracer starts epitaph's broker spans. A nil *Tracer is tracing off: call
// sites check for nil, so the off path costs nothing.
type Tracer struct {
	t trace.Tracer
}

// NewTracer returns a Tracer over tp, or nil when tp is nil or a no-op
// provider (tracing off).
func NewTracer(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		return nil
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return &Tracer{t: tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))}
}

var rabbitmq = semconv.MessagingSystemRabbitMQ

// parentContext returns a context whose parent is sc (remote when it came
// from a message); an invalid sc gives a root.
func parentContext(sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return context.Background()
	}
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// messageAttrs adds the message id, conversation id and body size of c.
func messageAttrs(attrs []attribute.KeyValue, c router.Container) []attribute.KeyValue {
	if c == nil {
		return attrs
	}
	if p, err := c.Properties(); err == nil {
		if p.MessageID != nil {
			attrs = append(attrs, semconv.MessagingMessageID(idString(p.MessageID)))
		}
		if p.CorrelationID != nil {
			attrs = append(attrs, semconv.MessagingMessageConversationID(idString(p.CorrelationID)))
		}
	}
	if body, err := c.Body(); err == nil {
		attrs = append(attrs, semconv.MessagingMessageBodySize(len(body)))
	}
	return attrs
}

func idString(v any) string {
	switch id := v.(type) {
	case string:
		return id
	case []byte:
		return fmt.Sprintf("%x", id)
	case amqp10.UUID:
		return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
	}
	return fmt.Sprint(v)
}

// destination is RabbitMQ's messaging.destination.name for a publish:
// the queue for the default exchange, else exchange:key or exchange.
func destination(exchange, key string) string {
	switch {
	case exchange == "":
		return key
	case key == "":
		return exchange
	}
	return exchange + ":" + key
}

// StartPublish starts the span of a message received from a publisher on
// vhost, to exchange with routing key key. Its parent is the producer's
// context carried by c (Extract), or none (a new trace). End it with
// EndPublish.
func (t *Tracer) StartPublish(vhost, exchange, key string, c router.Container) trace.Span {
	dest := destination(exchange, key)
	_, span := t.t.Start(parentContext(Extract(c)), "publish "+dest, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 10)
		attrs = append(attrs, rabbitmq,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("publish"),
			semconv.MessagingDestinationName(dest),
			semconv.MessagingRabbitMQDestinationRoutingKey(key),
			AttrVHost.String(vhost))
		span.SetAttributes(messageAttrs(attrs, c)...)
	}
	return span
}

// EndPublish records the routing result (the target queues, or released, or
// the rejection) and ends span.
func EndPublish(span trace.Span, queues []*router.Queue, st router.Outcome) {
	if span.IsRecording() {
		switch st.Kind {
		case router.Accepted:
			span.SetAttributes(AttrRoutingResult.String("routed"))
		case router.Released:
			span.SetAttributes(AttrRoutingResult.String("released"))
		case router.Rejected:
			span.SetAttributes(AttrRoutingResult.String("rejected"))
			setError(span, st.Error)
		}
		if len(queues) > 0 {
			span.SetAttributes(AttrRoutingQueues.StringSlice(queueNames(queues)))
		}
	}
	span.End()
}

func queueNames(qs []*router.Queue) []string {
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name()
	}
	return names
}

func setError(span trace.Span, e *router.Error) {
	if e == nil {
		span.SetStatus(codes.Error, "")
		return
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(e.Condition))
	span.SetStatus(codes.Error, e.Description)
}

// StartDeliver starts the span of a delivery from q to a consumer link. Its
// parent is the message's hop context (the publish or dead-letter span
// whose context the message carries in its annotations), so it belongs to
// the producer's trace. The caller ends it once the transfer is written and
// writes its context into the delivered annotations.
func (t *Tracer) StartDeliver(q *router.Queue, d *router.Delivery, link string) trace.Span {
	_, span := t.t.Start(parentContext(FromAnnotations(d.BrokerAnnotations())), "deliver "+q.Name(),
		trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 12)
		attrs = append(attrs, rabbitmq,
			semconv.MessagingOperationTypeReceive,
			semconv.MessagingOperationName("deliver"),
			semconv.MessagingDestinationName(q.Name()),
			semconv.MessagingDestinationSubscriptionName(link),
			semconv.MessagingRabbitMQMessageDeliveryTag(int(d.Tag)),
			AttrDeliveryCount.Int64(int64(d.Header.DeliveryCount)),
			AttrVHost.String(q.VHost().Name()))
		span.SetAttributes(messageAttrs(attrs, d.Msg.Container)...)
	}
	return span
}

// Settle records a consumer's outcome for a delivery from q as a span, child
// of the delivery's span (parent). Its operation name follows the RabbitMQ
// clients: ack (accepted), nack (rejected, or modified undeliverable-here),
// requeue (released, modified). err is the router's refusal, if any.
func (t *Tracer) Settle(parent trace.SpanContext, q *router.Queue, tag uint64, o router.Settlement, err error) {
	name, outcome := "ack", "accepted"
	switch o.Kind {
	case router.SettleReject:
		name, outcome = "nack", "rejected"
	case router.SettleRelease:
		name, outcome = "requeue", "released"
	case router.SettleModify:
		name, outcome = "requeue", "modified"
		if o.UndeliverableHere {
			name = "nack"
		}
	}
	_, span := t.t.Start(parentContext(parent), name+" "+q.Name(), trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(rabbitmq,
			semconv.MessagingOperationTypeSettle,
			semconv.MessagingOperationName(name),
			semconv.MessagingDestinationName(q.Name()),
			semconv.MessagingRabbitMQMessageDeliveryTag(int(tag)),
			AttrOutcome.String(outcome),
			AttrVHost.String(q.VHost().Name()))
		if o.Error != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(o.Error.Condition))
		}
		if err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(fmt.Sprintf("%T", err)))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// DeadLetter describes one dead-letter hop for its span.
type DeadLetter struct {
	Source   *router.Queue
	Reason   router.Reason
	Strategy string // at-most-once, at-least-once, or disabled (no DLX)
	// Exchange is the dead-letter exchange (HasExchange false: none).
	Exchange    string
	HasExchange bool
	RoutingKeys []string
	// Count is the death count for {Source, Reason} after this death.
	Count uint64
}

// StartDeadLetter starts the span of one dead-letter hop of a message whose
// broker annotations are anns; its parent is the hop context they carry
// (the publish span, or the previous dead-letter span). Finish it with
// EndDeadLetter.
func (t *Tracer) StartDeadLetter(ctx context.Context, anns value.Map, c router.Container, dl *DeadLetter) (context.Context, trace.Span) {
	parent := FromAnnotations(anns)
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := t.t.Start(ctx, "dead-letter "+dl.Source.Name(), trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		dest := dl.Exchange
		if dest == "" && len(dl.RoutingKeys) > 0 {
			dest = dl.RoutingKeys[0]
		}
		attrs := make([]attribute.KeyValue, 0, 16)
		attrs = append(attrs, rabbitmq,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("dead-letter"),
			AttrVHost.String(dl.Source.VHost().Name()),
			AttrDLReason.String(string(dl.Reason)),
			AttrDLSourceQueue.String(dl.Source.Name()),
			AttrDLStrategy.String(dl.Strategy),
			AttrDLCount.Int64(int64(dl.Count)),
			AttrDLRoutingKeys.StringSlice(dl.RoutingKeys))
		if dl.HasExchange {
			attrs = append(attrs, AttrDLExchange.String(dl.Exchange), semconv.MessagingDestinationName(dest))
			if len(dl.RoutingKeys) > 0 {
				attrs = append(attrs, semconv.MessagingRabbitMQDestinationRoutingKey(dl.RoutingKeys[0]))
			}
		}
		span.SetAttributes(messageAttrs(attrs, c)...)
	}
	return ctx, span
}

// EndDeadLetter records where the copy went (targets, and the targets
// dropped as cycles) or why it was dropped (DropNoDLX, DropNoRoute,
// DropCycle; "" when it was not), then ends span.
func EndDeadLetter(span trace.Span, targets, cycles []*router.Queue, dropped string, err error) {
	if span.IsRecording() {
		if len(targets) > 0 {
			span.SetAttributes(AttrDLTargetQueues.StringSlice(queueNames(targets)))
		}
		if len(cycles) > 0 {
			span.SetAttributes(AttrDLCycleQueues.StringSlice(queueNames(cycles)))
		}
		if dropped != "" {
			span.SetAttributes(AttrDLDropped.String(dropped))
		}
		if err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(dropped))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
