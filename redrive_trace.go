package epitaph

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
	"github.com/epitaph-mq/epitaph/value"
)

// redriveTracer traces redrive tasks with the broker's tracer: a span per
// task run, and per moved message a child span linked to the message's
// own trace (dlops.Tracer over package telemetry, which the management
// plane may not import).
type redriveTracer struct{ tr *telemetry.Tracer }

func (r redriveTracer) StartTask(t *dlops.Task) dlops.TaskTrace {
	target := t.Target
	if t.TargetQueue != "" {
		target += ":" + t.TargetQueue
	}
	return &redriveTaskTrace{tr: r.tr, source: t.SourceQueue, span: r.tr.StartRedriveTask(t.ID, t.VHost, t.SourceQueue, target)}
}

type redriveTaskTrace struct {
	tr     *telemetry.Tracer
	source string
	span   trace.Span
}

func (t *redriveTaskTrace) StartMove(m *router.Message, targets []*router.Queue) (value.Map, func(string)) {
	anns, span := t.tr.StartRedriveMove(t.span, t.source, m.Anns, m.Container, targets)
	return anns, func(cause string) { telemetry.EndRedriveMove(span, cause) }
}

func (t *redriveTaskTrace) End() { t.span.End() }
