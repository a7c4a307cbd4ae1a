package link

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/config"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
)

// The connection fuzzers drive one whole connection of a real Server over
// net.Pipe inside a synctest bubble: the broker's handshake, idle and close
// timers run on the bubble's clock, so a connection that must end by a
// time-out ends at once, and the bubble's end is the goroutine-leak check
// (synctest.Test fails if a goroutine of the bubble is still blocked).
//
// An input is either a structured program (the first byte's low bit clear:
// performatives with fields chosen by the input, garbage frames, raw bytes,
// pauses) or raw bytes written as they are. Either way the byte stream goes
// out in chunks whose sizes come from a seed in the input, so the reader's
// frame splitting sees every boundary. Each input asserts:
//   - nothing panics (a panic in a broker goroutine kills the fuzz worker);
//   - the broker never answers with amqp:internal-error, and every frame it
//     sends decodes;
//   - the connection ends (close or EOF) within connEndBound of the bubble's
//     clock after the input ends, and its goroutines are gone by then;
//   - the bytes allocated while serving it stay within allocBound.

// fuzzMaxInput bounds an input, so one iteration stays fast.
const fuzzMaxInput = 64 << 10

// Server time-outs in the fuzz broker. connEndBound is the longest a
// connection may outlive its input: the handshake or idle time-out, then
// closeGrace waiting for the peer's close, with a margin.
// A failed login is answered after fuzzAuthFailureDelay times the failures
// in a row from its address (at most ten times): the connection holds on
// that long even when the peer has gone, so authDelayBound is how long a
// connection may outlive its peer's end.
const (
	fuzzHandshakeTimeout = 2 * time.Second
	fuzzIdleTimeout      = 5 * time.Second
	fuzzAuthFailureDelay = 100 * time.Millisecond
	authDelayBound       = 10*fuzzAuthFailureDelay + time.Millisecond
	connEndBound         = fuzzHandshakeTimeout + fuzzIdleTimeout + closeGrace + authDelayBound + 5*time.Second
)

// livelockBound is the real time one input may take.
const livelockBound = 10 * time.Second

// allocBound is how many bytes serving one input may allocate: a fixed
// allowance for the broker, the router and the harness, plus a multiple of
// the input. An allocation sized by a count or length the client claims
// (instead of bytes it sent) breaks it.
func allocBound(inputLen int) uint64 { return 64<<20 + 512*uint64(inputLen) }

// Flags of the first input byte.
const (
	flagRaw      = 1 << 0 // the rest (after the chunk seed) is written as it is
	flagSASL     = 1 << 1 // SASL header and sasl-init before the AMQP header
	flagRemote   = 1 << 2 // the peer is not on loopback (guest and ANONYMOUS refused)
	flagHangUp   = 1 << 3 // close the client's end once the input is written
	flagMechMask = 3 << 4 // SASL mechanism: ANONYMOUS, PLAIN guest/guest, PLAIN wrong, another
	flagAutoQ    = 1 << 6 // the server declares a queue for a bare address on attach
)

// Operations of a structured input; each is one byte followed by its
// arguments (see program.op).
const (
	opOpen = iota
	opBegin
	opAttach
	opFlow
	opTransfer
	opDisposition
	opDetach
	opEnd
	opClose
	opHeartbeat
	opGarbageFrame
	opRawBytes
	opSync
	opSleep
	opMultiTransfer
	opRawPerformative
	opCount
)

// fuzzAddresses are the terminus addresses an attach may name.
// The first seven are the ones seeds use; an empty one is the anonymous
// terminus (the message's properties.to decides).
var fuzzAddresses = []string{
	"/queues/q", "/queues/dlq", "/queues/qq", "/exchanges/amq.direct/q",
	"/queues/missing", "q", "/management", "\xff\x00bad",
	"", "/exchanges/amq.fanout", "/exchanges/amq.topic/a.b", "/queues/q%2", "/queues/%71",
	"/exchanges/amq.default/dlq", "/exchanges/", "/queues/",
}

// source hands out the input's bytes as choices; an exhausted source
// yields zeros.
type source struct{ b []byte }

func (s *source) empty() bool { return len(s.b) == 0 }

func (s *source) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	v := s.b[0]
	s.b = s.b[1:]
	return v
}

func (s *source) bit() bool      { return s.byte()&1 == 1 }
func (s *source) u16() uint16    { return uint16(s.byte())<<8 | uint16(s.byte()) }
func (s *source) pick(n int) int { return int(s.byte()) % n }
func (s *source) small() uint32  { return uint32(s.byte()) }
func (s *source) bytes(n int) []byte {
	n = min(n, len(s.b))
	v := s.b[:n]
	s.b = s.b[n:]
	return v
}

// step is one thing the client does: write bytes, or (when pause is set)
// flush and wait until the broker is idle, then let sleep pass on the
// bubble's clock.
type step struct {
	data  []byte
	pause bool
	sleep time.Duration
}

