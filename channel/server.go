// Package channel is epitaph's AMQP 0-9-1 front end: the connection,
// channel, exchange, queue, basic, confirm and tx classes as RabbitMQ 4.3
// serves them, over the router. The AMQP listener (package link) reads a
// connection's protocol header and hands a 0-9-1 connection to
// Server.ServeAMQP091; the wire codec is package amqp091.
//
// A connection has three goroutines: the reader (it owns the channel
// table and handles every method in order), the deliverer (it writes the
// deliveries queues post to the connection's mailbox) and a heartbeat
// ticker. Frames are appended in order to one output buffer and written
// in batches (see flush); each channel's own state (delivery tags,
// unacknowledged deliveries, confirms) is guarded by its mutex, which is
// taken before the output's.
package channel

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/config"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// Options configure a Server.
type Options struct {
	// AMQP is the listener's settings (frame size, channel-max,
	// idle-timeout, max-message-size, handshake-timeout, max-connections,
	// anonymous and plain-without-tls); the zero value means
	// config.Default().AMQP.
	config.AMQP
	Logger *slog.Logger
	Router *router.Broker
	Auth   *auth.Registry
	// PermitTransientNonExclQueues: a non-durable, non-exclusive queue may
	// be declared (RabbitMQ 4.3 refuses it with 541 unless its deprecated
	// feature transient_nonexcl_queues is permitted).
	PermitTransientNonExclQueues bool
	// Product and Version go into server-properties; RabbitMQVersion is
	// sent as version (default "4.3.0").
	Product, Version, RabbitMQVersion string
	// Counters count the front end's traffic for the metrics (protocol
	// amqp091); nil counts nothing.
	Counters *link.Counters
	// Tracer records publish and deliver spans, as for AMQP 1.0; nil is
	// tracing off.
	Tracer *telemetry.Tracer
}

// Server serves AMQP 0-9-1 connections handed over by the listener.
type Server struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// exclusive holds the queues with an exclusive 0-9-1 consumer, and
	// consumers counts each queue's 0-9-1 consumers (basic.consume's
	// exclusive flag).
	exclusive map[*router.Queue]bool
	consumers map[*router.Queue]int
}

// consumerCount is q's consumers as RabbitMQ counts them: the router
// leaves basic.get's subscriptions out (router.ConsumerOptions.Getter).
func (s *Server) consumerCount(q *router.Queue) int { return q.Info().Consumers }

