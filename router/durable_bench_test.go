package router

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router/store"
)

func benchMsg(b testing.TB) *Message {
	body := make([]byte, 1024)
	raw := amqp10.AppendData(amqp10.AppendHeader(nil, &amqp10.Header{Durable: true, Priority: 4}), body)
	w, err := amqp10.ParseMessage(raw)
	require.NoError(b, err)
	m := NewAMQP10Message(w)
	m.RoutingKeys = []string{"q"}
	return m
}

// BenchmarkDurablePublish: 1 KiB durable messages into a durable quorum
// queue on Pebble; every outcome is counted only after its sync.
// pubs publishers, each with up to inflight unconfirmed publishes.
func BenchmarkDurablePublish(b *testing.B) {
	for _, c := range []struct{ pubs, inflight int }{{1, 1}, {1, 100}, {64, 1}} {
		b.Run(fmt.Sprintf("pubs=%d/inflight=%d", c.pubs, c.inflight), func(b *testing.B) {
			dir := b.TempDir()
			st, err := store.OpenPebble(dir, store.PebbleOptions{BodyDir: filepath.Join(dir, "queues")})
			require.NoError(b, err)
			br := New(Options{Store: st})
			v, _ := br.VHost("/")
			_, _, err = v.DeclareQueue(QueueSpec{Name: "q", Type: Quorum, Durable: true})
			require.NoError(b, err)
			m := benchMsg(b)
			b.SetBytes(1024)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			per := b.N / c.pubs
			for range c.pubs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem := make(chan struct{}, c.inflight)
					var pw sync.WaitGroup
					for range per {
						sem <- struct{}{}
						pw.Add(1)
						release := func(st Outcome) {
							if st.Kind != Accepted {
								b.Error("not accepted", st)
							}
							<-sem
							pw.Done()
						}
						res, err := v.Publish(Publish{Exchange: "", Msg: m, Confirm: release})
						st, pending := res.Outcome, res.Pending
						if err != nil {
							b.Error(err)
						}
						if !pending {
							release(st)
						}
					}
					pw.Wait()
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(per*c.pubs)/el.Seconds(), "msgs/s")
			br.Close()
			require.NoError(b, st.Close())
		})
	}
}

// TestRecoverMillion fills a durable queue with EPITAPH_RECOVER_N (default
// 1,000,000 when set to "1") stored 1 KiB messages, then measures a new
// broker's Recover. Run with EPITAPH_RECOVER_N=1000000 go test -run RecoverMillion -v ./router.
func TestRecoverMillion(t *testing.T) {
	nstr := os.Getenv("EPITAPH_RECOVER_N")
	if nstr == "" {
		t.Skip("set EPITAPH_RECOVER_N (e.g. 1000000)")
	}
	n, err := strconv.Atoi(nstr)
	require.NoError(t, err)
	dir := t.TempDir()
	st, err := store.OpenPebble(dir, store.PebbleOptions{BodyDir: filepath.Join(dir, "queues")})
	require.NoError(t, err)
	br := New(Options{Store: st})
	v, _ := br.VHost("/")
	q, _, err := v.DeclareQueue(QueueSpec{Name: "q", Type: Quorum, Durable: true})
	require.NoError(t, err)
	enc, err := encodeMessage(benchMsg(t))
	require.NoError(t, err)
	fill := time.Now()
	const batch = 1000
	var wg sync.WaitGroup
	for i := 0; i < n; i += batch {
		recs := make([]store.Record, 0, batch)
		for s := i; s < min(i+batch, n); s++ {
			e := &entry{msg: &Message{}, dc: 0}
			recs = append(recs, store.Record{Queue: q.id, Seq: uint64(s + 1), Msg: enc, State: encodeState(e)})
		}
		wg.Add(1)
		st.Append(recs, func(err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	t.Logf("filled %d messages in %v", n, time.Since(fill))
	br.Close()
	require.NoError(t, st.Close())

	start := time.Now()
	st2, err := store.OpenPebble(dir, store.PebbleOptions{BodyDir: filepath.Join(dir, "queues")})
	require.NoError(t, err)
	opened := time.Since(start)
	br2 := New(Options{Store: st2})
	require.NoError(t, br2.Recover())
	total := time.Since(start)
	v2, _ := br2.VHost("/")
	q2, _ := v2.Queue("q")
	require.Equal(t, n, q2.Len())
	t.Logf("restart with %d stored messages: open %v, ready after Recover %v", n, opened, total)
	br2.Close()
	require.NoError(t, st2.Close())
}
