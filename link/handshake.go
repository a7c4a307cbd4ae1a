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
	"unicode/utf8"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/amqp10"
)

// firstFrameChunk is the least readFrame allocates for a frame body that is
// not yet wholly buffered; the body then grows as its bytes arrive.
const firstFrameChunk = 4 << 10

// minIdleTimeout is the shortest idle-time-out a peer may ask for in its
// open. RabbitMQ refuses shorter ones too (rabbit_amqp_reader.erl closes
// with amqp:not-allowed below 1000 ms), and 2.4.5 lets a peer refuse
// idle time-outs it cannot support.
const minIdleTimeout = 1000

var (
	errBadHeader  = errors.New("link: unsupported protocol header")
	errSASLFailed = errors.New("link: authentication failed")
	errRefused    = errors.New("link: connection refused")
)

// readFrame reads one frame, refusing frames larger than max before
// allocating. body is the frame body after the extended header.
//
// The body is allocated in proportion to the bytes that have arrived, not
// to the size the header claims: what is buffered, at least
// firstFrameChunk, then doubling as more arrives. A peer that sends a
// header claiming a large frame and then nothing holds a few KiB, not the
// claimed size.
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
	rest, err := readBody(r, int(fh.Size-8))
	if err != nil {
		return fh, nil, err
	}
	return fh, rest[int(fh.DataOffset)*4-8:], nil
}

// readBody reads n bytes, growing the slice as they arrive (see readFrame).
// The result's capacity is exactly n.
func readBody(r *bufio.Reader, n int) ([]byte, error) {
	size := min(n, max(r.Buffered(), firstFrameChunk))
	buf := make([]byte, size)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	for len(buf) < n {
		next := min(n, 2*len(buf))
		grown := make([]byte, next)
		copy(grown, buf)
		if _, err := io.ReadFull(r, grown[len(buf):]); err != nil {
			return nil, err
		}
		buf = grown
	}
	return buf, nil
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
// from the same address (auth.Registry.LoginFailed). The broker shutting
// down ends the wait.
func (c *conn) authDelay() {
	d := c.srv.opts.Auth.LoginFailed(remoteIP(c.nc.RemoteAddr()))
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
		c.user, c.authMechanism = "guest", "none"
	default:
		// Everything else is refused as RabbitMQ 4.3 refuses it (the
		// header it supports, then close), but for AMQP 0-9-1, which
		// the 0-9-1 front end serves when there is one.
		hs := amqp091.Classify(hdr)
		if hs.Protocol == amqp091.ProtocolAMQP091 && !hs.Refuse && opts.AMQP091 != nil {
			return c.serveAMQP091(hs.Legacy09)
		}
		reply := hs.Reply
		if !hs.Refuse {
			reply = amqp091.ProtoHeader10SASL // 0-9-1 without a front end
		}
		_ = c.writeRaw(reply[:])
		return fmt.Errorf("%w: % x (%s)", errBadHeader, hdr[:], hs.Reason)
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

// writeRaw writes b straight to the socket. Only the handshake uses it: it
// runs on the loop's goroutine before the writer starts, so the socket's
// write side is the loop's alone then (no outbuf hand-off yet).
func (c *conn) writeRaw(b []byte) error {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "handshake write")
	}
	n, err := c.nc.Write(b)
	c.stats.sent(n)
	return err
}

func (c *conn) writeFrameNow(typ byte, p amqp10.Performative) error {
	return c.writeRaw(amqp10.AppendFrame(nil, typ, 0, p, nil))
}

// plainAllowed reports whether SASL PLAIN may be used: always over TLS,
// and on a plain connection from loopback unless Options.PlainWithoutTLS
// is "all", because PLAIN puts the password on the wire in the clear.
func (c *conn) plainAllowed() bool {
	return c.certs != nil || c.loopback || c.srv.opts.PlainWithoutTLS == PlainWithoutTLSAll
}

