package channel_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/channel"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
)

// benchBroker is a router on the memory store with an AMQP listener that
// serves 0-9-1 through channel.Server, on a loopback port.
func benchBroker(tb testing.TB) string {
	tb.Helper()
	rb := router.New(router.Options{Store: store.NewMemory()})
	users := auth.New(rb)
	users.SeedDefaults()
	srv := link.NewServer(link.Options{Router: rb, Auth: users,
		AMQP091: channel.NewServer(channel.Options{Router: rb, Auth: users, PermitTransientNonExclQueues: true})})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		_ = srv.Shutdown(tb.Context())
		_ = ln.Close()
		<-done
		rb.Close()
	})
	return ln.Addr().String()
}

// rawClient is a minimal AMQP 0-9-1 client on the codec: it writes frames
// through a buffered writer and reads them with a FrameReader, so that the
// client costs little next to the broker it measures.
type rawClient struct {
	tb testing.TB
	nc net.Conn
	w  *bufio.Writer
	br *bufio.Reader
	fr *amqp091.FrameReader
	b  []byte
	// seq is the last publish sequence number (confirm mode).
	seq uint64
}

func dialRaw(tb testing.TB, addr string) *rawClient {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = nc.Close() })
	br := bufio.NewReaderSize(nc, 64<<10)
	c := &rawClient{tb: tb, nc: nc, w: bufio.NewWriterSize(nc, 64<<10), br: br, fr: amqp091.NewFrameReader(br)}
	_, _ = c.w.WriteString("AMQP\x00\x00\x09\x01")
	_ = c.w.Flush()
	c.expect(0, &amqp091.ConnectionStart{})
	c.send(0, &amqp091.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US",
		ClientProperties: amqp091.Table{{Key: "capabilities", Value: amqp091.Table{{Key: "basic.nack", Value: true}}}}})
	var tune amqp091.ConnectionTune
	c.expect(0, &tune)
	c.send(0, &amqp091.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.fr.SetFrameMax(tune.FrameMax)
	c.send(0, &amqp091.ConnectionOpen{VirtualHost: "/"})
	c.expect(0, &amqp091.ConnectionOpenOk{})
	c.send(1, &amqp091.ChannelOpen{})
	c.expect(1, &amqp091.ChannelOpenOk{})
	return c
}

func (c *rawClient) send(ch uint16, m amqp091.Method) {
	b, err := amqp091.AppendMethodFrame(c.b[:0], ch, m)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.b = b
	_, _ = c.w.Write(b)
	if err := c.w.Flush(); err != nil {
		c.tb.Fatal(err)
	}
}

// expect reads the next frame, which must be method m on channel ch.
func (c *rawClient) expect(ch uint16, m amqp091.Method) {
	f, err := c.fr.ReadFrame()
	if err != nil {
		c.tb.Fatal(err)
	}
	cl, me, args, err := amqp091.ParseMethodHeader(f.Payload)
	if err != nil {
		c.tb.Fatal(err)
	}
	if wc, wm := m.ID(); f.Channel != ch || cl != wc || me != wm {
		c.tb.Fatalf("got %s on channel %d, want %s on %d", amqp091.MethodName(cl, me), f.Channel, amqp091.MethodName(wc, wm), ch)
	}
	if err := m.Decode(args); err != nil {
		c.tb.Fatal(err)
	}
}

// BenchmarkPublishDeliverAck is the 0-9-1 path end to end over loopback:
// one publisher connection in confirm mode with 100 messages in flight
// (mandatory, 1 KiB, persistent), one consumer connection with prefetch
// 1000 acknowledging each delivery. An operation is one message
// published, confirmed, delivered and acknowledged; allocations are the
// whole process's (broker and the two raw clients, which allocate almost
// nothing).
func BenchmarkPublishDeliverAck(b *testing.B) {
	r := newRoundTrip(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(r.body)))
	b.ResetTimer()
	r.run(b, b.N)
}

// roundTrip is a publisher (confirm mode) and a consumer (prefetch 1000)
// of one queue, each on its own connection.
type roundTrip struct {
	pub, sub    *rawClient
	props, body []byte
}

func newRoundTrip(tb testing.TB) *roundTrip {
	addr := benchBroker(tb)
	pub, sub := dialRaw(tb, addr), dialRaw(tb, addr)
	pub.send(1, &amqp091.QueueDeclare{Queue: "bench"})
	pub.expect(1, &amqp091.QueueDeclareOk{})
	pub.send(1, &amqp091.ConfirmSelect{})
	pub.expect(1, &amqp091.ConfirmSelectOk{})
	sub.send(1, &amqp091.BasicQos{PrefetchCount: 1000})
	sub.expect(1, &amqp091.BasicQosOk{})
	sub.send(1, &amqp091.BasicConsume{Queue: "bench", ConsumerTag: "c"})
	sub.expect(1, &amqp091.BasicConsumeOk{})
	props, err := (&amqp091.Properties{Flags: amqp091.FlagDeliveryMode | amqp091.FlagContentType,
		DeliveryMode: 2, ContentType: "application/octet-stream"}).Append(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &roundTrip{pub: pub, sub: sub, props: props, body: bytes.Repeat([]byte("x"), 1024)}
}

// run publishes n messages with 100 in flight, and consumes and
// acknowledges them one by one.
func (r *roundTrip) run(tb testing.TB, n int) {
	var wg sync.WaitGroup
	wg.Add(1)
	consumeErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		consumeErr <- r.sub.consume(n)
	}()
	if err := r.pub.publish(n, 100, r.props, r.body); err != nil {
		tb.Fatal(err)
	}
	wg.Wait()
	if err := <-consumeErr; err != nil {
		tb.Fatal(err)
	}
}

