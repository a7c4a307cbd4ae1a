package management

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A burst of records per message passes, the rest are counted and
// reported with the next record after the interval; long client values
// are clipped on a rune boundary.
func TestRateLogBurstThenSummary(t *testing.T) {
	var buf bytes.Buffer
	r := newRateLog(slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	for range 1000 {
		r.Log(slog.LevelWarn, "management request failed", "path", clip(strings.Repeat("é", 30_000)))
	}
	r.Log(slog.LevelWarn, "another message")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, logBurst+1)
	for _, l := range lines[:logBurst] {
		require.Less(t, len(l), 2*logValueMax, "clipped")
		require.Contains(t, l, "(60000 bytes)")
	}
	now = now.Add(logInterval)
	buf.Reset()
	r.Log(slog.LevelWarn, "management request failed")
	require.Contains(t, buf.String(), "suppressed=990")
	require.Equal(t, "short", clip("short"))
}
