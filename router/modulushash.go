package router

import (
	"cmp"
	"slices"
)

// pickModulusHash appends to out the one binding of bindings that an
// x-modulus-hash exchange routes msg to, as RabbitMQ 4.3 picks it
// (rabbit_exchange_type_modulus_hash:route): every binding counts, whatever
// its key (a destination bound twice counts twice); they are sorted as
// RabbitMQ sorts their destinations (exchanges before queues, then by name
// byte by byte), and the message goes to the one at
// phash2(routing keys) mod the number of bindings. So a message routes
// the same as on RabbitMQ for the same bindings, and the same after a
// restart. The sort uses out's spare room, so a router that reuses out
// does not allocate.
func pickModulusHash(bindings []*binding, routingKeys []string, out []*binding) []*binding {
	if len(bindings) == 0 {
		return out
	}
	start := len(out)
	out = append(out, bindings...)
	sorted := out[start:]
	slices.SortFunc(sorted, func(a, b *binding) int {
		// 'exchange' < 'queue' as Erlang atoms.
		if a.DestinationIsExchange != b.DestinationIsExchange {
			if a.DestinationIsExchange {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Destination, b.Destination)
	})
	pick := sorted[phash2Binaries(routingKeys)%uint32(len(sorted))]
	return append(out[:start], pick)
}

// phash2Range is the range RabbitMQ passes to erlang:phash2/2 (2^27).
const phash2Range = 1 << 27

// phash2Binaries is erlang:phash2(Keys, 1 bsl 27) for Keys a list of
// binaries: Erlang's make_hash2 (Bob Jenkins' lookup2 mix over each
// binary, the running hash as each one's initial value, then the list's
// empty tail), which Erlang keeps the same across releases. Checked
// against values computed by Erlang in the tests.
func phash2Binaries(keys []string) uint32 {
	const (
		golden       = 0x9e3779b9 // HCONST
		goldenTimes2 = 0x3c6ef372 // HCONST * 2, for the empty tail
		golden13     = 0x08d12e65 // HCONST * 13 mod 2^32, for binaries
		nilTag       = 2          // the empty list's tag in make_hash2
		emptyOnly    = 3468870702 // the hash of [] alone
	)
	var h uint32
	for _, k := range keys {
		h = lookup2(k, golden13+h, golden)
	}
	if h == 0 {
		h = emptyOnly
	} else {
		_, _, h = mix(goldenTimes2+nilTag, goldenTimes2, h)
	}
	return h % phash2Range
}

// lookup2 is Bob Jenkins' lookup2 hash of k with initial value c (Erlang's
// block_hash); the empty string hashes to c itself.
func lookup2(k string, c, golden uint32) uint32 {
	if k == "" {
		return c
	}
	a, b := uint32(golden), uint32(golden)
	le := func(s string) uint32 {
		return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
	}
	n := len(k)
	for ; len(k) >= 12; k = k[12:] {
		a += le(k[0:4])
		b += le(k[4:8])
		c += le(k[8:12])
		a, b, c = mix(a, b, c)
	}
	c += uint32(n)
	// The rest, up to 11 bytes: c's lowest byte holds the length.
	for i := len(k) - 1; i >= 0; i-- {
		v := uint32(k[i])
		switch {
		case i >= 8:
			c += v << (8 * (i - 7))
		case i >= 4:
			b += v << (8 * (i - 4))
		default:
			a += v << (8 * i)
		}
	}
	_, _, c = mix(a, b, c)
	return c
}

// mix is lookup2's mixing step.
func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= b
	a -= c
	a ^= c >> 13
	b -= c
	b -= a
	b ^= a << 8
	c -= a
	c -= b
	c ^= b >> 13
	a -= b
	a -= c
	a ^= c >> 12
	b -= c
	b -= a
	b ^= a << 16
	c -= a
	c -= b
	c ^= b >> 5
	a -= b
	a -= c
	a ^= c >> 3
	b -= c
	b -= a
	b ^= a << 10
	c -= a
	c -= b
	c ^= b >> 15
	return a, b, c
}
