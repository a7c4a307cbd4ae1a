package e2e

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/deadletter"
	"github.com/epitaph-mq/epitaph/router"
)

// Helpers shared by the dead-lettering acceptance tests
// (deadletter_scenarios_test.go, deadletter_rules_test.go).

var queueTypes = []struct {
	name string
	typ  router.QueueType
}{{"CQ", router.Classic}, {"QQ", router.Quorum}}

// eachType runs f as a subtest for a classic and a quorum queue.
func eachType(t *testing.T, f func(t *testing.T, typ router.QueueType)) {
	for _, qt := range queueTypes {
		t.Run(qt.name, func(t *testing.T) { f(t, qt.typ) })
	}
}

func vhost(t *testing.T, b *epitaph.Broker) *router.VHost {
	t.Helper()
	vh, ok := b.Router().VHost("/")
	require.True(t, ok)
	return vh
}

func declareExchange(t *testing.T, b *epitaph.Broker, name, typ string, args amqp10.Map) {
	t.Helper()
	_, err := vhost(t, b).DeclareExchange(router.ExchangeSpec{Name: name, Type: typ, Durable: true, Arguments: args})
	require.NoError(t, err)
}

func bind(t *testing.T, b *epitaph.Broker, exchange, queue, key string, args amqp10.Map) {
	t.Helper()
	require.NoError(t, vhost(t, b).Bind(router.Binding{Source: exchange, Destination: queue, Key: key, Arguments: args}))
}

// dlArgs builds x-arguments: dlx, then optional dlrk ("" omitted unless
// given explicitly through extra), then extra.
func dlArgs(dlx string, dlrk *string, extra ...amqp10.KV) amqp10.Map {
	m := amqp10.Map{{Key: "x-dead-letter-exchange", Value: dlx}}
	if dlrk != nil {
		m = append(m, amqp10.KV{Key: "x-dead-letter-routing-key", Value: *dlrk})
	}
	return append(m, extra...)
}

func ptr[T any](v T) *T { return &v }

func kv(k string, v any) amqp10.KV { return amqp10.KV{Key: k, Value: v} }

// publish sends each message unsettled to address and requires accepted.
func publish(t *testing.T, s *amqp.Session, address string, ms ...*amqp.Message) {
	t.Helper()
	snd := sender(t, s, address, nil)
	for _, m := range ms {
		st := send(t, snd, m)
		require.IsType(t, &amqp.StateAccepted{}, st, "publish %q to %s", body(m), address)
	}
}

// publishBodies publishes plain messages with the given bodies.
func publishBodies(t *testing.T, s *amqp.Session, address string, bodies ...string) {
	t.Helper()
	ms := make([]*amqp.Message, len(bodies))
	for i, b := range bodies {
		ms[i] = msg(b)
	}
	publish(t, s, address, ms...)
}

// settledReceiver attaches a pre-settled receiver (credit 50) for reading
// dead-letter queues.
func settledReceiver(t *testing.T, s *amqp.Session, queue string) *amqp.Receiver {
	t.Helper()
	return receiver(t, s, "/queues/"+queue, &amqp.ReceiverOptions{Credit: 50,
		RequestedSenderSettleMode: amqp.SenderSettleModeSettled.Ptr()})
}

// recvBodies receives len(want) messages and requires their bodies in order.
func recvBodies(t *testing.T, r *amqp.Receiver, want ...string) []*amqp.Message {
	t.Helper()
	out := make([]*amqp.Message, 0, len(want))
	var got []string
	for range want {
		m := recv(t, r)
		out = append(out, m)
		got = append(got, body(m))
	}
	require.Equal(t, want, got)
	return out
}

// deathsOf returns the decoded x-opt-deaths annotation.
func deathsOf(t *testing.T, m *amqp.Message) []map[any]any {
	t.Helper()
	v, ok := m.Annotations["x-opt-deaths"]
	require.True(t, ok, "no x-opt-deaths in %v", m.Annotations)
	d, ok := v.([]map[any]any)
	require.True(t, ok, "x-opt-deaths is %T, want an array of maps", v)
	return d
}

