// Package nullbroker is the null broker: just enough AMQP 1.0 to take
// publishes and feed consumers from one in-memory FIFO, with no routing,
// no address lookups and no dead-lettering. It is the floor any AMQP 1.0
// broker pays for this traffic on a machine (epitaph-perf reports epitaph
// as a fraction of it).
//
// It speaks: the protocol header, optional SASL (ANONYMOUS and PLAIN,
// accepting everyone), open, begin, attach in either role (every address is
// the same FIFO), flow, transfer, disposition (every publish is accepted;
// consumer outcomes just drop the message), detach, end and close. Writes
// are coalesced per connection (perf.OutQueue). Multi-frame transfers are
// reassembled. Deliveries never exceed the consumer's credit. Not spoken:
// transactions, drain, resume, redelivery of unsettled messages on
// disconnect (they are dropped), session flow-control windows (it grants a
// huge window).
package nullbroker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

// Server is a running null broker.
type Server struct {
	ln net.Listener
	q  fifo
	wg sync.WaitGroup

	mu       sync.Mutex
	conns    map[*conn]struct{}
	done     bool
	maxFrame uint32
}

// publisherCredit is granted to each publisher link and topped up at half.
const publisherCredit = 10000

// DefaultMaxFrameSize is the max-frame-size the null broker advertises.
const DefaultMaxFrameSize = 1 << 20

// Listen starts a null broker on addr (host:port; port 0 picks one).
func Listen(addr string) (*Server, error) { return ListenWith(addr, DefaultMaxFrameSize) }

// ListenWith is Listen advertising maxFrame as its max-frame-size (at least
// 512), so publishers must split larger messages. Deliveries are sent as
// single frames up to 1 MiB whatever the consumer advertises.
func ListenWith(addr string, maxFrame uint32) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, conns: map[*conn]struct{}{}, maxFrame: max(maxFrame, amqp10.MinMaxFrameSize)}
	s.q.cond = sync.NewCond(&s.q.mu)
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops listening and closes every connection.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	s.done = true
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// Len is the number of messages queued.
func (s *Server) Len() int { s.q.mu.Lock(); defer s.q.mu.Unlock(); return s.q.n }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c := &conn{s: s, nc: nc, fr: newReader(nc, s.maxFrame), out: perf.NewOutQueue(), links: map[linkKey]*link{}}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// ---- the FIFO ----

// fifo is one queue of message payloads (a ring) and the consumers with
// credit, served round-robin.
type fifo struct {
	mu        sync.Mutex
	cond      *sync.Cond
	ring      [][]byte
	head, n   int
	consumers []*link // consumer links (credit may be zero)
	next      int
}

