package e2e

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/router"
)

// benchMessage is a 1 KiB AMQP 1.0 message routed to queue.
func benchMessage(b *testing.B, queue string) *router.Message {
	b.Helper()
	body := make([]byte, 1024)
	raw := amqp10.AppendData(nil, body)
	w, err := amqp10.ParseMessage(raw)
	require.NoError(b, err)
	m := router.NewAMQP10Message(w)
	m.RoutingKeys = []string{queue}
	return m
}

// fillDLQ puts n dead messages into dlq: every tenth died in "other",
// the rest in "work" (both rejected, through the dead-letter path).
func fillDLQ(b *testing.B, br *epitaph.Broker, n int) {
	b.Helper()
	vh, _ := br.Router().VHost("/")
	work, _ := vh.Queue("work")
	other, _ := vh.Queue("other")
	mw, mo := benchMessage(b, "work"), benchMessage(b, "other")
	for i := range n {
		q, m := work, mw
		if i%10 == 9 {
			q, m = other, mo
		}
		q.Enqueue(m)
		q.Reject(1)
	}
	dlq, _ := vh.Queue("dlq")
	require.Equal(b, n, dlq.Len())
}

// BenchmarkPeekHistoryFilter: the first 50 messages that match a history
// filter which one message in ten matches (source_queue=other), at two DLQ
// depths. The cost is bounded by the page, so both should take the same
// time.
func BenchmarkPeekHistoryFilter(b *testing.B) {
	for _, depth := range []int{1000, 1000000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			opts := testOptions()
			opts.Definitions = []byte(redriveTopology)
			br, err := epitaph.Start(opts)
			require.NoError(b, err)
			defer br.Close()
			fillDLQ(b, br, depth)
			vh, _ := br.Router().VHost("/")
			dlq, _ := vh.Queue("dlq")
			req := dlops.PeekRequest{Count: 50, Filter: dlops.Filter{SourceQueue: "other"}}
			// The fill's garbage is collected before the timing starts, so
			// that a background mark of the filled heap is not timed.
			runtime.GC()
			b.ResetTimer()
			for b.Loop() {
				p, err := dlops.Peek(dlq, req, dlops.DefaultPeekMaxScan, filter.DefaultLimits())
				if err != nil || len(p.Messages) != 50 {
					b.Fatalf("peek: %v, %d messages", err, len(p.Messages))
				}
			}
		})
	}
}

// BenchmarkRedriveVsPublish: moving n dead messages back to their first
// death queue with a redrive task, against publishing the same number of
// messages to that queue through the router (the plain publish path,
// without the network). Reported as msgs/s.
func BenchmarkRedriveVsPublish(b *testing.B) {
	const n = 100000
	b.Run("publish", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			opts := testOptions()
			opts.Definitions = []byte(redriveTopology)
			br, err := epitaph.Start(opts)
			require.NoError(b, err)
			vh, _ := br.Router().VHost("/")
			m := benchMessage(b, "work")
			runtime.GC() // as for the redrive: the last broker's garbage is not timed
			b.StartTimer()
			start := time.Now()
			for range n {
				if _, err := vh.Publish(router.Publish{Msg: m}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
			b.StopTimer()
			br.Close()
			b.StartTimer()
		}
	})
	// The end-to-end publish path: go-amqp over loopback TCP, settled
	// (fire and forget, so the client does not wait for each outcome),
	// until the queue holds every message.
	b.Run("publish-amqp", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			opts := testOptions()
			opts.Definitions = []byte(redriveTopology)
			br, err := epitaph.Start(opts)
			require.NoError(b, err)
			vh, _ := br.Router().VHost("/")
			work, _ := vh.Queue("work")
			ctx := context.Background()
			conn, err := amqp.Dial(ctx, "amqp://"+br.Addr().String(), nil)
			require.NoError(b, err)
			s, err := conn.NewSession(ctx, nil)
			require.NoError(b, err)
			snd, err := s.NewSender(ctx, "/queues/work", &amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
			require.NoError(b, err)
			m := amqp.NewMessage(make([]byte, 1024))
			runtime.GC()
			b.StartTimer()
			start := time.Now()
			for range n {
				if err := snd.Send(ctx, m, nil); err != nil {
					b.Fatal(err)
				}
			}
			for work.Len() < n {
				time.Sleep(time.Millisecond) // polling the queue, not synchronisation
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
			b.StopTimer()
			_ = conn.Close()
			br.Close()
			b.StartTimer()
		}
	})
	b.Run("redrive", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			opts := testOptions()
			opts.Definitions = []byte(redriveTopology)
			br, err := epitaph.Start(opts)
			require.NoError(b, err)
			fillDLQ(b, br, n)
			vh, _ := br.Router().VHost("/")
			op := management.Operator{Auth: br.Auth(), User: "guest", VHost: vh}
			// As in the peek benchmark: the fill's garbage is collected
			// before the timing starts, so that a background mark of the
			// filled heap is not timed as the redrive's.
			runtime.GC()
			b.StartTimer()
			start := time.Now()
			tk, err := br.Redrives().Start(op, dlops.Spec{VHost: "/", SourceQueue: "dlq", Target: dlops.TargetFirstDeathQueue})
			require.NoError(b, err)
			for {
				got, _ := br.Redrives().Get(tk.ID)
				if got.State != dlops.StateRunning {
					require.EqualValues(b, n, got.Moved)
					break
				}
				time.Sleep(time.Millisecond) // polling the task, not synchronisation
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
			b.StopTimer()
			br.Close()
			b.StartTimer()
		}
	})
}
