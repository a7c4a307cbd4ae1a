package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/internal/testhooks"
)

// The malformed-input corpus: each row reaches a
// state over a raw socket, sends bytes, and expects one reply at one scope.
// After every row the broker must still accept a valid connection.

// confState is how far a row's connection gets before its bytes are sent.
type confState int

const (
	stNone       confState = iota // nothing sent
	stSASL                        // SASL header exchanged, sasl-mechanisms read
	stAMQPHdr                     // AMQP header exchanged (no SASL), before open
	stOpened                      // open exchanged
	stSession                     // a session on channel 0
	stLink                        // a publisher link, handle 0, to /queues/q, with credit
	stSecondLink                  // as stLink, with rcv-settle-mode second
)

func (s confState) String() string {
	return [...]string{"none", "sasl", "amqp-header", "opened", "session", "link", "link(second)"}[s]
}

// confScope is where the broker answers: the smallest scope (link, session,
// connection) that contains the error.
type confScope string

const (
	scopeHeader  confScope = "H" // our protocol header, then the socket closes
	scopeSASL    confScope = "A" // sasl-outcome, then the socket closes
	scopeConn    confScope = "C" // close with an error, then the socket closes
	scopeSession confScope = "S" // end with an error; the connection lives on
	scopeLink    confScope = "L" // detach(closed) with an error
	scopeOutcome confScope = "O" // a disposition with the outcome
	scopeSilent  confScope = "X" // the socket closes without a reply (handshake time-out)
)

type confRow struct {
	id, section string
	broker      string // key of confBrokers; "" is the default broker
	state       confState
	send        []byte           // raw bytes sent once state is reached
	sendFn      func(r *rawConn) // or a sequence of writes
	scope       confScope
	want        amqp10.ErrCond   // the condition (C, S, L; O rejected)
	outcome     amqp10.StateKind // O: the outcome's kind
	saslCode    uint8            // A: the sasl-outcome code
}

// confBrokers are the broker configurations rows run against.
var confBrokers = map[string]func(*epitaph.Options){
	"": func(*epitaph.Options) {},
	"sasl-only": func(o *epitaph.Options) {
		o.Anonymous = "none"
	},
	"fast-handshake": func(o *epitaph.Options) { o.HandshakeTimeout = 200 * time.Millisecond },
	"fast-idle":      func(o *epitaph.Options) { o.IdleTimeout = 300 * time.Millisecond },
	"alarm": func(o *epitaph.Options) {
		o.MemoryHighWatermark = 1 << 30
		testhooks.SetAlarms(o, testhooks.Alarms{MemoryUsed: func() uint64 { return 1 << 31 }})
	},
	"small": func(o *epitaph.Options) {
		o.MaxMessageSize = 1000
		o.MaxLinksPerConnection = 2
		o.MaxUnfinishedBytes = 1500
		o.MaxUnsettledIncoming = 1
	},
}

const confDefs = `{"queues":[{"name":"q","vhost":"/","durable":true,"arguments":{}},
 {"name":"full","vhost":"/","durable":true,"arguments":{"x-max-length":0,"x-overflow":"reject-publish"}}]}`

// Frame-building helpers.

func frame(ch uint16, p amqp10.Performative, payload []byte) []byte {
	return amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, ch, p, payload)
}

// rawFrame builds a frame from its parts, whatever they are.
func rawFrame(size uint32, doff, typ byte, ch uint16, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, size)
	b = append(b, doff, typ)
	b = binary.BigEndian.AppendUint16(b, ch)
	return append(b, body...)
}

// bodyFrame is a well-formed AMQP frame on channel ch around body.
func bodyFrame(ch uint16, body []byte) []byte {
	return rawFrame(uint32(8+len(body)), 2, amqp10.FrameTypeAMQP, ch, body)
}

func saslFrame(p amqp10.Performative) []byte {
	return amqp10.AppendFrame(nil, amqp10.FrameTypeSASL, 0, p, nil)
}

// described encodes a described list (a performative) of raw field encodings.
func described(code byte, fields ...[]byte) []byte {
	var body []byte
	for _, f := range fields {
		body = append(body, f...)
	}
	if len(body) < 250 {
		b := []byte{0x00, 0x53, code, 0xc0, byte(len(body) + 1), byte(len(fields))}
		return append(b, body...)
	}
	b := binary.BigEndian.AppendUint32([]byte{0x00, 0x53, code, 0xd0}, uint32(len(body)+4))
	b = binary.BigEndian.AppendUint32(b, uint32(len(fields)))
	return append(b, body...)
}

// bigData is a message of one data section (vbin32) of n bytes.
func bigData(n int) []byte {
	b := binary.BigEndian.AppendUint32([]byte{0x00, 0x53, 0x75, 0xb0}, uint32(n))
	return append(b, make([]byte, n)...)
}

func transferFrame(handle, id uint32, more bool, payload []byte) []byte {
	return frame(0, &amqp10.Transfer{Handle: handle, DeliveryID: id, HasDeliveryID: true,
		DeliveryTag: binary.BigEndian.AppendUint32(nil, id), HasMessageFormat: true, More: more}, payload)
}

func continuationFrame(handle uint32, more bool, payload []byte) []byte {
	return frame(0, &amqp10.Transfer{Handle: handle, More: more}, payload)
}

