package router

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/epitaph-mq/epitaph/value"
)

// toInt64 normalises any AMQP integer, a Go int, an integral float64 (JSON)
// or a json.Number to int64.
func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint:
		if uint64(n) > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || n > math.MaxInt64 || n < math.MinInt64 || math.IsNaN(n) {
			return 0, false
		}
		return int64(n), true
	case float32:
		return toInt64(float64(n))
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		if f, err := n.Float64(); err == nil {
			return toInt64(f)
		}
	}
	return 0, false
}

// toString accepts string and symbol values.
func toString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case value.Symbol:
		return string(s), true
	}
	return "", false
}

// numeric is a number compared by value across AMQP widths.
type numeric struct {
	isFloat bool
	neg     bool // for integers: the value is negative (i holds it)
	i       int64
	u       uint64 // non-negative integers
	f       float64
}

func asNumeric(v any) (numeric, bool) {
	switch n := v.(type) {
	case int, int8, int16, int32, int64, value.Timestamp:
		var i int64
		switch x := n.(type) {
		case int:
			i = int64(x)
		case int8:
			i = int64(x)
		case int16:
			i = int64(x)
		case int32:
			i = int64(x)
		case int64:
			i = x
		case value.Timestamp:
			i = int64(x)
		}
		if i < 0 {
			return numeric{neg: true, i: i}, true
		}
		return numeric{u: uint64(i)}, true
	case uint:
		return numeric{u: uint64(n)}, true
	case uint8:
		return numeric{u: uint64(n)}, true
	case uint16:
		return numeric{u: uint64(n)}, true
	case uint32:
		return numeric{u: uint64(n)}, true
	case uint64:
		return numeric{u: n}, true
	case float32:
		return numeric{isFloat: true, f: float64(n)}, true
	case float64:
		return numeric{isFloat: true, f: n}, true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return asNumeric(i)
		}
		if f, err := n.Float64(); err == nil {
			return numeric{isFloat: true, f: f}, true
		}
	}
	return numeric{}, false
}

func (a numeric) float() float64 {
	switch {
	case a.isFloat:
		return a.f
	case a.neg:
		return float64(a.i)
	}
	return float64(a.u)
}

func (a numeric) equal(b numeric) bool {
	if a.isFloat || b.isFloat {
		af, bf := a.float(), b.float()
		if af != bf {
			return false
		}
		// Guard against float rounding making distinct integers equal.
		if !a.isFloat {
			return b.f == math.Trunc(b.f) && intEqualsFloat(a, bf)
		}
		if !b.isFloat {
			return a.f == math.Trunc(a.f) && intEqualsFloat(b, af)
		}
		return true
	}
	if a.neg != b.neg {
		return false
	}
	if a.neg {
		return a.i == b.i
	}
	return a.u == b.u
}

func intEqualsFloat(n numeric, f float64) bool {
	if n.neg {
		if f < math.MinInt64 {
			return false
		}
		return int64(f) == n.i
	}
	if f >= math.MaxUint64 || f < 0 {
		return false
	}
	return uint64(f) == n.u
}

// valueString gives string, symbol and binary values as a string.
func valueString(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case value.Symbol:
		return string(s), true
	case []byte:
		return string(s), true
	}
	return "", false
}

// valuesEqual compares values, not AMQP types: numbers are equal when
// numerically equal across widths, and string, symbol and binary compare
// by content. Lists and maps compare element-wise (maps ignore order).
func valuesEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if na, ok := asNumeric(a); ok {
		nb, ok := asNumeric(b)
		return ok && na.equal(nb)
	}
	if sa, ok := valueString(a); ok {
		sb, ok := valueString(b)
		return ok && sa == sb
	}
	switch x := a.(type) {
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case value.List:
		y, ok := b.(value.List)
		return ok && listsEqual(x, y)
	case []any:
		y, ok := b.([]any)
		return ok && listsEqual(x, y)
	case value.Map:
		y, ok := b.(value.Map)
		return ok && mapsEqual(x, y)
	case *value.Array:
		y, ok := b.(*value.Array)
		return ok && (x == y || (x != nil && y != nil && valuesEqual(x.Descriptor, y.Descriptor) && listsEqual(x.Elems, y.Elems)))
	case value.UUID:
		y, ok := b.(value.UUID)
		return ok && x == y
	case value.Char:
		y, ok := b.(value.Char)
		return ok && x == y
	case *value.Described:
		y, ok := b.(*value.Described)
		return ok && (x == y || (x != nil && y != nil && valuesEqual(x.Descriptor, y.Descriptor) && valuesEqual(x.Value, y.Value)))
	}
	return false
}

func listsEqual[T any](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !valuesEqual(any(a[i]), any(b[i])) {
			return false
		}
	}
	return true
}

// mapsEqual compares two maps ignoring entry order; keys compare by value
// (so string and symbol keys are the same key).
func mapsEqual(a, b value.Map) bool {
	if len(a) != len(b) {
		return false
	}
	for _, kv := range a {
		v, ok := lookupValueKey(b, kv.Key)
		if !ok || !valuesEqual(kv.Value, v) {
			return false
		}
	}
	return true
}

func lookupValueKey(m value.Map, key any) (any, bool) {
	for _, kv := range m {
		if valuesEqual(kv.Key, key) {
			return kv.Value, true
		}
	}
	return nil, false
}

// lookupKey finds a string or symbol key named name.
func lookupKey(m value.Map, name string) (any, bool) {
	for _, kv := range m {
		if k, ok := keyString(kv.Key); ok && k == name {
			return kv.Value, true
		}
	}
	return nil, false
}

// isSimple reports whether v is a simple (non-compound) value, as the
// headers exchange sees message annotations.
func isSimple(v any) bool {
	switch v.(type) {
	case nil, value.List, []any, value.Map, *value.Array, *value.Described:
		return false
	}
	return true
}

// normaliseAnnotation types a modified-outcome annotation value as RabbitMQ
// stores it: integers and timestamps become long, string/symbol/binary
// become string, booleans stay; lists, maps and arrays are kept verbatim.
func normaliseAnnotation(v any) any {
	switch x := v.(type) {
	case value.Timestamp:
		return int64(x)
	case string:
		return x
	case value.Symbol:
		return string(x)
	case []byte:
		return string(bytes.Clone(x))
	case bool:
		return x
	case uint64:
		return int64(x) // RabbitMQ stores it as a long (wrapping)
	case uint:
		return int64(x)
	}
	if i, ok := toInt64(v); ok {
		switch v.(type) {
		case float32, float64, json.Number:
			return v
		}
		return i
	}
	return v
}

// fromJSON converts a value decoded by encoding/json (with UseNumber) into
// AMQP values: integral numbers become int64, others float64, objects an
// value.Map with string keys sorted by key, arrays an value.List.
func fromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return f
		}
		return string(x)
	case float64:
		if i, ok := toInt64(x); ok {
			return i
		}
		return x
	case map[string]any:
		return mapFromJSON(x)
	case []any:
		l := make(value.List, len(x))
		for i := range x {
			l[i] = fromJSON(x[i])
		}
		return l
	}
	return v
}

func mapFromJSON(m map[string]any) value.Map {
	if m == nil {
		return nil
	}
	out := make(value.Map, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, value.KV{Key: k, Value: fromJSON(m[k])})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
