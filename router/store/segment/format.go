package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/epitaph-mq/epitaph/router/store/storeerr"
)

// On-disk layout (all integers little-endian).
//
// A segment file is named by its base index, %020d.seg, and holds:
//
//	header  32 bytes: magic "EPSEGv01" (8), base index (8), reserved (12),
//	        CRC-32C of the first 28 bytes (4)
//	frames  one per entry, back to back:
//	        length of the payload (4), CRC-32C of length ‖ index ‖ payload (4),
//	        index (8), payload (length bytes)
//	footer  32 bytes, written once when the segment is sealed (a newer one
//	        follows it): 0xFFFFFFFF (4, a length no frame can have),
//	        "SEAL" (4), last index (8), entry count (8), reserved (4),
//	        CRC-32C of the first 28 bytes (4)
//
// Each frame carries its own index, so a frame read at the wrong place (a
// stale block, a resynchronisation after damage) is never taken for
// another entry, and a reader that finds damage can say exactly which
// indices it could not read.
const (
	headerSize  = 32
	footerSize  = 32
	frameHeader = 16
	// MaxEntrySize bounds one entry's payload; a length field above it is
	// damage, not an entry (a flipped high bit must not make a reader
	// allocate gigabytes).
	MaxEntrySize = 64 << 20

	footerMark = 0xFFFFFFFF
)

var (
	headerMagic = [8]byte{'E', 'P', 'S', 'E', 'G', 'v', '0', '1'}
	sealMagic   = [4]byte{'S', 'E', 'A', 'L'}
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
)

// Errors. Every damaged-data error wraps storeerr.ErrCorrupt and every
// out-of-space error wraps storeerr.ErrDiskFull, so callers test them the same
// way as the message store's.
var (
	// ErrNotFound: the index is outside [FirstIndex, LastIndex], or was
	// settled (released out of order).
	ErrNotFound = errors.New("segment: entry not found")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("segment: log closed")
	// ErrFailed: an fsync failed; the log refuses further writes until it
	// is reopened (after a failed fsync the kernel may have dropped the
	// dirty pages, so what is on disk is unknown until read back).
	ErrFailed = errors.New("segment: log failed")
)

// CorruptError reports entries that cannot be read: a frame whose checksum,
// length or index does not match, or a missing segment. First..Last are the
// unreadable indices (inclusive); the entries around them stay readable.
type CorruptError struct {
	Segment     string // file name
	Offset      int64  // where the damage starts in that file
	First, Last uint64 // unreadable indices
	Reason      string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("segment: entries %d..%d unreadable: %s at offset %d of %s", e.First, e.Last, e.Reason, e.Offset, e.Segment)
}

// Unwrap makes errors.Is(err, storeerr.ErrCorrupt) hold.
func (e *CorruptError) Unwrap() error { return storeerr.ErrCorrupt }

// frameCRC is the checksum of a frame: its length, index and payload.
func frameCRC(lenField, indexAndPayload []byte) uint32 {
	c := crc32.Update(0, castagnoli, lenField)
	return crc32.Update(c, castagnoli, indexAndPayload)
}

// appendFrame encodes one entry (in place: no scratch header that would
// escape through the checksum call).
func appendFrame(b []byte, index uint64, payload []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, index)
	b = append(b, payload...)
	binary.LittleEndian.PutUint32(b[start+4:], frameCRC(b[start:start+4], b[start+8:]))
	return b
}

func encodeHeader(base uint64) []byte {
	b := make([]byte, headerSize)
	copy(b, headerMagic[:])
	binary.LittleEndian.PutUint64(b[8:], base)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	return b
}

// decodeHeader returns the base index of a valid header.
func decodeHeader(b []byte) (uint64, bool) {
	if len(b) < headerSize || [8]byte(b[:8]) != headerMagic ||
		binary.LittleEndian.Uint32(b[28:]) != crc32.Checksum(b[:28], castagnoli) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}

func encodeFooter(last, count uint64) []byte {
	b := make([]byte, footerSize)
	binary.LittleEndian.PutUint32(b, footerMark)
	copy(b[4:], sealMagic[:])
	binary.LittleEndian.PutUint64(b[8:], last)
	binary.LittleEndian.PutUint64(b[16:], count)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	return b
}

// decodeFooter returns the last index and entry count of a valid footer.
func decodeFooter(b []byte) (last, count uint64, ok bool) {
	if len(b) < footerSize || binary.LittleEndian.Uint32(b) != footerMark || [4]byte(b[4:8]) != sealMagic ||
		binary.LittleEndian.Uint32(b[28:]) != crc32.Checksum(b[:28], castagnoli) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:]), true
}

// scanner reads frames of one segment file sequentially through a
// read-ahead buffer: one ReadAt fills it with many frames, so the hot path
// makes no system call per entry.
type scanner struct {
	r      io.ReaderAt
	buf    []byte
	bufOff int64 // file offset of buf[0]
	n      int   // valid bytes in buf
	chunk  int   // read-ahead size
}

func newScanner(r io.ReaderAt, readAhead int) *scanner {
	return &scanner{r: r, chunk: readAhead}
}

