package amqp091

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Method is one AMQP 0-9-1 method (section 4.2.4): a struct per method,
// with the spec's fields under their spec names. Bit fields that follow
// each other share octets, the first in the lowest bit; the ticket fields
// (reserved shorts) are kept so encoding is exact.
type Method interface {
	// ID returns the class and method ids.
	ID() (classID, methodID uint16)
	// Append appends the method frame payload: class-id, method-id and
	// the arguments. It fails only for a string too long for a shortstr
	// or a table value it cannot encode (the returned slice is then to
	// be discarded; AppendMethodFrame returns its input), and allocates
	// nothing when b has capacity.
	Append(b []byte) ([]byte, error)
	// Decode decodes the arguments (the payload after the ids).
	Decode(args []byte) error
}

// ParseMethodHeader splits a method frame payload into its ids and
// arguments. A payload shorter than the ids is 501 frame-error; ids that
// name no method of the protocol are 503 command-invalid (RabbitMQ's
// lookup exits there and its catch-all for methods it does not implement
// is command-invalid).
func ParseMethodHeader(payload []byte) (classID, methodID uint16, args []byte, err error) {
	if len(payload) < 4 {
		return 0, 0, nil, frameErr(ErrUnknownFrame, "type 1, %d octets: unknown_frame", len(payload))
	}
	classID, methodID = binary.BigEndian.Uint16(payload), binary.BigEndian.Uint16(payload[2:])
	if _, ok := lookupMethod(classID, methodID); !ok {
		return classID, methodID, nil, &Error{Code: CommandInvalid, ClassID: classID, MethodID: methodID,
			Text: fmt.Sprintf("unknown method %d.%d", classID, methodID), Cause: ErrUnknownMethod}
	}
	return classID, methodID, payload[4:], nil
}

// ParseMethod decodes a method frame payload into a new method struct.
// The front end's hot path decodes into structs it reuses instead, with
// ParseMethodHeader and the struct's Decode.
func ParseMethod(payload []byte) (Method, error) {
	classID, methodID, args, err := ParseMethodHeader(payload)
	if err != nil {
		return nil, err
	}
	info, _ := lookupMethod(classID, methodID)
	m := info.new()
	if err := DecodeArgs(m, args); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeArgs runs m.Decode and turns a failure into RabbitMQ's answer to
// an undecodable method: 501 frame-error "cannot decode", naming the
// method (rabbit_misc:frame_error/2, which the generated decoder calls for
// any argument list that does not match).
func DecodeArgs(m Method, args []byte) error {
	err := m.Decode(args)
	if err == nil {
		return nil
	}
	classID, methodID := m.ID()
	return &Error{Code: FrameError, ClassID: classID, MethodID: methodID,
		Text: fmt.Sprintf("cannot decode %s arguments", MethodName(classID, methodID)), Cause: err}
}

// MethodName is the method's name as RabbitMQ writes it
// ("basic.publish", "queue.declare_ok"), or "" if the ids name none.
func MethodName(classID, methodID uint16) string {
	info, _ := lookupMethod(classID, methodID)
	return info.name
}

// WithChannel sets the channel of err if it is an *Error, and returns it.
func WithChannel(err error, channel uint16) error {
	if e, ok := errors.AsType[*Error](err); ok {
		e.Channel = channel
	}
	return err
}
