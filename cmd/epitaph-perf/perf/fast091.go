package perf

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/epitaph-mq/epitaph/amqp091"
)

// The fast091 engine: AMQP 0-9-1 on epitaph's amqp091 codec, pipelined as
// the fast engine is for AMQP 1.0. One connection and one channel (1) per
// publisher or consumer, heartbeats off (tune-ok heartbeat 0, which both
// RabbitMQ and epitaph accept), frame-max the broker's. Publishers put the
// channel in confirm mode and keep Window publishes unconfirmed, mandatory
// (an unroutable publish comes back as basic.return and counts as
// released); consumers set basic.qos to Credit per consumer and ack (or
// reject without requeue) each delivery, with multiple=true only when
// AckMultiple says so. Every frame goes through an OutQueue, so the
// frames produced while the writer is busy leave in one write; a
// consumer's acks are collected while more input is buffered and queued
// together.

// fast091Conn is one AMQP 0-9-1 connection with channel 1 open.
type fast091Conn struct {
	nc       net.Conn
	br       *bufio.Reader
	fr       *amqp091.FrameReader
	out      *OutQueue
	frameMax uint32

	done  chan struct{}
	wdone chan struct{}
	readerState
}

// errRefused091 wraps the reply of a broker that closed the connection or
// the channel during setup.
var errRefused091 = errors.New("broker refused")

func dialFast091(ctx context.Context, o ConnOptions) (*fast091Conn, error) {
	u, nc, err := dialURL(ctx, o.URL)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(nc, 256<<10)
	c := &fast091Conn{nc: nc, br: br, fr: amqp091.NewFrameReader(br), out: NewOutQueue(),
		done: make(chan struct{}), wdone: make(chan struct{})}
	if err := c.handshake(u, o.SASL); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// vhost091 is the virtual host of an amqp:// URL: the path without its
// leading slash, percent-decoded; "/" when there is none.
func vhost091(u *url.URL) string {
	if v := strings.TrimPrefix(u.Path, "/"); v != "" {
		return v
	}
	return "/"
}

// credentials091 is the user and password of a PLAIN login: the URL's, or
// guest/guest as amqp091-go and pika default to.
func credentials091(u *url.URL) (user, pass string) {
	if u.User == nil || u.User.Username() == "" {
		return "guest", "guest"
	}
	pass, _ = u.User.Password()
	return u.User.Username(), pass
}

// handshake runs connection.start to connection.open-ok and opens channel
// 1, synchronously (nothing else is in flight yet). sasl is as in
// ConnOptions.SASL: auto and plain log in with PLAIN, anonymous with
// ANONYMOUS.
func (c *fast091Conn) handshake(u *url.URL, sasl string) error {
	if _, err := c.nc.Write([]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}); err != nil {
		return err
	}
	var start amqp091.ConnectionStart
	if err := c.expect(0, &start); err != nil {
		return fmt.Errorf("connection.start: %w", err)
	}
	so := &amqp091.ConnectionStartOk{Locale: "en_US", ClientProperties: amqp091.Table{
		{Key: "product", Value: "epitaph-perf"},
		{Key: "capabilities", Value: amqp091.Table{
			{Key: "publisher_confirms", Value: true},
			{Key: "basic.nack", Value: true},
			{Key: "consumer_cancel_notify", Value: true},
			{Key: "connection.blocked", Value: true},
			{Key: "authentication_failure_close", Value: true},
		}},
		{Key: "connection_name", Value: fmt.Sprintf("epitaph-perf-%d", connSeq.Add(1))},
	}}
	switch sasl {
	case "", "auto", "plain":
		user, pass := credentials091(u)
		so.Mechanism, so.Response = "PLAIN", "\x00"+user+"\x00"+pass
	case "anonymous":
		so.Mechanism, so.Response = "ANONYMOUS", ""
	default:
		return fmt.Errorf("-sasl %q: the fast091 engine logs in with plain or anonymous", sasl)
	}
	if !strings.Contains(" "+start.Mechanisms+" ", " "+so.Mechanism+" ") {
		return fmt.Errorf("the broker offers %q, not %s", start.Mechanisms, so.Mechanism)
	}
	if err := c.send(0, so); err != nil {
		return err
	}
	var tune amqp091.ConnectionTune
	if err := c.expect(0, &tune); err != nil {
		return fmt.Errorf("connection.tune (after logging in with %s): %w", so.Mechanism, err)
	}
	// The broker's limits as they are (0 is "no limit": then 128 KiB
	// frames, RabbitMQ's default, and 2047 channels), heartbeats off.
	c.frameMax = tune.FrameMax
	if c.frameMax == 0 {
		c.frameMax = 128 << 10
	}
	channelMax := tune.ChannelMax
	if channelMax == 0 {
		channelMax = 2047
	}
	if err := c.send(0, &amqp091.ConnectionTuneOk{ChannelMax: channelMax, FrameMax: c.frameMax}); err != nil {
		return err
	}
	c.fr.SetFrameMax(c.frameMax)
	if err := c.send(0, &amqp091.ConnectionOpen{VirtualHost: vhost091(u)}); err != nil {
		return err
	}
	if err := c.expect(0, &amqp091.ConnectionOpenOk{}); err != nil {
		return fmt.Errorf("connection.open: %w", err)
	}
	if err := c.send(1, &amqp091.ChannelOpen{}); err != nil {
		return err
	}
	if err := c.expect(1, &amqp091.ChannelOpenOk{}); err != nil {
		return fmt.Errorf("channel.open: %w", err)
	}
	return nil
}