// dataMsg is a message of one data section.
func dataMsg(body string) []byte {
	return append([]byte{0x00, 0x53, 0x75, 0xa0, byte(len(body))}, body...)
}

func senderAttach(handle uint32, address string) *amqp10.Attach {
	return &amqp10.Attach{Name: "conf-" + address + string(rune('a'+handle)), Handle: handle, Role: amqp10.RoleSender,
		Target: &amqp10.Target{Address: address, HasAddress: true}, Source: &amqp10.Source{},
		InitialDeliveryCount: 0, HasInitialDeliveryCount: true}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func plainInit(user, pass string) []byte {
	return saslFrame(&amqp10.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00" + user + "\x00" + pass)})
}

func confRows() []confRow {
	open := func(o *amqp10.Open) []byte { return frame(0, o, nil) }
	begin := &amqp10.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100}
	tlsHello := []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03}
	bigPlain := plainInit("guest", string(bytes.Repeat([]byte{'p'}, 9000)))
	var manySections []byte
	for range amqp10.MaxSections + 1 {
		manySections = append(manySections, 0x00, 0x53, 0x75, 0xa0, 0x00)
	}
	deep := []byte{0x40}
	for range 10000 {
		deep = append(binary.BigEndian.AppendUint32([]byte{0xd0}, uint32(len(deep)+4)), append([]byte{0, 0, 0, 1}, deep...)...)
	}
	uint0, uint10 := []byte{0x43}, []byte{0x52, 10}
	rows := []confRow{
		// Header (H).
		{id: "H1 no SASL where SASL is required", section: "2.2, fig. 2.13", broker: "sasl-only", state: stNone,
			send: amqp10.ProtoHeaderAMQP[:], scope: scopeHeader},
		{id: "H2 AMQP 2 1 0 0 (in-band TLS)", section: "2.2", state: stNone, send: []byte("AMQP\x02\x01\x00\x00"), scope: scopeHeader},
		// AMQP 0-9-1 itself is served on the port (the 0-9-1 front end);
		// another 0-9-x is refused with the 0-9-1 header, as RabbitMQ 4.3 does.
		{id: "H3 AMQP 0 0 9 0", section: "2.2", state: stNone, send: []byte("AMQP\x00\x00\x09\x00"), scope: scopeHeader},
		{id: "H4 HTTP request", section: "2.2", state: stNone, send: []byte("GET / HTTP/1.1\r\n\r\n"), scope: scopeHeader},
		{id: "H5 TLS ClientHello on the plain port", section: "2.2", state: stNone, send: tlsHello, scope: scopeHeader},
		{id: "H6 7 bytes, then silence", section: "2.2", broker: "fast-handshake", state: stNone,
			send: []byte("AMQP\x00\x01\x00"), scope: scopeSilent},
		{id: "H7 a valid header, then silence", section: "2.4.1", broker: "fast-handshake", state: stNone,
			send: amqp10.ProtoHeaderAMQP[:], scope: scopeHeader},

		// SASL (A).
		{id: "A1 unknown mechanism", section: "5.3.3.2", state: stSASL,
			send: saslFrame(&amqp10.SASLInit{Mechanism: "SCRAM-SHA-1"}), scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A2 bad password", section: "5.3.3.6", state: stSASL, send: plainInit("guest", "wrong"),
			scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A3 PLAIN response without NULs", section: "5.3.3.2", state: stSASL,
			send:  saslFrame(&amqp10.SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("guestguest")}),
			scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A4 PLAIN with non-UTF-8 credentials", section: "5.3.3.2", state: stSASL, send: plainInit("gu\xffest", "\xfe"),
			scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A5 sasl-init over initial-frame-max (8 KiB)", section: "2.4.1", state: stSASL, send: bigPlain,
			scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A5b frame header claiming 64 KiB in SASL", section: "2.4.1", state: stSASL,
			send: rawFrame(64<<10, 2, amqp10.FrameTypeSASL, 0, nil), scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A6 ANONYMOUS where refused", section: "5.3.3.2", broker: "sasl-only", state: stSASL,
			send: saslFrame(&amqp10.SASLInit{Mechanism: "ANONYMOUS"}), scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A7 EXTERNAL without a client certificate", section: "5.3.3.2", state: stSASL,
			send: saslFrame(&amqp10.SASLInit{Mechanism: "EXTERNAL"}), scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A8 AMQP frame during SASL", section: "5.3.1", state: stSASL,
			send: frame(0, &amqp10.Open{ContainerID: "x"}, nil), scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A9 sasl-response without a challenge", section: "5.3.3.4", state: stSASL,
			send: saslFrame(&amqp10.SASLResponse{Response: []byte("x")}), scope: scopeSASL, saslCode: amqp10.SASLCodeAuth},
		{id: "A10 open without the second protocol header", section: "5.3.1", state: stSASL,
			sendFn: func(r *rawConn) {
				r.send(saslFrame(&amqp10.SASLInit{Mechanism: "ANONYMOUS"}))
				p := r.nextSASL()
				require.Equal(r.t, amqp10.SASLCodeOK, p.(*amqp10.SASLOutcome).Code)
				r.send(open(&amqp10.Open{ContainerID: "x"}))
			}, scope: scopeHeader},

		{id: "A11 a second sasl-init", section: "5.3.1", state: stSASL,
			sendFn: func(r *rawConn) {
				r.send(saslFrame(&amqp10.SASLInit{Mechanism: "ANONYMOUS"}))
				p := r.nextSASL()
				require.Equal(r.t, amqp10.SASLCodeOK, p.(*amqp10.SASLOutcome).Code)
				r.send(saslFrame(&amqp10.SASLInit{Mechanism: "ANONYMOUS"}))
			}, scope: scopeHeader},

		// Open (C): answered with our open, then close.
		{id: "O1 max-frame-size 511", section: "2.7.1", state: stAMQPHdr,
			send: open(&amqp10.Open{ContainerID: "x", MaxFrameSize: 511}), scope: scopeConn, want: amqp10.ErrCondFrameSizeTooSmall},
		{id: "O2 idle-time-out 1 ms", section: "2.4.5", state: stAMQPHdr,
			send:  open(&amqp10.Open{ContainerID: "x", MaxFrameSize: 65536, IdleTimeOut: 1}),
			scope: scopeConn, want: amqp10.ErrCondNotAllowed},
		{id: "O2b idle-time-out 999 ms", section: "2.4.5", state: stAMQPHdr,
			send:  open(&amqp10.Open{ContainerID: "x", MaxFrameSize: 65536, IdleTimeOut: 999}),
			scope: scopeConn, want: amqp10.ErrCondNotAllowed},
		{id: "O3 unknown vhost", section: "2.7.1", state: stAMQPHdr,
			send:  open(&amqp10.Open{ContainerID: "x", MaxFrameSize: 65536, Hostname: "vhost:nowhere"}),
			scope: scopeConn, want: amqp10.ErrCondUnauthorizedAccess},
		{id: "O4 null container-id", section: "2.7.1", state: stAMQPHdr,
			send: bodyFrame(0, described(0x10, []byte{0x40})), scope: scopeConn, want: amqp10.ErrCondInvalidField},
		{id: "O5 a second open", section: "2.4.1", state: stOpened,
			send: open(&amqp10.Open{ContainerID: "x"}), scope: scopeConn, want: amqp10.ErrCondIllegalState},
		{id: "O6 silent beyond the idle time-out", section: "2.4.5", broker: "fast-idle", state: stOpened,
			scope: scopeConn, want: amqp10.ErrCondResourceLimitExceeded},
		{id: "O7 invalid UTF-8 container-id", section: "1.6.20", state: stAMQPHdr,
			send: open(&amqp10.Open{ContainerID: "x\xff", MaxFrameSize: 65536}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "O8 invalid UTF-8 hostname", section: "1.6.20", state: stAMQPHdr,
			send: open(&amqp10.Open{ContainerID: "x", Hostname: "\xc3\x28", MaxFrameSize: 65536}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "O9 invalid UTF-8 in open properties", section: "1.6.20", state: stAMQPHdr,
			send: open(&amqp10.Open{ContainerID: "x", MaxFrameSize: 65536,
				Properties: amqp10.Map{{Key: amqp10.Symbol("product"), Value: "\xed\xa0\x80"}}}),
			scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "O10 undecodable open", section: "2.8.15", state: stAMQPHdr,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x10, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "O11 begin before open", section: "2.4.1", state: stAMQPHdr,
			send: frame(0, begin, nil), scope: scopeConn, want: amqp10.ErrCondIllegalState},
		{id: "O12 frame header claiming 64 KiB before open", section: "2.4.1", state: stAMQPHdr,
			send: rawFrame(64<<10, 2, amqp10.FrameTypeAMQP, 0, nil), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "O13 open over initial-frame-max", section: "2.4.1", state: stAMQPHdr,
			send: open(&amqp10.Open{ContainerID: string(bytes.Repeat([]byte{'c'}, 9000))}), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "O14 SASL frame where open is expected", section: "2.3.1", state: stAMQPHdr,
			send: saslFrame(&amqp10.SASLInit{Mechanism: "ANONYMOUS"}), scope: scopeConn, want: amqp10.ErrCondFramingError},

		// Framing (C, framing-error).
		{id: "F2 SIZE over max-frame-size by 1", section: "2.7.1", state: stOpened,
			send: rawFrame(131073, 2, amqp10.FrameTypeAMQP, 0, nil), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "F3 DOFF 0", section: "2.3.1", state: stOpened,
			send: rawFrame(8, 0, amqp10.FrameTypeAMQP, 0, nil), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "F3b DOFF 1", section: "2.3.1", state: stOpened,
			send: rawFrame(8, 1, amqp10.FrameTypeAMQP, 0, nil), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "F4 DOFF*4 > SIZE", section: "2.3.1", state: stOpened,
			send: rawFrame(12, 4, amqp10.FrameTypeAMQP, 0, []byte{0, 0, 0, 0}), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "F5 TYPE 1 after open", section: "2.3.1", state: stOpened,
			send: saslFrame(&amqp10.SASLInit{Mechanism: "PLAIN"}), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "F5b TYPE 2 after open", section: "2.3.1", state: stOpened,
			send: rawFrame(8, 2, 2, 0, nil), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "F6 channel over channel-max", section: "2.7.1", state: stOpened,
			send: frame(4000, begin, nil), scope: scopeConn, want: amqp10.ErrCondFramingError},
		{id: "F7 attach handle over handle-max", section: "2.7.2", state: stSession,
			send: frame(0, senderAttach(4000, "/queues/q"), nil), scope: scopeConn, want: amqp10.ErrCondFramingError},

		// Codec (C decode-error for performatives).
		{id: "D1 body not a described type", section: "2.3.2", state: stOpened,
			// The codec classes a body that is not a described value, and
			// a map of odd count, as invalid-field (decode-error would be
			// the other reading; RabbitMQ answers internal-error).
			send: bodyFrame(0, []byte{0x45}), scope: scopeConn, want: amqp10.ErrCondInvalidField},
		{id: "D2 unknown descriptor", section: "2.3.2", state: stOpened,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x99, 0x45}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D3 list8 count larger than its bytes", section: "1.6.22", state: stOpened,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x11, 0xc0, 0x02, 0x09, 0x40}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D4 list32 size beyond the frame", section: "1.6.22", state: stOpened,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x11, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D5 array32 of nulls claiming 2^32-1 elements", section: "1.6.24", state: stOpened,
			send: bodyFrame(0, described(0x11, []byte{0x40}, uint0, uint10, uint10, []byte{0x40},
				[]byte{0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40})),
			scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D6 map with an odd count", section: "1.6.23", state: stOpened,
			send: bodyFrame(0, described(0x11, []byte{0x40}, uint0, uint10, uint10, []byte{0x40}, []byte{0x40}, []byte{0x40},
				[]byte{0xc1, 0x02, 0x01, 0x40})),
			scope: scopeConn, want: amqp10.ErrCondInvalidField},
		{id: "D7 nesting depth 10,000", section: "1.6", state: stOpened,
			send: bodyFrame(0, described(0x11, []byte{0x40}, uint0, uint10, uint10, []byte{0x40}, []byte{0x40}, []byte{0x40},
				concat(binary.BigEndian.AppendUint32([]byte{0xd1}, uint32(4+3+len(deep))), []byte{0, 0, 0, 2, 0xa3, 0x01, 'k'}, deep))),
			scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D8 garbage transfer", section: "2.7.5", state: stOpened,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x14, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D8b garbage flow", section: "2.7.4", state: stOpened,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x13, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D8c garbage disposition", section: "2.7.6", state: stOpened,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x15, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}), scope: scopeConn, want: amqp10.ErrCondDecodeError},
		{id: "D8d garbage begin", section: "2.7.2", state: stOpened,
			send: bodyFrame(0, []byte{0x00, 0x53, 0x11, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}), scope: scopeConn, want: amqp10.ErrCondDecodeError},

		// Codec (L decode-error for message payloads).
		{id: "M1 10,001 message sections", section: "3.2", state: stLink,
			send: transferFrame(0, 0, false, manySections), scope: scopeLink, want: amqp10.ErrCondDecodeError},
		{id: "M2 properties after the body", section: "3.2", state: stLink,
			send:  transferFrame(0, 0, false, concat(dataMsg("b"), []byte{0x00, 0x53, 0x73, 0x45})),
			scope: scopeLink, want: amqp10.ErrCondDecodeError},
		{id: "M3 header twice", section: "3.2", state: stLink,
			send:  transferFrame(0, 0, false, concat([]byte{0x00, 0x53, 0x70, 0x45, 0x00, 0x53, 0x70, 0x45}, dataMsg("b"))),
			scope: scopeLink, want: amqp10.ErrCondDecodeError},
		{id: "M4 a section after the footer", section: "3.2", state: stLink,
			send:  transferFrame(0, 0, false, concat(dataMsg("b"), []byte{0x00, 0x53, 0x78, 0xc1, 0x01, 0x00}, dataMsg("c"))),
			scope: scopeLink, want: amqp10.ErrCondDecodeError},
		{id: "M5 reserved message-annotation key", section: "3.2.3", state: stLink,
			send:  transferFrame(0, 0, false, concat([]byte{0x00, 0x53, 0x72, 0xc1, 0x06, 0x02, 0xa3, 0x01, 'k', 0xa1, 0x00}, dataMsg("b"))),
			scope: scopeLink, want: amqp10.ErrCondDecodeError},

		// Session (S).
		{id: "S1 attach with a handle in use", section: "2.7.3", state: stLink,
			send: frame(0, senderAttach(0, "/queues/q"), nil), scope: scopeSession, want: amqp10.ErrCondHandleInUse},
		{id: "S2 transfer on an unattached handle", section: "2.7.5", state: stSession,
			send: transferFrame(7, 0, false, dataMsg("b")), scope: scopeSession, want: amqp10.ErrCondUnattachedHandle},
		{id: "S2b flow on an unattached handle", section: "2.7.4", state: stSession,
			send: frame(0, &amqp10.Flow{IncomingWindow: 10, OutgoingWindow: 10, Handle: 7, HasHandle: true,
				DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: 1, HasLinkCredit: true}, nil),
			scope: scopeSession, want: amqp10.ErrCondUnattachedHandle},
		{id: "S2c detach on an unattached handle", section: "2.7.7", state: stSession,
			send: frame(0, &amqp10.Detach{Handle: 7, Closed: true}, nil), scope: scopeSession, want: amqp10.ErrCondUnattachedHandle},
		{id: "S3 transfer beyond an incoming-window of 0 (resource alarm)", section: "2.5.6", broker: "alarm", state: stLink,
			send: transferFrame(0, 0, false, dataMsg("b")), scope: scopeSession, want: amqp10.ErrCondWindowViolation},
		{id: "S4 flow next-incoming-id ahead of our next-outgoing-id", section: "2.5.6", state: stSession,
			send:  frame(0, &amqp10.Flow{NextIncomingID: 100, HasNextIncomingID: true, IncomingWindow: 10, OutgoingWindow: 10}, nil),
			scope: scopeSession, want: amqp10.ErrCondWindowViolation},
		{id: "S5 delivery-id gap", section: "2.7.5", state: stLink,
			send:  concat(transferFrame(0, 0, false, dataMsg("a")), transferFrame(0, 5, false, dataMsg("b"))),
			scope: scopeSession, want: amqp10.ErrCondInvalidField},
		{id: "S6 begin on a channel in use", section: "2.7.2", state: stSession,
			send: frame(0, begin, nil), scope: scopeConn, want: amqp10.ErrCondIllegalState},
		{id: "S7 frame on an ended channel", section: "2.7.8", state: stSession,
			sendFn: func(r *rawConn) {
				r.send(frame(0, &amqp10.End{}, nil))
				_, p := r.read()
				require.IsType(r.t, &amqp10.End{}, p)
				r.send(frame(0, &amqp10.Flow{IncomingWindow: 10, OutgoingWindow: 10}, nil))
			}, scope: scopeConn, want: amqp10.ErrCondIllegalState},
		{id: "S8 frame before begin", section: "2.7.4", state: stOpened,
			send: frame(3, &amqp10.Flow{IncomingWindow: 10, OutgoingWindow: 10}, nil), scope: scopeConn, want: amqp10.ErrCondIllegalState},
		{id: "S9 unknown outcome in a disposition", section: "2.7.6", state: stSession,
			send: bodyFrame(0, described(0x15, []byte{0x41}, uint0, []byte{0x40}, []byte{0x41},
				[]byte{0x00, 0x53, 0x99, 0x45})),
			scope: scopeSession, want: amqp10.ErrCondInvalidField},

		// Link (L) and outcomes (O).
		{id: "L1 transfer without credit", section: "2.6.7", broker: "small", state: stSecondLink,
			send:  concat(transferFrame(0, 0, false, dataMsg("a")), transferFrame(0, 1, false, dataMsg("b"))),
			scope: scopeLink, want: amqp10.ErrCondTransferLimitExceeded},
		{id: "L2 single-frame message over max-message-size", section: "2.7.3", broker: "small", state: stLink,
			send: transferFrame(0, 0, false, bigData(1000-8+1)), scope: scopeLink, want: amqp10.ErrCondMessageSizeExceeded},
		{id: "L2b message over max-message-size across frames", section: "2.7.3", broker: "small", state: stLink,
			send: concat(transferFrame(0, 0, true, make([]byte, 400)), continuationFrame(0, true, make([]byte, 400)),
				continuationFrame(0, true, make([]byte, 400))),
			scope: scopeLink, want: amqp10.ErrCondMessageSizeExceeded},
		{id: "L3 continuation with another delivery-id", section: "2.7.5", state: stLink,
			send:  concat(transferFrame(0, 0, true, []byte{0x00}), transferFrame(0, 1, false, []byte{0x53})),
			scope: scopeLink, want: amqp10.ErrCondInvalidField},
		{id: "L3b settled transfer on a snd-settle-mode unsettled link", section: "2.7.5", state: stSession,
			sendFn: func(r *rawConn) {
				a := senderAttach(0, "/queues/q")
				a.SndSettleMode, a.HasSndSettleMode = amqp10.SndUnsettled, true
				r.send(frame(0, a, nil))
				r.send(frame(0, &amqp10.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1},
					HasMessageFormat: true, Settled: true, HasSettled: true}, dataMsg("b")))
			}, scope: scopeLink, want: amqp10.ErrCondInvalidField},
		{id: "L3c unsettled delivery on a snd-settle-mode settled link", section: "2.7.5", state: stSession,
			sendFn: func(r *rawConn) {
				a := senderAttach(0, "/queues/q")
				a.SndSettleMode, a.HasSndSettleMode = amqp10.SndSettled, true
				r.send(frame(0, a, nil))
				r.send(transferFrame(0, 0, false, dataMsg("b")))
			}, scope: scopeLink, want: amqp10.ErrCondInvalidField},
		{id: "L4 attach to a missing queue", section: "2.7.3", state: stSession,
			send: frame(0, senderAttach(0, "/queues/missing"), nil), scope: scopeLink, want: amqp10.ErrCondNotFound},
		{id: "L5 anonymous terminus without to", section: "anonterm", state: stSession,
			sendFn: func(r *rawConn) {
				r.send(frame(0, &amqp10.Attach{Name: "anon", Handle: 0, Role: amqp10.RoleSender,
					Source: &amqp10.Source{}, Target: &amqp10.Target{}, HasInitialDeliveryCount: true}, nil))
				r.send(transferFrame(0, 0, false, dataMsg("b")))
			}, scope: scopeOutcome, outcome: amqp10.StateRejected, want: amqp10.ErrCondPreconditionFailed},
		{id: "L6 queue full with reject-publish", section: "3.4.2", state: stSession,
			sendFn: func(r *rawConn) {
				r.send(frame(0, senderAttach(0, "/queues/full"), nil))
				r.send(transferFrame(0, 0, false, dataMsg("b")))
			}, scope: scopeOutcome, outcome: amqp10.StateRejected, want: amqp10.ErrCondResourceLimitExceeded},
		{id: "L7 unroutable", section: "3.4.4", state: stSession,
			sendFn: func(r *rawConn) {
				r.send(frame(0, senderAttach(0, "/exchanges/amq.direct/nowhere"), nil))
				r.send(transferFrame(0, 0, false, dataMsg("b")))
			}, scope: scopeOutcome, outcome: amqp10.StateReleased},

		// Limits beyond one link.
		{id: "R1 links per connection", section: "2.7.3", broker: "small", state: stLink,
			send:  concat(frame(0, senderAttach(1, "/queues/q"), nil), frame(0, senderAttach(2, "/queues/q"), nil)),
			scope: scopeLink, want: amqp10.ErrCondResourceLimitExceeded},
		{id: "R2 unfinished multi-frame messages on two links", section: "2.6.14", broker: "small", state: stLink,
			send: concat(frame(0, senderAttach(1, "/queues/q"), nil),
				transferFrame(0, 0, true, make([]byte, 900)), transferFrame(1, 1, true, make([]byte, 900))),
			scope: scopeLink, want: amqp10.ErrCondResourceLimitExceeded},
	}
	for _, ctor := range []byte{0x41, 0x42, 0x43, 0x44, 0x45} {
		rows = append(rows, confRow{id: fmt.Sprintf("D5 array32 of 0x%x claiming 2^32-1 elements", ctor), section: "1.6.24", state: stOpened,
			send: bodyFrame(0, described(0x11, []byte{0x40}, uint0, uint10, uint10, []byte{0x40},
				[]byte{0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, ctor})),
			scope: scopeConn, want: amqp10.ErrCondDecodeError})
	}
	for size := range 8 {
		rows = append(rows, confRow{id: "F1 SIZE " + string(rune('0'+size)), section: "2.3.1", state: stOpened,
			send: rawFrame(uint32(size), 2, amqp10.FrameTypeAMQP, 0, nil), scope: scopeConn, want: amqp10.ErrCondFramingError})
	}
	return rows
}

