package amqp10

import (
	"fmt"
	"math"
)

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

// ---- described-list encoding helpers ----

// listWriter builds a described list in place: it reserves a list32 header,
// tracks the end of the last non-null field so trailing nulls can be
// dropped, and shrinks to list0/list8 when the result fits.
type listWriter struct {
	start   int // offset of the list constructor
	n       int // fields written
	lastN   int // fields up to the last non-null one
	lastEnd int // offset after the last non-null field
}

func beginList(b []byte, code uint64) ([]byte, listWriter) {
	b = AppendDescriptor(b, code)
	start := len(b)
	b = append(b, TypeList32, 0, 0, 0, 0, 0, 0, 0, 0)
	return b, listWriter{start: start, lastEnd: len(b)}
}

// mark records that a non-null field has just been appended.
func (w *listWriter) mark(b []byte) []byte {
	w.n++
	w.lastN, w.lastEnd = w.n, len(b)
	return b
}

func (w *listWriter) null(b []byte) []byte {
	w.n++
	return append(b, TypeNull)
}

func (w *listWriter) end(b []byte) []byte {
	return finishCompound(b[:w.lastEnd], w.start, w.lastN, TypeList8, TypeList32)
}

func (w *listWriter) uint(b []byte, v uint32, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendUint(b, v))
}

func (w *listWriter) ulong(b []byte, v uint64, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendULong(b, v))
}

func (w *listWriter) ushort(b []byte, v uint16, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendUshort(b, v))
}

func (w *listWriter) ubyte(b []byte, v uint8, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendUbyte(b, v))
}

// boolean writes v, or null when !present.
func (w *listWriter) boolean(b []byte, v, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendBool(b, v))
}

func (w *listWriter) str(b []byte, v string, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendString(b, v))
}

func (w *listWriter) sym(b []byte, v Symbol, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendSymbol(b, v))
}

func (w *listWriter) binary(b []byte, v []byte, present bool) []byte {
	if !present {
		return w.null(b)
	}
	return w.mark(AppendBinary(b, v))
}

func (w *listWriter) symbols(b []byte, v []Symbol) []byte {
	if len(v) == 0 {
		return w.null(b)
	}
	return w.mark(AppendSymbols(b, v))
}

// fields writes a map field; nil or empty maps, and maps holding Go values
// that cannot be encoded, are written as null.
func (w *listWriter) fields(b []byte, m Map) []byte {
	if m == nil {
		return w.null(b)
	}
	nb, err := AppendMap(b, m)
	if err != nil {
		return w.null(b)
	}
	return w.mark(nb)
}

func (w *listWriter) err(b []byte, e *Error) []byte {
	if e == nil {
		return w.null(b)
	}
	return w.mark(appendError(b, e))
}

func (w *listWriter) state(b []byte, s *DeliveryState) []byte {
	if s.Kind == StateNone {
		return w.null(b)
	}
	return w.mark(appendDeliveryState(b, s))
}

func appendError(b []byte, e *Error) []byte {
	if e == nil {
		return append(b, TypeNull)
	}
	b, w := beginList(b, DescError)
	b = w.sym(b, Symbol(e.Condition), true)
	b = w.str(b, e.Description, e.Description != "")
	b = w.fields(b, e.Info)
	return w.end(b)
}

// ---- performative encoders ----

// Append encodes the open performative.
func (p *Open) Append(b []byte) []byte {
	b, w := beginList(b, DescOpen)
	b = w.str(b, p.ContainerID, true)
	b = w.str(b, p.Hostname, p.Hostname != "")
	b = w.uint(b, p.MaxFrameSize, p.MaxFrameSize != math.MaxUint32)
	b = w.ushort(b, p.ChannelMax, p.ChannelMax != math.MaxUint16)
	b = w.uint(b, p.IdleTimeOut, p.IdleTimeOut != 0)
	b = w.symbols(b, p.OutgoingLocales)
	b = w.symbols(b, p.IncomingLocales)
	b = w.symbols(b, p.OfferedCapabilities)
	b = w.symbols(b, p.DesiredCapabilities)
	b = w.fields(b, p.Properties)
	return w.end(b)
}

