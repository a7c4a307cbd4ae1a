package router

import "errors"

// Sentinel errors. Wrap with %w; the AMQP boundary maps them to conditions.
var (
	ErrNotFound           = errors.New("router: not found")           // amqp:not-found
	ErrPreconditionFailed = errors.New("router: precondition failed") // 409 / amqp:precondition-failed
	ErrInvalidArgument    = errors.New("router: invalid argument")    // 400 / amqp:invalid-field
	ErrAccessRefused      = errors.New("router: access refused")      // 403 (amq. prefix, default exchange)
	ErrResourceLocked     = errors.New("router: resource locked")     // exclusive queue of another connection
	ErrInvalidXCC         = errors.New("router: bad value for 'x-cc' message-annotation")
)

// Reason is why a message died (x-opt-deaths "reason").
type Reason string

// Dead-letter reasons.
const (
	ReasonRejected      Reason = "rejected"
	ReasonExpired       Reason = "expired"
	ReasonMaxLen        Reason = "maxlen"
	ReasonDeliveryLimit Reason = "delivery_limit"
)

// QueueType is classic or quorum.
type QueueType string

// Queue types.
const (
	Classic QueueType = "classic"
	Quorum  QueueType = "quorum"
)