func TestConformanceCorpus(t *testing.T) {
	brokers := map[string]*epitaph.Broker{}
	for name, mod := range confBrokers {
		// Failed logins are answered after 100 ms (the least delay the
		// broker may use), growing with the failures from 127.0.0.1 in a row.
		slowFail := func(o *epitaph.Options) { o.AuthFailureDelay = 100 * time.Millisecond }
		b := startBroker(t, confDefs, slowFail, mod)
		if name == "alarm" {
			eventually(t, "memory alarm", func() bool { return b.Router().Alarms().State().Memory })
		}
		brokers[name] = b
	}
	baseline := runtime.NumGoroutine()
	for _, row := range confRows() {
		t.Run(row.id, func(t *testing.T) {
			b := brokers[row.broker]
			require.NotNil(t, b, "no broker %q", row.broker)
			r := rawDial(t, b)
			r.reach(row.state)
			if row.sendFn != nil {
				row.sendFn(r)
			} else if row.send != nil {
				r.send(row.send)
			}
			r.expectReply(row)
			brokerStillServesPlain(t, b)
		})
	}
	// Every connection of the rows has ended: the brokers' goroutines are
	// back to what they were before (a connection that lingered, or a
	// goroutine leaked by an error path, would keep the count up).
	eventually(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= baseline })
}

