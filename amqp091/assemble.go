package amqp091

import (
	"encoding/binary"
	"fmt"
)

// ContentHeader is a content header frame's payload (section 4.2.6.1):
// class-id, weight (always 0), body-size, then the property flags and
// list, kept raw in Properties so a 0-9-1 consumer can be sent the
// publisher's octets and a router decode them only when it needs to.
type ContentHeader struct {
	ClassID    uint16
	Weight     uint16
	BodySize   uint64
	Properties []byte // aliases the payload
}

// ParseContentHeader splits a header frame's payload. A payload shorter
// than its fixed part is 501 frame-error, as RabbitMQ's
// rabbit_command_assembler:analyze_frame/2 finds no match for it.
func ParseContentHeader(payload []byte) (ContentHeader, error) {
	if len(payload) < 12 {
		return ContentHeader{}, frameErr(ErrUnknownFrame, "type 2, %d octets: unknown_frame", len(payload))
	}
	return ContentHeader{
		ClassID:    binary.BigEndian.Uint16(payload),
		Weight:     binary.BigEndian.Uint16(payload[2:]),
		BodySize:   binary.BigEndian.Uint64(payload[4:]),
		Properties: payload[12:],
	}, nil
}

// Step is what a frame did to a channel's Assembler.
type Step uint8

// Steps of an Assembler.
const (
	StepMethod  Step = iota + 1 // a method without content: handle it
	StepContent                 // a content-bearing method: header and body follow
	StepHeader                  // the content header: body frames follow
	StepBody                    // a body frame, more to come
	StepDone                    // the content is complete (after its header or last body frame)
)

// Assembler enforces a channel's frame order as RabbitMQ's
// rabbit_command_assembler does: a method; for publish, return, deliver
// and get-ok a content header of the same class with weight 0 and a body
// size up to MaxBodySize; then body frames adding up to exactly that
// size. Its zero value expects a method. Each channel has its own.
type Assembler struct {
	state     uint8 // 0 method, 1 header, 2 body
	classID   uint16
	methodID  uint16
	remaining uint64
}

// Next checks one frame of the channel (not a heartbeat) and returns what
// it was. Errors are *Error: 505 unexpected-frame for a frame out of
// order, 501 frame-error for an oversized body, 503 command-invalid for
// an unknown method, each naming the method in progress.
func (a *Assembler) Next(f Frame) (Step, error) {
	switch a.state {
	case 0:
		if f.Type != FrameMethod {
			// No method is in progress (RabbitMQ's method none): the ids of
			// the last content method are not this error's.
			return 0, &Error{Code: UnexpectedFrame, Channel: f.Channel, Cause: ErrUnexpectedFrame,
				Text: "expected method frame, got non method frame instead"}
		}
		classID, methodID, _, err := ParseMethodHeader(f.Payload)
		if err != nil {
			return 0, WithChannel(err, f.Channel)
		}
		if !HasContent(classID, methodID) {
			return StepMethod, nil
		}
		a.state, a.classID, a.methodID = 1, classID, methodID
		return StepContent, nil
	case 1:
		if f.Type != FrameHeader {
			return 0, a.err(f.Channel, UnexpectedFrame, ErrUnexpectedFrame,
				fmt.Sprintf("expected content header for class %d, got non content header frame instead", a.classID))
		}
		h, err := ParseContentHeader(f.Payload)
		switch {
		case err != nil:
			return 0, WithChannel(err, f.Channel)
		case h.ClassID != a.classID:
			return 0, a.err(f.Channel, UnexpectedFrame, ErrUnexpectedFrame,
				fmt.Sprintf("expected content header for class %d, got one for class %d instead", a.classID, h.ClassID))
		case h.Weight != 0:
			return 0, a.err(f.Channel, UnexpectedFrame, ErrUnexpectedFrame,
				fmt.Sprintf("expected content header for class %d, got non content header frame instead", a.classID))
		case h.BodySize > MaxBodySize:
			return 0, a.err(f.Channel, FrameError, ErrFrameTooLarge,
				fmt.Sprintf("content body size %d exceeds maximum allowed size %d", h.BodySize, MaxBodySize))
		case h.BodySize == 0:
			a.state = 0
			return StepDone, nil
		}
		a.state, a.remaining = 2, h.BodySize
		return StepHeader, nil
	}
	if f.Type != FrameBody {
		return 0, a.err(f.Channel, UnexpectedFrame, ErrUnexpectedFrame, "expected content body, got non content body frame instead")
	}
	if uint64(len(f.Payload)) > a.remaining {
		return 0, a.err(f.Channel, FrameError, ErrFrameTooLarge, "content body frame exceeds remaining content size")
	}
	a.remaining -= uint64(len(f.Payload))
	if a.remaining == 0 {
		a.state = 0
		return StepDone, nil
	}
	return StepBody, nil
}

// Remaining is the number of body octets still expected.
func (a *Assembler) Remaining() uint64 { return a.remaining }

// Reset returns the assembler to expecting a method (channel.close, reopen).
func (a *Assembler) Reset() { *a = Assembler{} }

func (a *Assembler) err(channel, code uint16, cause error, text string) *Error {
	return &Error{Code: code, Text: text, Channel: channel, ClassID: a.classID, MethodID: a.methodID, Cause: cause}
}
