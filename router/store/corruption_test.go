package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// Torn writes and bit flips in the store's files. Stores
// are written to real files in a temporary directory and closed; each case
// works on a copy.

// writeStore appends msgs (one synced batch each, every one acknowledged)
// to queue 1 of a new store in dir and closes it.
func writeStore(t *testing.T, dir string, opts PebbleOptions, msgs [][]byte) {
	t.Helper()
	p, err := OpenPebble(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		must(t, func(d func(error)) { p.Append([]Record{{Queue: 1, Seq: uint64(i + 1), Msg: m}}, d) })
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func smallMsgs(n, size int) [][]byte {
	var out [][]byte
	for i := range n {
		m := make([]byte, size)
		for j := range m {
			m[j] = byte('a' + (i+j)%26)
		}
		out = append(out, fmt.Appendf(m[:0], "msg-%06d-", i)[:size:size])
	}
	return out
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// filesOf lists the names in dir with the suffix (or prefix, for "MANIFEST"
// and "OPTIONS"), sorted.
func filesOf(t *testing.T, dir, kind string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), kind) || strings.HasPrefix(e.Name(), kind) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x08
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// recordSpan is where one WAL record lies: [start, end).
type recordSpan struct{ start, end int }

// walRecords lists the records of a WAL, read with the store's own chunk
// parser.
func walRecords(t *testing.T, data []byte, logNum uint32) []recordSpan {
	t.Helper()
	var out []recordSpan
	off, start := 0, -1
	for off+legacyChunkHeader <= len(data) {
		blockEnd := min((off/logBlockSize+1)*logBlockSize, len(data))
		if blockEnd-off < walSyncChunkHeader && allZero(data[off:blockEnd]) {
			off = blockEnd
			continue
		}
		c, ok, _ := parseChunk(data, off, logNum, true)
		if !ok {
			break
		}
		switch c.pos {
		case 1:
			out = append(out, recordSpan{off, c.end})
		case 2:
			start = off
		case 4:
			out = append(out, recordSpan{start, c.end})
		}
		off = c.end
	}
	return out
}

func walNum(t *testing.T, name string) uint32 {
	t.Helper()
	var n uint32
	if _, err := fmt.Sscanf(name, "%d.log", &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// contents returns queue 1's messages by seq.
func contents(t *testing.T, p *Pebble) (map[uint64]string, error) {
	got := map[uint64]string{}
	err := p.Iterate(1, func(seq uint64, msg, _ []byte) error { got[seq] = string(msg); return nil })
	return got, err
}

// memCopy loads the files of dir into a fresh in-memory FS (under "db"),
// with the newest WAL replaced by wal.
func memCopy(t *testing.T, dir, walName string, wal []byte) vfs.FS {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == walName {
			b = wal
		}
		f, err := fs.Create(fs.PathJoin("db", e.Name()), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		// A clone: Pebble's MemFS scrambles the buffers written to it in
		// builds with invariants (race), to catch callers that reuse them.
		if _, err := f.Write(slices.Clone(b)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return fs
}

// A write torn at any byte of the last records of the newest WAL (the file
// ends there, or the rest reads as zeros or garbage) is the normal end of
// the log: the store opens, with every record that was whole.
func TestTornWALTailAtEveryOffset(t *testing.T) {
	src := t.TempDir()
	msgs := smallMsgs(40, 100)
	msgs = append(msgs[:37], append([][]byte{smallMsgs(1, 40<<10)[0]}, msgs[37:]...)...) // a record across a block boundary
	writeStore(t, src, PebbleOptions{}, msgs)
	wals := filesOf(t, src, ".log")
	walName := wals[len(wals)-1]
	wal, err := os.ReadFile(filepath.Join(src, walName))
	if err != nil {
		t.Fatal(err)
	}
	recs := walRecords(t, wal, walNum(t, walName))
	if len(recs) < len(msgs) {
		t.Fatalf("newest WAL has %d records, want at least %d", len(recs), len(msgs))
	}
	last := recs[len(recs)-len(msgs):] // the records of our appends, in order
	from := last[len(last)-4].start
	garbage := randBytes(rand.New(rand.NewPCG(5, 5)), len(wal))
	zeros := make([]byte, len(wal))
	opens := 0
	for off := from; off < len(wal); off++ {
		big := last[len(last)-4]
		if off < big.end && off%7 != 0 && off%logBlockSize > 24 && off%logBlockSize < logBlockSize-24 {
			continue // inside the big record: every 7th byte, and every byte near its block boundary
		}
		whole, wholeEnd := 0, 0
		for _, r := range last {
			if r.end <= off {
				whole, wholeEnd = whole+1, r.end
			}
		}
		for variant, torn := range map[string][]byte{
			"cut":     wal[:off:off],
			"zeros":   append(wal[:off:off], zeros[off:]...),
			"garbage": append(wal[:off:off], garbage[off:]...),
		} {
			// The scan before the open sees a torn tail at every offset.
			if c := scanLog(torn, walNum(t, walName), true); c.corrupt() || c.wholeEnd != wholeEnd {
				t.Fatalf("torn at %d (%s): scan says corrupt=%v (at %d), whole records end at %d, want %d",
					off, variant, c.corrupt(), c.corruptAt, c.wholeEnd, wholeEnd)
			}
			// Pebble opens it: at every offset of the last three records, and
			// at three of the big one, whose torn chunk costs Pebble a search
			// for a single flipped bit (seconds for a 32 KiB chunk).
			if off < big.end && off != big.start && off != big.start+1 && off != big.end-1 {
				continue
			}
			p, err := OpenPebble("db", PebbleOptions{FS: memCopy(t, src, walName, torn), MemTableSize: 1 << 20, CacheSize: 1 << 20})
			if err != nil {
				t.Fatalf("torn at %d (%s): open: %v", off, variant, err)
			}
			got, err := contents(t, p)
			p.Close()
			opens++
			if err != nil {
				t.Fatalf("torn at %d (%s): %v", off, variant, err)
			}
			for i := range whole {
				if got[uint64(i+1)] != string(msgs[i]) {
					t.Fatalf("torn at %d (%s): synced message %d lost (%d of %d whole records read)", off, variant, i+1, len(got), whole)
				}
			}
			if len(got) != whole {
				t.Fatalf("torn at %d (%s): %d messages, want %d", off, variant, len(got), whole)
			}
		}
	}
	t.Logf("%d torn tails opened", opens)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// A flipped bit in the middle of the newest WAL, with synced records after
// it, is never taken for the end of the log: the open is refused with
// ErrCorrupt naming the file and offset; salvage opens what is readable,
// keeps a copy of the damaged file, and counts what it dropped.
func TestWALMidLogBitFlip(t *testing.T) {
	src := t.TempDir()
	msgs := smallMsgs(300, 200)
	writeStore(t, src, PebbleOptions{}, msgs)
	wals := filesOf(t, src, ".log")
	walName := wals[len(wals)-1]
	wal, err := os.ReadFile(filepath.Join(src, walName))
	if err != nil {
		t.Fatal(err)
	}
	recs := walRecords(t, wal, walNum(t, walName))
	last := recs[len(recs)-len(msgs):]
	for _, victim := range []int{0, 1, 100, 250, 298} { // index of the damaged message's record
		for _, at := range []string{"header", "payload"} {
			t.Run(fmt.Sprintf("record%d-%s", victim, at), func(t *testing.T) {
				dir := copyDir(t, src)
				off := last[victim].start + 1 // checksum
				if at == "payload" {
					off = last[victim].end - 3
				}
				flipByte(t, filepath.Join(dir, walName), off)
				_, err := OpenPebble(dir, PebbleOptions{})
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("open of a WAL damaged at %d: %v, want ErrCorrupt", off, err)
				}
				for _, want := range []string{walName, fmt.Sprintf("offset %d", last[victim].start), "salvage"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error %q does not say %q", err, want)
					}
				}
				p, err := OpenPebble(dir, PebbleOptions{Recovery: RecoverySalvage})
				if err != nil {
					t.Fatalf("salvage: %v", err)
				}
				defer p.Close()
				got, err := contents(t, p)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != victim {
					t.Fatalf("salvage kept %d messages, want the %d before the damage", len(got), victim)
				}
				for i := range victim {
					if got[uint64(i+1)] != string(msgs[i]) {
						t.Fatalf("message %d wrong after salvage", i+1)
					}
				}
				if s := p.Stats().Salvaged; s != uint64(len(msgs)-victim) {
					t.Fatalf("Salvaged = %d, want %d", s, len(msgs)-victim)
				}
				saved := filesOf(t, dir, "salvaged-")
				if len(saved) != 1 {
					t.Fatalf("salvage directories: %v", saved)
				}
				kept, err := os.ReadFile(filepath.Join(dir, saved[0], walName))
				if err != nil {
					t.Fatal(err)
				}
				orig := slices.Clone(wal)
				orig[off] ^= 0x08
				if !slices.Equal(kept, orig) {
					t.Fatal("the salvage copy of the WAL is not the damaged original")
				}
			})
		}
	}
}

// blockSST fails the creation of tables while armed, so that memtables are
// not flushed and older WALs stay live.
type blockSST struct{ on atomic.Bool }

func (b *blockSST) String() string { return "blockSST" }
func (b *blockSST) MaybeError(op errorfs.Op) error {
	if b.on.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".sst") {
		return syscall.ENOSPC
	}
	return nil
}

// Bit flips in every kind of file of the store: detected (ErrCorrupt, never
// a panic), and salvage starts.
func TestBitFlipEveryFileKind(t *testing.T) {
	// A store with tables (small memtables, flushed) and, at the end, two
	// live WALs whose memtables could not be flushed.
	src := t.TempDir()
	block := &blockSST{}
	p, err := OpenPebble(src, PebbleOptions{FS: errorfs.Wrap(vfs.Default, block), MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	msgs := smallMsgs(4000, 300)
	for i, m := range msgs {
		if i == 3000 {
			block.on.Store(true)
		}
		must(t, func(d func(error)) { p.Append([]Record{{Queue: 1, Seq: uint64(i + 1), Msg: m}}, d) })
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(filesOf(t, src, ".sst")); n == 0 {
		t.Fatal("no tables written")
	}

	// check opens dir strictly (refused, or the first read fails) and with
	// salvage; it returns the corrupt blocks the strict store counted.
	check := func(t *testing.T, dir string, strictErr error) (corruptBlocks uint64) {
		t.Helper()
		if strictErr == nil {
			q, err := OpenPebble(dir, PebbleOptions{})
			if err == nil {
				_, err = contents(t, q)
				corruptBlocks = q.Stats().Corruptions
				q.Close()
			}
			strictErr = err
		}
		if !errors.Is(strictErr, ErrCorrupt) {
			t.Fatalf("strict: %v, want ErrCorrupt", strictErr)
		}
		q, err := OpenPebble(dir, PebbleOptions{Recovery: RecoverySalvage})
		if err != nil {
			t.Fatalf("salvage: %v", err)
		}
		defer q.Close()
		got, err := contents(t, q)
		if err != nil {
			t.Fatalf("read after salvage: %v", err)
		}
		if q.Stats().Salvaged == 0 || len(got) >= len(msgs) {
			t.Fatalf("salvage kept %d of %d, counted %d dropped", len(got), len(msgs), q.Stats().Salvaged)
		}
		t.Logf("salvage kept %d of %d messages, counted %d dropped", len(got), len(msgs), q.Stats().Salvaged)
		return corruptBlocks
	}

	t.Run("older-wal", func(t *testing.T) {
		dir := copyDir(t, src)
		wals := filesOf(t, dir, ".log")
		var older string
		for _, w := range wals[:len(wals)-1] {
			b, _ := os.ReadFile(filepath.Join(dir, w))
			if len(walRecords(t, b, walNum(t, w))) > 10 {
				older = w
			}
		}
		if older == "" {
			t.Fatalf("no older live WAL among %v", wals)
		}
		b, _ := os.ReadFile(filepath.Join(dir, older))
		recs := walRecords(t, b, walNum(t, older))
		flipByte(t, filepath.Join(dir, older), recs[len(recs)/2].end-2)
		check(t, dir, nil)
	})
	t.Run("sst", func(t *testing.T) {
		dir := copyDir(t, src)
		ssts := filesOf(t, dir, ".sst")
		st, _ := os.Stat(filepath.Join(dir, ssts[0]))
		flipByte(t, filepath.Join(dir, ssts[0]), int(st.Size()/3))
		if n := check(t, dir, nil); n == 0 {
			t.Fatal("the corrupt block is not counted")
		}
	})
	t.Run("manifest", func(t *testing.T) {
		dir := copyDir(t, src)
		man := filesOf(t, dir, "MANIFEST-")
		st, _ := os.Stat(filepath.Join(dir, man[len(man)-1]))
		flipByte(t, filepath.Join(dir, man[len(man)-1]), int(st.Size()/2))
		check(t, dir, nil)
	})
	t.Run("options", func(t *testing.T) {
		// OPTIONS holds settings, not data, and has no checksum: a flip is
		// harmless or refused, never a panic or a loss.
		opts := filesOf(t, src, "OPTIONS-")
		st, _ := os.Stat(filepath.Join(src, opts[len(opts)-1]))
		for off := 0; off < int(st.Size()); off += int(st.Size()) / 40 {
			dir := copyDir(t, src)
			flipByte(t, filepath.Join(dir, opts[len(opts)-1]), off)
			q, err := OpenPebble(dir, PebbleOptions{})
			if err != nil {
				continue // refused with Pebble's reason
			}
			got, err := contents(t, q)
			q.Close()
			if err != nil || len(got) != len(msgs) {
				t.Fatalf("OPTIONS flipped at %d: %d messages, %v", off, len(got), err)
			}
		}
	})
}