// brokerStillServesPlain checks a new client (PLAIN guest) can attach.
func brokerStillServesPlain(t *testing.T, b *epitaph.Broker) {
	t.Helper()
	c := dial(t, b, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("guest", "guest")})
	s := session(t, c)
	sender(t, s, "/queues/q", nil)
	require.NoError(t, c.Close())
}

func (r *rawConn) send(b []byte) {
	r.t.Helper()
	_, err := r.nc.Write(b)
	require.NoError(r.t, err)
}

// nextSASL reads the next SASL frame's performative.
func (r *rawConn) nextSASL() amqp10.Performative {
	r.t.Helper()
	fh, p, err := r.next()
	require.NoError(r.t, err)
	require.Equal(r.t, amqp10.FrameTypeSASL, fh.Type)
	return p
}

// next reads the next non-empty frame of either type.
func (r *rawConn) next() (amqp10.FrameHeader, amqp10.Performative, error) {
	for {
		var hb [8]byte
		if _, err := io.ReadFull(r.nc, hb[:]); err != nil {
			return amqp10.FrameHeader{}, nil, err
		}
		fh, err := amqp10.ParseFrameHeader(hb[:])
		if err != nil {
			return fh, nil, err
		}
		body := make([]byte, fh.Size-8)
		if _, err := io.ReadFull(r.nc, body); err != nil {
			return fh, nil, err
		}
		body = body[int(fh.DataOffset)*4-8:]
		if len(body) == 0 {
			continue
		}
		p, _, err := amqp10.ParsePerformative(body)
		return fh, p, err
	}
}

