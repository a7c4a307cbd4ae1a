package value

// Scalar is one simple value read in place from a message's encoding, for
// the code that inspects single fields of many messages (consumer filters):
// it is not boxed in an interface, and Bytes aliases the message's bytes,
// which are never modified, so reading a field allocates nothing.
type Scalar struct {
	Kind ScalarKind
	// Int holds KindInt, KindTimestamp (milliseconds since the Unix
	// epoch), KindChar and KindBool (1 is true).
	Int int64
	// Uint holds KindUint.
	Uint uint64
	// Float holds KindFloat.
	Float float64
	// Bytes holds KindString, KindSymbol, KindBinary and KindUUID. It
	// aliases the message: the reader must not modify or keep it.
	Bytes []byte
}

// ScalarKind is the type of a Scalar.
type ScalarKind uint8

// Scalar kinds.
const (
	// KindAbsent: the field is not there (no such key, no such section).
	KindAbsent ScalarKind = iota
	// KindNull: the field is there with the value null.
	KindNull
	KindBool
	// KindInt: byte, short, int or long.
	KindInt
	// KindUint: ubyte, ushort, uint or ulong.
	KindUint
	// KindFloat: float or double.
	KindFloat
	KindTimestamp
	KindChar
	KindString
	KindSymbol
	KindBinary
	KindUUID
	// KindOther: a value that is not a simple one (decimal, list, map,
	// array, described). Bytes is empty.
	KindOther
)
