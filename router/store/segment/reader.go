package segment

import (
	"fmt"
	"io"
	"os"
)

// Reader reads a log sequentially from an index, skipping released
// entries. Each reader has its own file handle and read-ahead buffer, so
// many can read at different positions (consumers of a queue's head, a
// stream's readers, a Raft leader sending to followers); one read system
// call fills the buffer with many entries. A Reader is not safe for
// concurrent use; the Log it reads may be written meanwhile.
type Reader struct {
	l    *Log
	next uint64 // the next index to return
	gen  uint64
	sc   *scanner
	file File
	seg  *seg
	pos  uint64 // index of the frame at off in seg
	off  int64
}

// NewReader returns a reader whose first entry is the first held one at or
// after from.
func (l *Log) NewReader(from uint64) *Reader {
	l.mu.Lock()
	gen := l.gen
	l.mu.Unlock()
	return &Reader{l: l, next: from, gen: gen}
}

// Seek makes the next entry read the first held one at or after index.
func (r *Reader) Seek(index uint64) { r.next = index }

// Close releases the reader's file.
func (r *Reader) Close() error {
	r.drop()
	return nil
}

func (r *Reader) drop() {
	if r.file != nil {
		r.file.Close()
	}
	r.file, r.seg = nil, nil
}

// Next returns the next held entry. data points into the reader's buffer
// and is valid until the next call. At the end of the log it returns
// io.EOF (call again after more appends). An unreadable stretch is
// returned once as a *CorruptError (wrapping storeerr.ErrCorrupt) naming its
// indices; the following call continues after it.
func (r *Reader) Next() (index uint64, data []byte, err error) {
	l := r.l
	for {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return 0, nil, ErrClosed
		}
		if r.gen != l.gen {
			r.gen = l.gen
			r.drop()
		}
		r.next = max(r.next, l.head)
		if k := l.holes.search(r.next); k < len(l.holes) && l.holes[k].from <= r.next {
			r.next = l.holes[k].to
		}
		if r.next >= l.next {
			l.mu.Unlock()
			return 0, nil, io.EOF
		}
		s := l.segFor(r.next)
		if s == nil {
			nb := l.nextSegBase(r.next)
			if k := l.holes.search(r.next); k < len(l.holes) && l.holes[k].from < nb {
				nb = l.holes[k].from
			}
			l.mu.Unlock()
			e := &CorruptError{Offset: 0, First: r.next, Last: nb - 1, Reason: "segment file missing"}
			r.next = nb
			return 0, nil, e
		}
		if k := s.damaged.search(r.next); k < len(s.damaged) && s.damaged[k].from <= r.next {
			d := s.damaged[k]
			l.mu.Unlock()
			r.next = d.to
			return 0, nil, &CorruptError{Segment: s.name, First: d.from, Last: d.to - 1, Reason: "damaged frames found at open"}
		}
		end, segLast := s.size, s.end()-1
		if r.seg != s || r.pos > r.next || r.next-r.pos >= sparseEvery {
			if r.seg != s {
				r.drop()
				f, err := l.fs.OpenFile(l.path(s.name), os.O_RDONLY, 0)
				if err != nil {
					l.mu.Unlock()
					return 0, nil, fmt.Errorf("segment: %w", err)
				}
				if r.sc == nil {
					r.sc = newScanner(f, l.readAhead)
				}
				r.sc.reset(f)
				r.file, r.seg = f, s
				r.pos, r.off = s.base, headerSize
			}
			if k := (r.next - s.base) / sparseEvery; k < uint64(len(s.sparse)) {
				r.pos, r.off = s.base+k*sparseEvery, s.sparse[k]
			} else if n := len(s.sparse); n > 0 && (r.pos > r.next || s.base+uint64(n-1)*sparseEvery > r.pos) {
				r.pos, r.off = s.base+uint64(n-1)*sparseEvery, s.sparse[n-1]
			} else if r.pos > r.next {
				r.pos, r.off = s.base, headerSize
			}
		}
		l.mu.Unlock()

		fr, ok, err := r.sc.readFrame(r.off, end)
		if err != nil {
			return 0, nil, fmt.Errorf("segment: reading %s: %w", s.name, err)
		}
		if !ok || fr.index != r.pos {
			g, at, found, err := r.sc.resync(r.off, end, r.pos-1, segLast)
			if err != nil {
				return 0, nil, fmt.Errorf("segment: reading %s: %w", s.name, err)
			}
			first, last := r.pos, segLast
			if found {
				last = g.index - 1
			}
			ce := &CorruptError{Segment: s.name, Offset: r.off, First: first, Last: last, Reason: "bad frame"}
			if found {
				r.pos, r.off = g.index, at
			} else {
				r.pos, r.off = segLast+1, end
			}
			if r.next <= last {
				r.next = last + 1
				return 0, nil, ce
			}
			continue
		}
		if (fr.index-s.base)%sparseEvery == 0 {
			l.mu.Lock()
			s.noteSparse(fr.index, r.off)
			l.mu.Unlock()
		}
		r.pos, r.off = fr.index+1, fr.next
		if fr.index == r.next {
			r.next++
			return fr.index, fr.payload, nil
		}
	}
}

// Read calls fn for each held entry in [lo, hi) in order, stopping after
// maxBytes of payload when maxBytes > 0 (at least one entry is passed).
// data is valid only during the call.
func (l *Log) Read(lo, hi uint64, maxBytes int, fn func(index uint64, data []byte) error) error {
	r := l.NewReader(lo)
	defer r.Close()
	total := 0
	for {
		i, data, err := r.Next()
		if err == io.EOF || (err == nil && i >= hi) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(i, data); err != nil {
			return err
		}
		total += len(data)
		if maxBytes > 0 && total >= maxBytes {
			return nil
		}
	}
}

// Get returns a copy of entry index. Consecutive Gets (a Raft library
// reading its log one entry at a time) share one reader and its buffer.
func (l *Log) Get(index uint64) ([]byte, error) {
	l.getMu.Lock()
	defer l.getMu.Unlock()
	l.mu.Lock()
	closed, inRange := l.closed, index >= l.head && index < l.next && !l.holes.contains(index)
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if !inRange {
		return nil, fmt.Errorf("segment: index %d: %w", index, ErrNotFound)
	}
	if l.getter == nil {
		l.getter = l.NewReader(index)
	}
	l.getter.Seek(index)
	i, data, err := l.getter.Next()
	if err == io.EOF || (err == nil && i != index) {
		return nil, fmt.Errorf("segment: index %d: %w", index, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), data...), nil
}
