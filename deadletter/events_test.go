package deadletter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

// subscribed returns an aloEnv (in dir, "" for memory) whose DeadLetterer
// publishes to a hub with one subscription.
func subscribed(t *testing.T, dir string) (*aloEnv, *dlevents.Subscription) {
	t.Helper()
	e := openALO(t, dir)
	hub := dlevents.New(dlevents.Options{})
	e.dl.events = hub
	sub, err := hub.Subscribe(dlevents.Filter{}, nil)
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	return e, sub
}

func nextEvent(t *testing.T, sub *dlevents.Subscription) *dlevents.Event {
	t.Helper()
	it, ok := sub.Next()
	require.True(t, ok, "no event")
	require.NotNil(t, it.Event, "a gap marker")
	return it.Event
}

// A copy that every target refuses (a full reject-publish queue) is lost
// at most once: the counters call it dead-lettered (it reached a target),
// the event says what happened, on the batched path (memory) and the
// atomic move (stored).
func TestEventReportsTargetsThatRefuseTheCopy(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		e, sub := subscribed(t, dir)
		e.classic(t, "full", args("x-max-length", int64(0), "x-overflow", "reject-publish"))
		e.classic(t, "open", nil)
		_, err := e.vh.DeclareExchange(router.ExchangeSpec{Name: "fan", Type: router.ExchangeFanout, Durable: true})
		require.NoError(t, err)
		require.NoError(t, e.vh.Bind(router.Binding{Source: "fan", Destination: "full"}))
		e.classic(t, "src", args("x-dead-letter-exchange", "", "x-dead-letter-routing-key", "full", "x-message-ttl", int64(0)))
		e.classic(t, "src2", args("x-dead-letter-exchange", "fan", "x-message-ttl", int64(0)))

		e.publish(t, "", durable(t, "a", "src"))
		ev := nextEvent(t, sub)
		assert.Equal(t, dlevents.OutcomeDropped, ev.Outcome)
		assert.Equal(t, dlevents.CauseRejected, ev.DropCause)
		assert.Equal(t, []string{"full"}, ev.RefusedQueues)
		assert.Empty(t, ev.TargetQueues)
		assert.Equal(t, "expired", ev.Reason)
		assert.Equal(t, "classic", ev.QueueType)
		assert.Equal(t, StrategyAtMostOnce, ev.Strategy)

		require.NoError(t, e.vh.Bind(router.Binding{Source: "fan", Destination: "open"}))
		e.publish(t, "", durable(t, "b", "src2"))
		ev = nextEvent(t, sub)
		assert.Equal(t, dlevents.OutcomeDeadLettered, ev.Outcome)
		assert.Empty(t, ev.DropCause)
		assert.Equal(t, []string{"full"}, ev.RefusedQueues)
		assert.Equal(t, []string{"open"}, ev.TargetQueues)
		assert.Equal(t, 0, sub.Len())
		e.close(t)
	}
}

// At least once, a message no target takes stays retained: each attempt
// is an event with outcome retained and its cause; the forward is the
// dead_lettered one, stamped with the first attempt's time.
func TestEventRetainedThenForwarded(t *testing.T) {
	e, sub := subscribed(t, "")
	src := e.quorum(t, "src", srcArgs())
	tgt := e.classic(t, "tgt", nil)
	e.publish(t, "", durable(t, "m", "src"))
	require.Equal(t, 1, src.Info().Retained)
	first := nextEvent(t, sub)
	assert.Equal(t, dlevents.OutcomeRetained, first.Outcome)
	assert.Equal(t, dlevents.CauseNoRoute, first.DropCause)
	assert.Equal(t, StrategyAtLeastOnce, first.Strategy)
	assert.Equal(t, "quorum", first.QueueType)
	_, err := e.vh.DeclareExchange(router.ExchangeSpec{Name: "dlx", Type: router.ExchangeDirect, Durable: true})
	require.NoError(t, err)
	require.NoError(t, e.vh.Bind(router.Binding{Source: "dlx", Destination: "tgt", Key: "k1"}))
	require.Equal(t, 1, tgt.Len())
	var last *dlevents.Event
	for sub.Len() > 0 {
		last = nextEvent(t, sub)
	}
	require.NotNil(t, last)
	assert.Equal(t, dlevents.OutcomeDeadLettered, last.Outcome)
	assert.Equal(t, []string{"tgt"}, last.TargetQueues)
	assert.Equal(t, []string{"k1"}, last.RoutingKeys)
	assert.Equal(t, "dlx", last.Exchange)
	assert.True(t, first.Time.Equal(last.Time), "the death is the first attempt's")
}

func TestMessageIDText(t *testing.T) {
	assert.Equal(t, "abc", messageIDText("abc"))
	assert.Equal(t, "42", messageIDText(uint64(42)))
	assert.Equal(t, "0102ff", messageIDText([]byte{1, 2, 0xff}))
	assert.Equal(t, "00112233-4455-6677-8899-aabbccddeeff",
		messageIDText(value.UUID{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}))
}
