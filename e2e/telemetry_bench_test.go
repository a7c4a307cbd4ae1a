package e2e

import (
	"context"
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/router"
)

// discardExporter drops spans after the SDK has built them.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkPublishConsume measures the per-message path (publish, route,
// deliver, accept) through an in-process broker with go-amqp, with tracing
// and metrics off and on. Allocations are the whole process's, client
// included; the difference between the variants is the broker's cost.
func BenchmarkPublishConsume(b *testing.B) {
	for _, bc := range []struct {
		name           string
		tracing, metrs bool
	}{{"off", false, false}, {"metrics", false, true}, {"tracing", true, false}, {"both", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := testOptions()
			opts.Tracing = "off"
			if bc.metrs {
				opts.HTTPListen = "127.0.0.1:0"
				opts.Telemetry.Metrics = true
			}
			if bc.tracing {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discardExporter{}),
					sdktrace.WithSampler(sdktrace.AlwaysSample()))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				opts.TracerProvider = tp
			}
			br, err := epitaph.Start(opts)
			require.NoError(b, err)
			defer br.Close()
			vh, _ := br.Router().VHost("/")
			_, _, err = vh.DeclareQueue(router.QueueSpec{Name: "bench", Type: router.Classic})
			require.NoError(b, err)
			ctx := context.Background()
			conn, err := amqp.Dial(ctx, "amqp://"+br.Addr().String(), nil)
			require.NoError(b, err)
			defer conn.Close()
			s, err := conn.NewSession(ctx, nil)
			require.NoError(b, err)
			snd, err := s.NewSender(ctx, "/queues/bench", nil)
			require.NoError(b, err)
			rcv, err := s.NewReceiver(ctx, "/queues/bench", &amqp.ReceiverOptions{Credit: 100})
			require.NoError(b, err)
			m := amqp.NewMessage([]byte("0123456789abcdef0123456789abcdef"))
			m.ApplicationProperties = map[string]any{"traceparent": producerParent}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := snd.Send(ctx, m, nil); err != nil {
					b.Fatal(err)
				}
				got, err := rcv.Receive(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := rcv.AcceptMessage(ctx, got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
