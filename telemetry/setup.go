package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracing modes for Config.Tracing.
const (
	TracingAuto = "auto" // on when OTEL_TRACES_EXPORTER names otlp (the default)
	TracingOn   = "on"
	TracingOff  = "off"
)

// OTLP protocols for Config.OTLPProtocol.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Config selects what Setup builds. Everything the OpenTelemetry
// specification lets the environment decide (OTEL_EXPORTER_OTLP_*,
// OTEL_TRACES_SAMPLER and its argument, OTEL_BSP_*, OTEL_METRIC_EXPORT_*,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) is read by the SDK itself;
// Config's fields, when set, take precedence.
type Config struct {
	// Tracing: TracingAuto ("" too), TracingOn or TracingOff. In auto mode
	// tracing is on when OTEL_TRACES_EXPORTER lists "otlp" and
	// OTEL_SDK_DISABLED is not "true".
	Tracing string
	// OTLPEndpoint is the collector's base URL (http://host:4318 or
	// host:4317; without a scheme, http:// is assumed, which also means no
	// TLS). "" leaves it to OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]ENDPOINT
	// and the exporters' defaults (localhost:4317 for gRPC, :4318 for HTTP).
	OTLPEndpoint string
	// OTLPProtocol: ProtocolGRPC or ProtocolHTTP; "" follows
	// OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]PROTOCOL, default http/protobuf.
	OTLPProtocol string
	// Metrics builds a meter provider with a manual reader for the
	// Prometheus /metrics endpoint.
	Metrics bool
	// OTLPMetrics also pushes metrics over OTLP; OTEL_METRICS_EXPORTER=otlp
	// has the same effect.
	OTLPMetrics bool
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
	// Logger receives warnings about unsupported settings; nil discards them.
	Logger *slog.Logger
	// Getenv reads the environment; nil means os.Getenv (tests replace it).
	Getenv func(string) string
}

// Providers are what Setup built. Nil fields are off.
type Providers struct {
	// TracerProvider exports spans over OTLP; nil when tracing is off.
	TracerProvider trace.TracerProvider
	// MeterProvider holds the broker's instruments; nil when metrics are off.
	MeterProvider *sdkmetric.MeterProvider
	// Reader is the manual reader behind /metrics; nil when Metrics is false.
	Reader *sdkmetric.ManualReader

	shutdown []func(context.Context) error
}

// Shutdown flushes and stops the exporters.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range p.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// ErrConfig wraps invalid telemetry settings.
var ErrConfig = errors.New("telemetry: invalid configuration")

