package router

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// benchConsumer keeps the last delivery (Deliver runs under the queue lock,
// so the benchmark settles after Publish returns).
type benchConsumer struct{ last Delivery }

func (c *benchConsumer) Deliver(d Delivery) { c.last = d }
func (c *benchConsumer) Drained(uint32)     {}

// benchWire is a 1 KiB data message as the load tool sends it.
func benchWire(tb testing.TB) *amqp10.Message {
	tb.Helper()
	b, err := amqp10.AppendProperties(nil, &amqp10.Properties{MessageID: uint64(42)})
	require.NoError(tb, err)
	b = amqp10.AppendData(b, make([]byte, 1024))
	w, err := amqp10.ParseMessage(b)
	require.NoError(tb, err)
	return w
}

// hotPath is one publish to a queue with a consumer with credit, the
// delivery, and its settlement: the broker's per-message path.
type hotPath struct {
	vh   *VHost
	sub  *Subscription
	c    *benchConsumer
	wire *amqp10.Message
	keys []string
	n    uint32
}

func newHotPath(tb testing.TB, exchange string) *hotPath {
	tb.Helper()
	b := New(Options{})
	tb.Cleanup(b.Close)
	vh, _ := b.VHost("/")
	q, _, err := vh.DeclareQueue(QueueSpec{Name: "q"})
	require.NoError(tb, err)
	if exchange != "" {
		_, err := vh.DeclareExchange(ExchangeSpec{Name: exchange, Type: ExchangeFanout})
		require.NoError(tb, err)
		require.NoError(tb, vh.Bind(Binding{Source: exchange, Destination: "q"}))
	}
	c := &benchConsumer{}
	sub, err := q.Subscribe(c, ConsumerOptions{})
	require.NoError(tb, err)
	sub.Flow(0, 1000, false)
	return &hotPath{vh: vh, sub: sub, c: c, wire: benchWire(tb), keys: []string{"q"}}
}

// one publishes, delivers and settles one message as a link does.
func (h *hotPath) one(tb testing.TB, exchange string) {
	m := NewAMQP10Message(h.wire)
	m.RoutingKeys = h.keys
	res, err := h.vh.Publish(Publish{Exchange: exchange, Msg: m})
	st := res.Outcome
	if err != nil || st.Kind != Accepted {
		tb.Fatalf("publish: %v %v", st, err)
	}
	if err := h.sub.Settle(h.c.last.Tag, Settlement{Kind: SettleAccept}); err != nil {
		tb.Fatal(err)
	}
	h.c.last = Delivery{}
	h.n++
	if h.n%500 == 0 {
		h.sub.Flow(h.n, 1000, false) // the link's credit refill at half
	}
}

// BenchmarkPublishDeliverSettle: route (default exchange), enqueue,
// deliver to a consumer with credit, settle accepted.
func BenchmarkPublishDeliverSettle(b *testing.B) {
	h := newHotPath(b, "")
	b.ReportAllocs()
	for b.Loop() {
		h.one(b, "")
	}
}

// BenchmarkPublishDeliverSettleFanout is the same through a fanout exchange.
func BenchmarkPublishDeliverSettleFanout(b *testing.B) {
	h := newHotPath(b, "fan")
	b.ReportAllocs()
	for b.Loop() {
		h.one(b, "fan")
	}
}

// BenchmarkRoute is routing alone (default exchange).
func BenchmarkRoute(b *testing.B) {
	h := newHotPath(b, "")
	m := NewAMQP10Message(h.wire)
	m.RoutingKeys = h.keys
	b.ReportAllocs()
	for b.Loop() {
		if qs, err := h.vh.Route("", m); err != nil || len(qs) != 1 {
			b.Fatal(qs, err)
		}
	}
}

// BenchmarkEnqueue is enqueueing without a consumer (a queue filling up).
func BenchmarkEnqueue(b *testing.B) {
	br := New(Options{})
	b.Cleanup(br.Close)
	vh, _ := br.VHost("/")
	q, _, err := vh.DeclareQueue(QueueSpec{Name: "q"})
	require.NoError(b, err)
	m := NewAMQP10Message(benchWire(b))
	m.RoutingKeys = []string{"q"}
	b.ReportAllocs()
	for b.Loop() {
		if st := q.Enqueue(m); st.Kind != Accepted {
			b.Fatal(st)
		}
	}
}
