package router

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// durableEnv is a broker on a Pebble store in dir; reopen simulates a
// restart (or, without settling first, a crash after the last sync).
type durableEnv struct {
	*env
	dir string
	st  *store.Pebble
}

func openDurable(t *testing.T, dir string, opts ...func(*Options)) *durableEnv {
	t.Helper()
	st, err := store.OpenPebble(dir, store.PebbleOptions{BodyDir: filepath.Join(dir, "queues")})
	require.NoError(t, err)
	// A one-byte window: every durable test runs on paged queues, each
	// message after the first behind the window (a test may set its own).
	o := append([]func(*Options){func(o *Options) { o.Store, o.QueueWindowBytes = st, 1 }}, opts...)
	e := newEnv(t, o...)
	require.NoError(t, e.b.Recover())
	d := &durableEnv{env: e, dir: dir, st: st}
	t.Cleanup(func() { _ = st.Close() })
	return d
}

func (d *durableEnv) close(t *testing.T) {
	t.Helper()
	d.b.Close()
	require.NoError(t, d.st.Close())
}

func durableMsg(t *testing.T, body string, keys ...string) *Message {
	t.Helper()
	b, err := amqp10.AppendAMQPValue(nil, body)
	require.NoError(t, err)
	w, err := amqp10.ParseMessage(append(amqp10.AppendHeader(nil, &amqp10.Header{Durable: true, Priority: 4}), b...))
	require.NoError(t, err)
	m := NewAMQP10Message(w)
	m.RoutingKeys = keys
	return m
}

func bodyOf(t *testing.T, m *Message) string {
	t.Helper()
	b, err := m.Container.Body()
	require.NoError(t, err)
	if _, ok := m.Container.(AMQP091); ok {
		return string(b) // a 0-9-1 body is the bytes themselves
	}
	v, _, err := amqp10.ReadValue(b)
	require.NoError(t, err)
	if dv, ok := v.(*value.Described); ok {
		v = dv.Value
	}
	return fmt.Sprint(v)
}

func bodiesOf(t *testing.T, ds []Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, bodyOf(t, d.Msg))
	}
	return out
}

func TestDurableRoundTrip(t *testing.T) {
	dir := t.TempDir()
	d := openDurable(t, dir)
	d.queue(t, "cq", Classic)
	d.queue(t, "qq", Quorum)
	_, _, err := d.v.DeclareQueue(QueueSpec{Name: "tq", Durable: false})
	require.NoError(t, err)
	deaths := value.Map{{Key: value.Symbol("x-opt-deaths"), Value: value.List{value.Map{
		{Key: value.Symbol("queue"), Value: "old"}, {Key: value.Symbol("count"), Value: int64(2)}}}},
		{Key: value.Symbol("x-first-death-queue"), Value: "old"}}
	for i := range 5 {
		for _, q := range []string{"cq", "qq", "tq"} {
			m := durableMsg(t, fmt.Sprintf("%s-%d", q, i), q)
			if i == 2 {
				m.Anns = deaths
				m.DeliveryCount = 3
			}
			require.Equal(t, Accepted, d.publish(t, "", m))
		}
	}
	nd := durableMsg(t, "transient", "cq")
	nd.Header.Durable = false
	require.Equal(t, Accepted, d.publish(t, "", nd))
	d.close(t)

	d2 := openDurable(t, dir)
	_, ok := d2.v.Queue("tq")
	require.False(t, ok, "non-durable queue recovered")
	for _, name := range []string{"cq", "qq"} {
		q, ok := d2.v.Queue(name)
		require.True(t, ok)
		require.Equal(t, 5, q.Len(), name)
		_, c := subscribe(t, q, 10)
		ds := c.all()
		require.Equal(t, []string{name + "-0", name + "-1", name + "-2", name + "-3", name + "-4"}, bodiesOf(t, ds))
		require.Equal(t, uint32(3), ds[2].Header.DeliveryCount)
		require.False(t, ds[2].Header.FirstAcquirer)
		require.True(t, ds[0].Header.FirstAcquirer)
		require.True(t, ds[0].Header.Durable)
		require.Equal(t, "old", ann(ds[2].AMQP10Annotations(), "x-first-death-queue"))
		require.Equal(t, deaths, ds[2].Msg.Anns)
		require.Equal(t, name, ds[0].Msg.RoutingKeys[0])
	}
	d2.close(t)
}

