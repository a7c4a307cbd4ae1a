package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// At-least-once dead-lettering (forward with publisher confirms, retain
// and retry what cannot be routed) against a broker with a durable store: in-process brokers for the
// scenarios, the built binary (SIGKILL) for the restart in the middle of a
// retained-message retry.

// aloRetry is the retry interval of retained dead letters in these tests.
const aloRetry = 100 * time.Millisecond

// startALO starts an in-process broker on the durable store in dir with a
// short at-least-once retry interval.
func startALO(t *testing.T, dir string) *epitaph.Broker {
	t.Helper()
	return startBroker(t, "", func(o *epitaph.Options) {
		o.InMemory = false
		o.DataDir = dir
		o.DeadLetterRetryInterval = aloRetry
	})
}

// aloArgs are the arguments of an at-least-once source queue (the common
// setup): DLX dlx, strategy at-least-once, overflow reject-publish, then
// extra.
func aloArgs(dlx string, extra ...amqp10.KV) amqp10.Map {
	m := amqp10.Map{kv("x-dead-letter-exchange", dlx), kv("x-dead-letter-strategy", "at-least-once"),
		kv("x-overflow", "reject-publish")}
	return append(m, extra...)
}

func queueInfo(t *testing.T, b *epitaph.Broker, name string) router.QueueInfo {
	t.Helper()
	q, ok := vhost(t, b).Queue(name)
	require.True(t, ok, "queue %q", name)
	return q.Info()
}

// retainedIn is the number of at-least-once dead letters retained in queue.
func retainedIn(t *testing.T, b *epitaph.Broker, name string) int {
	t.Helper()
	return queueInfo(t, b, name).Retained
}

// retainAttempts is how many times dead letters of queue for reason could
// not be forwarded (every failed attempt counts).
func retainAttempts(b *epitaph.Broker, queue string, r router.Reason) uint64 {
	return b.DeadLetters().RetainedStats()[deadletter.Key{VHost: "/", Queue: queue, Reason: r}]
}

func aloForwarded(b *epitaph.Broker, r router.Reason) uint64 {
	return b.DeadLetters().GlobalStats()[deadletter.GlobalKey{QueueType: router.Quorum,
		Strategy: deadletter.StrategyAtLeastOnce, Reason: r}]
}

func durableTTLMsg(body string, ttl time.Duration) *amqp.Message {
	m := durableMsg(body)
	m.Header.TTL = ttl
	return m
}

func putPolicy(t *testing.T, b *epitaph.Broker, name, pattern string, def ...amqp10.KV) {
	t.Helper()
	require.NoError(t, vhost(t, b).PutPolicy(router.Policy{Name: name, Pattern: pattern,
		ApplyTo: router.ApplyToQueues, Definition: amqp10.Map(def)}))
}

// aloCommon is the common setup of these tests: src at-least-once into dlx with DLRK
// k1, tgt bound to dlx with k1, plus the extra arguments of src.
func aloCommon(t *testing.T, b *epitaph.Broker, extra ...amqp10.KV) {
	t.Helper()
	declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
	declareQueue(t, b, "src", router.Quorum, aloArgs("dlx", append([]amqp10.KV{kv("x-dead-letter-routing-key", "k1")}, extra...)...))
	declareQueue(t, b, "tgt", router.Classic, nil)
	bind(t, b, "dlx", "tgt", "k1", nil)
}

