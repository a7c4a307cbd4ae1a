package link

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/config"
)

// pipeConn returns a conn whose socket is one end of a synchronous pipe (no
// kernel buffer: every byte written waits for the peer's read), and the
// peer's end.
func pipeConn(t *testing.T, writeTimeout time.Duration) (*conn, net.Conn) {
	t.Helper()
	ours, peer := net.Pipe()
	t.Cleanup(func() { ours.Close(); peer.Close() })
	c := &conn{nc: ours, srv: &Server{opts: Options{AMQP: config.AMQP{WriteTimeout: writeTimeout}}}, log: slog.New(slog.DiscardHandler),
		out: outbuf{wake: make(chan struct{}, 1), low: make(chan struct{}, 1)}}
	return c, peer
}

// A peer that reads 4 KiB every 10 ms takes 320 ms for one 128 KiB write,
// longer than the 100 ms write timeout, but takes bytes within every
// time-out: the write goes on until done, and the loop is woken at the low
// water mark.
func TestWriteOutSlowPeerIsNotCut(t *testing.T) {
	// Fake time: a loaded machine cannot stretch the peer's pace past the time-out.
	synctest.Test(t, func(t *testing.T) {
		c, peer := pipeConn(t, 100*time.Millisecond)
		const size = 512 << 10
		c.out.queued, c.out.waitLow = size, true
		got := make(chan int, 1)
		go func() {
			n := 0
			buf := make([]byte, 4<<10)
			for n < size {
				time.Sleep(10 * time.Millisecond) // the peer's pace, the behaviour under test
				k, err := peer.Read(buf)
				n += k
				if err != nil {
					break
				}
			}
			got <- n
		}()
		require.NoError(t, c.writeOut(make([]byte, size)))
		require.Equal(t, size, <-got)
		require.Zero(t, c.out.waiting())
		select {
		case <-c.out.low:
		default:
			t.Fatal("the loop was not woken at the low water mark")
		}
	})
}

// A peer that stops reading is cut after the write timeout: the error is the
// deadline's, and what it took before is accounted.
func TestWriteOutStalledPeerTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, peer := pipeConn(t, 100*time.Millisecond)
		const size = 256 << 10
		c.out.queued = size
		go func() { _, _ = io.ReadFull(peer, make([]byte, 8<<10)) }() // then nothing
		start := time.Now()
		err := c.writeOut(make([]byte, size))
		require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
		require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
		require.Equal(t, size-8<<10, c.out.waiting())
	})
}