func TestDurableUnsettledAtCrashRequeuedWithDeliveryCount(t *testing.T) {
	dir := t.TempDir()
	d := openDurable(t, dir)
	q := d.queue(t, "qq", Quorum)
	for i := range 3 {
		d.publish(t, "", durableMsg(t, fmt.Sprint(i), "qq"))
	}
	s, c := subscribe(t, q, 2)
	require.Equal(t, 2, c.n())
	require.NoError(t, s.Settle(c.all()[1].Tag, Settlement{Kind: SettleAccept}))
	// "crash": the store is closed with delivery 0 unsettled.
	d.close(t)

	d2 := openDurable(t, dir)
	q2, _ := d2.v.Queue("qq")
	require.Equal(t, 2, q2.Len())
	_, c2 := subscribe(t, q2, 10)
	ds := c2.all()
	require.Equal(t, []string{"0", "2"}, bodiesOf(t, ds))
	require.Equal(t, uint32(1), ds[0].Header.DeliveryCount)
	require.False(t, ds[0].Header.FirstAcquirer)
	require.Equal(t, int64(1), ann(ds[0].AMQP10Annotations(), "x-acquired-count"))
	require.Equal(t, uint32(0), ds[1].Header.DeliveryCount)
	d2.close(t)

	// The recovered state was rewritten: a second restart counts once more only if delivered again.
	d3 := openDurable(t, dir)
	q3, _ := d3.v.Queue("qq")
	_, c3 := subscribe(t, q3, 10)
	require.Equal(t, uint32(2), c3.all()[0].Header.DeliveryCount)
	require.Equal(t, uint32(1), c3.all()[1].Header.DeliveryCount)
	d3.close(t)
}

func TestDurableTopologyRecovered(t *testing.T) {
	dir := t.TempDir()
	d := openDurable(t, dir)
	v2 := d.b.AddVHost("v2")
	_, err := d.v.DeclareExchange(ExchangeSpec{Name: "x", Type: ExchangeTopic, Durable: true,
		Arguments: value.Map{{Key: "alternate-exchange", Value: "ae"}}})
	require.NoError(t, err)
	_, err = d.v.DeclareExchange(ExchangeSpec{Name: "tx", Type: ExchangeFanout})
	require.NoError(t, err)
	d.queue(t, "q1", Quorum, "x-max-length", int64(10))
	require.NoError(t, d.v.Bind(Binding{Source: "x", Destination: "q1", Key: "a.#"}))
	require.NoError(t, d.v.PutPolicy(Policy{Name: "p", Pattern: "^q", Priority: 3, Definition: value.Map{{Key: "message-ttl", Value: int64(60000)}}}))
	_, _, err = v2.DeclareQueue(QueueSpec{Name: "gone", Durable: true})
	require.NoError(t, err)
	_, err = v2.DeleteQueue("gone")
	require.NoError(t, err)
	d.close(t)

	d2 := openDurable(t, dir)
	require.Equal(t, []string{"/", "v2"}, d2.b.VHosts())
	xi, ok := d2.v.Exchange("x")
	require.True(t, ok)
	require.Equal(t, ExchangeTopic, xi.Type)
	require.Equal(t, "ae", ann(stringKeysToSym(xi.Arguments), "alternate-exchange"))
	_, ok = d2.v.Exchange("tx")
	require.False(t, ok, "transient exchange recovered")
	q, ok := d2.v.Queue("q1")
	require.True(t, ok)
	require.Equal(t, Quorum, q.Type())
	pol, ok := q.EffectivePolicy()
	require.True(t, ok)
	require.Equal(t, "p", pol)
	require.Contains(t, d2.v.Bindings(), Binding{Source: "x", Destination: "q1", Key: "a.#"})
	v2b, _ := d2.b.VHost("v2")
	_, ok = v2b.Queue("gone")
	require.False(t, ok)
	// A publish routes through the recovered binding.
	require.Equal(t, Accepted, d2.publish(t, "x", durableMsg(t, "m", "a.b")))
	d2.close(t)
}

func stringKeysToSym(m value.Map) value.Map {
	out := value.Map{}
	for _, kv := range m {
		if s, ok := kv.Key.(string); ok {
			kv.Key = value.Symbol(s)
		}
		out = append(out, kv)
	}
	return out
}

func TestDurableSeqsNotReusedAndOrphansDeleted(t *testing.T) {
	dir := t.TempDir()
	d := openDurable(t, dir)
	q := d.queue(t, "q", Classic)
	d.publish(t, "", durableMsg(t, "a", "q"))
	_, c := subscribe(t, q, 1)
	s := q.subs[0]
	require.NoError(t, s.Settle(c.all()[0].Tag, Settlement{Kind: SettleAccept}))
	// An orphan: data for a queue id unknown to the metadata.
	done := make(chan error, 1)
	d.st.Append([]store.Record{{Queue: 999999, Seq: 1, Msg: []byte("x")}}, func(err error) { done <- err })
	require.NoError(t, <-done)
	id := q.id
	d.close(t)

	d2 := openDurable(t, dir)
	q2, _ := d2.v.Queue("q")
	require.Equal(t, id, q2.id)
	require.Greater(t, q2.seq, uint64(1), "seqs continue past the reservation")
	var ids []store.QueueID
	require.NoError(t, d2.st.Queues(func(id store.QueueID) error { ids = append(ids, id); return nil }))
	require.NotContains(t, ids, store.QueueID(999999))
	nq := d2.queue(t, "new", Classic)
	require.Greater(t, uint64(nq.id), uint64(id))
	d2.close(t)
}