// Expired, rejected and delivery_limit are forwarded with confirms.
func TestAtLeastOnceReasonsForwardedWithConfirms(t *testing.T) {
	t.Run("expired by queue TTL", func(t *testing.T) {
		b := startALO(t, t.TempDir())
		aloCommon(t, b, kv("x-message-ttl", int64(0)))
		s := session(t, dial(t, b, nil))
		publish(t, s, "/queues/src", durableMsg("m"))
		d := recvBodies(t, settledReceiver(t, s, "tgt"), "m")[0]
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "expired", 1, "", []string{"src"})
		assertSix(t, d, "src", "expired", "", "src", "expired", "")
		eventually(t, "src empty", func() bool { i := queueInfo(t, b, "src"); return i.Messages == 0 && i.Retained == 0 })
		assert.Equal(t, uint64(1), aloForwarded(b, router.ReasonExpired), "counted as at-least-once")
		assert.Zero(t, retainAttempts(b, "src", router.ReasonExpired), "never retained")
	})
	t.Run("expired by per-message TTL records ttl", func(t *testing.T) {
		b := startALO(t, t.TempDir())
		aloCommon(t, b)
		s := session(t, dial(t, b, nil))
		publish(t, s, "/queues/src", durableTTLMsg("m", 10*time.Millisecond))
		d := recvBodies(t, settledReceiver(t, s, "tgt"), "m")[0]
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "expired", 1, "", []string{"src"}, 10)
		require.NotNil(t, d.Header)
		assert.Zero(t, d.Header.TTL, "the dead-letter copy has no TTL")
		assert.True(t, d.Header.Durable)
		eventually(t, "src empty", func() bool { return retainedIn(t, b, "src") == 0 })
	})
	t.Run("rejected", func(t *testing.T) {
		b := startALO(t, t.TempDir())
		aloCommon(t, b)
		s := session(t, dial(t, b, nil))
		publish(t, s, "/queues/src", durableMsg("m"))
		r := receiver(t, s, "/queues/src", nil)
		reject(t, r, recv(t, r))
		d := recvBodies(t, settledReceiver(t, s, "tgt"), "m")[0]
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "rejected", 1, "", []string{"src"})
		assert.Equal(t, uint32(1), d.Header.DeliveryCount)
		eventually(t, "src empty", func() bool {
			i := queueInfo(t, b, "src")
			return i.Messages == 0 && i.Retained == 0 && i.MessagesUnacknowledged == 0
		})
		assert.Equal(t, uint64(1), aloForwarded(b, router.ReasonRejected))
	})
	t.Run("delivery_limit after an abrupt disconnect", func(t *testing.T) {
		b := startALO(t, t.TempDir())
		aloCommon(t, b, kv("x-delivery-limit", int64(0)))
		s := session(t, dial(t, b, nil))
		publish(t, s, "/queues/src", durableMsg("m"))
		px := startProxy(t, b.Addr().String())
		ps := session(t, dialVia(t, px))
		pr := receiver(t, ps, "/queues/src", nil)
		require.Equal(t, "m", body(recv(t, pr)))
		eventually(t, "the delivery to be unsettled", func() bool { return unacked(t, b, "src") == 1 })
		px.kill() // the consumer dies holding the message
		d := recvBodies(t, settledReceiver(t, s, "tgt"), "m")[0]
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "delivery_limit", 1, "", []string{"src"})
		assert.Equal(t, uint32(1), d.Header.DeliveryCount)
		eventually(t, "src empty", func() bool {
			i := queueInfo(t, b, "src")
			return i.Messages == 0 && i.Retained == 0 && i.MessagesUnacknowledged == 0
		})
		assert.Equal(t, uint64(1), aloForwarded(b, router.ReasonDeliveryLimit))
	})
}

