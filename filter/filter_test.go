package filter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

func described(desc any, v any) *value.Described { return &value.Described{Descriptor: desc, Value: v} }

func propsFilter(m value.Map) value.Map {
	return value.Map{{Key: value.Symbol("props"), Value: described(PropertiesFilterCode, m)}}
}

func appFilter(m value.Map) value.Map {
	return value.Map{{Key: value.Symbol("app"), Value: described(ApplicationPropertiesFilterName, m)}}
}

func setMatch(t *testing.T, set value.Map, tm testMsg) bool {
	t.Helper()
	inForce, f, err := Parse(set, DefaultLimits())
	require.NoError(t, err)
	require.NotNil(t, f)
	require.Equal(t, set, inForce)
	return f.Match(tm.build(t), nil)
}

// The property filter rules of the filter-expressions specification, as
// RabbitMQ 4.3 applies them.
func TestPropertiesFilter(t *testing.T) {
	msg := testMsg{props: &amqp10.Properties{
		MessageID: "id-123", UserID: []byte("guest"), To: str("/queues/q"), Subject: str("order.created"),
		ReplyTo: str("&reply"), CorrelationID: uint64(42), ContentType: ptr(value.Symbol("application/json")),
		ContentEncoding: ptr(value.Symbol("gzip")), AbsoluteExpiryTime: ptr(value.Timestamp(2000)),
		CreationTime: ptr(value.Timestamp(1000)), GroupID: str("g1"), GroupSequence: ptr(uint32(7)),
		ReplyToGroupID: str("rg"),
	}}
	for _, c := range []struct {
		name string
		f    value.Map
		want bool
	}{
		{"message-id", value.Map{{Key: value.Symbol("message-id"), Value: "id-123"}}, true},
		{"message-id prefix", value.Map{{Key: value.Symbol("message-id"), Value: "&p:id-"}}, true},
		{"message-id suffix", value.Map{{Key: value.Symbol("message-id"), Value: "&s:123"}}, true},
		{"message-id suffix no", value.Map{{Key: value.Symbol("message-id"), Value: "&s:124"}}, false},
		{"message-id other type", value.Map{{Key: value.Symbol("message-id"), Value: uint64(123)}}, false},
		{"user-id", value.Map{{Key: value.Symbol("user-id"), Value: []byte("guest")}}, true},
		{"to", value.Map{{Key: value.Symbol("to"), Value: "/queues/q"}}, true},
		{"subject prefix", value.Map{{Key: value.Symbol("subject"), Value: "&p:order."}}, true},
		{"subject exact no", value.Map{{Key: value.Symbol("subject"), Value: "order"}}, false},
		{"reply-to escaped &", value.Map{{Key: value.Symbol("reply-to"), Value: "&&reply"}}, true},
		{"correlation-id ulong", value.Map{{Key: value.Symbol("correlation-id"), Value: uint64(42)}}, true},
		{"content-type", value.Map{{Key: value.Symbol("content-type"), Value: value.Symbol("application/json")}}, true},
		{"content-encoding", value.Map{{Key: value.Symbol("content-encoding"), Value: value.Symbol("br")}}, false},
		{"absolute-expiry-time", value.Map{{Key: value.Symbol("absolute-expiry-time"), Value: value.Timestamp(2000)}}, true},
		{"creation-time", value.Map{{Key: value.Symbol("creation-time"), Value: value.Timestamp(1000)}}, true},
		{"group-id", value.Map{{Key: value.Symbol("group-id"), Value: "&s:1"}}, true},
		{"group-sequence", value.Map{{Key: value.Symbol("group-sequence"), Value: uint32(7)}}, true},
		{"reply-to-group-id", value.Map{{Key: value.Symbol("reply-to-group-id"), Value: "rg"}}, true},
		{"all must match", value.Map{{Key: value.Symbol("subject"), Value: "&p:order."}, {Key: value.Symbol("group-id"), Value: "g2"}}, false},
	} {
		assert.Equal(t, c.want, setMatch(t, propsFilter(c.f), msg), c.name)
	}
	// An absent property never matches.
	assert.False(t, setMatch(t, propsFilter(value.Map{{Key: value.Symbol("subject"), Value: "&p:"}}), testMsg{}))
}

