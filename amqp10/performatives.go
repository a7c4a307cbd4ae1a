package amqp10

// Descriptor codes of the performatives (section 2.7) and SASL frames (5.3.3).
const (
	DescOpen        uint64 = 0x10
	DescBegin       uint64 = 0x11
	DescAttach      uint64 = 0x12
	DescFlow        uint64 = 0x13
	DescTransfer    uint64 = 0x14
	DescDisposition uint64 = 0x15
	DescDetach      uint64 = 0x16
	DescEnd         uint64 = 0x17
	DescClose       uint64 = 0x18
	DescError       uint64 = 0x1d

	DescSASLMechanisms uint64 = 0x40
	DescSASLInit       uint64 = 0x41
	DescSASLChallenge  uint64 = 0x42
	DescSASLResponse   uint64 = 0x43
	DescSASLOutcome    uint64 = 0x44
)

// Role of a link endpoint: false is sender, true is receiver.
type Role bool

// Link roles.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

// SndSettleMode is the sender-settle-mode (section 2.8.2).
type SndSettleMode uint8

// Sender settle modes.
const (
	SndUnsettled SndSettleMode = 0
	SndSettled   SndSettleMode = 1
	SndMixed     SndSettleMode = 2
)

// RcvSettleMode is the receiver-settle-mode (section 2.8.3).
type RcvSettleMode uint8

// Receiver settle modes.
const (
	RcvFirst  RcvSettleMode = 0
	RcvSecond RcvSettleMode = 1
)

// Performative is implemented by every frame body.
type Performative interface {
	// Append appends the described-list encoding of the performative.
	Append(b []byte) []byte
	// Descriptor returns the performative's descriptor code.
	Descriptor() uint64
}

