package deadletter

import "testing"

// Allocation budget of publish, reject, dead-letter (first death, fanout
// DLX), delivery of the copy and its accept (BenchmarkDeadLetterPath).
func TestDeadLetterPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	p := newDLPath(t)
	got := testing.AllocsPerRun(1000, func() { p.one(t) })
	if got > 9 {
		t.Errorf("dead-letter path: %v allocs, budget 9", got)
	}
	if n := p.deadLettered(); n < 1000 {
		t.Errorf("dead-lettered %d", n)
	}
}
