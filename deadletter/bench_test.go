package deadletter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

type lastConsumer struct{ last router.Delivery }

func (c *lastConsumer) Deliver(d router.Delivery) { c.last = d }
func (c *lastConsumer) Drained(uint32)            {}

// dlPath is the compare run's dead-letter topology: work (DLX dlx, fanout)
// -> dlq, a consumer rejecting on work and one accepting on dlq.
type dlPath struct {
	vh           *router.VHost
	work, dlq    *router.Subscription
	cw, cd       *lastConsumer
	wire         *amqp10.Message
	keys         []string
	n            uint32
	dlQueue      *router.Queue
	deadLettered func() uint64
	events       *dlevents.Hub
}

// newDLPath builds the path with a dead-letter event hub, as the broker
// wires it; nobody subscribes to it unless a test does.
func newDLPath(tb testing.TB) *dlPath {
	tb.Helper()
	hub := dlevents.New(dlevents.Options{})
	dl := New(Options{Events: hub})
	b := router.New(router.Options{DeadLetterer: dl})
	tb.Cleanup(b.Close)
	vh, _ := b.VHost("/")
	_, err := vh.DeclareExchange(router.ExchangeSpec{Name: "dlx", Type: router.ExchangeFanout})
	require.NoError(tb, err)
	w, _, err := vh.DeclareQueue(router.QueueSpec{Name: "work", Arguments: value.Map{{Key: "x-dead-letter-exchange", Value: "dlx"}}})
	require.NoError(tb, err)
	d, _, err := vh.DeclareQueue(router.QueueSpec{Name: "dlq"})
	require.NoError(tb, err)
	require.NoError(tb, vh.Bind(router.Binding{Source: "dlx", Destination: "dlq"}))
	p := &dlPath{vh: vh, cw: &lastConsumer{}, cd: &lastConsumer{}, keys: []string{"work"}, dlQueue: d, events: hub}
	p.work, err = w.Subscribe(p.cw, router.ConsumerOptions{})
	require.NoError(tb, err)
	p.dlq, err = d.Subscribe(p.cd, router.ConsumerOptions{})
	require.NoError(tb, err)
	p.work.Flow(0, 1000, false)
	p.dlq.Flow(0, 1000, false)
	pb, err := amqp10.AppendProperties(nil, &amqp10.Properties{MessageID: uint64(42)})
	require.NoError(tb, err)
	p.wire, err = amqp10.ParseMessage(amqp10.AppendData(pb, make([]byte, 1024)))
	require.NoError(tb, err)
	p.deadLettered = func() uint64 { return dl.QueueStats("/", "work")[router.ReasonRejected].DeadLettered }
	return p
}

// one publishes to work, rejects the delivery (dead-lettering it into dlq)
// and accepts the dead-letter copy's delivery from dlq.
func (p *dlPath) one(tb testing.TB) {
	m := router.NewAMQP10Message(p.wire)
	m.RoutingKeys = p.keys
	if st, err := p.vh.Publish(router.Publish{Msg: m}); err != nil || st.Outcome.Kind != router.Accepted {
		tb.Fatalf("publish: %v %v", st, err)
	}
	if err := p.work.Settle(p.cw.last.Tag, router.Settlement{Kind: router.SettleReject}); err != nil {
		tb.Fatal(err)
	}
	if p.cd.last.Msg == nil {
		tb.Fatal("no dead-letter delivery")
	}
	if err := p.dlq.Settle(p.cd.last.Tag, router.Settlement{Kind: router.SettleAccept}); err != nil {
		tb.Fatal(err)
	}
	p.cw.last, p.cd.last = router.Delivery{}, router.Delivery{}
	p.n++
	if p.n%500 == 0 {
		p.work.Flow(p.n, 1000, false)
		p.dlq.Flow(p.n, 1000, false)
	}
}

// BenchmarkDeadLetterPath: publish, deliver, reject, dead-letter through a
// fanout DLX, deliver the copy, accept it.
func BenchmarkDeadLetterPath(b *testing.B) {
	p := newDLPath(b)
	b.ReportAllocs()
	for b.Loop() {
		p.one(b)
	}
}

// BenchmarkDeadLetterPathSubscribed is BenchmarkDeadLetterPath with one
// subscriber to the dead-letter events, which reads every event: the cost
// of the event stream while someone listens.
func BenchmarkDeadLetterPathSubscribed(b *testing.B) {
	p := newDLPath(b)
	sub, err := p.events.Subscribe(dlevents.Filter{}, nil)
	require.NoError(b, err)
	defer sub.Close()
	b.ReportAllocs()
	for b.Loop() {
		p.one(b)
		if _, ok := sub.Next(); !ok {
			b.Fatal("no event")
		}
	}
}

// BenchmarkCopy is the dead-letter copy alone (first death and a repeat).
func BenchmarkCopy(b *testing.B) {
	p := newDLPath(b)
	src, _ := p.vh.Queue("work")
	m := router.NewAMQP10Message(p.wire)
	m.Exchange, m.RoutingKeys = "", p.keys
	dl := New(Options{})
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dl.Copy(src, &router.Dead{Msg: *m, Reason: router.ReasonRejected}, "dlx")
		}
	})
	again, _ := dl.Copy(src, &router.Dead{Msg: *m, Reason: router.ReasonRejected}, "dlx")
	b.Run("repeat", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dl.Copy(src, &router.Dead{Msg: *again, Reason: router.ReasonRejected}, "dlx")
		}
	})
}
