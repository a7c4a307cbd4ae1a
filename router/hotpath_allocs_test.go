package router

import "testing"

// Allocation budgets of the per-message path (measured with
// BenchmarkPublishDeliverSettle*): NewMessage, routing, the queue entry,
// the delivery annotations map, the mailbox-free fake consumer's copy.
func TestHotPathAllocs(t *testing.T) {
	for _, c := range []struct {
		exchange string
		budget   float64
	}{{"", 8}, {"fan", 10}} {
		h := newHotPath(t, c.exchange)
		got := testing.AllocsPerRun(1000, func() { h.one(t, c.exchange) })
		if got > c.budget {
			t.Errorf("publish+deliver+settle via %q: %v allocs, budget %v", c.exchange, got, c.budget)
		}
	}
}
