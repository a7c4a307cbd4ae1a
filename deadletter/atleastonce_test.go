package deadletter

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// aloEnv is a broker with this package's DeadLetterer, optionally on a
// Pebble store in dir (reopen = restart).
type aloEnv struct {
	b  *router.Broker
	vh *router.VHost
	dl *DeadLetterer
	st *store.Pebble
}

func openALO(t *testing.T, dir string) *aloEnv {
	t.Helper()
	e := &aloEnv{dl: New(Options{})}
	o := router.Options{DeadLetterer: e.dl, DeadLetterRetryInterval: 50 * time.Millisecond}
	if dir != "" {
		st, err := store.OpenPebble(dir, store.PebbleOptions{BodyDir: filepath.Join(dir, "queues")})
		require.NoError(t, err)
		e.st, o.Store = st, st
		t.Cleanup(func() { _ = st.Close() })
	}
	e.b = router.New(o)
	t.Cleanup(e.b.Close)
	require.NoError(t, e.b.Recover())
	e.vh, _ = e.b.VHost("/")
	return e
}

func (e *aloEnv) close(t *testing.T) {
	e.b.Close()
	if e.st != nil {
		require.NoError(t, e.st.Close())
	}
}

func args(kv ...any) value.Map {
	var m value.Map
	for i := 0; i+1 < len(kv); i += 2 {
		m = append(m, value.KV{Key: kv[i], Value: kv[i+1]})
	}
	return m
}

func (e *aloEnv) quorum(t *testing.T, name string, a value.Map) *router.Queue {
	t.Helper()
	q, _, err := e.vh.DeclareQueue(router.QueueSpec{Name: name, Type: router.Quorum, Durable: true, Arguments: a})
	require.NoError(t, err)
	return q
}

func (e *aloEnv) classic(t *testing.T, name string, a value.Map) *router.Queue {
	t.Helper()
	q, _, err := e.vh.DeclareQueue(router.QueueSpec{Name: name, Type: router.Classic, Durable: true, Arguments: a})
	require.NoError(t, err)
	return q
}

func durable(t *testing.T, body string, keys ...string) *router.Message {
	t.Helper()
	b := amqp10.AppendData(amqp10.AppendHeader(nil, &amqp10.Header{Durable: true, Priority: 4}), []byte(body))
	w, err := amqp10.ParseMessage(b)
	require.NoError(t, err)
	m := router.NewAMQP10Message(w)
	m.RoutingKeys = keys
	return m
}

func (e *aloEnv) publish(t *testing.T, exchange string, m *router.Message) router.OutcomeKind {
	t.Helper()
	st, err := e.vh.Publish(router.Publish{Exchange: exchange, Msg: m})
	require.NoError(t, err)
	return st.Outcome.Kind
}

func (e *aloEnv) queue(t *testing.T, name string) *router.Queue {
	t.Helper()
	q, ok := e.vh.Queue(name)
	require.True(t, ok, name)
	return q
}

// srcArgs is §6.6's common setup: at-least-once, reject-publish, DLX dlx, DLRK k1.
func srcArgs(extra ...any) value.Map {
	return args(append([]any{"x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish",
		"x-dead-letter-exchange", "dlx", "x-dead-letter-routing-key", "k1", "x-message-ttl", int64(0)}, extra...)...)
}

func deathsOf(t *testing.T, m *router.Message) annotations.History {
	t.Helper()
	h, ok := annotations.HistoryOf(m.Anns)
	require.True(t, ok)
	return *h
}