// sasl offers EXTERNAL (when the TLS handshake verified a client
// certificate), PLAIN and ANONYMOUS where allowed, and checks the response.
func (c *conn) sasl() error {
	var mechs []amqp10.Symbol
	if c.peerCert != nil {
		mechs = append(mechs, "EXTERNAL")
	}
	if c.plainAllowed() {
		mechs = append(mechs, "PLAIN")
	}
	if c.anonymousAllowed() {
		mechs = append(mechs, "ANONYMOUS")
	}
	if err := c.writeFrameNow(amqp10.FrameTypeSASL, &amqp10.SASLMechanisms{Mechanisms: mechs}); err != nil {
		return err
	}
	fh, body, err := readFrame(c.br, c.srv.opts.InitialFrameMax)
	fail := func(format string, args ...any) error {
		_ = c.writeFrameNow(amqp10.FrameTypeSASL, &amqp10.SASLOutcome{Code: amqp10.SASLCodeAuth})
		return fmt.Errorf("%w: %s", errSASLFailed, fmt.Sprintf(format, args...))
	}
	var pe *amqp10.ProtocolError
	if errors.As(err, &pe) {
		// An oversized or malformed frame in the SASL phase: no close is
		// possible before open, so the outcome ends it.
		return fail("%v", pe.Err)
	}
	if err != nil {
		return err
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
	case "EXTERNAL":
		// The user is named by the certificate; the response (an
		// authorization identity) is ignored, as RabbitMQ does.
		if c.peerCert == nil {
			return fail("EXTERNAL without a verified client certificate")
		}
		user, err := c.certs.loginName(c.peerCert)
		if err != nil {
			return fail("EXTERNAL: %v", err)
		}
		if user == "guest" && !c.loopback {
			return refused("user guest may only connect from loopback")
		}
		if !c.srv.opts.Auth.UserExists(user) {
			return refused("EXTERNAL: no user %q", user)
		}
		c.user = user
	case "PLAIN":
		if !c.plainAllowed() {
			return fail("PLAIN refused without TLS from %s", c.nc.RemoteAddr())
		}
		// authzid NUL authcid NUL passwd (RFC 4616)
		parts := bytes.Split(init.InitialResponse, []byte{0})
		if len(parts) != 3 {
			return fail("malformed PLAIN response")
		}
		user, pass := string(parts[1]), string(parts[2])
		// A token as the password (RabbitMQ's OAuth 2 backend: the user
		// name is ignored, the token names the user). A refused token falls
		// through to the stored users, as RabbitMQ tries its next backend;
		// the client learns only that authentication failed.
		tok, tokErr := c.tokenLogin(pass)
		if tok != nil {
			// RabbitMQ checks loopback_users on the authenticated name.
			if tok.User == "guest" && !c.loopback {
				return refused("user guest may only connect from loopback")
			}
			c.user, c.token = tok.User, tok
			break
		}
		if user == "guest" && !c.loopback {
			return refused("user guest may only connect from loopback")
		}
		if !c.srv.opts.Auth.Authenticate(user, pass) {
			if tokErr != nil {
				return refused("invalid credentials for user %q; as an OAuth 2 token: %v", user, tokErr)
			}
			return refused("invalid credentials for user %q", user)
		}
		c.user = user
	default:
		return fail("unsupported mechanism %q", init.Mechanism)
	}
	c.authMechanism = string(init.Mechanism)
	return c.writeFrameNow(amqp10.FrameTypeSASL, &amqp10.SASLOutcome{Code: amqp10.SASLCodeOK})
}

// open reads the peer's open, replies with ours, and selects the vhost.
func (c *conn) open() error {
	opts := &c.srv.opts
	o, perr := c.readOpen()
	if perr != nil {
		if perr.Err == nil {
			return perr.Cause // the socket failed or timed out: nobody to tell
		}
		// 2.4.1: each peer sends open before any other frame, so a close
		// explaining the refusal follows our open.
		if err := c.writeFrameNow(amqp10.FrameTypeAMQP, c.ourOpen()); err != nil {
			return err
		}
		return c.refuse(perr.Err, fmt.Errorf("%w: %w", errRefused, perr))
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
	if err := c.writeFrameNow(amqp10.FrameTypeAMQP, c.ourOpen()); err != nil {
		return err
	}
	if c.overLimit {
		// RabbitMQ's check_*_connection_limit: open, then close at
		// connection scope.
		return c.refuse(amqp10.Errorf(amqp10.ErrCondResourceLimitExceeded, "connection limit (%d) reached", opts.MaxConnections),
			fmt.Errorf("%w: connection limit (%d) reached", errRefused, opts.MaxConnections))
	}
	vh, ok := opts.Router.VHost(vhost)
	if !ok || !c.mayUseVHost(vhost) {
		// Do not reveal whether the vhost exists (RabbitMQ's check_vhost_exists).
		return c.refuse(amqp10.Errorf(amqp10.ErrCondUnauthorizedAccess,
			"access to vhost '%s' refused for user '%s'", vhost, c.user),
			fmt.Errorf("%w: vhost %q for user %q", errRefused, vhost, c.user))
	}
	c.vhost = vh
	if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return err
	}
	c.publishIdentity(o.Properties)
	return nil
}

