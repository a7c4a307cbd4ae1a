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

	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/channel"
	"github.com/epitaph-mq/epitaph/config"
	"github.com/epitaph-mq/epitaph/deadletter"
	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/internal/testhooks"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/management/amqpnode"
	"github.com/epitaph-mq/epitaph/management/console"
	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/management/httpapi"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// Version is epitaph's own version.
const Version = "0.1.0"

// Anonymous policies: from where ANONYMOUS and no-SASL connections are
// accepted (Options.Anonymous).
const (
	AnonymousLoopback = config.AnonymousLoopback // default: only from loopback addresses, as guest
	AnonymousAll      = config.AnonymousAll
	AnonymousNone     = config.AnonymousNone
)

// Store recovery modes: what Start does with a damaged store
// (Options.StoreRecovery).
const (
	StoreStrict  = config.StoreRecoveryStrict
	StoreSalvage = config.StoreRecoverySalvage
)

// Options configure a broker: every setting of config.Config, the struct
// cmd/epitaph loads from flags, EPITAPH_* variables and a YAML file, so a
// setting means the same in both, plus what only a program can hand over.
// Start from DefaultOptions: as in config.Config, a zero value never means
// "the default", it means none (no limit, no alarm, no wait, no listener),
// or is refused by Start where none makes no sense.
type Options struct {
	config.Config

	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Definitions is a RabbitMQ definitions JSON document applied at start,
	// after the file named by DefinitionsFile if both are set.
	Definitions []byte
	// ShutdownTimeout bounds Close's wait for connections to finish; after
	// it their sockets are closed and Close reports the time-out. Default
	// 5s; positive.
	ShutdownTimeout time.Duration
	// TracerProvider, when set, receives the broker's spans (tests inject
	// an SDK provider with an in-memory exporter); it overrides
	// Telemetry.Tracing. nil: from Telemetry, else off (no-op).
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, also receives the broker's metric
	// instruments (besides the /metrics reader of Telemetry.Metrics).
	MeterProvider metric.MeterProvider

	// alarms replaces the alarms' readings in tests of this module; set
	// through internal/testhooks, so it is not part of the embedding API.
	alarms testhooks.Alarms
}

// DefaultOptions returns config.Default's settings (those of the README's
// configuration table) and a 5s ShutdownTimeout. Its HTTPListen opens the
// management API on 127.0.0.1:15672, as the command does; set it to "" for
// none.
func DefaultOptions() Options {
	return Options{Config: config.Default(), ShutdownTimeout: 5 * time.Second}
}

func init() {
	testhooks.InstallAlarms(func(opts any, a testhooks.Alarms) { opts.(*Options).alarms = a })
}

// Broker is a running broker.
type Broker struct {
	ln     net.Listener // nil when Listen is empty
	tlsLn  net.Listener // nil without a TLS certificate
	certs  *link.TLSCerts
	srv    *link.Server
	httpLn net.Listener
	httpS  *http.Server
	router *router.Broker
	auth   *auth.Registry
	store  *store.Pebble // nil in memory mode
	dl     *deadletter.DeadLetterer
	events *dlevents.Hub
	log    *slog.Logger
	// redrives runs the redrive tasks (HTTP API and /management).
	redrives *dlops.Manager
	opts     Options

	providers *telemetry.Providers
	tracer    *telemetry.Tracer
	counters  *link.Counters
	// counters091 count the AMQP 0-9-1 front end (protocol="amqp091").
	counters091 *link.Counters

	httpCtx    context.Context // the HTTP requests' base, cancelled by Close
	httpCancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
	serveDone chan struct{}
	tlsDone   chan struct{}
	httpDone  chan struct{}
}

// DefaultDataDir is where the store lives when Options.DataDir is empty:
// $XDG_DATA_HOME/epitaph, else ~/.local/share/epitaph, else ./data.
func DefaultDataDir() string { return config.DefaultDataDir() }

