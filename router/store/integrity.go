package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/epitaph-mq/epitaph/router/store/storeerr"
)

// Integrity checks of Pebble's own log files, made before Pebble opens them.
//
// Pebble reads its newest WAL and its MANIFEST leniently: the first chunk
// that fails its checksum is taken as the end of the log, as it would be
// after a crash in the middle of a write. That is right for a torn tail, but
// a bit flip in the middle of the log then silently drops every record after
// it, acknowledged ones included; and once Pebble has opened the store it
// flushes what it replayed and discards the old WAL, so the loss cannot be
// noticed later. So the store reads both files itself first, in the
// documented log format (32 KiB blocks of chunks: checksum, length, type,
// then for WALs the log number and, in Pebble's WAL-sync format, the offset
// the log was synced up to when the chunk was written), and tells the two
// cases apart by what follows the first bad chunk:
//
//   - a torn tail has nothing valid after it that was ever synced: every later
//     chunk of the same log in the WAL-sync format promises a synced offset no
//     greater than the bad chunk's (the write that was cut off had not been
//     synced), and a later record in the older format (without that offset)
//     does not exist;
//   - a corrupt middle is followed by a valid chunk of the same log that
//     promises the log was synced past the bad chunk, or (older format, and
//     the MANIFEST, whose edits are synced one at a time) by the start of a
//     later record.
//
// Corruption of the very last record, with nothing written after it, looks
// exactly like a torn write and is treated as one: no format can tell them
// apart.

// ErrCorrupt wraps every error that reports damaged store files: a corrupt
// WAL or MANIFEST record with valid records after it, a block of a table
// whose checksum does not match, a record the store cannot decode. Start-up
// refuses such a store unless RecoverySalvage is set.
var ErrCorrupt = storeerr.ErrCorrupt

// RecoveryMode says what opening a store does when it finds corruption.
type RecoveryMode string

const (
	// RecoveryStrict (the default) refuses to open a corrupt store: the
	// error, wrapping ErrCorrupt, names the file and offset.
	RecoveryStrict RecoveryMode = "strict"
	// RecoverySalvage opens it with what is readable: a corrupt log is cut at
	// its last whole record before the damage, a corrupt table's key range is
	// removed, each logged with what was dropped and counted in
	// PebbleStats.Salvaged. The damaged files are first copied into a
	// salvaged-<time> directory inside the store's directory.
	RecoverySalvage RecoveryMode = "salvage"
)