// A missing DLX: the message is retained (counted in the source, not
// ready), retried, and delivered once the DLX exists and routes; the death
// keeps the time of the first attempt.
func TestAtLeastOnceMissingDLXRetained(t *testing.T) {
	b := startALO(t, t.TempDir())
	declareQueue(t, b, "src", router.Quorum, aloArgs("dlx", kv("x-dead-letter-routing-key", "k1"), kv("x-message-ttl", int64(0))))
	declareQueue(t, b, "tgt", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	publish(t, s, "/queues/src", durableMsg("m"))
	eventually(t, "m retained", func() bool { return retainedIn(t, b, "src") == 1 })
	i := queueInfo(t, b, "src")
	assert.Zero(t, i.Messages, "a retained message is not ready")
	assert.Positive(t, i.RetainedBytes)
	// Retried on the interval, and still retained.
	eventually(t, "retries", func() bool { return retainAttempts(b, "src", router.ReasonExpired) >= 3 })
	assert.Equal(t, 1, retainedIn(t, b, "src"))
	assert.Zero(t, queueLen(t, b, "tgt"))
	assert.Zero(t, aloForwarded(b, router.ReasonExpired))

	declared := time.Now()
	declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
	bind(t, b, "dlx", "tgt", "k1", nil)
	dr := settledReceiver(t, s, "tgt")
	d := recvBodies(t, dr, "m")[0]
	require.NotNil(t, d.Header)
	assert.Zero(t, d.Header.TTL, "header TTL absent")
	ds := deathsOf(t, d)
	require.Len(t, ds, 1)
	assertDeath(t, ds[0], "src", "expired", 1, "", []string{"src"})
	ft, _ := ds[0]["first-time"].(time.Time)
	assert.True(t, ft.Before(declared), "the death is recorded at the first attempt (%v), not at the forward (after %v)", ft, declared)
	eventually(t, "src empty", func() bool { return retainedIn(t, b, "src") == 0 })
	assert.Equal(t, uint64(1), aloForwarded(b, router.ReasonExpired))
	requireNoMessage(t, dr, 300*time.Millisecond) // no duplicate from the retries
}

// A missing DLX across a restart of an in-process broker: the retained
// message comes back retained (counted, not ready), keeps its first death time, and is
// delivered once the DLX is declared.
func TestAtLeastOnceRetainedSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := startALO(t, dir)
	declareQueue(t, b, "src", router.Quorum, aloArgs("dlx", kv("x-dead-letter-routing-key", "k1"), kv("x-message-ttl", int64(0))))
	declareQueue(t, b, "tgt", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	publish(t, s, "/queues/src", durableMsg("m1"), durableMsg("m2"))
	eventually(t, "both retained", func() bool { return retainedIn(t, b, "src") == 2 })
	eventually(t, "a retry", func() bool { return retainAttempts(b, "src", router.ReasonExpired) >= 4 })
	require.NoError(t, b.Close())
	restarted := time.Now()

	b = startALO(t, dir)
	i := queueInfo(t, b, "src")
	assert.Equal(t, 2, i.Retained, "retained messages are recovered retained")
	assert.Zero(t, i.Messages)
	eventually(t, "retries after the restart", func() bool { return retainAttempts(b, "src", router.ReasonExpired) >= 2 })
	declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
	bind(t, b, "dlx", "tgt", "k1", nil)
	s = session(t, dial(t, b, nil))
	dr := settledReceiver(t, s, "tgt")
	for _, d := range recvBodies(t, dr, "m1", "m2") {
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "expired", 1, "", []string{"src"})
		ft, _ := ds[0]["first-time"].(time.Time)
		assert.True(t, ft.Before(restarted), "first-time %v is the first attempt, before the restart at %v", ft, restarted)
	}
	eventually(t, "src empty", func() bool { return retainedIn(t, b, "src") == 0 })
	requireNoMessage(t, dr, 300*time.Millisecond)
}

// aloDefs is the topology of the binary restart test: src dead-letters at
// least once into dlx, which does not exist yet.
const aloDefs = `{"queues":[
 {"name":"src","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-dead-letter-exchange":"dlx",
  "x-dead-letter-routing-key":"k1","x-dead-letter-strategy":"at-least-once","x-overflow":"reject-publish","x-message-ttl":0}},
 {"name":"tgt","vhost":"/","durable":true,"arguments":{}}]}`

// startALOBinary runs the built broker on dir with the definitions defs,
// a 100 ms retry interval and the HTTP API; it returns the process and the
// API's base URL.
func startALOBinary(t *testing.T, dir, defs string, extra ...string) (*proc, string) {
	t.Helper()
	f := filepath.Join(dir, "defs.json")
	require.NoError(t, os.WriteFile(f, []byte(defs), 0o600))
	args := append([]string{"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--definitions", f, "--dead-letter-retry-interval", aloRetry.String()}, extra...)
	p := startEpitaph(t, args...)
	select {
	case line := <-p.lines:
		addr, ok := strings.CutPrefix(line, "http listening on ")
		require.True(t, ok, "second stdout line %q", line)
		return p, "http://" + addr
	case <-time.After(startTimeout):
		t.Fatal("no http listening line")
	}
	return nil, ""
}

func sigkill(t *testing.T, p *proc) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	p.wait(t)
}

