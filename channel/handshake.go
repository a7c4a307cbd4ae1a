package channel

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/config"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/value"
)

// errRefused ends a handshake the broker refused.
var errRefused = errors.New("channel: connection refused")

// The capabilities RabbitMQ 4.3 advertises, in its order (all true).
var serverCapabilities = []string{
	"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
	"connection.blocked", "consumer_priorities", "authentication_failure_close", "per_consumer_qos",
	"direct_reply_to",
}

func (c *conn) serverProperties() amqp091.Table {
	caps := make(amqp091.Table, len(serverCapabilities))
	for i, k := range serverCapabilities {
		caps[i] = amqp091.Field{Key: k, Value: true}
	}
	o := &c.srv.opts
	return amqp091.Table{
		{Key: "capabilities", Value: caps},
		{Key: "cluster_name", Value: "epitaph"},
		{Key: "copyright", Value: "epitaph authors"},
		{Key: "information", Value: "epitaph: an AMQP broker with RabbitMQ 4.3's dead-lettering"},
		{Key: "platform", Value: "Go"},
		{Key: "product", Value: o.Product},
		{Key: "version", Value: o.RabbitMQVersion},
	}
}

func (c *conn) anonymousAllowed() bool {
	switch c.srv.opts.Anonymous {
	case config.AnonymousAll:
		return true
	case config.AnonymousNone:
		return false
	}
	return c.h.Loopback
}

func (c *conn) plainAllowed() bool {
	return c.h.TLS || c.h.Loopback || c.srv.opts.PlainWithoutTLS == config.PlainWithoutTLSAll
}

func (c *conn) mechanisms() []string {
	var m []string
	if c.h.PeerCert != nil && c.h.LoginName != nil {
		m = append(m, "EXTERNAL")
	}
	if c.plainAllowed() {
		m = append(m, "PLAIN", "AMQPLAIN")
	}
	if c.anonymousAllowed() {
		m = append(m, "ANONYMOUS")
	}
	return m
}

// readMethod0 reads the next frame, which must be a method on channel 0
// (heartbeats are skipped), and decodes it.
func (c *conn) readMethod0() (amqp091.Method, error) {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		if f.Type == amqp091.FrameHeartbeat {
			continue
		}
		if f.Type != amqp091.FrameMethod || f.Channel != 0 {
			return nil, connErr(amqp091.UnexpectedFrame, 0, 0, "expected a connection method frame on channel 0")
		}
		return amqp091.ParseMethod(f.Payload)
	}
}

