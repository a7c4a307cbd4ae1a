package router

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// Store encoding of messages (store.Record.Msg, immutable) and of an entry's
// mutable state (store.Record.State). Both are small hand-rolled formats
// whose first byte names the format; values (annotations, arguments) are
// written with the AMQP codec, the value model's encoding (amqp10_store.go).
//
// Msg:      the first byte names the container's protocol and format; the
//           rest is the container's and the router's state (0x01: an AMQP
//           1.0 container, see amqp10_store.go). A second protocol adds its
//           own tag; records of every tag recover side by side.
// State v1: 0x01, flags, dc, acquired, deadline (varint unix ns),
//           [anns map when flagAnns], [reason, death time, error when flagRetained].
//
// Delivery marking: when a stored message is handed to a consumer (not
// pre-settled) its state is rewritten with flagDelivered (one small Update,
// group-committed with the other traffic, never waited for). Recover treats a
// message whose state says delivered as returned by a lost connection:
// delivery-count +1 and acquired-count +1, ready again.

const (
	stateVersion = 1

	flagDelivered = 1 << 0
	flagRetained  = 1 << 1
	flagAnns      = 1 << 2 // anns differ from Msg.Anns
	flagDelayed   = 1 << 3 // delayed retry: the ready-at time follows the rest
)

var errCorrupt = errors.New("router: corrupt stored message")

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errCorrupt
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// view returns the next length-prefixed bytes, aliasing the record: stored
// buffers are only valid during Iterate, so the caller copies what it keeps.
func (r *reader) view() []byte {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = errCorrupt
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	if n == 0 {
		return nil
	}
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = errCorrupt
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// encodeMessage encodes the immutable part of m for store.Record.Msg, in
// the format of its container's protocol.
func encodeMessage(m *Message) ([]byte, error) {
	switch c := m.Container.(type) {
	case AMQP10:
		return encodeAMQP10Message(m, c)
	case AMQP091:
		return encodeAMQP091Message(m, c)
	case nil:
		return encodeAMQP10Message(m, AMQP10{})
	}
	return nil, fmt.Errorf("router: no store encoding for a %v message", m.Container.Protocol())
}

// decodeMessage rebuilds a Message from store.Record.Msg (copying what it
// keeps), with the container its first byte names.
func decodeMessage(b []byte) (*Message, error) {
	if len(b) == 0 {
		return nil, errCorrupt
	}
	switch b[0] {
	case msgAMQP10:
		return decodeAMQP10Message(b[1:])
	case msgAMQP091:
		return decodeAMQP091Message(b[1:])
	}
	return nil, errCorrupt
}

// encodeState encodes e's mutable state for store.Record.State.
func encodeState(e *entry) []byte {
	b := make([]byte, 0, 24)
	b = append(b, stateVersion)
	var f byte
	if e.delivered {
		f |= flagDelivered
	}
	if e.retained {
		f |= flagRetained
	}
	annsChanged := !sameMap(e.anns(), e.msg.Anns)
	if annsChanged {
		f |= flagAnns
	}
	if e.isDelayed() {
		f |= flagDelayed
	}
	b = append(b, f)
	b = binary.AppendUvarint(b, uint64(e.dc))
	b = binary.AppendUvarint(b, uint64(e.acquired))
	b = binary.AppendVarint(b, e.deadline)
	if annsChanged {
		var err error
		if b, err = appendAnns(b, e.anns()); err != nil {
			b, _ = appendAnns(b, nil) // null: unencodable annotations cannot come from the wire
		}
	}
	if e.retained {
		dead := e.dead()
		b = appendStr(b, string(dead.deadReason))
		b = binary.AppendVarint(b, dead.deadAt)
		if dead.deadErr != nil {
			b = append(b, 1)
			b = appendStr(b, dead.deadErr.Condition)
			b = appendStr(b, dead.deadErr.Description)
		} else {
			b = append(b, 0)
		}
	}
	if e.isDelayed() {
		b = binary.AppendVarint(b, e.ext.readyAt)
	}
	return b
}

// sameMap reports whether two annotation maps are the same slice (the
// common case: never modified since enqueue).
func sameMap(a, b value.Map) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	return &a[0] == &b[0]
}