// TracingEnabled reports whether cfg switches tracing on, given the environment.
func (cfg *Config) TracingEnabled() (bool, error) {
	getenv := cfg.getenv()
	switch cfg.Tracing {
	case TracingOn:
		return true, nil
	case TracingOff:
		return false, nil
	case "", TracingAuto:
	default:
		return false, fmt.Errorf("%w: tracing %q (want auto, on or off)", ErrConfig, cfg.Tracing)
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	return listHas(getenv("OTEL_TRACES_EXPORTER"), "otlp"), nil
}

func (cfg *Config) getenv() func(string) string {
	if cfg.Getenv != nil {
		return cfg.Getenv
	}
	return os.Getenv
}

func listHas(list, v string) bool {
	for e := range strings.SplitSeq(list, ",") {
		if strings.EqualFold(strings.TrimSpace(e), v) {
			return true
		}
	}
	return false
}

// protocol picks the OTLP protocol for a signal ("TRACES" or "METRICS").
func (cfg *Config) protocol(signal string) (string, error) {
	getenv := cfg.getenv()
	p := cfg.OTLPProtocol
	if p == "" {
		p = getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	}
	if p == "" {
		p = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch strings.TrimSpace(p) {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", fmt.Errorf("%w: OTLP protocol %q (want grpc or http/protobuf)", ErrConfig, p)
}

// endpoint parses OTLPEndpoint: host:port, insecure (http), base path.
func (cfg *Config) endpoint() (host string, insecure bool, path string, err error) {
	raw := cfg.OTLPEndpoint
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false, "", fmt.Errorf("%w: otlp-endpoint %q", ErrConfig, cfg.OTLPEndpoint)
	}
	switch u.Scheme {
	case "http":
		insecure = true
	case "https":
	default:
		return "", false, "", fmt.Errorf("%w: otlp-endpoint %q: scheme must be http or https", ErrConfig, cfg.OTLPEndpoint)
	}
	return u.Host, insecure, strings.TrimSuffix(u.Path, "/"), nil
}

// Validate checks cfg without building anything.
func (cfg *Config) Validate() error {
	if _, err := cfg.TracingEnabled(); err != nil {
		return err
	}
	if cfg.OTLPProtocol != "" && cfg.OTLPProtocol != ProtocolGRPC && cfg.OTLPProtocol != ProtocolHTTP {
		return fmt.Errorf("%w: otlp-protocol %q (want grpc or http/protobuf)", ErrConfig, cfg.OTLPProtocol)
	}
	if cfg.OTLPEndpoint != "" {
		if _, _, _, err := cfg.endpoint(); err != nil {
			return err
		}
	}
	return nil
}

// Setup builds the providers cfg asks for. Exporters connect lazily, so a
// collector that is down costs dropped spans, not a failed start.
func Setup(ctx context.Context, cfg Config) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	getenv := cfg.getenv()
	tracing, _ := cfg.TracingEnabled()
	otlpMetrics := cfg.OTLPMetrics || listHas(getenv("OTEL_METRICS_EXPORTER"), "otlp")
	p := &Providers{}
	if !tracing && !cfg.Metrics && !otlpMetrics {
		return p, nil
	}
	if cfg.Tracing != TracingOn {
		for e := range strings.SplitSeq(getenv("OTEL_TRACES_EXPORTER"), ",") {
			if e = strings.TrimSpace(e); e != "" && e != "otlp" && e != "none" {
				log.Warn("OTEL_TRACES_EXPORTER: unsupported exporter ignored; epitaph exports over OTLP only", "exporter", e)
			}
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("epitaph"), semconv.ServiceVersion(cfg.ServiceVersion)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil {
		log.Warn("telemetry resource incomplete", "err", err)
	}
	if tracing {
		exp, err := cfg.traceExporter(ctx)
		if err != nil {
			return nil, err
		}
		// The SDK reads OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_* itself.
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		p.TracerProvider = tp
		p.shutdown = append(p.shutdown, tp.Shutdown)
	}
	var readers []sdkmetric.Option
	if cfg.Metrics {
		p.Reader = sdkmetric.NewManualReader()
		readers = append(readers, sdkmetric.WithReader(p.Reader))
	}
	if otlpMetrics {
		exp, err := cfg.metricExporter(ctx)
		if err != nil {
			_ = p.Shutdown(ctx)
			return nil, err
		}
		// OTEL_METRIC_EXPORT_INTERVAL and _TIMEOUT are read by the reader.
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		p.MeterProvider = mp
		p.shutdown = append(p.shutdown, mp.Shutdown)
	}
	return p, nil
}

func (cfg *Config) traceExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	proto, err := cfg.protocol("TRACES")
	if err != nil {
		return nil, err
	}
	if proto == ProtocolGRPC {
		return otlptracegrpc.New(ctx, otlpOptions[otlptracegrpc.Option]{
			endpoint: otlptracegrpc.WithEndpoint, insecure: otlptracegrpc.WithInsecure,
		}.build(cfg, "")...)
	}
	return otlptracehttp.New(ctx, otlpOptions[otlptracehttp.Option]{
		endpoint: otlptracehttp.WithEndpoint, urlPath: otlptracehttp.WithURLPath, insecure: otlptracehttp.WithInsecure,
	}.build(cfg, "/v1/traces")...)
}

func (cfg *Config) metricExporter(ctx context.Context) (sdkmetric.Exporter, error) {
	proto, err := cfg.protocol("METRICS")
	if err != nil {
		return nil, err
	}
	if proto == ProtocolGRPC {
		return otlpmetricgrpc.New(ctx, otlpOptions[otlpmetricgrpc.Option]{
			endpoint: otlpmetricgrpc.WithEndpoint, insecure: otlpmetricgrpc.WithInsecure,
		}.build(cfg, "")...)
	}
	return otlpmetrichttp.New(ctx, otlpOptions[otlpmetrichttp.Option]{
		endpoint: otlpmetrichttp.WithEndpoint, urlPath: otlpmetrichttp.WithURLPath, insecure: otlpmetrichttp.WithInsecure,
	}.build(cfg, "/v1/metrics")...)
}

// otlpOptions names one OTLP exporter package's option constructors: each
// of the four exporters has its own Option type, but they take the
// configured endpoint the same way.
type otlpOptions[O any] struct {
	endpoint func(string) O
	urlPath  func(string) O // nil for gRPC, which has no URL path
	insecure func() O
}

// build returns the options for cfg's endpoint (none when it is not set, so
// that the exporter reads the OTEL_EXPORTER_OTLP_* variables itself);
// signalPath is appended to the endpoint's path for HTTP.
func (o otlpOptions[O]) build(cfg *Config, signalPath string) []O {
	if cfg.OTLPEndpoint == "" {
		return nil
	}
	host, insecure, path, _ := cfg.endpoint()
	opts := []O{o.endpoint(host)}
	if o.urlPath != nil {
		opts = append(opts, o.urlPath(path+signalPath))
	}
	if insecure {
		opts = append(opts, o.insecure())
	}
	return opts
}