// Append encodes the begin performative.
func (p *Begin) Append(b []byte) []byte {
	b, w := beginList(b, DescBegin)
	b = w.ushort(b, p.RemoteChannel, p.HasRemoteChannel)
	b = w.uint(b, p.NextOutgoingID, true)
	b = w.uint(b, p.IncomingWindow, true)
	b = w.uint(b, p.OutgoingWindow, true)
	b = w.uint(b, p.HandleMax, p.HandleMax != math.MaxUint32)
	b = w.symbols(b, p.OfferedCapabilities)
	b = w.symbols(b, p.DesiredCapabilities)
	b = w.fields(b, p.Properties)
	return w.end(b)
}

// Append encodes the attach performative.
func (p *Attach) Append(b []byte) []byte {
	b, w := beginList(b, DescAttach)
	b = w.str(b, p.Name, true)
	b = w.uint(b, p.Handle, true)
	b = w.boolean(b, bool(p.Role), true)
	b = w.ubyte(b, uint8(p.SndSettleMode), p.HasSndSettleMode)
	b = w.ubyte(b, uint8(p.RcvSettleMode), p.HasRcvSettleMode)
	if p.Source == nil {
		b = w.null(b)
	} else {
		b = w.mark(appendSource(b, p.Source))
	}
	if p.Target == nil {
		b = w.null(b)
	} else {
		b = w.mark(appendTarget(b, p.Target))
	}
	b = w.fields(b, p.Unsettled)
	b = w.boolean(b, p.IncompleteUnsettled, p.IncompleteUnsettled)
	b = w.uint(b, p.InitialDeliveryCount, p.HasInitialDeliveryCount)
	b = w.ulong(b, p.MaxMessageSize, p.MaxMessageSize != 0)
	b = w.symbols(b, p.OfferedCapabilities)
	b = w.symbols(b, p.DesiredCapabilities)
	b = w.fields(b, p.Properties)
	return w.end(b)
}

// Append encodes the flow performative.
func (p *Flow) Append(b []byte) []byte {
	b, w := beginList(b, DescFlow)
	b = w.uint(b, p.NextIncomingID, p.HasNextIncomingID)
	b = w.uint(b, p.IncomingWindow, true)
	b = w.uint(b, p.NextOutgoingID, true)
	b = w.uint(b, p.OutgoingWindow, true)
	b = w.uint(b, p.Handle, p.HasHandle)
	b = w.uint(b, p.DeliveryCount, p.HasDeliveryCount)
	b = w.uint(b, p.LinkCredit, p.HasLinkCredit)
	b = w.uint(b, p.Available, p.HasAvailable)
	b = w.boolean(b, p.Drain, p.Drain)
	b = w.boolean(b, p.Echo, p.Echo)
	b = w.fields(b, p.Properties)
	return w.end(b)
}

// Append encodes the transfer performative.
func (p *Transfer) Append(b []byte) []byte {
	b, w := beginList(b, DescTransfer)
	b = w.uint(b, p.Handle, true)
	b = w.uint(b, p.DeliveryID, p.HasDeliveryID)
	b = w.binary(b, p.DeliveryTag, p.DeliveryTag != nil)
	b = w.uint(b, p.MessageFormat, p.HasMessageFormat)
	b = w.boolean(b, p.Settled, p.HasSettled)
	b = w.boolean(b, p.More, p.More)
	b = w.ubyte(b, uint8(p.RcvSettleMode), p.HasRcvSettleMode)
	b = w.state(b, &p.State)
	b = w.boolean(b, p.Resume, p.Resume)
	b = w.boolean(b, p.Aborted, p.Aborted)
	b = w.boolean(b, p.Batchable, p.Batchable)
	return w.end(b)
}

// Append encodes the disposition performative.
func (p *Disposition) Append(b []byte) []byte {
	b, w := beginList(b, DescDisposition)
	b = w.boolean(b, bool(p.Role), true)
	b = w.uint(b, p.First, true)
	b = w.uint(b, p.Last, p.HasLast)
	b = w.boolean(b, p.Settled, p.Settled)
	b = w.state(b, &p.State)
	b = w.boolean(b, p.Batchable, p.Batchable)
	return w.end(b)
}

// Append encodes the detach performative.
func (p *Detach) Append(b []byte) []byte {
	b, w := beginList(b, DescDetach)
	b = w.uint(b, p.Handle, true)
	b = w.boolean(b, p.Closed, p.Closed)
	b = w.err(b, p.Error)
	return w.end(b)
}

// Append encodes the end performative.
func (p *End) Append(b []byte) []byte {
	b, w := beginList(b, DescEnd)
	b = w.err(b, p.Error)
	return w.end(b)
}