// program is a decoded input.
type program struct {
	flags     byte
	chunkSeed uint64
	steps     []step
	bytes     int
}

func (p *program) write(b []byte) {
	p.bytes += len(b)
	if n := len(p.steps); n > 0 && !p.steps[n-1].pause {
		p.steps[n-1].data = append(p.steps[n-1].data, b...)
		return
	}
	p.steps = append(p.steps, step{data: append([]byte(nil), b...)})
}

func (p *program) frame(typ byte, ch uint16, perf amqp10.Performative, payload []byte) {
	p.write(amqp10.AppendFrame(nil, typ, ch, perf, payload))
}

// maxProgramBytes bounds what one program writes.
const maxProgramBytes = 1 << 20

// decodeProgram turns an input into the client's steps.
func decodeProgram(data []byte) *program {
	s := &source{b: data}
	p := &program{flags: s.byte()}
	p.chunkSeed = uint64(s.byte())<<24 | uint64(s.byte())<<16 | uint64(s.byte())<<8 | uint64(s.byte())
	if p.flags&flagRaw != 0 {
		p.write(s.b)
		return p
	}
	if p.flags&flagSASL != 0 {
		p.write(amqp10.ProtoHeaderSASL[:])
		init := &amqp10.SASLInit{}
		switch p.flags & flagMechMask >> 4 {
		case 0:
			init.Mechanism = "ANONYMOUS"
		case 1:
			init.Mechanism, init.InitialResponse = "PLAIN", []byte("\x00guest\x00guest")
		case 2:
			init.Mechanism, init.InitialResponse = "PLAIN", []byte("\x00guest\x00wrong")
		default:
			init.Mechanism, init.InitialResponse = "EXTERNAL", s.bytes(s.pick(16))
		}
		p.frame(amqp10.FrameTypeSASL, 0, init, nil)
	}
	p.write(amqp10.ProtoHeaderAMQP[:])
	var st opState
	for ops := 0; !s.empty() && ops < 512 && p.bytes < maxProgramBytes; ops++ {
		p.op(s, &st)
	}
	return p
}

// opState is what the client remembers between operations: the next
// delivery-id it sends per channel.
type opState struct {
	nextDeliveryID [4]uint32
}