func (r *rawConn) reach(s confState) {
	r.t.Helper()
	switch s {
	case stNone:
	case stSASL:
		r.send(amqp10.ProtoHeaderSASL[:])
		var h [8]byte
		_, err := io.ReadFull(r.nc, h[:])
		require.NoError(r.t, err)
		require.Equal(r.t, amqp10.ProtoHeaderSASL, h)
		require.IsType(r.t, &amqp10.SASLMechanisms{}, r.nextSASL())
	case stAMQPHdr:
		r.send(amqp10.ProtoHeaderAMQP[:])
		var h [8]byte
		_, err := io.ReadFull(r.nc, h[:])
		require.NoError(r.t, err)
		require.Equal(r.t, amqp10.ProtoHeaderAMQP, h)
	case stOpened:
		r.open()
	case stSession:
		r.open()
		r.send(frame(0, &amqp10.Begin{NextOutgoingID: 0, IncomingWindow: 100, OutgoingWindow: 100}, nil))
		expectFrame[*amqp10.Begin](r)
	case stLink, stSecondLink:
		r.reach(stSession)
		a := senderAttach(0, "/queues/q")
		if s == stSecondLink {
			a.RcvSettleMode, a.HasRcvSettleMode = amqp10.RcvSecond, true
		}
		r.send(frame(0, a, nil))
		expectFrame[*amqp10.Attach](r)
		for {
			f, _ := expectFrame[*amqp10.Flow](r)
			if f.HasHandle {
				require.NotZero(r.t, f.LinkCredit, "no credit granted")
				break
			}
		}
	}
}

