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
	// NoPlainListener turns the plain (non-TLS) AMQP listener off; Listen
	// is then ignored. It needs a TLS listener.
	NoPlainListener bool
	// HTTPListen is the management HTTP API's listen address; empty means
	// no HTTP listener (cmd/epitaph's default is 127.0.0.1:15672).
	HTTPListen string
	// TLSCertFile and TLSKeyFile (PEM) turn on the amqps listener on
	// TLSListen (default ":5671"), TLS 1.2 or later. ReloadTLS reads them
	// again. Without a certificate there is no TLS listener.
	TLSCertFile, TLSKeyFile string
	// TLSListen is the amqps listen address; default ":5671" when
	// TLSCertFile is set.
	TLSListen string
	// TLSCAFile (PEM) holds the CAs client certificates are verified
	// against; needed by TLSVerifyPeer.
	TLSCAFile string
	// TLSVerifyPeer requests a client certificate and verifies one that is
	// sent (RabbitMQ's ssl_options.verify = verify_peer); a verified
	// certificate makes SASL EXTERNAL available.
	TLSVerifyPeer bool
	// TLSFailIfNoPeerCert refuses TLS clients without a certificate
	// (ssl_options.fail_if_no_peer_cert); needs TLSVerifyPeer.
	TLSFailIfNoPeerCert bool
	// TLSHandshakeTimeout bounds the TLS handshake; default 5s, as
	// RabbitMQ's ssl_handshake_timeout.
	TLSHandshakeTimeout time.Duration
	// SSLCertLoginFrom names the user of a SASL EXTERNAL login, as
	// RabbitMQ's ssl_cert_login_from: "distinguished_name" (default),
	// "common_name" or "subject_alternative_name"; for the last,
	// SSLCertLoginSANType ("dns" default, "ip", "email", "uri") and
	// SSLCertLoginSANIndex (0-based) pick the name.
	SSLCertLoginFrom     string
	SSLCertLoginSANType  string
	SSLCertLoginSANIndex int
	// HTTPTLS serves the management HTTP API over HTTPS on HTTPListen with
	// the TLS certificate.
	HTTPTLS bool
	// PlainWithoutTLS says from where SASL PLAIN is accepted on the plain
	// listener: "loopback" (default) or "all". Over TLS it always is.
	PlainWithoutTLS string
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
	// AlarmInterval is how often the disk and memory alarms are checked on
	// a timer; default 1s. They are also checked as publishes consume
	// memory and disk, every few MiB.
	AlarmInterval time.Duration
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
	// WriteTimeout closes a connection whose peer takes no output for this
	// long (it stopped reading), as a lost connection; default 30s. A peer
	// that reads slowly is never cut: every write that moves bytes starts
	// it afresh.
	WriteTimeout time.Duration
	// MaxConnections is the node connection limit: a connection beyond it
	// is answered with open, then close(amqp:resource-limit-exceeded);
	// default 10,000, negative means unlimited.
	MaxConnections int
	// InitialFrameMax is the largest frame accepted before open (SASL and
	// open frames); default 8192, at least 512.
	InitialFrameMax uint32
	// MaxLinksPerConnection bounds the links of one connection over all its
	// sessions; beyond it an attach is refused with
	// amqp:resource-limit-exceeded. Default 4096.
	MaxLinksPerConnection int
	// MaxUnfinishedBytes bounds the bytes of incomplete multi-frame
	// messages one connection holds; the link whose frame would pass it is
	// detached with amqp:resource-limit-exceeded. Default 64 MiB.
	MaxUnfinishedBytes int64
	// MaxUnsettledIncoming bounds, per session, rcv-settle-mode second
	// publishes whose outcome the client has not settled: credit stops
	// there, and a publish beyond it detaches its link with
	// amqp:resource-limit-exceeded. Default 8192.
	MaxUnsettledIncoming int
	// AuthFailureDelay is how long a failed authentication (AMQP SASL or
	// HTTP basic auth) waits for its answer, multiplied by the recent
	// failures from the same address up to ten times; default 3s (RabbitMQ's
	// silent close delay), negative means no wait. AuthFailureSources
	// bounds the addresses whose failures are remembered; default 10,000.
	AuthFailureDelay   time.Duration
	AuthFailureSources int
	// HTTPGetMaxCount bounds the count of one POST /api/queues/{vhost}/{q}/get
	// (above it: 400); default 10,000. HTTPGetMaxBytes bounds the payload
	// bytes one get answers with (fewer messages, and the
	// X-Epitaph-Get-Truncated header); default 16 MiB.
	HTTPGetMaxCount int
	HTTPGetMaxBytes int
	// ManagementPendingBytes bounds the /management responses a session
	// holds for a client that does not take them; beyond it the request
	// link is detached with amqp:resource-limit-exceeded; default 1 MiB.
	ManagementPendingBytes int
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
	ln     net.Listener // nil with NoPlainListener
	tlsLn  net.Listener // nil without a TLS certificate
	certs  *link.TLSCerts
	srv    *link.Server
	httpLn net.Listener
	httpS  *http.Server
	router *router.Broker
	auth   *auth.Registry
	store  *store.Pebble // nil in memory mode
	dl     *deadletter.DeadLetterer
	log    *slog.Logger
	opts   Options

	providers *telemetry.Providers
	tracer    *telemetry.Tracer
	counters  *link.Counters

	httpCtx    context.Context // the HTTP requests' base, cancelled by Close
	httpCancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
	serveDone chan struct{}
	tlsDone   chan struct{}
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
	switch opts.PlainWithoutTLS {
	case "", link.PlainWithoutTLSLoopback, link.PlainWithoutTLSAll:
	default:
		return nil, fmt.Errorf("%w: plain without TLS %q (want loopback or all)", ErrInvalidOptions, opts.PlainWithoutTLS)
	}
	var certs *link.TLSCerts
	if opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		var err error
		certs, err = link.NewTLSCerts(link.TLSOptions{CertFile: opts.TLSCertFile, KeyFile: opts.TLSKeyFile,
			CAFile: opts.TLSCAFile, VerifyPeer: opts.TLSVerifyPeer, FailIfNoPeerCert: opts.TLSFailIfNoPeerCert,
			HandshakeTimeout: opts.TLSHandshakeTimeout, CertLoginFrom: opts.SSLCertLoginFrom,
			CertLoginSANType: opts.SSLCertLoginSANType, CertLoginSANIndex: opts.SSLCertLoginSANIndex})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		if opts.TLSListen == "" {
			opts.TLSListen = ":5671"
		}
	} else if opts.TLSListen != "" || opts.HTTPTLS {
		return nil, fmt.Errorf("%w: TLS listeners need a certificate and key file", ErrInvalidOptions)
	}
	if opts.NoPlainListener && certs == nil {
		return nil, fmt.Errorf("%w: with the plain listener off a TLS listener is needed", ErrInvalidOptions)
	}
	b := &Broker{serveDone: make(chan struct{}), tlsDone: make(chan struct{}), httpDone: make(chan struct{}),
		log: opts.Logger, certs: certs}
	b.httpCtx, b.httpCancel = context.WithCancel(context.Background())
	if err := b.setupTelemetry(&opts); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	dl := deadletter.New(deadletter.Options{Logger: opts.Logger.With("component", "deadletter"), Strict: opts.StrictParity,
		Tracer: b.tracer})
	ropts := router.Options{Logger: opts.Logger.With("component", "router"),
		AutoCreateQueues: opts.AutoCreateQueues, DeadLetterer: dl,
		DeadLetterRetryInterval: opts.DeadLetterRetryInterval, MemoryHighWatermark: opts.MemoryHighWatermark,
		DiskFree: opts.DiskFree, MemoryUsed: opts.MemoryUsed, AlarmInterval: opts.AlarmInterval,
		AuthFailureDelay: opts.AuthFailureDelay, AuthFailureSources: opts.AuthFailureSources}
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
	users := auth.New(rt)
	b.auth = users
	if err := rt.Recover(); err != nil {
		b.abort()
		return nil, fmt.Errorf("recover from %s: %w", opts.DataDir, err)
	}
	if err := users.Recover(); err != nil {
		b.abort()
		return nil, fmt.Errorf("recover from %s: %w", opts.DataDir, err)
	}
	if len(opts.Definitions) > 0 {
		if err := rt.LoadDefinitions(opts.Definitions); err != nil {
			b.abort()
			return nil, fmt.Errorf("load definitions: %w", err)
		}
	}
	users.SeedDefaults()
	var ln net.Listener
	if !opts.NoPlainListener {
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
	srv := link.NewServer(link.Options{
		Logger:           opts.Logger.With("component", "amqp"),
		Router:           rt,
		Auth:             users,
		Anonymous:        string(opts.Anonymous),
		PlainWithoutTLS:  opts.PlainWithoutTLS,
		MaxFrameSize:     opts.MaxFrameSize,
		ChannelMax:       opts.ChannelMax,
		HandleMax:        opts.HandleMax,
		IdleTimeout:      opts.IdleTimeout,
		MaxMessageSize:   opts.MaxMessageSize,
		HandshakeTimeout: opts.HandshakeTimeout,
		WriteTimeout:     opts.WriteTimeout,
		MaxConnections:   opts.MaxConnections,

		InitialFrameMax:       opts.InitialFrameMax,
		MaxLinksPerConnection: opts.MaxLinksPerConnection,
		MaxUnfinishedBytes:    opts.MaxUnfinishedBytes,
		MaxUnsettledIncoming:  opts.MaxUnsettledIncoming,
		AutoCreateQueues:      opts.AutoCreateQueues,
		Management: management.NewAMQPNode(management.AMQPOptions{Router: rt, Auth: users, DeadLetters: dl,
			Logger: opts.Logger.With("component", "management")}),
		Product:  "epitaph",
		Version:  Version,
		Tracer:   b.tracer,
		Counters: b.counters,

		ManagementPendingBytes: opts.ManagementPendingBytes,
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
		b.httpS = &http.Server{
			Handler: management.NewHTTPHandler(management.HTTPOptions{Router: rt, Auth: users, DeadLetters: dl,
				Logger: opts.Logger.With("component", "http"), ProductVersion: Version, Metrics: metrics,
				GetMaxCount: opts.HTTPGetMaxCount, GetMaxBytes: opts.HTTPGetMaxBytes}),
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
		var httpErr error
		b.httpCancel()
		if b.httpS != nil {
			httpErr = b.httpS.Shutdown(ctx)
		}
		err := b.srv.Shutdown(ctx)
		<-b.serveDone
		<-b.tlsDone
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
