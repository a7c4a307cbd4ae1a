package link

import (
	"bytes"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// Every test of this package runs with the ownership checks on: a broken
// rule panics in the goroutine that broke it, which fails the test binary
// with that goroutine's stack.
// Benchmarks run with them off (benchAsProduction), as a production build does.
func init() {
	ownerChecks = checks
	benchAsProduction = func(b *testing.B) {
		ownerChecks = nil
		b.Cleanup(func() { ownerChecks = checks })
	}
}

var checks = &ownerRecorder{loops: map[*conn]uint64{}, claimedOut: map[*outbuf]bool{}, writers: map[*outbuf]uint64{}}

// ownerRecorder implements the checks of owner.go. Only connections
// started by serve are checked (claimLoop): the unit tests that build a
// conn by hand drive its parts from the test's goroutine.
type ownerRecorder struct {
	mu         sync.Mutex
	loops      map[*conn]uint64   // the loop goroutine of each conn being served
	claimedOut map[*outbuf]bool   // their output
	writers    map[*outbuf]uint64 // the goroutine that last took busy
	// Socket writes checked, by the loop (inline) and by the writer.
	loopWrites, writerWrites atomic.Int64
}

// goroutineID is the calling goroutine's id, from its stack header
// ("goroutine 18 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, err := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("cannot parse goroutine id from %q", buf[:]))
	}
	return id
}

func (r *ownerRecorder) claimLoop(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loops[c] = goroutineID()
	r.claimedOut[&c.out] = true
}

func (r *ownerRecorder) endLoop(c *conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.loops, c)
	delete(r.claimedOut, &c.out)
	delete(r.writers, &c.out)
}

func (r *ownerRecorder) inLoop(c *conn, what string) {
	r.mu.Lock()
	owner, ok := r.loops[c]
	r.mu.Unlock()
	if g := goroutineID(); ok && g != owner {
		panic(fmt.Sprintf("link: %s on goroutine %d, but the connection's loop is goroutine %d", what, g, owner))
	}
}

func (r *ownerRecorder) tookWrite(o *outbuf) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writers[o] = goroutineID()
}

func (r *ownerRecorder) writing(o *outbuf, byLoop bool) {
	o.mu.Lock()
	busy := o.busy
	o.mu.Unlock()
	r.mu.Lock()
	claimed, holder := r.claimedOut[o], r.writers[o]
	r.mu.Unlock()
	if !claimed {
		return
	}
	if g := goroutineID(); !busy || g != holder {
		panic(fmt.Sprintf("link: socket write on goroutine %d (by the loop: %v), but busy is %v, taken by goroutine %d",
			g, byLoop, busy, holder))
	}
	if byLoop {
		r.loopWrites.Add(1)
	} else {
		r.writerWrites.Add(1)
	}
}

// panicOn runs f on a goroutine of its own and returns what it panicked with.
func panicOn(f func()) (msg string) {
	done := make(chan string)
	go func() {
		defer func() { done <- fmt.Sprint(recover()) }()
		f()
	}()
	return <-done
}

// The checks catch what they are for: loop state used from another
// goroutine, and a socket write by a goroutine that does not hold busy.
func TestOwnerChecksCatchForeignGoroutines(t *testing.T) {
	c := &conn{out: outbuf{wake: make(chan struct{}, 1), low: make(chan struct{}, 1)}}
	checks.claimLoop(c) // this goroutine is c's loop
	defer checks.endLoop(c)
	c.write(0, &amqp10.Close{}, nil) // the owner may
	if msg := panicOn(func() { c.write(0, &amqp10.Close{}, nil) }); !strings.Contains(msg, "write on goroutine") {
		t.Fatalf("a write from another goroutine panicked with %q", msg)
	}
	if msg := panicOn(func() { c.deliverMail() }); !strings.Contains(msg, "deliverMail on goroutine") {
		t.Fatalf("deliverMail from another goroutine panicked with %q", msg)
	}

	o := &c.out
	if msg := panicOn(func() { checks.writing(o, false) }); !strings.Contains(msg, "busy is false") {
		t.Fatalf("a socket write without busy panicked with %q", msg)
	}
	o.mu.Lock()
	o.busy = true
	checks.tookWrite(o) // this goroutine holds the socket
	o.mu.Unlock()
	checks.writing(o, true)
	if msg := panicOn(func() { checks.writing(o, false) }); !strings.Contains(msg, "busy is true, taken by goroutine") {
		t.Fatalf("a socket write while another goroutine holds busy panicked with %q", msg)
	}
}

// Over a real socket both writers write: the loop inline while the writer
// is idle, the writer what a full socket did not take (the client stops
// reading until the writer has had to write). Every write is checked
// against the hand-off, and every use of loop state against the owner,
// with the whole protocol path (publish, deliver, flow) running.
func TestOwnerChecksHoldOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	loopBefore, writerBefore := checks.loopWrites.Load(), checks.writerWrites.Load()
	rb, opts := fuzzServer(t)
	p := startPeer(t, rb, opts, pipeEnds{client, ln}, false)
	// More than the socket's buffers hold (a few MiB on Linux loopback).
	const n, size = 200, 60 << 10
	p.fillSized("q", n, size)
	lc := p.consume(0, 2048, "q", true)
	gate := make(chan struct{})
	p.gate.Store(&gate)
	p.send(0, linkFlow(1, 0, 2048, 0, n))
	for deadline := time.Now().Add(10 * time.Second); checks.writerWrites.Load() == writerBefore; {
		if time.Now().After(deadline) {
			t.Fatal("the writer made no write within 10 s while the client read nothing")
		}
		time.Sleep(time.Millisecond) // polling, with the deadline above
	}
	p.gate.Store(nil)
	close(gate)
	p.expectDeliveries(lc, 0, n, true)
	p.closeConn()
	byLoop, byWriter := checks.loopWrites.Load()-loopBefore, checks.writerWrites.Load()-writerBefore
	t.Logf("checked socket writes: %d by the loop, %d by the writer", byLoop, byWriter)
	if byLoop == 0 {
		t.Fatalf("no socket write by the loop (the writer made %d): the hand-off was not exercised", byWriter)
	}
}
