package annotations

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// RecordIn keeps the history where the first death put it, moves the
// error entry last at each death, and writes the AMQP 1.0 form that Apply
// (the annotations RabbitMQ writes) gives, in the same places.
func TestRecordInKeepsRabbitMQsPlaces(t *testing.T) {
	trace := value.KV{Key: value.Symbol("x-opt-traceparent"), Value: "00-1"}
	rejected := Event{Queue: "q1", Reason: ReasonRejected, Exchange: "x", RoutingKeys: []string{"k"}, Time: 5,
		Error: &DeathError{Condition: "app:e", Description: "d"}}
	expired := Event{Queue: "q2", Reason: ReasonExpired, RoutingKeys: []string{"q2"}, Time: 6}

	anns, h1 := RecordIn(nil, value.Map{trace}, rejected, false)
	require.Len(t, anns, 3)
	assert.Equal(t, trace, anns[0])
	assert.Equal(t, value.KV{Key: HistoryKey{}, Value: h1}, anns[1])
	assert.Equal(t, value.KV{Key: ErrorKey{}}, anns[2])
	assert.Equal(t, Record(History{}, rejected), *h1)
	// The AMQP 1.0 form is the one Apply writes.
	assert.Equal(t, Apply(value.Map{trace}, *h1, false), ExpandAMQP10(nil, anns))

	// A modified outcome adds an entry after the error; the next death
	// replaces the history in place and moves the error (now none) last.
	modified := append(anns, value.KV{Key: value.Symbol("x-n"), Value: int64(1)})
	anns2, h2 := RecordIn(nil, modified, expired, false)
	assert.Equal(t, value.Map{trace, {Key: HistoryKey{}, Value: h2}, {Key: value.Symbol("x-n"), Value: int64(1)}}, anns2)
	assert.Equal(t, Record(*h1, expired), *h2)
	assert.Equal(t, Apply(ExpandAMQP10(nil, modified), *h2, false), ExpandAMQP10(nil, anns2))
	assert.Len(t, h1.Deaths, 1, "the earlier history is not modified")

	// Strict: no error entry, and no error in the history.
	anns3, h3 := RecordIn(nil, nil, rejected, true)
	assert.Equal(t, value.Map{{Key: HistoryKey{}, Value: h3}}, anns3)
	assert.Nil(t, h3.LastError)
}

// LiftAMQP10 reads the AMQP 1.0 form back into the neutral one, in place;
// annotations that Decode refuses stay as they are.
func TestLiftAMQP10UndoesExpand(t *testing.T) {
	trace := value.KV{Key: value.Symbol("x-opt-traceparent"), Value: "00-1"}
	anns, _ := RecordIn(nil, value.Map{trace}, Event{Queue: "q1", Reason: ReasonRejected, Time: 5,
		Error: &DeathError{Condition: "app:e", Description: "d"}}, false)
	anns = append(anns, value.KV{Key: value.Symbol("x-n"), Value: int64(1)})
	lifted := LiftAMQP10(ExpandAMQP10(nil, anns))
	require.Len(t, lifted, len(anns))
	h, ok := HistoryOf(lifted)
	require.True(t, ok)
	want, _ := HistoryOf(anns)
	assert.Equal(t, want.Deaths[0].Queue, h.Deaths[0].Queue)
	assert.Equal(t, want.LastError, h.LastError)
	for i := range anns {
		assert.IsType(t, anns[i].Key, lifted[i].Key, "entry %d", i)
	}
	assert.Equal(t, ExpandAMQP10(nil, anns), ExpandAMQP10(nil, lifted))

	opaque := value.Map{{Key: KeyDeaths, Value: value.List{"not a history"}}}
	assert.Equal(t, opaque, LiftAMQP10(opaque))
}