// A missing DLX with the built broker SIGKILLed twice: once while the retained
// messages are being retried against the missing DLX, and once while the
// retry triggered by declaring the DLX binding moves them. Every message
// arrives in tgt exactly once, with one death of count 1.
func TestAtLeastOnceKillDuringRetryDeliversOnce(t *testing.T) {
	const n = 2000
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(34, uint64(time.Now().UnixNano())))
	p, _ := startALOBinary(t, dir, aloDefs)
	c, err := amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
	require.NoError(t, err)
	s := session(t, c)
	snd := sender(t, s, "/queues/src", nil)
	receipts := make([]amqp.SendReceipt, n)
	for i := range n {
		receipts[i], err = snd.SendWithReceipt(ctxT(t), durableMsg(fmt.Sprintf("m%04d", i)), nil)
		require.NoError(t, err)
	}
	for i := range n {
		st, err := receipts[i].Wait(ctxT(t))
		require.NoError(t, err)
		require.IsType(t, &amqp.StateAccepted{}, st, "m%04d", i)
	}
	// The messages expire at once and stay retained (the DLX is missing);
	// the broker retries them every 100 ms. Kill it in the middle of that.
	<-time.After(time.Duration(50+rng.IntN(250)) * time.Millisecond) // a random point, not synchronisation
	sigkill(t, p)
	_ = c.Close()

	// Restart; declare the DLX and bind tgt, which triggers a retry of the
	// recovered retained messages; kill the broker again while it runs.
	p, base := startALOBinary(t, dir, aloDefs)
	apiCallNoFail(t, base, "PUT", "/api/exchanges/%2f/dlx", `{"type":"direct","durable":true}`, 201)
	// A consumer on tgt that never settles shows how far the move got
	// before the kill (its deliveries come back after the restart).
	pc, err := amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
	require.NoError(t, err)
	defer pc.Close()
	peek := receiver(t, session(t, pc), "/queues/tgt", &amqp.ReceiverOptions{Credit: n})
	peeked := make(chan int, 1)
	go func() {
		k := 0
		for {
			if _, err := peek.Receive(context.Background(), nil); err != nil {
				peeked <- k
				return
			}
			k++
		}
	}()
	bound := make(chan int, 1)
	go func() {
		bound <- apiCallNoFail(nil, base, "POST", "/api/bindings/%2f/e/dlx/q/tgt", `{"routing_key":"k1"}`, 0)
	}()
	<-time.After(time.Duration(rng.IntN(40)) * time.Millisecond) // a random point during the move
	sigkill(t, p)
	st := <-bound
	t.Logf("binding request answered %d before the kill (0: cut by the kill); %d of %d messages reached tgt before it",
		st, <-peeked, n)

	p, base = startALOBinary(t, dir, aloDefs)
	if st != 201 { // the binding may have died with the broker
		apiCallNoFail(t, base, "POST", "/api/bindings/%2f/e/dlx/q/tgt", `{"routing_key":"k1"}`, 201)
	}
	c, err = amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
	require.NoError(t, err)
	defer c.Close()
	r := receiver(t, session(t, c), "/queues/tgt", &amqp.ReceiverOptions{Credit: 100})
	seen := map[string]int{}
	for len(seen) < n {
		m := recv(t, r)
		seen[body(m)]++
		ds := deathsOf(t, m)
		if assert.Len(t, ds, 1, "deaths of %s", body(m)) {
			assertDeath(t, ds[0], "src", "expired", 1, "", []string{"src"})
		}
		accept(t, r, m)
	}
	requireNoMessage(t, r, 500*time.Millisecond) // no duplicates
	dups := 0
	for i := range n {
		b := fmt.Sprintf("m%04d", i)
		assert.Equal(t, 1, seen[b], "copies of %s in tgt", b)
		dups += max(seen[b]-1, 0)
	}
	assert.Zero(t, dups, "duplicates: a single-node dead-letter move is atomic")
	q := apiJSON[map[string]any](t, api(t, base, "GET", "/api/queues/%2f/src", nil, 200))
	assert.Equal(t, float64(0), q["messages"], "src empty")
}

// apiCallNoFail is apiCall usable from any goroutine (t nil): it returns the
// status, or 0 when the request failed; with t set it requires want.
func apiCallNoFail(t *testing.T, base, method, path, body string, want int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	st := 0
	if resp, err := http.DefaultClient.Do(req); err == nil {
		st = resp.StatusCode
		resp.Body.Close()
	}
	if t != nil {
		require.Equal(t, want, st, "%s %s", method, path)
	}
	return st
}

