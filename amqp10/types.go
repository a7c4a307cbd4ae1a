package amqp10

// Go representations of decoded AMQP values (ReadValue returns these):
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
//	binary     []byte (aliases the input buffer)
//	string     string
//	symbol     Symbol
//	list       List
//	map        Map (ordered; duplicate-free as decoded)
//	array      *Array
//	described  *Described

// Symbol is an AMQP symbol (ASCII).
type Symbol string

// Timestamp is an AMQP timestamp: milliseconds since the Unix epoch.
type Timestamp int64

// UUID is an AMQP uuid.
type UUID [16]byte

// Char is an AMQP char: a UTF-32BE code point.
type Char rune

// Decimal32 is an IEEE 754 decimal32 kept as its raw big-endian bytes.
type Decimal32 [4]byte

// Decimal64 is an IEEE 754 decimal64 kept as its raw big-endian bytes.
type Decimal64 [8]byte

// Decimal128 is an IEEE 754 decimal128 kept as its raw big-endian bytes.
type Decimal128 [16]byte

// List is an AMQP list.
type List []any

// KV is one entry of a Map.
type KV struct {
	Key   any
	Value any
}

// Map is an AMQP map. It keeps the wire order of its entries, which matters
// for byte-exact annotations such as x-opt-deaths.
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

// Raw is one AMQP value already encoded: AppendValue writes its bytes
// verbatim. It lets a producer that builds a value often encode it
// straight to bytes (the broker's x-opt-deaths); ReadValue decodes it
// into the ordinary types. A Raw must hold exactly one well-formed value.
type Raw []byte

// Array is an AMQP array: every element has the same constructor.
//
// Type is the element type code the encoder writes. Encoders use the
// 4-byte-width forms inside arrays, as RabbitMQ does: TypeStr32 (0xb1),
// TypeSym32 (0xb3), TypeMap32 (0xd1), TypeList32 (0xd0), TypeArray32 (0xf0),
// TypeBinary32 (0xb0), TypeULong (0x80), TypeUint (0x70), TypeLong (0x81),
// TypeInt (0x71), TypeTimestamp (0x83), TypeBoolean (0x56), ... .
// For an array of described values, Descriptor is set and Type is the
// constructor of the described values' underlying type.
type Array struct {
	Type       byte
	Descriptor any
	Elems      []any
}

// Described is a described value whose descriptor is not one the decoder
// knows (performatives, sections and delivery states are decoded into their
// own types instead).
type Described struct {
	Descriptor any // uint64 or Symbol
	Value      any
}

// Type codes (constructors) of the AMQP 1.0 type system, section 1.6.
const (
	TypeDescribed  byte = 0x00
	TypeNull       byte = 0x40
	TypeBoolean    byte = 0x56
	TypeTrue       byte = 0x41
	TypeFalse      byte = 0x42
	TypeUbyte      byte = 0x50
	TypeUshort     byte = 0x60
	TypeUint       byte = 0x70
	TypeSmallUint  byte = 0x52
	TypeUint0      byte = 0x43
	TypeULong      byte = 0x80
	TypeSmallULong byte = 0x53
	TypeULong0     byte = 0x44
	TypeByte       byte = 0x51
	TypeShort      byte = 0x61
	TypeInt        byte = 0x71
	TypeSmallInt   byte = 0x54
	TypeLong       byte = 0x81
	TypeSmallLong  byte = 0x55
	TypeFloat      byte = 0x72
	TypeDouble     byte = 0x82
	TypeDecimal32  byte = 0x74
	TypeDecimal64  byte = 0x84
	TypeDecimal128 byte = 0x94
	TypeChar       byte = 0x73
	TypeTimestamp  byte = 0x83
	TypeUUID       byte = 0x98
	TypeBinary8    byte = 0xa0
	TypeBinary32   byte = 0xb0
	TypeStr8       byte = 0xa1
	TypeStr32      byte = 0xb1
	TypeSym8       byte = 0xa3
	TypeSym32      byte = 0xb3
	TypeList0      byte = 0x45
	TypeList8      byte = 0xc0
	TypeList32     byte = 0xd0
	TypeMap8       byte = 0xc1
	TypeMap32      byte = 0xd1
	TypeArray8     byte = 0xe0
	TypeArray32    byte = 0xf0
)
