package tcprelay

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"
)

func start(t *testing.T) *Relay {
	t.Helper()
	r, err := Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// dial connects and sends role (nothing when role is 0).
func dial(t *testing.T, r *Relay, role byte) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if role != 0 {
		if _, err := nc.Write([]byte{role}); err != nil {
			t.Fatal(err)
		}
	}
	return nc
}

// waitEOF reads from nc until the relay closes it.
func waitEOF(t *testing.T, nc net.Conn, what string) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	// a reset when the relay closed with bytes of ours unread
	if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: %v; want the relay to close it", what, err)
	}
}

// relays checks that bytes written on p arrive on c.
func relays(t *testing.T, p, c net.Conn, msg string) {
	t.Helper()
	werr := make(chan error, 1)
	go func() { _, err := p.Write([]byte(msg)); werr <- err }() // may block until the consumer reads
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("consumer read: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("producer write: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("consumer got %q; want %q", got, msg)
	}
}

func waiting(r *Relay) (producers, consumers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.producers), len(r.consumers)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Producer first or consumer first, the pair relays the producer's bytes;
// when the producer closes, the relay closes the consumer.
func TestPairsEitherOrder(t *testing.T) {
	r := start(t)
	for _, first := range []byte{RoleProducer, RoleConsumer} {
		var p, c net.Conn
		if first == RoleProducer {
			p = dial(t, r, RoleProducer)
			waitFor(t, "the producer to wait", func() bool { n, _ := waiting(r); return n == 1 })
			c = dial(t, r, RoleConsumer)
		} else {
			c = dial(t, r, RoleConsumer)
			waitFor(t, "the consumer to wait", func() bool { _, n := waiting(r); return n == 1 })
			p = dial(t, r, RoleProducer)
		}
		relays(t, p, c, "hello")
		relays(t, p, c, string(bytes.Repeat([]byte{0, 'P', 'C', 0xff}, 100000))) // larger than the relay's buffer
		p.Close()
		waitEOF(t, c, "consumer after its producer closed")
	}
}

// A bad role byte closes that connection; the relay goes on pairing.
func TestBadRoleByteClosesConnection(t *testing.T) {
	r := start(t)
	for _, bad := range [][]byte{{'X'}, {0}, {'p'}, []byte("AMQP\x00\x01\x00\x00")} {
		nc := dial(t, r, 0)
		if _, err := nc.Write(bad); err != nil {
			t.Fatal(err)
		}
		waitEOF(t, nc, "a connection with role byte "+string(bad[:1]))
	}
	if p, c := waiting(r); p+c != 0 {
		t.Fatalf("%d producers and %d consumers waiting after bad role bytes; want none", p, c)
	}
	p := dial(t, r, RoleProducer)
	c := dial(t, r, RoleConsumer)
	relays(t, p, c, "still serving")
}

// A consumer that closes while waiting is not paired with the next
// producer; closing the consumer of a pair closes its producer.
func TestConsumerClose(t *testing.T) {
	r := start(t)
	gone := dial(t, r, RoleConsumer)
	waitFor(t, "the consumer to wait", func() bool { _, n := waiting(r); return n == 1 })
	gone.Close()
	waitFor(t, "the closed consumer to be forgotten", func() bool { _, n := waiting(r); return n == 0 })

	p := dial(t, r, RoleProducer)
	c := dial(t, r, RoleConsumer)
	relays(t, p, c, "after a closed consumer")
	c.Close()
	waitEOF(t, p, "producer after its consumer closed")
}

// Several pairs relay at once, each to its own consumer.
func TestConcurrentPairs(t *testing.T) {
	r := start(t)
	const n = 4
	var ps, cs [n]net.Conn
	for i := range n {
		cs[i] = dial(t, r, RoleConsumer)
		waitFor(t, "the consumer to wait", func() bool { _, w := waiting(r); return w == i+1 })
	}
	for i := range n {
		ps[i] = dial(t, r, RoleProducer)
		waitFor(t, "the pair to form", func() bool { _, w := waiting(r); return w == n-i-1 })
	}
	// pairs form in order: the i-th producer with the i-th consumer
	for i := range n {
		relays(t, ps[i], cs[i], "pair "+string(rune('0'+i)))
	}
}

// Close ends waiting and paired connections and returns.
func TestCloseWithOpenConnections(t *testing.T) {
	r, err := Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	prod := dial(t, r, RoleProducer)
	cons := dial(t, r, RoleConsumer)
	relays(t, prod, cons, "paired")
	waiter := dial(t, r, RoleProducer)
	waitFor(t, "the producer to wait", func() bool { n, _ := waiting(r); return n == 1 })
	silent := dial(t, r, 0) // no role byte
	waitFor(t, "the silent connection to be accepted", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.conns) == 4 })
	done := make(chan error, 1)
	go func() { done <- r.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return")
	}
	for _, nc := range []net.Conn{waiter, prod, cons, silent} {
		waitEOF(t, nc, "a connection after Close")
	}
}
