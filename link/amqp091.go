package link

import (
	"bufio"
	"crypto/x509"
	"errors"
	"net"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// AMQP091Conn is a connection whose protocol header asked for AMQP 0-9-1,
// handed by the listener to the 0-9-1 front end. The listener has read
// the eight header octets (and possibly more, held in Reader) and, on a
// TLS listener, completed the TLS handshake; the connection counts toward
// max-connections and the server's shutdown waits for it until
// ServeAMQP091 returns.
type AMQP091Conn struct {
	Conn net.Conn
	// Reader reads the socket after the protocol header (it may already
	// hold octets the client sent behind it).
	Reader *bufio.Reader
	// ID numbers the connection among all of the server's connections.
	ID uint64
	// Legacy09 is set for the AMQP 0-9 header, served as 0-9-1.
	Legacy09 bool
	// Loopback: the client's address is a loopback address.
	Loopback bool
	// OverLimit: accepted beyond max-connections; the front end refuses it
	// after the handshake.
	OverLimit bool
	// TLS is set on connections of a TLS listener; PeerCert is the client's
	// certificate when the TLS handshake verified it.
	TLS      bool
	PeerCert *x509.Certificate
	// LoginName is the user a verified client certificate names
	// (ssl-cert-login-from), for SASL EXTERNAL.
	LoginName func(*x509.Certificate) (string, error)
	// Force is closed when the server shuts down or the connection is
	// closed by the operator (ForcedBy): the front end closes the
	// connection with 320 connection-forced.
	Force <-chan struct{}

	c *conn
}

// AMQP091Identity is what a 0-9-1 connection's handshake settled, shown
// by Server.Connections (and the HTTP API) as an AMQP 1.0 connection's is.
type AMQP091Identity struct {
	User, VHost, AuthMechanism string
	// ClientProperties are start-ok's client-properties as symbol-keyed
	// values.
	ClientProperties amqp10.Map
	ChannelMax       uint16
	FrameMax         uint32
	Heartbeat        time.Duration
}

// Opened lists the connection among the server's connections.
func (h *AMQP091Conn) Opened(id AMQP091Identity) {
	c := h.c
	c.is091.Store(true)
	c.stats.identity.Store(&connIdentity{
		name: connectionName(c.nc.RemoteAddr(), c.nc.LocalAddr()), user: id.User, vhost: id.VHost,
		authMechanism: id.AuthMechanism, clientProperties: id.ClientProperties,
		peer: addrPort(c.nc.RemoteAddr()), local: addrPort(c.nc.LocalAddr()), tls: c.certs != nil,
		channelMax: id.ChannelMax, frameMax: id.FrameMax, idleTimeout: id.Heartbeat, connectedAt: time.Now(),
	})
}

// AMQP091Channel is one open AMQP 0-9-1 channel, as the HTTP API lists it.
type AMQP091Channel struct {
	Number uint16
	// Consumers on the channel; Unacknowledged deliveries it holds;
	// Unconfirmed publishes awaiting their confirm.
	Consumers, Unacknowledged, Unconfirmed int
	// Prefetch is the basic.qos prefetch count for new consumers.
	Prefetch      uint16
	Confirm       bool // confirm.select
	Transactional bool // tx.select
}

// SetChannelLister gives the server the function that lists the
// connection's open channels; it is called from any goroutine.
func (h *AMQP091Conn) SetChannelLister(list func() []AMQP091Channel) {
	h.c.channelLister.Store(&list)
}

// channels091 lists an AMQP 0-9-1 connection's channels (nil otherwise).
func (c *conn) channels091() []AMQP091Channel {
	if list := c.channelLister.Load(); list != nil {
		return (*list)()
	}
	return nil
}

// ChannelsChanged counts channels opened (delta 1) or closed (-1), shown as
// the connection's sessions.
func (h *AMQP091Conn) ChannelsChanged(delta int) { h.c.stats.sessions.Add(int32(delta)) }

// Sent counts octets written to the socket.
func (h *AMQP091Conn) Sent(n int) { h.c.stats.sent(n) }

// ForcedBy is the operator's reason when the connection was closed through
// the management API (Server.CloseConnection), else "".
func (h *AMQP091Conn) ForcedBy() string {
	if e := h.c.forceErr.Load(); e != nil {
		return e.Description
	}
	return ""
}

// AMQP091Handler serves AMQP 0-9-1 connections on the AMQP listener
// (Options.AMQP091): ServeAMQP091 runs the connection to its end, on the
// listener's connection goroutine, and closes nothing it did not open
// (the listener closes the socket after it returns).
type AMQP091Handler interface {
	ServeAMQP091(c *AMQP091Conn)
}

// errHandedOff ends the AMQP 1.0 handshake of a connection the 0-9-1
// front end has served.
var errHandedOff = errors.New("link: served as AMQP 0-9-1")

// serveAMQP091 hands c to the 0-9-1 front end.
func (c *conn) serveAMQP091(legacy09 bool) error {
	h := &AMQP091Conn{
		Conn: c.nc, Reader: c.br, ID: c.id, Legacy09: legacy09, Loopback: c.loopback,
		OverLimit: c.overLimit, TLS: c.certs != nil, PeerCert: c.peerCert, Force: c.force, c: c,
	}
	if c.certs != nil {
		h.LoginName = c.certs.loginName
	}
	c.srv.opts.AMQP091.ServeAMQP091(h)
	return errHandedOff
}
