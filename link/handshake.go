package link

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// handshakeFrameMax bounds frames before open is processed (SASL and open).
const handshakeFrameMax = 64 << 10

var (
	errBadHeader  = errors.New("link: unsupported protocol header")
	errSASLFailed = errors.New("link: authentication failed")
	errRefused    = errors.New("link: connection refused")
)

// readFrame reads one frame, refusing frames larger than max before
// allocating. body is the frame body after the extended header.
func readFrame(r *bufio.Reader, max uint32) (amqp10.FrameHeader, []byte, error) {
	hb, err := r.Peek(8)
	if err != nil {
		if errors.Is(err, io.EOF) && r.Buffered() > 0 {
			err = io.ErrUnexpectedEOF
		}
		return amqp10.FrameHeader{}, nil, err
	}
	fh, err := amqp10.ParseFrameHeader(hb)
	if _, derr := r.Discard(8); derr != nil {
		return fh, nil, derr
	}
	if err != nil {
		return fh, nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondFramingError, "bad frame header: %v", err), Cause: err}
	}
	if fh.Size > max {
		return fh, nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondFramingError, "frame size %d exceeds max-frame-size %d", fh.Size, max)}
	}
	rest := make([]byte, fh.Size-8)
	if _, err := io.ReadFull(r, rest); err != nil {
		return fh, nil, err
	}
	return fh, rest[int(fh.DataOffset)*4-8:], nil
}

