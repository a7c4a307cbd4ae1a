package management

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Long client values are clipped on a rune boundary and say how long they were.
func TestClip(t *testing.T) {
	long := Clip(strings.Repeat("é", 30_000))
	require.Less(t, len(long), 2*logValueMax)
	require.Contains(t, long, "(60000 bytes)")
	require.True(t, strings.HasPrefix(long, "éé"))
	require.Equal(t, "short", Clip("short"))
}