// send writes one method frame directly (setup only, before start).
func (c *fast091Conn) send(channel uint16, m amqp091.Method) error {
	b, err := amqp091.AppendMethodFrame(nil, channel, m)
	if err != nil {
		return err
	}
	_, err = c.nc.Write(b)
	return err
}

// expect reads frames until a method arrives (setup only, before start):
// want's method on channel, else an error naming what came (a close
// carries the broker's reply).
func (c *fast091Conn) expect(channel uint16, want amqp091.Method) error {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type == amqp091.FrameHeartbeat {
			continue
		}
		if f.Type != amqp091.FrameMethod {
			return fmt.Errorf("unexpected frame type %d on channel %d", f.Type, f.Channel)
		}
		cl, me, args, err := amqp091.ParseMethodHeader(f.Payload)
		if err != nil {
			return err
		}
		if err := closeReply(cl, me, args); err != nil {
			return err
		}
		wc, wm := want.ID()
		if f.Channel != channel || cl != wc || me != wm {
			return fmt.Errorf("unexpected %s on channel %d", amqp091.MethodName(cl, me), f.Channel)
		}
		return amqp091.DecodeArgs(want, args)
	}
}

// closeReply is the error a connection.close or channel.close carries,
// nil for any other method.
func closeReply(classID, methodID uint16, args []byte) error {
	var what string
	switch {
	case classID == amqp091.ClassConnection && methodID == amqp091.MethodConnectionClose:
		what = "connection"
	case classID == amqp091.ClassChannel && methodID == amqp091.MethodChannelClose:
		what = "channel"
	default:
		return nil
	}
	var cl amqp091.ConnectionClose
	if err := cl.Decode(args); err != nil {
		return fmt.Errorf("%w: %s.close (undecodable)", errRefused091, what)
	}
	return fmt.Errorf("%w: %s.close %d %s", errRefused091, what, cl.ReplyCode, cl.ReplyText)
}

// methodOf reads the method of f, which must be a method frame (content
// frames are consumed before it is called).
func methodOf(f amqp091.Frame) (classID, methodID uint16, args []byte, err error) {
	if f.Type != amqp091.FrameMethod {
		return 0, 0, nil, fmt.Errorf("unexpected frame type %d on channel %d", f.Type, f.Channel)
	}
	return amqp091.ParseMethodHeader(f.Payload)
}

