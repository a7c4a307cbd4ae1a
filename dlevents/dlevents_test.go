package dlevents

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ev(vhost, queue string) *Event {
	return &Event{VHost: vhost, Queue: queue, Reason: "rejected", Outcome: OutcomeDeadLettered, Time: time.UnixMilli(1700000000123)}
}

func drain(s *Subscription) []Item {
	var out []Item
	for {
		it, ok := s.Next()
		if !ok {
			return out
		}
		out = append(out, it)
	}
}

func TestInactiveHubTakesNothing(t *testing.T) {
	var nilHub *Hub
	assert.False(t, nilHub.Active())
	nilHub.Publish(ev("/", "q")) // no panic, nothing to do
	h := New(Options{})
	assert.False(t, h.Active())
	e := ev("/", "q")
	h.Publish(e)
	assert.Zero(t, e.Seq, "an event nobody listens to is not even numbered")
	s, err := h.Subscribe(Filter{}, nil)
	require.NoError(t, err)
	assert.True(t, h.Active())
	s.Close()
	s.Close()
	assert.False(t, h.Active())
	assert.Zero(t, h.Subscribers())
}

func TestFilterAndOrder(t *testing.T) {
	h := New(Options{})
	all, err := h.Subscribe(Filter{}, nil)
	require.NoError(t, err)
	onlyQ, err := h.Subscribe(Filter{VHost: "/", Queue: "q"}, nil)
	require.NoError(t, err)
	allowed, err := h.Subscribe(Filter{VHost: "/", Allow: func(_, q string) bool { return q != "secret" }}, nil)
	require.NoError(t, err)
	for _, e := range []*Event{ev("/", "q"), ev("/", "other"), ev("v2", "q"), ev("/", "secret")} {
		h.Publish(e)
	}
	seqs := func(items []Item) (out []uint64) {
		for _, it := range items {
			require.NotNil(t, it.Event)
			out = append(out, it.Event.Seq)
		}
		return out
	}
	assert.Equal(t, []uint64{1, 2, 3, 4}, seqs(drain(all)))
	assert.Equal(t, []uint64{1}, seqs(drain(onlyQ)))
	assert.Equal(t, []uint64{1, 2}, seqs(drain(allowed)))
}

// A subscriber that does not read loses events beyond its buffer: the
// publisher never waits, the loss is counted, and the stream shows one gap
// marker where the events went missing, followed by the events published
// once there was room again.
func TestSlowSubscriberGetsGapMarker(t *testing.T) {
	h := New(Options{Buffer: 3})
	notified := 0
	s, err := h.Subscribe(Filter{}, func() { notified++ })
	require.NoError(t, err)
	for range 10 {
		h.Publish(ev("/", "q")) // never blocks: nobody reads
	}
	assert.Equal(t, 1, notified, "notified once, when the subscription stopped being empty")
	assert.Equal(t, uint64(7), s.Lost())
	assert.Equal(t, uint64(7), h.Lost())
	assert.Equal(t, 4, s.Len(), "3 events and the gap marker")
	first, _ := s.Next()
	require.NotNil(t, first.Event)
	h.Publish(ev("/", "q")) // the gap marker holds a place: still full
	second, _ := s.Next()
	require.NotNil(t, second.Event)
	h.Publish(ev("/", "q")) // room for one more event, after the gap
	items := drain(s)
	require.Len(t, items, 3)
	assert.Equal(t, uint64(3), items[0].Event.Seq)
	assert.Nil(t, items[1].Event)
	assert.Equal(t, uint64(8), items[1].Lost)
	assert.Equal(t, uint64(12), items[2].Event.Seq, "the seq jump shows the lost events too")
	h.Publish(ev("/", "q"))
	assert.Equal(t, 2, notified)
	assert.Equal(t, uint64(8), h.Lost())
}

func TestMaxSubscribersAndClose(t *testing.T) {
	h := New(Options{MaxSubscribers: 2})
	closed := 0
	a, err := h.Subscribe(Filter{}, func() { closed++ })
	require.NoError(t, err)
	_, err = h.Subscribe(Filter{}, nil)
	require.NoError(t, err)
	_, err = h.Subscribe(Filter{}, nil)
	require.ErrorIs(t, err, ErrTooManySubscribers)
	h.Publish(ev("/", "q"))
	h.Close()
	assert.True(t, a.Closed())
	assert.Equal(t, 2, closed, "notified for the event and for the close")
	assert.Len(t, drain(a), 1, "what was held can still be read")
	_, err = h.Subscribe(Filter{}, nil)
	require.ErrorIs(t, err, ErrClosed)
	assert.False(t, h.Active())
	a.Close()
	h.Close()
}

// Concurrent publishers and a reader: each subscription sees strictly
// increasing seqs and every event is either read or counted lost.
func TestConcurrentPublishers(t *testing.T) {
	h := New(Options{Buffer: 16})
	ready := make(chan struct{}, 1)
	s, err := h.Subscribe(Filter{}, func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	const publishers, each = 4, 500
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() {
			for range each {
				h.Publish(ev("/", "q"))
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var read, lost, last uint64
	finished := false
	for {
		for {
			it, ok := s.Next()
			if !ok {
				break
			}
			if it.Event == nil {
				lost += it.Lost
				continue
			}
			require.Greater(t, it.Event.Seq, last)
			last = it.Event.Seq
			read++
		}
		if finished {
			break
		}
		select {
		case <-ready:
		case <-done:
			finished = true
		}
	}
	assert.Equal(t, uint64(publishers*each), read+lost)
	assert.Equal(t, s.Lost(), lost)
	s.Close()
}

func TestJSONShape(t *testing.T) {
	e := ev("/", "q")
	e.Seq, e.QueueType, e.Count, e.Strategy = 7, "classic", 2, "at_most_once"
	e.Exchange, e.HasExchange, e.RoutingKeys, e.TargetQueues = "", true, []string{"dlq"}, []string{"dlq"}
	e.MessageID, e.HasMessageID = "m-1", true
	e.ErrorCondition, e.ErrorDescription = "app:bad", "no such product"
	b, err := Item{Event: e}.JSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"dead_letter","seq":7,"time":"2023-11-14T22:13:20.123Z","vhost":"/","queue":"q",
		"queue_type":"classic","reason":"rejected","count":2,"strategy":"at_most_once","outcome":"dead_lettered",
		"exchange":"","routing_keys":["dlq"],"target_queues":["dlq"],"refused_queues":[],"cycle_queues":[],
		"drop_cause":null,"message_id":"m-1","error":{"condition":"app:bad","description":"no such product"}}`, string(b))
	var keys map[string]any
	require.NoError(t, json.Unmarshal(b, &keys))
	p, err := ParseJSON(b)
	require.NoError(t, err)
	assert.Equal(t, "q", p.Queue)
	tm, err := p.ParsedTime()
	require.NoError(t, err)
	assert.True(t, tm.Equal(e.Time))

	b, err = Item{Lost: 3}.JSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"gap","lost":3}`, string(b))
}
