package amqp10

// CONTRACT STUBS: every function below is part of the package API that other
// packages are written against. Implement each one in its proper file
// (encode.go, decode.go, frame.go, performatives.go, message.go, ...) and
// delete it from this file; this file must be gone when the codec is done.

// ---- encode.go ----

// AppendNull appends null.
func AppendNull(b []byte) []byte { panic("unimplemented") }

// AppendBool appends true/false (0x41/0x42).
func AppendBool(b []byte, v bool) []byte { panic("unimplemented") }

// AppendUbyte appends a ubyte.
func AppendUbyte(b []byte, v uint8) []byte { panic("unimplemented") }

// AppendUshort appends a ushort.
func AppendUshort(b []byte, v uint16) []byte { panic("unimplemented") }

// AppendUint appends the smallest encoding of v (uint0, smalluint, uint).
func AppendUint(b []byte, v uint32) []byte { panic("unimplemented") }

// AppendULong appends the smallest encoding of v (ulong0, smallulong, ulong).
func AppendULong(b []byte, v uint64) []byte { panic("unimplemented") }

// AppendInt appends the smallest encoding of v (smallint, int).
func AppendInt(b []byte, v int32) []byte { panic("unimplemented") }

// AppendLong appends the smallest encoding of v (smalllong, long).
func AppendLong(b []byte, v int64) []byte { panic("unimplemented") }

// AppendTimestamp appends a timestamp (0x83).
func AppendTimestamp(b []byte, v Timestamp) []byte { panic("unimplemented") }

// AppendBinary appends vbin8 or vbin32.
func AppendBinary(b []byte, v []byte) []byte { panic("unimplemented") }

// AppendString appends str8-utf8 (len <= 255) or str32-utf8.
func AppendString(b []byte, v string) []byte { panic("unimplemented") }

// AppendSymbol appends sym8 or sym32.
func AppendSymbol(b []byte, v Symbol) []byte { panic("unimplemented") }

// AppendSymbols appends a multiple="true" symbol field: null when empty, a
// single symbol when len is 1, otherwise an array of symbols.
func AppendSymbols(b []byte, v []Symbol) []byte { panic("unimplemented") }

// AppendDescriptor appends the described-type constructor 0x00 and a numeric
// descriptor (smallulong when it fits).
func AppendDescriptor(b []byte, code uint64) []byte { panic("unimplemented") }

// AppendMap appends m as map8/map32, keys in order.
func AppendMap(b []byte, m Map) ([]byte, error) { panic("unimplemented") }

// AppendValue appends any value of the types listed in types.go, plus the
// Go conveniences []string (array of str32), []Symbol (array of sym32),
// []Map (array of map32), int (long), uint (ulong). Unsupported Go types
// return an error wrapping ErrInvalidType.
func AppendValue(b []byte, v any) ([]byte, error) { panic("unimplemented") }

// ---- decode.go ----

// ReadValue decodes one value of any type (see types.go for the Go types).
// Nesting is limited to MaxDepth, element counts are checked against the
// bytes actually present before anything is allocated.
func ReadValue(b []byte) (v any, rest []byte, err error) { panic("unimplemented") }

// SkipValue skips one encoded value without allocating.
func SkipValue(b []byte) (rest []byte, err error) { panic("unimplemented") }

// ReadMap decodes a map (or null, giving a nil Map).
func ReadMap(b []byte) (m Map, rest []byte, err error) { panic("unimplemented") }

// ReadString decodes a str8/str32 (null gives "", false).
func ReadString(b []byte) (v string, ok bool, rest []byte, err error) { panic("unimplemented") }

// ReadUint decodes a uint in any width (null gives 0, false).
func ReadUint(b []byte) (v uint32, ok bool, rest []byte, err error) { panic("unimplemented") }

// ReadULong decodes a ulong in any width (null gives 0, false).
func ReadULong(b []byte) (v uint64, ok bool, rest []byte, err error) { panic("unimplemented") }

// ---- frame.go ----

// ParseFrameHeader parses the 8-byte frame header and validates SIZE >= 8,
// DOFF >= 2 and DOFF*4 <= SIZE (errors wrap ErrInvalidField).
func ParseFrameHeader(b []byte) (FrameHeader, error) { panic("unimplemented") }

// AppendFrame appends a whole frame: the header (DOFF 2), the performative,
// then payload (transfer payload, or nil); the size is backpatched.
// It allocates nothing when b has capacity.
func AppendFrame(b []byte, typ byte, channel uint16, p Performative, payload []byte) []byte {
	panic("unimplemented")
}

// AppendHeartbeat appends an empty AMQP frame (8 bytes, no body).
func AppendHeartbeat(b []byte) []byte { panic("unimplemented") }