// unexpected answers a method that channel 1's sender or receiver does not
// handle: the broker's close (with close-ok for a channel.close) or any
// other method, as the error that ends the run.
func (c *fast091Conn) unexpected(cl, me uint16, args []byte) error {
	if err := closeReply(cl, me, args); err != nil {
		if me == amqp091.MethodChannelClose {
			b := c.out.Begin()
			b, _ = amqp091.AppendMethodFrame(b, 1, &amqp091.ChannelCloseOk{})
			c.out.End(b)
		}
		return err
	}
	return fmt.Errorf("unexpected %s on channel 1", amqp091.MethodName(cl, me))
}

// call sends m on channel 1 and waits for want (setup only, before start).
func (c *fast091Conn) call(m, want amqp091.Method) error {
	if err := c.send(1, m); err != nil {
		return err
	}
	return c.expect(1, want)
}

// start runs the writer and the reader loop: handle gets each frame but
// heartbeats, in the reader goroutine, after the connection-level ones
// (close, close-ok, blocked) are dealt with; idle is called when no more
// input is buffered.
func (c *fast091Conn) start(handle func(f amqp091.Frame) error, idle func()) {
	_ = c.nc.SetDeadline(time.Time{})
	go func() { _ = c.out.Run(c.nc); close(c.wdone) }()
	go func() {
		defer close(c.done)
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				c.fail(err)
				return
			}
			switch {
			case f.Type == amqp091.FrameHeartbeat:
			case f.Channel == 0:
				err = c.channel0(f)
			default:
				err = handle(f)
			}
			if err != nil {
				c.fail(err)
				return
			}
			if c.br.Buffered() == 0 && idle != nil {
				idle()
			}
		}
	}()
}

// channel0 handles the connection's own methods once running: a close
// from the broker is answered and ends the run; our close's close-ok ends
// it cleanly; blocked and unblocked are ignored (the publisher waits for
// confirms anyway).
func (c *fast091Conn) channel0(f amqp091.Frame) error {
	if f.Type != amqp091.FrameMethod {
		return fmt.Errorf("frame type %d on channel 0", f.Type)
	}
	cl, me, args, err := amqp091.ParseMethodHeader(f.Payload)
	if err != nil {
		return err
	}
	if cl != amqp091.ClassConnection {
		return fmt.Errorf("unexpected %s on channel 0", amqp091.MethodName(cl, me))
	}
	switch me {
	case amqp091.MethodConnectionClose:
		b := c.out.Begin()
		b, _ = amqp091.AppendMethodFrame(b, 0, &amqp091.ConnectionCloseOk{})
		c.out.End(b)
		return closeReply(cl, me, args)
	case amqp091.MethodConnectionCloseOk:
		return errClosedByUs
	}
	return nil
}

// close sends connection.close, waits (bounded) for its close-ok, and
// closes the socket.
func (c *fast091Conn) close() {
	if c.closing.Swap(true) {
		return
	}
	b := c.out.Begin()
	b, _ = amqp091.AppendMethodFrame(b, 0, &amqp091.ConnectionClose{ReplyCode: amqp091.ReplySuccess, ReplyText: "bye"})
	c.out.End(b)
	finishClose(c.out, c.done, c.wdone, c.nc)
}

// content091 follows the header and body frames after a content-bearing
// method: it knows how many body octets are still to come and gathers
// them when asked to.
type content091 struct {
	active  bool // a header or body frames are expected
	gather  bool
	size    uint64
	pending uint64
	body    []byte
}

// begin is called for basic.deliver and basic.return.
func (ct *content091) begin(gather bool) { ct.active, ct.gather, ct.pending = true, gather, 0 }