// reset points the scanner at another file, keeping its buffer.
func (s *scanner) reset(r io.ReaderAt) {
	s.r, s.bufOff, s.n = r, 0, 0
}

// window returns the bytes [off, off+need) or fewer if end comes first,
// reading ahead. It never reads at or past end.
func (s *scanner) window(off int64, need int, end int64) ([]byte, error) {
	if off >= end {
		return nil, nil
	}
	if avail := end - off; int64(need) > avail {
		need = int(avail)
	}
	if off >= s.bufOff && off+int64(need) <= s.bufOff+int64(s.n) {
		return s.buf[off-s.bufOff : off-s.bufOff+int64(need)], nil
	}
	size := max(need, s.chunk)
	if int64(size) > end-off {
		size = int(end - off)
	}
	if cap(s.buf) < size {
		s.buf = make([]byte, size)
	}
	s.buf = s.buf[:size]
	n, err := s.r.ReadAt(s.buf, off)
	s.bufOff, s.n = off, n
	if n < need {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return s.buf[:n], err
	}
	return s.buf[:need], nil
}

// frame is one decoded frame.
type frame struct {
	index   uint64
	payload []byte // points into the scanner's buffer
	next    int64  // offset just past it
}

// readFrame decodes the frame at off if it is whole (before end) and valid.
// A frame that runs past end is reported as torn (ok false, err nil); a
// read error is returned as is.
func (s *scanner) readFrame(off, end int64) (f frame, ok bool, err error) {
	h, err := s.window(off, frameHeader, end)
	if err != nil || len(h) < frameHeader {
		return f, false, err
	}
	n := binary.LittleEndian.Uint32(h)
	if n > MaxEntrySize || off+frameHeader+int64(n) > end {
		return f, false, nil
	}
	b, err := s.window(off, frameHeader+int(n), end)
	if err != nil || len(b) < frameHeader+int(n) {
		return f, false, err
	}
	if binary.LittleEndian.Uint32(b[4:]) != frameCRC(b[0:4], b[8:]) {
		return f, false, nil
	}
	return frame{index: binary.LittleEndian.Uint64(b[8:]), payload: b[frameHeader:], next: off + frameHeader + int64(n)}, true, nil
}

// resync looks for the first valid frame after a bad one at off whose index
// is in (after, limit]: the index bound rejects almost every wrong position
// before its checksum is computed. It returns ok false if none is found
// before end.
func (s *scanner) resync(off, end int64, after, limit uint64) (f frame, at int64, ok bool, err error) {
	for p := off + 1; p+frameHeader <= end; p++ {
		h, err := s.window(p, frameHeader, end)
		if err != nil {
			return f, 0, false, err
		}
		if len(h) < frameHeader {
			break
		}
		idx := binary.LittleEndian.Uint64(h[8:])
		n := binary.LittleEndian.Uint32(h)
		if idx <= after || idx > limit || n > MaxEntrySize || p+frameHeader+int64(n) > end {
			continue
		}
		if f, ok, err := s.readFrame(p, end); err != nil {
			return f, 0, false, err
		} else if ok {
			return f, p, true, nil
		}
	}
	return f, 0, false, nil
}

// Entry is one entry decoded by DecodeSegment.
type Entry struct {
	Index uint64
	Data  []byte
}

// DecodeSegment decodes a whole segment file's bytes, as recovery and
// readers do: the entries whose frames are valid, in order, and one
// CorruptError per damaged stretch (including a torn tail). It never
// panics and never returns an entry whose checksum does not match.
func DecodeSegment(data []byte) (entries []Entry, damage []*CorruptError) {
	base, ok := decodeHeader(data)
	if !ok {
		return nil, []*CorruptError{{Segment: "input", Offset: 0, Reason: "bad segment header"}}
	}
	r := bytesReaderAt(data)
	s := newScanner(r, 4096)
	end := int64(len(data))
	off := int64(headerSize)
	expect := base
	for off < end {
		if _, _, ok := decodeFooter(data[off:]); ok {
			break
		}
		limit := expect + uint64(end-off)/frameHeader
		f, ok, _ := s.readFrame(off, end)
		if ok && f.index >= expect && f.index <= limit {
			if f.index > expect {
				damage = append(damage, &CorruptError{Segment: "input", Offset: off, First: expect, Last: f.index - 1, Reason: "missing frames"})
			}
			entries = append(entries, Entry{Index: f.index, Data: append([]byte(nil), f.payload...)})
			off, expect = f.next, f.index+1
			continue
		}
		g, at, found, _ := s.resync(off, end, expect-1, limit)
		if !found {
			damage = append(damage, &CorruptError{Segment: "input", Offset: off, First: expect, Last: expect, Reason: "torn or damaged tail"})
			break
		}
		if g.index > expect { // bytes between two frames lose no entry
			damage = append(damage, &CorruptError{Segment: "input", Offset: off, First: expect, Last: g.index - 1, Reason: "bad frame"})
		}
		off, expect = at, g.index
	}
	return entries, damage
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
