package link

import (
	"bufio"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
)

// Output bounds. Credit lets a queue hand a link many deliveries at once,
// but credit is a permission, not an order to buffer: the deliveries wait in
// the mailbox as queue messages (no extra bytes) and are encoded only as the
// socket drains. The loop stops encoding deliveries while the output handed
// to the writer and not yet written reaches outHighWater, and the writer wakes
// it again when that falls to outLowWater. The kernel's send buffer (on Linux
// auto-tuned up to a few MiB) already keeps the socket busy while the loop
// wakes, so the user-space queue need only cover the wake-up: 256 KiB is about
// 250 µs of output at 1 GB/s, and draining 192 KiB between wake-ups spreads
// each one over hundreds of small deliveries or three 64 KiB ones. A stalled
// consumer then holds at most outHighWater plus one delivery (max-message-size
// with its frame headers) of encoded output. Replies to input (dispositions,
// flows, management responses) are not held back, so input keeps settling
// deliveries while deliveries wait; should output still reach outHardCap,
// the loop stops taking input as well, and the reader stops reading
// (back-pressure on the peer through TCP).
const (
	outHighWater = 256 << 10
	outLowWater  = 64 << 10
	outHardCap   = 1 << 20
)

// writeChunk is the most the writer passes to one write call, so that what
// waits is accounted (and the loop woken) as the socket takes it, and each
// call's deadline is measured from the last progress.
const writeChunk = 128 << 10

// inBatch and inBatchBytes bound what the reader hands the loop at once
// (a batch ends at the frame that reaches either), and inQueue is how many
// batches may wait for the loop before the reader stops reading
// (back-pressure on the peer through TCP): at most about 4 × (64 KiB + one
// frame) of a connection's input waits for its loop.
const (
	inBatch      = 16
	inBatchBytes = 64 << 10
	inQueue      = 4
)

// maxBurst is how many frames or mail batches the loop handles before it
// flushes its output even though more input is waiting.
const maxBurst = 64

// closeGrace is how long we wait for the peer's close after sending ours.
const closeGrace = 2 * time.Second

// readBufSize is a connection's read buffer. readFrame needs only 8
// buffered bytes whatever the frame size (larger frames are read straight
// into their own slice), so the size only sets how many small frames one
// read system call can bring in; every connection, idle or not, holds one,
// so it is kept small (16 KiB vs 64 KiB: BENCHMARKS.md, "Notes").
const readBufSize = 16 << 10

// inFrame is a decoded frame handed from the reader to the loop.
type inFrame struct {
	channel uint16
	perf    amqp10.Performative // nil for a heartbeat, or when hot is set
	// hot is the descriptor of a transfer, flow or disposition, which the
	// reader leaves undecoded in payload: the loop decodes it into a value
	// of its own (one per type, reused), so the per-message frames
	// allocate no performative.
	hot     uint64
	payload []byte
	err     error
}

