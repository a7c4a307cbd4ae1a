package segment

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// validSegment is a sealed segment of n entries from base.
func validSegment(base uint64, n int, sealed bool) []byte {
	b := encodeHeader(base)
	for i := range n {
		b = appendFrame(b, base+uint64(i), payload(base+uint64(i)))
	}
	if sealed {
		b = append(b, encodeFooter(base+uint64(n)-1, uint64(n))...)
	}
	return b
}

// FuzzSegmentFile feeds arbitrary bytes to the segment decoder and, as the
// last segment of a log, to Open and a reader: neither panics, and every
// entry either returns is one whose frame, checksum included, is in the
// input at its index (indices strictly increasing).
func FuzzSegmentFile(f *testing.F) {
	f.Add(validSegment(1, 5, true))
	f.Add(validSegment(1, 5, false))
	f.Add(validSegment(100, 70, false)[:1000])
	flipped := validSegment(1, 10, false)
	flipped[headerSize+frameHeader+40] ^= 1
	f.Add(flipped)
	f.Add([]byte{})
	f.Add(encodeHeader(1))
	f.Fuzz(func(t *testing.T, data []byte) {
		verify := func(i uint64, d []byte, prev *uint64) {
			if i <= *prev {
				t.Fatalf("index %d after %d", i, *prev)
			}
			*prev = i
			if !bytes.Contains(data, appendFrame(nil, i, d)) {
				t.Fatalf("entry %d (%d bytes) is not a valid frame of the input", i, len(d))
			}
		}
		entries, damage := DecodeSegment(data)
		var prev uint64
		if len(entries) > 0 {
			prev = entries[0].Index - 1
		}
		for _, e := range entries {
			verify(e.Index, e.Data, &prev)
		}
		for _, d := range damage {
			if d.First > d.Last || !errors.Is(d, errCorruptSentinel()) {
				t.Fatalf("damage %v", d)
			}
		}

		dir := t.TempDir()
		base := uint64(1)
		if b, ok := decodeHeader(data); ok && b > 0 && b < 1<<62 {
			base = b
		}
		if err := os.WriteFile(filepath.Join(dir, segName(base)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(dir, Options{ReadAhead: 64, Logger: discardLogger()})
		if err != nil {
			return // refused (damage reported at open) is fine
		}
		defer l.Close()
		r := l.NewReader(0)
		defer r.Close()
		prev = base - 1
		for range 1 << 16 {
			i, d, err := r.Next()
			if err == io.EOF {
				break
			}
			var ce *CorruptError
			if errors.As(err, &ce) {
				continue
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			verify(i, d, &prev)
		}
	})
}
