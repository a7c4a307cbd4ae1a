// Package epitaph embeds the epitaph AMQP 1.0 broker: Start one on any
// address (127.0.0.1:0 picks a free port), talk to it with any AMQP 1.0
// client, and Close it. cmd/epitaph is a thin wrapper around this package.
package epitaph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/deadletter"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// Version is epitaph's own version.
const Version = "0.1.0"

// AnonymousPolicy says from where ANONYMOUS and no-SASL connections are accepted.
type AnonymousPolicy string

// Anonymous policies.
const (
	AnonymousLoopback AnonymousPolicy = "loopback" // default: only from loopback addresses, as guest
	AnonymousAll      AnonymousPolicy = "all"
	AnonymousNone     AnonymousPolicy = "none"
)

// StoreRecovery says what Start does with a damaged store.
type StoreRecovery string

// Store recovery modes.
const (
	StoreStrict  StoreRecovery = "strict"
	StoreSalvage StoreRecovery = "salvage"
)

// Options configure a broker. Zero values mean the documented defaults.
type Options struct {
	// Listen is the AMQP listen address; default ":5672".
	Listen string
	// HTTPListen is the management HTTP API's listen address; empty means
	// no HTTP listener (cmd/epitaph's default is 127.0.0.1:15672).
	HTTPListen string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Definitions is a RabbitMQ definitions JSON document applied at start.
	Definitions []byte
	// InMemory keeps messages and topology in memory only (nothing survives
	// a restart); otherwise they are stored in DataDir.
	InMemory bool
	// DataDir is the durable store's directory, created when missing;
	// default DefaultDataDir().
	DataDir string
	// StoreRecovery is what Start does with a damaged store: StoreStrict
	// (the default) refuses, with an error wrapping store.ErrCorrupt that
	// names the damaged file and offset; StoreSalvage starts with what is
	// readable, after keeping copies of the damaged files in a
	// salvaged-<time> directory inside DataDir, and logs what it dropped.
	StoreRecovery StoreRecovery
	// DiskFreeLimit blocks publishers while the data directory's file
	// system has less free space (bytes); default 100 MiB, 0 after setting
	// NoDiskAlarm. Not checked in memory mode.
	DiskFreeLimit uint64
	// NoDiskAlarm turns the disk alarm off.
	NoDiskAlarm bool
	// MemoryHighWatermark blocks publishers while the process uses more
	// memory (bytes); 0 turns the memory alarm off (the default).
	MemoryHighWatermark uint64
	// DeadLetterRetryInterval is how often retained at-least-once dead
	// letters are retried; default 180s, as RabbitMQ.
	DeadLetterRetryInterval time.Duration
	// DiskFree and MemoryUsed, when set, replace the alarms' readings of
	// the data directory's free space and of the process's memory (tests
	// drive the disk and memory alarms with them).
	DiskFree   func(dir string) (uint64, error)
	MemoryUsed func() uint64
	// AutoCreateQueues declares a classic queue when a link attaches to a bare address.
	AutoCreateQueues bool
	// StrictParity writes only RabbitMQ 4.3's dead-letter annotations: no
	// x-last-death-error-condition / x-last-death-error-description.
	StrictParity bool
	// Anonymous: default AnonymousLoopback.
	Anonymous AnonymousPolicy
	// MaxFrameSize advertised in open; default 131072 (minimum 512).
	MaxFrameSize uint32
	// ChannelMax advertised in open; default 255 (256 sessions).
	ChannelMax uint16
	// HandleMax advertised in begin; default 255 (256 links per session).
	HandleMax uint32
	// IdleTimeout: close a connection that sends nothing for this long; default 60s.
	// Heartbeats are sent at half the peer's idle-time-out, and at least every 15s.
	IdleTimeout time.Duration
	// MaxMessageSize advertised on attach; default 16 MiB.
	MaxMessageSize uint64
	// HandshakeTimeout bounds the protocol header, SASL and open; default 10s.
	HandshakeTimeout time.Duration
	// MaxConnections is the node connection limit: a connection beyond it
	// is answered with open, then close(amqp:resource-limit-exceeded);
	// default 10,000, negative means unlimited.
	MaxConnections int
	// ShutdownTimeout bounds Close's wait for connections; default 5s.
	ShutdownTimeout time.Duration
	// Telemetry configures tracing and metrics from settings and the
	// OTEL_* environment; the zero value has tracing follow the
	// environment and metrics off.
	Telemetry TelemetryOptions
	// TracerProvider, when set, receives the broker's spans (tests inject
	// an SDK provider with an in-memory exporter); it overrides
	// Telemetry.Tracing. nil: from Telemetry, else off (no-op).
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, also receives the broker's metric
	// instruments (besides the /metrics reader of Telemetry.Metrics).
	MeterProvider metric.MeterProvider
}