// conn is one AMQP connection, served by four kinds of goroutine:
//
//   - the loop: the goroutine that runs serve (handshake, then loop, then
//     cleanup) is the single owner of every field marked "Owned by the
//     loop" below, of all sessions and links and of wbuf: no lock guards
//     them, and nothing else may read or write them;
//   - the reader (readLoop) hands decoded frames to the loop over inc, and
//     gets emptied batches back over free;
//   - queues (Subscription callbacks: senderLink.Deliver, Drained, store
//     confirmations) post to mbox under its lock and never touch loop state;
//   - the writer (writeLoop) takes the loop's output from out; outbuf
//     says how the two share the socket's write side.
//
// The loop and the writer hand the socket over with outbuf.busy. Test
// builds check both rules at run time (ownerChecks, owner.go).
type conn struct {
	srv      *Server
	nc       net.Conn
	raw      syscall.RawConn // nc's socket, for the loop's inline writes; nil if nc is no socket
	br       *bufio.Reader
	id       uint64
	log      *slog.Logger
	loopback bool
	// overLimit: accepted beyond Options.MaxConnections; the handshake
	// answers open with open and close(resource-limit-exceeded).
	overLimit bool

	// certs is set on connections accepted by ServeTLS; peerCert is the
	// client's certificate once the TLS handshake has verified it.
	certs    *TLSCerts
	peerCert *x509.Certificate

	// Set by handshake, then read-only.
	user           string
	authMechanism  string // the SASL mechanism, "none" without SASL
	vhost          *router.VHost
	containerID    string
	peerMaxFrame   uint32
	peerChannelMax uint16
	heartbeat      time.Duration

	// token is the OAuth 2 token the user authenticated with (nil for a
	// stored user): its scopes are the connection's permissions. Set by
	// handshake, then owned by the loop (a refresh replaces it), as is
	// credentialTimer, which closes the connection at the token's expiry.
	token           *auth.Token
	credentialTimer *time.Timer

	// Owned by the loop.
	sessions   map[uint16]*session // by the peer's channel
	localChans map[uint16]*session // by our channel
	closeSent  bool
	closeRecv  bool
	blocked    bool // a resource alarm: sessions' incoming windows are 0
	links      int  // links attached, over all sessions (MaxLinksPerConnection)

	// stopQueueWatch ends the vhost's queue-deletion notices to this
	// connection (watchQueueDeletions); nil until a link publishes to a queue.
	stopQueueWatch func()

	// unfinished is the bytes of incomplete multi-frame messages held by
	// the connection's links (MaxUnfinishedBytes).
	unfinished int64
	tr         amqp10.Transfer
	tag        [8]byte
	fl         amqp10.Flow
	disp       amqp10.Disposition
	dispErr    amqp10.Error // the error of disp, converted from a router outcome
	msgBuf     []byte
	// The hot performatives received, decoded in place (decodeHot).
	inTr       amqp10.Transfer
	inFl       amqp10.Flow
	inDisp     amqp10.Disposition
	annBuf     amqp10.Map      // a delivery's message annotations, rebuilt per delivery
	settleIDs  []uint32        // one disposition's unsettled delivery-ids
	routeBuf   []*router.Queue // the last publish's queues, storage reused
	settleTags []uint64        // one disposition's run of tags of one link
	settleErrs []error         // and their outcomes
	boxes      router.BoxCache // the last x-exchange and x-routing-key boxed
	// mail is what was taken from the mailbox; mail[mailNext:] waits for
	// the output to drain (outHighWater).
	mail     []mailItem
	mailNext int
	// queued is what waited for the writer at the last flushOut or wake-up:
	// it only shrinks in between, so it is a safe upper bound.
	queued int
	// heldBack: deliveries or responses wait for the output to drain.
	heldBack bool
	// Frames written since the last flushOut, and a run of plain accepted
	// publish outcomes not yet encoded (pendDisp, on channel pendCh).
	wbuf     []byte
	pendDisp amqp10.Disposition
	pendCh   uint16
	hasPend  bool

	inc  chan []inFrame // reader -> loop, in batches; closed when the reader exits
	free chan []inFrame // loop -> reader: emptied batches for reuse
	done chan struct{}  // closed when the loop exits
	mbox mailbox
	out  outbuf

	forceOnce sync.Once
	force     chan struct{} // closed to ask the loop to close the connection (forcedError)
	// forceErr, when set before force is closed, is the close error to
	// send instead of the shutdown's (Server.CloseConnection).
	forceErr atomic.Pointer[amqp10.Error]
	// is091: the connection was handed to the AMQP 0-9-1 front end (it has
	// no loop to ask for its sessions).
	is091 atomic.Bool
	// channelLister lists the open channels of a 0-9-1 connection (its
	// front end sets it).
	channelLister atomic.Pointer[func() []AMQP091Channel]
	// stats is what other goroutines may read (Server.Connections).
	stats connStats
	// infoReq takes requests for the sessions' state (Server.Sessions),
	// which the loop answers from its own state.
	infoReq chan chan []SessionInfo
}

func newConn(s *Server, nc net.Conn, id uint64, overLimit bool) *conn {
	bufSize := readBufSize
	if overLimit {
		// It only reads the handshake and the peer's close: readFrame
		// needs no more than 8 buffered bytes whatever the frame size.
		bufSize = 4 << 10
	}
	var raw syscall.RawConn
	if sc, ok := nc.(syscall.Conn); ok {
		raw, _ = sc.SyscallConn()
	}
	c := &conn{
		srv:        s,
		nc:         nc,
		raw:        raw,
		id:         id,
		log:        s.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		loopback:   isLoopback(nc.RemoteAddr()),
		overLimit:  overLimit,
		sessions:   make(map[uint16]*session),
		localChans: make(map[uint16]*session),
		inc:        make(chan []inFrame, inQueue),
		free:       make(chan []inFrame, inQueue+2), // every batch there can be: queued, being read, being handled
		done:       make(chan struct{}),
		mbox:       mailbox{wake: make(chan struct{}, 1)},
		out:        outbuf{wake: make(chan struct{}, 1), low: make(chan struct{}, 1)},
		force:      make(chan struct{}),
		infoReq:    make(chan chan []SessionInfo),
	}
	c.br = bufio.NewReaderSize(countingReader{r: nc, st: &c.stats}, bufSize)
	return c
}

