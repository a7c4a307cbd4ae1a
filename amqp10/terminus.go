package amqp10

// Descriptor codes of delivery states, outcomes and termini (part 3).
const (
	DescReceived              uint64 = 0x23
	DescAccepted              uint64 = 0x24
	DescRejected              uint64 = 0x25
	DescReleased              uint64 = 0x26
	DescModified              uint64 = 0x27
	DescSource                uint64 = 0x28
	DescTarget                uint64 = 0x29
	DescDeleteOnClose         uint64 = 0x2b
	DescDeleteOnNoLinks       uint64 = 0x2c
	DescDeleteOnNoMessages    uint64 = 0x2d
	DescDeleteOnNoLinksOrMsgs uint64 = 0x2e
	DescCoordinator           uint64 = 0x30 // transactions (0x00000000:0x00000030)
	DescDeclared              uint64 = 0x33
	DescTransactionalState    uint64 = 0x34
)

// StateKind says which delivery state a DeliveryState holds.
type StateKind uint8

// Delivery state kinds. StateNone means the field was absent (null).
const (
	StateNone StateKind = iota
	StateReceived
	StateAccepted
	StateRejected
	StateReleased
	StateModified
	StateDeclared
	StateTransactional
	StateUnknown // a described value with another descriptor
)

// DeliveryState is a delivery-state or outcome held by value, so the
// Transfer and Disposition decoders need no allocation for the common
// outcomes.
//
//	received:  section-number uint, section-offset ulong
//	accepted:  (empty list)
//	rejected:  error
//	released:  (empty list)
//	modified:  delivery-failed boolean, undeliverable-here boolean, message-annotations fields
type DeliveryState struct {
	Kind              StateKind
	SectionNumber     uint32
	SectionOffset     uint64
	Error             *Error
	DeliveryFailed    bool
	UndeliverableHere bool
	Annotations       Map
	// UnknownDescriptor holds the descriptor when Kind is StateUnknown.
	UnknownDescriptor any
}

// Source (section 3.5.3).
//
//	<type name="source" class="composite" source="list" provides="source">
//	    <descriptor name="amqp:source:list" code="0x00000000:0x00000028"/>
//	    <field name="address" type="*" requires="address"/>
//	    <field name="durable" type="terminus-durability" default="none"/>
//	    <field name="expiry-policy" type="terminus-expiry-policy" default="session-end"/>
//	    <field name="timeout" type="seconds" default="0"/>
//	    <field name="dynamic" type="boolean" default="false"/>
//	    <field name="dynamic-node-properties" type="node-properties"/>
//	    <field name="distribution-mode" type="symbol" requires="distribution-mode"/>
//	    <field name="filter" type="filter-set"/>
//	    <field name="default-outcome" type="*" requires="outcome"/>
//	    <field name="outcomes" type="symbol" multiple="true"/>
//	    <field name="capabilities" type="symbol" multiple="true"/>
//	</type>
//
// Address is decoded from a string or symbol; HasAddress is false when it was null.
type Source struct {
	Address               string
	HasAddress            bool
	Durable               uint32
	ExpiryPolicy          Symbol // "" means absent (default session-end)
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties Map
	DistributionMode      Symbol
	Filter                Map
	DefaultOutcome        *DeliveryState
	Outcomes              []Symbol
	Capabilities          []Symbol
}

// Target (section 3.5.4).
//
//	<type name="target" class="composite" source="list" provides="target">
//	    <descriptor name="amqp:target:list" code="0x00000000:0x00000029"/>
//	    <field name="address" type="*" requires="address"/>
//	    <field name="durable" type="terminus-durability" default="none"/>
//	    <field name="expiry-policy" type="terminus-expiry-policy" default="session-end"/>
//	    <field name="timeout" type="seconds" default="0"/>
//	    <field name="dynamic" type="boolean" default="false"/>
//	    <field name="dynamic-node-properties" type="node-properties"/>
//	    <field name="capabilities" type="symbol" multiple="true"/>
//	</type>
//
// When an attach carries a coordinator (transactions) instead of a target,
// Unmarshal sets Coordinator and leaves the rest zero.
type Target struct {
	Address               string
	HasAddress            bool
	Durable               uint32
	ExpiryPolicy          Symbol
	Timeout               uint32
	Dynamic               bool
	DynamicNodeProperties Map
	Capabilities          []Symbol
	Coordinator           bool
}