// decodeState applies a stored state to e (whose msg is set).
func decodeState(e *entry, b []byte) error {
	if b == nil {
		return nil
	}
	if len(b) < 2 || b[0] != stateVersion {
		return errCorrupt
	}
	r := &reader{b: b[2:]}
	f := b[1]
	e.delivered = f&flagDelivered != 0
	e.retained = f&flagRetained != 0
	e.dc = uint32(r.uvarint())
	e.acquired = uint32(r.uvarint())
	e.deadline = r.varint()
	if f&flagAnns != 0 {
		e.setAnns(r.anns())
	}
	if e.retained {
		x := e.extension()
		x.deadReason = Reason(r.str())
		x.deadAt = r.varint()
		if r.byte() == 1 {
			x.deadErr = &Error{Condition: r.str(), Description: r.str()}
		}
	}
	if f&flagDelayed != 0 {
		x := e.extension()
		x.delayed, x.readyAt = true, r.varint()
	}
	return r.err
}

// ---- metadata ----

// Metadata keys (store.PutMeta). Names are joined with NUL, which AMQP names
// may not contain in practice (RabbitMQ refuses it too). The prefixes "u/",
// "P/" and "d/" are package auth's (users, permissions, the first-start
// marker), written through Broker.CommitMeta: the router never uses them.
const (
	metaVHost    = "v/" // v/<vhost>
	metaExchange = "x/" // x/<vhost>\0<name> → [type, durable, auto-delete, internal, arguments]
	metaQueue    = "q/" // q/<vhost>\0<name> → [id, type, durable, exclusive, auto-delete, arguments]
	metaBinding  = "b/" // b/<vhost>\0<source>\0<encoded binding> → binding
	metaPolicy   = "p/" // p/<vhost>\0<name> → [pattern, apply-to, priority, definition]
	metaSeq      = "n/" // n/<queue id> → reserved seq high-water mark
	metaQueueID  = "id" // next queue id high-water mark
	seqReserve   = 1 << 16
)

func joinKey(prefix string, parts ...string) string {
	s := prefix
	for i, p := range parts {
		if i > 0 {
			s += "\x00"
		}
		s += p
	}
	return s
}

func seqKey(id store.QueueID) string { return fmt.Sprintf("%s%016x", metaSeq, uint64(id)) }

func mapOrEmpty(m value.Map) value.Map {
	if m == nil {
		return value.Map{}
	}
	return m
}

func listMap(v any) value.Map {
	m, _ := v.(value.Map)
	if len(m) == 0 {
		return nil
	}
	return m
}

func listStr(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case value.Symbol:
		return string(s)
	}
	return ""
}

func listBool(v any) bool { b, _ := v.(bool); return b }

func listInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case uint64:
		return int64(n)
	case uint32:
		return int64(n)
	case int8:
		return int64(n)
	case uint8:
		return int64(n)
	case int16:
		return int64(n)
	case uint16:
		return int64(n)
	}
	return 0
}

func encodeBinding(b Binding) []byte {
	return encodeList(value.List{b.Source, b.Destination, b.DestinationIsExchange, b.Key, mapOrEmpty(b.Arguments)})
}

func bindingKey(vhost string, b Binding) string {
	return joinKey(metaBinding, vhost, b.Source, string(encodeBinding(b)))
}

func decodeBinding(v []byte) (Binding, error) {
	l, err := decodeList(v, 5)
	if err != nil {
		return Binding{}, err
	}
	return Binding{Source: listStr(l[0]), Destination: listStr(l[1]), DestinationIsExchange: listBool(l[2]),
		Key: listStr(l[3]), Arguments: listMap(l[4])}, nil
}

// timeFromNano converts a stored unix-ns death time.
func timeFromNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