// maxAllocsPerMessage is what one message costs the whole process on the
// 0-9-1 path (publish, route, confirm, deliver, ack): the body's buffer
// (shared with the property octets), the publish's outcome closure, the
// routing keys, the message and its 0-9-1 container, and the queue's
// entry. Delivering, confirming and acknowledging allocate nothing.
const maxAllocsPerMessage = 6

// TestPublishDeliverAckAllocs pins the allocations of the 0-9-1 path end
// to end, counted over the whole process (broker and raw clients) for
// 1,000 messages at a time.
func TestPublishDeliverAckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	r := newRoundTrip(t)
	r.run(t, 2000) // warm up: buffers grown, goroutines started
	const n = 1000
	perMessage := testing.AllocsPerRun(5, func() { r.run(t, n) }) / n
	// Half an allocation of slack for what runs beside the path (the
	// runtime, timers); one more per message fails.
	if perMessage > maxAllocsPerMessage+0.5 {
		t.Errorf("%.2f allocations per message, want at most %d", perMessage, maxAllocsPerMessage)
	}
}

// publish sends n messages to the default exchange with routing key
// bench, at most window unconfirmed, and reads the confirms.
func (c *rawClient) publish(n, window int, props, body []byte) error {
	first, last := c.seq, c.seq+uint64(n)
	defer func() { c.seq = last }()
	confirms := make(chan uint64, 1024)
	readErr := make(chan error, 1)
	go func() {
		var ack amqp091.BasicAck
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				readErr <- err
				return
			}
			cl, me, args, err := amqp091.ParseMethodHeader(f.Payload)
			if err != nil || cl != amqp091.ClassBasic || me != amqp091.MethodBasicAck {
				readErr <- fmt.Errorf("publisher got %s (%v)", amqp091.MethodName(cl, me), err)
				return
			}
			if err := ack.Decode(args); err != nil {
				readErr <- err
				return
			}
			confirms <- ack.DeliveryTag // multiple or not: everything up to it is confirmed
			if ack.DeliveryTag == last {
				readErr <- nil
				return
			}
		}
	}()
	m := &amqp091.BasicPublish{RoutingKey: "bench", Mandatory: true}
	sent, confirmed := first, first
	buf := make([]byte, 0, 64<<10)
	for sent < last {
		for sent < last && sent-confirmed < uint64(window) {
			var err error
			if buf, err = amqp091.AppendMethodFrame(buf, 1, m); err != nil {
				return err
			}
			buf = append(buf, amqp091.FrameHeader, 0, 1, 0, 0, 0, byte(12+len(props)), 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, byte(len(body)>>8), byte(len(body)))
			buf = append(buf, props...)
			buf = append(buf, amqp091.FrameEnd)
			buf = amqp091.AppendBodyFrames(buf, 1, 131072, body)
			sent++
		}
		if _, err := c.nc.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
		select {
		case t := <-confirms:
			confirmed = max(confirmed, t)
		case err := <-readErr:
			if err != nil {
				return err
			}
			return nil
		}
	drain:
		for {
			select {
			case t := <-confirms:
				confirmed = max(confirmed, t)
			default:
				break drain
			}
		}
	}
	return <-readErr
}

// consume reads n deliveries and acknowledges each, one write per batch
// of frames already read.
func (c *rawClient) consume(n int) error {
	out := make([]byte, 0, 16<<10)
	var (
		deliver amqp091.BasicDeliver
		ack     amqp091.BasicAck
		got     int
	)
	br := c.fr
	for got < n {
		f, err := br.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type != amqp091.FrameMethod {
			continue // header and body
		}
		cl, me, args, err := amqp091.ParseMethodHeader(f.Payload)
		if err != nil {
			return err
		}
		if cl != amqp091.ClassBasic || me != amqp091.MethodBasicDeliver {
			return fmt.Errorf("consumer got %s", amqp091.MethodName(cl, me))
		}
		if err := deliver.Decode(args); err != nil {
			return err
		}
		got++
		ack.DeliveryTag = deliver.DeliveryTag
		if out, err = amqp091.AppendMethodFrame(out, 1, &ack); err != nil {
			return err
		}
		if len(out) > 8<<10 || got == n || c.idle() {
			if _, err := c.nc.Write(out); err != nil {
				return err
			}
			out = out[:0]
		}
	}
	return nil
}

// idle reports whether the reader holds no more buffered input (so the
// acks gathered so far should go out now).
func (c *rawClient) idle() bool { return c.br.Buffered() == 0 }
