package amqpnode

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// Response bodies are encoded as RabbitMQ 4.3's rabbit_amqp_management
// encodes them, so that every client decodes the same values from epitaph
// as from RabbitMQ. Its encoder (amqp10_binary_generator) writes what our
// amqp10 encoder writes (the smallest integer, string and compound forms)
// except for these:
//
//   - a tagged boolean is 0x56 0x01 / 0x56 0x00, never 0x41 / 0x42: the
//     queue's durable, auto_delete and exclusive, and boolean arguments.
//     A client that reads 0x56 as a number (rhea) sees 1 and 0 there, as
//     it does against RabbitMQ;
//   - queue and binding arguments come back as RabbitMQ stores them (AMQP
//     0-9-1 field tables, mc_amqpl's to_091 then from_091): symbol values
//     become utf8 strings, ulong becomes long, binary becomes utf8 when it
//     is valid UTF-8 without NUL, timestamps lose their milliseconds,
//     arrays become lists, nested maps get symbol keys.

// rabbitBool is RabbitMQ's encoding of a tagged boolean ({boolean, B}).
func rabbitBool(b bool) amqp10.Raw {
	if b {
		return amqp10.Raw{amqp10.TypeBoolean, 0x01}
	}
	return amqp10.Raw{amqp10.TypeBoolean, 0x00}
}

// rabbitArguments is an arguments map as RabbitMQ returns it: utf8 keys,
// values through rabbitArgValue. sorted sorts the keys (bytewise), as
// RabbitMQ sorts a table it changed (x-queue-type added) and binding
// arguments; otherwise the order is kept.
func rabbitArguments(args amqp10.Map, sorted bool) amqp10.Map {
	out := make(amqp10.Map, 0, len(args))
	for _, kv := range args {
		out = append(out, amqp10.KV{Key: keyString(kv.Key), Value: rabbitArgValue(kv.Value)})
	}
	if sorted {
		slices.SortStableFunc(out, func(a, b amqp10.KV) int { return strings.Compare(a.Key.(string), b.Key.(string)) })
	}
	return out
}

func keyString(k any) string {
	switch k := k.(type) {
	case string:
		return k
	case amqp10.Symbol:
		return string(k)
	}
	return ""
}

// rabbitArgValue is one argument value after RabbitMQ's round trip
// through an AMQP 0-9-1 field table (mc_amqpl to_091, then from_091).
func rabbitArgValue(v any) any {
	switch x := v.(type) {
	case bool:
		return rabbitBool(x)
	case amqp10.Symbol:
		return string(x)
	case uint64:
		return int64(x) // {ulong, V} becomes a 0-9-1 long
	case uint:
		return int64(x)
	case int:
		return int64(x)
	case []byte:
		// from_091(longstr): utf8 when valid UTF-8 without NUL, else binary.
		if utf8.Valid(x) && !slices.Contains(x, 0) {
			return string(x)
		}
		return x
	case amqp10.Timestamp:
		return amqp10.Timestamp(int64(x) / 1000 * 1000) // 0-9-1 timestamps are seconds
	case amqp10.List:
		out := make(amqp10.List, len(x))
		for i := range x {
			out[i] = rabbitArgValue(x[i])
		}
		return out
	case []any:
		return rabbitArgValue(amqp10.List(x))
	case *amqp10.Array:
		if x == nil {
			return nil
		}
		return rabbitArgValue(amqp10.List(x.Elems))
	case amqp10.Map:
		out := make(amqp10.Map, 0, len(x))
		for _, kv := range x {
			out = append(out, amqp10.KV{Key: amqp10.Symbol(keyString(kv.Key)), Value: rabbitArgValue(kv.Value)})
		}
		return out
	}
	return v
}
