package link

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/config"
	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// Anonymous policies (Options.Anonymous), as config defines them.
const (
	AnonymousLoopback = config.AnonymousLoopback
	AnonymousAll      = config.AnonymousAll
	AnonymousNone     = config.AnonymousNone
)

// PlainWithoutTLS values (Options.PlainWithoutTLS), as config defines them.
const (
	PlainWithoutTLSLoopback = config.PlainWithoutTLSLoopback
	PlainWithoutTLSAll      = config.PlainWithoutTLSAll
)

// Options configure a Server: the AMQP settings, defined, defaulted and
// validated in package config (a zero value there means none, never the
// default), and the parts of the broker the server talks to.
type Options struct {
	// AMQP is the settings; the zero AMQP means config.Default().AMQP (for
	// tests that start a server directly). Anything else must pass
	// config's validation, as epitaph.Start checks.
	config.AMQP

	Logger *slog.Logger
	Router *router.Broker
	// Auth holds the users and their permissions: who may log in and what
	// they may use (required).
	Auth *auth.Registry
	// Management serves the /management node; nil refuses attaches to it.
	Management ManagementNode
	// Product and Version ("epitaph", our release) go into the open frame's
	// properties as product and epitaph-version.
	Product, Version string
	// RabbitMQVersion is sent as the open properties' version, so RabbitMQ 4
	// clients enable their features; default "4.3.0".
	RabbitMQVersion string
	// Tracer records publish, deliver and settle spans and propagates trace
	// context through x-opt-traceparent; nil is tracing off.
	Tracer *telemetry.Tracer
	// Counters receive message and connection counts; nil counts nothing.
	Counters *Counters
	// Events is the dead-letter event stream behind the
	// /events/dead-letters source; nil refuses attaches to it.
	Events *dlevents.Hub
	// AMQP091 serves connections that open with the AMQP 0-9-1 header;
	// nil refuses them (the AMQP 1.0 SASL header, then close).
	AMQP091 AMQP091Handler
}

func (o *Options) setDefaults() {
	if o.AMQP == (config.AMQP{}) {
		o.AMQP = config.Default().AMQP
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Product == "" {
		o.Product = "epitaph"
	}
	if o.RabbitMQVersion == "" {
		o.RabbitMQVersion = "4.3.0"
	}
}

// Server accepts AMQP 1.0 connections.
type Server struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	nextID uint64
	wg     sync.WaitGroup

	// live counts accepted connections whose goroutines have not all
	// finished yet, refused ones included.
	live atomic.Int64
}

// NewServer returns a server; call Serve to accept connections.
func NewServer(opts Options) *Server {
	opts.setDefaults()
	return &Server{opts: opts, log: opts.Logger, conns: make(map[*conn]struct{})}
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("link: server closed")

// Serve accepts connections on ln until ln is closed or Shutdown is called.
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, nil) }

// ServeTLS accepts TLS connections (amqps) on ln until ln is closed or
// Shutdown is called. Each connection first completes its TLS handshake,
// within certs' handshake time-out, then runs as on Serve. Connections on
// every listener of the server share its connection limit.
func (s *Server) ServeTLS(ln net.Listener, certs *TLSCerts) error {
	if certs == nil {
		return fmt.Errorf("%w: no certificates", ErrTLSConfig)
	}
	return s.serve(ln, certs)
}

func (s *Server) serve(ln net.Listener, certs *TLSCerts) error {
	var tlsConfig *tls.Config
	if certs != nil {
		tlsConfig = certs.AMQPConfig()
	}
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return ErrServerClosed
			}
			var ne net.Error
			// Out of file descriptors (or socket buffers) is temporary too:
			// connections closing free them, so back off and keep serving.
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) ||
				errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; backing off", "err", err, "delay", delay)
				t := time.NewTimer(delay)
				<-t.C
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		delay = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.nextID++
		n := s.live.Add(1)
		if tlsConfig != nil {
			nc = tls.Server(nc, tlsConfig) // the handshake runs in the connection's goroutine
		}
		c := newConn(s, nc, s.nextID, s.opts.MaxConnections > 0 && n > int64(s.opts.MaxConnections))
		c.certs = certs
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() { // exits when the connection is closed
			defer s.wg.Done()
			c.serve() // returns once the reader and writer have exited
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.live.Add(-1)
		}()
	}
}

// Shutdown sends close(amqp:connection:forced) to every connection and waits
// for them to finish, or for ctx to end. The caller closes the listener.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.forceClose()
	}
	done := make(chan struct{})
	go func() { // exits when every connection goroutine has returned
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// ManagementNode answers RabbitMQ 4's HTTP-over-AMQP management requests
// sent on the /management link pair. owner is the
// connection's identity, as used for exclusive queues. Request returns the
// encoded response message (properties with subject and correlation-id,
// application-properties, amqp-value body), sent back pre-settled.
type ManagementNode interface {
	Request(owner any, user string, vhost *router.VHost, req *amqp10.Message) []byte
}
