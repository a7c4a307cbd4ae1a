package perf_test

import (
	"context"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph/cmd/epitaph-null/nullbroker"
	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

// The fast engine against the null broker, in process: a couple of
// thousand messages through each scenario shape, checked for loss,
// duplicates and beyond-credit deliveries. No timing is asserted.
func TestSmokeFastEngineAgainstNullBroker(t *testing.T) {
	s, err := nullbroker.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := "amqp://" + s.Addr().String()
	for _, c := range []perf.Config{
		{Scenario: "throughput", Size: 16, Count: 3000, Window: 100, Credit: 100, CreditMode: "half"},
		{Scenario: "throughput", Size: 1024, Count: 2000, Senders: 2, Receivers: 2, Window: 10, Credit: 50, CreditMode: "exhausted", SASL: "anonymous"},
		{Scenario: "throughput", Size: 70000, Count: 50, Window: 5, Credit: 10, SASL: "none"}, // a 70 kB payload: larger than the 64 KiB read and write buffers
		{Scenario: "latency", Size: 64, Count: 500, Rate: 5000, Window: 100, Credit: 100},
		{Scenario: "throughput", Size: 1024, Count: 3000, Window: 100, Credit: 100, Durable: true, Warmup: -1},
	} {
		c.Engine, c.URL, c.Target, c.Source, c.Timeout = "fast", url, "/queues/q", "/queues/q", time.Minute
		res, err := perf.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("%s %d B: %v", c.Scenario, c.Size, err)
		}
		if res.Failed() || res.Received != c.Count || res.Sent != c.Count || res.PubAccepted != c.Count {
			t.Errorf("%s %d B: %+v", c.Scenario, c.Size, res)
		}
		if c.Scenario == "latency" && res.LatN == 0 {
			t.Errorf("latency: no samples")
		}
		if (c.Scenario == "latency" || c.Durable) && (res.ConfN == 0 || res.LatN == 0) {
			t.Errorf("%s durable=%v: confirm samples %d, end-to-end samples %d", c.Scenario, c.Durable, res.ConfN, res.LatN)
		}
	}
	// fill then drain
	res, err := perf.Run(context.Background(), perf.Config{Engine: "fast", Scenario: "fill", URL: url, Target: "q", Source: "q",
		Size: 100, Count: 2000, Window: 50, Credit: 200, Drain: true, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.Received != 2000 {
		t.Errorf("fill: %+v", res)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("%d messages left in the null broker", n)
	}
}

// Messages larger than the broker's max-frame-size go out as multi-frame
// transfers.
func TestSmokeFastEngineSplitsLargeMessages(t *testing.T) {
	s, err := nullbroker.ListenWith("127.0.0.1:0", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := perf.Run(context.Background(), perf.Config{Engine: "fast", Scenario: "throughput", URL: "amqp://" + s.Addr().String(),
		Target: "q", Source: "q", Size: 20000, Count: 300, Window: 10, Credit: 20, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.Received != 300 {
		t.Errorf("%+v", res)
	}
}

func TestSmokeGoAMQPEngineAgainstNullBroker(t *testing.T) {
	s, err := nullbroker.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, mode := range []string{"half", "exhausted"} {
		res, err := perf.Run(context.Background(), perf.Config{Engine: "goamqp", Scenario: "throughput", URL: "amqp://" + s.Addr().String(),
			Target: "/queues/q", Source: "/queues/q", Size: 32, Count: 1000, Window: 20, Credit: 100, CreditMode: mode, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed() || res.Received != 1000 {
			t.Errorf("%s: %+v", mode, res)
		}
	}
}
