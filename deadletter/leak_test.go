package deadletter

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

// A DeadLetterer keeps its counters, at-least-once ones included, in its
// own fields: once its broker is closed and dropped, nothing package-level
// holds it, so a process that starts many brokers (tests) does not grow.
func TestClosedDeadLettererIsCollected(t *testing.T) {
	collected := useAndCloseDeadLetterer(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed broker's DeadLetterer is still reachable")
		}
		runtime.Gosched()
	}
}

// useAndCloseDeadLetterer runs a broker whose DeadLetterer has counted
// every kind of fate (at most once: dead-lettered, dropped; at least once:
// retained, then forwarded), closes it, and returns a channel closed once
// the DeadLetterer is garbage collected. It keeps no reference to either
// (no t.Cleanup holding them).
func useAndCloseDeadLetterer(t *testing.T) <-chan struct{} {
	dl := New(Options{})
	b := router.New(router.Options{DeadLetterer: dl})
	vh, _ := b.VHost("/")
	declare := func(name string, typ router.QueueType, a value.Map) *router.Queue {
		q, _, err := vh.DeclareQueue(router.QueueSpec{Name: name, Type: typ, Durable: true, Arguments: a})
		require.NoError(t, err)
		return q
	}
	publish := func(m *router.Message) {
		st, err := vh.Publish(router.Publish{Msg: m})
		require.NoError(t, err)
		require.Equal(t, router.Accepted, st.Outcome.Kind)
	}
	tgt := declare("tgt", router.Classic, nil)
	declare("amo", router.Classic, args("x-dead-letter-exchange", "", "x-dead-letter-routing-key", "tgt", "x-message-ttl", int64(0)))
	declare("nowhere", router.Classic, args("x-dead-letter-exchange", "missing", "x-message-ttl", int64(0)))
	alo := declare("alo", router.Quorum, args("x-dead-letter-strategy", "at-least-once", "x-overflow", "reject-publish",
		"x-dead-letter-exchange", "dlx", "x-dead-letter-routing-key", "tgt", "x-message-ttl", int64(0)))
	publish(durable(t, "a", "amo"))
	publish(durable(t, "n", "nowhere"))
	publish(durable(t, "r", "alo"))
	require.Equal(t, 1, alo.Info().Retained)
	_, err := vh.DeclareExchange(router.ExchangeSpec{Name: "dlx", Type: router.ExchangeDirect, Durable: true})
	require.NoError(t, err)
	require.NoError(t, vh.Bind(router.Binding{Source: "dlx", Destination: "tgt", Key: "tgt"}))
	require.Equal(t, 0, alo.Info().Retained)
	require.Equal(t, 2, tgt.Len())
	require.Equal(t, Counts{DeadLettered: 1}, dl.QueueStats("/", "amo")[router.ReasonExpired])
	require.Equal(t, Counts{DroppedNoRoute: 1}, dl.QueueStats("/", "nowhere")[router.ReasonExpired])
	require.Equal(t, Counts{DeadLettered: 1}, dl.QueueStats("/", "alo")[router.ReasonExpired])
	require.Positive(t, dl.RetainedStats()[Key{VHost: "/", Queue: "alo", Reason: router.ReasonExpired}])
	b.Close()

	collected := make(chan struct{})
	runtime.AddCleanup(dl, func(c chan struct{}) { close(c) }, collected)
	return collected
}
