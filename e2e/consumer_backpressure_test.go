package e2e

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
)

// A connection's encoded output is bounded: credit lets a queue hand a
// consumer many deliveries, but they are encoded only as the socket drains.
// A consumer that reads is never cut off (a cut counts as a failed delivery
// and would dead-letter its messages at the delivery limit); a consumer that
// takes nothing for write-timeout is cut, as a lost connection.

const (
	backlogCount = 2000
	backlogSize  = 64 << 10
)

// fillBacklog publishes n messages of size bytes (the body starts with the
// message's index) to queue, pre-settled, and waits until all are queued.
func fillBacklog(t *testing.T, b *epitaph.Broker, queue string, n, size int) {
	t.Helper()
	c := dial(t, b, nil)
	snd := sender(t, session(t, c), "/queues/"+queue,
		&amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
	payload := make([]byte, size)
	for i := range n {
		binary.BigEndian.PutUint32(payload, uint32(i))
		require.NoError(t, snd.Send(ctxT(t), amqp.NewMessage(payload), nil))
	}
	eventually(t, "the backlog queued", func() bool { return queueLen(t, b, queue) == n })
	require.NoError(t, c.Close())
}

// consumeAll receives n messages on a fresh go-amqp connection with credit
// n, accepting each, and checks every index arrives once with the given
// delivery-count; the connection must stay up throughout.
func consumeAll(t *testing.T, b *epitaph.Broker, queue string, n int, wantDeliveryCount uint32) {
	t.Helper()
	c := dial(t, b, nil)
	r := receiver(t, session(t, c), "/queues/"+queue, &amqp.ReceiverOptions{Credit: int32(n)})
	seen := make([]bool, n)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for range n {
		m, err := r.Receive(ctx, nil)
		require.NoError(t, err, "the consumer was cut off")
		data := m.GetData()
		require.GreaterOrEqual(t, len(data), 4)
		i := binary.BigEndian.Uint32(data)
		require.Less(t, int(i), n)
		require.False(t, seen[i], "message %d delivered twice", i)
		seen[i] = true
		require.NotNil(t, m.Header)
		require.Equal(t, wantDeliveryCount, m.Header.DeliveryCount, "message %d", i)
		require.NoError(t, r.AcceptMessage(ctx, m))
	}
	select {
	case <-c.Done():
		t.Fatalf("the connection was closed: %v", c.Err())
	default:
	}
	eventually(t, "the queue drained", func() bool { return queueLen(t, b, queue) == 0 })
}

// A go-amqp receiver with credit 2000 on a quorum queue of 2,000 x 64 KiB
// messages, reading and accepting normally, gets every message once, on
// one connection, and nothing is dead-lettered. (It was cut as a "slow
// consumer" as soon as a credit's worth of deliveries, 128 MiB, was
// encoded.)
func TestConsumerWithLargeCreditIsNotCutOff(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"big","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-delivery-limit":2,
		 "x-dead-letter-exchange":"","x-dead-letter-routing-key":"big.dlq"}},
		{"name":"big.dlq","vhost":"/","durable":true,"arguments":{}}]}`)
	fillBacklog(t, b, "big", backlogCount, backlogSize)
	consumeAll(t, b, "big", backlogCount, 0)
	assert.Zero(t, queueLen(t, b, "big.dlq"), "dead-lettered")
	st := b.DeadLetters().QueueStats("/", "big")
	assert.Empty(t, st, "dead-letter counters of big")
}

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rawConsumer attaches an unsettled raw receiver to queue on a raw
// connection (max-frame-size 64 KiB) and grants it credit; it reads
// nothing after the attach.
func rawConsumer(t *testing.T, b *epitaph.Broker, queue string, settled bool, credit uint32) *rawConn {
	t.Helper()
	r := rawDial(t, b)
	r.open()
	r.write(0, &amqp10.Begin{NextOutgoingID: 0, IncomingWindow: 1 << 20, OutgoingWindow: 1000, HandleMax: 10})
	expectFrame[*amqp10.Begin](r)
	mode := amqp10.SndUnsettled
	if settled {
		mode = amqp10.SndSettled
	}
	r.write(0, &amqp10.Attach{Name: "raw-consumer", Handle: 0, Role: amqp10.RoleReceiver,
		SndSettleMode: mode, HasSndSettleMode: true,
		RcvSettleMode: amqp10.RcvFirst, HasRcvSettleMode: true,
		Source: &amqp10.Source{Address: "/queues/" + queue, HasAddress: true},
		Target: &amqp10.Target{}})
	expectFrame[*amqp10.Attach](r)
	r.write(0, &amqp10.Flow{NextIncomingID: 0, HasNextIncomingID: true, IncomingWindow: 1 << 20,
		NextOutgoingID: 0, OutgoingWindow: 1000, Handle: 0, HasHandle: true,
		DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: credit, HasLinkCredit: true})
	return r
}

// A consumer that grants credit for 128 MiB of messages and never reads:
// the broker's heap grows by no more than a bounded margin (the output
// bound plus scratch, far below the 128 MiB that used to be encoded), and
// after write-timeout the connection is closed as lost: every message
// returns to the queue with its delivery-count incremented.
func TestConsumerThatStopsReadingIsCutAfterWriteTimeout(t *testing.T) {
	// Long enough that the go-amqp consumer that drains the queue after the
	// cut, on the same broker, is never starved that long on a loaded
	// machine (1 s was: its connection was reset once under load).
	const writeTimeout = 3 * time.Second
	b := startBroker(t, `{"queues":[{"name":"stall","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum"}}]}`,
		func(o *epitaph.Options) { o.WriteTimeout = writeTimeout })
	fillBacklog(t, b, "stall", backlogCount, backlogSize)
	q, ok := rootVHost(t, b).Queue("stall")
	require.True(t, ok)
	base := liveHeap()

	start := time.Now()
	r := rawConsumer(t, b, "stall", false, backlogCount)
	eventually(t, "the deliveries handed out", func() bool { return q.Len() == 0 })
	// While the broker waits for the peer, sample its live heap. Bound:
	// 1 MiB hard cap plus one delivery of encoded output, plus per-delivery
	// state (unsettled windows, mail), a few hundred KiB; the margin is wide
	// for the runtime's own noise and still an eighth of a credit's worth.
	const margin = 16 << 20
	var peak uint64
	deadline := time.Now().Add(30 * time.Second)
	for q.Len() < backlogCount {
		peak = max(peak, liveHeap())
		require.True(t, time.Now().Before(deadline), "the stalled consumer was never cut off")
		time.Sleep(20 * time.Millisecond) // sampling interval
	}
	cut := time.Since(start)
	t.Logf("live heap %d MiB before, peak %d MiB while stalled; cut after %v",
		base>>20, peak>>20, cut.Round(time.Millisecond))
	assert.Less(t, int64(peak)-int64(base), int64(margin), "encoded output held for a consumer that does not read")
	assert.GreaterOrEqual(t, cut, writeTimeout, "cut before the write timeout")

	// The socket is closed: what the kernel held drains, then EOF.
	require.NoError(t, r.nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := io.Copy(io.Discard, r.nc)
	if err != nil {
		var ne net.Error
		require.ErrorAs(t, err, &ne, "the broker closed the socket (a reset is fine too)")
		require.False(t, ne.Timeout(), "the socket stayed open")
	}
	// A lost connection counts a failed delivery on each message.
	consumeAll(t, b, "stall", backlogCount, 1)
}

// slowReader is a net.Conn that takes at most chunk bytes from the socket
// at a time, each after a pause: a consumer that keeps reading, slowly.
type slowReader struct {
	net.Conn
	chunk int
	pause time.Duration
	buf   []byte
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		time.Sleep(s.pause) // the reader's pace, the behaviour under test
		b := make([]byte, s.chunk)
		n, err := s.Conn.Read(b)
		if n == 0 {
			return 0, err
		}
		s.buf = b[:n]
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// A consumer that reads 4 KiB every 10 ms (about 400 KB/s) takes much
// longer than write-timeout to drain what waits for it (the writer's 128
// KiB writes take about 320 ms each), yet makes progress within every
// time-out: it is never cut, and gets every message.
func TestSlowConsumerIsNotCut(t *testing.T) {
	const (
		n    = 40
		size = 16 << 10
	)
	b := startBroker(t, `{"queues":[{"name":"slow","vhost":"/","durable":true,"arguments":{}}]}`,
		func(o *epitaph.Options) { o.WriteTimeout = 250 * time.Millisecond })
	fillBacklog(t, b, "slow", n, size)
	r := rawConsumer(t, b, "slow", true, n)
	r.nc = &slowReader{Conn: r.nc, chunk: 4 << 10, pause: 10 * time.Millisecond}
	require.NoError(t, r.nc.SetDeadline(time.Now().Add(60*time.Second)))
	start := time.Now()
	for i := range n {
		tr, payload := expectFrame[*amqp10.Transfer](r)
		require.False(t, tr.More, "message %d fits a frame", i)
		require.Greater(t, len(payload), size)
	}
	t.Logf("%d x %d KiB read in %v", n, size>>10, time.Since(start).Round(time.Millisecond))
	// Still open: the connection answers an empty session flow with echo.
	r.write(0, &amqp10.Flow{NextIncomingID: n, HasNextIncomingID: true, IncomingWindow: 1 << 20,
		NextOutgoingID: 0, OutgoingWindow: 1000, Echo: true})
	expectFrame[*amqp10.Flow](r)
	assert.Zero(t, queueLen(t, b, "slow"))
}