func (c *conn) forceClose() { c.forceOnce.Do(func() { close(c.force) }) }

// serve runs the connection to its end.
func (c *conn) serve() {
	if ownerChecks != nil {
		ownerChecks.claimLoop(c)
		defer ownerChecks.endLoop(c)
	}
	defer c.nc.Close()
	if err := c.tlsHandshake(); err != nil {
		c.log.Info("TLS handshake failed", "err", err)
		return
	}
	if err := c.handshake(); err != nil {
		if errors.Is(err, errHandedOff) {
			return
		}
		c.log.Info("handshake failed", "err", err)
		return
	}
	c.log.Debug("connection open", "user", c.user, "vhost", c.vhost.Name(), "container", c.containerID)
	c.armCredentialTimer()
	defer c.stopCredentialTimer()
	if ctr := c.srv.opts.Counters; ctr != nil {
		ctr.connections.Add(1)
		defer ctr.connections.Add(-1)
	}
	var wg sync.WaitGroup
	wg.Go(c.readLoop)  // exits when nc is closed or done is closed
	wg.Go(c.writeLoop) // exits when out is closed and flushed, or on a write error
	c.loop()
	close(c.done)
	c.cleanup()
	c.flushOut()
	c.out.close()
	wg.Wait()
}

// readLoop decodes frames and hands them to the loop in batches: the
// frames that are already buffered go together (up to inBatch), so the
// hand-off costs one channel operation per read, not one per frame. A
// batch is always handed over before a read that may wait for the peer.
func (c *conn) readLoop() {
	defer close(c.inc)
	idle := c.srv.opts.IdleTimeout
	var batch []inFrame
	size := 0
	for {
		f, keep, ok := c.readOne(idle)
		if keep {
			if batch == nil {
				batch = c.spare()
			}
			batch = append(batch, f)
			size += len(f.payload)
		}
		if len(batch) > 0 && (!ok || len(batch) >= inBatch || size >= inBatchBytes || !frameBuffered(c.br)) {
			if !c.send(batch) {
				return
			}
			batch, size = nil, 0
		}
		if !ok {
			return
		}
	}
}

// readOne reads the next frame. keep is false for a heartbeat, which the
// loop need not see; ok is false after the reader's last frame: an error,
// which f carries.
func (c *conn) readOne(idle time.Duration) (f inFrame, keep, ok bool) {
	// The idle deadline only matters when reading the next frame may wait
	// for the peer: a frame already wholly buffered needs no new deadline.
	if !frameBuffered(c.br) {
		if err := c.nc.SetReadDeadline(time.Now().Add(idle)); err != nil {
			return inFrame{err: err}, true, false
		}
	}
	fh, body, err := readFrame(c.br, c.srv.opts.MaxFrameSize)
	if err != nil {
		return inFrame{err: err}, true, false
	}
	if fh.Type != amqp10.FrameTypeAMQP { // empty or not
		return inFrame{err: &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondFramingError, "unexpected frame type %d after open", fh.Type)}}, true, false
	}
	if len(body) == 0 {
		return inFrame{}, false, true // heartbeat
	}
	if code, err := amqp10.PeekDescriptor(body); err == nil &&
		(code == amqp10.DescTransfer || code == amqp10.DescFlow || code == amqp10.DescDisposition) {
		return inFrame{channel: fh.Channel, hot: code, payload: body}, true, true
	}
	p, payload, err := amqp10.ParsePerformative(body)
	if err != nil {
		return inFrame{err: decodeError(err)}, true, false
	}
	return inFrame{channel: fh.Channel, perf: p, payload: payload}, true, true
}

// spare returns an emptied batch for the reader to fill. Batches are made
// at their full size and go round between the reader and the loop, so a
// steady stream of frames allocates none.
func (c *conn) spare() []inFrame {
	select {
	case b := <-c.free:
		return b
	default:
		return make([]inFrame, 0, inBatch)
	}
}

// decodeError is the connection error for a performative that does not decode.
func decodeError(err error) *amqp10.ProtocolError {
	cond := amqp10.ErrCondDecodeError
	if errors.Is(err, amqp10.ErrInvalidField) {
		cond = amqp10.ErrCondInvalidField
	}
	return &amqp10.ProtocolError{Scope: amqp10.ScopeConnection, Err: amqp10.Errorf(cond, "%v", err), Cause: err}
}

