package amqp091

import (
	"errors"
	"fmt"
)

// Reply codes (AMQP 0-9-1 constants, with RabbitMQ's use of them).
const (
	ReplySuccess       uint16 = 200
	ContentTooLarge    uint16 = 311
	NoRoute            uint16 = 312
	NoConsumers        uint16 = 313
	ConnectionForced   uint16 = 320
	InvalidPath        uint16 = 402
	AccessRefused      uint16 = 403
	NotFound           uint16 = 404
	ResourceLocked     uint16 = 405
	PreconditionFailed uint16 = 406
	FrameError         uint16 = 501
	SyntaxError        uint16 = 502
	CommandInvalid     uint16 = 503
	ChannelError       uint16 = 504
	UnexpectedFrame    uint16 = 505
	ResourceError      uint16 = 506
	NotAllowed         uint16 = 530
	NotImplemented     uint16 = 540
	InternalError      uint16 = 541
)

// ReplyName returns the constant's name as RabbitMQ puts it at the start of
// reply-text ("NOT_FOUND - no queue 'q' in vhost '/'"), or "" if unknown.
func ReplyName(code uint16) string {
	switch code {
	case ReplySuccess:
		return "REPLY_SUCCESS"
	case ContentTooLarge:
		return "CONTENT_TOO_LARGE"
	case NoRoute:
		return "NO_ROUTE"
	case NoConsumers:
		return "NO_CONSUMERS"
	case ConnectionForced:
		return "CONNECTION_FORCED"
	case InvalidPath:
		return "INVALID_PATH"
	case AccessRefused:
		return "ACCESS_REFUSED"
	case NotFound:
		return "NOT_FOUND"
	case ResourceLocked:
		return "RESOURCE_LOCKED"
	case PreconditionFailed:
		return "PRECONDITION_FAILED"
	case FrameError:
		return "FRAME_ERROR"
	case SyntaxError:
		return "SYNTAX_ERROR"
	case CommandInvalid:
		return "COMMAND_INVALID"
	case ChannelError:
		return "CHANNEL_ERROR"
	case UnexpectedFrame:
		return "UNEXPECTED_FRAME"
	case ResourceError:
		return "RESOURCE_ERROR"
	case NotAllowed:
		return "NOT_ALLOWED"
	case NotImplemented:
		return "NOT_IMPLEMENTED"
	case InternalError:
		return "INTERNAL_ERROR"
	}
	return ""
}

// IsHardError reports whether code is a hard error (the spec's
// "hard-error" class, and any code RabbitMQ does not know): such an error
// always closes the connection.
func IsHardError(code uint16) bool {
	switch code {
	case ContentTooLarge, NoRoute, NoConsumers, AccessRefused, NotFound, ResourceLocked, PreconditionFailed:
		return false
	}
	return true
}

// Scope says which close an error is answered with.
type Scope uint8

// Scopes of an Error.
const (
	ScopeConnection Scope = iota // connection.close on channel 0
	ScopeChannel                 // channel.close on the failing channel
)

func (s Scope) String() string {
	if s == ScopeChannel {
		return "channel"
	}
	return "connection"
}

// Error is a protocol error the front end puts on the wire: Code and Text
// go into the close method (Text without the "NAME - " prefix, which
// ReplyText adds), ClassID and MethodID name the failing method (0 when
// none), Channel is where it happened. Cause, if set, is for the log.
type Error struct {
	Code     uint16
	Text     string
	Channel  uint16
	ClassID  uint16
	MethodID uint16
	Cause    error
}

// Scope follows RabbitMQ's rule (rabbit_binary_generator:map_exception/2):
// a hard code, or any error on channel 0, closes the connection; a soft
// code on channel N closes channel N.
func (e *Error) Scope() Scope {
	if e.Channel == 0 || IsHardError(e.Code) {
		return ScopeConnection
	}
	return ScopeChannel
}

// ReplyText is the reply-text RabbitMQ sends: "NAME - text", cut to the
// 255 octets a shortstr can hold.
func (e *Error) ReplyText() string {
	s := e.Text
	if n := ReplyName(e.Code); n != "" {
		s = n + " - " + s
	}
	if len(s) > 255 {
		s = s[:255]
	}
	return s
}

func (e *Error) Error() string {
	s := fmt.Sprintf("amqp091: %d %s on channel %d", e.Code, e.ReplyText(), e.Channel)
	if e.ClassID != 0 || e.MethodID != 0 {
		s += fmt.Sprintf(" (method %d.%d)", e.ClassID, e.MethodID)
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Cause }

// Sentinel causes. Every decoding failure is an *Error whose Cause wraps
// one of these, so callers can test the kind with errors.Is and the reply
// with errors.As.
var (
	// ErrTruncated reports input that ends before the encoded value does.
	ErrTruncated = errors.New("amqp091: truncated input")
	// ErrTrailing reports octets after the last field of a method or property list.
	ErrTrailing = errors.New("amqp091: trailing octets")
	// ErrInvalidType reports an unknown field-value type octet.
	ErrInvalidType = errors.New("amqp091: invalid field type")
	// ErrTooDeep reports tables or arrays nested beyond MaxDepth.
	ErrTooDeep = errors.New("amqp091: nesting too deep")
	// ErrBadUTF8 reports a shortstr that is not UTF-8 where RabbitMQ checks it.
	ErrBadUTF8 = errors.New("amqp091: malformed UTF-8 in shortstr")
	// ErrFrameTooLarge reports a frame over the frame-max in force.
	ErrFrameTooLarge = errors.New("amqp091: frame too large")
	// ErrFrameEnd reports a frame whose last octet is not 0xCE.
	ErrFrameEnd = errors.New("amqp091: invalid frame end marker")
	// ErrUnknownFrame reports an unknown frame type or a malformed frame payload.
	ErrUnknownFrame = errors.New("amqp091: unknown frame")
	// ErrUnexpectedFrame reports a frame out of the method, header, body order.
	ErrUnexpectedFrame = errors.New("amqp091: unexpected frame")
	// ErrUnknownMethod reports a class and method id pair that is not in the protocol.
	ErrUnknownMethod = errors.New("amqp091: unknown method")
	// ErrEncode reports a value the encoder cannot represent (a table value of an unsupported Go type, a string too long for a shortstr).
	ErrEncode = errors.New("amqp091: cannot encode")
)

// frameErr builds a 501 frame-error for a malformed frame or method.
func frameErr(cause error, format string, args ...any) *Error {
	return &Error{Code: FrameError, Text: fmt.Sprintf(format, args...), Cause: cause}
}