// readOpen reads and checks the peer's open. A nil Err in the returned
// error means the socket failed (nothing can be sent); otherwise Err is the
// condition to close with.
func (c *conn) readOpen() (*amqp10.Open, *amqp10.ProtocolError) {
	// Until open is processed, only frames of InitialFrameMax are accepted
	// (2.4.1: before the exchange of open, only MIN-MAX-FRAME-SIZE is
	// guaranteed; the peer's open cannot be larger than what it may assume).
	fh, body, err := readFrame(c.br, c.srv.opts.InitialFrameMax)
	var pe *amqp10.ProtocolError
	if errors.As(err, &pe) {
		return nil, pe
	}
	if err != nil {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection, Cause: err}
	}
	if fh.Type != amqp10.FrameTypeAMQP {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondFramingError, "frame type %d where open was expected", fh.Type)}
	}
	if len(body) == 0 {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondIllegalState, "empty frame before open")}
	}
	if code, err := amqp10.PeekDescriptor(body); err == nil && code != amqp10.DescOpen {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondIllegalState, "frame with descriptor 0x%x before open", code)}
	}
	p, _, err := amqp10.ParsePerformative(body)
	if err != nil {
		return nil, decodeError(err)
	}
	o, ok := p.(*amqp10.Open)
	if !ok {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondIllegalState, "%T before open", p)}
	}
	if o.MaxFrameSize < amqp10.MinMaxFrameSize {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondFrameSizeTooSmall, "max-frame-size (%d) < minimum maximum frame size (%d)",
				o.MaxFrameSize, amqp10.MinMaxFrameSize)}
	}
	if o.IdleTimeOut > 0 && o.IdleTimeOut < minIdleTimeout {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondNotAllowed, "idle-time-out (%d ms) < minimum idle-time-out (%d ms)",
				o.IdleTimeOut, minIdleTimeout)}
	}
	if field, ok := openUTF8(o); !ok {
		return nil, &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondDecodeError, "open %s is not valid UTF-8", field)}
	}
	return o, nil
}

// openUTF8 checks that the open's strings are valid UTF-8 (a string is
// "a sequence of Unicode characters", 1.6.20), naming the first bad field.
func openUTF8(o *amqp10.Open) (string, bool) {
	switch {
	case !utf8.ValidString(o.ContainerID):
		return "container-id", false
	case !utf8.ValidString(o.Hostname):
		return "hostname", false
	}
	for _, e := range o.Properties {
		if !validUTF8Value(e.Key) || !validUTF8Value(e.Value) {
			return "properties", false
		}
	}
	return "", true
}

// validUTF8Value reports whether every string within v is valid UTF-8.
func validUTF8Value(v any) bool {
	switch v := v.(type) {
	case string:
		return utf8.ValidString(v)
	case amqp10.List:
		for _, e := range v {
			if !validUTF8Value(e) {
				return false
			}
		}
	case amqp10.Map:
		for _, e := range v {
			if !validUTF8Value(e.Key) || !validUTF8Value(e.Value) {
				return false
			}
		}
	}
	return true
}

// ourOpen is the broker's open frame.
func (c *conn) ourOpen() *amqp10.Open {
	opts := &c.srv.opts
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
	return reply
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
		fh, body, rerr := readFrame(c.br, c.srv.opts.MaxFrameSize)
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