// The DLX routes nowhere: retained, then delivered once bound.
func TestAtLeastOnceNoRouteRetained(t *testing.T) {
	b := startALO(t, t.TempDir())
	declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
	declareQueue(t, b, "src", router.Quorum, aloArgs("dlx", kv("x-dead-letter-routing-key", "k1")))
	declareQueue(t, b, "tgt", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	publish(t, s, "/queues/src", durableMsg("m"))
	r := receiver(t, s, "/queues/src", nil)
	reject(t, r, recv(t, r))
	eventually(t, "m retained", func() bool { return retainedIn(t, b, "src") == 1 })
	eventually(t, "retries", func() bool { return retainAttempts(b, "src", router.ReasonRejected) >= 2 })
	i := queueInfo(t, b, "src")
	assert.Zero(t, i.Messages)
	assert.Zero(t, i.MessagesUnacknowledged)
	assert.Equal(t, 1, i.Retained)
	requireNoMessage(t, r, 200*time.Millisecond) // retained, never redelivered to the consumer

	bind(t, b, "dlx", "tgt", "k1", nil)
	dr := settledReceiver(t, s, "tgt")
	d := recvBodies(t, dr, "m")[0]
	ds := deathsOf(t, d)
	require.Len(t, ds, 1)
	assertDeath(t, ds[0], "src", "rejected", 1, "", []string{"src"})
	eventually(t, "src empty", func() bool { return retainedIn(t, b, "src") == 0 })
	requireNoMessage(t, dr, 300*time.Millisecond)
	assert.Equal(t, uint64(1), aloForwarded(b, router.ReasonRejected))
}

// A cycle is retained, not dropped, and delivered once a policy sets a
// dead-letter routing key.
func TestAtLeastOnceCycleRetained(t *testing.T) {
	b := startALO(t, t.TempDir())
	declareQueue(t, b, "src", router.Quorum, aloArgs("", kv("x-message-ttl", int64(0))))
	declareQueue(t, b, "tgt", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	publish(t, s, "/queues/src", durableMsg("m"))
	eventually(t, "m retained", func() bool { return retainedIn(t, b, "src") == 1 })
	eventually(t, "retries", func() bool { return retainAttempts(b, "src", router.ReasonExpired) >= 2 })
	st := stats(b, "src", router.ReasonExpired)
	assert.Zero(t, st.DroppedCycle, "at-least-once never drops a cycle")
	assert.Equal(t, 1, retainedIn(t, b, "src"))

	putPolicy(t, b, "dlrk", "^src$", kv("dead-letter-routing-key", "tgt"))
	dr := settledReceiver(t, s, "tgt")
	d := recvBodies(t, dr, "m")[0]
	ds := deathsOf(t, d)
	require.Len(t, ds, 1)
	assertDeath(t, ds[0], "src", "expired", 1, "", []string{"src"})
	assertSix(t, d, "src", "expired", "", "src", "expired", "")
	eventually(t, "src empty", func() bool { return retainedIn(t, b, "src") == 0 })
	requireNoMessage(t, dr, 300*time.Millisecond)
}

// Retained messages count toward max-length: a full source rejects
// publishes until the routing is fixed, then both are delivered and
// publishing is accepted again (rabbit_fifo_dlx_integration_SUITE:
// reject_publish_source_queue_max_length).
func TestAtLeastOnceRetainedCountTowardMaxLength(t *testing.T) {
	b := startALO(t, t.TempDir())
	putPolicy(t, b, "dlrk", "^src$", kv("dead-letter-routing-key", "fake"))
	declareQueue(t, b, "src", router.Quorum, aloArgs("", kv("x-message-ttl", int64(0)), kv("x-max-length", int64(1))))
	declareQueue(t, b, "tgt", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/src", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, durableMsg("m1")))
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, durableMsg("m2")))
	eventually(t, "both retained", func() bool { return retainedIn(t, b, "src") == 2 })
	assert.Zero(t, queueInfo(t, b, "src").Messages)

	requireRejectedMaxLen(t, send(t, snd, durableMsg("m3")), "src")

	putPolicy(t, b, "dlrk", "^src$", kv("dead-letter-routing-key", "tgt"))
	eventually(t, "both forwarded", func() bool { return retainedIn(t, b, "src") == 0 })
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, durableMsg("m4")), "publishing is accepted again")
	dr := settledReceiver(t, s, "tgt")
	for _, d := range recvBodies(t, dr, "m1", "m2", "m4") {
		ds := deathsOf(t, d)
		require.Len(t, ds, 1)
		assertDeath(t, ds[0], "src", "expired", 1, "", []string{"src"})
	}
	requireNoMessage(t, dr, 300*time.Millisecond)
}

