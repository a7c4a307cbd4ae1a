package amqp10

import "github.com/epitaph-mq/epitaph/value"

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

// The decoded types are the protocol-neutral value model's: aliases, so
// that the codec reads and writes the broker's values without a conversion.
type (
	Symbol     = value.Symbol
	Timestamp  = value.Timestamp
	UUID       = value.UUID
	Char       = value.Char
	Decimal32  = value.Decimal32
	Decimal64  = value.Decimal64
	Decimal128 = value.Decimal128
	List       = value.List
	KV         = value.KV
	Map        = value.Map
	Array      = value.Array
	Described  = value.Described
)

// Raw is one AMQP value already encoded: AppendValue writes its bytes
// verbatim. It lets a producer that builds a value often encode it
// straight to bytes (the broker's x-opt-deaths); ReadValue decodes it
// into the ordinary types. A Raw must hold exactly one well-formed value.
type Raw []byte

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
