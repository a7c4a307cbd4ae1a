package link

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// pipePeer is the client end of one broker connection over net.Pipe: the
// test writes frames and reads the broker's frames one by one. It runs
// inside a synctest bubble, so "the broker sent nothing more" is decided by
// synctest.Wait (every goroutine of the bubble blocked) instead of a
// timeout, and the bubble's end checks that the connection's goroutines
// are gone. The broker is newFuzzBroker's: queues q (dead-lettering into
// dlq), qq and dlq.
type pipePeer struct {
	t      testing.TB
	nc     net.Conn
	rb     *router.Broker
	srv    *Server
	in     chan wireFrame // what the broker sent, in order
	served chan error
	ln     net.Listener
	local  map[uint16]uint16 // our local channel by the peer's, of the sessions begun
	// bubble: the peer runs in a synctest bubble (over net.Pipe); else over
	// a real socket, where waiting for a frame is bounded in real time.
	bubble bool
	// gate, when set, holds the reader before its next frame until it is
	// closed: the broker's output then waits in the socket.
	gate atomic.Pointer[chan struct{}]
}

// wireFrame is one AMQP frame the broker sent; eof marks the end of its output.
type wireFrame struct {
	ch      uint16
	perf    amqp10.Performative
	payload []byte
	eof     bool
}

func (f wireFrame) String() string {
	if f.eof {
		return "end of output"
	}
	return fmt.Sprintf("%T on channel %d: %+v", f.perf, f.ch, f.perf)
}

// fuzzServer is newFuzzBroker's broker (queues q, qq and dlq) and the
// server options that serve it, the defaults otherwise: the one place that
// knows how these tests assemble a broker.
func fuzzServer(t *testing.T) (*router.Broker, Options) {
	rb, users := newFuzzBroker(t)
	return rb, Options{Router: rb, Auth: users}
}

// startPipePeer serves one connection of a fresh broker (fuzzServer) over
// net.Pipe and gets it through the header and open exchange (no SASL:
// anonymous, from loopback). Call it inside synctest.Test; the cleanup
// closes the connection and shuts the server down inside the bubble.
func startPipePeer(t *testing.T) *pipePeer {
	t.Helper()
	rb, opts := fuzzServer(t)
	return startPeer(t, rb, opts, pipeClient(), true)
}

// pipeTest runs body in a synctest bubble against a fresh pipe peer.
func pipeTest(t *testing.T, body func(t *testing.T, p *pipePeer)) {
	synctest.Test(t, func(t *testing.T) { body(t, startPipePeer(t)) })
}

// pipeEnds is one end of a connection and the listener that hands out
// the other.
type pipeEnds struct {
	client net.Conn
	ln     net.Listener
}

// pipeClient is a net.Pipe: the client's end, and a listener handing out the
// broker's end as if from loopback.
func pipeClient() pipeEnds {
	c, server := net.Pipe()
	return pipeEnds{c, newPipeListener(addrConn{Conn: server, remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}})}
}

// startPeer serves the connection of ends with a server of opts (on
// broker rb), and opens it from the client's end.
func startPeer(t testing.TB, rb *router.Broker, opts Options, ends pipeEnds, bubble bool) *pipePeer {
	t.Helper()
	client, ln := ends.client, ends.ln
	srv := NewServer(opts)
	p := &pipePeer{t: t, nc: client, rb: rb, srv: srv, in: make(chan wireFrame, 1<<14), served: make(chan error, 1),
		local: map[uint16]uint16{}, ln: ln, bubble: bubble}
	go func() { p.served <- srv.Serve(ln) }()
	go p.readBroker()
	t.Cleanup(p.shutdown)

	p.write(amqp10.ProtoHeaderAMQP[:])
	p.send(0, &amqp10.Open{ContainerID: "pipe-peer", MaxFrameSize: 1 << 16, ChannelMax: 15})
	expect[*amqp10.Open](p, 0)
	return p
}

