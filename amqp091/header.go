package amqp091

// Protocol headers (AMQP 0-9-1 section 4.2.2; AMQP 1.0 section 2.2).
var (
	ProtoHeader091     = [8]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}
	ProtoHeader09      = [8]byte{'A', 'M', 'Q', 'P', 1, 1, 0, 9}
	ProtoHeader10SASL  = [8]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
	ProtoHeader10      = [8]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	ProtoHeader10TLS   = [8]byte{'A', 'M', 'Q', 'P', 2, 1, 0, 0}
	protoHeaderDefault = ProtoHeader10SASL
)

// Protocol is what the first eight octets of a connection ask for.
type Protocol uint8

// Protocols Classify tells apart.
const (
	ProtocolUnknown    Protocol = iota // not a protocol header epitaph speaks
	ProtocolAMQP091                    // AMQP 0-9-1, or 0-9 (treated as 0-9-1)
	ProtocolAMQP10SASL                 // AMQP 1.0 with the SASL layer
	ProtocolAMQP10                     // AMQP 1.0 without SASL (protocol id 0)
	ProtocolAMQP10TLS                  // AMQP 1.0 TLS security layer (protocol id 2)
)

func (p Protocol) String() string {
	switch p {
	case ProtocolAMQP091:
		return "amqp-0-9-1"
	case ProtocolAMQP10SASL:
		return "amqp-1.0-sasl"
	case ProtocolAMQP10:
		return "amqp-1.0"
	case ProtocolAMQP10TLS:
		return "amqp-1.0-tls"
	}
	return "unknown"
}

// Handshake is Classify's verdict on a protocol header.
type Handshake struct {
	Protocol Protocol
	// Legacy09 is set for the 0-9 header, which RabbitMQ serves as 0-9-1.
	Legacy09 bool
	// Refuse says RabbitMQ refuses the header: the listener sends Reply
	// and closes the socket at once (no delay, as RabbitMQ does).
	Refuse bool
	Reply  [8]byte
	// Reason is RabbitMQ's name for the refusal, for the log:
	// "sasl_required", "bad_version", "detected_http_get", "detected_tls"
	// or "bad_header".
	Reason string
}

// Classify decides what the listener does with the first eight octets of
// a connection, as RabbitMQ 4.3 does (rabbit_reader: handle_input/3 for
// the handshake, version_negotiation/2, refuse_connection/2,3):
//
//	AMQP 0 0 9 1              accept 0-9-1
//	AMQP 1 1 0 9              accept, as 0-9-1 (0-9)
//	AMQP 3 1 0 0              accept AMQP 1.0, SASL layer
//	AMQP id 1 0 0, id != 3    refuse (sasl_required), reply AMQP 3 1 0 0
//	AMQP 0 0 m x, m >= 9      refuse (bad_version), reply AMQP 0 0 9 1
//	any other AMQP ....       refuse (bad_version), reply AMQP 3 1 0 0
//	"GET "                    refuse (detected_http_get), reply AMQP 3 1 0 0
//	16 03 xx xx xx 01         refuse (detected_tls), reply AMQP 3 1 0 0
//	anything else             refuse (bad_header), reply AMQP 3 1 0 0
//
// AMQP 1.0 without SASL is reported as ProtocolAMQP10 with Refuse set;
// a listener that serves it anyway ignores Refuse for that protocol.
func Classify(h [8]byte) Handshake {
	refuse := func(p Protocol, reason string, reply [8]byte) Handshake {
		return Handshake{Protocol: p, Refuse: true, Reply: reply, Reason: reason}
	}
	if h[0] == 'A' && h[1] == 'M' && h[2] == 'Q' && h[3] == 'P' {
		id, a, b, c := h[4], h[5], h[6], h[7]
		switch {
		case h == ProtoHeader091:
			return Handshake{Protocol: ProtocolAMQP091}
		case h == ProtoHeader09:
			return Handshake{Protocol: ProtocolAMQP091, Legacy09: true}
		case h == ProtoHeader10SASL:
			return Handshake{Protocol: ProtocolAMQP10SASL}
		case a == 1 && b == 0 && c == 0:
			p := ProtocolUnknown
			switch id {
			case 0:
				p = ProtocolAMQP10
			case 2:
				p = ProtocolAMQP10TLS
			}
			return refuse(p, "sasl_required", protoHeaderDefault)
		case id == 0 && a == 0 && b >= 9:
			return refuse(ProtocolUnknown, "bad_version", ProtoHeader091)
		}
		return refuse(ProtocolUnknown, "bad_version", protoHeaderDefault)
	}
	if h[0] == 'G' && h[1] == 'E' && h[2] == 'T' && h[3] == ' ' {
		return refuse(ProtocolUnknown, "detected_http_get", protoHeaderDefault)
	}
	if h[0] == 0x16 && h[1] == 0x03 && h[5] == 0x01 {
		return refuse(ProtocolUnknown, "detected_tls", protoHeaderDefault)
	}
	return refuse(ProtocolUnknown, "bad_header", protoHeaderDefault)
}