// NewServer returns a server for link.Options.AMQP091.
func NewServer(opts Options) *Server {
	if opts.AMQP == (config.AMQP{}) {
		opts.AMQP = config.Default().AMQP
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Product == "" {
		opts.Product = "epitaph"
	}
	if opts.RabbitMQVersion == "" {
		opts.RabbitMQVersion = "4.3.0"
	}
	return &Server{opts: opts, log: opts.Logger, exclusive: map[*router.Queue]bool{}, consumers: map[*router.Queue]int{}}
}

var _ link.AMQP091Handler = (*Server)(nil)

// ServeAMQP091 runs one connection to its end.
func (s *Server) ServeAMQP091(h *link.AMQP091Conn) {
	c := &conn{
		srv: s, nc: h.Conn, h: h,
		log:      s.log.With("conn", h.ID, "remote", h.Conn.RemoteAddr().String(), "protocol", "amqp-0-9-1"),
		fr:       amqp091.NewFrameReader(h.Reader),
		channels: make(map[uint16]*channel),
		mbox:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	c.serve()
}

// forcedError is the close of a connection the server ends: 320 with the
// operator's reason when closed through the management API, else the
// shutdown's.
func (c *conn) forcedError() *amqp091.Error {
	text := "broker forced connection closure with reason 'shutdown'"
	if d := c.h.ForcedBy(); d != "" {
		text = d
		if q, ok := strings.CutPrefix(d, "Connection forced: "); ok {
			if r, err := strconv.Unquote(q); err == nil {
				text = r
			}
		}
	}
	return &amqp091.Error{Code: amqp091.ConnectionForced, Text: text}
}

// errClosed ends a connection's reader after a close.
var errClosed = errors.New("channel: connection closed")

// conn is one AMQP 0-9-1 connection.
type conn struct {
	srv *Server
	nc  net.Conn
	h   *link.AMQP091Conn
	log *slog.Logger
	fr  *amqp091.FrameReader

	// Set by the handshake, then read-only.
	user         string
	vhost        *router.VHost
	frameMax     uint32
	channelMax   uint16
	heartbeat    time.Duration
	capabilities amqp091.Table

	// Owned by the reader; it changes the map under chMu, which the HTTP
	// API's channel list takes to read it.
	channels map[uint16]*channel
	chMu     sync.Mutex
	// token is the OAuth 2 token the user authenticated with (nil for a
	// stored user), replaced by connection.update-secret.
	token *auth.Token
	// credentialTimer closes credentialExpired at the token's expiry and
	// wakes the reader, which closes the connection (320).
	credentialTimer   *time.Timer
	credentialExpired chan struct{}

	smu   sync.Mutex // held while writing to nc (flush)
	spare []byte     // the buffer out swaps with (guarded by smu)
	wmu   sync.Mutex // guards out
	out   []byte     // frames not yet written, in order

	mmu  sync.Mutex // guards mail
	mail []mailItem
	mbox chan struct{}
	done chan struct{} // closed when the reader ends
	dwg  sync.WaitGroup
}

// mailItem is a delivery, a consumer's queue deleted (del), or a channel's
// publisher confirms to send (flush).
type mailItem struct {
	cons  *consumer
	reply *replyConsumer // a direct reply-to delivery (d), when set
	d     router.Delivery
	del   bool
	flush *channel
}

func (c *conn) post(it mailItem) {
	c.mmu.Lock()
	c.mail = append(c.mail, it)
	c.mmu.Unlock()
	select {
	case c.mbox <- struct{}{}:
	default:
	}
}

// Output. Frames are appended to out under wmu, in the order they are to
// go out, and written by flush: the deliverer appends every delivery and
// confirm of a mailbox batch and writes them with one system call; other
// senders (the reader's replies, heartbeats) flush at once. flush holds
// smu while it writes, so that batches reach the socket in the order they
// were taken, and takes wmu only to swap out with its spare buffer, so
// that the next batch is encoded while this one is written. Lock order:
// a channel's mu, then smu, then wmu.

// flushAt is the output size at which the deliverer writes before the end
// of its batch, so that what one connection buffers stays bounded.
const flushAt = 256 << 10

// write appends frames and writes everything pending.
func (c *conn) write(b []byte) error {
	c.wmu.Lock()
	c.out = append(c.out, b...)
	c.wmu.Unlock()
	return c.flush()
}

// flush writes the pending output.
func (c *conn) flush() error {
	c.smu.Lock()
	defer c.smu.Unlock()
	c.wmu.Lock()
	b := c.out
	c.out = c.spare[:0]
	c.wmu.Unlock()
	if len(b) == 0 {
		c.spare = b
		return nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteTimeout))
	n, err := c.nc.Write(b)
	c.h.Sent(n)
	if cap(b) > 1<<20 {
		b = nil // do not keep a large message's buffer
	}
	c.spare = b[:0]
	return err
}

// appendMethod appends one method frame to the output.
func (c *conn) appendMethod(ch uint16, m amqp091.Method) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := amqp091.AppendMethodFrame(c.out, ch, m)
	if err != nil {
		return err
	}
	c.out = b
	return nil
}

// sendMethod writes one method frame (and whatever output is pending
// before it).
func (c *conn) sendMethod(ch uint16, m amqp091.Method) error {
	if err := c.appendMethod(ch, m); err != nil {
		return err
	}
	return c.flush()
}

// sendContent writes a content-bearing method, its header and body.
func (c *conn) sendContent(ch uint16, m amqp091.Method, props, body []byte) error {
	if _, err := c.appendContent(ch, m, props, body); err != nil {
		return err
	}
	return c.flush()
}

// appendContent appends a content-bearing method, its header and body
// frames to the output, and returns the output's length.
func (c *conn) appendContent(ch uint16, m amqp091.Method, props, body []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := amqp091.AppendMethodFrame(c.out, ch, m)
	if err != nil {
		return len(c.out), err
	}
	b = appendHeaderFrame(b, ch, uint64(len(body)), props)
	c.out = amqp091.AppendBodyFrames(b, ch, c.frameMax, body)
	return len(c.out), nil
}