// readBroker reads the broker's protocol header, then its frames, into
// p.in, heartbeats left out; the channel gets eof when the output ends.
func (p *pipePeer) readBroker() {
	r := bufio.NewReader(p.nc)
	defer func() { p.in <- wireFrame{eof: true} }()
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || hdr != amqp10.ProtoHeaderAMQP {
		return
	}
	for {
		if g := p.gate.Load(); g != nil {
			<-*g
		}
		fh, body, err := readFrame(r, 1<<20)
		if err != nil {
			return
		}
		if len(body) == 0 {
			continue // heartbeat
		}
		perf, payload, err := amqp10.ParsePerformative(body)
		if err != nil {
			p.in <- wireFrame{ch: fh.Channel, perf: nil, payload: body}
			continue
		}
		p.in <- wireFrame{ch: fh.Channel, perf: perf, payload: payload}
	}
}

func (p *pipePeer) write(b []byte) {
	p.t.Helper()
	if _, err := p.nc.Write(b); err != nil {
		p.t.Fatalf("write to the broker: %v", err)
	}
}

// send writes one frame.
func (p *pipePeer) send(ch uint16, perf amqp10.Performative) { p.sendPayload(ch, perf, nil) }

func (p *pipePeer) sendPayload(ch uint16, perf amqp10.Performative, payload []byte) {
	p.t.Helper()
	p.write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, ch, perf, payload))
}

// next is the broker's next frame; it fails the test when the broker,
// having handled everything sent to it, sends nothing more.
func (p *pipePeer) next() wireFrame {
	p.t.Helper()
	select {
	case f := <-p.in:
		return f
	default:
	}
	if !p.bubble {
		select {
		case f := <-p.in:
			return f
		case <-time.After(10 * time.Second):
			p.t.Fatal("the broker sent no frame within 10 s")
			return wireFrame{}
		}
	}
	synctest.Wait()
	select {
	case f := <-p.in:
		return f
	default:
		p.t.Fatal("the broker sent no frame")
		return wireFrame{}
	}
}

// await is the broker's next frame, waiting for it on the bubble's clock
// (timers in the broker fire as the clock moves), at most a minute.
func (p *pipePeer) await() wireFrame {
	p.t.Helper()
	select {
	case f := <-p.in:
		return f
	case <-time.After(time.Minute):
		p.t.Fatal("the broker sent no frame within a minute")
		return wireFrame{}
	}
}

// quiet fails the test if the broker, having handled everything sent to
// it, has sent a frame not yet read.
func (p *pipePeer) quiet() {
	p.t.Helper()
	synctest.Wait()
	select {
	case f := <-p.in:
		p.t.Fatalf("the broker sent %v, want nothing", f)
	default:
	}
}

// expect reads the broker's next frame, which must be a T on channel ch.
func expect[T amqp10.Performative](p *pipePeer, ch uint16) T {
	p.t.Helper()
	f := p.next()
	v, ok := f.perf.(T)
	if !ok || f.ch != ch {
		var want T
		p.t.Fatalf("the broker sent %v, want %T on channel %d", f, want, ch)
	}
	return v
}

// expectEOF waits for the end of the broker's output.
func (p *pipePeer) expectEOF() {
	p.t.Helper()
	if f := p.next(); !f.eof {
		p.t.Fatalf("the broker sent %v, want the end of its output", f)
	}
}

// begin starts a session on channel ch with the given incoming window and
// returns the channel the broker answered on, which its frames of the
// session use.
func (p *pipePeer) begin(ch uint16, incomingWindow uint32) uint16 {
	p.t.Helper()
	p.send(ch, &amqp10.Begin{IncomingWindow: incomingWindow, OutgoingWindow: 1 << 16, HandleMax: 255})
	f := p.next()
	if b, ok := f.perf.(*amqp10.Begin); !ok || b.RemoteChannel != ch {
		p.t.Fatalf("the broker answered begin on channel %d with %v", ch, f)
	}
	p.local[ch] = f.ch
	return f.ch
}

// attachPublisher attaches a link on which the peer publishes to address,
// and returns the broker's credit flow.
func (p *pipePeer) attachPublisher(ch uint16, handle uint32, address string) *amqp10.Flow {
	p.t.Helper()
	p.send(ch, &amqp10.Attach{Name: fmt.Sprintf("pub-%d-%d", ch, handle), Handle: handle, Role: amqp10.RoleSender,
		Source: &amqp10.Source{}, Target: &amqp10.Target{Address: address, HasAddress: true},
		InitialDeliveryCount: 0, HasInitialDeliveryCount: true})
	expect[*amqp10.Attach](p, p.local[ch])
	return expect[*amqp10.Flow](p, p.local[ch])
}