// handshake runs connection.start to open-ok.
func (c *conn) handshake() error {
	o := &c.srv.opts
	_ = c.nc.SetDeadline(time.Now().Add(o.HandshakeTimeout))
	c.frameMax = amqp091.InitialFrameMax
	start := &amqp091.ConnectionStart{VersionMajor: 0, VersionMinor: 9, ServerProperties: c.serverProperties(),
		Mechanisms: strings.Join(c.mechanisms(), " "), Locales: "en_US"}
	if err := c.sendMethod(0, start); err != nil {
		return err
	}
	fail := func(err error) error {
		if pe, ok := errors.AsType[*amqp091.Error](err); ok {
			c.closeConnection(pe)
		}
		return err
	}
	m, err := c.readMethod0()
	if err != nil {
		return fail(err)
	}
	so, ok := m.(*amqp091.ConnectionStartOk)
	if !ok {
		cl, me := m.ID()
		return fail(connErr(amqp091.CommandInvalid, cl, me, "expected connection.start_ok"))
	}
	if caps, ok := so.ClientProperties.Get("capabilities"); ok {
		c.capabilities, _ = caps.(amqp091.Table)
	}
	if err := c.login(so); err != nil {
		c.authDelay()
		if c.hasCapability("authentication_failure_close") {
			c.closeConnection(connErr(amqp091.AccessRefused, 0, 0,
				"Login was refused using authentication mechanism %s. For details see the broker logfile.", so.Mechanism))
		}
		return err
	}
	channelMax := o.AMQP091ChannelMax
	if channelMax == 0 { // settings built by hand, not from config.Default
		channelMax = config.Default().AMQP.AMQP091ChannelMax
	}
	tune := &amqp091.ConnectionTune{ChannelMax: channelMax, FrameMax: o.MaxFrameSize, Heartbeat: uint16(min(o.IdleTimeout/time.Second, 65535))}
	if err := c.sendMethod(0, tune); err != nil {
		return err
	}
	if m, err = c.readMethod0(); err != nil {
		return fail(err)
	}
	to, ok := m.(*amqp091.ConnectionTuneOk)
	if !ok {
		cl, me := m.ID()
		return fail(connErr(amqp091.CommandInvalid, cl, me, "expected connection.tune_ok"))
	}
	if err := negotiated("frame_max", to.FrameMax, amqp091.InitialFrameMax, tune.FrameMax); err != nil {
		return fail(err)
	}
	if err := negotiated("channel_max", uint32(to.ChannelMax), 1, uint32(tune.ChannelMax)); err != nil {
		return fail(err)
	}
	c.frameMax, c.channelMax = to.FrameMax, to.ChannelMax
	c.fr.SetFrameMax(to.FrameMax)
	c.heartbeat = time.Duration(to.Heartbeat) * time.Second
	if m, err = c.readMethod0(); err != nil {
		return fail(err)
	}
	op, ok := m.(*amqp091.ConnectionOpen)
	if !ok {
		cl, me := m.ID()
		// rabbit_reader's handle_method0/2 catch-all, answered with a close
		// in the opening state.
		return fail(connErr(amqp091.ChannelError, cl, me, "unexpected method in connection state opening"))
	}
	if c.h.OverLimit {
		return fail(connErr(amqp091.NotAllowed, 10, 40, "connection refused: node connection limit (%d) is reached", o.MaxConnections))
	}
	vh, ok := o.Router.VHost(op.VirtualHost)
	if !ok {
		return fail(connErr(amqp091.NotAllowed, 10, 40, "vhost %s not found", op.VirtualHost))
	}
	if !c.mayUseVHost(op.VirtualHost) {
		return fail(connErr(amqp091.NotAllowed, 10, 40, "access to vhost '%s' refused for user '%s'", op.VirtualHost, c.user))
	}
	c.vhost = vh
	c.armCredentialTimer()
	_ = c.nc.SetDeadline(time.Time{})
	if err := c.sendMethod(0, &amqp091.ConnectionOpenOk{}); err != nil {
		return err
	}
	c.h.SetChannelLister(c.listChannels)
	c.h.Opened(link.AMQP091Identity{User: c.user, VHost: vh.Name(), AuthMechanism: so.Mechanism,
		ClientProperties: clientProperties(so.ClientProperties), ChannelMax: c.channelMax, FrameMax: c.frameMax,
		Heartbeat: c.heartbeat})
	return nil
}

// negotiated checks a tune-ok value as RabbitMQ does
// (rabbit_reader:validate_negotiated_integer_value/3): not below the
// minimum unless 0, and neither 0 nor above the server's value.
func negotiated(field string, v, minimum, server uint32) error {
	switch {
	case v != 0 && v < minimum:
		return connErr(amqp091.NotAllowed, 10, 31, "negotiated %s = %d is lower than the minimum allowed value (%d)", field, v, minimum)
	case v == 0 || v > server:
		return connErr(amqp091.NotAllowed, 10, 31, "negotiated %s = %d is higher than the maximum allowed value (%d)", field, v, server)
	}
	return nil
}