// expectReply reads the broker's answer to row and checks it.
func (r *rawConn) expectReply(row confRow) {
	t := r.t
	t.Helper()
	require.NoError(t, r.nc.SetDeadline(time.Now().Add(5*time.Second)))
	switch row.scope {
	case scopeHeader:
		var h [8]byte
		_, err := io.ReadFull(r.nc, h[:])
		require.NoError(t, err)
		assert.Equal(t, "AMQP", string(h[:4]), "a protocol header")
		r.expectEOF(time.Second)
	case scopeSilent:
		r.expectEOF(time.Second)
	case scopeSASL:
		for {
			fh, p, err := r.next()
			require.NoError(t, err)
			require.Equal(t, amqp10.FrameTypeSASL, fh.Type)
			if o, ok := p.(*amqp10.SASLOutcome); ok {
				assert.Equal(t, row.saslCode, o.Code, "sasl-outcome code")
				break
			}
		}
		r.expectEOF(time.Second)
	case scopeConn:
		for {
			fh, p, err := r.next()
			require.NoError(t, err, "want close(%s)", row.want)
			require.Equal(t, amqp10.FrameTypeAMQP, fh.Type)
			if c, ok := p.(*amqp10.Close); ok {
				require.NotNil(t, c.Error, "close without an error")
				assert.Equal(t, row.want, c.Error.Condition, "close condition (%s)", c.Error.Description)
				break
			}
		}
		// A peer answers close with close (2.4.3); then the socket must go.
		_, _ = r.nc.Write(frame(0, &amqp10.Close{}, nil))
		r.expectEOF(time.Second)
	case scopeSession, scopeLink, scopeOutcome:
		for {
			fh, p, err := r.next()
			require.NoError(t, err, "want %s %s", row.scope, row.want)
			require.Equal(t, amqp10.FrameTypeAMQP, fh.Type)
			switch f := p.(type) {
			case *amqp10.Close:
				t.Fatalf("connection closed: %+v", f.Error)
			case *amqp10.End:
				require.NotNil(t, f.Error, "end without an error")
				require.Equal(t, scopeSession, row.scope, "session ended: %+v", f.Error)
				assert.Equal(t, row.want, f.Error.Condition, "end condition (%s)", f.Error.Description)
				// The connection lives on: another session begins.
				r.send(frame(1, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10}, nil))
				expectFrame[*amqp10.Begin](r)
				return
			case *amqp10.Detach:
				if f.Error == nil {
					continue
				}
				require.Equal(t, scopeLink, row.scope, "link detached: %+v", f.Error)
				assert.True(t, f.Closed)
				assert.Equal(t, row.want, f.Error.Condition, "detach condition (%s)", f.Error.Description)
				return
			case *amqp10.Disposition:
				if row.scope != scopeOutcome {
					continue
				}
				assert.Equal(t, row.outcome, f.State.Kind, "outcome")
				if row.want != "" {
					require.NotNil(t, f.State.Error)
					assert.Equal(t, row.want, f.State.Error.Condition)
				}
				return
			}
		}
	}
}

