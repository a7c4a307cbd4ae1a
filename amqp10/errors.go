package amqp10

import (
	"errors"
	"fmt"
)

// ErrCond is an AMQP error condition symbol (section 2.8.15 and following).
type ErrCond Symbol

// Error conditions defined by the specification.
const (
	ErrCondInternalError         ErrCond = "amqp:internal-error"
	ErrCondNotFound              ErrCond = "amqp:not-found"
	ErrCondUnauthorizedAccess    ErrCond = "amqp:unauthorized-access"
	ErrCondDecodeError           ErrCond = "amqp:decode-error"
	ErrCondResourceLimitExceeded ErrCond = "amqp:resource-limit-exceeded"
	ErrCondNotAllowed            ErrCond = "amqp:not-allowed"
	ErrCondInvalidField          ErrCond = "amqp:invalid-field"
	ErrCondNotImplemented        ErrCond = "amqp:not-implemented"
	ErrCondResourceLocked        ErrCond = "amqp:resource-locked"
	ErrCondPreconditionFailed    ErrCond = "amqp:precondition-failed"
	ErrCondResourceDeleted       ErrCond = "amqp:resource-deleted"
	ErrCondIllegalState          ErrCond = "amqp:illegal-state"
	ErrCondFrameSizeTooSmall     ErrCond = "amqp:frame-size-too-small"

	ErrCondConnectionForced ErrCond = "amqp:connection:forced"
	ErrCondFramingError     ErrCond = "amqp:connection:framing-error"
	ErrCondRedirect         ErrCond = "amqp:connection:redirect"

	ErrCondWindowViolation  ErrCond = "amqp:session:window-violation"
	ErrCondErrantLink       ErrCond = "amqp:session:errant-link"
	ErrCondHandleInUse      ErrCond = "amqp:session:handle-in-use"
	ErrCondUnattachedHandle ErrCond = "amqp:session:unattached-handle"

	ErrCondDetachForced          ErrCond = "amqp:link:detach-forced"
	ErrCondTransferLimitExceeded ErrCond = "amqp:link:transfer-limit-exceeded"
	ErrCondMessageSizeExceeded   ErrCond = "amqp:link:message-size-exceeded"
	ErrCondLinkRedirect          ErrCond = "amqp:link:redirect"
	ErrCondStolen                ErrCond = "amqp:link:stolen"
)

// Error is the AMQP error type (section 2.8.14).
//
//	<type name="error" class="composite" source="list">
//	    <descriptor name="amqp:error:list" code="0x00000000:0x0000001d"/>
//	    <field name="condition" type="symbol" requires="error-condition" mandatory="true"/>
//	    <field name="description" type="string"/>
//	    <field name="info" type="fields"/>
//	</type>
type Error struct {
	Condition   ErrCond
	Description string
	Info        Map
}

func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Condition)
	}
	return fmt.Sprintf("%s: %s", e.Condition, e.Description)
}

// Errorf builds an *Error with a formatted description.
func Errorf(cond ErrCond, format string, args ...any) *Error {
	return &Error{Condition: cond, Description: fmt.Sprintf(format, args...)}
}

// Scope says which performative carries a protocol error.
type Scope uint8

// Scopes of a ProtocolError.
const (
	ScopeConnection Scope = iota // close
	ScopeSession                 // end
	ScopeLink                    // detach
)

func (s Scope) String() string {
	switch s {
	case ScopeConnection:
		return "connection"
	case ScopeSession:
		return "session"
	case ScopeLink:
		return "link"
	}
	return "unknown"
}

// ProtocolError is returned by frame handlers: Err goes on the wire in the
// performative Scope selects; Cause is logged and never sent to the peer.
type ProtocolError struct {
	Scope Scope
	Err   *Error
	Cause error
}

func (e *ProtocolError) Error() string {
	if e.Cause == nil {
		return fmt.Sprintf("%s error: %v", e.Scope, e.Err)
	}
	return fmt.Sprintf("%s error: %v (cause: %v)", e.Scope, e.Err, e.Cause)
}

func (e *ProtocolError) Unwrap() error { return e.Cause }

// Sentinel decode errors. Decoders wrap them with %w and context.
var (
	// ErrTruncated reports input that ends before the encoded value does.
	ErrTruncated = errors.New("amqp10: truncated input")
	// ErrInvalidType reports a constructor that is unknown or not allowed where it appears.
	ErrInvalidType = errors.New("amqp10: invalid type")
	// ErrTooDeep reports nesting beyond MaxDepth.
	ErrTooDeep = errors.New("amqp10: nesting too deep")
	// ErrInvalidField reports a value that decodes but is not allowed (wrong type for a field, missing mandatory field).
	ErrInvalidField = errors.New("amqp10: invalid field")
	// ErrSectionOrder reports message sections out of order, duplicated, or unknown.
	ErrSectionOrder = errors.New("amqp10: bad message section order")
	// ErrTooManySections reports a message of more than MaxSections sections.
	ErrTooManySections = errors.New("amqp10: too many message sections")
	// ErrReservedAnnotation reports a message-annotations key that is not a symbol starting with "x-".
	ErrReservedAnnotation = errors.New("amqp10: reserved message-annotation key")
)

// MaxDepth bounds the nesting of compound values the decoder accepts.
const MaxDepth = 64
