package link

import (
	"cmp"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// ConnectionInfo is a point-in-time view of one open AMQP connection, for
// the management API (RabbitMQ's connection infos). Connections still in
// their handshake are not listed, as RabbitMQ lists only running ones.
type ConnectionInfo struct {
	// Name is RabbitMQ's connection name: "PEER:PORT -> LOCAL:PORT".
	Name        string
	User        string
	VHost       string
	ContainerID string
	// ClientProperties are the properties of the client's open (symbol
	// keys); nil when it sent none.
	ClientProperties amqp10.Map
	// AuthMechanism is the SASL mechanism used, "none" without SASL.
	AuthMechanism string
	Peer, Local   netip.AddrPort
	TLS           bool
	// ChannelMax is the highest channel in force (the lower of ours and the
	// client's); FrameMax the largest frame we send (the client's
	// max-frame-size); IdleTimeout the time-out we apply to the client's
	// silence (idle-timeout). These are RabbitMQ's channel_max, frame_max
	// and timeout.
	ChannelMax  uint16
	FrameMax    uint32
	IdleTimeout time.Duration
	ConnectedAt time.Time
	// Sessions open now.
	Sessions int
	// RecvOctets and SendOctets count the socket's bytes, handshake
	// included; RecvCount and SendCount its read and write calls that moved
	// bytes (RabbitMQ reports the socket's packet counts there).
	RecvOctets, SendOctets, RecvCount, SendCount uint64
	// Protocol is "AMQP 1-0", or "AMQP 0-9-1" for a connection served by
	// the 0-9-1 front end.
	Protocol string
	// Channels are an AMQP 0-9-1 connection's open channels (nil for AMQP
	// 1.0, whose sessions are not channels).
	Channels []AMQP091Channel
}

// connIdentity is what a connection's handshake settled, published once by
// the loop when the connection opens, then never changed, so other
// goroutines read it through connStats.identity without a lock.
type connIdentity struct {
	name, user, vhost, containerID, authMechanism string
	clientProperties                              amqp10.Map
	peer, local                                   netip.AddrPort
	tls                                           bool
	channelMax                                    uint16
	frameMax                                      uint32
	idleTimeout                                   time.Duration
	connectedAt                                   time.Time
}

// connStats is the part of a connection that other goroutines may read
// (Server.Connections): the identity, published once, and counters kept
// with atomics by the goroutines that do the work (the reader and writer
// count bytes, the loop counts sessions).
type connStats struct {
	identity                                     atomic.Pointer[connIdentity]
	sessions                                     atomic.Int32
	recvOctets, sendOctets, recvCount, sendCount atomic.Uint64
}

func (st *connStats) sent(n int) {
	if n > 0 {
		st.sendOctets.Add(uint64(n))
		st.sendCount.Add(1)
	}
}

// countingReader counts what the socket delivers to the connection's reader.
type countingReader struct {
	r  io.Reader
	st *connStats
}

func (cr countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	if n > 0 {
		cr.st.recvOctets.Add(uint64(n))
		cr.st.recvCount.Add(1)
	}
	return n, err
}

// addrPort is a socket address as an AddrPort (IPv4-mapped addresses
// unmapped); the zero value when it is not an IP address.
func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// connectionName is RabbitMQ's name for a network connection
// (rabbit_net:connection_string): "PEER:PORT -> LOCAL:PORT", IPv6 addresses
// in brackets.
func connectionName(peer, local net.Addr) string {
	format := func(a net.Addr) string {
		if ap := addrPort(a); ap.IsValid() {
			return ap.String()
		}
		return a.String()
	}
	return format(peer) + " -> " + format(local)
}

// publishIdentity records, on the loop once the handshake succeeded, what
// the connection is, making it visible to Server.Connections.
func (c *conn) publishIdentity(props amqp10.Map) {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "publish identity")
	}
	c.stats.identity.Store(&connIdentity{
		name: connectionName(c.nc.RemoteAddr(), c.nc.LocalAddr()), user: c.user, vhost: c.vhost.Name(),
		containerID: c.containerID, authMechanism: c.authMechanism, clientProperties: props,
		peer: addrPort(c.nc.RemoteAddr()), local: addrPort(c.nc.LocalAddr()), tls: c.certs != nil,
		channelMax: min(c.srv.opts.ChannelMax, c.peerChannelMax), frameMax: c.peerMaxFrame,
		idleTimeout: c.srv.opts.IdleTimeout, connectedAt: time.Now(),
	})
}