// At-least-once with drop-head (explicit or the default overflow)
// falls back to at-most-once: a dead letter with nowhere to go is dropped.
func TestAtLeastOnceDropHeadFallsBackToAtMostOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		args amqp10.Map
	}{
		{"x-overflow drop-head", amqp10.Map{kv("x-dead-letter-exchange", "missing"), kv("x-dead-letter-routing-key", "k1"),
			kv("x-dead-letter-strategy", "at-least-once"), kv("x-overflow", "drop-head"), kv("x-message-ttl", int64(0))}},
		{"no overflow", amqp10.Map{kv("x-dead-letter-exchange", "missing"), kv("x-dead-letter-routing-key", "k1"),
			kv("x-dead-letter-strategy", "at-least-once"), kv("x-message-ttl", int64(0))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startALO(t, t.TempDir())
			declareQueue(t, b, "src", router.Quorum, tc.args)
			declareQueue(t, b, "tgt", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publish(t, s, "/queues/src", durableMsg("m"))
			eventually(t, "m dropped", func() bool { return stats(b, "src", router.ReasonExpired).DroppedNoRoute == 1 })
			i := queueInfo(t, b, "src")
			assert.Zero(t, i.Retained, "not retained")
			assert.Zero(t, i.Messages)
			assert.Zero(t, retainAttempts(b, "src", router.ReasonExpired))
			assert.Zero(t, aloForwarded(b, router.ReasonExpired))

			declareExchange(t, b, "missing", router.ExchangeDirect, nil)
			bind(t, b, "missing", "tgt", "k1", nil)
			requireNoMessage(t, settledReceiver(t, s, "tgt"), 300*time.Millisecond)
		})
	}
}

// Switching a queue from at-least-once to at-most-once, by policy, drops the
// retained messages (rabbit_fifo_dlx_integration_SUITE:switch_strategy),
// also indirectly through overflow drop-head; they stay dropped across a
// restart.
func TestALOSwitchToAtMostOnceDropsRetained(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change []amqp10.KV
	}{
		{"dead-letter-strategy at-most-once", []amqp10.KV{kv("dead-letter-strategy", "at-most-once"), kv("overflow", "reject-publish")}},
		{"overflow drop-head", []amqp10.KV{kv("dead-letter-strategy", "at-least-once"), kv("overflow", "drop-head")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := startALO(t, dir)
			putPolicy(t, b, "strategy", "^src$", kv("dead-letter-strategy", "at-least-once"), kv("overflow", "reject-publish"))
			declareQueue(t, b, "src", router.Quorum, amqp10.Map{kv("x-dead-letter-exchange", "dlx"),
				kv("x-dead-letter-routing-key", "k1"), kv("x-message-ttl", int64(0))})
			declareQueue(t, b, "tgt", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			publish(t, s, "/queues/src", durableMsg("m1"), durableMsg("m2"), durableMsg("m3"))
			eventually(t, "retained", func() bool { return retainedIn(t, b, "src") == 3 })

			putPolicy(t, b, "strategy", "^src$", tc.change...)
			i := queueInfo(t, b, "src")
			assert.Zero(t, i.Retained, "the switch drops the retained messages")
			assert.Zero(t, i.RetainedBytes)
			assert.Zero(t, i.Messages)

			require.NoError(t, b.Close())
			b = startALO(t, dir)
			i = queueInfo(t, b, "src")
			assert.Zero(t, i.Retained, "dropped for good, not recovered")
			assert.Zero(t, i.Messages)
			declareExchange(t, b, "dlx", router.ExchangeDirect, nil)
			bind(t, b, "dlx", "tgt", "k1", nil)
			requireNoMessage(t, settledReceiver(t, session(t, dial(t, b, nil)), "tgt"), 300*time.Millisecond)
		})
	}
}
