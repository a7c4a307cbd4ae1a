package amqp091

import (
	"encoding/binary"
	"fmt"
)

// Property flags of class basic (section 4.2.6.1 and the class's field
// list): the first property is the most significant bit of the first
// flags word; bit 0 of each word says another word follows.
const (
	FlagContentType     uint16 = 1 << 15
	FlagContentEncoding uint16 = 1 << 14
	FlagHeaders         uint16 = 1 << 13
	FlagDeliveryMode    uint16 = 1 << 12
	FlagPriority        uint16 = 1 << 11
	FlagCorrelationID   uint16 = 1 << 10
	FlagReplyTo         uint16 = 1 << 9
	FlagExpiration      uint16 = 1 << 8
	FlagMessageID       uint16 = 1 << 7
	FlagTimestamp       uint16 = 1 << 6
	FlagType            uint16 = 1 << 5
	FlagUserID          uint16 = 1 << 4
	FlagAppID           uint16 = 1 << 3
	FlagClusterID       uint16 = 1 << 2
	flagContinuation    uint16 = 1
	flagsKnown                 = FlagContentType | FlagContentEncoding | FlagHeaders | FlagDeliveryMode |
		FlagPriority | FlagCorrelationID | FlagReplyTo | FlagExpiration | FlagMessageID | FlagTimestamp |
		FlagType | FlagUserID | FlagAppID | FlagClusterID
)

// Properties are the 14 properties of class basic. Flags says which are
// present: a present property with a zero value (priority 0, "" content
// type) is distinct from an absent one. The setters set the flag too.
//
//	content-type      shortstr   MIME content type
//	content-encoding  shortstr   MIME content encoding
//	headers           table      message header field table
//	delivery-mode     octet      1 non-persistent, 2 persistent
//	priority          octet      0 to 9
//	correlation-id    shortstr   application correlation identifier
//	reply-to          shortstr   address to reply to
//	expiration        shortstr   message expiration specification
//	message-id        shortstr   application message identifier
//	timestamp         timestamp  message timestamp (seconds)
//	type              shortstr   message type name
//	user-id           shortstr   creating user id
//	app-id            shortstr   creating application id
//	cluster-id        shortstr   reserved, must be empty (RabbitMQ passes it through)
type Properties struct {
	Flags           uint16
	ContentType     string
	ContentEncoding string
	Headers         Table
	DeliveryMode    uint8
	Priority        uint8
	CorrelationID   string
	ReplyTo         string
	Expiration      string
	MessageID       string
	Timestamp       uint64
	Type            string
	UserID          string
	AppID           string
	ClusterID       string
}

// Has reports whether the property of flag is present.
func (p *Properties) Has(flag uint16) bool { return p.Flags&flag != 0 }

// Decode decodes a property list (flags words, then the present
// properties in flag order) into p, replacing what it held. Flags words
// after the first are accepted when they set nothing but continuation;
// any flag this class does not define is an error, since the properties
// after it could not be found. Errors are *Error 501 frame-error, and
// leave p partly decoded.
func (p *Properties) Decode(b []byte) error {
	d := decoder{b: b}
	flags := d.short()
	if d.err == nil && flags&^(flagsKnown|flagContinuation) != 0 {
		return frameErr(ErrInvalidType, "cannot decode properties: unknown property flags %#04x", flags)
	}
	for more := flags&flagContinuation != 0; more && d.err == nil; {
		w := d.short()
		if w&^flagContinuation != 0 {
			return frameErr(ErrInvalidType, "cannot decode properties: unknown property flags word %#04x", w)
		}
		more = w&flagContinuation != 0
	}
	p.Flags = flags &^ flagContinuation
	// Strings are decoded over the previous ones, which saves the
	// allocation when a reused Properties sees the same value again.
	str := func(flag uint16, dst *string) {
		if p.Flags&flag == 0 {
			*dst = ""
			return
		}
		d.shortstrTo(dst, false)
	}
	str(FlagContentType, &p.ContentType)
	str(FlagContentEncoding, &p.ContentEncoding)
	p.Headers = nil
	if p.Has(FlagHeaders) {
		p.Headers = d.table()
	}
	p.DeliveryMode, p.Priority, p.Timestamp = 0, 0, 0
	if p.Has(FlagDeliveryMode) {
		p.DeliveryMode = d.octet()
	}
	if p.Has(FlagPriority) {
		p.Priority = d.octet()
	}
	str(FlagCorrelationID, &p.CorrelationID)
	str(FlagReplyTo, &p.ReplyTo)
	str(FlagExpiration, &p.Expiration)
	str(FlagMessageID, &p.MessageID)
	if p.Has(FlagTimestamp) {
		p.Timestamp = d.longlong()
	}
	str(FlagType, &p.Type)
	str(FlagUserID, &p.UserID)
	str(FlagAppID, &p.AppID)
	str(FlagClusterID, &p.ClusterID)
	if err := d.finish(); err != nil {
		return frameErr(err, "cannot decode properties")
	}
	return nil
}

// Append appends the flags word and the present properties. It
// allocates nothing when b has capacity; it fails for a shortstr over 255
// octets or a header value it cannot encode, returning b unchanged.
func (p *Properties) Append(b []byte) ([]byte, error) {
	start := len(b)
	flags := p.Flags & flagsKnown
	b = binary.BigEndian.AppendUint16(b, flags)
	var err error
	str := func(flag uint16, name, s string) {
		if err != nil || flags&flag == 0 {
			return
		}
		if len(s) > 255 {
			err = shortstrErr(name, len(s))
			return
		}
		b = appendShortstr(b, s)
	}
	str(FlagContentType, "content-type", p.ContentType)
	str(FlagContentEncoding, "content-encoding", p.ContentEncoding)
	if err == nil && flags&FlagHeaders != 0 {
		b, err = AppendTable(b, p.Headers)
	}
	if flags&FlagDeliveryMode != 0 {
		b = append(b, p.DeliveryMode)
	}
	if flags&FlagPriority != 0 {
		b = append(b, p.Priority)
	}
	str(FlagCorrelationID, "correlation-id", p.CorrelationID)
	str(FlagReplyTo, "reply-to", p.ReplyTo)
	str(FlagExpiration, "expiration", p.Expiration)
	str(FlagMessageID, "message-id", p.MessageID)
	if flags&FlagTimestamp != 0 {
		b = binary.BigEndian.AppendUint64(b, p.Timestamp)
	}
	str(FlagType, "type", p.Type)
	str(FlagUserID, "user-id", p.UserID)
	str(FlagAppID, "app-id", p.AppID)
	str(FlagClusterID, "cluster-id", p.ClusterID)
	if err != nil {
		return b[:start], fmt.Errorf("properties: %w", err)
	}
	return b, nil
}
