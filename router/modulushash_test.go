package router

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// erlang:phash2(Keys, 134217728) as Erlang/OTP computes it, for lists of
// binaries: empty keys, keys around lookup2's 12-byte blocks, several keys
// in both orders, bytes above 0x7f.
func TestPhash2BinariesMatchesErlang(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		want uint32
	}{
		{[]string{}, 113427502},
		{[]string{""}, 38220213},
		{[]string{"a"}, 53691870},
		{[]string{"k"}, 403364},
		{[]string{"", ""}, 8578898},
		{[]string{"orders"}, 12008111},
		{[]string{"orders.eu.new"}, 88104819},
		{[]string{"0123456789ab"}, 119280432},
		{[]string{"0123456789abc"}, 56666097},
		{[]string{"0123456789abcdefghijklmnopqrstuvwxyz"}, 56094720},
		{[]string{"k1", "k2"}, 99073066},
		{[]string{"k2", "k1"}, 55895284},
		{[]string{"key", "cc-1", "cc-2"}, 114473892},
		{[]string{"\x63\x61\x66\xc3\xa9"}, 73231035},
		{[]string{"\xff\x00\x80\x07"}, 71368279},
		{[]string{"abcdefghijk"}, 95467487},
		{[]string{"abcdefgh"}, 77835165},
		{[]string{"abcd"}, 79744603},
		{[]string{"abcdefghijklmnopqrstuvw"}, 127183605},
		{[]string{"0"}, 20939704},
		{[]string{"1"}, 99340228},
		{[]string{"2"}, 21102361},
		{[]string{"3"}, 8856950},
		{[]string{"4"}, 19612710},
		{[]string{"5"}, 21097639},
		{[]string{"6"}, 127637441},
		{[]string{"7"}, 122241120},
		{[]string{"8"}, 124216864},
		{[]string{"9"}, 13422628},
		{[]string{"10"}, 121098920},
		{[]string{"11"}, 68919425},
		{[]string{"12"}, 99144363},
		{[]string{"13"}, 17802310},
		{[]string{"14"}, 20661104},
		{[]string{"15"}, 109502595},
		{[]string{"16"}, 90924169},
		{[]string{"17"}, 128433550},
		{[]string{"18"}, 2215706},
		{[]string{"19"}, 121634676},
		{[]string{"20"}, 98706888},
		{[]string{"21"}, 4145262},
		{[]string{"22"}, 65616899},
		{[]string{"23"}, 74126515},
		{[]string{"24"}, 42533279},
		{[]string{"25"}, 2643272},
		{[]string{"26"}, 103589140},
		{[]string{"27"}, 39672240},
		{[]string{"28"}, 10081186},
		{[]string{"29"}, 6272764},
		{[]string{"30"}, 56709686},
		{[]string{"31"}, 35663986},
		{[]string{"32"}, 77787514},
		{[]string{"33"}, 13022339},
		{[]string{"34"}, 76527270},
		{[]string{"35"}, 3733403},
		{[]string{"36"}, 36742842},
		{[]string{"37"}, 88806452},
		{[]string{"38"}, 100433498},
		{[]string{"39"}, 3305076},
		{[]string{"40"}, 128983745},
	} {
		assert.Equal(t, tc.want, phash2Binaries(tc.keys), "%q", tc.keys)
	}
}

// An x-modulus-hash exchange sends each message to one binding's
// destination: the bindings sorted as RabbitMQ sorts destinations
// (exchanges first, then by name), index phash2(routing keys) mod their
// number. The expected picks are worked out from Erlang's hashes above:
// "k" 403364 mod 4 = 0, "a" 53691870 mod 4 = 2, "orders" 12008111 mod 4 = 3.
func TestModulusHashExchangeRoutesAsRabbitMQ(t *testing.T) {
	e := newEnv(t)
	_, err := e.v.DeclareExchange(ExchangeSpec{Name: "mh", Type: ExchangeModulusHash, Durable: true})
	require.NoError(t, err)
	assert.Equal(t, Released, e.publish(t, "mh", msg("m", "k")), "no binding: unroutable")

	for _, n := range []string{"q-c", "q-a", "q-b", "behind-x"} {
		e.queue(t, n, Classic)
	}
	_, err = e.v.DeclareExchange(ExchangeSpec{Name: "x-e", Type: ExchangeFanout})
	require.NoError(t, err)
	require.NoError(t, e.v.Bind(Binding{Source: "x-e", Destination: "behind-x"}))
	// Bound out of order, with keys: neither matters.
	require.NoError(t, e.v.Bind(Binding{Source: "mh", Destination: "q-c", Key: "zzz"}))
	require.NoError(t, e.v.Bind(Binding{Source: "mh", Destination: "q-a"}))
	require.NoError(t, e.v.Bind(Binding{Source: "mh", Destination: "x-e", DestinationIsExchange: true, Key: "1"}))
	require.NoError(t, e.v.Bind(Binding{Source: "mh", Destination: "q-b", Key: "a"}))

	route := func(keys ...string) []string { return routeNames(t, e.v, "mh", keys...) }
	assert.Equal(t, []string{"behind-x"}, route("k"))
	assert.Equal(t, []string{"q-b"}, route("a"))
	assert.Equal(t, []string{"q-c"}, route("orders"))
	for range 3 {
		assert.Equal(t, []string{"q-c"}, route("orders"), "the same key always routes the same")
	}

	// A destination bound twice counts twice: five bindings now, sorted
	// x-e, q-a, q-a, q-b, q-c; "orders" 12008111 mod 5 = 1.
	require.NoError(t, e.v.Bind(Binding{Source: "mh", Destination: "q-a", Key: "second"}))
	assert.Equal(t, []string{"q-a"}, route("orders"))
}

// Both new exchange types and their bindings survive a restart, and route
// the same after it: x-modulus-hash by the same hash, x-local-random still
// to its bound classic queue (its bindings pass validation again).
func TestNewExchangeTypesRecovered(t *testing.T) {
	dir := t.TempDir()
	d := openDurable(t, dir)
	for _, x := range []ExchangeSpec{{Name: "mh", Type: ExchangeModulusHash, Durable: true}, {Name: "lr", Type: ExchangeLocalRandom, Durable: true}} {
		_, err := d.v.DeclareExchange(x)
		require.NoError(t, err)
	}
	for _, q := range []string{"q-a", "q-b", "q-c"} {
		d.queue(t, q, Classic)
		require.NoError(t, d.v.Bind(Binding{Source: "mh", Destination: q}))
	}
	require.NoError(t, d.v.Bind(Binding{Source: "lr", Destination: "q-b"}))
	d.close(t)

	d = openDurable(t, dir)
	info, ok := d.v.Exchange("mh")
	require.True(t, ok)
	assert.Equal(t, ExchangeModulusHash, info.Type)
	route := func(x string, keys ...string) []string { return routeNames(t, d.v, x, keys...) }
	// 12008111 mod 3 = 2, 53691870 mod 3 = 0 (Erlang's phash2 values above).
	assert.Equal(t, []string{"q-c"}, route("mh", "orders"))
	assert.Equal(t, []string{"q-a"}, route("mh", "a"))
	assert.Equal(t, []string{"q-b"}, route("lr", "any"))
}

// routeNames returns the names of the queues a message with keys routes to
// from exchange x.
func routeNames(t *testing.T, v *VHost, x string, keys ...string) []string {
	t.Helper()
	qs, err := v.Route(x, msg("m", keys...))
	require.NoError(t, err)
	var names []string
	for _, q := range qs {
		names = append(names, q.Name())
	}
	return names
}
