// Package perf is the engine of epitaph-perf: the load scenarios, the two
// client engines (go-amqp and a fast client on package amqp10), latency
// histograms, sequence tracking and /proc sampling. The null broker
// (cmd/epitaph-null/nullbroker) shares its frame I/O.
package perf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// OutQueue coalesces outgoing frames of one connection: producers append
// encoded frames to a shared buffer under a mutex (Begin/End), and one writer
// goroutine (Run) swaps the buffer out, writes it through a bufio.Writer and
// flushes only when nothing more is queued. No goroutine or allocation per
// frame; the lock is never held across I/O.
type OutQueue struct {
	mu     sync.Mutex
	buf    []byte
	sig    chan struct{}
	closed bool
	err    error
}

// NewOutQueue returns an empty queue.
func NewOutQueue() *OutQueue {
	return &OutQueue{buf: make([]byte, 0, 64<<10), sig: make(chan struct{}, 1)}
}

// Begin locks the queue and returns the buffer to append frames to; End
// must follow with the grown buffer.
func (q *OutQueue) Begin() []byte { q.mu.Lock(); return q.buf }

// End stores b, unlocks and wakes the writer.
func (q *OutQueue) End(b []byte) {
	q.buf = b
	q.mu.Unlock()
	select {
	case q.sig <- struct{}{}:
	default:
	}
}

// Close makes Run return once the queue is written out.
func (q *OutQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.sig <- struct{}{}:
	default:
	}
}

// Err is the first write error, if any.
func (q *OutQueue) Err() error { q.mu.Lock(); defer q.mu.Unlock(); return q.err }

// Run writes queued frames to w until Close or a write error.
func (q *OutQueue) Run(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	spare := make([]byte, 0, 64<<10)
	for {
		q.mu.Lock()
		if len(q.buf) == 0 {
			closed := q.closed
			q.mu.Unlock()
			if err := bw.Flush(); err != nil {
				q.fail(err)
				return err
			}
			if closed {
				return nil
			}
			<-q.sig
			continue
		}
		b := q.buf
		q.buf = spare
		q.mu.Unlock()
		if _, err := bw.Write(b); err != nil {
			q.fail(err)
			return err
		}
		if cap(b) > 4<<20 { // do not keep a huge backlog buffer forever
			b = make([]byte, 0, 64<<10)
		}
		spare = b[:0]
	}
}

func (q *OutQueue) fail(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	q.closed = true
	q.buf = q.buf[:0]
	q.mu.Unlock()
}

// FrameReader reads whole frames; the returned body is valid until the next
// ReadFrame.
type FrameReader struct {
	R   *bufio.Reader
	hdr [8]byte
	buf []byte
	Max uint32 // largest accepted frame (0: 16 MiB)
}

// NewFrameReader wraps r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{R: bufio.NewReaderSize(r, 256<<10), buf: make([]byte, 64<<10)}
}

// ReadFrame returns the header and the frame body after the extended header.
// An empty body is a heartbeat.
func (f *FrameReader) ReadFrame() (amqp10.FrameHeader, []byte, error) {
	if _, err := io.ReadFull(f.R, f.hdr[:]); err != nil {
		return amqp10.FrameHeader{}, nil, err
	}
	h, err := amqp10.ParseFrameHeader(f.hdr[:])
	if err != nil {
		return h, nil, err
	}
	max := f.Max
	if max == 0 {
		max = 16 << 20
	}
	if h.Size > max {
		return h, nil, fmt.Errorf("frame of %d bytes exceeds %d", h.Size, max)
	}
	n := int(h.Size) - 8
	if cap(f.buf) < n {
		f.buf = make([]byte, n)
	}
	b := f.buf[:n]
	if _, err := io.ReadFull(f.R, b); err != nil {
		return h, nil, err
	}
	return h, b[int(h.DataOffset)*4-8:], nil
}

// ReadProtoHeader reads an 8-byte protocol header.
func (f *FrameReader) ReadProtoHeader() ([8]byte, error) {
	var h [8]byte
	_, err := io.ReadFull(f.R, h[:])
	return h, err
}

// Buffered reports whether more input is already buffered (so batched
// replies can wait for it).
func (f *FrameReader) Buffered() int { return f.R.Buffered() }

// AppendTransfer appends a transfer frame whose payload is one data section
// holding body.
func AppendTransfer(b []byte, ch uint16, t *amqp10.Transfer, body []byte) []byte {
	return AppendTransferSections(b, ch, t, nil, body)
}

// AppendTransferSections appends a transfer frame whose payload is the
// encoded sections in prefix (e.g. a header) followed by one data section
// holding body.
func AppendTransferSections(b []byte, ch uint16, t *amqp10.Transfer, prefix, body []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 2, amqp10.FrameTypeAMQP, byte(ch>>8), byte(ch))
	b = t.Append(b)
	b = append(b, prefix...)
	b = amqp10.AppendData(b, body)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// AppendTransferRaw appends a transfer frame carrying payload as is.
func AppendTransferRaw(b []byte, ch uint16, t *amqp10.Transfer, payload []byte) []byte {
	return amqp10.AppendFrame(b, amqp10.FrameTypeAMQP, ch, t, payload)
}

// DataBody returns the body of the last data section of a message payload
// when it is the final section (the common case: no footer). It allocates
// nothing; ok is false when the payload does not end in a data section of
// length n.
func DataBody(payload []byte, n int) ([]byte, bool) {
	if n <= 255 {
		p := len(payload) - n - 5
		if p < 0 || payload[p] != 0 || payload[p+1] != 0x53 || payload[p+2] != 0x75 || payload[p+3] != 0xa0 || int(payload[p+4]) != n {
			return nil, false
		}
		return payload[p+5:], true
	}
	p := len(payload) - n - 8
	if p < 0 || payload[p] != 0 || payload[p+1] != 0x53 || payload[p+2] != 0x75 || payload[p+3] != 0xb0 || int(binary.BigEndian.Uint32(payload[p+4:])) != n {
		return nil, false
	}
	return payload[p+8:], true
}