// frame takes the header or a body frame; it reports whether the content
// is complete and, when gathering, its body (valid until the next frame:
// it may alias the reader's buffer).
func (ct *content091) frame(f amqp091.Frame) (done bool, body []byte, err error) {
	switch f.Type {
	case amqp091.FrameHeader:
		h, err := amqp091.ParseContentHeader(f.Payload)
		if err != nil {
			return false, nil, err
		}
		ct.size, ct.pending = h.BodySize, h.BodySize
		ct.body = ct.body[:0]
		if ct.pending == 0 {
			ct.active = false
			return true, nil, nil
		}
		return false, nil, nil
	case amqp091.FrameBody:
		n := uint64(len(f.Payload))
		if n > ct.pending {
			return false, nil, fmt.Errorf("body frame of %d octets, %d expected", n, ct.pending)
		}
		ct.pending -= n
		if ct.pending == 0 && n == ct.size { // the whole body in one frame: no copy
			ct.active = false
			return true, f.Payload, nil
		}
		if ct.gather {
			ct.body = append(ct.body, f.Payload...)
		}
		if ct.pending == 0 {
			ct.active = false
			return true, ct.body, nil
		}
		return false, nil, nil
	}
	return false, nil, fmt.Errorf("frame type %d where content was expected", f.Type)
}

// ---- publisher ----

type fast091Sender struct {
	c      *fast091Conn
	o      ConnOptions
	window int
	method []byte // the basic.publish method frame, the same for every message
	props  amqp091.Properties

	mu        sync.Mutex
	cond      *sync.Cond
	nextTag   uint64 // the delivery tag of the next publish (confirm mode counts from 1)
	lowest    uint64 // the lowest tag not confirmed yet
	inflight  int
	ring      []uint64 // seq+1 per tag slot, 0 when confirmed
	sentAt    []int64  // send time (unix ns) per tag slot
	mask      uint64
	confirm   Histogram
	stats     SendStats
	returned  uint64
	content   content091
	ack       amqp091.BasicAck
	nack      amqp091.BasicNack
	returnArg amqp091.BasicReturn
}

func newFast091Sender(ctx context.Context, o ConnOptions, addr string) (*fast091Sender, error) {
	exchange, key, err := target091(addr)
	if err != nil {
		return nil, err
	}
	c, err := dialFast091(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := c.call(&amqp091.ConfirmSelect{}, &amqp091.ConfirmSelectOk{}); err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("confirm.select: %w", err)
	}
	w := max(o.Window, 1)
	n := 1
	for n < 4*w {
		n <<= 1
	}
	s := &fast091Sender{c: c, o: o, window: w, nextTag: 1, lowest: 1,
		ring: make([]uint64, n), sentAt: make([]int64, n), mask: uint64(n - 1)}
	if s.method, err = amqp091.AppendMethodFrame(nil, 1, &amqp091.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: true}); err != nil {
		c.nc.Close()
		return nil, err
	}
	if o.Durable {
		s.props = amqp091.Properties{Flags: amqp091.FlagDeliveryMode, DeliveryMode: 2}
	}
	s.cond = sync.NewCond(&s.mu)
	c.start(s.frame, nil)
	go func() { <-c.done; s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() }()
	return s, nil
}

// frame handles channel 1's frames: confirms, returns (and their content),
// a channel.close.
func (s *fast091Sender) frame(f amqp091.Frame) error {
	if s.content.active {
		_, _, err := s.content.frame(f)
		return err
	}
	cl, me, args, err := methodOf(f)
	if err != nil {
		return err
	}
	switch {
	case cl == amqp091.ClassBasic && me == amqp091.MethodBasicAck:
		if err := s.ack.Decode(args); err != nil {
			return err
		}
		s.settle(s.ack.DeliveryTag, s.ack.Multiple, true)
	case cl == amqp091.ClassBasic && me == amqp091.MethodBasicNack:
		if err := s.nack.Decode(args); err != nil {
			return err
		}
		s.settle(s.nack.DeliveryTag, s.nack.Multiple, false)
	case cl == amqp091.ClassBasic && me == amqp091.MethodBasicReturn:
		if err := s.returnArg.Decode(args); err != nil {
			return err
		}
		s.mu.Lock()
		s.returned++
		s.mu.Unlock()
		s.content.begin(false)
	default:
		return s.c.unexpected(cl, me, args)
	}
	return nil
}