// decodeHot decodes a hot frame's performative into the loop's own value
// for its type. The value is valid until the next hot frame of that type:
// nothing keeps a pointer to it beyond handling its frame.
func (c *conn) decodeHot(f *inFrame) error {
	var err error
	switch f.hot {
	case amqp10.DescTransfer:
		f.payload, err = c.inTr.Unmarshal(f.payload)
		f.perf = &c.inTr
	case amqp10.DescFlow:
		f.payload, err = c.inFl.Unmarshal(f.payload)
		f.perf = &c.inFl
	case amqp10.DescDisposition:
		f.payload, err = c.inDisp.Unmarshal(f.payload)
		f.perf = &c.inDisp
	}
	if err != nil {
		return decodeError(err)
	}
	return nil
}

// frameBuffered reports whether the next frame is wholly in r's buffer, so
// reading it makes no system call.
func frameBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < 8 {
		return false
	}
	h, err := r.Peek(8)
	return err == nil && int64(binary.BigEndian.Uint32(h)) <= int64(n)
}

func (c *conn) send(batch []inFrame) bool {
	select {
	case c.inc <- batch:
		return true
	case <-c.done:
		return false
	}
}

// loop owns all session and link state.
func (c *conn) loop() {
	var grace *time.Timer
	var graceC <-chan time.Time
	startGrace := func() {
		if grace == nil {
			grace = time.NewTimer(closeGrace)
			graceC = grace.C
		}
	}
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	force := c.force
	var alarmC <-chan struct{}
	c.blocked, alarmC = c.srv.opts.Router.Alarms().PublishBlocked()
	burst := 0
	for {
		// While output waits for the socket, deliveries stay in the mailbox
		// and, past the hard cap, input stays with the reader.
		mailC, inC := c.mbox.wake, c.inc
		if c.outputFull() {
			mailC = nil
		}
		if c.queued+len(c.wbuf) >= outHardCap {
			inC = nil
		}
		select {
		case <-alarmC:
			var blocked bool
			blocked, alarmC = c.srv.opts.Router.Alarms().PublishBlocked()
			if blocked != c.blocked && !c.closeSent {
				c.blocked = blocked
				c.log.Info("resource alarm: publishers", "blocked", blocked)
				for _, s := range c.sessions {
					s.setBlocked(blocked)
				}
			}
		case batch, ok := <-inC:
			if !ok {
				return
			}
			for i := range batch {
				if !c.inbound(&batch[i]) {
					return
				}
				if c.closeSent {
					startGrace()
				}
			}
			clear(batch) // drop the payloads: message bytes now belong to queues
			select {
			case c.free <- batch[:0]:
			default:
			}
		case <-mailC:
			if !c.closeSent {
				c.deliverMail()
			}
		case <-c.out.low:
			// The writer drained below outLowWater, or failed; or the loop
			// itself found room for what it held back.
			if c.queued = c.out.waiting(); c.queued < 0 {
				return // the peer stopped reading (write-timeout), or the socket failed
			}
			if c.heldBack && !c.closeSent && !c.outputFull() {
				c.resumeOutput()
			}
		case <-force:
			force = nil
			if !c.closeSent {
				c.sendClose(c.forcedError())
			}
			startGrace()
		case <-graceC:
			return
		case reply := <-c.infoReq:
			reply <- c.sessionInfos() // buffered: never waits
		}
		// Under load, handle what has already arrived before handing the
		// output to the writer: one lock, one wake-up and, for a run of
		// publishes, one disposition for many. Only what the select above
		// would take counts, or output could wait unflushed for nothing.
		if burst < maxBurst && (len(c.inc) > 0 && c.queued+len(c.wbuf) < outHardCap ||
			len(c.mbox.wake) > 0 && !c.outputFull()) {
			burst++
			continue
		}
		burst = 0
		c.queued = c.flushOut()
		if c.heldBack && !c.outputFull() {
			// The socket took it: go on encoding what waits, after the
			// input that has arrived meanwhile (the select picks fairly).
			c.out.signalLow()
		}
	}
}

// outputFull reports whether encoded output has reached outHighWater:
// deliveries and management responses then wait.
func (c *conn) outputFull() bool { return c.queued+len(c.wbuf) >= outHighWater }

// holdBack reports whether output is full, and remembers that something
// waits for it to drain.
func (c *conn) holdBack() bool {
	if c.outputFull() {
		c.heldBack = true
		return true
	}
	return false
}

// resumeOutput sends what waited for the output to drain: deliveries held
// back in sessions (their order comes first) and management responses, then
// the mail, each until the output is full again.
func (c *conn) resumeOutput() {
	c.heldBack = false
	for _, s := range c.sessions {
		s.flushPending()
	}
	c.deliverMail()
}