// login checks start-ok's mechanism and response and sets c.user.
func (c *conn) login(so *amqp091.ConnectionStartOk) error {
	reg := c.srv.opts.Auth
	var user, pass string
	switch so.Mechanism {
	case "PLAIN":
		if !c.plainAllowed() {
			return fmt.Errorf("%w: PLAIN without TLS", errRefused)
		}
		parts := bytes.Split([]byte(so.Response), []byte{0})
		if len(parts) != 3 || len(parts[0]) != 0 {
			return fmt.Errorf("%w: malformed PLAIN response", errRefused)
		}
		user, pass = string(parts[1]), string(parts[2])
	case "AMQPLAIN":
		if !c.plainAllowed() {
			return fmt.Errorf("%w: AMQPLAIN without TLS", errRefused)
		}
		t, err := amqp091.ParseTable([]byte(so.Response))
		if err != nil {
			return fmt.Errorf("%w: malformed AMQPLAIN response: %w", errRefused, err)
		}
		user, pass = tableString(t, "LOGIN"), tableString(t, "PASSWORD")
	case "ANONYMOUS":
		if !c.anonymousAllowed() {
			return fmt.Errorf("%w: ANONYMOUS", errRefused)
		}
		c.user = "guest"
		return nil
	case "EXTERNAL":
		if c.h.PeerCert == nil || c.h.LoginName == nil {
			return fmt.Errorf("%w: EXTERNAL without a verified client certificate", errRefused)
		}
		name, err := c.h.LoginName(c.h.PeerCert)
		if err != nil {
			return fmt.Errorf("%w: EXTERNAL: %w", errRefused, err)
		}
		if name == "guest" && !c.h.Loopback {
			return fmt.Errorf("%w: user guest may only connect from loopback", errRefused)
		}
		if !reg.UserExists(name) {
			return fmt.Errorf("%w: EXTERNAL: no user %q", errRefused, name)
		}
		c.user = name
		return nil
	default:
		return fmt.Errorf("%w: unsupported mechanism %q", errRefused, so.Mechanism)
	}
	// A token as the password (RabbitMQ's OAuth 2 backend: the user name is
	// ignored, the token names the user). A refused token falls through to
	// the stored users, as RabbitMQ tries its next backend.
	var tokErr error
	if reg.OAuthEnabled() && auth.LooksLikeJWT(pass) {
		var tok *auth.Token
		if tok, tokErr = reg.AuthenticateToken(pass); tokErr == nil {
			// RabbitMQ checks loopback_users on the authenticated name.
			if tok.User == "guest" && !c.h.Loopback {
				return fmt.Errorf("%w: user guest may only connect from loopback", errRefused)
			}
			c.user, c.token = tok.User, tok
			return nil
		}
	}
	if user == "guest" && !c.h.Loopback {
		return fmt.Errorf("%w: user guest may only connect from loopback", errRefused)
	}
	if !reg.Authenticate(user, pass) {
		if tokErr != nil {
			return fmt.Errorf("%w: invalid credentials for user %q; as an OAuth 2 token: %w", errRefused, user, tokErr)
		}
		return fmt.Errorf("%w: invalid credentials for user %q", errRefused, user)
	}
	c.user = user
	return nil
}

// mayUseVHost reports whether the connection's user may open vhost: by
// its token's scopes, or the registry's permissions.
func (c *conn) mayUseVHost(vhost string) bool {
	if c.token != nil {
		return c.token.CanAccessVHost(vhost)
	}
	return c.srv.opts.Auth.CanAccessVHost(c.user, vhost)
}

// impersonator reports whether the connection's user has RabbitMQ's
// impersonator tag (may publish with another user_id).
func (c *conn) impersonator() bool {
	if c.token != nil {
		return c.token.HasTag("impersonator")
	}
	u, ok := c.srv.opts.Auth.User(c.user)
	return ok && slices.Contains(u.Tags, "impersonator")
}

func tableString(t amqp091.Table, k string) string {
	v, _ := t.Get(k)
	switch s := v.(type) {
	case string:
		return s
	case amqp091.Binary:
		return string(s)
	}
	return ""
}

// authDelay waits before a refused login is answered (auth-failure-delay).
func (c *conn) authDelay() {
	d := c.srv.opts.Auth.LoginFailed(remoteIP(c.nc.RemoteAddr()))
	if d <= 0 {
		return
	}
	_ = c.nc.SetDeadline(time.Now().Add(d + time.Second))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.h.Force:
	}
}

func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// clientProperties are start-ok's client-properties in the value model
// (symbol keys), as the HTTP API shows them.
func clientProperties(t amqp091.Table) value.Map {
	if len(t) == 0 {
		return nil
	}
	m := make(value.Map, 0, len(t))
	for _, f := range t {
		v := f.Value
		switch x := v.(type) {
		case amqp091.Table:
			v = clientProperties(x)
		case amqp091.Array, amqp091.Decimal:
			continue
		case amqp091.Binary:
			v = []byte(x)
		case amqp091.Timestamp:
			v = value.Timestamp(int64(x) * 1000)
		}
		m = append(m, value.KV{Key: value.Symbol(f.Key), Value: v})
	}
	return m
}