// definitions returns the definitions documents to apply, in order: the
// file named by DefinitionsFile, then Definitions.
func (o *Options) definitions() ([][]byte, error) {
	var docs [][]byte
	if o.DefinitionsFile != "" {
		doc, err := os.ReadFile(o.DefinitionsFile)
		if err != nil {
			return nil, fmt.Errorf("read definitions: %w", err)
		}
		docs = append(docs, doc)
	}
	if len(o.Definitions) > 0 {
		docs = append(docs, o.Definitions)
	}
	return docs, nil
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

// ErrInvalidOptions wraps errors in Options. A setting's own error also
// wraps config.ErrInvalid and names its configuration key.
var ErrInvalidOptions = errors.New("epitaph: invalid options")

// Start listens on opts.Listen (and opts.TLSListen with a certificate) and
// serves in the background until Close.
func Start(opts Options) (*Broker, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if opts.ShutdownTimeout <= 0 {
		return nil, fmt.Errorf("%w: shutdown timeout %v (want a positive duration)", ErrInvalidOptions, opts.ShutdownTimeout)
	}
	defs, err := opts.definitions()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	var certs *link.TLSCerts
	if opts.TLSCertFile != "" {
		var err error
		certs, err = link.NewTLSCerts(opts.TLS)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
	}
	b := &Broker{serveDone: make(chan struct{}), tlsDone: make(chan struct{}), httpDone: make(chan struct{}),
		log: opts.Logger, certs: certs}
	b.httpCtx, b.httpCancel = context.WithCancel(context.Background())
	if err := b.setupTelemetry(&opts); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	b.events = dlevents.New(dlevents.Options{Buffer: opts.DeadLetterEventsBuffer, MaxSubscribers: opts.DeadLetterEventsMaxSubscribers})
	dl := deadletter.New(deadletter.Options{Logger: opts.Logger.With("component", "deadletter"), Strict: opts.StrictParity,
		Tracer: b.tracer, Events: b.events})
	ropts := router.Options{Logger: opts.Logger.With("component", "router"),
		AutoCreateQueues: opts.AutoCreateQueues, DeadLetterer: dl,
		DeadLetterRetryInterval: opts.DeadLetterRetryInterval, MemoryHighWatermark: opts.MemoryHighWatermark,
		DiskFree: opts.alarms.DiskFree, MemoryUsed: opts.alarms.MemoryUsed, AlarmInterval: opts.alarms.Interval}
	if !opts.InMemory {
		if opts.DataDir == "" {
			opts.DataDir = config.DefaultDataDir()
		}
		if err := os.MkdirAll(opts.DataDir, 0o750); err != nil {
			_ = b.providers.Shutdown(context.Background())
			return nil, fmt.Errorf("data dir: %w", err)
		}
		recovery := store.RecoveryStrict
		if opts.StoreRecovery == StoreSalvage {
			recovery = store.RecoverySalvage
		}
		// Each durable queue's message bodies go to its own log in queues/;
		// the Pebble store keeps references, states and the metadata.
		st, err := store.OpenPebble(opts.DataDir, store.PebbleOptions{Logger: opts.Logger.With("component", "store"),
			Recovery: recovery, BodyDir: filepath.Join(opts.DataDir, "queues")})
		if err != nil {
			_ = b.providers.Shutdown(context.Background())
			return nil, fmt.Errorf("open store in %s: %w", opts.DataDir, err)
		}
		b.store = st
		ropts.Store, ropts.DataDir = st, opts.DataDir
		ropts.DiskFreeLimit = opts.DiskFreeLimit
		ropts.QueueWindowBytes = -1 // 0: no paging
		if opts.QueueWindowBytes > 0 {
			ropts.QueueWindowBytes = int64(min(opts.QueueWindowBytes, 1<<62))
		}
		// Transient messages behind a window are written there (no fsync)
		// and the directory is emptied at every start.
		ropts.SpillDir = filepath.Join(opts.DataDir, "transient")
	}
	rt := router.New(ropts)
	b.router = rt
	users := auth.New(rt)
	users.SetLoginBrake(auth.NewLoginBrake(opts.AuthFailureDelay, opts.AuthFailureSources, nil))
	b.auth = users
	if opts.OAuthResourceServerID != "" {
		v, err := auth.NewTokenValidator(auth.OAuthConfig{
			ResourceServerID: opts.OAuthResourceServerID,
			JWKSFile:         opts.OAuthJWKSFile,
			JWKSURL:          opts.OAuthJWKSURL,
			SigningKeyFile:   opts.OAuthSigningKey,
			ExtraScopesField: opts.OAuthExtraScopesField,
			VerifyAud:        opts.OAuthVerifyAud,
			Leeway:           opts.OAuthLeeway,
			MaxScopes:        opts.OAuthMaxScopes,
		})
		if err != nil {
			b.abort()
			return nil, fmt.Errorf("oauth: %w", err)
		}
		users.SetTokenValidator(v)
	}
	if err := rt.Recover(); err != nil {
		b.abort()
		return nil, fmt.Errorf("recover from %s: %w", opts.DataDir, err)
	}
	if err := users.Recover(); err != nil {
		b.abort()
		return nil, fmt.Errorf("recover from %s: %w", opts.DataDir, err)
	}
	for _, doc := range defs {
		if err := rt.LoadDefinitions(doc); err != nil {
			b.abort()
			return nil, fmt.Errorf("load definitions: %w", err)
		}
	}
	users.SeedDefaults()
	var ln net.Listener
	if opts.Listen != "" {
		var err error
		if ln, err = net.Listen("tcp", opts.Listen); err != nil {
			b.abort()
			return nil, fmt.Errorf("listen: %w", err)
		}
	}
	closeListeners := func() {
		if ln != nil {
			ln.Close()
		}
		if b.tlsLn != nil {
			b.tlsLn.Close()
		}
	}
	if certs != nil {
		var err error
		if b.tlsLn, err = net.Listen("tcp", opts.TLSListen); err != nil {
			closeListeners()
			b.abort()
			return nil, fmt.Errorf("tls listen: %w", err)
		}
	}
	filterLimits := filter.Limits{SQLMaxLength: opts.FilterSQLMaxLength, SQLMaxTokens: opts.FilterSQLMaxTokens,
		SQLMaxDepth: opts.FilterSQLMaxDepth, MaxFields: opts.FilterMaxFields}
	var redriveTr dlops.Tracer
	if b.tracer != nil {
		redriveTr = redriveTracer{b.tracer}
	}
	b.redrives = dlops.New(dlops.Options{Router: rt, Auth: users, Logger: opts.Logger.With("component", "redrive"),
		FilterLimits: filterLimits, Tracer: redriveTr, Retention: opts.RedriveTaskRetention})
	srv := link.NewServer(link.Options{
		AMQP:   opts.AMQP,
		Logger: opts.Logger.With("component", "amqp"),
		Router: rt,
		Auth:   users,
		Management: amqpnode.New(amqpnode.Options{Router: rt, Auth: users, Redrives: b.redrives,
			PeekMaxScan: opts.PeekMaxScan, FilterLimits: filterLimits,
			Logger: opts.Logger.With("component", "management")}),
		Product:  "epitaph",
		Version:  Version,
		Tracer:   b.tracer,
		Counters: b.counters,
		Events:   b.events,
		AMQP091: channel.NewServer(channel.Options{AMQP: opts.AMQP, Logger: opts.Logger.With("component", "amqp091"),
			Router: rt, Auth: users, PermitTransientNonExclQueues: opts.PermitTransientNonExclQueues,
			Product: "epitaph", Version: Version, Counters: b.counters091, Tracer: b.tracer}),
	})
	b.ln, b.srv, b.router, b.dl, b.log, b.opts = ln, srv, rt, dl, opts.Logger, opts
	if err := b.registerMetrics(&opts); err != nil {
		closeListeners()
		b.abort()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	var metrics http.Handler
	if b.providers.Reader != nil {
		metrics = telemetry.PrometheusHandler(b.providers.Reader)
	}
	if opts.HTTPListen != "" {
		var err error
		if b.httpLn, err = net.Listen("tcp", opts.HTTPListen); err != nil {
			closeListeners()
			b.abort()
			return nil, fmt.Errorf("http listen: %w", err)
		}
		var webConsole http.Handler
		if opts.WebConsole {
			webConsole = console.Handler()
		}
		b.httpS = &http.Server{
			Handler: httpapi.NewHandler(httpapi.Options{Console: webConsole, Router: rt, Auth: users, DeadLetters: dl,
				Logger: opts.Logger.With("component", "http"), ProductVersion: Version, Metrics: metrics,
				GetMaxCount: opts.HTTPGetMaxCount, GetMaxBytes: opts.HTTPGetMaxBytes,
				Connections: connectionRegistry{srv}, Events: b.events, EventsHeartbeat: opts.DeadLetterEventsHeartbeat, EventsWriteTimeout: opts.WriteTimeout,
				Redrives: b.redrives, PeekMaxScan: opts.PeekMaxScan, FilterLimits: filterLimits}),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),

			// Close cancels it, ending requests that wait (a failed login's delay).
			BaseContext: func(net.Listener) context.Context { return b.httpCtx },
		}
		serveHTTP := b.httpS.Serve
		if opts.HTTPTLS {
			b.httpS.TLSConfig = certs.HTTPConfig()
			serveHTTP = func(l net.Listener) error { return b.httpS.ServeTLS(l, "", "") }
		}
		go func() { // exits when Close shuts the HTTP server down
			defer close(b.httpDone)
			if err := serveHTTP(b.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				b.log.Error("http serve stopped", "err", err)
			}
		}()
	} else {
		close(b.httpDone)
	}
	if ln != nil {
		go func() { // exits when the listener is closed by Close
			defer close(b.serveDone)
			if err := srv.Serve(ln); err != nil && !errors.Is(err, link.ErrServerClosed) {
				b.log.Error("serve stopped", "err", err)
			}
		}()
		b.log.Info("amqp listening", "addr", ln.Addr().String())
	} else {
		close(b.serveDone)
	}
	if b.tlsLn != nil {
		go func() { // exits when the TLS listener is closed by Close
			defer close(b.tlsDone)
			if err := srv.ServeTLS(b.tlsLn, certs); err != nil && !errors.Is(err, link.ErrServerClosed) {
				b.log.Error("TLS serve stopped", "err", err)
			}
		}()
		b.log.Info("amqps listening", "addr", b.tlsLn.Addr().String())
	} else {
		close(b.tlsDone)
	}
	// Redrive tasks left running resume once everything else is up.
	if err := b.redrives.Recover(); err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("recover redrive tasks from %s: %w", opts.DataDir, err)
	}
	return b, nil
}