// inbound handles one frame from the reader; false ends the loop.
func (c *conn) inbound(f *inFrame) bool {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "inbound frame")
	}
	if f.err != nil {
		c.readError(f.err)
		return false
	}
	if f.hot != 0 {
		if err := c.decodeHot(f); err != nil {
			c.readError(err) // as a decode error found by the reader
			return false
		}
	}
	if err := c.handle(*f); err != nil {
		c.protocolError(err)
	}
	return !c.closeRecv
}

// readError handles the reader's terminal error.
func (c *conn) readError(err error) {
	var pe *amqp10.ProtocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		c.protocolError(pe)
	case errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Info("idle timeout: closing", "timeout", c.srv.opts.IdleTimeout)
		c.sendClose(amqp10.Errorf(amqp10.ErrCondResourceLimitExceeded,
			"no frame received from client within idle timeout threshold"))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		// The peer went away, or the loop closed the socket: nothing to report.
	default:
		c.log.Debug("read error", "err", err)
	}
}

// protocolError reports err to the peer at its scope.
func (c *conn) protocolError(err error) {
	var pe *amqp10.ProtocolError
	if !errors.As(err, &pe) {
		pe = &amqp10.ProtocolError{Scope: amqp10.ScopeConnection,
			Err: amqp10.Errorf(amqp10.ErrCondInternalError, "internal error"), Cause: err}
	}
	c.log.Info("protocol error", "scope", pe.Scope.String(), "condition", string(pe.Err.Condition),
		"description", pe.Err.Description, "cause", pe.Cause)
	// Session and link errors are handled where they occur; anything reaching
	// here closes the connection.
	c.sendClose(pe.Err)
}

func (c *conn) sendClose(e *amqp10.Error) {
	if c.closeSent {
		return
	}
	c.closeSent = true
	c.write(0, &amqp10.Close{Error: e}, nil)
}

// handle dispatches one frame.
func (c *conn) handle(f inFrame) error {
	if c.closeSent {
		if _, ok := f.perf.(*amqp10.Close); ok {
			c.closeRecv = true
		}
		return nil // after our close only the peer's close matters
	}
	if f.channel > c.srv.opts.ChannelMax {
		return connErr(amqp10.ErrCondFramingError, "channel number (%d) exceeds maximum channel number (%d)",
			f.channel, c.srv.opts.ChannelMax)
	}
	switch p := f.perf.(type) {
	case *amqp10.Close:
		c.closeRecv = true
		if p.Error != nil {
			c.log.Info("peer closed with error", "condition", string(p.Error.Condition), "description", p.Error.Description)
		}
		c.closeSent = true
		c.write(0, &amqp10.Close{}, nil)
		return nil
	case *amqp10.Open:
		return connErr(amqp10.ErrCondIllegalState, "second open frame")
	case *amqp10.Begin:
		return c.begin(f.channel, p)
	case *amqp10.SASLInit, *amqp10.SASLMechanisms, *amqp10.SASLOutcome, *amqp10.SASLResponse, *amqp10.SASLChallenge:
		return connErr(amqp10.ErrCondFramingError, "SASL frame after open")
	}
	s := c.sessions[f.channel]
	if s == nil {
		return connErr(amqp10.ErrCondIllegalState, "%s on channel %d, which has no session", name(f.perf), f.channel)
	}
	return s.handle(f.perf, f.payload)
}

func name(p amqp10.Performative) string {
	switch p.(type) {
	case *amqp10.Attach:
		return "attach"
	case *amqp10.Flow:
		return "flow"
	case *amqp10.Transfer:
		return "transfer"
	case *amqp10.Disposition:
		return "disposition"
	case *amqp10.Detach:
		return "detach"
	case *amqp10.End:
		return "end"
	}
	return "frame"
}

func connErr(cond amqp10.ErrCond, format string, args ...any) error {
	return &amqp10.ProtocolError{Scope: amqp10.ScopeConnection, Err: amqp10.Errorf(cond, format, args...)}
}

