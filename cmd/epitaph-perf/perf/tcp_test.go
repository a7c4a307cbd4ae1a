package perf_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-null/tcprelay"
	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

// The tcp-latency scenario through an in-process relay: every record
// arrives once and is timed. A connection with a bad role byte first is
// closed without disturbing the pairs after it. No timing is asserted.
func TestTCPLatencyThroughRelay(t *testing.T) {
	r, err := tcprelay.Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	bad, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	_ = bad.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := bad.Write([]byte("AMQP")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, bad); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection with a bad role byte: %v; want it closed", err)
	}

	for _, c := range []perf.Config{
		{URL: "tcp://" + r.Addr().String(), Size: 64, Count: 500, Rate: 5000},
		{URL: r.Addr().String(), Size: 16, Count: 400, Rate: 5000, Senders: 2, Warmup: 20 * time.Millisecond},
	} {
		c.Scenario, c.Timeout = "tcp-latency", 30*time.Second
		res, err := perf.Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || res.Sent != c.Count || res.Received != c.Count || res.Lost != 0 || res.Duplicated != 0 {
			t.Errorf("%d sender(s): %+v", c.Senders, res)
		}
		if res.Engine != "tcp" || res.LatN == 0 || res.LatP99 <= 0 || res.LatMax < res.LatP99 {
			t.Errorf("%d sender(s): engine %q, %d latency samples, p99 %v, max %v", c.Senders, res.Engine, res.LatN, res.LatP99, res.LatMax)
		}
	}
}

func TestTCPLatencyRejectsBadConfig(t *testing.T) {
	for _, c := range []perf.Config{
		{URL: "amqp://127.0.0.1:5672", Rate: 1000},
		{URL: "tcp://127.0.0.1", Rate: 1000},
		{URL: "127.0.0.1:1", Rate: 0},
		{URL: "127.0.0.1:1", Rate: 1000, Senders: 2, Receivers: 1},
		{URL: "127.0.0.1:1", Rate: 1000, Size: 8},
	} {
		c.Scenario, c.Count, c.Timeout = "tcp-latency", 10, 5*time.Second
		if c.Size == 0 {
			c.Size = 64
		}
		if _, err := perf.Run(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
