package amqp091

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// testingMem checks the bytes a function allocates.
type testingMem struct{}

func (testingMem) check(t *testing.T, limit uint64, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, limit)
}