// begin answers a peer-initiated session.
func (c *conn) begin(ch uint16, b *amqp10.Begin) error {
	if _, ok := c.sessions[ch]; ok {
		return connErr(amqp10.ErrCondIllegalState, "begin on channel %d, which already has a session", ch)
	}
	if b.HasRemoteChannel {
		return connErr(amqp10.ErrCondIllegalState, "begin with remote-channel %d: the broker begins no sessions", b.RemoteChannel)
	}
	limit := min(c.srv.opts.ChannelMax, c.peerChannelMax)
	local := -1
	for i := 0; i <= int(limit); i++ {
		if _, used := c.localChans[uint16(i)]; !used {
			local = i
			break
		}
	}
	if local < 0 {
		return connErr(amqp10.ErrCondResourceLimitExceeded, "no free channel")
	}
	s := newSession(c, ch, uint16(local), b)
	if c.blocked {
		s.inWindow, s.inLimit = 0, s.nextIncomingID
	}
	c.sessions[ch] = s
	c.localChans[uint16(local)] = s
	c.stats.sessions.Store(int32(len(c.sessions)))
	if ctr := c.srv.opts.Counters; ctr != nil {
		ctr.sessions.Add(1)
	}
	c.write(s.local, &amqp10.Begin{
		RemoteChannel:    ch,
		HasRemoteChannel: true,
		NextOutgoingID:   s.nextOutgoingID,
		IncomingWindow:   s.inWindow,
		OutgoingWindow:   maxOutgoingWindow,
		HandleMax:        c.srv.opts.HandleMax,
	}, nil)
	return nil
}

func (c *conn) removeSession(s *session) {
	if ctr := c.srv.opts.Counters; ctr != nil && c.sessions[s.remote] == s {
		ctr.sessions.Add(-1)
	}
	delete(c.sessions, s.remote)
	delete(c.localChans, s.local)
	c.stats.sessions.Store(int32(len(c.sessions)))
}

// cleanup releases every link's queue state when the loop has ended. The
// consumers are gone however the connection ended (a clean close as well as
// a loss): RabbitMQ 4.3 counts a failed delivery for each unsettled message.
func (c *conn) cleanup() {
	for _, s := range c.sessions {
		s.releaseLinks(router.CancelConnectionLost)
	}
	if ctr := c.srv.opts.Counters; ctr != nil {
		ctr.sessions.Add(-int64(len(c.sessions)))
	}
	c.sessions, c.localChans = nil, nil
	c.stats.sessions.Store(0)
	if c.stopQueueWatch != nil {
		c.stopQueueWatch()
		c.stopQueueWatch = nil
	}
	c.vhost.DeleteExclusive(c)
}

// watchQueueDeletions has the vhost tell the loop, through the mailbox, of
// every deleted queue, once a link publishes to a queue: RabbitMQ 4
// detaches such links with resource-deleted when their queue goes, by
// whatever path. The loop alone touches the links (detachPublishersTo).
func (c *conn) watchQueueDeletions() {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "watchQueueDeletions")
	}
	if c.stopQueueWatch != nil {
		return
	}
	mbox := &c.mbox
	c.stopQueueWatch = c.vhost.OnQueueDeleted(func(q *router.Queue) { mbox.push(mailItem{gone: q}) })
}

// detachPublishersTo detaches, with resource-deleted and no description
// (RabbitMQ 4's detach), every link that publishes to the deleted queue q.
func (c *conn) detachPublishersTo(q *router.Queue) {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "detachPublishersTo")
	}
	for _, s := range c.sessions {
		for h, l := range s.links {
			if rl, ok := l.(*receiverLink); ok && rl.queue == q {
				s.detachWithError(h, &amqp10.Error{Condition: amqp10.ErrCondResourceDeleted})
			}
		}
	}
}

// write encodes a frame into the loop's output; flushOut passes it on.
func (c *conn) write(ch uint16, p amqp10.Performative, payload []byte) {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "write")
	}
	c.flushDisp()
	c.wbuf = amqp10.AppendFrame(c.wbuf, amqp10.FrameTypeAMQP, ch, p, payload)
}

// accepted writes a settled or unsettled accepted outcome for incoming
// delivery id on channel ch. Consecutive ids with the same settled flag on
// one channel become one disposition (first..last), written when anything
// else is written or the output is flushed.
func (c *conn) accepted(ch uint16, id uint32, settled bool) {
	p := &c.pendDisp
	if c.hasPend && c.pendCh == ch && p.Settled == settled && p.Last+1 == id {
		p.Last, p.HasLast = id, true
		return
	}
	c.flushDisp()
	*p = amqp10.Disposition{Role: amqp10.RoleReceiver, First: id, Last: id, Settled: settled,
		State: amqp10.DeliveryState{Kind: amqp10.StateAccepted}}
	c.pendCh, c.hasPend = ch, true
}

func (c *conn) flushDisp() {
	if c.hasPend {
		c.hasPend = false
		c.wbuf = amqp10.AppendFrame(c.wbuf, amqp10.FrameTypeAMQP, c.pendCh, &c.pendDisp, nil)
	}
}

