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
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// AnonymousPolicy values for Options.Anonymous.
const (
	AnonymousLoopback = "loopback"
	AnonymousAll      = "all"
	AnonymousNone     = "none"
)

// PlainWithoutTLS values for Options.PlainWithoutTLS.
const (
	PlainWithoutTLSLoopback = "loopback"
	PlainWithoutTLSAll      = "all"
)

// Options configure a Server. Zero values mean the documented defaults.
type Options struct {
	Logger *slog.Logger
	Router *router.Broker
	// Auth holds the users and their permissions: who may log in and what
	// they may use (required).
	Auth *auth.Registry
	// Anonymous: "loopback" (default), "all" or "none": from where ANONYMOUS
	// and no-SASL connections are accepted (as the guest user).
	Anonymous string
	// PlainWithoutTLS: "loopback" (default) or "all": from where SASL
	// PLAIN is accepted on a connection without TLS. PLAIN sends the
	// password in the clear, so off loopback it is offered only over TLS
	// unless this is "all".
	PlainWithoutTLS string
	// MaxFrameSize we accept; default 131072.
	MaxFrameSize uint32
	// InitialFrameMax is the largest frame accepted before open is
	// processed (SASL frames and the open itself); default 8192, at least
	// 512. RabbitMQ uses the same: INITIAL_MAX_FRAME_SIZE is 8192 in
	// deps/rabbit/include/rabbit_amqp_reader.hrl.
	InitialFrameMax uint32
	// MaxLinksPerConnection bounds the links attached on one connection,
	// over all its sessions; default 4096.
	MaxLinksPerConnection int
	// MaxUnfinishedBytes bounds the bytes of incomplete multi-frame
	// messages one connection may hold, over all its links; default 64 MiB.
	MaxUnfinishedBytes int64
	// MaxUnsettledIncoming bounds, per session, the publishes (rcv-settle-mode
	// second) whose outcome we sent and the peer has not settled; default 8192.
	MaxUnsettledIncoming int
	// ChannelMax advertised; default 255.
	ChannelMax uint16
	// HandleMax advertised; default 255.
	HandleMax uint32
	// IdleTimeout: a connection that sends nothing for this long is closed; default 60s.
	IdleTimeout time.Duration
	// MaxMessageSize advertised on attach; default 16 MiB.
	MaxMessageSize uint64
	// HandshakeTimeout bounds header, SASL and open; default 10s.
	HandshakeTimeout time.Duration
	// MaxConnections is the node connection limit; default 10000, negative
	// means unlimited. Every accepted socket counts until its goroutines
	// have finished, handshakes included. A connection beyond the limit
	// gets through SASL and open as usual and is then closed with
	// amqp:resource-limit-exceeded (RabbitMQ's check_*_connection_limit).
	MaxConnections int
	// AutoCreateQueues declares a classic queue for a bare address on attach.
	AutoCreateQueues bool
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
	// ManagementPendingBytes bounds the management responses a session
	// holds for a client that has not attached, or not credited, its
	// response link; a request beyond it detaches the request link with
	// amqp:resource-limit-exceeded. Default DefaultManagementPendingBytes.
	ManagementPendingBytes int
	// WriteTimeout: a connection whose peer takes no output for this long
	// (it stopped reading) is closed, as a lost connection; default 30s.
	// Every write that moves bytes starts it afresh.
	WriteTimeout time.Duration
}

// DefaultManagementPendingBytes is Options.ManagementPendingBytes' default.
const DefaultManagementPendingBytes = 1 << 20

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Anonymous == "" {
		o.Anonymous = AnonymousLoopback
	}
	if o.PlainWithoutTLS == "" {
		o.PlainWithoutTLS = PlainWithoutTLSLoopback
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = 131072
	}
	if o.MaxFrameSize < amqp10.MinMaxFrameSize {
		o.MaxFrameSize = amqp10.MinMaxFrameSize
	}
	if o.InitialFrameMax == 0 {
		o.InitialFrameMax = 8192
	}
	o.InitialFrameMax = max(o.InitialFrameMax, amqp10.MinMaxFrameSize)
	if o.MaxLinksPerConnection == 0 {
		o.MaxLinksPerConnection = 4096
	}
	if o.MaxUnfinishedBytes == 0 {
		o.MaxUnfinishedBytes = 64 << 20
	}
	if o.MaxUnsettledIncoming == 0 {
		o.MaxUnsettledIncoming = 8192
	}
	if o.ChannelMax == 0 {
		o.ChannelMax = 255
	}
	if o.HandleMax == 0 {
		o.HandleMax = 255
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 16 << 20
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 10000
	}
	if o.ManagementPendingBytes <= 0 {
		o.ManagementPendingBytes = DefaultManagementPendingBytes
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
