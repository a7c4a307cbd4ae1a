package annotations

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// The exact bytes of one expired death of queue q1, produced by RabbitMQ's own generator.
const golden13 = `
e0 7c 01 d1
00 00 00 76 00 00 00 0e
a3 05 71 75 65 75 65   a1 02 71 31
a3 06 72 65 61 73 6f 6e
a3 07 65 78 70 69 72 65 64
a3 05 63 6f 75 6e 74   53 01
a3 0a 66 69 72 73 74 2d 74 69 6d 65
83 00 00 01 8b cf e5 68 00
a3 09 6c 61 73 74 2d 74 69 6d 65
83 00 00 01 8b cf e5 68 00
a3 08 65 78 63 68 61 6e 67 65  a1 00
a3 0c 72 6f 75 74 69 6e 67 2d 6b 65 79 73
e0 08 01 b1 00 00 00 02 71 31`

func TestGoldenBytes(t *testing.T) {
	h := Record(History{}, Event{Queue: "q1", Reason: ReasonExpired, Exchange: "", RoutingKeys: []string{"q1"},
		Time: 1700000000000})
	got, err := amqp10.AppendValue(nil, DeathsValue(h))
	require.NoError(t, err)
	assert.Equal(t, unhex(t, golden13), got)

	// With ttl = 10 the map has 16 entries and starts with sym "ttl", smalluint 10.
	h = Record(History{}, Event{Queue: "q1", Reason: ReasonExpired, RoutingKeys: []string{"q1"},
		Time: 1700000000000, TTL: 10, HasTTL: true})
	got, err = amqp10.AppendValue(nil, DeathsValue(h))
	require.NoError(t, err)
	assert.Equal(t, byte(0x10), got[4+7], "map count")
	assert.Equal(t, unhex(t, "a3 03 74 74 6c 52 0a"), got[12:19])

	// Decoding the golden bytes gives the same history back.
	v, rest, err := amqp10.ReadValue(unhex(t, golden13))
	require.NoError(t, err)
	require.Empty(t, rest)
	dec, ok, err := Decode(value.Map{{Key: KeyDeaths, Value: v}})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, h.Deaths[0].Queue, dec.Deaths[0].Queue)
	assert.Equal(t, uint64(1), dec.Deaths[0].Count)
	assert.Equal(t, []string{"q1"}, dec.Deaths[0].RoutingKeys)
}

func TestApplyTypes(t *testing.T) {
	h := Record(History{}, Event{Queue: "q", Reason: ReasonRejected, Exchange: "x", RoutingKeys: []string{"k"},
		Time: 5, Error: &DeathError{Condition: "app:bad", Description: "no"}})
	anns := Apply(value.Map{{Key: value.Symbol("x-opt-other"), Value: "keep"}}, h, false)
	for _, k := range []value.Symbol{KeyFirstDeathQueue, KeyFirstDeathReason, KeyFirstDeathExchange,
		KeyLastDeathQueue, KeyLastDeathReason, KeyLastDeathExchange, KeyLastDeathErrorCond, KeyLastDeathErrorDescr} {
		v, ok := anns.Get(k)
		require.True(t, ok, k)
		assert.IsType(t, "", v, "%s must be a utf8 string", k)
	}
	v, _ := anns.Get(KeyFirstDeathReason)
	assert.Equal(t, "rejected", v)
	v, _ = anns.Get(value.Symbol("x-opt-other"))
	assert.Equal(t, "keep", v)
	// A later death without an error removes the error annotations; strict never writes them.
	h = Record(h, Event{Queue: "q2", Reason: ReasonExpired, Time: 6})
	anns = Apply(anns, h, false)
	_, ok := anns.Get(KeyLastDeathErrorCond)
	assert.False(t, ok)
	h2 := Record(History{}, Event{Queue: "q", Reason: ReasonRejected, Error: &DeathError{Condition: "c"}})
	_, ok = Apply(nil, h2, true).Get(KeyLastDeathErrorCond)
	assert.False(t, ok)
	dec, _, err := Decode(anns)
	require.NoError(t, err)
	assert.Equal(t, Place{"q", "rejected", "x"}, dec.First)
	assert.Equal(t, Place{"q2", "expired", ""}, dec.Last)
}