// DLX missing: retained (counted, not ready), then delivered once the
// DLX exists and routes; including a restart while retained.
func TestAtLeastOnceMissingDLXRetainedAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := openALO(t, dir)
	src := e.quorum(t, "src", srcArgs())
	e.classic(t, "tgt", nil)
	require.Equal(t, router.Accepted, e.publish(t, "", durable(t, "m", "src")))
	info := src.Info()
	require.Equal(t, 0, info.Messages)
	require.Equal(t, 1, info.Retained)
	require.Positive(t, e.dl.RetainedStats()[Key{VHost: "/", Queue: "src", Reason: router.ReasonExpired}])
	first := e.dl.RetainedStats()
	e.close(t)

	e = openALO(t, dir) // restart in the middle of the retries
	src = e.queue(t, "src")
	require.Equal(t, 1, src.Info().Retained)
	_, err := e.vh.DeclareExchange(router.ExchangeSpec{Name: "dlx", Type: router.ExchangeDirect, Durable: true})
	require.NoError(t, err)
	require.Equal(t, 1, src.Info().Retained, "S35: no route yet")
	require.NoError(t, e.vh.Bind(router.Binding{Source: "dlx", Destination: "tgt", Key: "k1"}))
	require.Equal(t, 0, src.Info().Retained)
	tgt := e.queue(t, "tgt")
	got := tgt.Take(10)
	require.Len(t, got, 1)
	require.False(t, got[0].Msg.Header.HasTTL)
	h := deathsOf(t, got[0].Msg)
	require.Equal(t, "src", h.Deaths[0].Queue)
	require.Equal(t, "expired", h.Deaths[0].Reason)
	require.Equal(t, uint64(1), h.Deaths[0].Count)
	require.Equal(t, []string{"src"}, h.Deaths[0].RoutingKeys)
	_ = first
	e.close(t)

	e = openALO(t, dir) // no duplicate after the move
	require.Equal(t, 0, e.queue(t, "src").Info().Retained)
	require.Equal(t, 0, e.queue(t, "tgt").Len())
	e.close(t)
}

// the DLX exists but routes nowhere: retained until bound.
func TestAtLeastOnceNoRouteRetainedInSource(t *testing.T) {
	e := openALO(t, "")
	_, err := e.vh.DeclareExchange(router.ExchangeSpec{Name: "dlx", Type: router.ExchangeDirect, Durable: true})
	require.NoError(t, err)
	src := e.quorum(t, "src", srcArgs())
	tgt := e.classic(t, "tgt", nil)
	e.publish(t, "", durable(t, "m", "src"))
	require.Equal(t, 1, src.Info().Retained)
	require.NoError(t, e.vh.Bind(router.Binding{Source: "dlx", Destination: "tgt", Key: "k1"}))
	require.Equal(t, 0, src.Info().Retained)
	require.Equal(t, 1, tgt.Len())
}

// a cycle is retained, not dropped; a policy DLRK then routes it.
func TestAtLeastOnceCycleRetainedInSource(t *testing.T) {
	e := openALO(t, "")
	src := e.quorum(t, "src", args("x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish",
		"x-dead-letter-exchange", "", "x-message-ttl", int64(0)))
	tgt := e.classic(t, "tgt", nil)
	e.publish(t, "", durable(t, "m", "src"))
	require.Equal(t, 1, src.Info().Retained)
	require.Equal(t, 0, src.Len())
	require.NoError(t, e.vh.PutPolicy(router.Policy{Name: "rk", Pattern: "^src$", ApplyTo: router.ApplyToQueues,
		Definition: args("dead-letter-routing-key", "tgt")}))
	require.Equal(t, 0, src.Info().Retained)
	require.Equal(t, 1, tgt.Len())
}

// retained messages count toward max-length.
func TestAtLeastOnceRetainedCountsTowardMaxLength(t *testing.T) {
	e := openALO(t, t.TempDir())
	_, err := e.vh.DeclareExchange(router.ExchangeSpec{Name: "dlx", Type: router.ExchangeDirect, Durable: true})
	require.NoError(t, err)
	tgt := e.classic(t, "tgt", nil)
	require.NoError(t, e.vh.Bind(router.Binding{Source: "dlx", Destination: "tgt", Key: "k1"}))
	require.NoError(t, e.vh.PutPolicy(router.Policy{Name: "rk", Pattern: "^src$", Definition: args("dead-letter-routing-key", "nowhere")}))
	src := e.quorum(t, "src", args("x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish",
		"x-dead-letter-exchange", "dlx", "x-message-ttl", int64(0), "x-max-length", int64(1)))
	require.Equal(t, router.Accepted, e.publish(t, "", durable(t, "1", "src")))
	require.Equal(t, router.Accepted, e.publish(t, "", durable(t, "2", "src")))
	require.Equal(t, 2, src.Info().Retained)
	require.Equal(t, router.Rejected, e.publish(t, "", durable(t, "3", "src")))
	require.NoError(t, e.vh.PutPolicy(router.Policy{Name: "rk", Pattern: "^src$", Definition: args("dead-letter-routing-key", "k1")}))
	require.Equal(t, 0, src.Info().Retained)
	got := tgt.Take(10)
	require.Len(t, got, 2)
	require.Equal(t, router.Accepted, e.publish(t, "", durable(t, "4", "src")))
}