// flushOut passes the loop's output on and returns how many bytes now
// wait for the writer. When the writer has nothing to write, the loop
// writes itself, with one non-blocking system call: a lone delivery then
// reaches the socket without waking another goroutine. What the socket
// does not take, and everything while the writer is busy, goes to the
// writer with one lock and one wake-up. With nothing written it returns
// the last count without locking: what waits can only have shrunk since.
func (c *conn) flushOut() int {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "flushOut")
	}
	c.flushDisp()
	if len(c.wbuf) == 0 {
		return c.queued
	}
	o := &c.out
	o.mu.Lock()
	if c.raw != nil && o.queued == 0 && !o.busy && !o.closed && !o.failed {
		o.busy = true // the writer leaves the socket, and o.buf, alone
		if ownerChecks != nil {
			ownerChecks.tookWrite(o)
		}
		o.mu.Unlock()
		if ownerChecks != nil {
			ownerChecks.writing(o, true)
		}
		n := tryWrite(c.raw, c.wbuf)
		c.stats.sent(n)
		o.mu.Lock()
		o.busy = false
		if n > 0 {
			o.wrote = true
		}
		if n == len(c.wbuf) {
			c.wbuf = c.wbuf[:0]
			o.mu.Unlock()
			return 0
		}
		c.wbuf = c.wbuf[n:] // the rest of a frame: it must go first
	}
	o.queued += len(c.wbuf)
	if len(o.buf) == 0 {
		o.buf, c.wbuf = c.wbuf, o.buf[:0]
	} else {
		o.buf = append(o.buf, c.wbuf...)
		c.wbuf = c.wbuf[:0]
	}
	n := o.queued
	if n >= outHighWater {
		o.waitLow = true // the writer wakes the loop at outLowWater
	}
	o.mu.Unlock()
	o.signal()
	return n
}

// writeLoop writes buffered frames, and a heartbeat when nothing else was
// written for a heartbeat interval. A peer that takes no byte for
// Options.WriteTimeout is cut off: each write's deadline is set afresh, so
// a slow reader that keeps taking bytes is never cut.
func (c *conn) writeLoop() {
	ticker := time.NewTicker(c.heartbeat)
	defer ticker.Stop()
	o := &c.out
	var spare []byte
	for {
		select {
		case <-o.wake:
		case <-ticker.C:
			o.mu.Lock()
			if !o.wrote && !o.busy {
				n := len(o.buf)
				o.buf = amqp10.AppendHeartbeat(o.buf)
				o.queued += len(o.buf) - n
			}
			o.wrote = false
			o.mu.Unlock()
		}
		o.mu.Lock()
		if o.busy {
			o.mu.Unlock()
			continue // the loop is writing; it wakes us for what it leaves
		}
		spare, o.buf = o.buf, spare[:0]
		o.busy = len(spare) > 0
		if o.busy && ownerChecks != nil {
			ownerChecks.tookWrite(o)
		}
		closed := o.closed
		o.mu.Unlock()
		if len(spare) > 0 {
			if err := c.writeOut(spare); err != nil {
				o.fail()
				if errors.Is(err, os.ErrDeadlineExceeded) {
					c.log.Warn("peer stopped reading: no output taken within the write timeout; closing",
						"timeout", c.srv.opts.WriteTimeout)
				} else {
					c.log.Debug("write failed; closing", "err", err)
				}
				closed = true
			} else {
				o.mu.Lock()
				o.busy = false
				o.mu.Unlock()
			}
		}
		if closed {
			c.nc.Close() // unblocks the reader
			return
		}
	}
}

// writeOut writes b in chunks of at most writeChunk, accounting each as it
// goes. A write that times out having taken some bytes is progress: it goes
// on with a fresh deadline. Only a whole time-out without a byte taken is an
// error (os.ErrDeadlineExceeded).
func (c *conn) writeOut(b []byte) error {
	o := &c.out
	timeout := c.srv.opts.WriteTimeout
	for len(b) > 0 {
		chunk := b[:min(len(b), writeChunk)]
		if err := c.nc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		if ownerChecks != nil {
			ownerChecks.writing(o, false)
		}
		n, err := c.nc.Write(chunk)
		c.stats.sent(n)
		b = b[n:]
		o.mu.Lock()
		o.queued -= n
		if n > 0 {
			o.wrote = true
		}
		if o.waitLow && o.queued <= outLowWater {
			o.waitLow = false
			o.signalLow()
		}
		o.mu.Unlock()
		if err != nil && !(n > 0 && errors.Is(err, os.ErrDeadlineExceeded)) {
			return err
		}
	}
	return nil
}

