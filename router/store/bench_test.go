package store

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

func benchDir(b *testing.B) string {
	if d := os.Getenv("EPITAPH_STORE_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkAppendSync: durable 1 KiB appends, each waiting for its own
// done before the next (like a publisher waiting for `accepted`), from 1 and
// 64 concurrent appenders. Reports msgs/s and fsyncs/s.
func BenchmarkAppendSync(b *testing.B) {
	for _, n := range []int{1, 64} {
		b.Run(fmt.Sprintf("appenders=%d", n), func(b *testing.B) {
			p, err := OpenPebble(benchDir(b), PebbleOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			body := make([]byte, 1024)
			var seq uint64
			var mu sync.Mutex
			b.ReportAllocs()
			b.ResetTimer()
			start, s0 := time.Now(), p.Stats().Syncs
			var wg sync.WaitGroup
			per := b.N / n
			for g := 0; g < n; g++ {
				cnt := per
				if g == 0 {
					cnt += b.N - per*n
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ch := make(chan error, 1)
					for i := 0; i < cnt; i++ {
						mu.Lock()
						seq++
						p.Append([]Record{{Queue: 1, Seq: seq, Msg: body}}, func(err error) { ch <- err })
						mu.Unlock()
						if err := <-ch; err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/el, "msgs/s")
			b.ReportMetric(float64(p.Stats().Syncs-s0)/el, "fsyncs/s")
		})
	}
}

// BenchmarkRestart: open + iterate a store holding EPITAPH_STORE_RESTART_N
// (default 1,000,000) 1 KiB messages.
func BenchmarkRestart(b *testing.B) {
	total := 1_000_000
	if v, _ := strconv.Atoi(os.Getenv("EPITAPH_STORE_RESTART_N")); v > 0 {
		total = v
	}
	dir := benchDir(b)
	p, err := OpenPebble(dir, PebbleOptions{})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	var wg sync.WaitGroup
	for i := 0; i < total; i += 1000 {
		recs := make([]Record, 0, 1000)
		for j := i; j < i+1000 && j < total; j++ {
			recs = append(recs, Record{Queue: QueueID(1 + j%4), Seq: uint64(j), Msg: body})
		}
		wg.Add(1)
		p.Append(recs, func(err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	p.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		p, err := OpenPebble(dir, PebbleOptions{})
		if err != nil {
			b.Fatal(err)
		}
		opened := time.Since(start)
		n := 0
		for q := QueueID(1); q <= 4; q++ {
			if err := p.Iterate(q, func(uint64, []byte, []byte) error { n++; return nil }); err != nil {
				b.Fatal(err)
			}
		}
		if n != total {
			b.Fatalf("iterated %d of %d", n, total)
		}
		// first settle loads the window of the queue it touches
		ch := make(chan error, 1)
		p.Settle(1, []uint64{0}, func(err error) { ch <- err })
		<-ch
		el := time.Since(start)
		b.ReportMetric(opened.Seconds(), "open-s")
		b.ReportMetric(el.Seconds(), "ready-s")
		b.StopTimer()
		p.Close()
		b.StartTimer()
	}
}

// BenchmarkFIFOSteadyState: 64 publishers append 1 KiB messages to one queue,
// and a consumer settles them in order, EPITAPH_STORE_FIFO_N messages in all
// (default 10,000,000). Reports the rate of the first and last million.
// Run with -benchtime=1x.
func BenchmarkFIFOSteadyState(b *testing.B) {
	total := 10_000_000
	if v, _ := strconv.Atoi(os.Getenv("EPITAPH_STORE_FIFO_N")); v > 0 {
		total = v
	}
	const million = 1_000_000
	window := million
	if total < 2*million {
		window = total / 4
	}
	for i := 0; i < b.N; i++ {
		p, err := OpenPebble(benchDir(b), PebbleOptions{})
		if err != nil {
			b.Fatal(err)
		}
		body := make([]byte, 1024)
		var mu sync.Mutex
		var seq uint64
		acked := make(chan uint64, 1<<16)
		done := make(chan struct{})
		var wg sync.WaitGroup
		per := total / 64
		for g := 0; g < 64; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ch := make(chan error, 1)
				for k := 0; k < per; k++ {
					mu.Lock()
					seq++
					s := seq
					p.Append([]Record{{Queue: 1, Seq: s, Msg: body}}, func(err error) { ch <- err })
					mu.Unlock()
					if err := <-ch; err != nil {
						b.Error(err)
						return
					}
					acked <- s
				}
			}()
		}
		n := per * 64
		var marks []time.Time
		go func() {
			defer close(done)
			var settleWG sync.WaitGroup
			batch := make([]uint64, 0, 64)
			for k := 1; k <= n; k++ {
				batch = append(batch, <-acked)
				if len(batch) == 64 || k == n {
					settleWG.Add(1)
					p.Settle(1, batch, func(error) { settleWG.Done() })
					batch = make([]uint64, 0, 64)
				}
				if k == 1 || k%window == 0 {
					marks = append(marks, time.Now())
				}
			}
			settleWG.Wait()
		}()
		wg.Wait()
		<-done
		first := float64(window) / marks[1].Sub(marks[0]).Seconds()
		last := float64(window) / marks[len(marks)-1].Sub(marks[len(marks)-2]).Seconds()
		b.ReportMetric(first, "first-msgs/s")
		b.ReportMetric(last, "last-msgs/s")
		m := p.DB().Metrics()
		b.Logf("%d msgs through; window %d; rates per window: %v", n, window, rates(marks, window))
		b.Logf("syncs %d, compactions(store) %d, pebble compactions %d, L0 files %d, disk %d MiB",
			p.Stats().Syncs, p.Stats().Compactions, m.Compact.Count, m.Levels[0].TablesCount, m.DiskSpaceUsage()>>20)
		p.Close()
	}
}

func rates(marks []time.Time, window int) []int {
	var r []int
	for i := 1; i < len(marks); i++ {
		r = append(r, int(float64(window)/marks[i].Sub(marks[i-1]).Seconds()))
	}
	return r
}
