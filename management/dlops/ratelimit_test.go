package dlops

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// The token bucket holds a task to its rate within 5% over a run, on the
// fake clock of a synctest bubble: N messages at R per second take
// (N-1)/R seconds (the first goes at once, no burst).
func TestTokenBucketHonoursRate(t *testing.T) {
	for _, rate := range []float64{1, 20, 100, 1000, 12345} {
		synctest.Test(t, func(t *testing.T) {
			b := newTokenBucket(rate)
			const n = 501
			start := time.Now()
			for range n {
				if err := b.wait(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			elapsed := time.Since(start).Seconds()
			got := float64(n-1) / elapsed
			if got > rate*1.05 || got < rate*0.95 {
				t.Fatalf("rate %g: %d messages in %.4fs = %.2f/s, want within 5%%", rate, n, elapsed, got)
			}
		})
	}
}

// Slow work between messages earns no burst: after a pause the bucket
// still paces the next messages one interval apart.
func TestTokenBucketNoBurstAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTokenBucket(10)
		_ = b.wait(t.Context())
		time.Sleep(5 * time.Second)
		start := time.Now()
		for range 11 {
			_ = b.wait(t.Context())
		}
		if got := time.Since(start); got < 990*time.Millisecond {
			t.Fatalf("11 messages after an idle pause took %v, want about 1s (no burst)", got)
		}
	})
}

// A cancelled context ends a wait at once.
func TestTokenBucketCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTokenBucket(0.001)
		_ = b.wait(t.Context())
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		if err := b.wait(ctx); err == nil {
			t.Fatal("wait returned nil after cancel")
		}
		if d := time.Since(start); d != time.Second {
			t.Fatalf("wait ended after %v, want 1s", d)
		}
	})
}

// A task moves in batches sized from its rate; taking a batch's tokens at
// once keeps the rate within 5% (N messages in batches take (N-1)/R
// seconds, as one at a time), and a slow rate moves one message per batch.
func TestTokenBucketBatchesHonourRate(t *testing.T) {
	for _, rate := range []float64{1, 20, 100, 1000, 12345, 200000} {
		synctest.Test(t, func(t *testing.T) {
			r := &run{m: &Manager{scan: 1024}, task: Task{Rate: rate}}
			n := r.batchSize()
			if rate <= 50 && n != 1 {
				t.Fatalf("rate %g: batches of %d, want 1", rate, n)
			}
			if n > maxBatch || n > max(1, int(rate*batchEvery.Seconds())) {
				t.Fatalf("rate %g: batches of %d, more than %v of the rate", rate, n, batchEvery)
			}
			b := newTokenBucket(rate)
			total := 0
			start := time.Now()
			for total < 100*n+1 {
				k := min(n, 100*n+1-total)
				if err := b.waitN(t.Context(), k); err != nil {
					t.Fatal(err)
				}
				total += k
			}
			elapsed := time.Since(start).Seconds()
			got := float64(total-1) / elapsed
			if got > rate*1.05 || got < rate*0.95 {
				t.Fatalf("rate %g, batches of %d: %d messages in %.4fs = %.2f/s, want within 5%%", rate, n, total, elapsed, got)
			}
		})
	}
}