// settle records the broker's basic.ack (ok) or basic.nack for tag, or
// for every unconfirmed tag up to it with multiple.
func (s *fast091Sender) settle(tag uint64, multiple, ok bool) {
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	first := tag
	if multiple {
		first = s.lowest
	}
	for t := first; t <= tag && t < s.nextTag; t++ {
		i := t & s.mask
		if s.ring[i] == 0 {
			continue
		}
		s.ring[i] = 0
		s.inflight--
		if ok {
			s.stats.Accepted++
			if ts := s.sentAt[i]; s.o.recordable(ts) {
				s.confirm.Record(now - ts)
			}
		} else {
			s.stats.Rejected++
		}
	}
	for s.lowest < s.nextTag && s.ring[s.lowest&s.mask] == 0 {
		s.lowest++
	}
	s.cond.Broadcast()
}

// Send publishes body (which carries seq), waiting while Window publishes
// are unconfirmed.
func (s *fast091Sender) Send(seq uint64, body []byte) error {
	s.mu.Lock()
	for s.inflight >= s.window || s.ring[s.nextTag&s.mask] != 0 {
		if err := s.c.Err(); err != nil || s.c.closing.Load() {
			s.mu.Unlock()
			if err == nil {
				err = errClosedByUs
			}
			return err
		}
		s.cond.Wait()
	}
	tag := s.nextTag
	s.nextTag++
	s.inflight++
	s.stats.Sent++
	s.ring[tag&s.mask] = seq + 1
	s.sentAt[tag&s.mask] = s.o.sendTime(body)
	// The frames are appended under the same lock, so that they go out in
	// tag order.
	b := s.c.out.Begin()
	b = append(b, s.method...)
	b, err := amqp091.AppendHeaderFrame(b, 1, uint64(len(body)), &s.props)
	if err == nil {
		b = amqp091.AppendBodyFrames(b, 1, s.c.frameMax, body)
	}
	s.c.out.End(b)
	s.mu.Unlock()
	return err
}

// Wait blocks until every publish is confirmed (or ctx ends).
func (s *fast091Sender) Wait(ctx context.Context) error {
	return waitInflight(ctx, s.cond, &s.inflight, s.c.Err, "publishes still unconfirmed")
}

// Stats counts a returned (unroutable) publish as released, not accepted,
// as the amqp091 engine does.
func (s *fast091Sender) Stats() SendStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Released += s.returned
	st.Accepted -= min(s.returned, st.Accepted)
	return st
}

// Confirms is a copy of the publish-confirm latency histogram.
func (s *fast091Sender) Confirms() *Histogram {
	return lockedCopy(&s.mu, &s.confirm)
}

func (s *fast091Sender) Close() error { s.c.close(); return s.c.Err() }

// ---- consumer ----

type fast091Receiver struct {
	c           *fast091Conn
	onMsg       func(body []byte) bool
	size        int
	prefetch    uint64
	ackMultiple bool

	content   content091
	tag       uint64 // the delivery whose content is being read
	acks      []byte // ack and reject frames not yet queued
	multiTag  uint64 // with ackMultiple: the highest accepted tag not yet acked (0: none)
	settled   uint64 // deliveries whose ack or reject is queued
	unflushed uint64 // deliveries since the last flush
	ack       amqp091.BasicAck
	reject    amqp091.BasicReject
	statsMu   sync.Mutex
	stats     RecvStats
}

func newFast091Receiver(ctx context.Context, o ConnOptions, addr string, size int, onMsg func([]byte) bool) (*fast091Receiver, error) {
	queue, err := source091(addr)
	if err != nil {
		return nil, err
	}
	c, err := dialFast091(ctx, o)
	if err != nil {
		return nil, err
	}
	prefetch := o.Credit
	if prefetch == 0 {
		prefetch = 1000
	}
	prefetch = min(prefetch, 65535) // prefetch-count is a short
	if err := c.call(&amqp091.BasicQos{PrefetchCount: uint16(prefetch)}, &amqp091.BasicQosOk{}); err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("basic.qos: %w", err)
	}
	if err := c.call(&amqp091.BasicConsume{Queue: queue}, &amqp091.BasicConsumeOk{}); err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("basic.consume %s: %w", queue, err)
	}
	r := &fast091Receiver{c: c, onMsg: onMsg, size: size, prefetch: uint64(prefetch), ackMultiple: o.AckMultiple,
		acks: make([]byte, 0, 16<<10)}
	c.start(r.frame, r.flush)
	return r, nil
}

