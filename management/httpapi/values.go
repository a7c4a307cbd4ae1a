package httpapi

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// arguments converts a JSON object (decoded with UseNumber) into AMQP
// arguments with string keys, sorted by key: integral numbers become int64,
// other numbers float64, objects maps, arrays lists. null values are a 400.
func arguments(what string, m map[string]any) (amqp10.Map, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(amqp10.Map, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := fromJSON(m[k])
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "%s: argument '%s': %v", what, k, err)
		}
		out = append(out, amqp10.KV{Key: k, Value: v})
	}
	return out, nil
}

func fromJSON(v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, fmt.Errorf("null is not a valid value")
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s out of range", x)
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return int64(f), nil
		}
		return f, nil
	case string, bool:
		return x, nil
	case map[string]any:
		out := make(amqp10.Map, 0, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			e, err := fromJSON(x[k])
			if err != nil {
				return nil, err
			}
			out = append(out, amqp10.KV{Key: k, Value: e})
		}
		return out, nil
	case []any:
		out := make(amqp10.List, len(x))
		for i := range x {
			e, err := fromJSON(x[i])
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported JSON value %T", v)
}

// mapJSON renders an AMQP map as a JSON object (never nil, so it
// encodes as {}). Non-string keys are formatted.
func mapJSON(m amqp10.Map) map[string]any {
	out := make(map[string]any, len(m))
	for _, kv := range m {
		out[keyJSON(kv.Key)] = valueJSON(kv.Value)
	}
	return out
}

func keyJSON(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case amqp10.Symbol:
		return string(x)
	}
	return fmt.Sprint(valueJSON(k))
}

// valueJSON renders an AMQP value as JSON-encodable data.
func valueJSON(v any) any {
	switch x := v.(type) {
	case nil, bool, string, int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return x
	case float32:
		return floatJSON(float64(x))
	case float64:
		return floatJSON(x)
	case amqp10.Symbol:
		return string(x)
	case amqp10.Timestamp:
		return int64(x)
	case amqp10.Char:
		return string(rune(x))
	case amqp10.UUID:
		b := x[:]
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	case amqp10.Decimal32:
		return hex.EncodeToString(x[:])
	case amqp10.Decimal64:
		return hex.EncodeToString(x[:])
	case amqp10.Decimal128:
		return hex.EncodeToString(x[:])
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case amqp10.Map:
		return mapJSON(x)
	case amqp10.List:
		out := make([]any, len(x))
		for i := range x {
			out[i] = valueJSON(x[i])
		}
		return out
	case *amqp10.Array:
		if x == nil {
			return []any{}
		}
		out := make([]any, len(x.Elems))
		for i := range x.Elems {
			out[i] = valueJSON(x.Elems[i])
		}
		return out
	case *amqp10.Described:
		if x == nil {
			return nil
		}
		return map[string]any{"descriptor": valueJSON(x.Descriptor), "value": valueJSON(x.Value)}
	}
	return fmt.Sprint(v)
}

// floatJSON keeps NaN and infinities, which JSON cannot carry, as strings.
func floatJSON(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return f
}
