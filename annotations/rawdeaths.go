package annotations

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// Direct decoding of an encoded x-opt-deaths value (an amqp10.Raw, as
// AppendDeaths writes it, or any other encoding of the same shape) into
// []Death, without building the generic amqp10 values ReadValue returns.
//
// The direct decoder covers the encodings a broker or a generic encoder
// writes for this shape:
//
//	array8/array32 of map8/map32 (empty: of map8/map32 or with no element constructor)
//	keys                sym8/sym32, each at most once
//	ttl                 uint0/smalluint/uint
//	queue, exchange     str8/str32
//	reason              sym8/sym32
//	count               ulong0/smallulong/ulong
//	first-, last-time   timestamp
//	routing-keys        array8/array32 of str8/str32, or list0/list8/list32 of str8/str32
//	other symbol keys   any scalar value (ignored, as the generic decoder ignores them)
//
// Everything it decodes, the generic path (amqp10.ReadValue, then the
// walk over the generic values) decodes to the same result. It answers
// errRawUnsupported for well-formed encodings outside that subset (described
// array elements, compound values under unknown keys, non-symbol keys, many
// unknown keys) and errRawMalformed for bytes the generic path rejects too;
// Decode hands both to the generic path, which decides and words the error.

var (
	// errRawMalformed: the bytes are not a valid x-opt-deaths value.
	errRawMalformed = fmt.Errorf("%w: direct decoder", ErrMalformed)
	// errRawUnsupported: a valid-looking encoding outside the direct
	// decoder's subset; only the generic decoder can tell.
	errRawUnsupported = errors.New("annotations: x-opt-deaths encoding not handled by the direct decoder")
)

// maxUnknownKeys is how many distinct unknown keys a death map may carry
// for the direct decoder (their duplicate check is a scan over a fixed
// array; more go to the generic decoder).
const maxUnknownKeys = 8

// Indexes of the known keys of a death map, for the duplicate check.
const (
	keyTTL = iota
	keyQueue
	keyReason
	keyCount
	keyFirstTime
	keyLastTime
	keyExchange
	keyRoutingKeys
	keyUnknown
)

func knownKey(k []byte) int {
	switch string(k) {
	case "ttl":
		return keyTTL
	case "queue":
		return keyQueue
	case "reason":
		return keyReason
	case "count":
		return keyCount
	case "first-time":
		return keyFirstTime
	case "last-time":
		return keyLastTime
	case "exchange":
		return keyExchange
	case "routing-keys":
		return keyRoutingKeys
	}
	return keyUnknown
}

// reasonConst returns the package constant spelled by v, if any.
func reasonConst(v []byte) (string, bool) {
	switch string(v) {
	case ReasonRejected:
		return ReasonRejected, true
	case ReasonExpired:
		return ReasonExpired, true
	case ReasonMaxLen:
		return ReasonMaxLen, true
	case ReasonDeliveryLimit:
		return ReasonDeliveryLimit, true
	}
	return "", false
}

// rawDeaths is the state of one direct decode. It walks the bytes twice:
// a counting pass (fill false) that validates and sizes everything, then a
// filling pass that stores the deaths. All strings of the history share
// one allocation (sb), all routing keys one slice (keys).
type rawDeaths struct {
	fill   bool
	nKeys  int // routing keys in all deaths
	nBytes int // bytes of all strings that need a copy
	deaths []Death
	keys   []string
	sb     strings.Builder
}

// decodeRawDeaths decodes an encoded x-opt-deaths value. Bytes after the
// value are ignored, as Decode's generic path ignores them. The error is
// errRawMalformed or errRawUnsupported.
func decodeRawDeaths(b []byte) ([]Death, error) {
	var r rawDeaths
	n, ec, body, err := deathsArray(b)
	if err != nil || n == 0 {
		return nil, err
	}
	if err := r.walk(n, ec, body); err != nil {
		return nil, err
	}
	r.fill = true
	r.deaths = make([]Death, n)
	if r.nKeys > 0 {
		r.keys = make([]string, 0, r.nKeys)
	}
	r.sb.Grow(r.nBytes)
	if err := r.walk(n, ec, body); err != nil {
		return nil, err // cannot happen: the counting pass accepted the same bytes
	}
	return r.deaths, nil
}

// deathsArray parses the array header: the element count, the element
// constructor and the encoded elements. n == 0 is an empty history.
func deathsArray(b []byte) (n int, ec byte, body []byte, err error) {
	if len(b) == 0 || (b[0] != amqp10.TypeArray8 && b[0] != amqp10.TypeArray32) {
		return 0, 0, nil, errRawMalformed
	}
	n, body, _, err = compound(b[0], b[1:])
	if err != nil {
		return 0, 0, nil, err
	}
	if len(body) == 0 {
		if n != 0 {
			return 0, 0, nil, errRawMalformed // no element constructor
		}
		return 0, 0, nil, nil
	}
	ec, body = body[0], body[1:]
	if ec != amqp10.TypeMap8 && ec != amqp10.TypeMap32 {
		if n == 0 || ec == amqp10.TypeDescribed {
			// An empty array of another type, or described maps: valid
			// or not, the generic decoder decides.
			return 0, 0, nil, errRawUnsupported
		}
		return 0, 0, nil, errRawMalformed // elements that are not maps
	}
	if n == 0 {
		if len(body) != 0 {
			return 0, 0, nil, errRawMalformed
		}
		return 0, 0, nil, nil
	}
	if n > len(body) {
		return 0, 0, nil, errRawMalformed
	}
	return n, ec, body, nil
}