func (q *fifo) push(m []byte) {
	if q.n == len(q.ring) {
		nr := make([][]byte, max(1024, 2*len(q.ring)))
		for i := 0; i < q.n; i++ {
			nr[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = nr, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = m
	q.n++
}

func (q *fifo) pop() []byte {
	m := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return m
}

// feed hands queued messages to consumers with credit; q.mu is held.
// Each delivery is encoded straight into the consumer connection's
// outgoing buffer (lock order: fifo, then connection).
func (q *fifo) feed() {
	for q.n > 0 {
		l := q.pick()
		if l == nil {
			return
		}
		c := l.c
		b := c.out.Begin()
		for q.n > 0 && l.credit > 0 {
			m := q.pop()
			b = c.deliver(b, l, m)
		}
		c.out.End(b)
	}
}

// pick returns the next consumer with credit (round-robin), or nil.
func (q *fifo) pick() *link {
	for i := 0; i < len(q.consumers); i++ {
		l := q.consumers[(q.next+i)%len(q.consumers)]
		if l.credit > 0 {
			q.next = (q.next + i + 1) % len(q.consumers)
			return l
		}
	}
	return nil
}

func (q *fifo) removeConn(c *conn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cs := q.consumers[:0]
	for _, l := range q.consumers {
		if l.c != c {
			cs = append(cs, l)
		}
	}
	for i := len(cs); i < len(q.consumers); i++ {
		q.consumers[i] = nil
	}
	q.consumers = cs
	q.next = 0
}

func (q *fifo) removeLink(l *link) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, x := range q.consumers {
		if x == l {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			q.next = 0
			return
		}
	}
}

// ---- connections ----

type linkKey struct {
	ch     uint16
	handle uint32
}

type link struct {
	c        *conn
	sess     *session
	ch       uint16
	handle   uint32 // our handle (the same number as the peer's)
	consumer bool   // we send
	// consumer state (guarded by fifo.mu)
	credit uint32
	dc     uint32
	// publisher state (reader goroutine only)
	pubCredit uint32
	pubDC     uint32
	more      []byte
	inMore    bool
	moreID    uint32
	moreSet   bool
}

type session struct {
	nextOutgoingID uint32 // guarded by fifo.mu (deliveries) — one FIFO so one lock
	nextIncomingID uint32
	// pending accepted range for publishers (reader goroutine only)
	have        bool
	first, last uint32
}

type conn struct {
	s     *Server
	nc    net.Conn
	fr    *perf.FrameReader
	out   *perf.OutQueue
	links map[linkKey]*link
	sess  map[uint16]*session
	tr    amqp10.Transfer
	disp  amqp10.Disposition
	flow  amqp10.Flow
	dtr   amqp10.Transfer // encoding deliveries (under fifo.mu)
	tag   [8]byte
}

var errClose = errors.New("close")

func (c *conn) serve() {
	defer c.nc.Close()
	wdone := make(chan struct{})
	go func() { _ = c.out.Run(c.nc); close(wdone) }()
	defer func() { c.out.Close(); <-wdone }()
	// Stop feeding this connection's consumers as soon as reading stops,
	// before waiting for the writer: it may be blocked on a peer that is
	// gone, and anything fed meanwhile would be lost.
	defer c.s.q.removeConn(c)
	c.sess = map[uint16]*session{}
	h, err := c.fr.ReadProtoHeader()
	if err != nil {
		return
	}
	if h == amqp10.ProtoHeaderSASL {
		if err := c.sasl(); err != nil {
			return
		}
		if h, err = c.fr.ReadProtoHeader(); err != nil {
			return
		}
	}
	if h != amqp10.ProtoHeaderAMQP {
		c.write(amqp10.ProtoHeaderAMQP[:])
		return
	}
	c.write(amqp10.ProtoHeaderAMQP[:])
	for {
		fh, body, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		if len(body) > 0 {
			if err := c.frame(fh.Channel, body); err != nil {
				if !errors.Is(err, errClose) {
					b := c.out.Begin()
					c.out.End(amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Close{Error: &amqp10.Error{
						Condition: amqp10.ErrCondInternalError, Description: err.Error()}}, nil))
				}
				return
			}
		}
		if c.fr.Buffered() == 0 {
			c.flushAccepts()
		}
	}
}

func (c *conn) write(p []byte) {
	b := c.out.Begin()
	c.out.End(append(b, p...))
}

func (c *conn) send(ch uint16, p amqp10.Performative) {
	b := c.out.Begin()
	c.out.End(amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, ch, p, nil))
}

func (c *conn) sasl() error {
	c.write(amqp10.ProtoHeaderSASL[:])
	b := c.out.Begin()
	c.out.End(amqp10.AppendFrame(b, amqp10.FrameTypeSASL, 0, &amqp10.SASLMechanisms{Mechanisms: []amqp10.Symbol{"ANONYMOUS", "PLAIN"}}, nil))
	_, body, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	var in amqp10.SASLInit
	if _, err := in.Unmarshal(body); err != nil {
		return err
	}
	b = c.out.Begin()
	c.out.End(amqp10.AppendFrame(b, amqp10.FrameTypeSASL, 0, &amqp10.SASLOutcome{Code: amqp10.SASLCodeOK}, nil))
	return nil
}