// amqp_client_SUITE:dead_letter_reject: q1 -> q2 -> q3 -> q1 -> q2 -> q3 -> q1 -> q2.
func TestCompactionExample(t *testing.T) {
	reasons := map[string]string{"q1": ReasonExpired, "q2": ReasonRejected, "q3": ReasonExpired}
	var h History
	for i, q := range []string{"q1", "q2", "q3", "q1", "q2", "q3", "q1", "q2"} {
		h = Record(h, Event{Queue: q, Reason: reasons[q], Time: value.Timestamp(i)})
	}
	require.Len(t, h.Deaths, 3)
	got := []string{}
	for _, d := range h.Deaths {
		got = append(got, d.Queue+":"+d.Reason+":"+string(rune('0'+d.Count)))
	}
	assert.Equal(t, []string{"q2:rejected:3", "q1:expired:3", "q3:expired:2"}, got)
	assert.Equal(t, Place{"q1", "expired", ""}, h.First)
	assert.Equal(t, value.Timestamp(0), h.Deaths[1].FirstTime)
	assert.Equal(t, value.Timestamp(6), h.Deaths[1].LastTime)
}

// RabbitMQ's mc_unit_SUITE:is_death_cycle truth table.
func TestIsCycle(t *testing.T) {
	var h History
	ev := func(q, r string) { h = Record(h, Event{Queue: q, Reason: r}) }
	check := func(q1, q2, q3 bool) {
		t.Helper()
		assert.Equal(t, q1, IsCycle(h, "q1"), "q1")
		assert.Equal(t, q2, IsCycle(h, "q2"), "q2")
		assert.Equal(t, q3, IsCycle(h, "q3"), "q3")
	}
	ev("q1", ReasonRejected)
	check(false, false, false)
	ev("q2", ReasonExpired)
	check(false, true, false)
	ev("q3", ReasonExpired)
	check(false, true, true)
	ev("q1", ReasonRejected)
	check(false, false, false)
	ev("q2", ReasonExpired)
	check(false, true, false)
}

func TestXDeath(t *testing.T) {
	h := Record(History{}, Event{Queue: "q", Reason: ReasonExpired, Exchange: "x", RoutingKeys: []string{"a", "b"},
		Time: 1700000000999, TTL: 500, HasTTL: true})
	h = Record(h, Event{Queue: "q", Reason: ReasonExpired, Time: 1700000005000})
	xd := ToXDeath(h)
	require.Len(t, xd, 1)
	assert.Equal(t, XDeath{OriginalExpiration: "500", HasOriginalExpiration: true, Count: 2, Reason: "expired",
		Queue: "q", Time: 1700000000, Exchange: "x", RoutingKeys: []string{"a", "b"}}, xd[0])
}

// Property: for random sequences of deaths, entries stay unique per {queue,
// reason}, most recent first, counts equal the events, first <= last time.
func TestHistoryProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	queues := []string{"a", "b", "c", "d"}
	reasons := []string{ReasonRejected, ReasonExpired, ReasonMaxLen, ReasonDeliveryLimit}
	for range 500 {
		var h History
		counts := map[[2]string]uint64{}
		var lastKey [2]string
		n := 1 + rng.IntN(40)
		for i := range n {
			k := [2]string{queues[rng.IntN(len(queues))], reasons[rng.IntN(len(reasons))]}
			h = Record(h, Event{Queue: k[0], Reason: k[1], Time: value.Timestamp(1000 + i)})
			counts[k]++
			lastKey = k
		}
		require.Len(t, h.Deaths, len(counts))
		assert.Equal(t, lastKey, [2]string{h.Deaths[0].Queue, h.Deaths[0].Reason}, "most recent first")
		for i, d := range h.Deaths {
			assert.Equal(t, counts[[2]string{d.Queue, d.Reason}], d.Count)
			assert.LessOrEqual(t, d.FirstTime, d.LastTime)
			if i > 0 {
				assert.Greater(t, h.Deaths[i-1].LastTime, d.LastTime, "ordered by recency")
			}
		}
		// Encoding round-trips.
		b, err := amqp10.AppendValue(nil, DeathsValue(h))
		require.NoError(t, err)
		v, _, err := amqp10.ReadValue(b)
		require.NoError(t, err)
		dec, _, err := Decode(value.Map{{Key: KeyDeaths, Value: v}})
		require.NoError(t, err)
		assert.Equal(t, h.Deaths, dec.Deaths)
	}
}

func FuzzDecode(f *testing.F) {
	seed, err := hex.DecodeString(strings.Join(strings.Fields(golden13), ""))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := amqp10.ReadValue(b)
		if err != nil {
			return
		}
		h, _, err := Decode(value.Map{{Key: KeyDeaths, Value: v}})
		if err != nil {
			return
		}
		_ = IsCycle(h, "q")
		if _, err := amqp10.AppendValue(nil, DeathsValue(h)); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
