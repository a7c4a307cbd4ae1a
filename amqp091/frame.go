package amqp091

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Frame types (section 4.2.3; RabbitMQ's heartbeat is type 8).
const (
	FrameMethod    byte = 1
	FrameHeader    byte = 2
	FrameBody      byte = 3
	FrameHeartbeat byte = 8
)

// FrameEnd is the octet that ends every frame.
const FrameEnd byte = 0xCE

// Frame sizes.
const (
	// FrameOverhead is the octets a frame adds to its payload: type,
	// channel, size, and the end octet.
	FrameOverhead = 8
	// InitialFrameMax is the frame-max in force before tune-ok, and the
	// smallest a peer may negotiate (RabbitMQ's FRAME_MIN_SIZE).
	InitialFrameMax = 8192
	// MaxBodySize is the largest body a content header may declare
	// (RabbitMQ's MAX_MSG_SIZE, 512 MiB).
	MaxBodySize = 512 << 20
)

// Frame is one frame as read: Payload aliases the reader's buffer and is
// valid until the next ReadFrame.
type Frame struct {
	Type    byte
	Channel uint16
	Payload []byte
}

// A frame larger than any before it is read in steps that start at
// firstChunk octets and double up to readChunk, so the buffer follows the
// octets received, not the size a peer claims.
const (
	firstChunk = 4 << 10
	readChunk  = 64 << 10
)

// FrameReader reads frames from a connection. It is not safe for
// concurrent use; the front end's reading goroutine owns it.
type FrameReader struct {
	r        io.Reader
	frameMax uint32
	hdr      [7]byte
	buf      []byte
}

// NewFrameReader reads frames from r, which the caller should buffer.
// Until SetFrameMax the limit is InitialFrameMax.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: r, frameMax: InitialFrameMax}
}

// SetFrameMax sets the negotiated frame-max (tune-ok), the largest whole
// frame including FrameOverhead. 0 means no limit, which the front end
// should never negotiate.
func (fr *FrameReader) SetFrameMax(n uint32) { fr.frameMax = n }

// FrameMax is the limit in force.
func (fr *FrameReader) FrameMax() uint32 { return fr.frameMax }

// ReadFrame reads the next frame. I/O errors are returned as they are
// (io.EOF only before a frame's first octet, io.ErrUnexpectedEOF inside
// one); protocol violations are *Error with code 501 or 505, whose
// scope is the connection whatever the channel (which they carry for the
// log), and the reader must not be used after them, as RabbitMQ stops
// reading ("lost sync").
//
// Like RabbitMQ (rabbit_reader:handle_input/3) it accepts a payload of up
// to frame-max octets, eight more than the spec allows, because clients
// commonly get the limit off by the frame overhead.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Frame{}, err
	}
	f := Frame{Type: fr.hdr[0], Channel: binary.BigEndian.Uint16(fr.hdr[1:])}
	size := binary.BigEndian.Uint32(fr.hdr[3:])
	if fr.frameMax != 0 && size > fr.frameMax || uint64(size) >= math.MaxInt {
		return f, &Error{Code: FrameError, Channel: f.Channel,
			Text:  fmt.Sprintf("type %d, frame_too_large: payload of %d octets, frame-max %d", f.Type, size, fr.frameMax),
			Cause: ErrFrameTooLarge}
	}
	if err := fr.readPayload(int(size) + 1); err != nil {
		return f, noEOF(err)
	}
	n := len(fr.buf) - 1
	if end := fr.buf[n]; end != FrameEnd {
		return f, &Error{Code: FrameError, Channel: f.Channel,
			Text:  fmt.Sprintf("type %d, invalid_frame_end_marker %d", f.Type, end),
			Cause: ErrFrameEnd}
	}
	f.Payload = fr.buf[:n:n]
	switch f.Type {
	case FrameMethod, FrameHeader, FrameBody:
	case FrameHeartbeat:
		if n != 0 {
			return f, &Error{Code: FrameError, Channel: f.Channel,
				Text: fmt.Sprintf("type 8, %d octets: unknown_frame", n), Cause: ErrUnknownFrame}
		}
		if f.Channel != 0 {
			return f, &Error{Code: UnexpectedFrame, Channel: f.Channel,
				Text: "type 8, heartbeat on a non-zero channel", Cause: ErrUnexpectedFrame}
		}
	default:
		return f, &Error{Code: FrameError, Channel: f.Channel,
			Text: fmt.Sprintf("type %d: unknown_frame", f.Type), Cause: ErrUnknownFrame}
	}
	return f, nil
}