func (c *conn) frame(ch uint16, body []byte) error {
	code, err := amqp10.PeekDescriptor(body)
	if err != nil {
		return err
	}
	switch code {
	case amqp10.DescTransfer:
		return c.transfer(ch, body)
	case amqp10.DescDisposition:
		return nil // consumer outcomes: the message is gone either way
	case amqp10.DescFlow:
		return c.onFlow(ch, body)
	}
	p, _, err := amqp10.ParsePerformative(body)
	if err != nil {
		return err
	}
	switch p := p.(type) {
	case *amqp10.Open:
		c.send(0, &amqp10.Open{ContainerID: "epitaph-null", MaxFrameSize: c.s.maxFrame, ChannelMax: math.MaxUint16})
	case *amqp10.Begin:
		c.sess[ch] = &session{nextIncomingID: p.NextOutgoingID}
		c.send(ch, &amqp10.Begin{RemoteChannel: ch, HasRemoteChannel: true, IncomingWindow: math.MaxInt32,
			OutgoingWindow: math.MaxInt32, HandleMax: math.MaxUint32})
	case *amqp10.Attach:
		return c.attach(ch, p)
	case *amqp10.Detach:
		if l := c.links[linkKey{ch, p.Handle}]; l != nil {
			delete(c.links, linkKey{ch, p.Handle})
			if l.consumer {
				c.s.q.removeLink(l)
			}
		}
		c.send(ch, &amqp10.Detach{Handle: p.Handle, Closed: p.Closed})
	case *amqp10.End:
		for k, l := range c.links {
			if k.ch == ch {
				delete(c.links, k)
				if l.consumer {
					c.s.q.removeLink(l)
				}
			}
		}
		delete(c.sess, ch)
		c.send(ch, &amqp10.End{})
	case *amqp10.Close:
		// Take the consumers off the FIFO before replying: the peer stops
		// reading at our close, so a message fed to one of its links after
		// that would be lost. Deliveries fed before this point are queued
		// ahead of the close and reach the peer.
		c.s.q.removeConn(c)
		c.send(0, &amqp10.Close{})
		return errClose
	}
	return nil
}

func (c *conn) attach(ch uint16, a *amqp10.Attach) error {
	if c.sess[ch] == nil {
		return fmt.Errorf("attach on channel %d without begin", ch)
	}
	l := &link{c: c, sess: c.sess[ch], ch: ch, handle: a.Handle, consumer: a.Role == amqp10.RoleReceiver}
	c.links[linkKey{ch, a.Handle}] = l
	reply := &amqp10.Attach{Name: a.Name, Handle: a.Handle, Role: !a.Role, Source: a.Source, Target: a.Target,
		SndSettleMode: a.SndSettleMode, HasSndSettleMode: a.HasSndSettleMode,
		RcvSettleMode: amqp10.RcvFirst, HasRcvSettleMode: true}
	if l.consumer {
		reply.HasInitialDeliveryCount = true
		c.send(ch, reply)
		c.s.q.mu.Lock()
		c.s.q.consumers = append(c.s.q.consumers, l)
		c.s.q.mu.Unlock()
		return nil
	}
	l.pubDC = a.InitialDeliveryCount
	c.send(ch, reply)
	c.grant(l)
	return nil
}

// grant gives a publisher link publisherCredit.
func (c *conn) grant(l *link) {
	l.pubCredit = publisherCredit
	s := c.sess[l.ch]
	c.flow = amqp10.Flow{NextIncomingID: s.nextIncomingID, HasNextIncomingID: true, IncomingWindow: math.MaxInt32,
		OutgoingWindow: math.MaxInt32, Handle: l.handle, HasHandle: true, DeliveryCount: l.pubDC, HasDeliveryCount: true,
		LinkCredit: publisherCredit, HasLinkCredit: true}
	b := c.out.Begin()
	b = c.appendAccepts(b, s, l.ch)
	c.out.End(amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, l.ch, &c.flow, nil))
}

