package auth

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The per-source record grows the wait per recent failure up to ten
// delays, restarts after a quiet window, and never holds more sources than
// its bound (the least recently failed is forgotten first).
func TestAuthFailuresBoundedPerSource(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := NewLoginBrake(time.Second, 3, func() time.Time { return now })
	a := netip.MustParseAddr("192.0.2.1")
	for n := 1; n <= 12; n++ {
		require.Equal(t, time.Duration(min(n, 10))*time.Second, b.Failed(a), "failure %d", n)
	}
	now = now.Add(11 * time.Second) // quiet for more than ten delays
	require.Equal(t, time.Second, b.Failed(a), "the count restarts")
	require.Equal(t, time.Second, b.Failed(netip.MustParseAddr("::ffff:192.0.2.2")))
	require.Equal(t, 2*time.Second, b.Failed(netip.MustParseAddr("192.0.2.2")), "IPv4-mapped is the same source")

	for i := range 1000 {
		b.Failed(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}))
	}
	require.Equal(t, 3, b.Sources(), "bounded")
	require.Equal(t, time.Second, b.Failed(a), "a was evicted: it starts again")
	require.Equal(t, uint64(13+2+1000+1), b.Failures())

	off := NewLoginBrake(0, 3, nil)
	require.Zero(t, off.Failed(a))
	require.Zero(t, off.Sources())
	require.Equal(t, uint64(1), off.Failures())
}