// walk decodes the n map elements (constructor ec) in body.
func (r *rawDeaths) walk(n int, ec byte, body []byte) error {
	var scratch Death
	for i := range n {
		d := &scratch
		if r.fill {
			d = &r.deaths[i]
		}
		var err error
		if body, err = r.death(ec, body, d); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return errRawMalformed
	}
	return nil
}

// death decodes one death map, whose constructor ec has been consumed,
// into d and returns the bytes after it.
func (r *rawDeaths) death(ec byte, b []byte, d *Death) ([]byte, error) {
	n, body, rest, err := compound(ec, b)
	if err != nil {
		return b, err
	}
	var (
		seen       uint8
		unknown    [maxUnknownKeys][]byte
		nUnknown   int
		hasQueue   bool // non-empty queue
		hasReason  bool // non-empty reason
		key, value []byte
		ok         bool
	)
	for range n / 2 {
		if len(body) == 0 {
			return b, errRawMalformed
		}
		kc := body[0]
		if kc != amqp10.TypeSym8 && kc != amqp10.TypeSym32 {
			return b, errRawUnsupported // any other key type is valid and ignored
		}
		if key, body, ok = varBytes(kc, body[1:]); !ok || len(body) == 0 {
			return b, errRawMalformed
		}
		k := knownKey(key)
		if k == keyUnknown {
			for _, u := range unknown[:nUnknown] {
				if string(u) == string(key) {
					return b, errRawMalformed // duplicate key
				}
			}
			if nUnknown == len(unknown) {
				return b, errRawUnsupported
			}
			unknown[nUnknown] = key
			nUnknown++
		} else {
			if seen&(1<<k) != 0 {
				return b, errRawMalformed // duplicate key
			}
			seen |= 1 << k
		}
		switch k {
		case keyTTL:
			if d.TTL, ok, body, err = amqp10.ReadUint(body); err != nil || !ok {
				return b, errRawMalformed
			}
			d.HasTTL = true
		case keyCount:
			if d.Count, ok, body, err = amqp10.ReadULong(body); err != nil || !ok {
				return b, errRawMalformed
			}
		case keyFirstTime:
			if d.FirstTime, ok, body, err = amqp10.ReadTimestamp(body); err != nil || !ok {
				return b, errRawMalformed
			}
		case keyLastTime:
			if d.LastTime, ok, body, err = amqp10.ReadTimestamp(body); err != nil || !ok {
				return b, errRawMalformed
			}
		case keyQueue, keyExchange:
			if value, body, ok = readVar(body, amqp10.TypeStr8, amqp10.TypeStr32); !ok {
				return b, errRawMalformed
			}
			if k == keyQueue {
				d.Queue, hasQueue = r.str(value), len(value) > 0
			} else {
				d.Exchange = r.str(value)
			}
		case keyReason:
			if value, body, ok = readVar(body, amqp10.TypeSym8, amqp10.TypeSym32); !ok {
				return b, errRawMalformed
			}
			d.Reason, hasReason = r.reason(value), len(value) > 0
		case keyRoutingKeys:
			if body, err = r.routingKeys(body, d); err != nil {
				return b, err
			}
		default:
			if body, err = skipScalar(body); err != nil {
				return b, err
			}
		}
	}
	if len(body) != 0 || (!hasQueue && !hasReason) {
		return b, errRawMalformed
	}
	return rest, nil
}

// routingKeys decodes an array or a list of strings into d.RoutingKeys
// (nil when empty).
func (r *rawDeaths) routingKeys(b []byte, d *Death) ([]byte, error) {
	c := b[0]
	start := len(r.keys)
	var rest []byte
	switch c {
	case amqp10.TypeArray8, amqp10.TypeArray32:
		n, body, after, err := compound(c, b[1:])
		if err != nil {
			return b, err
		}
		rest = after
		if len(body) == 0 {
			if n != 0 {
				return b, errRawMalformed
			}
			break
		}
		ec := body[0]
		body = body[1:]
		if ec != amqp10.TypeStr8 && ec != amqp10.TypeStr32 {
			if n == 0 || ec == amqp10.TypeDescribed {
				return b, errRawUnsupported
			}
			return b, errRawMalformed // elements that are not strings
		}
		if n > len(body) {
			return b, errRawMalformed
		}
		for range n {
			var v []byte
			var ok bool
			if v, body, ok = varBytes(ec, body); !ok {
				return b, errRawMalformed
			}
			r.key(v)
		}
		if len(body) != 0 {
			return b, errRawMalformed
		}
	case amqp10.TypeList0:
		rest = b[1:]
	case amqp10.TypeList8, amqp10.TypeList32:
		n, body, after, err := compound(c, b[1:])
		if err != nil {
			return b, err
		}
		rest = after
		for range n {
			var v []byte
			var ok bool
			if v, body, ok = readVar(body, amqp10.TypeStr8, amqp10.TypeStr32); !ok {
				return b, errRawMalformed
			}
			r.key(v)
		}
		if len(body) != 0 {
			return b, errRawMalformed
		}
	default:
		return b, errRawMalformed
	}
	if r.fill {
		if end := len(r.keys); end > start {
			d.RoutingKeys = r.keys[start:end:end]
		}
	}
	return rest, nil
}

