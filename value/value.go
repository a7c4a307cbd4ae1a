// Package value is the broker's protocol-neutral value model: the types of
// queue and exchange arguments, binding arguments, policy definitions,
// header values a headers exchange matches, and the annotations the broker
// keeps on a message (modified-outcome annotations, the trace context).
//
// The model is the AMQP type system (AMQP 1.0 section 1.6), which is a
// superset of AMQP 0.9.1's field-table types; RabbitMQ 4's message
// containers use the same model for their x-headers. Each protocol's front
// end maps its own encoding onto these types: package amqp10 declares its
// decoded types as aliases of these (amqp10.Map is value.Map), so its codec
// reads and writes them without a conversion. This package holds types and
// their helpers only, no codec, and imports nothing from the module.
//
// Go representations:
//
//	null       nil
//	boolean    bool
//	ubyte      uint8      byte   int8
//	ushort     uint16     short  int16
//	uint       uint32     int    int32
//	ulong      uint64     long   int64
//	float      float32    double float64
//	decimal32  Decimal32  decimal64 Decimal64  decimal128 Decimal128
//	char       Char
//	timestamp  Timestamp (milliseconds since the Unix epoch)
//	uuid       UUID
//	binary     []byte
//	string     string
//	symbol     Symbol
//	list       List
//	map        Map (ordered)
//	array      *Array
//	described  *Described
package value

// Symbol is an AMQP symbol (ASCII); 0.9.1 has no symbol type and carries
// one as a string.
type Symbol string

// Timestamp is a point in time: milliseconds since the Unix epoch.
type Timestamp int64

// UUID is a 16-byte universally unique identifier.
type UUID [16]byte

// Char is a single Unicode code point.
type Char rune

// Decimal32 is an IEEE 754 decimal32 kept as its raw big-endian bytes.
type Decimal32 [4]byte

// Decimal64 is an IEEE 754 decimal64 kept as its raw big-endian bytes.
type Decimal64 [8]byte

// Decimal128 is an IEEE 754 decimal128 kept as its raw big-endian bytes.
type Decimal128 [16]byte

// List is a sequence of values of any types.
type List []any

// KV is one entry of a Map.
type KV struct {
	Key   any
	Value any
}

// Map is a map that keeps the order of its entries, which matters for
// byte-exact annotations such as RabbitMQ's dead-letter history.
type Map []KV

// Get returns the value stored under key (compared with ==; keys are
// comparable scalar values such as Symbol, string, uint64).
func (m Map) Get(key any) (any, bool) {
	for i := range m {
		if m[i].Key == key {
			return m[i].Value, true
		}
	}
	return nil, false
}

// Set replaces the value under key, or appends the entry when absent.
func (m Map) Set(key, value any) Map {
	for i := range m {
		if m[i].Key == key {
			m[i].Value = value
			return m
		}
	}
	return append(m, KV{Key: key, Value: value})
}

// Delete removes key, keeping the order of the other entries.
func (m Map) Delete(key any) Map {
	for i := range m {
		if m[i].Key == key {
			return append(m[:i:i], m[i+1:]...)
		}
	}
	return m
}

// Array is an array: every element has the same type.
//
// Type is the AMQP 1.0 element constructor an encoder writes (for example
// 0xb1 str32, 0xb3 sym32, 0xd1 map32, 0x80 ulong; see package amqp10's
// Type* constants). For an array of described values, Descriptor is set and
// Type is the constructor of the described values' underlying type.
type Array struct {
	Type       byte
	Descriptor any
	Elems      []any
}

// Described is a described value whose descriptor no decoder maps onto a
// type of its own.
type Described struct {
	Descriptor any // uint64 or Symbol
	Value      any
}
