package router

import "github.com/epitaph-mq/epitaph/value"

// A message inside the broker is a Message (message.go): the bytes its
// publisher's protocol encoded, behind the Container interface, plus the
// protocol-neutral state the router keeps for it (header, exchange,
// routing keys, delivery count, broker annotations). This is RabbitMQ 4's
// message container (mc): routing, queues, dead-lettering, the store and
// telemetry read only the neutral state and the Container interface, and
// each protocol's front end converts a message on delivery, and only when
// the consumer speaks another protocol than the publisher.
//
// The AMQP 1.0 container is AMQP10 (amqp10.go); its store encoding is in
// amqp10_store.go. Those are the only router files that know AMQP 1.0.
// The AMQP 0-9-1 container is AMQP091 (amqp091.go, with its store
// encoding); the conversions between the two are amqp10_091.go, the one
// file that knows both.

// Protocol names the protocol a container holds a message in.
type Protocol uint8

// Protocols.
const (
	ProtocolAMQP10  Protocol = 1 // AMQP 1.0 (container AMQP10)
	ProtocolAMQP091 Protocol = 2 // AMQP 0-9-1 (container AMQP091)
)

// String returns the protocol's name.
func (p Protocol) String() string {
	switch p {
	case ProtocolAMQP10:
		return "amqp-1.0"
	case ProtocolAMQP091:
		return "amqp-0-9-1"
	}
	return "unknown"
}

// Container is a message as its publisher's protocol encoded it. It is
// immutable and may be shared between queues and goroutines. Its methods
// decode lazily: the hot path reads Message's fields, never these (the
// header is copied into Message.Header at publish).
type Container interface {
	// Protocol is the protocol the message was published with.
	Protocol() Protocol
	// Size is the size counted against x-max-length-bytes (AMQP 1.0: the
	// bare message and footer).
	Size() int
	// Header is the publisher's header in neutral form, with
	// DeliveryCount and FirstAcquirer zero (the broker sets those on
	// delivery); a priority the publisher did not set is 4.
	Header() Header
	// RoutingHeaders are the application's header values a headers
	// exchange matches (AMQP 1.0: application-properties; AMQP 0.9.1: the
	// headers table). Nil when there are none.
	RoutingHeaders() (value.Map, error)
	// XHeaders are the publisher's x- values that x-match all-with-x and
	// any-with-x also match (AMQP 1.0: message annotations; AMQP 0.9.1: the
	// x- entries of the headers table). Nil when there are none.
	XHeaders() (value.Map, error)
	// Properties are the standard properties, for telemetry and the
	// management plane; a front end type-asserts to its own container for
	// the rest.
	Properties() (Properties, error)
	// Body is the payload as the protocol encoded it (AMQP 1.0: the body
	// sections).
	Body() ([]byte, error)
}

// Header is a message's neutral header. On a Message, DeliveryCount and
// FirstAcquirer are zero; a Delivery's Header carries the values the
// consumer is to see. (Its fields are ordered for size: 12 bytes, which
// Message packs with its own DeliveryCount.)
type Header struct {
	Durable  bool
	Priority uint8
	// TTL is the message's own time to live in milliseconds, when HasTTL
	// (AMQP 1.0 ttl; AMQP 0.9.1 expiration).
	HasTTL        bool
	FirstAcquirer bool
	TTL           uint32
	DeliveryCount uint32
}

// Properties are the properties every protocol gives a message (AMQP 1.0
// properties, AMQP 0.9.1 basic properties). Absent ones are nil or "".
type Properties struct {
	MessageID       any // string, []byte, uint64 or value.UUID
	CorrelationID   any
	UserID          []byte
	ReplyTo         string
	ContentType     string
	ContentEncoding string
}
