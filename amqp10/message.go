package amqp10

// Descriptor codes of the message sections (section 3.2).
const (
	DescHeader                uint64 = 0x70
	DescDeliveryAnnotations   uint64 = 0x71
	DescMessageAnnotations    uint64 = 0x72
	DescProperties            uint64 = 0x73
	DescApplicationProperties uint64 = 0x74
	DescData                  uint64 = 0x75
	DescAMQPSequence          uint64 = 0x76
	DescAMQPValue             uint64 = 0x77
	DescFooter                uint64 = 0x78
)

// Header is the message header section (section 3.2.1).
//
//	<field name="durable" type="boolean" default="false"/>
//	<field name="priority" type="ubyte" default="4"/>
//	<field name="ttl" type="milliseconds"/>
//	<field name="first-acquirer" type="boolean" default="false"/>
//	<field name="delivery-count" type="uint" default="0"/>
//
// Decoding restores Priority 4 when absent. HasTTL is false when ttl was absent.
type Header struct {
	Durable       bool
	Priority      uint8
	TTL           uint32
	HasTTL        bool
	FirstAcquirer bool
	DeliveryCount uint32
}

// Properties is the immutable properties section (section 3.2.4). Nil
// pointers and nil interface values are absent fields.
type Properties struct {
	MessageID          any // ulong, uuid, binary or string
	UserID             []byte
	To                 *string
	Subject            *string
	ReplyTo            *string
	CorrelationID      any
	ContentType        *Symbol
	ContentEncoding    *Symbol
	AbsoluteExpiryTime *Timestamp
	CreationTime       *Timestamp
	GroupID            *string
	GroupSequence      *uint32
	ReplyToGroupID     *string
}

// Message is a message held lazily: the sections the broker may rewrite
// (header, message annotations) are kept apart from the bare message, which
// stays the exact bytes the publisher sent. A Message is immutable once
// built and may be shared between queues and goroutines.
type Message struct {
	// Header is the decoded header; HasHeader is false when the publisher sent none.
	Header    Header
	HasHeader bool
	// DeliveryAnnotations is the raw delivery-annotations section (with its
	// descriptor), nil if absent. The broker does not forward it.
	DeliveryAnnotations []byte
	// Annotations is the raw message-annotations section (with its descriptor), nil if absent.
	Annotations []byte
	// Bare is the raw bare message: properties, application-properties and
	// body sections, exactly as received.
	Bare []byte
	// Footer is the raw footer section (with its descriptor), nil if absent.
	Footer []byte
}