func (p *program) op(s *source, st *opState) {
	amqp := amqp10.FrameTypeAMQP
	switch s.pick(opCount) {
	case opOpen:
		o := &amqp10.Open{ContainerID: "fuzz", MaxFrameSize: uint32(s.u16())}
		if o.MaxFrameSize == 0 {
			o.MaxFrameSize = 1 << 16
		}
		o.ChannelMax = uint16(s.pick(8))
		o.IdleTimeOut = uint32(s.byte()) * 100
		o.Hostname = []string{"", "vhost:/", "vhost:nope", "\xff"}[s.pick(4)]
		p.frame(amqp, 0, o, nil)
	case opBegin:
		ch := uint16(s.pick(4))
		b := &amqp10.Begin{HasRemoteChannel: s.bit(), IncomingWindow: uint32(s.u16()), OutgoingWindow: uint32(s.u16()),
			HandleMax: uint32(s.pick(8))}
		if b.HandleMax == 0 {
			b.HandleMax = 1<<32 - 1
		}
		b.NextOutgoingID = st.nextDeliveryID[ch]
		p.frame(amqp, ch, b, nil)
	case opAttach:
		ch := uint16(s.pick(4))
		a := &amqp10.Attach{Handle: uint32(s.pick(4)), Role: amqp10.Role(s.bit())}
		addr := fuzzAddresses[s.pick(len(fuzzAddresses))]
		a.Name = fmt.Sprintf("link-%d-%d", a.Handle, s.byte())
		a.SndSettleMode, a.HasSndSettleMode = amqp10.SndSettleMode(s.pick(3)), true
		a.RcvSettleMode, a.HasRcvSettleMode = amqp10.RcvSettleMode(s.pick(2)), true
		if a.Role == amqp10.RoleSender {
			// We publish: the broker's target is the address.
			a.Target = &amqp10.Target{Address: addr, HasAddress: addr != ""}
			a.Source = &amqp10.Source{}
			a.InitialDeliveryCount, a.HasInitialDeliveryCount = 0, true
		} else {
			a.Source = &amqp10.Source{Address: addr, HasAddress: true}
			a.Target = &amqp10.Target{}
		}
		p.frame(amqp, ch, a, nil)
	case opFlow:
		ch := uint16(s.pick(4))
		f := &amqp10.Flow{IncomingWindow: uint32(s.u16()), OutgoingWindow: 1 << 16, NextOutgoingID: st.nextDeliveryID[ch]}
		f.NextIncomingID, f.HasNextIncomingID = s.small(), s.bit()
		if s.bit() {
			f.Handle, f.HasHandle = uint32(s.pick(4)), true
			f.DeliveryCount, f.HasDeliveryCount = s.small(), true
			f.LinkCredit, f.HasLinkCredit = s.small(), true
			f.Drain, f.Echo = s.bit(), s.bit()
		}
		p.frame(amqp, ch, f, nil)
	case opTransfer:
		ch := uint16(s.pick(4))
		t := p.transferHeader(s, st, ch)
		t.Settled, t.HasSettled = s.bit(), true
		t.More = s.pick(8) == 0
		t.Aborted = s.pick(16) == 0
		p.frame(amqp, ch, t, fuzzPayload(s))
	case opDisposition:
		ch := uint16(s.pick(4))
		d := &amqp10.Disposition{Role: amqp10.Role(!s.bit()), First: uint32(s.u16())}
		if n := s.small() % 8; n > 0 {
			d.Last, d.HasLast = d.First+n, true
		}
		d.Settled = s.pick(4) != 0
		d.State = fuzzState(s)
		p.frame(amqp, ch, d, nil)
	case opDetach:
		ch := uint16(s.pick(4))
		d := &amqp10.Detach{Handle: uint32(s.pick(4)), Closed: s.bit()}
		if s.bit() {
			d.Error = amqp10.Errorf(amqp10.ErrCondDetachForced, "fuzz")
		}
		p.frame(amqp, ch, d, nil)
	case opEnd:
		e := &amqp10.End{}
		ch := uint16(s.pick(4))
		if s.bit() {
			e.Error = amqp10.Errorf(amqp10.ErrCondInternalError, "fuzz client")
		}
		p.frame(amqp, ch, e, nil)
	case opClose:
		c := &amqp10.Close{}
		if s.bit() {
			c.Error = amqp10.Errorf(amqp10.ErrCondDecodeError, "fuzz client")
		}
		p.frame(amqp, 0, c, nil)
	case opHeartbeat:
		p.write(amqp10.AppendHeartbeat(nil))
	case opGarbageFrame:
		typ, ch, doff := s.byte(), s.u16(), 2+s.pick(4)
		body := s.bytes(int(s.byte()))
		b := make([]byte, 8, 8+4*doff+len(body))
		binary.BigEndian.PutUint32(b, uint32(4*doff+len(body)))
		b[4], b[5] = byte(doff), typ
		binary.BigEndian.PutUint16(b[6:], ch)
		b = append(b, make([]byte, 4*doff-8)...)
		p.write(append(b, body...))
	case opRawBytes:
		p.write(s.bytes(int(s.byte())))
	case opSync:
		p.steps = append(p.steps, step{pause: true})
	case opSleep:
		p.steps = append(p.steps, step{pause: true, sleep: time.Duration(s.byte()) * 50 * time.Millisecond})
	case opMultiTransfer:
		ch := uint16(s.pick(4))
		t := p.transferHeader(s, st, ch)
		body := make([]byte, 512*int(s.pick(64)))
		msg := fuzzMessage(body)
		frames := 1 + s.pick(8)
		part := max(1, len(msg)/frames)
		for len(msg) > 0 {
			n := min(part, len(msg))
			t.More = n < len(msg)
			p.frame(amqp, ch, t, msg[:n])
			msg = msg[n:]
			t.DeliveryTag, t.HasDeliveryID, t.HasMessageFormat = nil, false, false
		}
	case opRawPerformative:
		// A known descriptor with a fuzzed list body: gets past the
		// descriptor dispatch into each performative's field decoding.
		ch := uint16(s.pick(4))
		b := amqp10.AppendDescriptor(nil, amqp10.DescOpen+uint64(s.pick(9)))
		b = append(b, s.bytes(int(s.byte()))...)
		fb, start := amqp10.BeginFrame(nil, amqp, ch)
		p.write(amqp10.EndFrame(append(fb, b...), start))
	}
}

// transferHeader is a transfer's first frame: the channel's next delivery-id
// or, now and then, one the input picks.
func (p *program) transferHeader(s *source, st *opState, ch uint16) *amqp10.Transfer {
	t := &amqp10.Transfer{Handle: uint32(s.pick(4)), HasDeliveryID: true, DeliveryID: st.nextDeliveryID[ch],
		MessageFormat: 0, HasMessageFormat: true}
	if s.pick(8) == 0 {
		t.DeliveryID = uint32(s.u16())
	}
	st.nextDeliveryID[ch] = t.DeliveryID + 1
	t.DeliveryTag = binary.BigEndian.AppendUint32(nil, t.DeliveryID)
	return t
}