// Append encodes the close performative.
func (p *Close) Append(b []byte) []byte {
	b, w := beginList(b, DescClose)
	b = w.err(b, p.Error)
	return w.end(b)
}

// ---- performative decoders ----

// ParsePerformative decodes a frame body (after the extended header) into a
// newly allocated performative (one of *Open, *Begin, *Attach, *Flow,
// *Transfer, *Disposition, *Detach, *End, *Close, or a SASL frame) and
// returns the bytes after it (the transfer payload). Unknown descriptors
// return an error wrapping ErrInvalidType; wrong field types or missing
// mandatory fields wrap ErrInvalidField.
func ParsePerformative(body []byte) (Performative, []byte, error) {
	code, err := PeekDescriptor(body)
	if err != nil {
		return nil, body, err
	}
	var p interface {
		Performative
		Unmarshal([]byte) ([]byte, error)
	}
	switch code {
	case DescOpen:
		p = &Open{}
	case DescBegin:
		p = &Begin{}
	case DescAttach:
		p = &Attach{}
	case DescFlow:
		p = &Flow{}
	case DescTransfer:
		p = &Transfer{}
	case DescDisposition:
		p = &Disposition{}
	case DescDetach:
		p = &Detach{}
	case DescEnd:
		p = &End{}
	case DescClose:
		p = &Close{}
	case DescSASLMechanisms:
		p = &SASLMechanisms{}
	case DescSASLInit:
		p = &SASLInit{}
	case DescSASLChallenge:
		p = &SASLChallenge{}
	case DescSASLResponse:
		p = &SASLResponse{}
	case DescSASLOutcome:
		p = &SASLOutcome{}
	default:
		return nil, body, fmt.Errorf("%w: descriptor 0x%x is not a frame body", ErrInvalidType, code)
	}
	rest, err := p.Unmarshal(body)
	if err != nil {
		return nil, body, err
	}
	return p, rest, nil
}

// Unmarshal decodes an open performative into p (restoring the defaults of
// absent fields) and returns the bytes after it.
func (p *Open) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescOpen, "open")
	*p = Open{MaxFrameSize: math.MaxUint32, ChannelMax: math.MaxUint16}
	f.mandatory(f.str("container-id", &p.ContainerID))
	f.str("hostname", &p.Hostname)
	f.uint("max-frame-size", &p.MaxFrameSize)
	f.ushort("channel-max", &p.ChannelMax)
	f.uint("idle-time-out", &p.IdleTimeOut)
	f.symbols("outgoing-locales", &p.OutgoingLocales)
	f.symbols("incoming-locales", &p.IncomingLocales)
	f.symbols("offered-capabilities", &p.OfferedCapabilities)
	f.symbols("desired-capabilities", &p.DesiredCapabilities)
	f.fields("properties", &p.Properties)
	return f.end(body, rest)
}

// Unmarshal decodes a begin performative into p (restoring the default
// HandleMax) and returns the bytes after it.
func (p *Begin) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescBegin, "begin")
	*p = Begin{HandleMax: math.MaxUint32}
	p.HasRemoteChannel = f.ushort("remote-channel", &p.RemoteChannel)
	f.mandatory(f.uint("next-outgoing-id", &p.NextOutgoingID))
	f.mandatory(f.uint("incoming-window", &p.IncomingWindow))
	f.mandatory(f.uint("outgoing-window", &p.OutgoingWindow))
	f.uint("handle-max", &p.HandleMax)
	f.symbols("offered-capabilities", &p.OfferedCapabilities)
	f.symbols("desired-capabilities", &p.DesiredCapabilities)
	f.fields("properties", &p.Properties)
	return f.end(body, rest)
}

// Unmarshal decodes an attach performative into p and returns the bytes after it.
func (p *Attach) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescAttach, "attach")
	*p = Attach{}
	f.mandatory(f.str("name", &p.Name))
	f.mandatory(f.uint("handle", &p.Handle))
	f.mandatory(f.boolean("role", (*bool)(&p.Role)))
	p.HasSndSettleMode = f.enum("snd-settle-mode", (*uint8)(&p.SndSettleMode), uint8(SndMixed))
	p.HasRcvSettleMode = f.enum("rcv-settle-mode", (*uint8)(&p.RcvSettleMode), uint8(RcvSecond))
	composite(&f, "source", &p.Source)
	composite(&f, "target", &p.Target)
	f.fields("unsettled", &p.Unsettled)
	f.boolean("incomplete-unsettled", &p.IncompleteUnsettled)
	p.HasInitialDeliveryCount = f.uint("initial-delivery-count", &p.InitialDeliveryCount)
	f.ulong("max-message-size", &p.MaxMessageSize)
	f.symbols("offered-capabilities", &p.OfferedCapabilities)
	f.symbols("desired-capabilities", &p.DesiredCapabilities)
	f.fields("properties", &p.Properties)
	return f.end(body, rest)
}