// Open (section 2.7.1).
//
//	<type name="open" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:open:list" code="0x00000000:0x00000010"/>
//	    <field name="container-id" type="string" mandatory="true"/>
//	    <field name="hostname" type="string"/>
//	    <field name="max-frame-size" type="uint" default="4294967295"/>
//	    <field name="channel-max" type="ushort" default="65535"/>
//	    <field name="idle-time-out" type="milliseconds"/>
//	    <field name="outgoing-locales" type="ietf-language-tag" multiple="true"/>
//	    <field name="incoming-locales" type="ietf-language-tag" multiple="true"/>
//	    <field name="offered-capabilities" type="symbol" multiple="true"/>
//	    <field name="desired-capabilities" type="symbol" multiple="true"/>
//	    <field name="properties" type="fields"/>
//	</type>
//
// Unmarshal restores the defaults of absent fields (MaxFrameSize
// 4294967295, ChannelMax 65535); IdleTimeOut 0 means none.
type Open struct {
	ContainerID         string
	Hostname            string
	MaxFrameSize        uint32
	ChannelMax          uint16
	IdleTimeOut         uint32
	OutgoingLocales     []Symbol
	IncomingLocales     []Symbol
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

// Begin (section 2.7.2).
//
//	<type name="begin" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:begin:list" code="0x00000000:0x00000011"/>
//	    <field name="remote-channel" type="ushort"/>
//	    <field name="next-outgoing-id" type="transfer-number" mandatory="true"/>
//	    <field name="incoming-window" type="uint" mandatory="true"/>
//	    <field name="outgoing-window" type="uint" mandatory="true"/>
//	    <field name="handle-max" type="handle" default="4294967295"/>
//	    <field name="offered-capabilities" type="symbol" multiple="true"/>
//	    <field name="desired-capabilities" type="symbol" multiple="true"/>
//	    <field name="properties" type="fields"/>
//	</type>
type Begin struct {
	RemoteChannel       uint16
	HasRemoteChannel    bool
	NextOutgoingID      uint32
	IncomingWindow      uint32
	OutgoingWindow      uint32
	HandleMax           uint32 // default 4294967295
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

// Attach (section 2.7.3).
//
//	<type name="attach" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:attach:list" code="0x00000000:0x00000012"/>
//	    <field name="name" type="string" mandatory="true"/>
//	    <field name="handle" type="handle" mandatory="true"/>
//	    <field name="role" type="role" mandatory="true"/>
//	    <field name="snd-settle-mode" type="sender-settle-mode" default="mixed"/>
//	    <field name="rcv-settle-mode" type="receiver-settle-mode" default="first"/>
//	    <field name="source" type="*" requires="source"/>
//	    <field name="target" type="*" requires="target"/>
//	    <field name="unsettled" type="map"/>
//	    <field name="incomplete-unsettled" type="boolean" default="false"/>
//	    <field name="initial-delivery-count" type="sequence-no"/>
//	    <field name="max-message-size" type="ulong"/>
//	    <field name="offered-capabilities" type="symbol" multiple="true"/>
//	    <field name="desired-capabilities" type="symbol" multiple="true"/>
//	    <field name="properties" type="fields"/>
//	</type>
//
// The Has* flags record whether the peer sent the field, so settle modes can
// be echoed exactly; Append omits fields whose Has* flag is false. A nil
// Source or Target is encoded as null. MaxMessageSize 0 means no limit.
type Attach struct {
	Name                    string
	Handle                  uint32
	Role                    Role
	SndSettleMode           SndSettleMode
	HasSndSettleMode        bool
	RcvSettleMode           RcvSettleMode
	HasRcvSettleMode        bool
	Source                  *Source
	Target                  *Target
	Unsettled               Map
	IncompleteUnsettled     bool
	InitialDeliveryCount    uint32
	HasInitialDeliveryCount bool
	MaxMessageSize          uint64
	OfferedCapabilities     []Symbol
	DesiredCapabilities     []Symbol
	Properties              Map
}

// Flow (section 2.7.4).
//
//	<type name="flow" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:flow:list" code="0x00000000:0x00000013"/>
//	    <field name="next-incoming-id" type="transfer-number"/>
//	    <field name="incoming-window" type="uint" mandatory="true"/>
//	    <field name="next-outgoing-id" type="transfer-number" mandatory="true"/>
//	    <field name="outgoing-window" type="uint" mandatory="true"/>
//	    <field name="handle" type="handle"/>
//	    <field name="delivery-count" type="sequence-no"/>
//	    <field name="link-credit" type="uint"/>
//	    <field name="available" type="uint"/>
//	    <field name="drain" type="boolean" default="false"/>
//	    <field name="echo" type="boolean" default="false"/>
//	    <field name="properties" type="fields"/>
//	</type>
type Flow struct {
	NextIncomingID    uint32
	HasNextIncomingID bool
	IncomingWindow    uint32
	NextOutgoingID    uint32
	OutgoingWindow    uint32
	Handle            uint32
	HasHandle         bool
	DeliveryCount     uint32
	HasDeliveryCount  bool
	LinkCredit        uint32
	HasLinkCredit     bool
	Available         uint32
	HasAvailable      bool
	Drain             bool
	Echo              bool
	Properties        Map
}

// Transfer (section 2.7.5).
//
//	<type name="transfer" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:transfer:list" code="0x00000000:0x00000014"/>
//	    <field name="handle" type="handle" mandatory="true"/>
//	    <field name="delivery-id" type="delivery-number"/>
//	    <field name="delivery-tag" type="delivery-tag"/>
//	    <field name="message-format" type="message-format"/>
//	    <field name="settled" type="boolean"/>
//	    <field name="more" type="boolean" default="false"/>
//	    <field name="rcv-settle-mode" type="receiver-settle-mode"/>
//	    <field name="state" type="*" requires="delivery-state"/>
//	    <field name="resume" type="boolean" default="false"/>
//	    <field name="aborted" type="boolean" default="false"/>
//	    <field name="batchable" type="boolean" default="false"/>
//	</type>
//
// Unmarshal makes DeliveryTag alias the input buffer (no copy).
type Transfer struct {
	Handle           uint32
	DeliveryID       uint32
	HasDeliveryID    bool
	DeliveryTag      []byte // nil when absent
	MessageFormat    uint32
	HasMessageFormat bool
	Settled          bool
	HasSettled       bool
	More             bool
	RcvSettleMode    RcvSettleMode
	HasRcvSettleMode bool
	State            DeliveryState
	Resume           bool
	Aborted          bool
	Batchable        bool
}

// Disposition (section 2.7.6).
//
//	<type name="disposition" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:disposition:list" code="0x00000000:0x00000015"/>
//	    <field name="role" type="role" mandatory="true"/>
//	    <field name="first" type="delivery-number" mandatory="true"/>
//	    <field name="last" type="delivery-number"/>
//	    <field name="settled" type="boolean" default="false"/>
//	    <field name="state" type="*" requires="delivery-state"/>
//	    <field name="batchable" type="boolean" default="false"/>
//	</type>
type Disposition struct {
	Role      Role
	First     uint32
	Last      uint32
	HasLast   bool
	Settled   bool
	State     DeliveryState
	Batchable bool
}

// Detach (section 2.7.7).
//
//	<type name="detach" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:detach:list" code="0x00000000:0x00000016"/>
//	    <field name="handle" type="handle" mandatory="true"/>
//	    <field name="closed" type="boolean" default="false"/>
//	    <field name="error" type="error"/>
//	</type>
type Detach struct {
	Handle uint32
	Closed bool
	Error  *Error
}

// End (section 2.7.8).
//
//	<type name="end" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:end:list" code="0x00000000:0x00000017"/>
//	    <field name="error" type="error"/>
//	</type>
type End struct {
	Error *Error
}

// Close (section 2.7.9).
//
//	<type name="close" class="composite" source="list" provides="frame">
//	    <descriptor name="amqp:close:list" code="0x00000000:0x00000018"/>
//	    <field name="error" type="error"/>
//	</type>
type Close struct {
	Error *Error
}

func (*Open) Descriptor() uint64        { return DescOpen }
func (*Begin) Descriptor() uint64       { return DescBegin }
func (*Attach) Descriptor() uint64      { return DescAttach }
func (*Flow) Descriptor() uint64        { return DescFlow }
func (*Transfer) Descriptor() uint64    { return DescTransfer }
func (*Disposition) Descriptor() uint64 { return DescDisposition }
func (*Detach) Descriptor() uint64      { return DescDetach }
func (*End) Descriptor() uint64         { return DescEnd }
func (*Close) Descriptor() uint64       { return DescClose }
