package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Readers positioned at random recent indices read while one writer
// appends batches of up to about 6 MiB and releases the head: every entry
// read is whole and is the one asked for. (A batch over 4 MiB once left
// the segment's size behind, so readers saw its entries as damaged.)
func TestConcurrentReadersFollowAppends(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var fails atomic.Int64
	mk := func(i uint64) []byte {
		b := bytes.Repeat([]byte{byte(i)}, 1024)
		binary.LittleEndian.PutUint64(b, i)
		return b
	}
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for !stop.Load() {
				last := l.LastIndex()
				if last < 10 {
					continue
				}
				from := last - uint64(rng.IntN(int(min(last-1, 5000))))
				r := l.NewReader(from)
				for k := 0; k < 200; k++ {
					r.Seek(from + uint64(k))
					idx, data, err := r.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						if fails.Add(1) < 5 {
							t.Errorf("read %d: %v", from+uint64(k), err)
						}
						break
					}
					if idx >= l.FirstIndex() && binary.LittleEndian.Uint64(data) != idx {
						t.Errorf("entry %d holds %d", idx, binary.LittleEndian.Uint64(data))
					}
				}
				r.Close()
			}
		}()
	}
	next := uint64(1)
	for round := 0; round < 120 && fails.Load() == 0; round++ {
		n := 1 + rand.IntN(6000) // up to 6 MiB
		var es [][]byte
		for i := 0; i < n; i++ {
			es = append(es, mk(next+uint64(i)))
		}
		ch := make(chan error, 1)
		first, err := l.Append(es, func(err error) { ch <- err })
		if err != nil || first != next {
			t.Fatal(err, first, next)
		}
		<-ch
		next += uint64(n)
		if back := uint64(rand.IntN(3000)); round%3 == 0 && next > back {
			if err := l.TruncatePrefix(next-back, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	// Segments are sealed at SegmentSize, overshooting by one batch at most.
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatal(segs, err)
	}
	for _, f := range segs {
		if fi, err := os.Stat(f); err != nil || fi.Size() > 16<<20+6000*1040+64 {
			t.Fatalf("%s: %v bytes (%v)", f, fi.Size(), err)
		}
	}
}