// frame handles channel 1's frames: deliveries (method, header, body), a
// consumer cancel or channel.close from the broker.
func (r *fast091Receiver) frame(f amqp091.Frame) error {
	if r.content.active {
		done, body, err := r.content.frame(f)
		if err != nil || !done {
			return err
		}
		r.delivered(body)
		// Input keeps coming while the broker has prefetch to spare: queue
		// the acks by then, so that it never waits for them.
		if len(r.acks) >= 16<<10 || r.unflushed >= r.prefetch/4+1 {
			r.flush()
		}
		return nil
	}
	cl, me, args, err := methodOf(f)
	if err != nil {
		return err
	}
	switch {
	case cl == amqp091.ClassBasic && me == amqp091.MethodBasicDeliver:
		// consumer-tag shortstr, delivery-tag longlong, ...: read the tag
		// in place rather than decode (and copy) the strings
		if len(args) < 1 || len(args) < 1+int(args[0])+8 {
			return errors.New("basic.deliver: arguments too short")
		}
		r.tag = binary.BigEndian.Uint64(args[1+int(args[0]):])
		r.content.begin(true)
	case cl == amqp091.ClassBasic && me == amqp091.MethodBasicCancel:
		return errors.New("the broker cancelled the consumer (basic.cancel)")
	default:
		return r.c.unexpected(cl, me, args)
	}
	return nil
}

// delivered hands a complete delivery to onMsg and records its ack or
// reject. A delivery beyond the prefetch (more deliveries than acks the
// broker can have seen, plus the prefetch) is counted as beyond credit.
func (r *fast091Receiver) delivered(body []byte) {
	ok := len(body) == r.size
	accept := true
	if ok {
		accept = r.onMsg(body)
	}
	r.unflushed++
	r.statsMu.Lock()
	r.stats.Delivered++
	if r.stats.Delivered > r.settled+r.prefetch {
		r.stats.BeyondCredit++
	}
	r.stats.countOutcome(ok, accept)
	r.statsMu.Unlock()
	switch {
	case accept && r.ackMultiple:
		r.multiTag = r.tag
	case accept:
		r.ack = amqp091.BasicAck{DeliveryTag: r.tag}
		r.acks, _ = amqp091.AppendMethodFrame(r.acks, 1, &r.ack)
	default:
		r.appendMultiAck()
		r.reject = amqp091.BasicReject{DeliveryTag: r.tag}
		r.acks, _ = amqp091.AppendMethodFrame(r.acks, 1, &r.reject)
	}
}

func (r *fast091Receiver) appendMultiAck() {
	if r.multiTag != 0 {
		r.ack = amqp091.BasicAck{DeliveryTag: r.multiTag, Multiple: true}
		r.acks, _ = amqp091.AppendMethodFrame(r.acks, 1, &r.ack)
		r.multiTag = 0
	}
}

// flush queues the collected acks for writing (when no more input is
// buffered, or when many have piled up).
func (r *fast091Receiver) flush() {
	r.appendMultiAck()
	if len(r.acks) == 0 {
		return
	}
	r.unflushed = 0
	b := r.c.out.Begin()
	b = append(b, r.acks...)
	r.c.out.End(b)
	r.acks = r.acks[:0]
	r.statsMu.Lock()
	r.settled = r.stats.Delivered
	r.statsMu.Unlock()
}

func (r *fast091Receiver) Stats() RecvStats {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	return r.stats
}

func (r *fast091Receiver) Close() error { r.c.close(); return r.c.Err() }