// str returns v as a string in the shared allocation (filling pass) or
// counts its bytes (counting pass).
func (r *rawDeaths) str(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if !r.fill {
		r.nBytes += len(v)
		return ""
	}
	// Bytes written to a strings.Builder never change, so a suffix of
	// String() stays valid while later strings are appended.
	r.sb.Write(v)
	s := r.sb.String()
	return s[len(s)-len(v):]
}

// reason is str without a copy for the four reasons the broker writes.
func (r *rawDeaths) reason(v []byte) string {
	if s, ok := reasonConst(v); ok {
		return s
	}
	return r.str(v)
}

func (r *rawDeaths) key(v []byte) {
	if !r.fill {
		r.nKeys++
		r.str(v)
		return
	}
	r.keys = append(r.keys, r.str(v))
}

// compound parses the size and count of a list, map or array whose
// constructor c has been consumed, with the checks of the amqp10 decoder:
// the size covers its count field and fits in b, a map has an even count,
// and a list or map holds at most one element per byte.
func compound(c byte, b []byte) (n int, body, rest []byte, err error) {
	var size, count uint64
	switch c {
	case amqp10.TypeList8, amqp10.TypeMap8, amqp10.TypeArray8:
		if len(b) < 2 {
			return 0, nil, b, errRawMalformed
		}
		size, count = uint64(b[0]), uint64(b[1])
		if size < 1 || uint64(len(b)-1) < size {
			return 0, nil, b, errRawMalformed
		}
		body, rest = b[2:1+size], b[1+size:]
	case amqp10.TypeList32, amqp10.TypeMap32, amqp10.TypeArray32:
		if len(b) < 8 {
			return 0, nil, b, errRawMalformed
		}
		size, count = uint64(binary.BigEndian.Uint32(b)), uint64(binary.BigEndian.Uint32(b[4:]))
		if size < 4 || uint64(len(b)-4) < size {
			return 0, nil, b, errRawMalformed
		}
		body, rest = b[8:4+size], b[4+size:]
	default:
		return 0, nil, b, errRawMalformed
	}
	isArray := c == amqp10.TypeArray8 || c == amqp10.TypeArray32
	isMap := c == amqp10.TypeMap8 || c == amqp10.TypeMap32
	if (isMap && count%2 != 0) || (!isArray && count > uint64(len(body))) || count > math.MaxInt32 {
		return 0, nil, b, errRawMalformed
	}
	return int(count), body, rest, nil
}

// varBytes returns the bytes of a binary, string or symbol whose
// constructor c has been consumed.
func varBytes(c byte, b []byte) (v, rest []byte, ok bool) {
	var n uint64
	switch c {
	case amqp10.TypeBinary8, amqp10.TypeStr8, amqp10.TypeSym8:
		if len(b) < 1 {
			return nil, b, false
		}
		n, b = uint64(b[0]), b[1:]
	case amqp10.TypeBinary32, amqp10.TypeStr32, amqp10.TypeSym32:
		if len(b) < 4 {
			return nil, b, false
		}
		n, b = uint64(binary.BigEndian.Uint32(b)), b[4:]
	default:
		return nil, b, false
	}
	if uint64(len(b)) < n {
		return nil, b, false
	}
	return b[:n:n], b[n:], true
}

// readVar reads a value that must have constructor c8 or c32.
func readVar(b []byte, c8, c32 byte) (v, rest []byte, ok bool) {
	if len(b) == 0 || (b[0] != c8 && b[0] != c32) {
		return nil, b, false
	}
	return varBytes(b[0], b[1:])
}

// skipScalar skips the value of an unknown key: any fixed-width or
// variable-width value. Compound and described values are left to the
// generic decoder, which validates their contents.
func skipScalar(b []byte) ([]byte, error) {
	c := b[0]
	switch {
	case c == amqp10.TypeBoolean:
		if len(b) < 2 || b[1] > 1 {
			return b, errRawMalformed
		}
		return b[2:], nil
	case c>>4 >= 0x4 && c>>4 <= 0xb: // fixed width (0x4-0x9), variable width (0xa, 0xb)
		rest, err := amqp10.SkipValue(b)
		if err != nil {
			return b, errRawMalformed
		}
		return rest, nil
	}
	return b, errRawUnsupported
}
