package router

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

func TestTopicMatch(t *testing.T) {
	tests := []struct {
		pattern, key string
		want         bool
	}{
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.c", false},
		{"a.*", "a", false},
		{"*", "a", true},
		{"*", "", false},
		{"*", "a.b", false},
		{"#", "", true},
		{"#", "a.b.c", true},
		{"a.#", "a", true},
		{"a.#", "a.b.c", true},
		{"a.#", "b.a", false},
		{"#.c", "c", true},
		{"#.c", "a.b.c", true},
		{"#.c", "a.b.c.d", false},
		{"a.#.c", "a.c", true},
		{"a.#.c", "a.x.y.c", true},
		{"a.#.#.c", "a.c", true},
		{"#.*", "", false},
		{"#.*", "a", true},
		{"*.#", "a.b", true},
		{"*.*.#", "a", false},
		{"#.b.#", "a.b.c", true},
		{"#.b.#", "b", true},
		{"#.b.#", "a.c", false},
		{"a..b", "a..b", true},
		{"a.*.b", "a..b", true},
		{"", "", true},
		{"", "a", false},
		{"a", "", false},
		{"stock.usd.*", "stock.usd.nyse", true},
		{"stock.*.nyse", "stock.eur.nyse", true},
		{"*.orange.*", "quick.orange.rabbit", true},
		{"*.*.rabbit", "lazy.orange.elephant", false},
		{"lazy.#", "lazy.orange.male.rabbit", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"|"+tt.key, func(t *testing.T) {
			assert.Equal(t, tt.want, topicMatch(compileTopic(tt.pattern), splitTopic(tt.key)))
		})
	}
}

func TestTopicMatchManyWildcardsIsBounded(t *testing.T) {
	pattern := compileTopic(strings.Repeat("#.*.", 200) + "x")
	key := splitTopic(strings.Repeat("a.", 2000) + "y")
	start := time.Now()
	assert.False(t, topicMatch(pattern, key))
	pattern = compileTopic(strings.Repeat("#.", 5000) + "y")
	assert.True(t, topicMatch(pattern, key))
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Len(t, pattern, 2, "runs of # collapse")
}

func TestHeadersMatch(t *testing.T) {
	app := map[string]any{"a": "1", "b": int32(2), "c": true, "s": value.Symbol("sym"), "f": float64(3), "x-app": "xa"}
	xs := map[string]any{"x-first-death-queue": "q1", "x-n": int64(7), "x-app": "override"}
	lookup := func(withX bool) func(string) (any, bool) {
		return func(k string) (any, bool) {
			if withX {
				if v, ok := xs[k]; ok {
					return v, true
				}
			}
			v, ok := app[k]
			return v, ok
		}
	}
	tests := []struct {
		name string
		args value.Map
		want bool
	}{
		{"all default", value.Map{{Key: "a", Value: "1"}, {Key: "b", Value: int64(2)}}, true},
		{"all one missing", value.Map{{Key: "a", Value: "1"}, {Key: "zz", Value: "1"}}, false},
		{"all value differs", value.Map{{Key: "x-match", Value: "all"}, {Key: "a", Value: "2"}}, false},
		{"all empty", value.Map{{Key: "x-match", Value: "all"}}, true},
		{"any empty", value.Map{{Key: "x-match", Value: "any"}}, false},
		{"any one", value.Map{{Key: "x-match", Value: "any"}, {Key: "a", Value: "nope"}, {Key: "c", Value: true}}, true},
		{"any none", value.Map{{Key: "x-match", Value: "any"}, {Key: "a", Value: "nope"}, {Key: "c", Value: false}}, false},
		{"numbers across widths", value.Map{{Key: "b", Value: uint8(2)}, {Key: "f", Value: int64(3)}}, true},
		{"float vs int", value.Map{{Key: "b", Value: 2.0}}, true},
		{"string equals symbol", value.Map{{Key: "s", Value: "sym"}, {Key: "a", Value: value.Symbol("1")}}, true},
		{"number is not string", value.Map{{Key: "a", Value: int64(1)}}, false},
		{"void means presence", value.Map{{Key: "a", Value: nil}}, true},
		{"void absent", value.Map{{Key: "zz", Value: nil}}, false},
		{"x- keys ignored in all", value.Map{{Key: "a", Value: "1"}, {Key: "x-first-death-queue", Value: "other"}}, true},
		{"x- keys ignored in any", value.Map{{Key: "x-match", Value: "any"}, {Key: "x-first-death-queue", Value: "q1"}}, false},
		{"all-with-x matches annotations", value.Map{{Key: "x-match", Value: "all-with-x"}, {Key: "x-first-death-queue", Value: "q1"}, {Key: "a", Value: "1"}}, true},
		{"all-with-x value differs", value.Map{{Key: "x-match", Value: "all-with-x"}, {Key: "x-first-death-queue", Value: "q2"}}, false},
		{"all-with-x numeric", value.Map{{Key: "x-match", Value: "all-with-x"}, {Key: "x-n", Value: uint32(7)}}, true},
		{"any-with-x one", value.Map{{Key: "x-match", Value: "any-with-x"}, {Key: "x-n", Value: int64(8)}, {Key: "x-first-death-queue", Value: "q1"}}, true},
		{"any-with-x none", value.Map{{Key: "x-match", Value: "any-with-x"}, {Key: "x-n", Value: int64(8)}}, false},
		{"with-x annotations override app props", value.Map{{Key: "x-match", Value: "all-with-x"}, {Key: "x-app", Value: "override"}}, true},
		{"symbol keys and x-match", value.Map{{Key: value.Symbol("x-match"), Value: value.Symbol("any")}, {Key: value.Symbol("c"), Value: true}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := compileHeaders(tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.want, h.match(lookup(h.mode.withX())))
		})
	}
}

