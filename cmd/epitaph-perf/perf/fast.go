package perf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// ConnOptions are the connection settings shared by both engines.
type ConnOptions struct {
	URL        string // amqp://[user:pass@]host:port
	SASL       string // auto (PLAIN with user info, else ANONYMOUS), none, anonymous, plain
	Credit     uint32 // receiver credit
	CreditMode string // half (refill when half is used) or exhausted (grant again only at 0)
	Window     int    // sender: unsettled transfers in flight
	Durable    bool   // sender: a header section with durable=true on every message
	// AckMultiple (fast091 consumers): acknowledge with basic.ack
	// multiple=true, once per batch, instead of one basic.ack per delivery.
	AckMultiple bool

	// Publish-confirm latency (send -> accepted disposition): measured from
	// the intended send time carried in body[8:16] when FromIntended (fixed
	// rate runs, corrected for coordinated omission), else from when the
	// transfer is queued for writing; only sends at or after *RecordAfter
	// (unix ns; nil: all) are recorded.
	FromIntended bool
	RecordAfter  *atomic.Int64
}

// recordable reports whether a confirm for a send at ts (unix ns) counts.
func (o *ConnOptions) recordable(ts int64) bool {
	return o.RecordAfter == nil || ts >= o.RecordAfter.Load()
}

// sendTime is the time a confirm latency is measured from.
func (o *ConnOptions) sendTime(body []byte) int64 {
	if o.FromIntended && len(body) >= 16 {
		return int64(binary.BigEndian.Uint64(body[8:]))
	}
	return time.Now().UnixNano()
}

// durableHeader is the encoded header section {durable: true}.
var durableHeader = amqp10.AppendHeader(nil, &amqp10.Header{Durable: true, Priority: 4})

const bigWindow = math.MaxInt32

var connSeq atomic.Uint64

// fastConn is one connection of the fast engine with one session (channel
// 0) and one link (handle 0).
type fastConn struct {
	nc  net.Conn
	fr  *FrameReader
	out *OutQueue

	// session counters, touched by the reader goroutine (incoming) and by
	// the sender under sendMu (outgoing)
	nextIncomingID uint32
	remoteIdle     uint32
	remoteMaxFrame uint32

	done  chan struct{}
	wdone chan struct{}
	readerState
}

// readerState is what a pipelined connection's reader ended with, and
// whether we are closing it (shared by the fast and fast091 engines).
type readerState struct {
	errMu   sync.Mutex
	err     error
	closing atomic.Bool
}