// expectEOF checks the broker closes the socket within d.
func (r *rawConn) expectEOF(d time.Duration) {
	r.t.Helper()
	start := time.Now()
	require.NoError(r.t, r.nc.SetReadDeadline(start.Add(d)))
	_, err := io.Copy(io.Discard, r.nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("socket still open %v after the reply", d)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		r.t.Fatalf("reading to EOF: %v", err)
	}
}

// During a resource alarm the session window is not renewed: transfers the
// peer sends under the window it had been granted are still taken, and one
// transfer beyond that grant ends the session with window-violation
// (2.5.6). A client that ignored the window used to have every transfer
// taken while the alarm held.
func TestWindowViolationAfterAlarm(t *testing.T) {
	var used atomic.Uint64
	used.Store(1 << 20)
	b := startBroker(t, confDefs, func(o *epitaph.Options) {
		o.MemoryHighWatermark = 1 << 30
		testhooks.SetAlarms(o, testhooks.Alarms{MemoryUsed: used.Load})
	})
	r := rawDial(t, b)
	r.reach(stLink)
	used.Store(1 << 31)
	require.NoError(t, r.nc.SetDeadline(time.Now().Add(10*time.Second)))
	// The begin granted 2048 transfer frames (the broker's session
	// window): one message of that many frames is within it.
	const granted = 2048
	for {
		f, _ := expectFrame[*amqp10.Flow](r)
		if !f.HasHandle { // the alarm's session flow: what is left, not renewed
			require.Equal(t, uint32(granted), f.IncomingWindow)
			break
		}
	}
	var frames []byte
	frames = append(frames, transferFrame(0, 0, true, []byte{0x00, 0x53, 0x75, 0xb0, 0, 0, 0x07, 0xff})...)
	for i := 1; i < granted; i++ {
		frames = append(frames, continuationFrame(0, i < granted-1, []byte{'x'})...)
	}
	r.send(frames)
	d, _ := expectFrame[*amqp10.Disposition](r)
	assert.Equal(t, amqp10.StateAccepted, d.State.Kind, "the in-flight message is taken")
	r.send(transferFrame(0, 1, false, dataMsg("over")))
	for {
		_, p := r.read()
		if end, ok := p.(*amqp10.End); ok {
			require.NotNil(t, end.Error)
			assert.Equal(t, amqp10.ErrCondWindowViolation, end.Error.Condition)
			break
		}
	}
	assert.Equal(t, 1, queueLen(t, b, "q"), "only the message within the window was taken")
	used.Store(1 << 20)
	eventually(t, "alarm cleared", func() bool { return !b.Router().Alarms().State().Memory })
	brokerStillServesPlain(t, b)
}