// drop-head makes at-least-once fall back to at-most-once: dropped.
func TestAtLeastOnceDropHeadFallsBackToAtMostOnce(t *testing.T) {
	e := openALO(t, "")
	src := e.quorum(t, "src", args("x-dead-letter-strategy", "at-least-once", "x-overflow", "drop-head",
		"x-dead-letter-exchange", "missing", "x-message-ttl", int64(0)))
	require.Equal(t, router.StrategyAtMostOnce, src.DeadLetterStrategy())
	e.publish(t, "", durable(t, "m", "src"))
	require.Equal(t, 0, src.Info().Retained)
	require.Equal(t, uint64(1), e.dl.QueueStats("/", "src")[router.ReasonExpired].DroppedNoRoute)
}

// A switch from at-least-once to at-most-once drops the retained messages
// (rabbit_fifo_dlx_integration_SUITE:switch_strategy), from the store too.
func TestSwitchToAtMostOnceDropsRetained(t *testing.T) {
	dir := t.TempDir()
	e := openALO(t, dir)
	require.NoError(t, e.vh.PutPolicy(router.Policy{Name: "ov", Pattern: "^src$", Definition: args("overflow", "reject-publish")}))
	src := e.quorum(t, "src", args("x-dead-letter-strategy", "at-least-once", "x-dead-letter-exchange", "missing", "x-message-ttl", int64(0)))
	e.publish(t, "", durable(t, "m", "src"))
	require.Equal(t, 1, src.Info().Retained)
	require.NoError(t, e.vh.PutPolicy(router.Policy{Name: "ov", Pattern: "^src$", Definition: args("overflow", "drop-head")}))
	require.Equal(t, 0, src.Info().Retained)
	e.close(t)
	e = openALO(t, dir)
	require.Equal(t, 0, e.queue(t, "src").Info().Retained)
	e.close(t)
}