func dialFast(ctx context.Context, o ConnOptions) (*fastConn, error) {
	u, nc, err := dialURL(ctx, o.URL)
	if err != nil {
		return nil, err
	}
	c := &fastConn{nc: nc, fr: NewFrameReader(nc), out: NewOutQueue(), done: make(chan struct{}), wdone: make(chan struct{})}
	if err := c.handshake(u, o.SASL, 0); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// dialURL parses rawURL and connects to its host, with ctx's deadline (if
// any) on the connection for the handshake that follows.
func dialURL(ctx context.Context, rawURL string) (*url.URL, net.Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("url: %w", err)
	}
	nc, err := dialTCP(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	return u, nc, nil
}

// dialTCP connects to the URL's host (port 5672 when none is given).
func dialTCP(ctx context.Context, u *url.URL) (net.Conn, error) {
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5672")
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return nc, nil
}

// handshake runs SASL (sasl as in ConnOptions.SASL), the AMQP header
// exchange, open (advertising idleTimeOut ms; 0 is none) and begin on
// channel 0, and reads the broker's open and begin. The caller closes nc
// on error.
func (c *fastConn) handshake(u *url.URL, sasl string, idleTimeOut uint32) error {
	mech := sasl
	if mech == "" || mech == "auto" {
		mech = "anonymous"
		if u.User != nil && u.User.Username() != "" {
			mech = "plain"
		}
	}
	if err := c.sasl(mech, u); err != nil {
		return err
	}
	if _, err := c.nc.Write(amqp10.ProtoHeaderAMQP[:]); err != nil {
		return err
	}
	if h, err := c.fr.ReadProtoHeader(); err != nil || h != amqp10.ProtoHeaderAMQP {
		return fmt.Errorf("amqp header: got %q, %v", h[:], err)
	}
	var b []byte
	b = amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Open{
		ContainerID: fmt.Sprintf("epitaph-perf-%d", connSeq.Add(1)), Hostname: u.Hostname(),
		MaxFrameSize: 1 << 20, ChannelMax: math.MaxUint16, IdleTimeOut: idleTimeOut,
	}, nil)
	b = amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Begin{
		NextOutgoingID: 0, IncomingWindow: bigWindow, OutgoingWindow: bigWindow, HandleMax: math.MaxUint32,
	}, nil)
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	// read open and begin
	for got := 0; got < 2; {
		_, body, err := c.fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("open/begin: %w", err)
		}
		if len(body) == 0 {
			continue
		}
		p, _, err := amqp10.ParsePerformative(body)
		if err != nil {
			return err
		}
		switch p := p.(type) {
		case *amqp10.Open:
			c.remoteIdle = p.IdleTimeOut
			c.remoteMaxFrame = p.MaxFrameSize
			got++
		case *amqp10.Begin:
			c.nextIncomingID = p.NextOutgoingID
			got++
		case *amqp10.Close:
			return fmt.Errorf("%w: %v", ErrBrokerClosed, p.Error)
		case *amqp10.End:
			return fmt.Errorf("broker ended the session: %v", p.Error)
		}
	}
	return nil
}

func (c *fastConn) sasl(mech string, u *url.URL) error {
	if mech == "none" {
		return nil
	}
	if _, err := c.nc.Write(amqp10.ProtoHeaderSASL[:]); err != nil {
		return err
	}
	if h, err := c.fr.ReadProtoHeader(); err != nil || h != amqp10.ProtoHeaderSASL {
		return fmt.Errorf("sasl header: got %q, %v", h[:], err)
	}
	_, body, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	var ms amqp10.SASLMechanisms
	if _, err := ms.Unmarshal(body); err != nil {
		return fmt.Errorf("sasl-mechanisms: %w", err)
	}
	init := &amqp10.SASLInit{Hostname: u.Hostname()}
	switch mech {
	case "anonymous":
		init.Mechanism, init.InitialResponse = "ANONYMOUS", []byte("epitaph-perf")
	case "plain":
		pass, _ := u.User.Password()
		init.Mechanism = "PLAIN"
		init.InitialResponse = []byte("\x00" + u.User.Username() + "\x00" + pass)
	default:
		return fmt.Errorf("unknown -sasl %q", mech)
	}
	if _, err := c.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeSASL, 0, init, nil)); err != nil {
		return err
	}
	_, body, err = c.fr.ReadFrame()
	if err != nil {
		return err
	}
	var out amqp10.SASLOutcome
	if _, err := out.Unmarshal(body); err != nil {
		return fmt.Errorf("sasl-outcome: %w", err)
	}
	if out.Code != amqp10.SASLCodeOK {
		return fmt.Errorf("sasl %s refused: code %d", init.Mechanism, out.Code)
	}
	return nil
}

// attach sends an attach for handle 0 and waits for the reply.
func (c *fastConn) attach(a *amqp10.Attach) (*amqp10.Attach, error) {
	if _, err := c.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, a, nil)); err != nil {
		return nil, err
	}
	for {
		_, body, err := c.fr.ReadFrame()
		if err != nil {
			return nil, fmt.Errorf("attach: %w", err)
		}
		if len(body) == 0 {
			continue
		}
		p, _, err := amqp10.ParsePerformative(body)
		if err != nil {
			return nil, err
		}
		switch p := p.(type) {
		case *amqp10.Attach:
			return p, nil
		case *amqp10.Detach:
			return nil, fmt.Errorf("attach refused: %v", p.Error)
		case *amqp10.Close:
			return nil, fmt.Errorf("broker closed the connection: %v", p.Error)
		case *amqp10.End:
			return nil, fmt.Errorf("broker ended the session: %v", p.Error)
		}
	}
}

