package nullbroker

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

func (q *fifo) consumerCount() int { q.mu.Lock(); defer q.mu.Unlock(); return len(q.consumers) }

// A consumer that closes its connection (without detaching first, as the
// fast engine does) must stop taking messages as soon as the broker handles
// the close, not only once the connection's writer has drained: messages
// fed to it after the close are lost (the peer stops reading at the close
// reply). Here the consumer never reads, so the broker's writer stays
// blocked on a full socket and the connection cannot finish closing; the
// consumer must still be gone, and later publishes must stay queued.
func TestCloseRemovesConsumersAtOnce(t *testing.T) {
	s, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := "amqp://" + s.Addr().String()

	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	b := append([]byte(nil), amqp10.ProtoHeaderAMQP[:]...)
	b = amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Open{ContainerID: "close-test", MaxFrameSize: 1 << 20}, nil)
	b = amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Begin{IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, HandleMax: 1}, nil)
	b = amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Attach{Name: "c", Handle: 0, Role: amqp10.RoleReceiver,
		Source: &amqp10.Source{Address: "q", HasAddress: true}}, nil)
	b = amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, 0, &amqp10.Flow{NextIncomingID: 0, HasNextIncomingID: true,
		IncomingWindow: 1 << 20, OutgoingWindow: 1 << 20, Handle: 0, HasHandle: true, DeliveryCount: 0, HasDeliveryCount: true,
		LinkCredit: 100000, HasLinkCredit: true}, nil)
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the consumer to attach", func() bool { return s.q.consumerCount() == 1 })

	// More than the socket buffers hold, all for the consumer, which does
	// not read: the broker's writer for it blocks.
	fill := func(size int, count uint64) {
		t.Helper()
		res, err := perf.Run(context.Background(), perf.Config{Engine: "fast", Scenario: "fill", URL: url, Target: "q", Source: "q",
			Size: size, Count: count, Window: 20, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || res.PubAccepted != count {
			t.Fatalf("fill: %+v", res)
		}
	}
	fill(256<<10, 128)
	if n := s.Len(); n != 0 {
		t.Fatalf("%d messages queued; want all delivered to the consumer", n)
	}

	if _, err := nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, &amqp10.Close{}, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the closed connection's consumer to be removed", func() bool { return s.q.consumerCount() == 0 })
	fill(100, 10)
	if n := s.Len(); n != 10 {
		t.Errorf("%d messages queued after the consumer closed; want 10", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
