package link

import (
	"testing"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// benchAsProduction, when set (owner_test.go), turns the test-only checks
// off for a benchmark, so that its figures are a production build's.
var benchAsProduction func(b *testing.B)

// The loop's output path for replies: a flow and a run of publish
// outcomes encoded, then handed to the writer (no socket: the hand-off
// itself, as when the writer is busy).
func BenchmarkConnWriteFlush(b *testing.B) {
	if benchAsProduction != nil {
		benchAsProduction(b)
	}
	c := &conn{out: outbuf{wake: make(chan struct{}, 1), low: make(chan struct{}, 1)}}
	f := &amqp10.Flow{NextIncomingID: 1, HasNextIncomingID: true, IncomingWindow: 2048, OutgoingWindow: 2048,
		Handle: 1, HasHandle: true, DeliveryCount: 10, HasDeliveryCount: true, LinkCredit: 100, HasLinkCredit: true}
	id := uint32(0)
	b.ReportAllocs()
	for b.Loop() {
		c.write(0, f, nil)
		for range 4 {
			c.accepted(0, id, true)
			id++
		}
		c.flushOut()
		c.out.buf, c.out.queued = c.out.buf[:0], 0
	}
}

// A message published and delivered through one connection over
// net.Pipe: the reader, the loop, the router and the writer, per message.
func BenchmarkPipePublishDeliver(b *testing.B) {
	if benchAsProduction != nil {
		benchAsProduction(b)
	}
	// fuzzServer's t only reports a failed setup, which would panic here.
	rb, opts := fuzzServer(new(testing.T))
	p := startPeer(b, rb, opts, pipeClient(), false)
	p.begin(0, 1<<31)
	p.attachPublisher(0, 0, "/queues/q")
	p.attachConsumer(0, 1, "/queues/q", true)
	p.send(0, linkFlow(1, 0, 1<<31, 0, 1<<31))
	got := make(chan int)
	go func() {
		n := 0
		for f := range p.in {
			if f.eof {
				break
			}
			if _, ok := f.perf.(*amqp10.Transfer); ok {
				n++
				if n == b.N {
					break
				}
			}
		}
		got <- n
	}()
	body := amqp10.AppendData(nil, make([]byte, 100))
	tr := &amqp10.Transfer{Handle: 0, HasDeliveryID: true, DeliveryTag: []byte("t"), HasMessageFormat: true,
		Settled: true, HasSettled: true}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		tr.DeliveryID = uint32(i)
		p.sendPayload(0, tr, body)
	}
	if n := <-got; n != b.N {
		b.Fatalf("%d deliveries, want %d", n, b.N)
	}
	b.StopTimer()
}
