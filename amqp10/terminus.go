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
		if f, rest, err = openList(rest, "received"); err != nil {
			return b, err
		}
		st.Kind = StateReceived
		var ok bool
		if st.SectionNumber, ok, err = f.uint("section-number"); err != nil {
			return b, err
		} else if !ok {
			return b, f.missing("section-number")
		}
		if st.SectionOffset, ok, err = f.ulong("section-offset"); err != nil {
			return b, err
		} else if !ok {
			return b, f.missing("section-offset")
		}
	case DescAccepted:
		st.Kind = StateAccepted
		f, rest, err = openList(rest, "accepted")
	case DescReleased:
		st.Kind = StateReleased
		f, rest, err = openList(rest, "released")
	case DescRejected:
		st.Kind = StateRejected
		if f, rest, err = openList(rest, "rejected"); err != nil {
			return b, err
		}
		st.Error, err = f.err("error")
	case DescModified:
		st.Kind = StateModified
		if f, rest, err = openList(rest, "modified"); err != nil {
			return b, err
		}
		if st.DeliveryFailed, _, err = f.boolean("delivery-failed"); err != nil {
			return b, err
		}
		if st.UndeliverableHere, _, err = f.boolean("undeliverable-here"); err != nil {
			return b, err
		}
		st.Annotations, err = f.fields("message-annotations")
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
	if err != nil {
		return b, err
	}
	if err := f.done(); err != nil {
		return b, err
	}
	return rest, nil
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
	f, rest, err := openDescribed(b, DescSource, "source")
	if err != nil {
		return b, err
	}
	*s = Source{}
	if s.Address, s.HasAddress, err = f.address("address"); err != nil {
		return b, err
	}
	if s.Durable, _, err = f.uint("durable"); err != nil {
		return b, err
	}
	if s.ExpiryPolicy, _, err = f.sym("expiry-policy"); err != nil {
		return b, err
	}
	if s.Timeout, _, err = f.uint("timeout"); err != nil {
		return b, err
	}
	if s.Dynamic, _, err = f.boolean("dynamic"); err != nil {
		return b, err
	}
	if s.DynamicNodeProperties, err = f.fields("dynamic-node-properties"); err != nil {
		return b, err
	}
	if s.DistributionMode, _, err = f.sym("distribution-mode"); err != nil {
		return b, err
	}
	if s.Filter, err = f.fields("filter"); err != nil {
		return b, err
	}
	if f.n > 0 {
		var st DeliveryState
		if err = f.state("default-outcome", &st); err != nil {
			return b, err
		}
		if st.Kind != StateNone {
			s.DefaultOutcome = &st
		}
	}
	if s.Outcomes, err = f.symbols("outcomes"); err != nil {
		return b, err
	}
	if s.Capabilities, err = f.symbols("capabilities"); err != nil {
		return b, err
	}
	if err = f.done(); err != nil {
		return b, err
	}
	return rest, nil
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
		f, rest, err := openDescribed(b, DescCoordinator, "coordinator")
		if err != nil {
			return b, err
		}
		if _, err = f.symbols("capabilities"); err != nil {
			return b, err
		}
		if err = f.done(); err != nil {
			return b, err
		}
		t.Coordinator = true
		return rest, nil
	}
	f, rest, err := openDescribed(b, DescTarget, "target")
	if err != nil {
		return b, err
	}
	if t.Address, t.HasAddress, err = f.address("address"); err != nil {
		return b, err
	}
	if t.Durable, _, err = f.uint("durable"); err != nil {
		return b, err
	}
	if t.ExpiryPolicy, _, err = f.sym("expiry-policy"); err != nil {
		return b, err
	}
	if t.Timeout, _, err = f.uint("timeout"); err != nil {
		return b, err
	}
	if t.Dynamic, _, err = f.boolean("dynamic"); err != nil {
		return b, err
	}
	if t.DynamicNodeProperties, err = f.fields("dynamic-node-properties"); err != nil {
		return b, err
	}
	if t.Capabilities, err = f.symbols("capabilities"); err != nil {
		return b, err
	}
	if err = f.done(); err != nil {
		return b, err
	}
	return rest, nil
}
