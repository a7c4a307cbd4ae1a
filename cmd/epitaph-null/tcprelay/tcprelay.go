// Package tcprelay is the floor under the null broker: a process that
// speaks no AMQP at all and only relays raw bytes from a producer
// connection to a consumer connection. epitaph-perf's tcp-latency scenario
// drives it with the latency scenario's records and pacing, so the latency
// it measures is the machine's own for a message crossing one relay
// process on loopback: what no broker on this machine can beat.
//
// Each accepted connection first sends one byte, 'P' (producer) or 'C'
// (consumer). The relay pairs the next producer with the next consumer, in
// either order, and copies the producer's bytes to the consumer until
// either side closes; then it closes both. Any number of pairs may run at
// once. A connection whose first byte is anything else is closed. Bytes a
// consumer sends are read and dropped (reading is how its close is seen,
// paired or still waiting). A producer that closes while still waiting is
// seen only once paired, and then its partner is closed too.
package tcprelay

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Role bytes: the first byte a connection sends.
const (
	RoleProducer = 'P'
	RoleConsumer = 'C'
)

// roleTimeout bounds the wait for a connection's role byte.
const roleTimeout = 10 * time.Second

// bufSize is the relay's read buffer per pair.
const bufSize = 64 << 10

// Relay is a running TCP relay.
type Relay struct {
	ln  net.Listener
	log *slog.Logger
	wg  sync.WaitGroup

	mu        sync.Mutex
	conns     map[net.Conn]struct{} // every open connection, closed by Close
	producers []*end                // waiting for a consumer, oldest first
	consumers []*end                // waiting for a producer, oldest first
	done      bool
	closed    chan struct{} // closed by Close: waiting producers give up
}

// end is one connection of a pair, producer or consumer.
type end struct {
	nc     net.Conn
	peer   *end      // set under Relay.mu when paired
	paired chan *end // producer: gets its consumer when it had to wait (capacity 1)
}

// Listen starts a relay on addr (host:port; port 0 picks one). log gets a
// line for every connection closed for a bad role byte (nil: slog.Default).
func Listen(addr string, log *slog.Logger) (*Relay, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp relay: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Relay{ln: ln, log: log, conns: map[net.Conn]struct{}{}, closed: make(chan struct{})}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Serve is a helper for commands: it listens and reports the address on w
// with the same "amqp listening on HOST:PORT" line as the null broker and
// epitaph (though the relay speaks no AMQP), so whatever waits for that
// line to learn the port starts the relay unchanged.
func Serve(addr string, w io.Writer, log *slog.Logger) (*Relay, error) {
	r, err := Listen(addr, log)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(w, "amqp listening on %s\n", r.Addr()); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("tcp relay: reporting the address: %w", err)
	}
	return r, nil
}

// Addr is the listening address.
func (r *Relay) Addr() net.Addr { return r.ln.Addr() }

// Close stops listening, closes every connection and waits for the
// relay's goroutines to end.
func (r *Relay) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	if !r.done {
		r.done = true
		close(r.closed)
	}
	for nc := range r.conns {
		_ = nc.Close()
	}
	r.producers, r.consumers = nil, nil
	r.mu.Unlock()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		nc, err := r.ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		r.mu.Lock()
		if r.done {
			r.mu.Unlock()
			_ = nc.Close()
			return
		}
		r.conns[nc] = struct{}{}
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(nc)
	}
}

// drop closes nc and forgets it.
func (r *Relay) drop(nc net.Conn) {
	_ = nc.Close()
	r.mu.Lock()
	delete(r.conns, nc)
	r.mu.Unlock()
}

// serve reads nc's role byte and runs its side of the relay.
func (r *Relay) serve(nc net.Conn) {
	defer r.wg.Done()
	var role [1]byte
	_ = nc.SetReadDeadline(time.Now().Add(roleTimeout))
	if _, err := io.ReadFull(nc, role[:]); err != nil {
		r.drop(nc)
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	switch role[0] {
	case RoleProducer:
		r.produce(&end{nc: nc, paired: make(chan *end, 1)})
	case RoleConsumer:
		r.consume(&end{nc: nc})
	default:
		r.log.Info("tcp relay: closing a connection with a bad role byte", "remote", nc.RemoteAddr().String(), "byte", fmt.Sprintf("%q", role[0]))
		r.drop(nc)
	}
}

// match pairs e with the oldest end waiting in *others, or queues it in
// *mine and returns nil. It reports false when the relay is closed.
func (r *Relay) match(e *end, mine, others *[]*end) (*end, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil, false
	}
	if len(*others) == 0 {
		*mine = append(*mine, e)
		return nil, true
	}
	peer := (*others)[0]
	*others = (*others)[1:]
	e.peer, peer.peer = peer, e
	return peer, true
}

// produce pairs p with the oldest waiting consumer, or waits for the next
// one, then copies p's bytes to it until either side closes.
func (r *Relay) produce(p *end) {
	c, ok := r.match(p, &r.producers, &r.consumers)
	if !ok {
		r.drop(p.nc)
		return
	}
	if c == nil {
		select {
		case c = <-p.paired:
		case <-r.closed:
			r.drop(p.nc)
			return
		}
	}
	// Read and write through a user-space buffer, as a broker does
	// (io.Copy between two TCP connections would splice in the kernel).
	buf := make([]byte, bufSize)
	_, _ = io.CopyBuffer(onlyWriter{c.nc}, onlyReader{p.nc}, buf)
	r.drop(p.nc)
	r.drop(c.nc) // the consumer's goroutine sees the close and ends
}

// consume pairs c with the oldest waiting producer (whose goroutine then
// copies to c) or queues it, then reads from c, dropping what it sends,
// until c closes; then it closes c's producer if paired.
func (r *Relay) consume(c *end) {
	p, ok := r.match(c, &r.consumers, &r.producers)
	if !ok {
		r.drop(c.nc)
		return
	}
	if p != nil {
		p.paired <- c // never blocks: only this consumer pairs with p
	}

	_, _ = io.Copy(io.Discard, c.nc)

	r.mu.Lock()
	for i, w := range r.consumers {
		if w == c {
			r.consumers = append(r.consumers[:i:i], r.consumers[i+1:]...)
			break
		}
	}
	p = c.peer // set by a producer that paired with c after it waited
	r.mu.Unlock()
	r.drop(c.nc)
	if p != nil {
		r.drop(p.nc) // ends the producer's copy
	}
}

// onlyReader and onlyWriter hide a connection's ReadFrom and WriteTo, so
// io.CopyBuffer reads into and writes from its buffer.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