// start runs the writer, the optional heartbeat and the reader loop
// (handle is called for each non-empty frame body in the reader goroutine;
// idle is called when no more input is buffered).
func (c *fastConn) start(handle func(code uint64, body []byte) error, idle func()) {
	_ = c.nc.SetDeadline(time.Time{})
	go func() { _ = c.out.Run(c.nc); close(c.wdone) }()
	if c.remoteIdle > 0 {
		go func() {
			t := time.NewTicker(time.Duration(c.remoteIdle) * time.Millisecond / 2)
			defer t.Stop()
			for {
				select {
				case <-c.done:
					return
				case <-t.C:
					b := c.out.Begin()
					c.out.End(amqp10.AppendHeartbeat(b))
				}
			}
		}()
	}
	go func() {
		defer close(c.done)
		for {
			_, body, err := c.fr.ReadFrame()
			if err != nil {
				c.fail(err)
				return
			}
			if len(body) > 0 {
				code, err := amqp10.PeekDescriptor(body)
				if err == nil {
					err = handle(code, body)
				}
				if err != nil {
					c.fail(err)
					return
				}
			}
			if c.fr.Buffered() == 0 && idle != nil {
				idle()
			}
		}
	}()
}

var errClosedByUs = errors.New("closed")

// ErrBrokerClosed is wrapped by the error of a connection the broker closed
// with close{error} during the handshake (e.g. its connection limit).
var ErrBrokerClosed = errors.New("broker closed the connection")

func (c *readerState) fail(err error) {
	c.errMu.Lock()
	if c.err == nil {
		if c.closing.Load() {
			err = errClosedByUs
		}
		c.err = err
	}
	c.errMu.Unlock()
}

// Err is the error that stopped the reader (nil while running, and after
// Close).
func (c *readerState) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == errClosedByUs {
		return nil
	}
	return c.err
}

// commonFrame handles frames that end the connection.
func commonFrame(code uint64, body []byte) error {
	switch code {
	case amqp10.DescDetach:
		var d amqp10.Detach
		_, _ = d.Unmarshal(body)
		return fmt.Errorf("broker detached the link: %v", d.Error)
	case amqp10.DescEnd:
		var e amqp10.End
		_, _ = e.Unmarshal(body)
		return fmt.Errorf("broker ended the session: %v", e.Error)
	case amqp10.DescClose:
		var e amqp10.Close
		_, _ = e.Unmarshal(body)
		if e.Error == nil {
			return errClosedByUs
		}
		return fmt.Errorf("broker closed the connection: %v", e.Error)
	}
	return nil
}

// finishClose ends a connection whose close frame is queued on out: it
// waits (bounded) for the reader to see the broker's answer (done), lets
// the writer flush (wdone), then closes the socket and waits for the
// reader.
func finishClose(out *OutQueue, done, wdone <-chan struct{}, nc net.Conn) {
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	out.Close()
	select {
	case <-wdone:
	case <-time.After(time.Second):
	}
	nc.Close()
	<-done
}

func (c *fastConn) close() {
	if c.closing.Swap(true) {
		return
	}
	b := c.out.Begin()
	c.out.End(amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Close{}, nil))
	finishClose(c.out, c.done, c.wdone, c.nc)
}

// ---- sender ----

type fastSender struct {
	c      *fastConn
	o      ConnOptions
	window int
	prefix []byte // sections before the data section (the durable header)

	mu       sync.Mutex
	cond     *sync.Cond
	credit   uint32 // link credit left
	dc       uint32 // our delivery-count
	nextID   uint32
	inflight int
	ring     []uint64 // seq+1 per delivery id slot, 0 when free
	sentAt   []int64  // send time (unix ns) per delivery id slot
	confirm  Histogram
	mask     uint32
	stats    SendStats
	tag      [8]byte
	tr       amqp10.Transfer
	payload  []byte
	onSettle func(seq uint64, accepted bool)
}