func (c *conn) onFlow(ch uint16, body []byte) error {
	var f amqp10.Flow
	if _, err := f.Unmarshal(body); err != nil {
		return err
	}
	if !f.HasHandle {
		return nil
	}
	l := c.links[linkKey{ch, f.Handle}]
	if l == nil || !l.consumer {
		return nil
	}
	q := &c.s.q
	q.mu.Lock()
	dc := f.DeliveryCount
	if !f.HasDeliveryCount {
		dc = 0
	}
	credit := dc + f.LinkCredit - l.dc
	if int32(credit) < 0 {
		credit = 0
	}
	l.credit = credit
	q.feed()
	q.mu.Unlock()
	return nil
}

func (c *conn) transfer(ch uint16, body []byte) error {
	payload, err := c.tr.Unmarshal(body)
	if err != nil {
		return err
	}
	s := c.sess[ch]
	l := c.links[linkKey{ch, c.tr.Handle}]
	if s == nil || l == nil || l.consumer {
		return fmt.Errorf("transfer on unknown link %d/%d", ch, c.tr.Handle)
	}
	s.nextIncomingID++
	if c.tr.More || l.inMore {
		if !l.inMore {
			l.inMore, l.moreID, l.moreSet = true, c.tr.DeliveryID, c.tr.Settled
			l.more = append(l.more[:0], payload...)
			return nil
		}
		l.more = append(l.more, payload...)
		if c.tr.More {
			return nil
		}
		l.inMore = false
		payload = l.more
		c.tr.DeliveryID, c.tr.Settled = l.moreID, l.moreSet
	}
	if c.tr.Aborted {
		return nil
	}
	m := make([]byte, len(payload))
	copy(m, payload)
	l.pubDC++
	l.pubCredit--
	q := &c.s.q
	q.mu.Lock()
	q.push(m)
	q.feed()
	q.mu.Unlock()
	if !c.tr.Settled {
		id := c.tr.DeliveryID
		if s.have && id == s.last+1 {
			s.last = id
		} else {
			if s.have {
				b := c.out.Begin()
				c.out.End(c.appendAccepts(b, s, ch))
			}
			s.have, s.first, s.last = true, id, id
		}
	}
	if l.pubCredit <= publisherCredit/2 {
		c.grant(l)
	}
	return nil
}

// appendAccepts appends the pending accepted range of session s.
func (c *conn) appendAccepts(b []byte, s *session, ch uint16) []byte {
	if !s.have {
		return b
	}
	c.disp = amqp10.Disposition{Role: amqp10.RoleReceiver, First: s.first, Last: s.last, HasLast: s.last != s.first, Settled: true}
	c.disp.State.Kind = amqp10.StateAccepted
	s.have = false
	return amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, ch, &c.disp, nil)
}

func (c *conn) flushAccepts() {
	for ch, s := range c.sess {
		if s.have {
			b := c.out.Begin()
			c.out.End(c.appendAccepts(b, s, ch))
		}
	}
}

// deliver appends one delivery of m on consumer link l (fifo.mu held, and
// the connection's OutQueue locked by the caller).
func (c *conn) deliver(b []byte, l *link, m []byte) []byte {
	s := l.sess // nextOutgoingID is guarded by fifo.mu
	id := s.nextOutgoingID
	s.nextOutgoingID++
	l.credit--
	l.dc++
	binary.BigEndian.PutUint64(c.tag[:], uint64(id))
	c.dtr = amqp10.Transfer{Handle: l.handle, DeliveryID: id, HasDeliveryID: true, DeliveryTag: c.tag[:],
		MessageFormat: 0, HasMessageFormat: true, HasSettled: true}
	return perf.AppendTransferRaw(b, l.ch, &c.dtr, m)
}

// Serve is a helper for commands: it listens and reports the address on w.
func Serve(addr string, maxFrame uint32, w io.Writer) (*Server, error) {
	s, err := ListenWith(addr, maxFrame)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "amqp listening on %s\n", s.Addr())
	return s, nil
}

func newReader(nc net.Conn, maxFrame uint32) *perf.FrameReader {
	fr := perf.NewFrameReader(nc)
	fr.Max = maxFrame
	return fr
}
