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

func segmentSeeds(f *testing.F) {
	f.Add(validSegment(1, 5, true))
	f.Add(validSegment(1, 5, false))
	f.Add(validSegment(100, 70, false)[:1000])
	flipped := validSegment(1, 10, false)
	flipped[headerSize+frameHeader+40] ^= 1
	f.Add(flipped)
	f.Add([]byte{})
	f.Add(encodeHeader(1))
}

// verifyEntry fails unless entry i is a valid frame of data (checksum
// included) and comes after prev.
func verifyEntry(t *testing.T, data []byte, i uint64, d []byte, prev *uint64) {
	t.Helper()
	if i <= *prev {
		t.Fatalf("index %d after %d", i, *prev)
	}
	*prev = i
	if !bytes.Contains(data, appendFrame(nil, i, d)) {
		t.Fatalf("entry %d (%d bytes) is not a valid frame of the input", i, len(d))
	}
}

// FuzzDecodeSegment feeds arbitrary bytes to the segment decoder: it
// never panics, every entry it returns is a frame of the input whose
// checksum holds, indices strictly increase, and every damage report
// wraps storeerr.ErrCorrupt with a sensible range.
func FuzzDecodeSegment(f *testing.F) {
	segmentSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, damage := DecodeSegment(data)
		var prev uint64
		if len(entries) > 0 {
			prev = entries[0].Index - 1
		}
		for _, e := range entries {
			verifyEntry(t, data, e.Index, e.Data, &prev)
		}
		for _, d := range damage {
			if d.First > d.Last || !errors.Is(d, errCorruptSentinel()) {
				t.Fatalf("damage %v", d)
			}
		}
	})
}

// FuzzOpenSegment writes arbitrary bytes as a log's only segment and
// opens and reads it, as recovery does: no panic, and every entry read is
// a valid frame of the input.
func FuzzOpenSegment(f *testing.F) {
	segmentSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
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
		prev := base - 1
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
			verifyEntry(t, data, i, d, &prev)
		}
	})
}