// SendStats counts publisher outcomes.
type SendStats struct {
	Sent, Accepted, Rejected, Released, Other uint64
}

func newFastSender(ctx context.Context, o ConnOptions, addr string) (*fastSender, error) {
	c, err := dialFast(ctx, o)
	if err != nil {
		return nil, err
	}
	if _, err := c.attach(&amqp10.Attach{
		Name: fmt.Sprintf("perf-sender-%d", connSeq.Add(1)), Handle: 0, Role: amqp10.RoleSender,
		SndSettleMode: amqp10.SndUnsettled, HasSndSettleMode: true,
		RcvSettleMode: amqp10.RcvFirst, HasRcvSettleMode: true,
		Source:               &amqp10.Source{Address: "perf", HasAddress: true},
		Target:               &amqp10.Target{Address: addr, HasAddress: true},
		InitialDeliveryCount: 0, HasInitialDeliveryCount: true,
	}); err != nil {
		c.nc.Close()
		return nil, err
	}
	w := o.Window
	if w < 1 {
		w = 1
	}
	n := 1
	for n < 4*w {
		n <<= 1
	}
	s := &fastSender{c: c, o: o, window: w, ring: make([]uint64, n), sentAt: make([]int64, n), mask: uint32(n - 1)}
	if o.Durable {
		s.prefix = durableHeader
	}
	s.cond = sync.NewCond(&s.mu)
	c.start(s.frame, nil)
	go func() { <-c.done; s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() }()
	return s, nil
}

func (s *fastSender) frame(code uint64, body []byte) error {
	switch code {
	case amqp10.DescFlow:
		var f amqp10.Flow
		if _, err := f.Unmarshal(body); err != nil {
			return err
		}
		if !f.HasHandle || !f.HasLinkCredit {
			return nil
		}
		s.mu.Lock()
		s.credit = f.DeliveryCount + f.LinkCredit - s.dc
		s.cond.Broadcast()
		s.mu.Unlock()
	case amqp10.DescDisposition:
		var d amqp10.Disposition
		if _, err := d.Unmarshal(body); err != nil {
			return err
		}
		if d.Role != amqp10.RoleReceiver {
			return nil
		}
		last := d.First
		if d.HasLast {
			last = d.Last
		}
		now := time.Now().UnixNano()
		s.mu.Lock()
		for id := d.First; ; id++ {
			i := id & s.mask
			if seq1 := s.ring[i]; seq1 != 0 && id-s.nextID > math.MaxUint32/2 { // id < nextID
				s.ring[i] = 0
				s.inflight--
				ok := false
				switch d.State.Kind {
				case amqp10.StateAccepted:
					s.stats.Accepted++
					ok = true
					if ts := s.sentAt[i]; s.o.recordable(ts) {
						s.confirm.Record(now - ts)
					}
				case amqp10.StateRejected:
					s.stats.Rejected++
				case amqp10.StateReleased, amqp10.StateModified:
					s.stats.Released++
				default:
					s.stats.Other++
				}
				if s.onSettle != nil {
					s.onSettle(seq1-1, ok)
				}
			}
			if id == last {
				break
			}
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	default:
		return commonFrame(code, body)
	}
	return nil
}

// Send publishes body (which carries seq) as an unsettled transfer, waiting
// while the window is full or there is no link credit.
func (s *fastSender) Send(seq uint64, body []byte) error {
	s.mu.Lock()
	for s.inflight >= s.window || s.credit == 0 || s.ring[s.nextID&s.mask] != 0 {
		if err := s.c.Err(); err != nil || s.c.closing.Load() {
			s.mu.Unlock()
			if err == nil {
				err = errClosedByUs
			}
			return err
		}
		s.cond.Wait()
	}
	id := s.nextID
	s.nextID++
	s.credit--
	s.dc++
	s.inflight++
	s.stats.Sent++
	s.ring[id&s.mask] = seq + 1
	s.sentAt[id&s.mask] = s.o.sendTime(body)
	s.mu.Unlock()
	binary.BigEndian.PutUint64(s.tag[:], uint64(id))
	s.tr = amqp10.Transfer{Handle: 0, DeliveryID: id, HasDeliveryID: true, DeliveryTag: s.tag[:],
		HasMessageFormat: true, HasSettled: true}
	b := s.c.out.Begin()
	if mf := s.c.remoteMaxFrame; mf >= amqp10.MinMaxFrameSize && len(body)+256 > int(mf) {
		b = s.appendSplit(b, body, int(mf))
	} else {
		b = AppendTransferSections(b, 0, &s.tr, s.prefix, body)
	}
	s.c.out.End(b)
	return nil
}

// appendSplit sends a message larger than the peer's max-frame-size as a
// multi-frame transfer (more=true on all but the last frame).
func (s *fastSender) appendSplit(b []byte, body []byte, maxFrame int) []byte {
	s.payload = amqp10.AppendData(append(s.payload[:0], s.prefix...), body)
	p := s.payload
	first := true
	for len(p) > 0 {
		n := min(len(p), maxFrame-128) // room for the frame header and the transfer performative
		t := amqp10.Transfer{Handle: 0, More: n < len(p)}
		if first {
			t = s.tr
			t.More = n < len(p)
			first = false
		}
		b = amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &t, p[:n])
		p = p[n:]
	}
	return b
}