func TestHeadersBadXMatch(t *testing.T) {
	_, err := compileHeaders(value.Map{{Key: "x-match", Value: "some"}})
	require.ErrorIs(t, err, ErrPreconditionFailed)
	_, err = compileHeaders(value.Map{{Key: "x-match", Value: int64(1)}})
	require.ErrorIs(t, err, ErrPreconditionFailed)
}

func TestValuesEqual(t *testing.T) {
	assert.True(t, valuesEqual(int8(-1), int64(-1)))
	assert.True(t, valuesEqual(uint64(1<<63), uint64(1<<63)))
	assert.False(t, valuesEqual(uint64(1<<63), int64(-1<<63)))
	assert.False(t, valuesEqual(int64(-1), uint64(1<<64-1)))
	assert.True(t, valuesEqual(value.Timestamp(5), int64(5)))
	assert.True(t, valuesEqual([]byte("a"), "a"))
	assert.False(t, valuesEqual(true, int64(1)))
	assert.False(t, valuesEqual(1.5, int64(1)))
	assert.True(t, valuesEqual(value.List{int32(1), "a"}, value.List{int64(1), value.Symbol("a")}))
	assert.True(t, valuesEqual(value.Map{{Key: "a", Value: 1}, {Key: "b", Value: 2}}, value.Map{{Key: value.Symbol("b"), Value: int64(2)}, {Key: "a", Value: uint8(1)}}))
	assert.False(t, valuesEqual(nil, "a"))
	assert.True(t, valuesEqual(nil, nil))
}

func TestHeadersExchangeWithWireMessage(t *testing.T) {
	e := newEnv(t)
	qAll := e.queue(t, "all", Classic)
	qAnyX := e.queue(t, "anyx", Classic)
	require.NoError(t, e.v.Bind(Binding{Source: "amq.headers", Destination: "all", Arguments: value.Map{
		{Key: "x-match", Value: "all"}, {Key: "color", Value: "red"}, {Key: "size", Value: int64(3)},
	}}))
	require.NoError(t, e.v.Bind(Binding{Source: "amq.match", Destination: "anyx", Arguments: value.Map{
		{Key: "x-match", Value: "any-with-x"}, {Key: "x-tag", Value: "t1"}, {Key: "x-first-death-reason", Value: "expired"},
	}}))

	m := wireMsg(t, value.Map{{Key: "color", Value: "red"}, {Key: "size", Value: uint8(3)}}, nil)
	assert.Equal(t, Accepted, e.publish(t, "amq.headers", m))
	assert.Equal(t, 1, qAll.Len())

	m = wireMsg(t, value.Map{{Key: "color", Value: "blue"}}, value.Map{{Key: value.Symbol("x-tag"), Value: value.Symbol("t1")}})
	assert.Equal(t, Accepted, e.publish(t, "amq.match", m))
	assert.Equal(t, 1, qAnyX.Len())

	// Broker annotations (Msg.Anns) are visible to -with-x bindings.
	m = wireMsg(t, nil, nil)
	m.Anns = value.Map{{Key: value.Symbol("x-first-death-reason"), Value: "expired"}}
	assert.Equal(t, Accepted, e.publish(t, "amq.match", m))
	assert.Equal(t, 2, qAnyX.Len())

	m = wireMsg(t, value.Map{{Key: "x-tag", Value: "nope"}}, nil)
	assert.Equal(t, Released, e.publish(t, "amq.match", m))
}
