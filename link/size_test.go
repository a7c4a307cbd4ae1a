package link

import (
	"testing"
	"unsafe"
)

// A published message's per-message state is one allocation (inbound); its
// size is part of the memory budget per queued message (BENCHMARKS.md):
// 168 bytes, Go's 176-byte size class.
func TestInboundSize(t *testing.T) {
	if n := unsafe.Sizeof(inbound{}); n > 176 {
		t.Errorf("inbound is %d bytes, budget 176", n)
	}
}
