package amqp10

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
