package router

import (
	"testing"
	"unsafe"
)

// A queued message costs its bytes plus an entry and a Message (shared by
// the queues it is on): these sizes are part of the memory budget per
// queued message (BENCHMARKS.md), so growing them must be a decision.
func TestQueuedMessageStructSizes(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 64 {
		t.Errorf("entry is %d bytes, budget 64 (move rarely used fields to entryExt)", n)
	}
	if n := unsafe.Sizeof(Message{}); n > 96 {
		t.Errorf("Message is %d bytes, budget 96", n)
	}
}
