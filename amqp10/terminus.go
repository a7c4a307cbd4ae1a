package amqp10

import "fmt"

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

// appendDeliveryState appends the described outcome or state s (null for StateNone).
func appendDeliveryState(b []byte, s *DeliveryState) []byte {
	switch s.Kind {
	case StateNone:
		return append(b, TypeNull)
	case StateReceived:
		b, w := beginList(b, DescReceived)
		b = w.uint(b, s.SectionNumber, true)
		b = w.ulong(b, s.SectionOffset, true)
		return w.end(b)
	case StateAccepted:
		return append(AppendDescriptor(b, DescAccepted), TypeList0)
	case StateRejected:
		b, w := beginList(b, DescRejected)
		b = w.err(b, s.Error)
		return w.end(b)
	case StateReleased:
		return append(AppendDescriptor(b, DescReleased), TypeList0)
	case StateModified:
		b, w := beginList(b, DescModified)
		b = w.boolean(b, s.DeliveryFailed, s.DeliveryFailed)
		b = w.boolean(b, s.UndeliverableHere, s.UndeliverableHere)
		b = w.fields(b, s.Annotations)
		return w.end(b)
	case StateDeclared:
		return append(AppendDescriptor(b, DescDeclared), TypeList0)
	case StateTransactional:
		return append(AppendDescriptor(b, DescTransactionalState), TypeList0)
	}
	// StateUnknown: the descriptor with an empty list.
	b = append(b, TypeDescribed)
	switch d := s.UnknownDescriptor.(type) {
	case uint64:
		b = AppendULong(b, d)
	case Symbol:
		b = AppendSymbol(b, d)
	default:
		b = append(b, TypeNull)
	}
	return append(b, TypeList0)
}

// Append appends the described encoding of s (null for StateNone).
func (s *DeliveryState) Append(b []byte) []byte { return appendDeliveryState(b, s) }

// Unmarshal decodes a delivery state or outcome (with its descriptor) into
// s and returns the bytes after it; null gives StateNone.
func (s *DeliveryState) Unmarshal(b []byte) (rest []byte, err error) { return readDeliveryState(b, s) }

// readDeliveryState decodes a delivery state or outcome (null gives StateNone).
func readDeliveryState(b []byte, st *DeliveryState) ([]byte, error) {
	*st = DeliveryState{}
	if len(b) == 0 {
		return b, errTrunc("delivery-state")
	}
	if b[0] == TypeNull {
		return b[1:], nil
	}
	code, rest, err := readDescriptor(b)
	if err != nil {
		return b, err
	}
	var f fieldReader
	switch code {
	case DescReceived:
		st.Kind = StateReceived
		f, rest = openList(rest, "received")
		f.mandatory(f.uint("section-number", &st.SectionNumber))
		f.mandatory(f.ulong("section-offset", &st.SectionOffset))
	case DescAccepted:
		st.Kind = StateAccepted
		f, rest = openList(rest, "accepted")
	case DescReleased:
		st.Kind = StateReleased
		f, rest = openList(rest, "released")
	case DescRejected:
		st.Kind = StateRejected
		f, rest = openList(rest, "rejected")
		composite(&f, "error", &st.Error)
	case DescModified:
		st.Kind = StateModified
		f, rest = openList(rest, "modified")
		f.boolean("delivery-failed", &st.DeliveryFailed)
		f.boolean("undeliverable-here", &st.UndeliverableHere)
		f.fields("message-annotations", &st.Annotations)
	case DescDeclared, DescTransactionalState:
		st.Kind = StateDeclared
		if code == DescTransactionalState {
			st.Kind = StateTransactional
		}
		rest, err = skipValue(rest, 1)
		return rest, err
	default:
		st.Kind = StateUnknown
		if code == descUnknown {
			// Keep the descriptor as decoded.
			d, _, derr := ReadValue(b[1:])
			if derr != nil {
				return b, derr
			}
			st.UnknownDescriptor = d
		} else {
			st.UnknownDescriptor = code
		}
		rest, err = skipValue(rest, 1)
		return rest, err
	}
	return f.end(b, rest)
}