// fuzzPayload is a transfer's payload: a valid message, an empty one, or
// the input's bytes.
func fuzzPayload(s *source) []byte {
	switch s.pick(4) {
	case 0:
		return fuzzMessage(make([]byte, 16*int(s.pick(16))))
	case 1:
		// Addressed by properties.to (for the anonymous terminus), with
		// a time-to-live and a user-id.
		to := fuzzAddresses[s.pick(len(fuzzAddresses))]
		b := amqp10.AppendHeader(nil, &amqp10.Header{Durable: s.bit(), TTL: s.small(), HasTTL: s.bit()})
		b, err := amqp10.AppendProperties(b, &amqp10.Properties{To: &to, UserID: s.bytes(s.pick(8))})
		if err != nil {
			panic(err)
		}
		return amqp10.AppendData(b, s.bytes(int(s.byte())))
	case 2:
		return nil
	}
	return s.bytes(int(s.byte()))
}

// fuzzMessage is a durable message with application-properties and body.
func fuzzMessage(body []byte) []byte {
	b := amqp10.AppendHeader(nil, &amqp10.Header{Durable: true})
	b, err := amqp10.AppendApplicationProperties(b, amqp10.Map{{Key: "seq", Value: int64(len(body))}})
	if err != nil {
		panic(err)
	}
	return amqp10.AppendData(b, body)
}

// fuzzState is a disposition's state, an outcome most of the time.
func fuzzState(s *source) amqp10.DeliveryState {
	switch s.pick(6) {
	case 0:
		return amqp10.DeliveryState{}
	case 1:
		return amqp10.DeliveryState{Kind: amqp10.StateAccepted}
	case 2:
		return amqp10.DeliveryState{Kind: amqp10.StateRejected, Error: amqp10.Errorf("app:nope", "fuzz reject")}
	case 3:
		return amqp10.DeliveryState{Kind: amqp10.StateReleased}
	case 4:
		return amqp10.DeliveryState{Kind: amqp10.StateModified, DeliveryFailed: s.bit(), UndeliverableHere: s.bit()}
	}
	return amqp10.DeliveryState{Kind: amqp10.StateReceived, SectionNumber: s.small()}
}