func TestApplicationPropertiesFilter(t *testing.T) {
	msg := testMsg{appProps: value.Map{
		{Key: "country", Value: value.Symbol("UK")}, {Key: "weight", Value: uint16(5)},
		{Key: "price", Value: float64(10.5)}, {Key: "active", Value: true}, {Key: "missing", Value: nil},
		{Key: "data", Value: []byte("Hello")}, {Key: "amp", Value: "&x"},
	}}
	for _, c := range []struct {
		name string
		f    value.Map
		want bool
	}{
		{"string equals symbol", value.Map{{Key: "country", Value: "UK"}}, true},
		{"prefix", value.Map{{Key: "country", Value: "&p:U"}}, true},
		{"suffix", value.Map{{Key: "country", Value: "&s:K"}}, true},
		{"integer types", value.Map{{Key: "weight", Value: int64(5)}}, true},
		{"integer and double", value.Map{{Key: "weight", Value: float64(5)}}, true},
		{"double", value.Map{{Key: "price", Value: float64(10.5)}}, true},
		{"boolean", value.Map{{Key: "active", Value: true}}, true},
		{"boolean no", value.Map{{Key: "active", Value: false}}, false},
		{"null matches any present value", value.Map{{Key: "country", Value: nil}}, true},
		{"null matches a null value", value.Map{{Key: "missing", Value: nil}}, true},
		{"null does not match an absent key", value.Map{{Key: "absent", Value: nil}}, false},
		{"binary", value.Map{{Key: "data", Value: []byte("Hello")}}, true},
		{"binary is not a string", value.Map{{Key: "data", Value: "Hello"}}, false},
		{"escaped &", value.Map{{Key: "amp", Value: "&&x"}}, true},
		{"different type", value.Map{{Key: "weight", Value: "5"}}, false},
		{"all must match", value.Map{{Key: "country", Value: "UK"}, {Key: "weight", Value: int64(6)}}, false},
	} {
		assert.Equal(t, c.want, setMatch(t, appFilter(c.f), msg), c.name)
	}
}

// Parse applies the three filter-expression descriptors (by code or name,
// under any key), leaves the others out, and refuses malformed ones.
func TestParseFilterSet(t *testing.T) {
	sql := described(SQLFilterCode, "a = 1")
	set := value.Map{
		{Key: value.Symbol("apache.org:selector-filter:string"), Value: described(uint64(0x0000468C00000004), "a = 1")},
		{Key: value.Symbol("sql-filter"), Value: sql},
		{Key: value.Symbol("rabbitmq:stream-offset-spec"), Value: described(value.Symbol("rabbitmq:stream-offset-spec"), "first")},
		{Key: value.Symbol("p"), Value: described(PropertiesFilterName, value.Map{{Key: value.Symbol("subject"), Value: "s"}})},
		{Key: value.Symbol("legacy"), Value: "not described"},
		{Key: value.Symbol("s2"), Value: described(SQLFilterName, "b = 2")},
		{Key: value.Symbol("ap"), Value: described(ApplicationPropertiesFilterCode, value.Map{{Key: "k", Value: "v"}})},
	}
	inForce, f, err := Parse(set, DefaultLimits())
	require.NoError(t, err)
	require.NotNil(t, f)
	assert.Equal(t, value.Map{set[1], set[3], set[5], set[6]}, inForce)
	assert.Len(t, f.sql, 2)
	assert.Len(t, f.props, 1)
	assert.Len(t, f.appProps, 1)

	inForce, f, err = Parse(value.Map{set[0], set[2]}, DefaultLimits())
	require.NoError(t, err)
	assert.Nil(t, inForce)
	assert.Nil(t, f)

	for name, bad := range map[string]*value.Described{
		"empty properties":       described(PropertiesFilterCode, value.Map{}),
		"too many fields":        described(ApplicationPropertiesFilterCode, manyFields(17)),
		"properties not a map":   described(PropertiesFilterCode, "subject"),
		"string key":             described(PropertiesFilterCode, value.Map{{Key: "subject", Value: "s"}}),
		"unknown property":       described(PropertiesFilterCode, value.Map{{Key: value.Symbol("colour"), Value: "s"}}),
		"wrong reference type":   described(PropertiesFilterCode, value.Map{{Key: value.Symbol("subject"), Value: int64(1)}}),
		"content-type as string": described(PropertiesFilterCode, value.Map{{Key: value.Symbol("content-type"), Value: "text/plain"}}),
		"symbol key in app":      described(ApplicationPropertiesFilterCode, value.Map{{Key: value.Symbol("k"), Value: "v"}}),
		"list reference":         described(ApplicationPropertiesFilterCode, value.Map{{Key: "k", Value: value.List{1}}}),
		"bad modifier":           described(ApplicationPropertiesFilterCode, value.Map{{Key: "k", Value: "&q:v"}}),
		"sql not a string":       described(SQLFilterCode, value.Symbol("a = 1")),
		"sql syntax":             described(SQLFilterName, "a = "),
	} {
		_, _, err := Parse(value.Map{{Key: value.Symbol("mine"), Value: bad}}, DefaultLimits())
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.Contains(t, err.Error(), "mine", name)
	}
	_, _, err = Parse(value.Map{{Key: value.Symbol("ok"), Value: manyFieldsFilter(16)}}, DefaultLimits())
	assert.NoError(t, err, "16 fields are allowed")
}