// Broker is a running broker.
type Broker struct {
	ln     net.Listener
	srv    *link.Server
	httpLn net.Listener
	httpS  *http.Server
	router *router.Broker
	store  *store.Pebble // nil in memory mode
	dl     *deadletter.DeadLetterer
	log    *slog.Logger
	opts   Options

	providers *telemetry.Providers
	tracer    *telemetry.Tracer
	counters  *link.Counters

	closeOnce sync.Once
	closeErr  error
	serveDone chan struct{}
	httpDone  chan struct{}
}

// DefaultDataDir is the embedded default data directory:
// $XDG_DATA_HOME/epitaph, else ~/.local/share/epitaph, else ./data.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "epitaph")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "share", "epitaph")
	}
	return "data"
}

// abort releases what a failed Start had opened.
func (b *Broker) abort() {
	if b.router != nil {
		b.router.Close()
	}
	if b.store != nil {
		if err := b.store.Close(); err != nil {
			b.log.Error("closing the store", "err", err)
		}
	}
	_ = b.providers.Shutdown(context.Background())
}

// ErrInvalidOptions wraps errors in Options.
var ErrInvalidOptions = errors.New("epitaph: invalid options")

// Start listens on opts.Listen and serves in the background until Close.
func Start(opts Options) (*Broker, error) {
	if opts.Listen == "" {
		opts.Listen = ":5672"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	switch opts.Anonymous {
	case "", AnonymousLoopback, AnonymousAll, AnonymousNone:
	default:
		return nil, fmt.Errorf("%w: anonymous %q (want loopback, all or none)", ErrInvalidOptions, opts.Anonymous)
	}
	switch opts.StoreRecovery {
	case "", StoreStrict, StoreSalvage:
	default:
		return nil, fmt.Errorf("%w: store recovery %q (want strict or salvage)", ErrInvalidOptions, opts.StoreRecovery)
	}
	b := &Broker{serveDone: make(chan struct{}), httpDone: make(chan struct{}), log: opts.Logger}
	if err := b.setupTelemetry(&opts); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	dl := deadletter.New(deadletter.Options{Logger: opts.Logger.With("component", "deadletter"), Strict: opts.StrictParity,
		Tracer: b.tracer})
	ropts := router.Options{Logger: opts.Logger.With("component", "router"),
		AutoCreateQueues: opts.AutoCreateQueues, DeadLetterer: dl,
		DeadLetterRetryInterval: opts.DeadLetterRetryInterval, MemoryHighWatermark: opts.MemoryHighWatermark,
		DiskFree: opts.DiskFree, MemoryUsed: opts.MemoryUsed}
	if !opts.InMemory {
		if opts.DataDir == "" {
			opts.DataDir = DefaultDataDir()
		}
		if err := os.MkdirAll(opts.DataDir, 0o750); err != nil {
			_ = b.providers.Shutdown(context.Background())
			return nil, fmt.Errorf("data dir: %w", err)
		}
		recovery := store.RecoveryStrict
		if opts.StoreRecovery == StoreSalvage {
			recovery = store.RecoverySalvage
		}
		st, err := store.OpenPebble(opts.DataDir, store.PebbleOptions{Logger: opts.Logger.With("component", "store"),
			Recovery: recovery})
		if err != nil {
			_ = b.providers.Shutdown(context.Background())
			return nil, fmt.Errorf("open store in %s: %w", opts.DataDir, err)
		}
		b.store = st
		ropts.Store, ropts.DataDir = st, opts.DataDir
		ropts.DiskFreeLimit = opts.DiskFreeLimit
		if ropts.DiskFreeLimit == 0 && !opts.NoDiskAlarm {
			ropts.DiskFreeLimit = 100 << 20
		}
	}
	rt := router.New(ropts)
	b.router = rt
	if err := rt.Recover(); err != nil {
		b.abort()
		return nil, fmt.Errorf("recover from %s: %w", opts.DataDir, err)
	}
	if len(opts.Definitions) > 0 {
		if err := rt.LoadDefinitions(opts.Definitions); err != nil {
			b.abort()
			return nil, fmt.Errorf("load definitions: %w", err)
		}
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		b.abort()
		return nil, fmt.Errorf("listen: %w", err)
	}
	srv := link.NewServer(link.Options{
		Logger:           opts.Logger.With("component", "amqp"),
		Router:           rt,
		Anonymous:        string(opts.Anonymous),
		MaxFrameSize:     opts.MaxFrameSize,
		ChannelMax:       opts.ChannelMax,
		HandleMax:        opts.HandleMax,
		IdleTimeout:      opts.IdleTimeout,
		MaxMessageSize:   opts.MaxMessageSize,
		HandshakeTimeout: opts.HandshakeTimeout,
		MaxConnections:   opts.MaxConnections,
		AutoCreateQueues: opts.AutoCreateQueues,
		Management: management.NewAMQPNode(management.AMQPOptions{Router: rt, DeadLetters: dl,
			Logger: opts.Logger.With("component", "management")}),
		Product:  "epitaph",
		Version:  Version,
		Tracer:   b.tracer,
		Counters: b.counters,
	})
	b.ln, b.srv, b.router, b.dl, b.log, b.opts = ln, srv, rt, dl, opts.Logger, opts
	if err := b.registerMetrics(&opts); err != nil {
		ln.Close()
		b.abort()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	var metrics http.Handler
	if b.providers.Reader != nil {
		metrics = telemetry.PrometheusHandler(b.providers.Reader)
	}
	if opts.HTTPListen != "" {
		if b.httpLn, err = net.Listen("tcp", opts.HTTPListen); err != nil {
			ln.Close()
			b.abort()
			return nil, fmt.Errorf("http listen: %w", err)
		}
		b.httpS = &http.Server{
			Handler: management.NewHTTPHandler(management.HTTPOptions{Router: rt, DeadLetters: dl,
				Logger: opts.Logger.With("component", "http"), ProductVersion: Version, Metrics: metrics}),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
		}
		go func() { // exits when Close shuts the HTTP server down
			defer close(b.httpDone)
			if err := b.httpS.Serve(b.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				b.log.Error("http serve stopped", "err", err)
			}
		}()
	} else {
		close(b.httpDone)
	}
	go func() { // exits when the listener is closed by Close
		defer close(b.serveDone)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, link.ErrServerClosed) {
			b.log.Error("serve stopped", "err", err)
		}
	}()
	b.log.Info("amqp listening", "addr", ln.Addr().String())
	return b, nil
}

// Addr returns the bound AMQP address.
func (b *Broker) Addr() net.Addr { return b.ln.Addr() }

// HTTPAddr returns the bound management HTTP address, or nil when the
// HTTP API is off.
func (b *Broker) HTTPAddr() net.Addr {
	if b.httpLn == nil {
		return nil
	}
	return b.httpLn.Addr()
}

// Router returns the data model, for embedding programs and tests that
// change topology at run time.
func (b *Broker) Router() *router.Broker { return b.router }

// DeadLetters returns the dead-letter component, whose counters say what
// died where and what was dropped.
func (b *Broker) DeadLetters() *deadletter.DeadLetterer { return b.dl }

// Close stops accepting, sends close(amqp:connection:forced) to every
// connection, waits for their goroutines, and stops the router. Idempotent.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.opts.ShutdownTimeout)
		defer cancel()
		lnErr := b.ln.Close()
		var httpErr error
		if b.httpS != nil {
			httpErr = b.httpS.Shutdown(ctx)
		}
		err := b.srv.Shutdown(ctx)
		<-b.serveDone
		<-b.httpDone
		b.router.Close()
		var stErr error
		if b.store != nil {
			stErr = b.store.Close() // commits what is pending, then syncs
		}
		telErr := b.providers.Shutdown(ctx) // flushes spans still batched
		b.closeErr = errors.Join(lnErr, httpErr, err, stErr, telErr)
	})
	return b.closeErr
}
