package router

import "testing"

// Allocation budgets of the per-message path (measured with
// BenchmarkPublishDeliverSettle*): NewMessage, the routing result, the
// queue entries, the mailbox-free fake consumer's copy. Routing scratch
// is pooled and delivery annotations are built into the link's buffer.
func TestHotPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	for _, c := range []struct {
		exchange string
		budget   float64
	}{{"", 5}, {"fan", 6}} {
		h := newHotPath(t, c.exchange)
		got := testing.AllocsPerRun(1000, func() { h.one(t, c.exchange) })
		if got > c.budget {
			t.Errorf("publish+deliver+settle via %q: %v allocs, budget %v", c.exchange, got, c.budget)
		}
	}
}
