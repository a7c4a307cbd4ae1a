package amqp10

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hx decodes annotated hex: whitespace and "|" separate bytes, quoted
// strings are literal ASCII, and "#" starts a comment to end of line.
func hx(s string) []byte {
	var out []byte
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for len(line) > 0 {
			line = strings.TrimLeft(line, " \t|")
			if line == "" {
				break
			}
			if line[0] == '"' {
				end := strings.IndexByte(line[1:], '"')
				out = append(out, line[1:1+end]...)
				line = line[end+2:]
				continue
			}
			end := strings.IndexAny(line, " \t|\"")
			if end < 0 {
				end = len(line)
			}
			tok, err := hex.DecodeString(line[:end])
			if err != nil {
				panic(err)
			}
			out = append(out, tok...)
			line = line[end:]
		}
	}
	return out
}

func deathsMap(withTTL bool) Map {
	m := Map{}
	if withTTL {
		m = append(m, KV{Key: Symbol("ttl"), Value: uint32(10)})
	}
	return append(m,
		KV{Key: Symbol("queue"), Value: "q1"},
		KV{Key: Symbol("reason"), Value: Symbol("expired")},
		KV{Key: Symbol("count"), Value: uint64(1)},
		KV{Key: Symbol("first-time"), Value: Timestamp(1700000000000)},
		KV{Key: Symbol("last-time"), Value: Timestamp(1700000000000)},
		KV{Key: Symbol("exchange"), Value: ""},
		KV{Key: Symbol("routing-keys"), Value: &Array{Type: TypeStr32, Elems: []any{"q1"}}},
	)
}

const deathsBody = `
	a3 05 "queue" a1 02 "q1"
	a3 06 "reason" a3 07 "expired"
	a3 05 "count" 53 01
	a3 0a "first-time" 83 00 00 01 8b cf e5 68 00
	a3 09 "last-time" 83 00 00 01 8b cf e5 68 00
	a3 08 "exchange" a1 00
	a3 0c "routing-keys" e0 08 01 b1 00 00 00 02 71 31
`

// TestGoldenXOptDeaths pins the RabbitMQ x-opt-deaths encoding: an array8
// of map32 elements whose values use the smallest forms.
func TestGoldenXOptDeaths(t *testing.T) {
	v := &Array{Type: TypeMap32, Elems: []any{deathsMap(false)}}
	got, err := AppendValue(nil, v)
	require.NoError(t, err)
	want := hx(`e0 7c 01 d1 | 00 00 00 76 00 00 00 0e` + deathsBody)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))

	back, rest, err := ReadValue(got)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Equal(t, v, back)

	// With a leading ttl entry.
	v = &Array{Type: TypeMap32, Elems: []any{deathsMap(true)}}
	got, err = AppendValue(nil, v)
	require.NoError(t, err)
	want = hx(`e0 83 01 d1 | 00 00 00 7d 00 00 00 10 | a3 03 74 74 6c 52 0a` + deathsBody)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got))

	// The []Map convenience encodes the same bytes.
	got2, err := AppendValue(nil, []Map{deathsMap(true)})
	require.NoError(t, err)
	require.Equal(t, got, got2)
}