// info is c's ConnectionInfo; false while c has not opened.
func (c *conn) info() (ConnectionInfo, bool) {
	id := c.stats.identity.Load()
	if id == nil {
		return ConnectionInfo{}, false
	}
	return ConnectionInfo{
		Name: id.name, User: id.user, VHost: id.vhost, ContainerID: id.containerID,
		ClientProperties: id.clientProperties, AuthMechanism: id.authMechanism,
		Peer: id.peer, Local: id.local, TLS: id.tls, ChannelMax: id.channelMax, FrameMax: id.frameMax,
		IdleTimeout: id.idleTimeout, ConnectedAt: id.connectedAt, Sessions: int(c.stats.sessions.Load()),
		RecvOctets: c.stats.recvOctets.Load(), SendOctets: c.stats.sendOctets.Load(),
		RecvCount: c.stats.recvCount.Load(), SendCount: c.stats.sendCount.Load(),
		Protocol: protocolName(c.is091.Load()),
		Channels: c.channels091(),
	}, true
}

// Connections lists the open connections (those past their handshake), in
// the order they were accepted.
func (s *Server) Connections() []ConnectionInfo {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	slices.SortFunc(conns, func(a, b *conn) int { return cmp.Compare(a.id, b.id) })
	out := make([]ConnectionInfo, 0, len(conns))
	for _, c := range conns {
		if ci, ok := c.info(); ok {
			out = append(out, ci)
		}
	}
	return out
}

// ManagementCloseCondition is the condition a connection closed by an
// operator (CloseConnection) gets: RabbitMQ 4.3's AMQP 1.0 reader closes
// such a connection with amqp:internal-error and a description starting
// "Connection forced: " (rabbit_amqp_reader's terminate/2), which is what
// clients look for.
const ManagementCloseCondition = amqp10.ErrCondInternalError

// CloseConnection closes the open connection named name, as RabbitMQ's
// management plugin and rabbitmqctl close_connection do: the client gets
// close with ManagementCloseCondition and the description
// `Connection forced: "REASON"`. It reports whether such a connection was
// open. The connection's own loop sends the close (through its force
// channel); this never touches the loop's state.
func (s *Server) CloseConnection(name, reason string) bool {
	target := s.byName(name)
	if target == nil {
		return false
	}
	target.forceCloseWith(&amqp10.Error{Condition: ManagementCloseCondition,
		Description: "Connection forced: " + erlangString(reason)})
	return true
}

// erlangString quotes s as Erlang's ~tp prints a printable string, which
// is how RabbitMQ quotes an operator's reason in the close description:
// in double quotes, with backslash escapes for quotes and backslashes.
func erlangString(s string) string { return strconv.Quote(s) }

// forceCloseWith asks the loop to close the connection with e; the first
// reason asked for wins (a later shutdown does not replace it).
func (c *conn) forceCloseWith(e *amqp10.Error) {
	c.forceErr.CompareAndSwap(nil, e)
	c.forceClose()
}

// forcedError is the close error the loop sends when asked to close.
func (c *conn) forcedError() *amqp10.Error {
	if e := c.forceErr.Load(); e != nil {
		return e
	}
	return &amqp10.Error{Condition: amqp10.ErrCondConnectionForced, Description: "broker shutting down"}
}

func protocolName(amqp091 bool) string {
	if amqp091 {
		return "AMQP 0-9-1"
	}
	return "AMQP 1-0"
}
