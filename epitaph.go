// Package epitaph embeds the epitaph AMQP 1.0 broker: Start one on any
// address (127.0.0.1:0 picks a free port), talk to it with any AMQP 1.0
// client, and Close it. cmd/epitaph is a thin wrapper around this package.
package epitaph

import (
	"log/slog"
	"net"
	"time"

	"github.com/epitaph-mq/epitaph/router"
)

// AnonymousPolicy says from where ANONYMOUS and no-SASL connections are accepted.
type AnonymousPolicy string

// Anonymous policies.
const (
	AnonymousLoopback AnonymousPolicy = "loopback" // default: only from loopback addresses, as guest
	AnonymousAll      AnonymousPolicy = "all"
	AnonymousNone     AnonymousPolicy = "none"
)

// Options configure a broker. Zero values mean the documented defaults.
type Options struct {
	// Listen is the AMQP listen address; default ":5672".
	Listen string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Definitions is a RabbitMQ definitions JSON document applied at start.
	Definitions []byte
	// InMemory selects the in-memory store (today the only one).
	InMemory bool
	// AutoCreateQueues declares a classic queue when a link attaches to a bare address.
	AutoCreateQueues bool
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
}

// Broker is a running broker.
type Broker struct{}

// Start listens on opts.Listen and serves in the background until Close.
func Start(opts Options) (*Broker, error) { panic("unimplemented") }

// Addr returns the bound AMQP address.
func (b *Broker) Addr() net.Addr { panic("unimplemented") }

// Router returns the data model, for embedding programs and tests that
// change topology at run time.
func (b *Broker) Router() *router.Broker { panic("unimplemented") }

// Close stops accepting, sends close(amqp:connection:forced) to every
// connection, waits for their goroutines, and stops the router. Idempotent.
func (b *Broker) Close() error { panic("unimplemented") }