// PeekDescriptor returns the numeric descriptor of the described value that
// starts body (symbolic descriptors of the spec's types are mapped to their codes).
func PeekDescriptor(body []byte) (uint64, error) { panic("unimplemented") }

// ParsePerformative decodes a frame body (after the extended header) into a
// newly allocated performative (one of *Open, *Begin, *Attach, *Flow,
// *Transfer, *Disposition, *Detach, *End, *Close, or a SASL frame) and
// returns the bytes after it (the transfer payload). Unknown descriptors
// return an error wrapping ErrInvalidType; wrong field types or missing
// mandatory fields wrap ErrInvalidField.
func ParsePerformative(body []byte) (Performative, []byte, error) { panic("unimplemented") }

// Unmarshal decodes a transfer body into t (which the caller owns and may
// reuse) and returns the payload that follows. It allocates nothing for the
// common outcomes.
func (t *Transfer) Unmarshal(body []byte) (payload []byte, err error) { panic("unimplemented") }

// ---- message.go ----

// ParseMessage scans the sections of a message payload. It checks the order
// (header, delivery-annotations, message-annotations, properties,
// application-properties, body of data*|amqp-sequence*|amqp-value, footer;
// each at most once except repeated data/sequence), validates that every
// message-annotations key is a symbol beginning with "x-" (ErrReservedAnnotation),
// decodes the header, and keeps the other sections as raw byte ranges.
// Errors wrap ErrSectionOrder, ErrReservedAnnotation or a decode error.
func ParseMessage(payload []byte) (*Message, error) { panic("unimplemented") }

// AnnotationMap decodes the message-annotations section (nil when absent).
func (m *Message) AnnotationMap() (Map, error) { panic("unimplemented") }

// Properties decodes the properties section (nil, nil when absent).
func (m *Message) Properties() (*Properties, error) { panic("unimplemented") }

// ApplicationProperties decodes the application-properties section (nil when absent).
func (m *Message) ApplicationProperties() (Map, error) { panic("unimplemented") }

// Size is the size counted against max-length-bytes: bare message plus footer.
func (m *Message) Size() int { return len(m.Bare) + len(m.Footer) }

// AppendDelivery appends the message as the broker delivers it: the header
// h (always written), then a message-annotations section holding first the
// entries of ann (broker-set keys, in order) and then the original
// annotations whose keys are not in ann (no section when both are empty),
// then Bare and Footer byte for byte. Delivery annotations are dropped.
func (m *Message) AppendDelivery(b []byte, h *Header, ann Map) ([]byte, error) {
	panic("unimplemented")
}

// WithAnnotations returns a copy of m whose header is h and whose message
// annotations are exactly ann (re-encoded); the bare message and footer
// are shared with m. Used to build dead-letter copies.
func (m *Message) WithAnnotations(h Header, ann Map) (*Message, error) { panic("unimplemented") }

// AppendProperties appends a properties section (used to build management responses).
func AppendProperties(b []byte, p *Properties) ([]byte, error) { panic("unimplemented") }

// AppendApplicationProperties appends an application-properties section.
func AppendApplicationProperties(b []byte, m Map) ([]byte, error) { panic("unimplemented") }

// AppendAMQPValue appends an amqp-value body section holding v.
func AppendAMQPValue(b []byte, v any) ([]byte, error) { panic("unimplemented") }

// AppendData appends a data body section.
func AppendData(b []byte, data []byte) []byte { panic("unimplemented") }

// Append encodes each performative and SASL frame as a described list
// (list0/list8/list32, trailing null fields omitted).
func (p *Open) Append(b []byte) []byte           { panic("unimplemented") }
func (p *Begin) Append(b []byte) []byte          { panic("unimplemented") }
func (p *Attach) Append(b []byte) []byte         { panic("unimplemented") }
func (p *Flow) Append(b []byte) []byte           { panic("unimplemented") }
func (p *Transfer) Append(b []byte) []byte       { panic("unimplemented") }
func (p *Disposition) Append(b []byte) []byte    { panic("unimplemented") }
func (p *Detach) Append(b []byte) []byte         { panic("unimplemented") }
func (p *End) Append(b []byte) []byte            { panic("unimplemented") }
func (p *Close) Append(b []byte) []byte          { panic("unimplemented") }
func (p *SASLMechanisms) Append(b []byte) []byte { panic("unimplemented") }
func (p *SASLInit) Append(b []byte) []byte       { panic("unimplemented") }
func (p *SASLChallenge) Append(b []byte) []byte  { panic("unimplemented") }
func (p *SASLResponse) Append(b []byte) []byte   { panic("unimplemented") }
func (p *SASLOutcome) Append(b []byte) []byte    { panic("unimplemented") }