// A rcv-settle-mode second publisher gets credit only while the session's
// publishes awaiting its settlement are within max-unsettled-incoming; its
// settling them gives the credit back. (Unsettled state used to grow with
// every publish.)
func TestUnsettledIncomingBound(t *testing.T) {
	b := startBroker(t, confDefs, func(o *epitaph.Options) { o.MaxUnsettledIncoming = 2 })
	r := rawDial(t, b)
	r.reach(stSession)
	a := senderAttach(0, "/exchanges/amq.direct/nowhere")
	a.RcvSettleMode, a.HasRcvSettleMode = amqp10.RcvSecond, true
	r.send(frame(0, a, nil))
	expectFrame[*amqp10.Attach](r)
	credit := func() uint32 {
		for {
			f, _ := expectFrame[*amqp10.Flow](r)
			if f.HasHandle {
				return f.LinkCredit
			}
		}
	}
	require.Equal(t, uint32(2), credit(), "credit within the bound")
	for id := range uint32(2) {
		r.send(transferFrame(0, id, false, dataMsg("unroutable")))
		d, _ := expectFrame[*amqp10.Disposition](r)
		require.False(t, d.Settled, "rcv-settle-mode second: the peer settles")
		assert.Equal(t, amqp10.StateReleased, d.State.Kind)
	}
	// The peer settles both: credit comes back.
	r.send(frame(0, &amqp10.Disposition{Role: amqp10.RoleSender, First: 0, Last: 1, HasLast: true, Settled: true,
		State: amqp10.DeliveryState{Kind: amqp10.StateReleased}}, nil))
	require.Equal(t, uint32(2), credit(), "credit after settling")
	r.send(transferFrame(0, 2, false, dataMsg("unroutable")))
	d, _ := expectFrame[*amqp10.Disposition](r)
	assert.Equal(t, uint32(2), d.First)
}

// What initial-frame-max (8 KiB) must still let through: a PLAIN
// sasl-init with a long secret (a 4 KiB token as password) and an open
// with a client's usual properties, and more.
func TestInitialFrameMaxAdmitsTypicalHandshakes(t *testing.T) {
	token := strings.Repeat("t", 4096)
	b := startBroker(t, `{"users":[{"name":"tok","password":"`+token+`","tags":""}],
		"vhosts":[{"name":"/"}],"permissions":[{"user":"tok","vhost":"/","configure":".*","write":".*","read":".*"}],
		"queues":[{"name":"q","vhost":"/","durable":true,"arguments":{}}]}`)
	props := map[string]any{"product": "an application", "version": "1.2.3", "platform": "Go",
		"information": strings.Repeat("i", 1000), "connection_name": strings.Repeat("n", 500)}
	c, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(),
		&amqp.ConnOptions{SASLType: amqp.SASLTypePlain("tok", token), Properties: props, HostName: "vhost:/"})
	require.NoError(t, err)
	s := session(t, c)
	snd := sender(t, s, "/queues/q", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("m")))
	require.NoError(t, c.Close())
}