// assertDeath checks one x-opt-deaths entry: exactly these keys (7, or 8 with ttl),
// these values, and times within ±5 s of now, equal when count is 1.
func assertDeath(t *testing.T, d map[any]any, queue, reason string, count uint64, exchange string, rks []string, ttl ...uint32) {
	t.Helper()
	n := 7
	if len(ttl) > 0 {
		n = 8
		assert.Equal(t, ttl[0], d["ttl"], "ttl")
	} else {
		assert.NotContains(t, d, "ttl")
	}
	assert.Len(t, d, n, "death keys: %v", d)
	assert.Equal(t, queue, d["queue"], "queue")
	assert.Equal(t, reason, d["reason"], "reason")
	assert.Equal(t, count, d["count"], "count")
	assert.Equal(t, exchange, d["exchange"], "exchange")
	assert.Equal(t, rks, d["routing-keys"], "routing-keys")
	ft, ok1 := d["first-time"].(time.Time)
	lt, ok2 := d["last-time"].(time.Time)
	if assert.True(t, ok1 && ok2, "first-time/last-time are %T/%T", d["first-time"], d["last-time"]) {
		assert.WithinDuration(t, time.Now(), ft, 5*time.Second)
		assert.WithinDuration(t, time.Now(), lt, 5*time.Second)
		assert.False(t, lt.Before(ft), "last-time %v before first-time %v", lt, ft)
		if count == 1 {
			assert.Equal(t, ft, lt, "first-time == last-time when count is 1")
		}
	}
}

// assertSix checks the six x-first-death-* / x-last-death-* annotations.
func assertSix(t *testing.T, m *amqp.Message, fq, fr, fx, lq, lr, lx string) {
	t.Helper()
	a := m.Annotations
	assert.Equal(t, fq, a["x-first-death-queue"], "x-first-death-queue")
	assert.Equal(t, fr, a["x-first-death-reason"], "x-first-death-reason")
	assert.Equal(t, fx, a["x-first-death-exchange"], "x-first-death-exchange")
	assert.Equal(t, lq, a["x-last-death-queue"], "x-last-death-queue")
	assert.Equal(t, lr, a["x-last-death-reason"], "x-last-death-reason")
	assert.Equal(t, lx, a["x-last-death-exchange"], "x-last-death-exchange")
}

// stats returns a queue's dead-letter counters for one reason.
func stats(b *epitaph.Broker, queue string, r router.Reason) deadletter.Counts {
	return b.DeadLetters().QueueStats("/", queue)[r]
}

// unacked is the number of delivered, unsettled messages of a queue.
func unacked(t *testing.T, b *epitaph.Broker, name string) int {
	t.Helper()
	q, ok := vhost(t, b).Queue(name)
	require.True(t, ok, "queue %q", name)
	return q.Info().MessagesUnacknowledged
}

// tcpProxy forwards connections to the broker; kill closes every socket at
// once without any AMQP close, as a crashed client would.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); copyClose(u, c) }()
			go func() { defer p.wg.Done(); copyClose(c, u) }()
		}
	}()
	t.Cleanup(func() { p.kill(); p.wg.Wait() })
	return p
}

func copyClose(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// kill closes the listener and every proxied socket (client and broker sides).
func (p *tcpProxy) kill() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, no FIN handshake
		}
		c.Close()
	}
	p.conns = nil
}

// dialVia connects a go-amqp client through the proxy.
func dialVia(t *testing.T, p *tcpProxy) *amqp.Conn {
	t.Helper()
	c, err := amqp.Dial(ctxT(t), "amqp://"+p.addr(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// modify settles m with the modified outcome.
func modify(t *testing.T, r *amqp.Receiver, m *amqp.Message, failed, undeliverable bool, anns amqp.Annotations) {
	t.Helper()
	require.NoError(t, r.ModifyMessage(ctxT(t), m, &amqp.ModifyMessageOptions{
		DeliveryFailed: failed, UndeliverableHere: undeliverable, Annotations: anns}))
}

func reject(t *testing.T, r *amqp.Receiver, m *amqp.Message) {
	t.Helper()
	require.NoError(t, r.RejectMessage(ctxT(t), m, nil))
}

func accept(t *testing.T, r *amqp.Receiver, m *amqp.Message) {
	t.Helper()
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
}

// closeCtx is a short context for closing links at the end of a step.
func closeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// take attaches a pre-settled receiver to queue, requires the bodies in
// order, and detaches it again so later receivers see later messages.
func take(t *testing.T, s *amqp.Session, queue string, want ...string) []*amqp.Message {
	t.Helper()
	r := receiver(t, s, "/queues/"+queue, &amqp.ReceiverOptions{Credit: -1,
		RequestedSenderSettleMode: amqp.SenderSettleModeSettled.Ptr()})
	require.NoError(t, r.IssueCredit(uint32(len(want))))
	out := recvBodies(t, r, want...)
	ctx, cancel := closeCtx()
	defer cancel()
	require.NoError(t, r.Close(ctx))
	return out
}