// Unmarshal decodes a flow performative into p (which the caller owns and
// may reuse) and returns the bytes after it. It allocates nothing unless
// properties are present.
func (p *Flow) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescFlow, "flow")
	*p = Flow{}
	p.HasNextIncomingID = f.uint("next-incoming-id", &p.NextIncomingID)
	f.mandatory(f.uint("incoming-window", &p.IncomingWindow))
	f.mandatory(f.uint("next-outgoing-id", &p.NextOutgoingID))
	f.mandatory(f.uint("outgoing-window", &p.OutgoingWindow))
	p.HasHandle = f.uint("handle", &p.Handle)
	p.HasDeliveryCount = f.uint("delivery-count", &p.DeliveryCount)
	p.HasLinkCredit = f.uint("link-credit", &p.LinkCredit)
	p.HasAvailable = f.uint("available", &p.Available)
	f.boolean("drain", &p.Drain)
	f.boolean("echo", &p.Echo)
	f.fields("properties", &p.Properties)
	return f.end(body, rest)
}

// Unmarshal decodes a transfer body into t (which the caller owns and may
// reuse) and returns the payload that follows. It allocates nothing for the
// common outcomes; DeliveryTag aliases body.
func (t *Transfer) Unmarshal(body []byte) (payload []byte, err error) {
	f, rest := openDescribed(body, DescTransfer, "transfer")
	*t = Transfer{}
	f.mandatory(f.uint("handle", &t.Handle))
	t.HasDeliveryID = f.uint("delivery-id", &t.DeliveryID)
	f.binary("delivery-tag", &t.DeliveryTag)
	t.HasMessageFormat = f.uint("message-format", &t.MessageFormat)
	t.HasSettled = f.boolean("settled", &t.Settled)
	f.boolean("more", &t.More)
	t.HasRcvSettleMode = f.enum("rcv-settle-mode", (*uint8)(&t.RcvSettleMode), uint8(RcvSecond))
	f.state("state", &t.State)
	f.boolean("resume", &t.Resume)
	f.boolean("aborted", &t.Aborted)
	f.boolean("batchable", &t.Batchable)
	return f.end(body, rest)
}

// Unmarshal decodes a disposition performative into p (which the caller
// owns and may reuse) and returns the bytes after it. It allocates nothing
// for the common outcomes (no error, no annotations).
func (p *Disposition) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescDisposition, "disposition")
	*p = Disposition{}
	f.mandatory(f.boolean("role", (*bool)(&p.Role)))
	f.mandatory(f.uint("first", &p.First))
	p.HasLast = f.uint("last", &p.Last)
	f.boolean("settled", &p.Settled)
	f.state("state", &p.State)
	f.boolean("batchable", &p.Batchable)
	return f.end(body, rest)
}

// Unmarshal decodes a detach performative into p and returns the bytes after it.
func (p *Detach) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescDetach, "detach")
	*p = Detach{}
	f.mandatory(f.uint("handle", &p.Handle))
	f.boolean("closed", &p.Closed)
	composite(&f, "error", &p.Error)
	return f.end(body, rest)
}

// Unmarshal decodes an end performative into p and returns the bytes after it.
func (p *End) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescEnd, "end")
	*p = End{}
	composite(&f, "error", &p.Error)
	return f.end(body, rest)
}

// Unmarshal decodes a close performative into p and returns the bytes after it.
func (p *Close) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescClose, "close")
	*p = Close{}
	composite(&f, "error", &p.Error)
	return f.end(body, rest)
}

// soft records a field that has just been appended with an explicit value;
// when isDefault it is dropped if no later field is present.
func (w *listWriter) soft(b []byte, isDefault bool) []byte {
	if isDefault {
		w.n++
		return b
	}
	return w.mark(b)
}