// outbuf is the loop -> writer byte queue, and the hand-off of the
// socket's write side between the two goroutines that write to it: the
// writer (writeLoop), and the loop itself, which writes inline when the
// writer is idle (flushOut). busy is the token. Whoever sets it, under mu
// and finding it clear, alone writes to the socket until it clears it
// under mu again; the writer also owns the bytes it took from buf. The
// other side leaves the socket alone meanwhile: the loop appends to buf
// (with mu) instead of writing, and the writer skips its turn, to be woken
// for what the loop leaves. Everything else here is guarded by mu, except
// the two wake-up channels. Test builds check the hand-off at each write
// (ownerChecks).
type outbuf struct {
	mu     sync.Mutex
	buf    []byte
	queued int  // bytes handed to the writer and not yet written (buf, and the rest of the write under way)
	busy   bool // a write is under way, the writer's or the loop's (flushOut)
	wrote  bool // bytes went out since the writer's last heartbeat tick
	closed bool
	// waitLow: the loop waits for queued to fall to outLowWater; failed:
	// the writer gave up. Either way the writer signals low.
	waitLow bool
	failed  bool
	wake    chan struct{} // loop -> writer
	low     chan struct{} // writer -> loop
}

func (o *outbuf) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *outbuf) signalLow() {
	select {
	case o.low <- struct{}{}:
	default:
	}
}

// waiting returns how many bytes wait for the writer, or -1 once it failed.
func (o *outbuf) waiting() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed {
		return -1
	}
	return o.queued
}

// fail records that the writer gave up, and tells the loop.
func (o *outbuf) fail() {
	o.mu.Lock()
	o.failed, o.busy = true, false
	o.mu.Unlock()
	o.signalLow()
}

func (o *outbuf) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

// mailItem is a delivery or a drain result posted by a queue.
type mailItem struct {
	l       *senderLink
	d       router.Delivery
	drained bool
	count   uint32
	// activity: a quorum queue told l whether it is active (single active
	// consumer): activeState or waitingState.
	activity uint8
	// detachErr: detach l with this error (posted by the loop itself, so
	// that the detach does not run inside the sending of pending work).
	detachErr *amqp10.Error
	// A store confirmation for a durable publish (l is nil then).
	confirm *pendingConfirm
	// ev: dead-letter events wait for this link (l is nil then).
	ev      *eventsLink
	outcome router.Outcome
	// gone: a deleted queue. With l set, l's subscription to it ended;
	// with l nil, the links publishing to it are to be detached.
	gone *router.Queue
}

// mailbox is the queues -> loop hand-off. Queues push with their lock held,
// so push never blocks; credit bounds its length.
type mailbox struct {
	mu    sync.Mutex
	items []mailItem
	wake  chan struct{}
}

func (m *mailbox) push(it mailItem) {
	m.mu.Lock()
	first := len(m.items) == 0
	m.items = append(m.items, it)
	m.mu.Unlock()
	if !first {
		return // the push that made the box non-empty woke the loop; its take gets this too
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *mailbox) take(dst []mailItem) []mailItem {
	m.mu.Lock()
	dst, m.items = m.items, dst[:0]
	m.mu.Unlock()
	return dst
}

// deliverMail sends what queues posted, in order, until the output is
// full; the rest waits in c.mail for resumeOutput. It takes the mailbox
// once its backlog is done, so the mailbox's wake-up is never lost: the
// next push after a take signals again.
func (c *conn) deliverMail() {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "deliverMail")
	}
	took := false
	for {
		if c.mailNext == len(c.mail) {
			c.mail, c.mailNext = c.mail[:0], 0
			if took {
				return
			}
			c.mail, took = c.mbox.take(c.mail), true
			if len(c.mail) == 0 {
				return
			}
		}
		it := &c.mail[c.mailNext]
		if it.ev != nil {
			// flush stops by itself at full output; what it leaves waits
			// in the subscription for resumeOutput.
			c.mailNext++
			it.ev.flush()
			*it = mailItem{}
			continue
		}
		if it.confirm == nil && it.gone == nil && it.detachErr == nil && !it.l.detached && c.holdBack() {
			return
		}
		c.mailNext++
		switch {
		case it.confirm != nil:
			it.confirm.l.storeConfirmed(it.confirm, it.outcome)
		case it.gone != nil && it.l == nil:
			c.detachPublishersTo(it.gone)
		case it.l.detached:
			// The subscription was cancelled; the queue took these back.
		case it.detachErr != nil:
			it.l.s.detachWithError(it.l.handle, it.detachErr)
		case it.gone != nil:
			it.l.s.detachWithError(it.l.handle, &amqp10.Error{Condition: amqp10.ErrCondResourceDeleted})
		default:
			it.l.s.sendItem(pendingItem{l: it.l, d: it.d, drained: it.drained, count: it.count, activity: it.activity})
		}
		*it = mailItem{} // keep no message reachable from the buffer
	}
}