// attachConsumer attaches a link on which the broker sends from address;
// settled asks for pre-settled deliveries.
func (p *pipePeer) attachConsumer(ch uint16, handle uint32, address string, settled bool) {
	p.t.Helper()
	mode := amqp10.SndSettleMode(0) // unsettled
	if settled {
		mode = 1
	}
	p.send(ch, &amqp10.Attach{Name: fmt.Sprintf("sub-%d-%d", ch, handle), Handle: handle, Role: amqp10.RoleReceiver,
		SndSettleMode: mode, HasSndSettleMode: true,
		Source: &amqp10.Source{Address: address, HasAddress: true}, Target: &amqp10.Target{}})
	expect[*amqp10.Attach](p, p.local[ch])
}

// transfer publishes one single-frame message on handle.
func (p *pipePeer) transfer(ch uint16, handle, deliveryID uint32, settled bool, body string) {
	p.t.Helper()
	p.sendPayload(ch, &amqp10.Transfer{Handle: handle, DeliveryID: deliveryID, HasDeliveryID: true,
		DeliveryTag: []byte(fmt.Sprint(deliveryID)), HasMessageFormat: true, Settled: settled, HasSettled: true},
		amqp10.AppendData(nil, []byte(body)))
}

// fill publishes n pre-settled messages "m0.".."m<n-1>." to queue on a
// session of its own (channel 9), which it ends, and checks that the queue
// holds them.
func (p *pipePeer) fill(queue string, n int) { p.t.Helper(); p.fillSized(queue, n, 0) }

// fillSized is fill with messages padded to at least size bytes.
func (p *pipePeer) fillSized(queue string, n, size int) {
	p.t.Helper()
	const ch = 9
	p.begin(ch, 2048)
	p.attachPublisher(ch, 0, "/queues/"+queue)
	for i := range n {
		body := fmt.Sprintf("m%d.", i)
		p.transfer(ch, 0, uint32(i), true, body+strings.Repeat("x", max(size-len(body), 0)))
	}
	p.send(ch, &amqp10.End{})
	expect[*amqp10.End](p, p.local[ch])
	if got := p.queue(queue).Messages; got != n {
		p.t.Fatalf("queue %s holds %d messages, want %d", queue, got, n)
	}
}

// queue is the state of a queue of the broker.
func (p *pipePeer) queue(name string) router.QueueInfo {
	p.t.Helper()
	if p.bubble {
		synctest.Wait()
	}
	vh, _ := p.rb.VHost(router.DefaultVHost)
	q, ok := vh.Queue(name)
	if !ok {
		p.t.Fatalf("no queue %s", name)
	}
	return q.Info()
}

// closeConn sends close and expects the broker's close and the end of its output.
func (p *pipePeer) closeConn() {
	p.t.Helper()
	p.send(0, &amqp10.Close{})
	if c := expect[*amqp10.Close](p, 0); c.Error != nil {
		p.t.Fatalf("the broker closed with %v", c.Error)
	}
	p.expectEOF()
}

// shutdown ends the connection and the server; the bubble's end then
// checks that no goroutine is left.
func (p *pipePeer) shutdown() {
	p.nc.Close()
	p.ln.Close()
	if err := p.srv.Shutdown(context.Background()); err != nil {
		p.t.Errorf("shutdown: %v", err)
	}
	if err := <-p.served; !errors.Is(err, ErrServerClosed) {
		p.t.Errorf("serve: %v", err)
	}
	p.rb.Close()
}

// linkFlow is a link flow on handle from a peer that expects transfer
// nextIn next and has room for window more.
func linkFlow(handle, nextIn, window, deliveryCount, credit uint32) *amqp10.Flow {
	return &amqp10.Flow{NextIncomingID: nextIn, HasNextIncomingID: true, IncomingWindow: window,
		NextOutgoingID: 0, OutgoingWindow: 1 << 16, Handle: handle, HasHandle: true,
		DeliveryCount: deliveryCount, HasDeliveryCount: true, LinkCredit: credit, HasLinkCredit: true}
}