// Wait blocks until every transfer is settled (or ctx ends).
func (s *fastSender) Wait(ctx context.Context) error {
	return waitInflight(ctx, s.cond, &s.inflight, s.c.Err, "transfers still unsettled")
}

func (s *fastSender) Stats() SendStats { s.mu.Lock(); defer s.mu.Unlock(); return s.stats }

// Confirms is a copy of the publish-confirm latency histogram.
func (s *fastSender) Confirms() *Histogram {
	return lockedCopy(&s.mu, &s.confirm)
}
func (s *fastSender) Close() error { s.c.close(); return s.c.Err() }

// ---- receiver ----

type fastReceiver struct {
	c         *fastConn
	credit    uint32
	exhausted bool
	onMsg     func(body []byte) bool
	size      int

	ct       CreditTracker
	more     []byte
	moreID   uint32
	inMore   bool
	have     bool
	first    uint32
	last     uint32
	accept   bool
	tr       amqp10.Transfer
	disp     amqp10.Disposition
	flow     amqp10.Flow
	stats    RecvStats
	statsMu  sync.Mutex
	received atomic.Uint64
}

// RecvStats counts what a receiver saw.
type RecvStats struct {
	Delivered, Accepted, Rejected, BeyondCredit, Undecodable uint64
}

// countOutcome counts a delivery's body as undecodable (not decoded) and
// its settlement as accepted or rejected.
func (s *RecvStats) countOutcome(decoded, accepted bool) {
	if !decoded {
		s.Undecodable++
	}
	if accepted {
		s.Accepted++
	} else {
		s.Rejected++
	}
}

func newFastReceiver(ctx context.Context, o ConnOptions, addr string, size int, onMsg func([]byte) bool) (*fastReceiver, error) {
	c, err := dialFast(ctx, o)
	if err != nil {
		return nil, err
	}
	if _, err := c.attach(&amqp10.Attach{
		Name: fmt.Sprintf("perf-receiver-%d", connSeq.Add(1)), Handle: 0, Role: amqp10.RoleReceiver,
		SndSettleMode: amqp10.SndUnsettled, HasSndSettleMode: true,
		RcvSettleMode: amqp10.RcvFirst, HasRcvSettleMode: true,
		Source: &amqp10.Source{Address: addr, HasAddress: true},
		Target: &amqp10.Target{Address: "perf", HasAddress: true},
	}); err != nil {
		c.nc.Close()
		return nil, err
	}
	cr := o.Credit
	if cr == 0 {
		cr = 1000
	}
	r := &fastReceiver{c: c, credit: cr, exhausted: o.CreditMode == "exhausted", onMsg: onMsg, size: size}
	b := c.out.Begin()
	c.out.End(r.appendFlow(b))
	c.start(r.frame, r.idle)
	return r, nil
}