// readPayload reads n octets into fr.buf, growing it at most
// max(firstChunk, what has arrived) octets ahead of what has arrived.
func (fr *FrameReader) readPayload(n int) error {
	if n <= cap(fr.buf) {
		fr.buf = fr.buf[:n]
		_, err := io.ReadFull(fr.r, fr.buf)
		return err
	}
	fr.buf = fr.buf[:0]
	for len(fr.buf) < n {
		step := min(n-len(fr.buf), max(firstChunk, len(fr.buf)), readChunk)
		if cap(fr.buf)-len(fr.buf) < step {
			grown := make([]byte, len(fr.buf), len(fr.buf)+max(step, len(fr.buf)))
			copy(grown, fr.buf)
			fr.buf = grown
		}
		m, err := io.ReadFull(fr.r, fr.buf[len(fr.buf):len(fr.buf)+step])
		fr.buf = fr.buf[:len(fr.buf)+m]
		if err != nil {
			return err
		}
	}
	return nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendHeartbeat appends a heartbeat frame.
func AppendHeartbeat(b []byte) []byte {
	return append(b, FrameHeartbeat, 0, 0, 0, 0, 0, 0, FrameEnd)
}

// beginFrame appends a frame header whose size endFrame sets.
func beginFrame(b []byte, typ byte, channel uint16) ([]byte, int) {
	return append(b, typ, byte(channel>>8), byte(channel), 0, 0, 0, 0), len(b)
}

func endFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start+3:], uint32(len(b)-start-7))
	return append(b, FrameEnd)
}

// AppendMethodFrame appends a method frame carrying m. On error b is
// returned as it was.
func AppendMethodFrame(b []byte, channel uint16, m Method) ([]byte, error) {
	out, start := beginFrame(b, FrameMethod, channel)
	out, err := m.Append(out)
	if err != nil {
		return b, err
	}
	return endFrame(out, start), nil
}

// AppendHeaderFrame appends a content header frame (section 4.2.6.1) for
// class 60 (basic): weight 0, the body size and the properties.
func AppendHeaderFrame(b []byte, channel uint16, bodySize uint64, p *Properties) ([]byte, error) {
	out, start := beginFrame(b, FrameHeader, channel)
	out = binary.BigEndian.AppendUint64(append(out, 0, ClassBasic, 0, 0), bodySize)
	out, err := p.Append(out)
	if err != nil {
		return b, err
	}
	return endFrame(out, start), nil
}

// AppendBodyFrames appends body as content body frames of at most
// frameMax octets each (frameMax 0: one frame); an empty body gets none.
func AppendBodyFrames(b []byte, channel uint16, frameMax uint32, body []byte) []byte {
	chunk := len(body)
	if frameMax > FrameOverhead && int64(frameMax-FrameOverhead) < int64(len(body)) {
		chunk = int(frameMax - FrameOverhead)
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		var start int
		b, start = beginFrame(b, FrameBody, channel)
		b = endFrame(append(b, body[:n]...), start)
		body = body[n:]
	}
	return b
}

// AppendContent appends a content-bearing method (basic.publish, return,
// deliver or get-ok), its header frame and its body frames.
func AppendContent(b []byte, channel uint16, frameMax uint32, m Method, p *Properties, body []byte) ([]byte, error) {
	out, err := AppendMethodFrame(b, channel, m)
	if err != nil {
		return b, err
	}
	if out, err = AppendHeaderFrame(out, channel, uint64(len(body)), p); err != nil {
		return b, err
	}
	return AppendBodyFrames(out, channel, frameMax, body), nil
}
