package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/epitaph-mq/epitaph/router/store/storeerr"
)

// The state file ("state") records what was released: the head (first
// index kept) and the spans settled out of order above it. It is a log of
// records, each: body length (4), CRC-32C of the body (4), body, where the
// body is a type byte and its fields:
//
//	opHead       head (8)                    everything below head is released
//	opSettle     from (8), to (8)            [from, to) is released
//	opSuffix     from (8)                    nothing at or above from is released
//	             (a suffix truncation: those indices will be appended anew)
//	opCheckpoint head (8), n (4), n × (from, to)
//
// Records are written by the syncer only, one write per group commit, and
// the file is rewritten as a single checkpoint (write, fsync, rename, fsync
// the directory) once it is four times larger than a checkpoint would be,
// so its size, and the time to read it at open, is bounded by the spans
// held, not by the entries ever released. Replaying the records in order
// onto a checkpoint that already contains them gives the same state, which
// makes the rewrite safe to take at any point.
const (
	opHead       = 1
	opSettle     = 2
	opSuffix     = 3
	opCheckpoint = 4

	stateName = "state"
)

type stateOp struct {
	kind     byte
	from, to uint64
}

func appendRecord(b []byte, body []byte) []byte {
	var h [8]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(body, castagnoli))
	b = append(b, h[:]...)
	return append(b, body...)
}

func encodeOps(b []byte, ops []stateOp) []byte {
	var body [17]byte
	for _, op := range ops {
		body[0] = op.kind
		binary.LittleEndian.PutUint64(body[1:], op.from)
		n := 9
		if op.kind == opSettle {
			binary.LittleEndian.PutUint64(body[9:], op.to)
			n = 17
		}
		b = appendRecord(b, body[:n])
	}
	return b
}

func encodeCheckpoint(head uint64, holes spans) []byte {
	body := make([]byte, 13, 13+16*len(holes))
	body[0] = opCheckpoint
	binary.LittleEndian.PutUint64(body[1:], head)
	binary.LittleEndian.PutUint32(body[9:], uint32(len(holes)))
	for _, s := range holes {
		body = binary.LittleEndian.AppendUint64(body, s.from)
		body = binary.LittleEndian.AppendUint64(body, s.to)
	}
	return appendRecord(nil, body)
}

// releaseState is what the state file says.
type releaseState struct {
	head  uint64
	holes spans
}

func (st *releaseState) apply(kind byte, a, b uint64) {
	switch kind {
	case opHead:
		if a > st.head {
			st.head = a
			st.holes.dropBelow(a)
		}
	case opSettle:
		if b > st.head {
			st.holes.add(max(a, st.head), b)
		}
	case opSuffix:
		st.holes.dropFrom(a)
	}
}

// readState replays a state file. It returns the state and the length of
// the valid prefix. A bad record is a torn tail (the last write, never
// synced) when nothing valid follows it; a valid record after it means the
// file was damaged, and that is an error wrapping storeerr.ErrCorrupt: a lost
// release would bring settled entries back.
func readState(data []byte) (st releaseState, good int, err error) {
	off := 0
	for off < len(data) {
		body, next, ok := parseRecord(data, off)
		if !ok {
			// Look for any valid record after the bad one.
			for p := off + 1; p+8 <= len(data); p++ {
				if _, _, ok := parseRecord(data, p); ok {
					return st, off, fmt.Errorf("segment: state file damaged at offset %d (valid record at %d): %w", off, p, storeerr.ErrCorrupt)
				}
			}
			return st, off, nil
		}
		if err := st.applyBody(body); err != nil {
			return st, off, fmt.Errorf("segment: state record at offset %d: %w", off, err)
		}
		off = next
	}
	return st, off, nil
}

func parseRecord(data []byte, off int) (body []byte, next int, ok bool) {
	if off+8 > len(data) {
		return nil, 0, false
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	if n < 9 || n > len(data)-off-8 {
		return nil, 0, false
	}
	body = data[off+8 : off+8+n]
	if binary.LittleEndian.Uint32(data[off+4:]) != crc32.Checksum(body, castagnoli) {
		return nil, 0, false
	}
	return body, off + 8 + n, true
}

func (st *releaseState) applyBody(body []byte) error {
	kind := body[0]
	a := binary.LittleEndian.Uint64(body[1:])
	switch kind {
	case opHead, opSuffix:
		st.apply(kind, a, 0)
	case opSettle:
		if len(body) < 17 {
			return fmt.Errorf("short settle record: %w", storeerr.ErrCorrupt)
		}
		st.apply(kind, a, binary.LittleEndian.Uint64(body[9:]))
	case opCheckpoint:
		if len(body) < 13 {
			return fmt.Errorf("short checkpoint: %w", storeerr.ErrCorrupt)
		}
		n := int(binary.LittleEndian.Uint32(body[9:]))
		if len(body) != 13+16*n {
			return fmt.Errorf("checkpoint of %d spans in %d bytes: %w", n, len(body), storeerr.ErrCorrupt)
		}
		st.head, st.holes = a, st.holes[:0]
		for k := range n {
			from := binary.LittleEndian.Uint64(body[13+16*k:])
			to := binary.LittleEndian.Uint64(body[21+16*k:])
			st.apply(opSettle, from, to)
		}
	default:
		return fmt.Errorf("unknown record type %d: %w", kind, storeerr.ErrCorrupt)
	}
	return nil
}