func TestPublishConfirmPending(t *testing.T) {
	d := openDurable(t, t.TempDir())
	d.queue(t, "q", Quorum)
	d.queue(t, "cq", Classic)
	_, _, err := d.v.DeclareQueue(QueueSpec{Name: "t", Durable: false})
	require.NoError(t, err)
	require.NoError(t, d.v.Bind(Binding{Source: "amq.fanout", Destination: "q"}))
	require.NoError(t, d.v.Bind(Binding{Source: "amq.fanout", Destination: "cq"}))
	require.NoError(t, d.v.Bind(Binding{Source: "amq.fanout", Destination: "t"}))
	got := make(chan Outcome, 1)
	res, err := d.v.Publish(Publish{Exchange: "amq.fanout", Msg: durableMsg(t, "x"), Confirm: func(st Outcome) { got <- st }})
	pending := res.Pending
	require.NoError(t, err)
	require.True(t, pending)
	require.Equal(t, Accepted, (<-got).Kind)
	// Non-durable message: never pending.
	nd := durableMsg(t, "y")
	nd.Header.Durable = false
	res, err = d.v.Publish(Publish{Exchange: "amq.fanout", Msg: nd, Confirm: func(Outcome) { t.Error("confirm called") }})
	st, pending := res.Outcome, res.Pending
	require.NoError(t, err)
	require.False(t, pending)
	require.Equal(t, Accepted, st.Kind)
	// Both durable queues hold the durable message in the store, the transient one not.
	for _, name := range []string{"q", "cq", "t"} {
		q, _ := d.v.Queue(name)
		n := 0
		require.NoError(t, d.st.Iterate(q.id, func(uint64, []byte, []byte) error { n++; return nil }))
		want := 1
		if name == "t" {
			want = 0
		}
		require.Equal(t, want, n, name)
	}
	d.close(t)
}

func TestPublishConfirmStoreFailureRejects(t *testing.T) {
	st, err := store.OpenPebble(t.TempDir(), store.PebbleOptions{})
	require.NoError(t, err)
	e := newEnv(t, func(o *Options) { o.Store = st })
	q := e.queue(t, "q", Quorum)
	require.NoError(t, st.Close()) // every later batch fails with ErrClosed
	got := make(chan Outcome, 1)
	res, err := e.v.Publish(Publish{Exchange: "", Msg: durableMsg(t, "x", "q"), Confirm: func(s Outcome) { got <- s }})
	s, pending := res.Outcome, res.Pending
	require.NoError(t, err)
	if pending { // a closed Pebble fails the batch at once: then the outcome is returned directly
		s = <-got
	}
	require.Equal(t, Rejected, s.Kind)
	require.Equal(t, CondInternalError, s.Error.Condition)
	eventually(t, func() bool { return q.Len() == 0 }, 5*time.Second, "in-memory copy withdrawn")
}

func TestMemoryStoreKeepsBehaviour(t *testing.T) {
	// An explicit Memory store: the durable path runs, nothing is pending.
	e := newEnv(t, func(o *Options) { o.Store = store.NewMemory() })
	e.queue(t, "q", Quorum)
	res, err := e.v.Publish(Publish{Exchange: "", Msg: durableMsg(t, "x", "q"), Confirm: func(Outcome) { t.Error("confirm called") }})
	st, pending := res.Outcome, res.Pending
	require.NoError(t, err)
	require.False(t, pending)
	require.Equal(t, Accepted, st.Kind)
}

// Every publish feeds the broker's alarm monitor its bytes, so a publish that
// takes them past the step checks the alarms at once, not at the next tick.
func TestPublishFeedsAlarms(t *testing.T) {
	var free atomic.Uint64
	free.Store(100 << 20)
	var reads atomic.Int64
	e := newEnv(t, func(o *Options) {
		o.DataDir = "/data"
		o.DiskFreeLimit = 1 << 20 // a check per 256 KiB published
		o.AlarmInterval = time.Hour
		o.DiskFree = func(dir string) (uint64, error) {
			require.Equal(t, "/data", dir)
			reads.Add(1)
			return free.Load(), nil
		}
	})
	e.queue(t, "q", Classic)
	require.Equal(t, int64(1), reads.Load(), "New checks once")
	free.Store(1)
	blocked, changed := e.b.Alarms().PublishBlocked()
	require.False(t, blocked)
	e.publish(t, "", msg(strings.Repeat("x", 300<<10), "q"))
	<-changed
	require.Equal(t, int64(2), reads.Load())
	require.True(t, e.b.Alarms().State().Disk)
}
