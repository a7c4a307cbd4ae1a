package router

// CONTRACT STUBS: the API the link layer and the root package are written
// against. Implement each in its proper file and delete it from here.

import (
	"errors"
	"log/slog"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

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

// Options configure a Broker. Zero values mean defaults.
type Options struct {
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// DeadLetterer receives messages that die; nil drops them.
	DeadLetterer DeadLetterer
	// AutoCreateQueues makes Resolve of a bare address declare a classic queue.
	AutoCreateQueues bool
}

// DeadLetterer takes messages that died in src, in the order they died. It
// is called without any queue lock held.
type DeadLetterer interface {
	DeadLetter(src *Queue, dead []Dead)
}

// Dead is one message leaving a queue to be dead-lettered.
type Dead struct {
	Msg    *Message // a copy carrying the queue's delivery count and merged annotations
	Reason Reason
	// Error is the consumer's rejected error, if any (issue 3's x-last-death-error-*).
	Error *amqp10.Error
}

// Message is a message inside the broker: the wire message plus the state
// RabbitMQ keeps in its message container. Immutable once enqueued.
type Message struct {
	Wire *amqp10.Message
	// Header is the header to deliver (from the publisher's, or rewritten by dead-lettering).
	Header amqp10.Header
	// Exchange the message was published to ("" is the default exchange).
	Exchange string
	// RoutingKeys: the primary key first, then the x-cc keys.
	RoutingKeys []string
	// DeliveryCount carried in from earlier queues (dead-lettering).
	DeliveryCount uint32
	// Anns are broker-set message annotations (x-opt-deaths, x-*-death-*,
	// modified-outcome annotations); on delivery they override the
	// publisher's annotations with the same keys.
	Anns amqp10.Map
}

// NewMessage wraps a parsed wire message for publishing.
func NewMessage(w *amqp10.Message) *Message { panic("unimplemented") }

// Delivery is a message handed to a consumer.
type Delivery struct {
	// Tag identifies the delivery within its Subscription for Settle.
	Tag uint64
	Msg *Message
	// Header is the header to put on the wire (delivery-count, first-acquirer set).
	Header amqp10.Header
	// Annotations go first in the message-annotations section: x-exchange,
	// x-routing-key, quorum x-delivery-count/x-acquired-count, then Msg.Anns.
	Annotations amqp10.Map
}

// Consumer receives deliveries from a queue. Both methods are called with the
// queue's lock held: they must not block or call back into the queue.
type Consumer interface {
	Deliver(d Delivery)
	// Drained reports that a drain finished: the consumer's delivery-count is
	// now deliveryCount and its credit 0.
	Drained(deliveryCount uint32)
}

// ConsumerOptions configure a subscription.
type ConsumerOptions struct {
	// PreSettled deliveries are removed from the queue when handed over.
	PreSettled bool
	// Owner identifies the connection (for exclusive queues).
	Owner any
}

// Outcome is how a consumer settled a delivery.
type Outcome struct {
	Kind              amqp10.StateKind // StateAccepted, StateRejected, StateReleased, StateModified
	DeliveryFailed    bool
	UndeliverableHere bool
	Annotations       amqp10.Map
	Error             *amqp10.Error
}

// CancelReason says why a subscription ends; it decides the delivery-count
// effect on the unsettled deliveries that return to the queue.
type CancelReason uint8

// Cancel reasons.
const (
	CancelDetach         CancelReason = iota // link detached: acquired-count +1 only
	CancelConnectionLost                     // connection lost: delivery-count +1 as well
)

// QueueSpec declares a queue. Arguments hold x-arguments as AMQP values
// (int64/uint64/int32/... for numbers, string for strings, bool).
type QueueSpec struct {
	Name       string
	Type       QueueType // "" means classic
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Owner      any
	Arguments  amqp10.Map
}

// ExchangeSpec declares an exchange.
type ExchangeSpec struct {
	Name       string
	Type       string // direct, fanout, topic, headers
	Durable    bool
	AutoDelete bool
	Internal   bool
	Arguments  amqp10.Map // alternate-exchange
}

// Binding binds Source to a queue or (DestinationIsExchange) an exchange.
type Binding struct {
	Source                string
	Destination           string
	DestinationIsExchange bool
	Key                   string
	Arguments             amqp10.Map
}

// Broker is the root of the data model.
type Broker struct{}

// New returns a broker with the default vhost "/" and its standard exchanges.
func New(opts Options) *Broker { panic("unimplemented") }

// Close stops timers; further calls are no-ops.
func (b *Broker) Close() { panic("unimplemented") }

// VHost returns the named virtual host.
func (b *Broker) VHost(name string) (*VHost, bool) { panic("unimplemented") }

// AddVHost creates a vhost with the standard exchanges (idempotent).
func (b *Broker) AddVHost(name string) *VHost { panic("unimplemented") }

// Authenticate checks a user's password. With no users defined the default
// guest/guest user exists.
func (b *Broker) Authenticate(user, password string) bool { panic("unimplemented") }

// CanAccessVHost reports whether user may use vhost.
func (b *Broker) CanAccessVHost(user, vhost string) bool { panic("unimplemented") }

// LoadDefinitions applies a RabbitMQ definitions JSON document.
func (b *Broker) LoadDefinitions(data []byte) error { panic("unimplemented") }

// VHost is a virtual host.
type VHost struct{}

// Name returns the vhost name.
func (v *VHost) Name() string { panic("unimplemented") }

// DeclareQueue declares (or checks the equivalence of) a queue.
func (v *VHost) DeclareQueue(s QueueSpec) (q *Queue, created bool, err error) {
	panic("unimplemented")
}

// DeleteQueue deletes a queue and returns how many messages it held.
func (v *VHost) DeleteQueue(name string) (int, error) { panic("unimplemented") }

// DeleteExclusive deletes every exclusive queue owned by owner.
func (v *VHost) DeleteExclusive(owner any) { panic("unimplemented") }

// Queue looks a queue up.
func (v *VHost) Queue(name string) (*Queue, bool) { panic("unimplemented") }

// DeclareExchange declares (or checks) an exchange.
func (v *VHost) DeclareExchange(s ExchangeSpec) (created bool, err error) { panic("unimplemented") }

// HasExchange reports whether the exchange exists ("" is the default exchange).
func (v *VHost) HasExchange(name string) bool { panic("unimplemented") }

// Bind adds a binding.
func (v *VHost) Bind(b Binding) error { panic("unimplemented") }

// Publish routes m through exchange with m.RoutingKeys (set by the caller,
// x-cc included) and enqueues it. It returns the publisher's outcome:
// StateAccepted, StateReleased when it routed nowhere, or StateRejected with
// Error for reject-publish overflow. ErrNotFound when the exchange is missing.
func (v *VHost) Publish(exchange string, m *Message) (amqp10.DeliveryState, error) {
	panic("unimplemented")
}

// Queue is a classic or quorum queue.
type Queue struct{}

// Name returns the queue name.
func (q *Queue) Name() string { panic("unimplemented") }

// Len returns the number of ready messages.
func (q *Queue) Len() int { panic("unimplemented") }

// Subscribe adds a consumer.
func (q *Queue) Subscribe(c Consumer, opts ConsumerOptions) (*Subscription, error) {
	panic("unimplemented")
}

// Subscription is one consumer's attachment to a queue.
type Subscription struct{}

// Flow applies a flow frame's delivery-count and link-credit from the
// receiver; credit available to the queue is deliveryCount+linkCredit minus
// the deliveries already handed to the consumer.
func (s *Subscription) Flow(deliveryCount, linkCredit uint32, drain bool) { panic("unimplemented") }

// Settle applies a consumer's outcome to one delivery.
func (s *Subscription) Settle(tag uint64, o Outcome) error { panic("unimplemented") }

// Cancel ends the subscription; unsettled deliveries return to the queue.
func (s *Subscription) Cancel(reason CancelReason) { panic("unimplemented") }
