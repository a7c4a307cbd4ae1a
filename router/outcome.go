package router

import (
	"fmt"

	"github.com/epitaph-mq/epitaph/value"
)

// Outcomes are the router's own: each front end maps them onto its
// protocol (AMQP 1.0: the accepted, rejected and released delivery states;
// AMQP 0.9.1: basic.ack, basic.nack and basic.return), so the router names
// no protocol's types.

// OutcomeKind is what the router did with a published (or dead-lettered)
// message.
type OutcomeKind uint8

// Outcome kinds. The zero value is no outcome (the publish failed with an
// error before routing).
const (
	// Accepted: at least one queue took the message.
	Accepted OutcomeKind = iota + 1
	// Rejected: a queue refused it (reject-publish overflow) or the store
	// failed; Outcome.Error says why.
	Rejected
	// Released: it was routed to no queue.
	Released
)

// String returns the kind's name.
func (k OutcomeKind) String() string {
	switch k {
	case Accepted:
		return "accepted"
	case Rejected:
		return "rejected"
	case Released:
		return "released"
	}
	return fmt.Sprintf("OutcomeKind(%d)", uint8(k))
}

// Outcome is the publisher's outcome of one message.
type Outcome struct {
	Kind  OutcomeKind
	Error *Error // set with Rejected
}

// Error is a refusal with a condition, as RabbitMQ words it. The
// conditions are AMQP's symbolic names (RabbitMQ's own vocabulary for
// them, whatever the client's protocol); a front end maps them onto its
// protocol's codes.
type Error struct {
	Condition   string
	Description string
	Info        value.Map
}

func (e *Error) Error() string { return e.Condition + ": " + e.Description }

// Error conditions the router produces.
const (
	CondResourceLimitExceeded = "amqp:resource-limit-exceeded"
	CondInternalError         = "amqp:internal-error"
)

// maxLenError is RabbitMQ 4.3's rejected error for reject-publish overflow.
func maxLenError(queue string) *Error {
	return &Error{
		Condition:   CondResourceLimitExceeded,
		Description: fmt.Sprintf("queue '%s' exceeded maximum length", queue),
		Info: value.Map{
			{Key: value.Symbol("queue"), Value: queue},
			{Key: value.Symbol("reason"), Value: value.Symbol("maxlen")},
		},
	}
}

// SettleKind is how a consumer settled a delivery.
type SettleKind uint8

// Settlement kinds.
const (
	// SettleAccept: the consumer is done with the message; it is removed.
	SettleAccept SettleKind = iota + 1
	// SettleReject: the message is dead-lettered with reason rejected
	// (delivery-count +1).
	SettleReject
	// SettleRelease: the message returns to the queue (acquired-count +1).
	SettleRelease
	// SettleModify: the message returns to the queue, or with
	// UndeliverableHere is dead-lettered; see Subscription.Settle.
	SettleModify
)

// String returns the kind's name.
func (k SettleKind) String() string {
	switch k {
	case SettleAccept:
		return "accept"
	case SettleReject:
		return "reject"
	case SettleRelease:
		return "release"
	case SettleModify:
		return "modify"
	}
	return fmt.Sprintf("SettleKind(%d)", uint8(k))
}

// Settlement is how a consumer settled a delivery.
type Settlement struct {
	Kind SettleKind
	// DeliveryFailed (SettleModify): the delivery-count goes up by one.
	DeliveryFailed bool
	// UndeliverableHere (SettleModify): dead-letter rather than requeue.
	UndeliverableHere bool
	// Annotations (SettleModify) are merged into a quorum queue's message.
	Annotations value.Map
	// Error (SettleReject) is the consumer's reason; it is recorded with the
	// death (epitaph's x-last-death-error-* annotations).
	Error *Error
}