// Chunk layout constants of Pebble's log format (record package).
const (
	logBlockSize        = 32 << 10
	legacyChunkHeader   = 7  // checksum(4) length(2) type(1)
	recycleChunkHeader  = 11 // + log number(4)
	walSyncChunkHeader  = 19 // + synced offset(8)
	chunkFull, chunkLst = 1, 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is the log format's checksum: CRC-32C, rotated and offset.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// chunk is one decoded chunk header.
type chunk struct {
	pos      int // 1 full, 2 first, 3 middle, 4 last
	header   int
	end      int // offset just past its payload
	synced   uint64
	hasSync  bool
	logNum   uint32
	recycled bool // carries a log number
}

// parseChunk decodes the chunk at off if it is valid: a known type, its
// whole header and payload inside the block and the file, its checksum
// matching, and (for chunks with a log number) the expected log number.
// trailer reports a chunk carrying logNum+1, which Pebble writes as the
// clean end of a WAL.
func parseChunk(data []byte, off int, logNum uint32, wal bool) (c chunk, ok, trailer bool) {
	blockEnd := min((off/logBlockSize+1)*logBlockSize, len(data))
	if off+legacyChunkHeader > blockEnd {
		return c, false, false
	}
	typ := int(data[off+6])
	switch {
	case typ >= 1 && typ <= 4:
		c.pos, c.header = typ, legacyChunkHeader
	case typ >= 5 && typ <= 8:
		c.pos, c.header, c.recycled = typ-4, recycleChunkHeader, true
	case typ >= 9 && typ <= 12:
		c.pos, c.header, c.recycled, c.hasSync = typ-8, walSyncChunkHeader, true, true
	default:
		return c, false, false
	}
	if off+c.header > blockEnd {
		return c, false, false
	}
	if c.recycled {
		c.logNum = binary.LittleEndian.Uint32(data[off+7:])
		if wal && c.logNum != logNum {
			return c, false, c.logNum == logNum+1
		}
	}
	if c.hasSync {
		c.synced = binary.LittleEndian.Uint64(data[off+11:])
	}
	c.end = off + c.header + int(binary.LittleEndian.Uint16(data[off+4:]))
	if c.end > blockEnd {
		return c, false, false
	}
	if binary.LittleEndian.Uint32(data[off:]) != maskedCRC(data[off+6:c.end]) {
		return c, false, false
	}
	return c, true, false
}

// logCheck is what scanLog found in one log file.
type logCheck struct {
	// wholeEnd is the offset just past the last whole record before the
	// first bad chunk (or the end of the log): where a salvage cuts it.
	wholeEnd int
	// bad is the offset of the first chunk that does not read, or -1 when
	// the log ends cleanly.
	bad int
	// corruptAt is the offset of the later valid chunk proving that the bad
	// one is corruption rather than a torn tail, or -1.
	corruptAt int
	// recordsAfter counts the readable records that start after bad (what a
	// salvage drops besides the damaged record itself).
	recordsAfter int
}

func (c logCheck) corrupt() bool { return c.corruptAt >= 0 }

// scanLog walks the chunks of a log file (a WAL when wal, else the MANIFEST)
// as Pebble's reader does, and after the first bad chunk looks at every
// later offset for a valid chunk of the same log.
func scanLog(data []byte, logNum uint32, wal bool) logCheck {
	res := logCheck{bad: -1, corruptAt: -1}
	off, inRecord := 0, false
	for off < len(data) {
		blockEnd := min((off/logBlockSize+1)*logBlockSize, len(data))
		if blockEnd-off < legacyChunkHeader {
			if blockEnd == len(data) && blockEnd%logBlockSize != 0 && !allZero(data[off:blockEnd]) {
				res.bad = off
				break
			}
			off = blockEnd
			continue
		}
		hdr := data[off : off+legacyChunkHeader]
		if allZero(hdr) {
			// The writer zero-fills the end of a block too short for another
			// header; anything else zeroed is the end of what was written.
			if blockEnd-off < walSyncChunkHeader && allZero(data[off:blockEnd]) {
				off = blockEnd
				continue
			}
			res.bad = off
			break
		}
		c, ok, trailer := parseChunk(data, off, logNum, wal)
		if trailer && !inRecord {
			res.wholeEnd = off
			return res // the clean end of a WAL
		}
		if !ok {
			res.bad = off
			break
		}
		switch c.pos {
		case chunkFull:
			if inRecord {
				res.bad = off
			} else {
				res.wholeEnd = c.end
			}
		case 2: // first
			if inRecord {
				res.bad = off
			}
			inRecord = true
		case 3: // middle
			if !inRecord {
				res.bad = off
			}
		case chunkLst:
			if !inRecord {
				res.bad = off
			}
			inRecord = false
			res.wholeEnd = c.end
		}
		if res.bad >= 0 {
			break
		}
		off = c.end
	}
	if res.bad < 0 {
		if !inRecord {
			return res
		}
		res.bad = len(data) // a record cut short by the end of the file
	}
	for j := res.bad + 1; j+legacyChunkHeader <= len(data); j++ {
		c, ok, _ := parseChunk(data, j, logNum, wal)
		if !ok || (wal && !c.recycled) {
			continue
		}
		start := c.pos == chunkFull || c.pos == 2
		if start {
			res.recordsAfter++
		}
		if res.corruptAt < 0 && ((c.hasSync && c.synced > uint64(res.bad)) || (!c.hasSync && start)) {
			res.corruptAt = j
		}
		j = c.end - 1
	}
	return res
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// storeFile is one of Pebble's files found in the store directory.
type storeFile struct {
	name string
	num  uint64
}

// logFiles lists the WALs (NNNNNN.log) in dir, oldest first, and the
// current MANIFEST (named by the newest marker.manifest.* file).
func logFiles(fs vfs.FS, dir string) (wals []storeFile, manifest string, err error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, "", err
	}
	markerSeq := -1
	for _, n := range names {
		if num, ok := strings.CutSuffix(n, ".log"); ok {
			if v, err := strconv.ParseUint(num, 10, 64); err == nil {
				wals = append(wals, storeFile{n, v})
			}
			continue
		}
		if rest, ok := strings.CutPrefix(n, "marker.manifest."); ok {
			seq, target, ok := strings.Cut(rest, ".")
			if v, err := strconv.Atoi(seq); ok && err == nil && v > markerSeq {
				markerSeq, manifest = v, target
			}
		}
	}
	slices.SortFunc(wals, func(a, b storeFile) int { return cmp.Compare(a.num, b.num) })
	return wals, manifest, nil
}

func readAll(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// logDamage is one corrupt log found before opening.
type logDamage struct {
	name  string
	check logCheck
	size  int
	wal   bool
}

func (d logDamage) describe() string {
	kind := "MANIFEST"
	if d.wal {
		kind = "WAL"
	}
	return fmt.Sprintf("%s %s is corrupt at offset %d of %d bytes (a valid record written after it starts at offset %d; %d readable records follow the damage)",
		kind, d.name, d.check.bad, d.size, d.check.corruptAt, d.check.recordsAfter)
}

// checkLogs scans the WALs given (all of them, or only the newest, which
// Pebble reads leniently) and the current MANIFEST, and returns the damage
// found.
func checkLogs(fs vfs.FS, dir string, allWALs bool) ([]logDamage, error) {
	wals, manifest, err := logFiles(fs, dir)
	if err != nil {
		return nil, err
	}
	if !allWALs && len(wals) > 1 {
		wals = wals[len(wals)-1:]
	}
	var found []logDamage
	check := func(name string, num uint32, wal bool) error {
		data, err := readAll(fs, fs.PathJoin(dir, name))
		if err != nil {
			return fmt.Errorf("store: reading %s: %w", name, err)
		}
		if c := scanLog(data, num, wal); c.corrupt() || (allWALs && wal && c.bad >= 0) {
			found = append(found, logDamage{name: name, check: c, size: len(data), wal: wal})
		}
		return nil
	}
	for _, w := range wals {
		if err := check(w.name, uint32(w.num), true); err != nil {
			return nil, err
		}
	}
	if manifest != "" {
		if err := check(manifest, 0, false); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// salvageDir creates the directory that keeps copies of damaged files.
func salvageDir(fs vfs.FS, dir string) (string, error) {
	d := fs.PathJoin(dir, "salvaged-"+time.Now().UTC().Format("20060102T150405.000000000Z"))
	return d, fs.MkdirAll(d, 0o755)
}

// copyFile copies src to dst and syncs it.
func copyFile(fs vfs.FS, src, dst string) error {
	data, err := readAll(fs, src)
	if err != nil {
		return err
	}
	f, err := fs.Create(dst, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// truncateLog cuts a log file at off (after the caller saved a copy).
func truncateLog(fs vfs.FS, path string, off int) error {
	data, err := readAll(fs, path)
	if err != nil {
		return err
	}
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(data[:off]); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