// appendHeaderFrame appends a content header frame of class basic with
// the property list's octets props.
func appendHeaderFrame(b []byte, ch uint16, size uint64, props []byte) []byte {
	n := 12 + len(props)
	b = append(b, amqp091.FrameHeader, byte(ch>>8), byte(ch), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	b = append(b, 0, 60, 0, 0,
		byte(size>>56), byte(size>>48), byte(size>>40), byte(size>>32), byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
	b = append(b, props...)
	return append(b, amqp091.FrameEnd)
}

// serve runs the handshake, then the reader loop, then cleans up.
func (c *conn) serve() {
	if err := c.handshake(); err != nil {
		c.stopCredentialTimer()
		c.log.Info("AMQP 0-9-1 handshake failed", "err", err)
		return
	}
	c.log.Debug("connection open", "user", c.user, "vhost", c.vhost.Name())
	if ctr := c.srv.opts.Counters; ctr != nil {
		ctr.ConnectionAdded(1)
		defer ctr.ConnectionAdded(-1)
	}
	c.dwg.Add(3)
	go c.deliverLoop()   // exits when done is closed
	go c.heartbeatLoop() // exits when done is closed
	go func() {          // exits when done is closed
		defer c.dwg.Done()
		select {
		case <-c.h.Force:
			// Wake the reader: it closes with connection-forced.
			_ = c.nc.SetReadDeadline(time.Now())
		case <-c.done:
		}
	}()
	c.dwg.Add(1)
	go c.watchAlarms() // exits when done is closed
	err := c.readLoop()
	c.stopCredentialTimer()
	if err != nil && !errors.Is(err, errClosed) {
		c.log.Debug("connection ended", "err", err)
	}
	close(c.done)
	// The socket goes now, so that a write in progress (a delivery to a
	// peer that stopped reading) fails at once instead of at write-timeout.
	_ = c.nc.Close()
	c.dwg.Wait()
	c.cleanup()
}

// cleanup ends every channel (their consumers' unacknowledged messages
// return to their queues, counted as a lost consumer's) and deletes the
// connection's exclusive queues.
func (c *conn) cleanup() {
	for _, ch := range c.channels {
		ch.end()
	}
	c.chMu.Lock()
	c.channels = nil
	c.chMu.Unlock()
	if c.vhost != nil {
		c.vhost.DeleteExclusive(c)
	}
}

// heartbeatLoop sends a heartbeat frame every heartbeat interval (when one
// was negotiated).
func (c *conn) heartbeatLoop() {
	defer c.dwg.Done()
	if c.heartbeat <= 0 {
		<-c.done
		return
	}
	t := time.NewTicker(c.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if c.write(amqp091.AppendHeartbeat(nil)) != nil {
				return
			}
		}
	}
}

// watchAlarms sends connection.blocked and connection.unblocked to a client
// that advertised the capability, as the resource alarms change.
func (c *conn) watchAlarms() {
	defer c.dwg.Done()
	if !c.hasCapability("connection.blocked") {
		return
	}
	mon := c.srv.opts.Router.Alarms()
	blocked := false
	for {
		now, changed := mon.PublishBlocked()
		if now != blocked {
			blocked = now
			var err error
			if now {
				st := mon.State()
				reason := "low on memory"
				switch {
				case st.Disk && st.Memory:
					reason = "low on memory & disk"
				case st.Disk:
					reason = "low on disk"
				}
				err = c.sendMethod(0, &amqp091.ConnectionBlocked{Reason: reason})
			} else {
				err = c.sendMethod(0, &amqp091.ConnectionUnblocked{})
			}
			if err != nil {
				return
			}
		}
		select {
		case <-changed:
		case <-c.done:
			return
		}
	}
}

// waitUnblocked holds a publishing connection while a resource alarm is
// set, as RabbitMQ blocks the reader of a connection that publishes: the
// message and everything after it wait in the socket. It reports false if
// the connection is forced closed meanwhile.
func (c *conn) waitUnblocked() bool {
	mon := c.srv.opts.Router.Alarms()
	for {
		blocked, changed := mon.PublishBlocked()
		if !blocked {
			return true
		}
		_ = c.nc.SetReadDeadline(time.Time{}) // no heartbeat time-out while blocked
		select {
		case <-changed:
		case <-c.h.Force:
			c.closeConnection(c.forcedError())
			return false
		case <-c.credentialExpired:
			c.closedForExpiry()
			return false
		}
	}
}

func (c *conn) hasCapability(name string) bool {
	v, ok := c.capabilities.Get(name)
	b, isBool := v.(bool)
	return ok && isBool && b
}

// readLoop reads and handles frames until the connection ends.
func (c *conn) readLoop() error {
	for {
		// Two missed heartbeats end the connection, as in RabbitMQ; a
		// client that negotiated heartbeat 0 is never timed out.
		timeout := 2 * c.heartbeat
		select {
		case <-c.h.Force:
			c.closeConnection(c.forcedError())
			return errClosed
		default:
			if timeout > 0 {
				_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
			}
		}
		if c.closedForExpiry() {
			return errClosed
		}
		f, err := c.fr.ReadFrame()
		if err != nil {
			if pe, ok := errors.AsType[*amqp091.Error](err); ok {
				c.closeConnection(pe)
				return errClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				select {
				case <-c.h.Force:
					c.closeConnection(c.forcedError())
					return errClosed
				default:
				}
				if c.closedForExpiry() {
					return errClosed
				}
				return fmt.Errorf("missed heartbeats from client: %w", err)
			}
			return err
		}
		if err := c.frame(f); err != nil {
			if errors.Is(err, errClosed) {
				return err
			}
			pe, ok := errors.AsType[*amqp091.Error](err)
			if !ok {
				return err
			}
			if pe.Scope() == amqp091.ScopeConnection {
				c.closeConnection(pe)
				return errClosed
			}
			if err := c.closeChannel(pe); err != nil {
				return err
			}
		}
	}
}

// closeConnection sends connection.close with e and waits (briefly) for
// close-ok; the socket is then closed by the listener.
func (c *conn) closeConnection(e *amqp091.Error) {
	c.log.Info("closing AMQP 0-9-1 connection", "code", e.Code, "text", e.ReplyText())
	if c.sendMethod(0, &amqp091.ConnectionClose{ReplyCode: e.Code, ReplyText: e.ReplyText(), ClassID: e.ClassID, MethodID: e.MethodID}) != nil {
		return
	}
	deadline := time.Now().Add(time.Second)
	_ = c.nc.SetReadDeadline(deadline)
	for time.Now().Before(deadline) {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		if f.Type == amqp091.FrameMethod && f.Channel == 0 {
			cl, me, _, err := amqp091.ParseMethodHeader(f.Payload)
			if err == nil && cl == 10 && (me == 51 || me == 50) {
				if me == 50 {
					_ = c.sendMethod(0, &amqp091.ConnectionCloseOk{})
				}
				return
			}
		}
	}
}

// connErr and chErr build errors of connection and channel scope.
func connErr(code uint16, classID, methodID uint16, format string, args ...any) *amqp091.Error {
	return &amqp091.Error{Code: code, ClassID: classID, MethodID: methodID, Text: fmt.Sprintf(format, args...)}
}

// frame handles one frame.
func (c *conn) frame(f amqp091.Frame) error {
	if f.Type == amqp091.FrameHeartbeat {
		if f.Channel != 0 {
			return connErr(amqp091.FrameError, 0, 0, "heartbeat frame on channel %d", f.Channel)
		}
		return nil
	}
	if f.Channel == 0 {
		return c.channelZero(f)
	}
	ch, ok := c.channels[f.Channel]
	if !ok {
		// RabbitMQ's create_channel/2 counts the open channels (those
		// awaiting close-ok included) and does not limit their numbers.
		if len(c.channels) >= int(c.channelMax) {
			return connErr(amqp091.NotAllowed, 0, 0, "number of channels opened (%d) has reached the negotiated channel_max (%d)", len(c.channels), c.channelMax)
		}
		if f.Type != amqp091.FrameMethod {
			// RabbitMQ gives a frame on a new channel to the channel's
			// frame assembler, which expects a method.
			return connErr(amqp091.UnexpectedFrame, 0, 0, "expected method frame, got non method frame instead")
		}
		cl, me, args, err := amqp091.ParseMethodHeader(f.Payload)
		if err != nil {
			return amqp091.WithChannel(err, 0)
		}
		if cl != 20 || me != 10 {
			return connErr(amqp091.ChannelError, cl, me, "expected 'channel.open'")
		}
		var m amqp091.ChannelOpen
		if err := amqp091.DecodeArgs(&m, args); err != nil {
			return err
		}
		ch = newChannel(c, f.Channel)
		c.chMu.Lock()
		c.channels[f.Channel] = ch
		c.chMu.Unlock()
		return c.sendMethod(f.Channel, &amqp091.ChannelOpenOk{})
	}
	return ch.frame(f)
}

// channelZero handles a frame on channel 0 after the handshake.
func (c *conn) channelZero(f amqp091.Frame) error {
	if f.Type != amqp091.FrameMethod {
		return connErr(amqp091.UnexpectedFrame, 0, 0, "expected method frame on channel 0, got frame type %d", f.Type)
	}
	m, err := amqp091.ParseMethod(f.Payload)
	if err != nil {
		return err
	}
	switch m := m.(type) {
	case *amqp091.ConnectionClose:
		// close-ok once every channel has ended, as RabbitMQ sends it: a
		// client that reconnects when its close returns finds its
		// consumers gone, their unacknowledged messages back in their
		// queues, and its exclusive queues deleted.
		c.cleanup()
		_ = c.sendMethod(0, &amqp091.ConnectionCloseOk{})
		return errClosed
	case *amqp091.ConnectionUpdateSecret:
		return c.updateSecret(m)
	}
	// Anything else, connection.close-ok included (closeConnection reads
	// the answer to a close the broker sends), is rabbit_reader's
	// handle_method0/2 catch-all.
	cl, me := m.ID()
	return connErr(amqp091.ChannelError, cl, me, "unexpected method in connection state running")
}

// closeChannel answers a channel-scoped error: channel.close, and the
// channel ends (its consumers are cancelled) while it waits for close-ok.
func (c *conn) closeChannel(e *amqp091.Error) error {
	ch, ok := c.channels[e.Channel]
	if !ok {
		return nil
	}
	ch.end()
	ch.closing = true
	return c.sendMethod(e.Channel, &amqp091.ChannelClose{ReplyCode: e.Code, ReplyText: e.ReplyText(), ClassID: e.ClassID, MethodID: e.MethodID})
}

// ---- deliveries ----

// deliverLoop writes what the queues post to the mailbox.
func (c *conn) deliverLoop() {
	defer c.dwg.Done()
	var items []mailItem
	for {
		select {
		case <-c.done:
			return
		case <-c.mbox:
		}
		c.mmu.Lock()
		items, c.mail = c.mail, items[:0]
		c.mmu.Unlock()
		for i := range items {
			it := &items[i]
			var err error
			switch {
			case it.flush != nil:
				err = it.flush.flushConfirms()
			case it.del:
				it.cons.queueDeleted()
			case it.reply != nil:
				var n int
				if n, err = it.reply.write(&it.d); err == nil && n >= flushAt {
					err = c.flush()
				}
			default:
				var n int
				if n, err = it.cons.write(&it.d); err == nil && n >= flushAt {
					err = c.flush()
				}
			}
			if err != nil {
				c.writeFailed(err)
				return
			}
			*it = mailItem{}
		}
		// One write for the whole batch.
		if err := c.flush(); err != nil {
			c.writeFailed(err)
			return
		}
	}
}

// writeFailed ends the connection after a failed write: the socket goes,
// and the reader with it. The deliverer stops at once, so that consumers
// are not granted credit for deliveries that cannot be written (with
// no-ack, each one would be taken from its queue and lost). Deliveries
// still in the mailbox go back to their queues with their subscriptions,
// but for no-ack ones, which are lost with the connection (as in-flight
// no-ack deliveries are in RabbitMQ): at most a consumer's window.
func (c *conn) writeFailed(err error) {
	c.log.Debug("delivery write failed", "err", err)
	_ = c.nc.Close()
}
