package perf_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

// smoke091Definitions are the queues of the AMQP 0-9-1 smoke runs: plain,
// and work dead-lettering into dlq.
const smoke091Definitions = `{"queues": [
  {"name": "plain", "vhost": "/", "durable": true, "arguments": {}},
  {"name": "dlq", "vhost": "/", "durable": true, "arguments": {}},
  {"name": "work", "vhost": "/", "durable": true,
   "arguments": {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}}]}`

// startSmoke091Broker starts an in-memory epitaph with the smoke queues,
// closed when the test ends.
func startSmoke091Broker(t *testing.T) *epitaph.Broker {
	t.Helper()
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "", true
	opts.Definitions = []byte(smoke091Definitions)
	b, err := epitaph.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// The amqp091 engine against an in-process epitaph, alone and paired with
// the AMQP 1.0 engines both ways: a few thousand messages through the
// throughput and dead-letter shapes, checked for loss, duplicates and
// refused publishes. No timing is asserted.
func TestSmokeAMQP091EngineAgainstEpitaph(t *testing.T) {
	b := startSmoke091Broker(t)
	url := "amqp://" + b.Addr().String()
	for _, c := range []perf.Config{
		{Engine: "amqp091", Scenario: "throughput", Size: 1024, Count: 3000, Window: 100, Credit: 1000},
		{Engine: "amqp091", Scenario: "throughput", Size: 16, Count: 2000, Senders: 2, Receivers: 2, Window: 10, Credit: 50, Durable: true},
		{Engine: "amqp091", ConsumeEngine: "fast", Scenario: "throughput", Size: 1024, Count: 2000, Window: 100, Credit: 1000},
		{Engine: "fast", ConsumeEngine: "amqp091", Scenario: "throughput", Size: 1024, Count: 2000, Window: 100, Credit: 1000},
		{Engine: "amqp091", Scenario: "deadletter", Size: 1024, Count: 2000, Window: 100, Credit: 1000},
		{Engine: "amqp091", DLQEngine: "goamqp", Scenario: "deadletter", Size: 1024, Count: 1000, Window: 100, Credit: 1000},
		{Engine: "goamqp", DLQEngine: "amqp091", Scenario: "deadletter", Size: 1024, Count: 1000, Window: 100, Credit: 1000},
	} {
		c.URL, c.Timeout = url, time.Minute
		c.Target, c.Source, c.DLQSource = "/queues/plain", "/queues/plain", "/queues/dlq"
		if c.Scenario == "deadletter" {
			c.Target, c.Source = "/queues/work", "/queues/work"
		}
		res, err := perf.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("%s %s->%s/%s: %v", c.Scenario, c.Engine, c.ConsumeEngine, c.DLQEngine, err)
		}
		if res.Failed() || res.Received != c.Count || res.Sent != c.Count || res.PubAccepted != c.Count {
			t.Errorf("%s %s->%s/%s: %+v", c.Scenario, c.Engine, c.ConsumeEngine, c.DLQEngine, res)
		}
	}
}

// The fast091 engine against an in-process epitaph: alone (acks one by
// one and with multiple=true, durable), paired with the AMQP 1.0 fast
// engine and amqp091-go both ways, through the throughput and dead-letter
// shapes, and with bodies larger than the negotiated frame-max (split into
// body frames both ways). Checked for loss, duplicates, deliveries beyond
// the prefetch and refused publishes; no timing is asserted.
func TestSmokeFast091EngineAgainstEpitaph(t *testing.T) {
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "", true
	opts.Definitions = []byte(smoke091Definitions)
	opts.AMQP.MaxFrameSize = 16 << 10
	b, err := epitaph.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	url := "amqp://guest:guest@" + b.Addr().String()
	for _, c := range []perf.Config{
		{Engine: "fast091", Scenario: "throughput", Size: 1024, Count: 5000, Window: 100, Credit: 1000},
		{Engine: "fast091", Scenario: "throughput", Size: 1024, Count: 5000, Window: 100, Credit: 1000, AckMultiple: true},
		{Engine: "fast091", Scenario: "throughput", Size: 16, Count: 3000, Senders: 2, Receivers: 2, Window: 10, Credit: 50, Durable: true},
		{Engine: "fast091", Scenario: "throughput", Size: 40000, Count: 300, Window: 20, Credit: 10},
		{Engine: "fast091", ConsumeEngine: "fast", Scenario: "throughput", Size: 1024, Count: 3000, Window: 100, Credit: 1000},
		{Engine: "fast", ConsumeEngine: "fast091", Scenario: "throughput", Size: 1024, Count: 3000, Window: 100, Credit: 1000},
		{Engine: "amqp091", ConsumeEngine: "fast091", Scenario: "throughput", Size: 1024, Count: 2000, Window: 100, Credit: 1000},
		{Engine: "fast091", Scenario: "deadletter", Size: 1024, Count: 3000, Window: 100, Credit: 1000},
		{Engine: "fast091", DLQEngine: "fast", Scenario: "deadletter", Size: 1024, Count: 2000, Window: 100, Credit: 1000},
		{Engine: "fast", DLQEngine: "fast091", Scenario: "deadletter", Size: 1024, Count: 2000, Window: 100, Credit: 1000, AckMultiple: true},
	} {
		c.URL, c.Timeout = url, time.Minute
		c.Target, c.Source, c.DLQSource = "/queues/plain", "/queues/plain", "/queues/dlq"
		if c.Scenario == "deadletter" {
			c.Target, c.Source = "/queues/work", "/queues/work"
		}
		name := fmt.Sprintf("%s %s->%s/%s size %d multiple %v", c.Scenario, c.Engine, c.ConsumeEngine, c.DLQEngine, c.Size, c.AckMultiple)
		res, err := perf.Run(context.Background(), c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Failed() || res.Received != c.Count || res.Sent != c.Count || res.PubAccepted != c.Count || res.BeyondCredit != 0 {
			t.Errorf("%s: %+v", name, res)
		}
	}
}

// A fast091 publish that no queue takes comes back as basic.return and is
// counted as released, not accepted; the run reports it as refused.
func TestFast091CountsReturnedPublishesAsReleased(t *testing.T) {
	b := startSmoke091Broker(t)
	res, err := perf.Run(context.Background(), perf.Config{Engine: "fast091", ConsumeEngine: "fast", Scenario: "throughput",
		URL: "amqp://guest:guest@" + b.Addr().String(), Target: "/exchanges/amq.direct/nowhere", Source: "/queues/plain",
		Size: 64, Count: 50, Window: 10, Credit: 100, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 50 || res.PubReleased != 50 || res.PubAccepted != 0 || !res.Failed() {
		t.Errorf("sent %d, released %d, accepted %d, failed %v; want 50, 50, 0, true", res.Sent, res.PubReleased, res.PubAccepted, res.Failed())
	}
}
