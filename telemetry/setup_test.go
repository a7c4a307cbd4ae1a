package telemetry

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// noEnv keeps the test's outcome independent of the OTEL_* variables of
// whoever runs it.
func noEnv(string) string { return "" }

// exportOneOfEach records a span and a counter and flushes both by
// shutting the providers down.
func exportOneOfEach(t *testing.T, cfg Config) {
	t.Helper()
	ctx := context.Background()
	p, err := Setup(ctx, cfg)
	require.NoError(t, err)
	require.NotNil(t, p.TracerProvider)
	require.NotNil(t, p.MeterProvider)
	_, span := p.TracerProvider.Tracer("setup-test").Start(ctx, "exported")
	span.End()
	counter, err := p.MeterProvider.Meter("setup-test").Int64Counter("exported")
	require.NoError(t, err)
	counter.Add(ctx, 1)
	require.NoError(t, p.Shutdown(ctx))
}

func TestSetupExportsOverHTTPToTheEndpointsPath(t *testing.T) {
	type request struct{ method, path, contentType string }
	var mu sync.Mutex
	var got []request
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, request{r.Method, r.URL.Path, r.Header.Get("Content-Type")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()

	exportOneOfEach(t, Config{
		Tracing: TracingOn, OTLPMetrics: true, OTLPProtocol: ProtocolHTTP,
		OTLPEndpoint: collector.URL + "/collector/", Getenv: noEnv,
	})
	mu.Lock()
	defer mu.Unlock()
	require.ElementsMatch(t, []request{
		{http.MethodPost, "/collector/v1/traces", "application/x-protobuf"},
		{http.MethodPost, "/collector/v1/metrics", "application/x-protobuf"},
	}, got)
}

// grpcCollector counts the export calls it receives.
type grpcCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu            sync.Mutex
	spans, points int
}

func (c *grpcCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans += len(ss.GetSpans())
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// metricsService adapts grpcCollector to the metrics service, whose Export
// method has the same name as the trace service's.
type metricsService struct {
	colmetricpb.UnimplementedMetricsServiceServer
	c *grpcCollector
}

func (m metricsService) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			m.c.points += len(sm.GetMetrics())
		}
	}
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

func TestSetupExportsOverGRPCToTheEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	collector := &grpcCollector{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, collector)
	colmetricpb.RegisterMetricsServiceServer(srv, metricsService{c: collector})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		require.NoError(t, <-served)
	}()

	exportOneOfEach(t, Config{
		Tracing: TracingOn, OTLPMetrics: true, OTLPProtocol: ProtocolGRPC,
		OTLPEndpoint: ln.Addr().String(), Getenv: noEnv,
	})
	collector.mu.Lock()
	defer collector.mu.Unlock()
	require.Equal(t, 1, collector.spans)
	require.Equal(t, 1, collector.points)
}