func manyFields(n int) value.Map {
	var m value.Map
	for i := range n {
		m = append(m, value.KV{Key: string(rune('a' + i)), Value: int64(i)})
	}
	return m
}

func manyFieldsFilter(n int) *value.Described {
	return described(ApplicationPropertiesFilterCode, manyFields(n))
}

// The common path allocates nothing: a filter set over an AMQP 1.0
// message's properties, application properties and dead-letter history.
func TestMatchDoesNotAllocate(t *testing.T) {
	m, anns, set := benchInput(t)
	_, f, err := Parse(set, DefaultLimits())
	require.NoError(t, err)
	require.True(t, f.Match(m, anns))
	assert.Zero(t, testing.AllocsPerRun(100, func() { f.Match(m, anns) }))
}

// benchInput is a dead-lettered message and a filter set that tests its
// history, its application properties and its properties.
func benchInput(t testing.TB) (msg *router.Message, anns value.Map, set value.Map) {
	m := testMsg{
		props:    &amqp10.Properties{MessageID: "order-42", Subject: str("order.created"), ContentType: ptr(value.Symbol("application/json"))},
		appProps: value.Map{{Key: "tenant", Value: "acme"}, {Key: "region", Value: "eu-west"}, {Key: "amount", Value: int64(1250)}, {Key: "priority", Value: "high"}},
	}.build(t)
	h := annotations.Record(annotations.History{}, annotations.Event{Queue: "orders", Reason: annotations.ReasonRejected,
		Exchange: "shop", RoutingKeys: []string{"orders"}, Time: 1_700_000_000_000,
		Error: &annotations.DeathError{Condition: "app:invalid", Description: "no such product"}})
	anns = value.Map{{Key: annotations.HistoryKey{}, Value: &h}, {Key: annotations.ErrorKey{}}}
	set = value.Map{
		{Key: value.Symbol("sql-filter"), Value: described(SQLFilterCode,
			"m.[x-last-death-reason] = 'rejected' AND m.[x-last-death-error-condition] LIKE 'app:%' "+
				"AND x-opt-deaths.count < 3 AND region IN ('eu-west', 'eu-north') AND amount * 2 > 1000 AND p.subject LIKE 'order.%'")},
		{Key: value.Symbol("app"), Value: described(ApplicationPropertiesFilterCode, value.Map{{Key: "tenant", Value: "&p:ac"}})},
		{Key: value.Symbol("props"), Value: described(PropertiesFilterCode, value.Map{{Key: value.Symbol("content-type"), Value: value.Symbol("application/json")}})},
	}
	return m, anns, set
}

// BenchmarkMatch measures one test of a message against the filter set of
// benchInput (the per-message cost of a filtered consumer).
func BenchmarkMatch(b *testing.B) {
	m, anns, set := benchInput(b)
	_, f, err := Parse(set, DefaultLimits())
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if !f.Match(m, anns) {
			b.Fatal("no match")
		}
	}
}

// BenchmarkParseSQL measures parsing at attach.
func BenchmarkParseSQL(b *testing.B) {
	const src = "m.[x-last-death-reason] = 'rejected' AND (region IN ('eu-west', 'eu-north') OR amount * 2 > 1000) AND p.subject LIKE 'order.%'"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSQL(src); err != nil {
			b.Fatal(err)
		}
	}
}

// An expression tests the messages a queue's peek returns (what the HTTP
// API and the management node browse) the same way as a consumer's: the
// peeked message carries the queue's annotations for it.
func TestExprMatchesPeekedMessages(t *testing.T) {
	br := router.New(router.Options{})
	t.Cleanup(br.Close)
	vh, _ := br.VHost("/")
	q, _, err := vh.DeclareQueue(router.QueueSpec{Name: "q"})
	require.NoError(t, err)
	for _, colour := range []string{"red", "blue", "red"} {
		m := testMsg{appProps: value.Map{{Key: "colour", Value: colour}}}.build(t)
		m.RoutingKeys = []string{"q"}
		require.Equal(t, router.Accepted, q.Enqueue(m).Kind)
	}
	e, err := ParseSQL("colour = 'red'")
	require.NoError(t, err)
	n := 0
	for _, pm := range q.Peek(10) {
		if e.Match(pm.Msg, pm.Msg.Anns) {
			n++
		}
	}
	assert.Equal(t, 2, n)
	assert.Equal(t, 3, q.Len(), "a peek takes nothing")
}
