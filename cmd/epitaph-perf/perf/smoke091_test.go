package perf_test

import (
	"context"
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

// The amqp091 engine against an in-process epitaph, alone and paired with
// the AMQP 1.0 engines both ways: a few thousand messages through the
// throughput and dead-letter shapes, checked for loss, duplicates and
// refused publishes. No timing is asserted.
func TestSmokeAMQP091EngineAgainstEpitaph(t *testing.T) {
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "", true
	opts.Definitions = []byte(smoke091Definitions)
	b, err := epitaph.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
