package amqp10

import (
	"encoding/binary"
	"fmt"
)

// Frame types (section 2.3).
const (
	FrameTypeAMQP byte = 0x00
	FrameTypeSASL byte = 0x01
)

// MinMaxFrameSize is the smallest max-frame-size a peer may advertise; both
// peers must accept frames of up to this size (section 2.7.1).
const MinMaxFrameSize = 512

// FrameHeader is the fixed 8-byte frame header (section 2.3.1).
type FrameHeader struct {
	Size       uint32 // total frame size including the header
	DataOffset uint8  // in 4-byte words, >= 2
	Type       uint8
	Channel    uint16
}

// ParseFrameHeader parses the 8-byte frame header and validates SIZE >= 8,
// DOFF >= 2 and DOFF*4 <= SIZE (errors wrap ErrInvalidField; a short input
// wraps ErrTruncated).
func ParseFrameHeader(b []byte) (FrameHeader, error) {
	if len(b) < 8 {
		return FrameHeader{}, errTrunc("frame header")
	}
	h := FrameHeader{
		Size:       binary.BigEndian.Uint32(b),
		DataOffset: b[4],
		Type:       b[5],
		Channel:    binary.BigEndian.Uint16(b[6:]),
	}
	switch {
	case h.Size < 8:
		return h, fmt.Errorf("%w: frame size %d < 8", ErrInvalidField, h.Size)
	case h.DataOffset < 2:
		return h, fmt.Errorf("%w: data offset %d < 2", ErrInvalidField, h.DataOffset)
	case uint32(h.DataOffset)*4 > h.Size:
		return h, fmt.Errorf("%w: data offset %d beyond frame size %d", ErrInvalidField, h.DataOffset, h.Size)
	}
	return h, nil
}

// AppendFrame appends a whole frame: the header (DOFF 2), the performative,
// then payload (transfer payload, or nil); the size is backpatched.
// It allocates nothing when b has capacity. A nil p gives an empty frame.
func AppendFrame(b []byte, typ byte, channel uint16, p Performative, payload []byte) []byte {
	b, start := BeginFrame(b, typ, channel)
	if p != nil {
		b = p.Append(b)
	}
	return EndFrame(append(b, payload...), start)
}

// BeginFrame appends the header of a frame whose body the caller appends
// in place (performative, then payload); EndFrame(b, start) then sets its
// size. A delivery is encoded straight into the output this way.
func BeginFrame(b []byte, typ byte, channel uint16) (_ []byte, start int) {
	start = len(b)
	return append(b, 0, 0, 0, 0, 2, typ, byte(channel>>8), byte(channel)), start
}

// EndFrame sets the size of the frame BeginFrame started at start.
func EndFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// AppendHeartbeat appends an empty AMQP frame (8 bytes, no body).
func AppendHeartbeat(b []byte) []byte {
	return append(b, 0, 0, 0, 8, 2, FrameTypeAMQP, 0, 0)
}