// Addr returns the bound plain AMQP address, or nil when the plain
// listener is off.
func (b *Broker) Addr() net.Addr {
	if b.ln == nil {
		return nil
	}
	return b.ln.Addr()
}

// TLSAddr returns the bound amqps address, or nil when TLS is off.
func (b *Broker) TLSAddr() net.Addr {
	if b.tlsLn == nil {
		return nil
	}
	return b.tlsLn.Addr()
}

// ErrNoTLS is returned by ReloadTLS when no TLS certificate is configured.
var ErrNoTLS = errors.New("epitaph: TLS is not configured")

// ReloadTLS reads the TLS certificate, key and CA files again: new TLS
// handshakes (amqps and HTTPS) use them, connections already established
// are not touched. On error the previous certificate stays in use.
func (b *Broker) ReloadTLS() error {
	if b.certs == nil {
		return ErrNoTLS
	}
	if err := b.certs.Reload(); err != nil {
		return fmt.Errorf("reload TLS certificate: %w", err)
	}
	b.log.Info("TLS certificate reloaded")
	return nil
}

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

// Auth returns the broker's users and permissions.
func (b *Broker) Auth() *auth.Registry { return b.auth }

// DeadLetters returns the dead-letter component, whose counters say what
// died where and what was dropped.
func (b *Broker) DeadLetters() *deadletter.DeadLetterer { return b.dl }

// Redrives returns the redrive task manager.
func (b *Broker) Redrives() *dlops.Manager { return b.redrives }

// DeadLetterEvents returns the dead-letter event stream: subscribe to see
// every death as it happens.
func (b *Broker) DeadLetterEvents() *dlevents.Hub { return b.events }

// Close stops accepting, sends close(amqp:connection:forced) to every
// connection, waits for their goroutines, and stops the router. Idempotent.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.opts.ShutdownTimeout)
		defer cancel()
		var lnErr error
		if b.ln != nil {
			lnErr = b.ln.Close()
		}
		if b.tlsLn != nil {
			lnErr = errors.Join(lnErr, b.tlsLn.Close())
		}
		// The dead-letter event streams end first: an HTTP stream returns
		// at once, so Shutdown does not wait for it.
		b.events.Close()
		var httpErr error
		b.httpCancel()
		if b.httpS != nil {
			httpErr = b.httpS.Shutdown(ctx)
		}
		err := b.srv.Shutdown(ctx)
		<-b.serveDone
		<-b.tlsDone
		<-b.httpDone
		if b.redrives != nil {
			b.redrives.Close() // running tasks stay running in the store and resume at the next start
		}
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
