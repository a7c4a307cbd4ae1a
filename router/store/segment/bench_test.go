package segment

import (
	"fmt"
	"io"
	"os"
	"testing"
)

// Benchmarks (no timing in tests): run with
//
//	go test -run '^$' -bench . -benchmem ./router/store/segment
//
// BenchmarkOpen builds logs of 1M and 10M small entries once (a few
// hundred MB in the temporary directory) and is left out unless
// EPITAPH_SEGMENT_BENCH_OPEN is set.

var kib = make([]byte, 1024)

// Appends of one 1 KiB entry each, not waiting for the fsync: the syncer
// group-commits behind them.
func BenchmarkAppend1KiB(b *testing.B) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	entry := [][]byte{kib}
	b.SetBytes(int64(len(kib)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(entry, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
}

// Batches of 64 1 KiB entries, each batch waited for until synced: the
// durable-append rate of one writer.
func BenchmarkAppend1KiBSyncPerBatch(b *testing.B) {
	l, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = kib
	}
	done := make(chan error, 1)
	cb := func(err error) { done <- err }
	b.SetBytes(int64(len(kib)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if n%64 != 0 {
			continue
		}
		if _, err := l.Append(batch, cb); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

func filledLog(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([][]byte, 256)
	for i := range batch {
		batch[i] = kib
	}
	for i := 0; i < n; i += len(batch) {
		if _, err := l.Append(batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// Sequential reads of 1 KiB entries through one reader (64K entries in
// the log, read round and round).
func BenchmarkSequentialRead(b *testing.B) {
	dir := filledLog(b, 64<<10)
	l, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := l.NewReader(1)
	defer r.Close()
	b.SetBytes(int64(len(kib)))
	b.ReportAllocs()
	for b.Loop() {
		_, _, err := r.Next()
		if err == io.EOF {
			r.Seek(1)
			_, _, err = r.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// Open, then read 64K 1 KiB entries from the start, then close: the
// first deliveries after a restart.
func BenchmarkReadAfterReopen(b *testing.B) {
	const n = 64 << 10
	dir := filledLog(b, n)
	b.SetBytes(n * int64(len(kib)))
	b.ReportAllocs()
	for b.Loop() {
		l, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		r := l.NewReader(1)
		got := 0
		for {
			_, _, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			got++
		}
		r.Close()
		l.Close()
		if got != n {
			b.Fatalf("read %d of %d", got, n)
		}
	}
}

// Open and read the first entry of a log of 1M or 10M 16-byte entries
// (16 MiB segments, so 2 and 19 of them), with no release (spans=0) and
// with every third entry of the first third settled (n/9 spans): the time
// to serve the first delivery after a restart. It should not grow with
// the entries stored, only with the spans held.
func BenchmarkOpen(b *testing.B) {
	if os.Getenv("EPITAPH_SEGMENT_BENCH_OPEN") == "" {
		b.Skip("set EPITAPH_SEGMENT_BENCH_OPEN=1: builds logs of 1M and 10M entries")
	}
	small := make([]byte, 16)
	for _, n := range []int{1_000_000, 10_000_000} {
		for _, settle := range []bool{false, true} {
			dir := b.TempDir()
			opt := Options{SegmentSize: 16 << 20}
			l, err := Open(dir, opt)
			if err != nil {
				b.Fatal(err)
			}
			batch := make([][]byte, 1000)
			for i := range batch {
				batch[i] = small
			}
			for i := 0; i < n; i += len(batch) {
				if _, err := l.Append(batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			if settle {
				for i := uint64(2); i < uint64(n)/3; i += 3 {
					l.Settle(i, i+1, nil)
				}
			}
			spans := l.Stats().HoleSpans
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("entries=%d/spans=%d", n, spans), func(b *testing.B) {
				for b.Loop() {
					l, err := Open(dir, opt)
					if err != nil {
						b.Fatal(err)
					}
					r := l.NewReader(1)
					if _, _, err := r.Next(); err != nil {
						b.Fatal(err)
					}
					r.Close()
					l.Close()
				}
			})
		}
	}
}