func (r *fastReceiver) appendFlow(b []byte) []byte {
	r.ct.Grant(r.credit)
	r.flow = amqp10.Flow{NextIncomingID: r.c.nextIncomingID, HasNextIncomingID: true, IncomingWindow: bigWindow,
		NextOutgoingID: 0, OutgoingWindow: bigWindow, Handle: 0, HasHandle: true,
		DeliveryCount: uint32(r.ct.Received), HasDeliveryCount: true, LinkCredit: r.credit, HasLinkCredit: true}
	return amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &r.flow, nil)
}

func (r *fastReceiver) appendDisposition(b []byte) []byte {
	if !r.have {
		return b
	}
	r.disp = amqp10.Disposition{Role: amqp10.RoleReceiver, First: r.first, Last: r.last, HasLast: r.last != r.first, Settled: true}
	if r.accept {
		r.disp.State.Kind = amqp10.StateAccepted
	} else {
		r.disp.State.Kind = amqp10.StateRejected
	}
	r.have = false
	return amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &r.disp, nil)
}

// idle flushes pending dispositions when no more input is buffered.
func (r *fastReceiver) idle() {
	if r.have {
		b := r.c.out.Begin()
		r.c.out.End(r.appendDisposition(b))
	}
}

func (r *fastReceiver) frame(code uint64, body []byte) error {
	if code != amqp10.DescTransfer {
		if code == amqp10.DescFlow || code == amqp10.DescDisposition {
			return nil
		}
		return commonFrame(code, body)
	}
	payload, err := r.tr.Unmarshal(body)
	if err != nil {
		return err
	}
	r.c.nextIncomingID++
	if r.tr.More || r.inMore {
		if !r.inMore {
			r.inMore, r.moreID = true, r.tr.DeliveryID
			r.more = append(r.more[:0], payload...)
			return nil
		}
		r.more = append(r.more, payload...)
		if r.tr.More {
			return nil
		}
		r.inMore = false
		payload = r.more
		r.tr.DeliveryID = r.moreID
	}
	r.statsMu.Lock()
	r.stats.Delivered++
	if !r.ct.Deliver() {
		r.stats.BeyondCredit++
	}
	r.statsMu.Unlock()
	msg, ok := DataBody(payload, r.size)
	if !ok {
		if m, err := amqp10.ParseMessage(payload); err == nil {
			if sec, err := m.Body(); err == nil {
				msg, ok = DataBody(sec, r.size)
			}
		}
	}
	accept := true
	if ok {
		accept = r.onMsg(msg)
	}
	r.statsMu.Lock()
	r.stats.countOutcome(ok, accept)
	r.statsMu.Unlock()
	r.received.Add(1)
	var b []byte
	locked := false
	if !r.tr.Settled {
		id := r.tr.DeliveryID
		if r.have && r.accept == accept && id == r.last+1 {
			r.last = id
		} else {
			if r.have {
				b = r.c.out.Begin()
				locked = true
				b = r.appendDisposition(b)
			}
			r.have, r.first, r.last, r.accept = true, id, id, accept
		}
	}
	rem := r.ct.Remaining()
	if (r.exhausted && rem == 0) || (!r.exhausted && rem <= uint64(r.credit/2)) {
		if !locked {
			b = r.c.out.Begin()
			locked = true
		}
		b = r.appendDisposition(b)
		b = r.appendFlow(b)
	}
	if locked {
		r.c.out.End(b)
	}
	return nil
}

func (r *fastReceiver) Stats() RecvStats { r.statsMu.Lock(); defer r.statsMu.Unlock(); return r.stats }
func (r *fastReceiver) Close() error     { r.c.close(); return r.c.Err() }
