package annotations

import (
	"errors"
	"fmt"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// Annotation keys (symbols in the message-annotations section).
const (
	KeyDeaths              = value.Symbol("x-opt-deaths")
	KeyFirstDeathQueue     = value.Symbol("x-first-death-queue")
	KeyFirstDeathReason    = value.Symbol("x-first-death-reason")
	KeyFirstDeathExchange  = value.Symbol("x-first-death-exchange")
	KeyLastDeathQueue      = value.Symbol("x-last-death-queue")
	KeyLastDeathReason     = value.Symbol("x-last-death-reason")
	KeyLastDeathExchange   = value.Symbol("x-last-death-exchange")
	KeyLastDeathErrorCond  = value.Symbol("x-last-death-error-condition")
	KeyLastDeathErrorDescr = value.Symbol("x-last-death-error-description")
)

// Reasons (x-opt-deaths "reason", written as a symbol).
const (
	ReasonRejected      = "rejected"
	ReasonExpired       = "expired"
	ReasonMaxLen        = "maxlen"
	ReasonDeliveryLimit = "delivery_limit"
)

// Death is one {queue, reason} entry of x-opt-deaths.
type Death struct {
	Queue       string
	Reason      string
	Count       uint64
	FirstTime   value.Timestamp
	LastTime    value.Timestamp
	Exchange    string
	RoutingKeys []string
	// TTL is the message's own TTL (ms) when this entry was created.
	TTL    uint32
	HasTTL bool
}

// Place is a queue, reason and exchange, as in the x-*-death-* annotations.
type Place struct {
	Queue, Reason, Exchange string
}

// History is a message's dead-letter history.
type History struct {
	// Deaths, most recently updated first; unique per {Queue, Reason}.
	Deaths []Death
	First  Place
	Last   Place
	// LastError is the consumer's rejected error of the latest death, if any
	// (epitaph's x-last-death-error-* annotations; RabbitMQ drops it).
	LastError *DeathError
}

// DeathError is the error a consumer gave when it rejected the message.
type DeathError struct {
	Condition   string
	Description string
}

// Event is one dead-lettering of a message.
type Event struct {
	Queue    string
	Reason   string
	Exchange string // the exchange the message was published to before this death
	// RoutingKeys before this death: primary key then CC keys (BCC excluded).
	// The recorded Death shares the slice: it must never be modified.
	RoutingKeys []string
	TTL         uint32
	HasTTL      bool
	Time        value.Timestamp
	Error       *DeathError
}

// Record returns h with ev recorded, following RabbitMQ's mc:record_death/3:
// an existing {queue, reason} entry gets count+1 and last-time, keeps its
// other fields and moves to the front; a new one is prepended. First is set
// only by the first death; Last by every death. h is not modified.
func Record(h History, ev Event) History { return recordTo(nil, h, ev) }

// recordTo is Record with the deaths written into dst's storage when it has
// room (dst must not share storage with h.Deaths): a caller that uses each
// history only until the next one reuses one slice.
func recordTo(dst []Death, h History, ev Event) History {
	if cap(dst) < len(h.Deaths)+1 {
		dst = make([]Death, 0, len(h.Deaths)+1)
	}
	out := History{Deaths: dst[:0], First: h.First, LastError: ev.Error}
	// A Death value, not a pointer to one: a pointer made it escape (one
	// allocation per repeat death).
	var updated Death
	found := false
	for i := range h.Deaths {
		if h.Deaths[i].Queue == ev.Queue && h.Deaths[i].Reason == ev.Reason {
			updated = h.Deaths[i]
			updated.Count++
			updated.LastTime = ev.Time
			found = true
			break
		}
	}
	if !found {
		updated = Death{Queue: ev.Queue, Reason: ev.Reason, Count: 1, FirstTime: ev.Time, LastTime: ev.Time,
			Exchange: ev.Exchange, RoutingKeys: ev.RoutingKeys, TTL: ev.TTL, HasTTL: ev.HasTTL}
	}
	out.Deaths = append(out.Deaths, updated)
	for _, d := range h.Deaths {
		if d.Queue == ev.Queue && d.Reason == ev.Reason {
			continue
		}
		out.Deaths = append(out.Deaths, d)
	}
	if len(h.Deaths) == 0 {
		out.First = Place{Queue: ev.Queue, Reason: ev.Reason, Exchange: ev.Exchange}
	}
	out.Last = Place{Queue: ev.Queue, Reason: ev.Reason, Exchange: ev.Exchange}
	return out
}

// IsCycle reports whether delivering a message with history h (the current
// death already recorded) to target queue would be a dead-letter cycle:
// RabbitMQ's is_cycle_v2. A rejection anywhere from
// the newest entry back to target's entry breaks the cycle.
func IsCycle(h History, target string) bool {
	if len(h.Deaths) == 0 || h.Deaths[0].Reason == ReasonRejected {
		return false
	}
	for _, d := range h.Deaths {
		if d.Reason == ReasonRejected {
			return false
		}
		if d.Queue == target {
			return true
		}
	}
	return false
}

// DeathMap encodes one death as RabbitMQ's map, keys in its exact order:
// ttl (when present), queue, reason, count, first-time, last-time,
// exchange, routing-keys.
func DeathMap(d Death) value.Map {
	m := make(value.Map, 0, 8)
	if d.HasTTL {
		m = append(m, value.KV{Key: value.Symbol("ttl"), Value: d.TTL})
	}
	keys := make([]any, len(d.RoutingKeys))
	for i, k := range d.RoutingKeys {
		keys[i] = k
	}
	return append(m,
		value.KV{Key: value.Symbol("queue"), Value: d.Queue},
		value.KV{Key: value.Symbol("reason"), Value: value.Symbol(d.Reason)},
		value.KV{Key: value.Symbol("count"), Value: d.Count},
		value.KV{Key: value.Symbol("first-time"), Value: d.FirstTime},
		value.KV{Key: value.Symbol("last-time"), Value: d.LastTime},
		value.KV{Key: value.Symbol("exchange"), Value: d.Exchange},
		value.KV{Key: value.Symbol("routing-keys"), Value: &value.Array{Type: amqp10.TypeStr32, Elems: keys}},
	)
}

// DeathsValue encodes the x-opt-deaths value: an array of map32.
func DeathsValue(h History) *value.Array {
	elems := make([]any, len(h.Deaths))
	for i, d := range h.Deaths {
		elems[i] = DeathMap(d)
	}
	return &value.Array{Type: amqp10.TypeMap32, Elems: elems}
}

// Apply returns anns with h written into it: x-opt-deaths (as an encoded
// amqp10.Raw value, the bytes DeathsValue would encode to), the six
// first/last annotations (utf8 strings) and, unless strict, the
// x-last-death-error-* annotations (dropped when the latest death has no
// error). Entries of ours already in anns are replaced in place, the others
// are appended in that order, and the error annotations always go last.
// The result is a new map; anns is not modified.
func Apply(anns value.Map, h History, strict bool) value.Map {
	return applyInto(nil, anns, h, strict, nil)
}

// boxer turns the queue and exchange names of the first/last annotations
// into interface values, reusing the last value of each: a run of deaths in
// one queue boxes its name once. The zero value is ready to use.
type boxer struct {
	queue, exchange boxed
}

type boxed struct {
	s string
	v any
}

func (b *boxed) box(s string) any {
	if b.v == nil || b.s != s {
		b.s, b.v = s, s
	}
	return b.v
}

// applyInto is Apply writing the new map into dst's storage when it has
// room (else a new map), and boxing names through bx (nil: a new value
// each).
func applyInto(dst, anns value.Map, h History, strict bool, bx *boxer) value.Map {
	if bx == nil {
		bx = new(boxer) // stays on the stack
	}
	// Box each string once: a first death has First == Last.
	fq, fr, fx := bx.queue.box(h.First.Queue), boxReason(h.First.Reason), bx.exchange.box(h.First.Exchange)
	lq, lr, lx := fq, fr, fx
	if h.Last.Queue != h.First.Queue {
		lq = h.Last.Queue
	}
	if h.Last.Reason != h.First.Reason {
		lr = boxReason(h.Last.Reason)
	}
	if h.Last.Exchange != h.First.Exchange {
		lx = h.Last.Exchange
	}
	ours := [...]value.KV{
		{Key: KeyDeaths, Value: EncodedDeaths(h)},
		{Key: KeyFirstDeathQueue, Value: fq},
		{Key: KeyFirstDeathReason, Value: fr},
		{Key: KeyFirstDeathExchange, Value: fx},
		{Key: KeyLastDeathQueue, Value: lq},
		{Key: KeyLastDeathReason, Value: lr},
		{Key: KeyLastDeathExchange, Value: lx},
	}
	var seen [len(ours)]bool
	withError := !strict && h.LastError != nil
	n := len(anns) + len(ours)
	if withError {
		n += 2
	}
	out := dst[:0]
	if cap(out) < n {
		out = make(value.Map, 0, n) // exact: with tracing on, the trace context is one append (and copy) more
	}
next:
	for _, kv := range anns {
		if k, ok := kv.Key.(value.Symbol); ok {
			if k == KeyLastDeathErrorCond || k == KeyLastDeathErrorDescr {
				continue
			}
			for i := range ours {
				if !seen[i] && ours[i].Key == k {
					seen[i] = true
					out = append(out, ours[i])
					continue next
				}
			}
		}
		out = append(out, kv)
	}
	for i := range ours {
		if !seen[i] {
			out = append(out, ours[i])
		}
	}
	if withError {
		out = append(out,
			value.KV{Key: KeyLastDeathErrorCond, Value: h.LastError.Condition},
			value.KV{Key: KeyLastDeathErrorDescr, Value: h.LastError.Description})
	}
	return out
}

// boxReason returns a reason as an interface value, without an allocation
// for the four reasons the broker writes.
func boxReason(r string) any {
	switch r {
	case ReasonRejected:
		return ReasonRejected
	case ReasonExpired:
		return ReasonExpired
	case ReasonMaxLen:
		return ReasonMaxLen
	case ReasonDeliveryLimit:
		return ReasonDeliveryLimit
	}
	return r
}

// ErrMalformed reports an x-opt-deaths value that is not RabbitMQ's shape.
var ErrMalformed = errors.New("annotations: malformed x-opt-deaths")

// Decode reads a history written by Apply (or by RabbitMQ 4). ok is false
// when anns has no x-opt-deaths. Decode only trusts annotations the broker
// itself wrote: a publisher's x-opt-deaths is never interpreted (a republished
// dead letter starts a fresh history).
func Decode(anns value.Map) (h History, ok bool, err error) {
	v, ok := anns.Get(KeyDeaths)
	if !ok {
		return History{}, false, nil
	}
	if raw, isRaw := v.(amqp10.Raw); isRaw {
		// The bytes the broker wrote (AppendDeaths) decode straight into
		// deaths. Anything the direct decoder does not accept, malformed or
		// outside its subset, goes through the generic values below, which
		// decide and word the error.
		if deaths, err := decodeRawDeaths(raw); err == nil {
			h.Deaths = deaths
			decodePlaces(anns, &h)
			return h, true, nil
		}
		var err error
		if v, _, err = amqp10.ReadValue(raw); err != nil {
			return History{}, true, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	}
	arr, isArr := v.(*value.Array)
	if !isArr {
		return History{}, true, fmt.Errorf("%w: %T, want an array", ErrMalformed, v)
	}
	for i, e := range arr.Elems {
		m, isMap := e.(value.Map)
		if !isMap {
			return History{}, true, fmt.Errorf("%w: element %d is %T, want a map", ErrMalformed, i, e)
		}
		d, err := decodeDeath(m)
		if err != nil {
			return History{}, true, fmt.Errorf("element %d: %w", i, err)
		}
		h.Deaths = append(h.Deaths, d)
	}
	decodePlaces(anns, &h)
	return h, true, nil
}

// decodePlaces reads the x-*-death-* annotations into h.
func decodePlaces(anns value.Map, h *History) {
	str := func(k value.Symbol) string {
		s, _ := anns.Get(k)
		v, _ := s.(string)
		return v
	}
	h.First = Place{Queue: str(KeyFirstDeathQueue), Reason: str(KeyFirstDeathReason), Exchange: str(KeyFirstDeathExchange)}
	h.Last = Place{Queue: str(KeyLastDeathQueue), Reason: str(KeyLastDeathReason), Exchange: str(KeyLastDeathExchange)}
	if c := str(KeyLastDeathErrorCond); c != "" {
		h.LastError = &DeathError{Condition: c, Description: str(KeyLastDeathErrorDescr)}
	}
}

func decodeDeath(m value.Map) (Death, error) {
	var d Death
	for _, kv := range m {
		k, _ := kv.Key.(value.Symbol)
		var ok bool
		switch k {
		case "ttl":
			d.TTL, ok = kv.Value.(uint32)
			d.HasTTL = ok
		case "queue":
			d.Queue, ok = kv.Value.(string)
		case "reason":
			var s value.Symbol
			s, ok = kv.Value.(value.Symbol)
			d.Reason = string(s)
		case "count":
			d.Count, ok = kv.Value.(uint64)
		case "first-time":
			d.FirstTime, ok = kv.Value.(value.Timestamp)
		case "last-time":
			d.LastTime, ok = kv.Value.(value.Timestamp)
		case "exchange":
			d.Exchange, ok = kv.Value.(string)
		case "routing-keys":
			// An array of strings (RabbitMQ, AppendDeaths) or, from other
			// encoders, a list of strings.
			var elems []any
			switch a := kv.Value.(type) {
			case *value.Array:
				elems, ok = a.Elems, true
			case value.List:
				elems, ok = a, true
			}
			for _, e := range elems {
				s, isStr := e.(string)
				if !isStr {
					ok = false
					break
				}
				d.RoutingKeys = append(d.RoutingKeys, s)
			}
		default:
			ok = true // unknown keys are tolerated
		}
		if !ok {
			return Death{}, fmt.Errorf("%w: key %q has type %T", ErrMalformed, k, kv.Value)
		}
	}
	if d.Queue == "" && d.Reason == "" {
		return Death{}, fmt.Errorf("%w: entry without queue and reason", ErrMalformed)
	}
	return d, nil
}