// isLoopback reports whether the peer connects from a loopback address.
func isLoopback(a net.Addr) bool {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	if _, ok := a.(*net.UnixAddr); ok {
		return true
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// remoteIP is the peer's IP address; the zero Addr when the connection
// is not over IP.
func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// authDelay waits before a refused authentication is answered, as
// RabbitMQ waits its silent close delay, and longer for repeated failures
// from the same address (router.Broker.AuthFailed). The broker shutting
// down ends the wait.
func (c *conn) authDelay() {
	d := c.srv.opts.Router.AuthFailed(remoteIP(c.nc.RemoteAddr()))
	if d <= 0 {
		return
	}
	// The wait may outlast the handshake deadline: the answer still goes out.
	_ = c.nc.SetDeadline(time.Now().Add(d + time.Second))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.force:
	}
}

func (c *conn) anonymousAllowed() bool {
	switch c.srv.opts.Anonymous {
	case AnonymousAll:
		return true
	case AnonymousNone:
		return false
	}
	return c.loopback
}

// handshake runs the protocol header exchange, SASL and open, under the
// handshake deadline. On success c.user, c.vhost and the peer's limits are set.
func (c *conn) handshake() error {
	opts := &c.srv.opts
	if err := c.nc.SetDeadline(time.Now().Add(opts.HandshakeTimeout)); err != nil {
		return err
	}
	hdr, err := c.readHeader()
	if err != nil {
		return err
	}
	switch hdr {
	case amqp10.ProtoHeaderSASL:
		if err := c.writeRaw(amqp10.ProtoHeaderSASL[:]); err != nil {
			return err
		}
		if err := c.sasl(); err != nil {
			return err
		}
		if hdr, err = c.readHeader(); err != nil {
			return err
		}
		if hdr != amqp10.ProtoHeaderAMQP {
			_ = c.writeRaw(amqp10.ProtoHeaderAMQP[:])
			return fmt.Errorf("%w after SASL: % x", errBadHeader, hdr[:])
		}
	case amqp10.ProtoHeaderAMQP:
		// A raw AMQP connection without SASL is anonymous.
		if !c.anonymousAllowed() {
			_ = c.writeRaw(amqp10.ProtoHeaderSASL[:])
			return fmt.Errorf("%w: connection without SASL from %s", errRefused, c.nc.RemoteAddr())
		}
		c.user = "guest"
	default:
		_ = c.writeRaw(amqp10.ProtoHeaderSASL[:])
		return fmt.Errorf("%w: % x", errBadHeader, hdr[:])
	}
	if err := c.writeRaw(amqp10.ProtoHeaderAMQP[:]); err != nil {
		return err
	}
	return c.open()
}

func (c *conn) readHeader() ([8]byte, error) {
	var h [8]byte
	_, err := io.ReadFull(c.br, h[:])
	return h, err
}

func (c *conn) writeRaw(b []byte) error {
	_, err := c.nc.Write(b)
	return err
}

func (c *conn) writeFrameNow(typ byte, p amqp10.Performative) error {
	return c.writeRaw(amqp10.AppendFrame(nil, typ, 0, p, nil))
}

// sasl offers PLAIN (and ANONYMOUS where allowed) and checks the response.
func (c *conn) sasl() error {
	mechs := []amqp10.Symbol{"PLAIN"}
	if c.anonymousAllowed() {
		mechs = append(mechs, "ANONYMOUS")
	}
	if err := c.writeFrameNow(amqp10.FrameTypeSASL, &amqp10.SASLMechanisms{Mechanisms: mechs}); err != nil {
		return err
	}
	fh, body, err := readFrame(c.br, handshakeFrameMax)
	if err != nil {
		return err
	}
	fail := func(format string, args ...any) error {
		_ = c.writeFrameNow(amqp10.FrameTypeSASL, &amqp10.SASLOutcome{Code: amqp10.SASLCodeAuth})
		return fmt.Errorf("%w: %s", errSASLFailed, fmt.Sprintf(format, args...))
	}
	// refused is fail for a refused identity, answered late (authDelay).
	refused := func(format string, args ...any) error {
		c.authDelay()
		return fail(format, args...)
	}
	if fh.Type != amqp10.FrameTypeSASL {
		return fail("expected a SASL frame, got frame type %d", fh.Type)
	}
	p, _, err := amqp10.ParsePerformative(body)
	if err != nil {
		return fail("undecodable sasl-init: %v", err)
	}
	init, ok := p.(*amqp10.SASLInit)
	if !ok {
		return fail("expected sasl-init, got %T", p)
	}
	switch init.Mechanism {
	case "ANONYMOUS":
		if !c.anonymousAllowed() {
			return refused("ANONYMOUS refused from %s", c.nc.RemoteAddr())
		}
		c.user = "guest"
	case "PLAIN":
		// authzid NUL authcid NUL passwd (RFC 4616)
		parts := bytes.Split(init.InitialResponse, []byte{0})
		if len(parts) != 3 {
			return fail("malformed PLAIN response")
		}
		user, pass := string(parts[1]), string(parts[2])
		if user == "guest" && !c.loopback {
			return refused("user guest may only connect from loopback")
		}
		if !c.srv.opts.Router.Authenticate(user, pass) {
			return refused("invalid credentials for user %q", user)
		}
		c.user = user
	default:
		return fail("unsupported mechanism %q", init.Mechanism)
	}
	return c.writeFrameNow(amqp10.FrameTypeSASL, &amqp10.SASLOutcome{Code: amqp10.SASLCodeOK})
}

// open reads the peer's open, replies with ours, and selects the vhost.
func (c *conn) open() error {
	opts := &c.srv.opts
	fh, body, err := readFrame(c.br, max(handshakeFrameMax, opts.MaxFrameSize))
	if err != nil {
		return err
	}
	if fh.Type != amqp10.FrameTypeAMQP || len(body) == 0 {
		return fmt.Errorf("%w: expected open", errBadHeader)
	}
	p, _, err := amqp10.ParsePerformative(body)
	if err != nil {
		return fmt.Errorf("decode open: %w", err)
	}
	o, ok := p.(*amqp10.Open)
	if !ok {
		return fmt.Errorf("%w: expected open, got %T", errBadHeader, p)
	}
	c.peerMaxFrame = max(o.MaxFrameSize, amqp10.MinMaxFrameSize)
	c.peerChannelMax = o.ChannelMax
	c.heartbeat = 15 * time.Second
	if o.IdleTimeOut > 0 {
		c.heartbeat = min(c.heartbeat, time.Duration(o.IdleTimeOut)*time.Millisecond/2)
		c.heartbeat = max(c.heartbeat, 100*time.Millisecond)
	}
	c.containerID = o.ContainerID

	vhost := "/"
	if name, ok := strings.CutPrefix(o.Hostname, "vhost:"); ok {
		vhost = name
	}
	reply := &amqp10.Open{
		ContainerID:         "epitaph",
		MaxFrameSize:        opts.MaxFrameSize,
		ChannelMax:          opts.ChannelMax,
		IdleTimeOut:         uint32(opts.IdleTimeout / time.Millisecond / 2),
		OfferedCapabilities: []amqp10.Symbol{"ANONYMOUS-RELAY"},
		Properties: amqp10.Map{
			{Key: amqp10.Symbol("product"), Value: opts.Product},
			{Key: amqp10.Symbol("version"), Value: opts.Version},
			{Key: amqp10.Symbol("platform"), Value: "Go"},
			{Key: amqp10.Symbol("epitaph-version"), Value: opts.Version},
		},
	}
	if opts.Version == "" {
		reply.Properties = reply.Properties[:1]
	}
	if opts.RabbitMQVersion != "" {
		reply.Properties = reply.Properties.Set(amqp10.Symbol("version"), opts.RabbitMQVersion)
	}
	if err := c.writeFrameNow(amqp10.FrameTypeAMQP, reply); err != nil {
		return err
	}
	if c.overLimit {
		// RabbitMQ's check_*_connection_limit: open, then close at
		// connection scope.
		return c.refuse(amqp10.Errorf(amqp10.ErrCondResourceLimitExceeded, "connection limit (%d) reached", opts.MaxConnections),
			fmt.Errorf("%w: connection limit (%d) reached", errRefused, opts.MaxConnections))
	}
	vh, ok := opts.Router.VHost(vhost)
	if !ok || !opts.Router.CanAccessVHost(c.user, vhost) {
		// Do not reveal whether the vhost exists (RabbitMQ's check_vhost_exists).
		return c.refuse(amqp10.Errorf(amqp10.ErrCondUnauthorizedAccess,
			"access to vhost '%s' refused for user '%s'", vhost, c.user),
			fmt.Errorf("%w: vhost %q for user %q", errRefused, vhost, c.user))
	}
	c.vhost = vh
	return c.nc.SetDeadline(time.Time{})
}

// refuse ends a connection whose open was answered: it sends close{e} and
// waits, at most closeGrace, for the peer's close (2.4.3: "After writing
// this frame the peer SHOULD continue to read from the connection until it
// receives the partner's close frame"), so the socket is not reset while
// our frames are still unread. It returns err, the reason to log.
func (c *conn) refuse(e *amqp10.Error, err error) error {
	if werr := c.writeFrameNow(amqp10.FrameTypeAMQP, &amqp10.Close{Error: e}); werr != nil {
		return fmt.Errorf("%w (sending close: %w)", err, werr)
	}
	if derr := c.nc.SetReadDeadline(time.Now().Add(closeGrace)); derr != nil {
		return err
	}
	for {
		fh, body, rerr := readFrame(c.br, max(handshakeFrameMax, c.srv.opts.MaxFrameSize))
		if rerr != nil {
			return err // EOF, the grace period or a bad frame: we are done either way
		}
		if fh.Type != amqp10.FrameTypeAMQP || len(body) == 0 {
			continue
		}
		if code, perr := amqp10.PeekDescriptor(body); perr == nil && code == amqp10.DescClose {
			return err
		}
	}
}