// pipeListener hands out one connection, then blocks until closed.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener(c net.Conn) *pipeListener {
	l := &pipeListener{conns: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.conns <- c
	return l
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// addrConn is the broker's end of the pipe, with the peer address the
// input chose (loopback or not), which decides what guest may do.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// dlqForwarder is the fuzz broker's DeadLetterer: every message that dies
// in q or qq goes to queue dlq. The real dead-letterer lives above link; this one makes the
// reject, expiry and delivery-limit paths end in a queue as they would.
type dlqForwarder struct{ vh *router.VHost }

func (d *dlqForwarder) DeadLetter(src *router.Queue, dead []router.Dead) {
	q, ok := d.vh.Queue("dlq")
	if !ok || src == q {
		// dlq has no dead-letter exchange: its dead messages are dropped
		// (forwarding them to itself would loop on a message that dies
		// as it arrives, such as one with a TTL of 0).
		return
	}
	for i := range dead {
		m := dead[i].Msg
		q.Enqueue(&m)
	}
}

// echoManagement is the fuzz server's management node: it answers every
// request with an empty 200 response, so the /management link pair's
// plumbing in this package runs (the real node lives above link).
type echoManagement struct{}

func (echoManagement) Request(_ any, _ string, _ *router.VHost, req *amqp10.Message) []byte {
	b, err := amqp10.AppendApplicationProperties(nil, amqp10.Map{{Key: "http:response", Value: "200"}})
	if err != nil {
		panic(err)
	}
	b, err = amqp10.AppendAMQPValue(b, nil)
	if err != nil {
		panic(err)
	}
	return b
}

// newFuzzBroker is a router on the memory store with the queues the inputs name: q
// (classic, dead-lettering into dlq), qq (quorum, delivery limit 2, TTL
// 100 ms, dead-lettering into dlq) and dlq.
func newFuzzBroker(t *testing.T) (*router.Broker, *auth.Registry) {
	fwd := &dlqForwarder{}
	// The memory store commits synchronously, so the durable paths (a
	// publish accepted from the store's callback) run with no goroutine.
	rb := router.New(router.Options{DeadLetterer: fwd, Store: store.NewMemory()})
	users := auth.New(rb)
	users.SetLoginBrake(auth.NewLoginBrake(fuzzAuthFailureDelay, auth.DefaultLoginFailureSources, nil))
	users.SeedDefaults() // guest on / with full permissions, as at a broker's first start
	vh, ok := rb.VHost(router.DefaultVHost)
	if !ok {
		t.Fatal("no default vhost")
	}
	fwd.vh = vh
	dlx := amqp10.Map{{Key: "x-dead-letter-exchange", Value: ""}, {Key: "x-dead-letter-routing-key", Value: "dlq"}}
	for _, spec := range []router.QueueSpec{
		{Name: "dlq", Durable: true},
		{Name: "q", Durable: true, Arguments: dlx},
		{Name: "qq", Type: router.Quorum, Durable: true, Arguments: append(dlx,
			amqp10.KV{Key: "x-delivery-limit", Value: int64(2)}, amqp10.KV{Key: "x-message-ttl", Value: int64(100)})},
	} {
		if _, _, err := vh.DeclareQueue(spec); err != nil {
			t.Fatalf("declare %s: %v", spec.Name, err)
		}
	}
	return rb, users
}

// brokerReport is what the client saw the broker send.
type brokerReport struct {
	frames   int
	perfs    []string // the performatives received, by type name, with their error condition
	problems []string
}

// readBroker reads the broker's output to its end and checks every frame.
func readBroker(r io.Reader) brokerReport {
	var rep brokerReport
	buf := make([]byte, 0, 64<<10)
	tmp := make([]byte, 16<<10)
	for {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		for {
			if len(buf) >= 8 && string(buf[:4]) == "AMQP" {
				buf = buf[8:]
				continue
			}
			if len(buf) < 8 {
				break
			}
			fh, herr := amqp10.ParseFrameHeader(buf)
			if herr != nil {
				rep.problems = append(rep.problems, fmt.Sprintf("broker sent a bad frame header % x: %v", buf[:8], herr))
				return drain(r, rep)
			}
			if uint32(len(buf)) < fh.Size {
				break
			}
			body := buf[int(fh.DataOffset)*4 : fh.Size]
			rep.frames++
			if len(body) > 0 {
				perf, _, perr := amqp10.ParsePerformative(body)
				switch {
				case perr != nil:
					rep.problems = append(rep.problems, fmt.Sprintf("broker sent an undecodable frame % x: %v", body, perr))
				default:
					name := fmt.Sprintf("%T", perf)[len("*amqp10."):]
					if e := frameError(perf); e != nil {
						name += "(" + string(e.Condition) + ")"
					}
					rep.perfs = append(rep.perfs, name)
					if e := frameError(perf); e != nil && e.Condition == amqp10.ErrCondInternalError {
						rep.problems = append(rep.problems, fmt.Sprintf("broker answered %T with amqp:internal-error: %s", perf, e.Description))
					}
				}
			}
			buf = buf[fh.Size:]
		}
		if err != nil {
			return rep
		}
	}
}

// drain reads and discards the rest, so the broker's writes do not block.
func drain(r io.Reader, rep brokerReport) brokerReport {
	_, _ = io.Copy(io.Discard, r)
	return rep
}

// frameError is the error a performative carries, if any.
func frameError(p amqp10.Performative) *amqp10.Error {
	switch p := p.(type) {
	case *amqp10.Close:
		return p.Error
	case *amqp10.End:
		return p.Error
	case *amqp10.Detach:
		return p.Error
	case *amqp10.Disposition:
		return p.State.Error
	case *amqp10.Transfer:
		return p.State.Error
	}
	return nil
}

func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// runConnection serves one program on a fresh broker and checks it.
func runConnection(t *testing.T, data []byte) {
	if len(data) > fuzzMaxInput {
		return
	}
	runProgram(t, decodeProgram(data), len(data), nil)
}

// runProgram serves p on a fresh broker and checks it; inputLen sizes the
// allocation bound.
// check, if not nil, runs once the connection has ended, inside the bubble.
func runProgram(t *testing.T, p *program, inputLen int, check func(*testing.T, *router.Broker, brokerReport)) {
	before := heapAllocated()
	// The bubble's clock stands still while any of its goroutines runs, so
	// a connection that takes long in real time is busy, not waiting: a
	// livelock. Crash with every goroutine's stack, so the fuzzer keeps
	// the input and the stacks show where.
	watchdog := time.AfterFunc(livelockBound, func() {
		buf := make([]byte, 4<<20)
		panic(fmt.Sprintf("connection still running after %v of real time:\n%s", livelockBound, buf[:runtime.Stack(buf, true)]))
	})
	defer watchdog.Stop()
	synctest.Test(t, func(t *testing.T) {
		rb, users := newFuzzBroker(t)
		defer rb.Close()
		settings := config.Default().AMQP
		settings.HandshakeTimeout, settings.IdleTimeout = fuzzHandshakeTimeout, fuzzIdleTimeout
		settings.AutoCreateQueues = p.flags&flagAutoQ != 0
		srv := NewServer(Options{AMQP: settings, Router: rb, Auth: users, Management: echoManagement{}, Counters: NewCounters()})
		client, server := net.Pipe()
		remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
		if p.flags&flagRemote != 0 {
			remote = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
		}
		ln := newPipeListener(addrConn{Conn: server, remote: remote})
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		reported := make(chan brokerReport, 1)
		go func() { reported <- readBroker(client) }()

		chunks := rand.New(rand.NewPCG(p.chunkSeed, uint64(inputLen)))
		writeErr := writeProgram(client, p, chunks)
		inputEnd := time.Now()
		if p.flags&flagHangUp != 0 {
			client.Close()
		}
		var rep brokerReport
		select {
		case rep = <-reported:
		case <-time.After(connEndBound):
			t.Errorf("the connection was still open %v after the input ended (write error: %v)", connEndBound, writeErr)
			client.Close()
			rep = <-reported
		}
		// The broker closed its end: its connection goroutines must be
		// gone, with no help from Shutdown, once a failed login's delay is
		// over (fake time: the sleep costs nothing).
		client.Close()
		time.Sleep(authDelayBound)
		synctest.Wait()
		if n := srv.live.Load(); n != 0 {
			t.Errorf("%d connection(s) still live %v after the broker's end closed", n, time.Since(inputEnd))
		}
		for _, pr := range rep.problems {
			t.Error(pr)
		}
		if check != nil {
			check(t, rb, rep)
		}
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	if got, limit := heapAllocated()-before, allocBound(inputLen); got > limit {
		t.Errorf("serving a %d-byte input allocated %d bytes (bound %d)", inputLen, got, limit)
	}
}

// writeProgram writes the program's steps in random chunks. It stops at
// the first write error: the broker has closed the connection.
func writeProgram(w net.Conn, p *program, chunks *rand.Rand) error {
	for _, s := range p.steps {
		if s.pause {
			synctest.Wait()
			if s.sleep > 0 {
				time.Sleep(s.sleep)
			}
			continue
		}
		for b := s.data; len(b) > 0; {
			n := min(len(b), 1+chunks.IntN(chunkSizeFor(chunks)))
			if _, err := w.Write(b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
	}
	return nil
}

// chunkSizeFor picks the scale of the next chunk: single bytes, a frame
// header's worth, or large writes.
func chunkSizeFor(r *rand.Rand) int {
	return []int{1, 8, 64, 4096}[r.IntN(4)]
}

// FuzzConnection's seeds are the files in testdata/fuzz/FuzzConnection:
// connectionSeeds written out (seed-*, kept equal to it by
// TestConnectionSeedFilesAreCurrent) and the crashers found.
func FuzzConnection(f *testing.F) {
	f.Fuzz(runConnection)
}

// The committed seed files are connectionSeeds as the decoder reads them
// today: a change to the input format must rewrite them (EPITAPH_WRITE_SEEDS=1
// writes them), or they would silently stop being the sessions they name.
func TestConnectionSeedFilesAreCurrent(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzConnection")
	for _, s := range connectionSeeds() {
		path := filepath.Join(dir, "seed-"+s.name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.input)
		if os.Getenv("EPITAPH_WRITE_SEEDS") == "1" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("seed %s: %v", s.name, err)
			continue
		}
		if string(got) != want {
			t.Errorf("%s is not connectionSeeds' %q any more; rewrite with EPITAPH_WRITE_SEEDS=1", path, s.name)
		}
	}
}

// decodeSASLProgram builds a connection whose SASL exchange comes from the
// input: the flags byte, then the frame type, mechanism, initial response
// and hostname of a sasl-init (each length-prefixed), then a sasl-response
// and a raw tail; then the AMQP header, open and close as a client would
// send them after a successful outcome.
func decodeSASLProgram(data []byte) *program {
	s := &source{b: data}
	p := &program{flags: s.byte() &^ flagRaw}
	p.write(amqp10.ProtoHeaderSASL[:])
	typ := amqp10.FrameTypeSASL
	if s.pick(8) == 0 {
		typ = amqp10.FrameTypeAMQP
	}
	init := &amqp10.SASLInit{Mechanism: amqp10.Symbol(s.bytes(int(s.byte()) % 32))}
	init.InitialResponse = s.bytes(int(s.byte()))
	init.Hostname = string(s.bytes(int(s.byte()) % 32))
	p.frame(typ, 0, init, nil)
	if s.bit() {
		p.frame(amqp10.FrameTypeSASL, 0, &amqp10.SASLResponse{Response: s.bytes(int(s.byte()))}, nil)
	}
	p.write(s.bytes(int(s.byte()) % 64))
	p.write(amqp10.ProtoHeaderAMQP[:])
	p.frame(amqp10.FrameTypeAMQP, 0, &amqp10.Open{ContainerID: "fuzz", MaxFrameSize: 1 << 16}, nil)
	p.frame(amqp10.FrameTypeAMQP, 0, &amqp10.Close{}, nil)
	p.write(s.b)
	return p
}

func FuzzSASL(f *testing.F) {
	f.Add(saslSeed("PLAIN", "\x00guest\x00guest", 0))
	f.Add(saslSeed("PLAIN", "\x00guest\x00guest", flagRemote))
	f.Add(saslSeed("PLAIN", "guest\x00guest", 0))
	f.Add(saslSeed("PLAIN", "\x00nobody\x00x", 0))
	f.Add(saslSeed("ANONYMOUS", "", 0))
	f.Add(saslSeed("ANONYMOUS", "", flagRemote))
	f.Add(saslSeed("EXTERNAL", "", 0))
	f.Add(saslSeed("SCRAM-SHA-256", "n,,n=guest,r=abc", 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzMaxInput {
			return
		}
		runProgram(t, decodeSASLProgram(data), len(data), nil)
	})
}

// saslSeed is a FuzzSASL input with this mechanism and initial response.
func saslSeed(mech, resp string, flags byte) []byte {
	b := []byte{flags, 1, byte(len(mech))}
	b = append(b, mech...)
	b = append(b, byte(len(resp)))
	b = append(b, resp...)
	return append(b, 0, 0, 0)
}

// seed builds a FuzzConnection input: each method appends the bytes that
// decodeProgram reads for one operation.
type seed struct{ b []byte }

func newSeed(flags byte) *seed { return &seed{b: []byte{flags, 0, 0, 1, 7}} }

func (s *seed) op(code int, args ...byte) *seed {
	s.b = append(append(s.b, byte(code)), args...)
	return s
}

func (s *seed) open() *seed { return s.op(opOpen, 0, 0, 7, 0, 1) }

// begin on channel ch with windows of 2048.
func (s *seed) begin(ch byte) *seed { return s.op(opBegin, ch, 0, 8, 0, 8, 0, 0) }

// attach a link: publisher (we send) or consumer, to fuzzAddresses[addr].
func (s *seed) attach(ch, handle byte, consumer bool, addr byte) *seed {
	role := byte(0)
	if consumer {
		role = 1
	}
	return s.op(opAttach, ch, handle, role, addr, handle, 0, 0)
}

// credit grants credit on handle, expecting the broker's delivery-id next.
func (s *seed) credit(ch, handle, credit, next byte) *seed {
	return s.op(opFlow, ch, 8, 0, next, 1, 1, handle, 0, credit, 0, 0)
}

// publish n unsettled messages with 64-byte bodies on handle.
func (s *seed) publish(ch, handle byte, n int) *seed {
	for range n {
		s.op(opTransfer, ch, handle, 1, 0, 1, 1, 0, 4)
	}
	return s
}

// settle n deliveries from first with outcome (a fuzzState choice).
func (s *seed) settle(ch byte, first uint16, n byte, outcome byte) *seed {
	return s.op(opDisposition, ch, 0, byte(first>>8), byte(first), n-1, 1, outcome)
}

func (s *seed) sync() *seed             { return s.op(opSync) }
func (s *seed) sleep(units byte) *seed  { return s.op(opSleep, units) }
func (s *seed) detach(ch, h byte) *seed { return s.op(opDetach, ch, h, 1, 0) }
func (s *seed) end(ch byte) *seed       { return s.op(opEnd, ch, 0) }
func (s *seed) close() *seed            { return s.op(opClose, 0) }
func (s *seed) raw(b ...byte) *seed     { return s.op(opRawBytes, append([]byte{byte(len(b))}, b...)...) }
func (s *seed) garbage(b ...byte) *seed {
	return s.op(opGarbageFrame, append([]byte{0, 0, 0, 0, byte(len(b))}, b...)...)
}
func (s *seed) bytes() []byte { return s.b }

// Outcomes for seed.settle (fuzzState's choices).
const (
	outAccepted = 1
	outRejected = 2
	outReleased = 3
	outModified = 4
)

const (
	addrQ    = 0
	addrDLQ  = 1
	addrQQ   = 2
	addrMgmt = 6
)

// connectionSeeds are valid sessions (publish, consume, reject into the
// dead-letter queue, delivery limit and TTL on a quorum queue) and a few
// ways to end or break one.
func connectionSeeds() []namedSeed {
	anon := byte(flagSASL)
	plain := byte(flagSASL | 1<<4)
	publish := newSeed(anon).open().begin(0).attach(0, 0, false, addrQ).publish(0, 0, 5).sync().
		detach(0, 0).end(0).close()
	consume := newSeed(plain).open().begin(0).attach(0, 0, false, addrQ).publish(0, 0, 5).sync().
		attach(0, 1, true, addrQ).credit(0, 1, 10, 0).sync().settle(0, 0, 5, outAccepted).sync().
		detach(0, 1).end(0).close()
	rejectToDLQ := newSeed(anon).open().begin(0).attach(0, 0, false, addrQ).publish(0, 0, 5).sync().
		attach(0, 1, true, addrQ).credit(0, 1, 10, 0).sync().settle(0, 0, 5, outRejected).sync().
		attach(0, 2, true, addrDLQ).credit(0, 2, 10, 5).sync().settle(0, 5, 5, outAccepted).sync().
		close()
	quorum := newSeed(anon).open().begin(0).attach(0, 0, false, addrQQ).publish(0, 0, 3).sync().
		attach(0, 1, true, addrQQ).credit(0, 1, 10, 0).sync().settle(0, 0, 3, outModified).sync().
		settle(0, 3, 3, outReleased).sleep(10).begin(1).attach(1, 2, true, addrDLQ).credit(1, 2, 10, 0).sync().
		end(0).end(1).close()
	twoSessions := newSeed(0).open().begin(0).begin(1).attach(0, 0, false, addrQ).attach(1, 0, true, addrQ).
		credit(1, 0, 100, 0).publish(0, 0, 10).sync().settle(1, 0, 10, outAccepted).op(opMultiTransfer, 0, 0, 1, 8, 3).
		sync()
	silent := newSeed(anon).open().begin(0).attach(0, 0, true, addrQ).credit(0, 0, 1, 0)
	hangUp := newSeed(anon|flagHangUp).open().begin(0).attach(0, 0, false, addrQ).publish(0, 0, 2)
	remoteGuest := newSeed(plain | flagRemote).open().close()
	wrongPassword := newSeed(flagSASL | 2<<4).open().close()
	management := newSeed(anon).open().begin(0).attach(0, 0, false, addrMgmt).attach(0, 1, true, addrMgmt).
		publish(0, 0, 1).sync().close()
	garbage := newSeed(anon).open().begin(0).garbage(0x00, 0x53, 0x77).raw(0, 0, 0, 8, 2, 0, 0, 0).close()

	seeds := []namedSeed{{"publish", publish.bytes()}, {"consume", consume.bytes()},
		{"reject-to-dlq", rejectToDLQ.bytes()}, {"quorum-limit-ttl", quorum.bytes()},
		{"two-sessions", twoSessions.bytes()}, {"silent", silent.bytes()}, {"hang-up", hangUp.bytes()},
		{"remote-guest", remoteGuest.bytes()}, {"wrong-password", wrongPassword.bytes()},
		{"management", management.bytes()}, {"garbage", garbage.bytes()}}
	// The same sessions as raw bytes, for the raw mode.
	for _, s := range []namedSeed{seeds[0], seeds[2]} {
		p := decodeProgram(s.input)
		raw := []byte{flagRaw, 0, 0, 1, 7}
		for _, st := range p.steps {
			raw = append(raw, st.data...)
		}
		seeds = append(seeds, namedSeed{"raw-" + s.name, raw})
	}
	return seeds
}

type namedSeed struct {
	name  string
	input []byte
}

// The seeds get past the handshake and do what they are named for, so the
// fuzzer starts from real sessions: what the broker sent, and what the
// queues hold once the connection has ended.
func TestConnectionSeedsRunTheirSessions(t *testing.T) {
	want := map[string]struct {
		perfs      []string
		q, dlq, qq int
	}{
		"publish": {perfs: []string{"SASLMechanisms", "SASLOutcome", "Open", "Begin", "Attach", "Flow", "Disposition",
			"Detach", "End", "Close"}, q: 5},
		"consume": {perfs: []string{"SASLMechanisms", "SASLOutcome", "Open", "Begin", "Attach", "Flow", "Disposition",
			"Attach", "Transfer", "Transfer", "Transfer", "Transfer", "Transfer", "Detach", "End", "Close"}},
		"reject-to-dlq": {perfs: []string{"SASLMechanisms", "SASLOutcome", "Open", "Begin", "Attach", "Flow", "Disposition",
			"Attach", "Transfer", "Transfer", "Transfer", "Transfer", "Transfer",
			"Attach", "Transfer", "Transfer", "Transfer", "Transfer", "Transfer", "Close"}},
		"remote-guest":   {perfs: []string{"SASLMechanisms", "SASLOutcome"}},
		"wrong-password": {perfs: []string{"SASLMechanisms", "SASLOutcome"}},
		"silent": {perfs: []string{"SASLMechanisms", "SASLOutcome", "Open", "Begin", "Attach",
			"Close(amqp:resource-limit-exceeded)"}},
		"raw-publish": {perfs: []string{"SASLMechanisms", "SASLOutcome", "Open", "Begin", "Attach", "Flow", "Disposition",
			"Detach", "End", "Close"}, q: 5},
	}
	for _, s := range connectionSeeds() {
		w, ok := want[s.name]
		if !ok {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			runProgram(t, decodeProgram(s.input), len(s.input), func(t *testing.T, rb *router.Broker, rep brokerReport) {
				// Publish outcomes go out as one ranged disposition or as
				// several, depending on how the loop's input batches
				// fell: a run of dispositions compares as one.
				got := slices.CompactFunc(slices.Clone(rep.perfs), func(a, b string) bool { return a == "Disposition" && b == a })
				if fmt.Sprint(got) != fmt.Sprint(w.perfs) {
					t.Errorf("broker sent %v, want %v", rep.perfs, w.perfs)
				}
				vh, _ := rb.VHost(router.DefaultVHost)
				for name, n := range map[string]int{"q": w.q, "dlq": w.dlq, "qq": w.qq} {
					q, _ := vh.Queue(name)
					if got := q.Info().Messages; got != n {
						t.Errorf("queue %s holds %d messages, want %d", name, got, n)
					}
				}
			})
		})
	}
}