// The periodic retry forwards a message that every target refused before.
func TestRetainedRetriedOnInterval(t *testing.T) {
	e := openALO(t, "")
	tgt := e.classic(t, "tgt", args("x-max-length", int64(1), "x-overflow", "reject-publish"))
	require.Equal(t, router.Accepted, e.publish(t, "", durable(t, "filler", "tgt")))
	src := e.quorum(t, "src", args("x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish",
		"x-dead-letter-exchange", "", "x-dead-letter-routing-key", "tgt", "x-message-ttl", int64(0)))
	e.publish(t, "", durable(t, "m", "src"))
	require.Equal(t, 1, src.Info().Retained, "tgt is full: retained")
	require.Len(t, tgt.Take(1), 1) // no topology change: only the timer retries
	require.Eventually(t, func() bool { return src.Info().Retained == 0 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, 1, tgt.Len())
}

// A rejected durable message moves atomically: after a restart every
// message is in exactly one place, with its dead-letter history.
func TestAtomicDeadLetterMoveNoLossNoDuplicate(t *testing.T) {
	for _, strategy := range []string{"at-most-once", "at-least-once"} {
		t.Run(strategy, func(t *testing.T) {
			dir := t.TempDir()
			e := openALO(t, dir)
			tgt := e.quorum(t, "tgt", nil)
			src := e.quorum(t, "src", args("x-dead-letter-strategy", strategy, "x-overflow", "reject-publish",
				"x-dead-letter-exchange", "", "x-dead-letter-routing-key", "tgt"))
			const n = 200
			for i := range n {
				require.Equal(t, router.Accepted, e.publish(t, "", durable(t, fmt.Sprint(i), "src")))
			}
			c := &rejecter{}
			s, err := src.Subscribe(c, router.ConsumerOptions{})
			require.NoError(t, err)
			c.s = s
			s.Flow(0, n, false)
			require.Eventually(t, func() bool { return tgt.Len() == n }, 5*time.Second, time.Millisecond)
			require.Equal(t, 0, src.Len())
			e.close(t)

			e = openALO(t, dir)
			require.Equal(t, 0, e.queue(t, "src").Len())
			require.Equal(t, 0, e.queue(t, "src").Info().Retained)
			got := e.queue(t, "tgt").Take(2 * n)
			require.Len(t, got, n)
			seen := map[string]bool{}
			for _, p := range got {
				body := string(p.Msg.Container.(router.AMQP10).Wire.Bare())
				require.False(t, seen[body], "duplicate")
				seen[body] = true
				h := deathsOf(t, p.Msg)
				require.Equal(t, "rejected", h.Deaths[0].Reason)
				require.Equal(t, uint32(1), p.DeliveryCount)
			}
			e.close(t)
		})
	}
}

// rejecter rejects every delivery (from another goroutine: Deliver runs
// under the queue lock).
type rejecter struct {
	s *router.Subscription
}

func (r *rejecter) Deliver(d router.Delivery) {
	go func() { _ = r.s.Settle(d.Tag, router.Settlement{Kind: router.SettleReject}) }()
}
func (r *rejecter) Drained(uint32) {}

// The counters and log lines of at-least-once dead-lettering, attempt by
// attempt: each failed attempt (no route, cycle, every target refusing) is a retained count with its cause in the log and nothing in
// Stats or GlobalStats; the forwarded message counts once as dead-lettered,
// under StrategyAtLeastOnce.
func TestAtLeastOnceCountsEachAttempt(t *testing.T) {
	var logs lockedBuffer
	dl := New(Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	b := router.New(router.Options{DeadLetterer: dl, DeadLetterRetryInterval: time.Hour})
	t.Cleanup(b.Close)
	vh, _ := b.VHost("/")
	e := &aloEnv{b: b, vh: vh, dl: dl}
	tgt := e.classic(t, "tgt", args("x-max-length", int64(1), "x-overflow", "reject-publish"))
	require.Equal(t, router.Accepted, e.publish(t, "", durable(t, "filler", "tgt")))
	src := e.quorum(t, "src", args("x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish",
		"x-dead-letter-exchange", "dlx", "x-message-ttl", int64(0)))
	key := Key{VHost: "/", Queue: "src", Reason: router.ReasonExpired}
	step := func(want uint64, why string, change func()) {
		t.Helper()
		if change != nil {
			change() // a topology or policy change retries the retained message
		}
		require.Equal(t, 1, src.Info().Retained)
		require.Equal(t, map[Key]uint64{key: want}, dl.RetainedStats())
		require.Empty(t, dl.Stats())
		require.Empty(t, dl.GlobalStats())
		require.Contains(t, logs.String(), `"why":"`+why+`"`)
	}
	e.publish(t, "", durable(t, "m", "src"))
	step(1, "no route", nil) // the DLX is missing
	step(2, "no route", func() {
		_, err := vh.DeclareExchange(router.ExchangeSpec{Name: "dlx", Type: router.ExchangeFanout, Durable: true})
		require.NoError(t, err)
	})
	step(3, "cycle", func() { require.NoError(t, vh.Bind(router.Binding{Source: "dlx", Destination: "src"})) })
	step(4, "rejected by every target", func() {
		require.NoError(t, vh.Unbind(router.Binding{Source: "dlx", Destination: "src"}))
		require.NoError(t, vh.Bind(router.Binding{Source: "dlx", Destination: "tgt"}))
	})
	require.Len(t, tgt.Take(1), 1)
	require.NoError(t, vh.Bind(router.Binding{Source: "dlx", Destination: "tgt", Key: "again"})) // retries
	require.Equal(t, 0, src.Info().Retained)
	require.Equal(t, 1, tgt.Len())
	require.Equal(t, map[Key]Counts{key: {DeadLettered: 1}}, dl.Stats())
	require.Equal(t, map[GlobalKey]uint64{{QueueType: router.Quorum, Strategy: StrategyAtLeastOnce, Reason: router.ReasonExpired}: 1},
		dl.GlobalStats())
	require.Equal(t, uint64(4), dl.RetainedStats()[key], "the attempt that forwarded is not a retained one")
}

// lockedBuffer is a log sink the queue goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
