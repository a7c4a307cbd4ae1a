package annotations

import (
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// The dead-letter history among a message's broker annotations.
//
// The broker annotations (router.Message.Anns) hold the history in its
// protocol-neutral form: one entry whose key is HistoryKey{} and whose value
// is the *History, standing where the AMQP 1.0 form has x-opt-deaths and
// the six x-first/last-death-* annotations, and, when the latest death
// carries a consumer's error, one entry whose key is ErrorKey{} (value nil)
// standing where the AMQP 1.0 form has the two x-last-death-error-*
// annotations. The entries keep the places those annotations take in
// RabbitMQ's annotations (the history where the first death put it, the
// error last after each death), so a front end that writes its protocol's
// form in place writes the bytes RabbitMQ 4.3 writes: AMQP 1.0 through
// ExpandAMQP10 or AppendHistoryAMQP10 / AppendErrorAMQP10, AMQP 0.9.1 x-death
// from the History (ToXDeath).

// HistoryKey is the key of the history entry in the broker annotations;
// its value is a *History, never modified once recorded.
type HistoryKey struct{}

// ErrorKey is the key of the entry marking where the latest death's error
// is written (History.LastError); its value is nil.
type ErrorKey struct{}

// HistoryOf returns the history recorded in the broker annotations anns.
func HistoryOf(anns value.Map) (*History, bool) {
	for i := range anns {
		if _, ok := anns[i].Key.(HistoryKey); ok {
			h, ok := anns[i].Value.(*History)
			return h, ok && h != nil
		}
	}
	return nil, false
}

// firstDeath is a first death's history and its one entry, allocated at once.
type firstDeath struct {
	h History
	d [1]Death
}

// RecordIn records ev in the history the broker annotations anns carry and
// returns the annotations of the dead-letter copy, written into dst's
// storage when it has room (else a new map), and the new history: the
// history entry is replaced in place (or appended on a first death), the
// error entry removed, and, when ev has an error and not strict, appended
// last. Strict leaves the error out of the history too, as RabbitMQ 4.3
// does. anns and its history are not modified.
func RecordIn(dst, anns value.Map, ev Event, strict bool) (value.Map, *History) {
	var (
		h      *History
		deaths []Death
		prev   History
	)
	if p, ok := HistoryOf(anns); ok && len(p.Deaths) > 0 {
		prev = *p
		h, deaths = new(History), make([]Death, 0, len(p.Deaths)+1)
	} else {
		fd := new(firstDeath)
		h, deaths = &fd.h, fd.d[:0]
	}
	*h = recordTo(deaths, prev, ev)
	if strict {
		h.LastError = nil
	}
	n := len(anns) + 2
	out := dst[:0]
	if cap(out) < n {
		out = make(value.Map, 0, n)
	}
	placed := false
	for _, kv := range anns {
		switch kv.Key.(type) {
		case HistoryKey:
			kv.Value, placed = h, true
		case ErrorKey:
			continue
		}
		out = append(out, kv)
	}
	if !placed {
		out = append(out, value.KV{Key: HistoryKey{}, Value: h})
	}
	if h.LastError != nil {
		out = append(out, value.KV{Key: ErrorKey{}})
	}
	return out, h
}

// IsDeathKey reports whether k is one of the annotations the AMQP 1.0 form
// of a history writes (x-opt-deaths, x-first/last-death-*,
// x-last-death-error-*). Where a message has a history, an entry of the
// broker annotations with such a key is not written: the history's wins.
func IsDeathKey(k value.Symbol) bool {
	switch k {
	case KeyDeaths, KeyFirstDeathQueue, KeyFirstDeathReason, KeyFirstDeathExchange,
		KeyLastDeathQueue, KeyLastDeathReason, KeyLastDeathExchange,
		KeyLastDeathErrorCond, KeyLastDeathErrorDescr:
		return true
	}
	return false
}

// ExpandAMQP10 returns the broker annotations anns in their AMQP 1.0 form,
// written into dst's storage when it has room: the history entry becomes
// x-opt-deaths (encoded, an amqp10.Raw) and the six x-first/last-death-*
// strings, the error entry the two x-last-death-error-* strings.
func ExpandAMQP10(dst, anns value.Map) value.Map {
	h, hasHistory := HistoryOf(anns)
	out := dst[:0]
	for _, kv := range anns {
		switch k := kv.Key.(type) {
		case HistoryKey:
			if hasHistory {
				out = append(out,
					value.KV{Key: KeyDeaths, Value: EncodedDeaths(*h)},
					value.KV{Key: KeyFirstDeathQueue, Value: h.First.Queue},
					value.KV{Key: KeyFirstDeathReason, Value: h.First.Reason},
					value.KV{Key: KeyFirstDeathExchange, Value: h.First.Exchange},
					value.KV{Key: KeyLastDeathQueue, Value: h.Last.Queue},
					value.KV{Key: KeyLastDeathReason, Value: h.Last.Reason},
					value.KV{Key: KeyLastDeathExchange, Value: h.Last.Exchange})
			}
		case ErrorKey:
			if hasHistory && h.LastError != nil {
				out = append(out,
					value.KV{Key: KeyLastDeathErrorCond, Value: h.LastError.Condition},
					value.KV{Key: KeyLastDeathErrorDescr, Value: h.LastError.Description})
			}
		case value.Symbol:
			if !hasHistory || !IsDeathKey(k) {
				out = append(out, kv)
			}
		default:
			out = append(out, kv)
		}
	}
	return out
}

// AppendHistoryAMQP10 appends the AMQP 1.0 form of h as message-annotation
// entries (x-opt-deaths, then the six x-first/last-death-* strings), the
// values ExpandAMQP10 writes, straight into bytes. It appends 14 values.
func AppendHistoryAMQP10(b []byte, h *History) []byte {
	b = AppendDeaths(amqp10.AppendSymbol(b, KeyDeaths), *h)
	b = amqp10.AppendString(amqp10.AppendSymbol(b, KeyFirstDeathQueue), h.First.Queue)
	b = amqp10.AppendString(amqp10.AppendSymbol(b, KeyFirstDeathReason), h.First.Reason)
	b = amqp10.AppendString(amqp10.AppendSymbol(b, KeyFirstDeathExchange), h.First.Exchange)
	b = amqp10.AppendString(amqp10.AppendSymbol(b, KeyLastDeathQueue), h.Last.Queue)
	b = amqp10.AppendString(amqp10.AppendSymbol(b, KeyLastDeathReason), h.Last.Reason)
	return amqp10.AppendString(amqp10.AppendSymbol(b, KeyLastDeathExchange), h.Last.Exchange)
}

// AppendErrorAMQP10 appends the two x-last-death-error-* entries of h's
// error (4 values); nothing when h has none.
func AppendErrorAMQP10(b []byte, h *History) ([]byte, int) {
	if h == nil || h.LastError == nil {
		return b, 0
	}
	b = amqp10.AppendString(amqp10.AppendSymbol(b, KeyLastDeathErrorCond), h.LastError.Condition)
	return amqp10.AppendString(amqp10.AppendSymbol(b, KeyLastDeathErrorDescr), h.LastError.Description), 4
}

// LiftAMQP10 is ExpandAMQP10 undone: it returns anns with an AMQP 1.0 form
// of the history that Decode reads (x-opt-deaths, the x-*-death-*
// annotations, as a store written before the neutral form holds them)
// replaced by the history and error entries, at the places of x-opt-deaths
// and x-last-death-error-condition. anns comes back unchanged when it has
// no x-opt-deaths or one Decode refuses (it is then an opaque annotation).
func LiftAMQP10(anns value.Map) value.Map {
	if _, ok := HistoryOf(anns); ok {
		return anns
	}
	h, ok, err := Decode(anns)
	if !ok || err != nil {
		return anns
	}
	hp := &h
	out := make(value.Map, 0, len(anns))
	for _, kv := range anns {
		k, isSym := kv.Key.(value.Symbol)
		switch {
		case isSym && k == KeyDeaths:
			out = append(out, value.KV{Key: HistoryKey{}, Value: hp})
		case isSym && k == KeyLastDeathErrorCond && h.LastError != nil:
			out = append(out, value.KV{Key: ErrorKey{}})
		case isSym && IsDeathKey(k):
		default:
			out = append(out, kv)
		}
	}
	return out
}
