package link

import (
	"bufio"
	"crypto/x509"
	"errors"
	"net"
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
	// closed by the operator: the front end closes the connection with 320
	// connection-forced.
	Force <-chan struct{}
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
		OverLimit: c.overLimit, TLS: c.certs != nil, PeerCert: c.peerCert, Force: c.force,
	}
	if c.certs != nil {
		h.LoginName = c.certs.loginName
	}
	c.srv.opts.AMQP091.ServeAMQP091(h)
	return errHandedOff
}
