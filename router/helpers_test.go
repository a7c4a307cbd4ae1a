package router

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// fakeConsumer records what a queue hands it.
type fakeConsumer struct {
	mu         sync.Mutex
	deliveries []Delivery
	drained    []uint32
	deleted    bool
}

func (c *fakeConsumer) Deliver(d Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliveries = append(c.deliveries, d)
}

func (c *fakeConsumer) Drained(n uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drained = append(c.drained, n)
}

func (c *fakeConsumer) QueueDeleted(*Queue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleted = true
}

func (c *fakeConsumer) all() []Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Delivery(nil), c.deliveries...)
}

func (c *fakeConsumer) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.deliveries)
}

func (c *fakeConsumer) last(t *testing.T) Delivery {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotEmpty(t, c.deliveries)
	return c.deliveries[len(c.deliveries)-1]
}

// bodies returns the body marker of every delivery.
func (c *fakeConsumer) bodies() []string {
	var out []string
	for _, d := range c.all() {
		out = append(out, string(d.Msg.Container.(AMQP10).Wire.Bare()))
	}
	return out
}

// fakeDL records dead messages.
type fakeDL struct {
	mu   sync.Mutex
	dead []Dead
	srcs []*Queue
	at   []time.Time
}

func (f *fakeDL) DeadLetter(src *Queue, dead []Dead) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range dead {
		f.srcs = append(f.srcs, src)
		f.at = append(f.at, time.Now())
	}
	f.dead = append(f.dead, dead...)
}

func (f *fakeDL) all() []Dead {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Dead(nil), f.dead...)
}

func (f *fakeDL) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dead)
}

// bodies returns "body:reason" for each dead message.
func (f *fakeDL) bodies() []string {
	var out []string
	for _, d := range f.all() {
		out = append(out, string(d.Msg.Container.(AMQP10).Wire.Bare())+":"+string(d.Reason))
	}
	return out
}

// fakeClock is a settable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// msg builds a message whose bare section is the body marker (no codec needed).
func msg(body string, keys ...string) *Message {
	return &Message{
		Container:   AMQP10{Wire: amqp10.NewMessage(nil, nil, []byte(body), nil)},
		Header:      Header{Priority: 4},
		RoutingKeys: keys,
	}
}

// ttlMsg is msg with a header ttl.
func ttlMsg(body string, ttl uint32, keys ...string) *Message {
	m := msg(body, keys...)
	m.Header.TTL, m.Header.HasTTL = ttl, true
	return m
}

// wireMsg builds a parsed wire message with application properties and
// message annotations (uses the codec).
func wireMsg(t *testing.T, appProps, anns value.Map, keys ...string) *Message {
	t.Helper()
	var b []byte
	var err error
	if anns != nil {
		b, err = amqp10.AppendMessageAnnotations(b, anns)
		require.NoError(t, err)
	}
	if appProps != nil {
		b, err = amqp10.AppendApplicationProperties(b, appProps)
		require.NoError(t, err)
	}
	b, err = amqp10.AppendAMQPValue(b, "body")
	require.NoError(t, err)
	w, err := amqp10.ParseMessage(b)
	require.NoError(t, err)
	m := NewAMQP10Message(w)
	m.RoutingKeys = keys
	return m
}

type env struct {
	b  *Broker
	v  *VHost
	dl *fakeDL
}

func newEnv(t *testing.T, opts ...func(*Options)) *env {
	t.Helper()
	dl := &fakeDL{}
	o := Options{DeadLetterer: dl}
	for _, f := range opts {
		f(&o)
	}
	b := New(o)
	t.Cleanup(b.Close)
	v, ok := b.VHost("/")
	require.True(t, ok)
	return &env{b: b, v: v, dl: dl}
}

func withClock(c *fakeClock) func(*Options) { return func(o *Options) { o.Now = c.Now } }

func (e *env) queue(t *testing.T, name string, typ QueueType, args ...any) *Queue {
	t.Helper()
	var m value.Map
	for i := 0; i+1 < len(args); i += 2 {
		m = append(m, value.KV{Key: args[i], Value: args[i+1]})
	}
	q, created, err := e.v.DeclareQueue(QueueSpec{Name: name, Type: typ, Durable: true, Arguments: m})
	require.NoError(t, err)
	require.True(t, created)
	return q
}

func (e *env) publish(t *testing.T, exchange string, m *Message) OutcomeKind {
	t.Helper()
	res, err := e.v.Publish(Publish{Exchange: exchange, Msg: m})
	st := res.Outcome
	require.NoError(t, err)
	return st.Kind
}

func subscribe(t *testing.T, q *Queue, credit uint32) (*Subscription, *fakeConsumer) {
	t.Helper()
	c := &fakeConsumer{}
	s, err := q.Subscribe(c, ConsumerOptions{})
	require.NoError(t, err)
	if credit > 0 {
		s.Flow(0, credit, false)
	}
	return s, c
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, cond func() bool, within time.Duration, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, within, time.Millisecond, msgAndArgs...)
}

func ann(m value.Map, key string) any {
	v, _ := m.Get(value.Symbol(key))
	return v
}

func hasAnn(m value.Map, key string) bool {
	_, ok := m.Get(value.Symbol(key))
	return ok
}