// appendSource appends s as a described source list (null when nil).
func appendSource(b []byte, s *Source) []byte {
	if s == nil {
		return append(b, TypeNull)
	}
	b, w := beginList(b, DescSource)
	b = w.str(b, s.Address, s.HasAddress)
	b = w.uint(b, s.Durable, s.Durable != 0)
	b = w.sym(b, s.ExpiryPolicy, s.ExpiryPolicy != "")
	b = w.uint(b, s.Timeout, s.Timeout != 0)
	b = w.boolean(b, s.Dynamic, s.Dynamic)
	b = w.fields(b, s.DynamicNodeProperties)
	b = w.sym(b, s.DistributionMode, s.DistributionMode != "")
	b = w.fields(b, s.Filter)
	if s.DefaultOutcome == nil || s.DefaultOutcome.Kind == StateNone {
		b = w.null(b)
	} else {
		b = w.mark(appendDeliveryState(b, s.DefaultOutcome))
	}
	b = w.symbols(b, s.Outcomes)
	b = w.symbols(b, s.Capabilities)
	return w.end(b)
}

// appendTarget appends t as a described target list, or a coordinator
// when t.Coordinator is set (null when nil).
func appendTarget(b []byte, t *Target) []byte {
	if t == nil {
		return append(b, TypeNull)
	}
	if t.Coordinator {
		b, w := beginList(b, DescCoordinator)
		b = w.symbols(b, t.Capabilities)
		return w.end(b)
	}
	b, w := beginList(b, DescTarget)
	b = w.str(b, t.Address, t.HasAddress)
	b = w.uint(b, t.Durable, t.Durable != 0)
	b = w.sym(b, t.ExpiryPolicy, t.ExpiryPolicy != "")
	b = w.uint(b, t.Timeout, t.Timeout != 0)
	b = w.boolean(b, t.Dynamic, t.Dynamic)
	b = w.fields(b, t.DynamicNodeProperties)
	b = w.symbols(b, t.Capabilities)
	return w.end(b)
}

// Append appends the described encoding of s (null when s is nil).
func (s *Source) Append(b []byte) []byte { return appendSource(b, s) }

// Append appends the described encoding of t (null when t is nil).
func (t *Target) Append(b []byte) []byte { return appendTarget(b, t) }

// Unmarshal decodes a described source into s and returns the bytes after it.
func (s *Source) Unmarshal(b []byte) (rest []byte, err error) {
	f, rest := openDescribed(b, DescSource, "source")
	*s = Source{}
	s.HasAddress = f.address("address", &s.Address)
	f.uint("durable", &s.Durable)
	f.sym("expiry-policy", &s.ExpiryPolicy)
	f.uint("timeout", &s.Timeout)
	f.boolean("dynamic", &s.Dynamic)
	f.fields("dynamic-node-properties", &s.DynamicNodeProperties)
	f.sym("distribution-mode", &s.DistributionMode)
	f.fields("filter", &s.Filter)
	composite(&f, "default-outcome", &s.DefaultOutcome)
	f.symbols("outcomes", &s.Outcomes)
	f.symbols("capabilities", &s.Capabilities)
	return f.end(b, rest)
}

// Unmarshal decodes a described target or coordinator into t and returns
// the bytes after it.
func (t *Target) Unmarshal(b []byte) (rest []byte, err error) {
	code, _, err := readDescriptor(b)
	if err != nil {
		return b, fmt.Errorf("target: %w", err)
	}
	*t = Target{}
	if code == DescCoordinator {
		f, rest := openDescribed(b, DescCoordinator, "coordinator")
		var capabilities []Symbol // read for its errors; a coordinator's capabilities are not kept
		f.symbols("capabilities", &capabilities)
		t.Coordinator = true
		return f.end(b, rest)
	}
	f, rest := openDescribed(b, DescTarget, "target")
	t.HasAddress = f.address("address", &t.Address)
	f.uint("durable", &t.Durable)
	f.sym("expiry-policy", &t.ExpiryPolicy)
	f.uint("timeout", &t.Timeout)
	f.boolean("dynamic", &t.Dynamic)
	f.fields("dynamic-node-properties", &t.DynamicNodeProperties)
	f.symbols("capabilities", &t.Capabilities)
	return f.end(b, rest)
}
