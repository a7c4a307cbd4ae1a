package amqp091

import (
	"encoding/binary"
)

// Class ids. exchange.bind and unbind, confirm, basic.nack, connection.blocked,
// unblocked and update-secret are RabbitMQ extensions.
const (
	ClassConnection = 10
	ClassChannel    = 20
	ClassAccess     = 30
	ClassExchange   = 40
	ClassQueue      = 50
	ClassBasic      = 60
	ClassConfirm    = 85
	ClassTx         = 90
)

// Method ids, by class.
const (
	MethodConnectionStart          = 10
	MethodConnectionStartOk        = 11
	MethodConnectionSecure         = 20
	MethodConnectionSecureOk       = 21
	MethodConnectionTune           = 30
	MethodConnectionTuneOk         = 31
	MethodConnectionOpen           = 40
	MethodConnectionOpenOk         = 41
	MethodConnectionClose          = 50
	MethodConnectionCloseOk        = 51
	MethodConnectionBlocked        = 60
	MethodConnectionUnblocked      = 61
	MethodConnectionUpdateSecret   = 70
	MethodConnectionUpdateSecretOk = 71
	MethodChannelOpen              = 10
	MethodChannelOpenOk            = 11
	MethodChannelFlow              = 20
	MethodChannelFlowOk            = 21
	MethodChannelClose             = 40
	MethodChannelCloseOk           = 41
	MethodAccessRequest            = 10
	MethodAccessRequestOk          = 11
	MethodExchangeDeclare          = 10
	MethodExchangeDeclareOk        = 11
	MethodExchangeDelete           = 20
	MethodExchangeDeleteOk         = 21
	MethodExchangeBind             = 30
	MethodExchangeBindOk           = 31
	MethodExchangeUnbind           = 40
	MethodExchangeUnbindOk         = 51
	MethodQueueDeclare             = 10
	MethodQueueDeclareOk           = 11
	MethodQueueBind                = 20
	MethodQueueBindOk              = 21
	MethodQueuePurge               = 30
	MethodQueuePurgeOk             = 31
	MethodQueueDelete              = 40
	MethodQueueDeleteOk            = 41
	MethodQueueUnbind              = 50
	MethodQueueUnbindOk            = 51
	MethodBasicQos                 = 10
	MethodBasicQosOk               = 11
	MethodBasicConsume             = 20
	MethodBasicConsumeOk           = 21
	MethodBasicCancel              = 30
	MethodBasicCancelOk            = 31
	MethodBasicPublish             = 40
	MethodBasicReturn              = 50
	MethodBasicDeliver             = 60
	MethodBasicGet                 = 70
	MethodBasicGetOk               = 71
	MethodBasicGetEmpty            = 72
	MethodBasicAck                 = 80
	MethodBasicReject              = 90
	MethodBasicRecoverAsync        = 100
	MethodBasicRecover             = 110
	MethodBasicRecoverOk           = 111
	MethodBasicNack                = 120
	MethodConfirmSelect            = 10
	MethodConfirmSelectOk          = 11
	MethodTxSelect                 = 10
	MethodTxSelectOk               = 11
	MethodTxCommit                 = 20
	MethodTxCommitOk               = 21
	MethodTxRollback               = 30
	MethodTxRollbackOk             = 31
)

// ConnectionStart is connection.start.
//
//	connection.start (10, 10)
//	  version-major      octet
//	  version-minor      octet
//	  server-properties  table
//	  mechanisms         longstr
//	  locales            longstr
type ConnectionStart struct {
	VersionMajor     uint8
	VersionMinor     uint8
	ServerProperties Table
	Mechanisms       string
	Locales          string
}

func (*ConnectionStart) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionStart
}

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionStart) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassConnection, MethodConnectionStart)
	var err error
	b = append(b, m.VersionMajor)
	b = append(b, m.VersionMinor)
	if b, err = AppendTable(b, m.ServerProperties); err != nil {
		return b, err
	}
	b = appendLongstr(b, m.Mechanisms)
	b = appendLongstr(b, m.Locales)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionStart) Decode(args []byte) error {
	d := decoder{b: args}
	m.VersionMajor = d.octet()
	m.VersionMinor = d.octet()
	m.ServerProperties = d.table()
	m.Mechanisms = d.longstr()
	m.Locales = d.longstr()
	return d.finish()
}

// ConnectionStartOk is connection.start-ok.
//
//	connection.start-ok (10, 11)
//	  client-properties  table
//	  mechanism          shortstr
//	  response           longstr
//	  locale             shortstr
type ConnectionStartOk struct {
	ClientProperties Table
	Mechanism        string
	Response         string
	Locale           string
}

func (*ConnectionStartOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionStartOk
}

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionStartOk) Append(b []byte) ([]byte, error) {
	if len(m.Mechanism) > 255 {
		return b, shortstrErr("mechanism", len(m.Mechanism))
	}
	if len(m.Locale) > 255 {
		return b, shortstrErr("locale", len(m.Locale))
	}
	b = appendIDs(b, ClassConnection, MethodConnectionStartOk)
	var err error
	if b, err = AppendTable(b, m.ClientProperties); err != nil {
		return b, err
	}
	b = appendShortstr(b, m.Mechanism)
	b = appendLongstr(b, m.Response)
	b = appendShortstr(b, m.Locale)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionStartOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.ClientProperties = d.table()
	d.shortstrTo(&m.Mechanism, true)
	m.Response = d.longstr()
	d.shortstrTo(&m.Locale, true)
	return d.finish()
}

// ConnectionSecure is connection.secure.
//
//	connection.secure (10, 20)
//	  challenge          longstr
type ConnectionSecure struct {
	Challenge string
}

func (*ConnectionSecure) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionSecure
}

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionSecure) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassConnection, MethodConnectionSecure)
	b = appendLongstr(b, m.Challenge)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionSecure) Decode(args []byte) error {
	d := decoder{b: args}
	m.Challenge = d.longstr()
	return d.finish()
}

// ConnectionSecureOk is connection.secure-ok.
//
//	connection.secure-ok (10, 21)
//	  response           longstr
type ConnectionSecureOk struct {
	Response string
}

func (*ConnectionSecureOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionSecureOk
}

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionSecureOk) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassConnection, MethodConnectionSecureOk)
	b = appendLongstr(b, m.Response)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionSecureOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.Response = d.longstr()
	return d.finish()
}

// ConnectionTune is connection.tune.
//
//	connection.tune (10, 30)
//	  channel-max        short
//	  frame-max          long
//	  heartbeat          short
type ConnectionTune struct {
	ChannelMax uint16
	FrameMax   uint32
	Heartbeat  uint16
}

func (*ConnectionTune) ID() (classID, methodID uint16) { return ClassConnection, MethodConnectionTune }

func (m *ConnectionTune) Append(b []byte) ([]byte, error) {
	return m.appendArgs(appendIDs(b, ClassConnection, MethodConnectionTune))
}

func (m *ConnectionTune) Decode(args []byte) error { return m.decodeArgs(args) }

func (m *ConnectionTune) appendArgs(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, m.ChannelMax)
	b = binary.BigEndian.AppendUint32(b, m.FrameMax)
	b = binary.BigEndian.AppendUint16(b, m.Heartbeat)
	return b, nil
}

func (m *ConnectionTune) decodeArgs(args []byte) error {
	d := decoder{b: args}
	m.ChannelMax = d.short()
	m.FrameMax = d.long()
	m.Heartbeat = d.short()
	return d.finish()
}

// ConnectionTuneOk is connection.tune-ok, with the arguments of ConnectionTune.
//
//	connection.tune-ok (10, 31)
//	  channel-max        short
//	  frame-max          long
//	  heartbeat          short
type ConnectionTuneOk ConnectionTune

func (*ConnectionTuneOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionTuneOk
}

func (m *ConnectionTuneOk) Append(b []byte) ([]byte, error) {
	return (*ConnectionTune)(m).appendArgs(appendIDs(b, ClassConnection, MethodConnectionTuneOk))
}

func (m *ConnectionTuneOk) Decode(args []byte) error { return (*ConnectionTune)(m).decodeArgs(args) }

// ConnectionOpen is connection.open.
//
//	connection.open (10, 40)
//	  virtual-host       shortstr
//	  capabilities       shortstr
//	  insist             bit
type ConnectionOpen struct {
	VirtualHost  string
	Capabilities string
	Insist       bool
}

func (*ConnectionOpen) ID() (classID, methodID uint16) { return ClassConnection, MethodConnectionOpen }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionOpen) Append(b []byte) ([]byte, error) {
	if len(m.VirtualHost) > 255 {
		return b, shortstrErr("virtual-host", len(m.VirtualHost))
	}
	if len(m.Capabilities) > 255 {
		return b, shortstrErr("capabilities", len(m.Capabilities))
	}
	b = appendIDs(b, ClassConnection, MethodConnectionOpen)
	b = appendShortstr(b, m.VirtualHost)
	b = appendShortstr(b, m.Capabilities)
	b = append(b, flag(m.Insist, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionOpen) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.VirtualHost, true)
	d.shortstrTo(&m.Capabilities, true)
	m.Insist = d.octet()&1 != 0
	return d.finish()
}

// ConnectionOpenOk is connection.open-ok.
//
//	connection.open-ok (10, 41)
//	  known-hosts        shortstr
type ConnectionOpenOk struct {
	KnownHosts string
}

func (*ConnectionOpenOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionOpenOk
}

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionOpenOk) Append(b []byte) ([]byte, error) {
	if len(m.KnownHosts) > 255 {
		return b, shortstrErr("known-hosts", len(m.KnownHosts))
	}
	b = appendIDs(b, ClassConnection, MethodConnectionOpenOk)
	b = appendShortstr(b, m.KnownHosts)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionOpenOk) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.KnownHosts, true)
	return d.finish()
}

// ConnectionClose is connection.close.
//
//	connection.close (10, 50)
//	  reply-code         short
//	  reply-text         shortstr
//	  class-id           short
//	  method-id          short
type ConnectionClose struct {
	ReplyCode uint16
	ReplyText string
	ClassID   uint16
	MethodID  uint16
}

func (*ConnectionClose) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionClose
}

func (m *ConnectionClose) Append(b []byte) ([]byte, error) {
	return m.appendArgs(appendIDs(b, ClassConnection, MethodConnectionClose))
}

func (m *ConnectionClose) Decode(args []byte) error { return m.decodeArgs(args) }

func (m *ConnectionClose) appendArgs(b []byte) ([]byte, error) {
	if len(m.ReplyText) > 255 {
		return b, shortstrErr("reply-text", len(m.ReplyText))
	}
	b = binary.BigEndian.AppendUint16(b, m.ReplyCode)
	b = appendShortstr(b, m.ReplyText)
	b = binary.BigEndian.AppendUint16(b, m.ClassID)
	b = binary.BigEndian.AppendUint16(b, m.MethodID)
	return b, nil
}

func (m *ConnectionClose) decodeArgs(args []byte) error {
	d := decoder{b: args}
	m.ReplyCode = d.short()
	d.shortstrTo(&m.ReplyText, true)
	m.ClassID = d.short()
	m.MethodID = d.short()
	return d.finish()
}

// ConnectionCloseOk is connection.close-ok, which has no arguments.
//
//	connection.close-ok (10, 51)
type ConnectionCloseOk struct{}

func (*ConnectionCloseOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionCloseOk
}
func (*ConnectionCloseOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassConnection, MethodConnectionCloseOk), nil
}
func (*ConnectionCloseOk) Decode(args []byte) error { return noArgs(args) }

// ConnectionBlocked is connection.blocked.
//
//	connection.blocked (10, 60)
//	  reason             shortstr
type ConnectionBlocked struct {
	Reason string
}

func (*ConnectionBlocked) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionBlocked
}

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionBlocked) Append(b []byte) ([]byte, error) {
	if len(m.Reason) > 255 {
		return b, shortstrErr("reason", len(m.Reason))
	}
	b = appendIDs(b, ClassConnection, MethodConnectionBlocked)
	b = appendShortstr(b, m.Reason)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionBlocked) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.Reason, true)
	return d.finish()
}

// ConnectionUnblocked is connection.unblocked, which has no arguments.
//
//	connection.unblocked (10, 61)
type ConnectionUnblocked struct{}

func (*ConnectionUnblocked) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionUnblocked
}
func (*ConnectionUnblocked) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassConnection, MethodConnectionUnblocked), nil
}
func (*ConnectionUnblocked) Decode(args []byte) error { return noArgs(args) }

// ConnectionUpdateSecret is connection.update-secret.
//
//	connection.update-secret (10, 70)
//	  new-secret         longstr
//	  reason             shortstr
type ConnectionUpdateSecret struct {
	NewSecret string
	Reason    string
}

func (*ConnectionUpdateSecret) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionUpdateSecret
}

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConnectionUpdateSecret) Append(b []byte) ([]byte, error) {
	if len(m.Reason) > 255 {
		return b, shortstrErr("reason", len(m.Reason))
	}
	b = appendIDs(b, ClassConnection, MethodConnectionUpdateSecret)
	b = appendLongstr(b, m.NewSecret)
	b = appendShortstr(b, m.Reason)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionUpdateSecret) Decode(args []byte) error {
	d := decoder{b: args}
	m.NewSecret = d.longstr()
	d.shortstrTo(&m.Reason, true)
	return d.finish()
}

// ConnectionUpdateSecretOk is connection.update-secret-ok, which has no arguments.
//
//	connection.update-secret-ok (10, 71)
type ConnectionUpdateSecretOk struct{}

func (*ConnectionUpdateSecretOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionUpdateSecretOk
}
func (*ConnectionUpdateSecretOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassConnection, MethodConnectionUpdateSecretOk), nil
}
func (*ConnectionUpdateSecretOk) Decode(args []byte) error { return noArgs(args) }

// ChannelOpen is channel.open.
//
//	channel.open (20, 10)
//	  out-of-band        shortstr
type ChannelOpen struct {
	OutOfBand string
}

func (*ChannelOpen) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelOpen }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ChannelOpen) Append(b []byte) ([]byte, error) {
	if len(m.OutOfBand) > 255 {
		return b, shortstrErr("out-of-band", len(m.OutOfBand))
	}
	b = appendIDs(b, ClassChannel, MethodChannelOpen)
	b = appendShortstr(b, m.OutOfBand)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ChannelOpen) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.OutOfBand, true)
	return d.finish()
}

// ChannelOpenOk is channel.open-ok.
//
//	channel.open-ok (20, 11)
//	  channel-id         longstr
type ChannelOpenOk struct {
	ChannelID string
}

func (*ChannelOpenOk) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelOpenOk }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ChannelOpenOk) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassChannel, MethodChannelOpenOk)
	b = appendLongstr(b, m.ChannelID)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ChannelOpenOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.ChannelID = d.longstr()
	return d.finish()
}

// ChannelFlow is channel.flow.
//
//	channel.flow (20, 20)
//	  active             bit
type ChannelFlow struct {
	Active bool
}

func (*ChannelFlow) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelFlow }

func (m *ChannelFlow) Append(b []byte) ([]byte, error) {
	return m.appendArgs(appendIDs(b, ClassChannel, MethodChannelFlow))
}

func (m *ChannelFlow) Decode(args []byte) error { return m.decodeArgs(args) }

func (m *ChannelFlow) appendArgs(b []byte) ([]byte, error) {
	b = append(b, flag(m.Active, 0))
	return b, nil
}

func (m *ChannelFlow) decodeArgs(args []byte) error {
	d := decoder{b: args}
	m.Active = d.octet()&1 != 0
	return d.finish()
}

// ChannelFlowOk is channel.flow-ok, with the arguments of ChannelFlow.
//
//	channel.flow-ok (20, 21)
//	  active             bit
type ChannelFlowOk ChannelFlow

func (*ChannelFlowOk) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelFlowOk }

func (m *ChannelFlowOk) Append(b []byte) ([]byte, error) {
	return (*ChannelFlow)(m).appendArgs(appendIDs(b, ClassChannel, MethodChannelFlowOk))
}

func (m *ChannelFlowOk) Decode(args []byte) error { return (*ChannelFlow)(m).decodeArgs(args) }

// ChannelClose is channel.close, with the arguments of ConnectionClose.
//
//	channel.close (20, 40)
//	  reply-code         short
//	  reply-text         shortstr
//	  class-id           short
//	  method-id          short
type ChannelClose ConnectionClose

func (*ChannelClose) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelClose }

func (m *ChannelClose) Append(b []byte) ([]byte, error) {
	return (*ConnectionClose)(m).appendArgs(appendIDs(b, ClassChannel, MethodChannelClose))
}

func (m *ChannelClose) Decode(args []byte) error { return (*ConnectionClose)(m).decodeArgs(args) }

// ChannelCloseOk is channel.close-ok, which has no arguments.
//
//	channel.close-ok (20, 41)
type ChannelCloseOk struct{}

func (*ChannelCloseOk) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelCloseOk }
func (*ChannelCloseOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassChannel, MethodChannelCloseOk), nil
}
func (*ChannelCloseOk) Decode(args []byte) error { return noArgs(args) }

// AccessRequest is access.request.
//
//	access.request (30, 10)
//	  realm              shortstr
//	  exclusive          bit
//	  passive            bit
//	  active             bit
//	  write              bit
//	  read               bit
type AccessRequest struct {
	Realm     string
	Exclusive bool
	Passive   bool
	Active    bool
	Write     bool
	Read      bool
}

func (*AccessRequest) ID() (classID, methodID uint16) { return ClassAccess, MethodAccessRequest }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *AccessRequest) Append(b []byte) ([]byte, error) {
	if len(m.Realm) > 255 {
		return b, shortstrErr("realm", len(m.Realm))
	}
	b = appendIDs(b, ClassAccess, MethodAccessRequest)
	b = appendShortstr(b, m.Realm)
	b = append(b, flag(m.Exclusive, 0)|flag(m.Passive, 1)|flag(m.Active, 2)|flag(m.Write, 3)|flag(m.Read, 4))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *AccessRequest) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.Realm, true)
	bits := d.octet()
	m.Exclusive = bits&1 != 0
	m.Passive = bits&2 != 0
	m.Active = bits&4 != 0
	m.Write = bits&8 != 0
	m.Read = bits&16 != 0
	return d.finish()
}

// AccessRequestOk is access.request-ok.
//
//	access.request-ok (30, 11)
//	  ticket             short
type AccessRequestOk struct {
	Ticket uint16
}

func (*AccessRequestOk) ID() (classID, methodID uint16) { return ClassAccess, MethodAccessRequestOk }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *AccessRequestOk) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassAccess, MethodAccessRequestOk)
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *AccessRequestOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	return d.finish()
}

// ExchangeDeclare is exchange.declare.
//
//	exchange.declare (40, 10)
//	  ticket             short
//	  exchange           shortstr
//	  type               shortstr
//	  passive            bit
//	  durable            bit
//	  auto-delete        bit
//	  internal           bit
//	  no-wait            bit
//	  arguments          table
type ExchangeDeclare struct {
	Ticket     uint16
	Exchange   string
	Type       string
	Passive    bool
	Durable    bool
	AutoDelete bool
	Internal   bool
	NoWait     bool
	Arguments  Table
}

func (*ExchangeDeclare) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeDeclare }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ExchangeDeclare) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	if len(m.Type) > 255 {
		return b, shortstrErr("type", len(m.Type))
	}
	b = appendIDs(b, ClassExchange, MethodExchangeDeclare)
	var err error
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Exchange)
	b = appendShortstr(b, m.Type)
	b = append(b, flag(m.Passive, 0)|flag(m.Durable, 1)|flag(m.AutoDelete, 2)|flag(m.Internal, 3)|flag(m.NoWait, 4))
	if b, err = AppendTable(b, m.Arguments); err != nil {
		return b, err
	}
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ExchangeDeclare) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Exchange, true)
	d.shortstrTo(&m.Type, true)
	bits := d.octet()
	m.Passive = bits&1 != 0
	m.Durable = bits&2 != 0
	m.AutoDelete = bits&4 != 0
	m.Internal = bits&8 != 0
	m.NoWait = bits&16 != 0
	m.Arguments = d.table()
	return d.finish()
}

// ExchangeDeclareOk is exchange.declare-ok, which has no arguments.
//
//	exchange.declare-ok (40, 11)
type ExchangeDeclareOk struct{}

func (*ExchangeDeclareOk) ID() (classID, methodID uint16) {
	return ClassExchange, MethodExchangeDeclareOk
}
func (*ExchangeDeclareOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassExchange, MethodExchangeDeclareOk), nil
}
func (*ExchangeDeclareOk) Decode(args []byte) error { return noArgs(args) }

// ExchangeDelete is exchange.delete.
//
//	exchange.delete (40, 20)
//	  ticket             short
//	  exchange           shortstr
//	  if-unused          bit
//	  no-wait            bit
type ExchangeDelete struct {
	Ticket   uint16
	Exchange string
	IfUnused bool
	NoWait   bool
}

func (*ExchangeDelete) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeDelete }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ExchangeDelete) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	b = appendIDs(b, ClassExchange, MethodExchangeDelete)
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Exchange)
	b = append(b, flag(m.IfUnused, 0)|flag(m.NoWait, 1))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ExchangeDelete) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Exchange, true)
	bits := d.octet()
	m.IfUnused = bits&1 != 0
	m.NoWait = bits&2 != 0
	return d.finish()
}

// ExchangeDeleteOk is exchange.delete-ok, which has no arguments.
//
//	exchange.delete-ok (40, 21)
type ExchangeDeleteOk struct{}

func (*ExchangeDeleteOk) ID() (classID, methodID uint16) {
	return ClassExchange, MethodExchangeDeleteOk
}
func (*ExchangeDeleteOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassExchange, MethodExchangeDeleteOk), nil
}
func (*ExchangeDeleteOk) Decode(args []byte) error { return noArgs(args) }

// ExchangeBind is exchange.bind.
//
//	exchange.bind (40, 30)
//	  ticket             short
//	  destination        shortstr
//	  source             shortstr
//	  routing-key        shortstr
//	  no-wait            bit
//	  arguments          table
type ExchangeBind struct {
	Ticket      uint16
	Destination string
	Source      string
	RoutingKey  string
	NoWait      bool
	Arguments   Table
}

func (*ExchangeBind) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeBind }

func (m *ExchangeBind) Append(b []byte) ([]byte, error) {
	return m.appendArgs(appendIDs(b, ClassExchange, MethodExchangeBind))
}

func (m *ExchangeBind) Decode(args []byte) error { return m.decodeArgs(args) }

func (m *ExchangeBind) appendArgs(b []byte) ([]byte, error) {
	if len(m.Destination) > 255 {
		return b, shortstrErr("destination", len(m.Destination))
	}
	if len(m.Source) > 255 {
		return b, shortstrErr("source", len(m.Source))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("routing-key", len(m.RoutingKey))
	}
	var err error
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Destination)
	b = appendShortstr(b, m.Source)
	b = appendShortstr(b, m.RoutingKey)
	b = append(b, flag(m.NoWait, 0))
	if b, err = AppendTable(b, m.Arguments); err != nil {
		return b, err
	}
	return b, nil
}

func (m *ExchangeBind) decodeArgs(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Destination, true)
	d.shortstrTo(&m.Source, true)
	d.shortstrTo(&m.RoutingKey, true)
	m.NoWait = d.octet()&1 != 0
	m.Arguments = d.table()
	return d.finish()
}

// ExchangeBindOk is exchange.bind-ok, which has no arguments.
//
//	exchange.bind-ok (40, 31)
type ExchangeBindOk struct{}

func (*ExchangeBindOk) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeBindOk }
func (*ExchangeBindOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassExchange, MethodExchangeBindOk), nil
}
func (*ExchangeBindOk) Decode(args []byte) error { return noArgs(args) }

// ExchangeUnbind is exchange.unbind, with the arguments of ExchangeBind.
//
//	exchange.unbind (40, 40)
//	  ticket             short
//	  destination        shortstr
//	  source             shortstr
//	  routing-key        shortstr
//	  no-wait            bit
//	  arguments          table
type ExchangeUnbind ExchangeBind

func (*ExchangeUnbind) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeUnbind }

func (m *ExchangeUnbind) Append(b []byte) ([]byte, error) {
	return (*ExchangeBind)(m).appendArgs(appendIDs(b, ClassExchange, MethodExchangeUnbind))
}

func (m *ExchangeUnbind) Decode(args []byte) error { return (*ExchangeBind)(m).decodeArgs(args) }

// ExchangeUnbindOk is exchange.unbind-ok, which has no arguments.
//
//	exchange.unbind-ok (40, 51)
type ExchangeUnbindOk struct{}

func (*ExchangeUnbindOk) ID() (classID, methodID uint16) {
	return ClassExchange, MethodExchangeUnbindOk
}
func (*ExchangeUnbindOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassExchange, MethodExchangeUnbindOk), nil
}
func (*ExchangeUnbindOk) Decode(args []byte) error { return noArgs(args) }

// QueueDeclare is queue.declare.
//
//	queue.declare (50, 10)
//	  ticket             short
//	  queue              shortstr
//	  passive            bit
//	  durable            bit
//	  exclusive          bit
//	  auto-delete        bit
//	  no-wait            bit
//	  arguments          table
type QueueDeclare struct {
	Ticket     uint16
	Queue      string
	Passive    bool
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	NoWait     bool
	Arguments  Table
}

func (*QueueDeclare) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDeclare }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *QueueDeclare) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	b = appendIDs(b, ClassQueue, MethodQueueDeclare)
	var err error
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Queue)
	b = append(b, flag(m.Passive, 0)|flag(m.Durable, 1)|flag(m.Exclusive, 2)|flag(m.AutoDelete, 3)|flag(m.NoWait, 4))
	if b, err = AppendTable(b, m.Arguments); err != nil {
		return b, err
	}
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueueDeclare) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Queue, true)
	bits := d.octet()
	m.Passive = bits&1 != 0
	m.Durable = bits&2 != 0
	m.Exclusive = bits&4 != 0
	m.AutoDelete = bits&8 != 0
	m.NoWait = bits&16 != 0
	m.Arguments = d.table()
	return d.finish()
}

// QueueDeclareOk is queue.declare-ok.
//
//	queue.declare-ok (50, 11)
//	  queue              shortstr
//	  message-count      long
//	  consumer-count     long
type QueueDeclareOk struct {
	Queue         string
	MessageCount  uint32
	ConsumerCount uint32
}

func (*QueueDeclareOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDeclareOk }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *QueueDeclareOk) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	b = appendIDs(b, ClassQueue, MethodQueueDeclareOk)
	b = appendShortstr(b, m.Queue)
	b = binary.BigEndian.AppendUint32(b, m.MessageCount)
	b = binary.BigEndian.AppendUint32(b, m.ConsumerCount)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueueDeclareOk) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.Queue, true)
	m.MessageCount = d.long()
	m.ConsumerCount = d.long()
	return d.finish()
}

// QueueBind is queue.bind.
//
//	queue.bind (50, 20)
//	  ticket             short
//	  queue              shortstr
//	  exchange           shortstr
//	  routing-key        shortstr
//	  no-wait            bit
//	  arguments          table
type QueueBind struct {
	Ticket     uint16
	Queue      string
	Exchange   string
	RoutingKey string
	NoWait     bool
	Arguments  Table
}

func (*QueueBind) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueBind }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *QueueBind) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("routing-key", len(m.RoutingKey))
	}
	b = appendIDs(b, ClassQueue, MethodQueueBind)
	var err error
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Queue)
	b = appendShortstr(b, m.Exchange)
	b = appendShortstr(b, m.RoutingKey)
	b = append(b, flag(m.NoWait, 0))
	if b, err = AppendTable(b, m.Arguments); err != nil {
		return b, err
	}
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueueBind) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Queue, true)
	d.shortstrTo(&m.Exchange, true)
	d.shortstrTo(&m.RoutingKey, true)
	m.NoWait = d.octet()&1 != 0
	m.Arguments = d.table()
	return d.finish()
}

// QueueBindOk is queue.bind-ok, which has no arguments.
//
//	queue.bind-ok (50, 21)
type QueueBindOk struct{}

func (*QueueBindOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueBindOk }
func (*QueueBindOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassQueue, MethodQueueBindOk), nil
}
func (*QueueBindOk) Decode(args []byte) error { return noArgs(args) }

// QueuePurge is queue.purge.
//
//	queue.purge (50, 30)
//	  ticket             short
//	  queue              shortstr
//	  no-wait            bit
type QueuePurge struct {
	Ticket uint16
	Queue  string
	NoWait bool
}

func (*QueuePurge) ID() (classID, methodID uint16) { return ClassQueue, MethodQueuePurge }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *QueuePurge) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	b = appendIDs(b, ClassQueue, MethodQueuePurge)
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Queue)
	b = append(b, flag(m.NoWait, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueuePurge) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Queue, true)
	m.NoWait = d.octet()&1 != 0
	return d.finish()
}

// QueuePurgeOk is queue.purge-ok.
//
//	queue.purge-ok (50, 31)
//	  message-count      long
type QueuePurgeOk struct {
	MessageCount uint32
}

func (*QueuePurgeOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueuePurgeOk }

func (m *QueuePurgeOk) Append(b []byte) ([]byte, error) {
	return m.appendArgs(appendIDs(b, ClassQueue, MethodQueuePurgeOk))
}

func (m *QueuePurgeOk) Decode(args []byte) error { return m.decodeArgs(args) }

func (m *QueuePurgeOk) appendArgs(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, m.MessageCount)
	return b, nil
}

func (m *QueuePurgeOk) decodeArgs(args []byte) error {
	d := decoder{b: args}
	m.MessageCount = d.long()
	return d.finish()
}

// QueueDelete is queue.delete.
//
//	queue.delete (50, 40)
//	  ticket             short
//	  queue              shortstr
//	  if-unused          bit
//	  if-empty           bit
//	  no-wait            bit
type QueueDelete struct {
	Ticket   uint16
	Queue    string
	IfUnused bool
	IfEmpty  bool
	NoWait   bool
}

func (*QueueDelete) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDelete }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *QueueDelete) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	b = appendIDs(b, ClassQueue, MethodQueueDelete)
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Queue)
	b = append(b, flag(m.IfUnused, 0)|flag(m.IfEmpty, 1)|flag(m.NoWait, 2))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueueDelete) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Queue, true)
	bits := d.octet()
	m.IfUnused = bits&1 != 0
	m.IfEmpty = bits&2 != 0
	m.NoWait = bits&4 != 0
	return d.finish()
}

// QueueDeleteOk is queue.delete-ok, with the arguments of QueuePurgeOk.
//
//	queue.delete-ok (50, 41)
//	  message-count      long
type QueueDeleteOk QueuePurgeOk

func (*QueueDeleteOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDeleteOk }

func (m *QueueDeleteOk) Append(b []byte) ([]byte, error) {
	return (*QueuePurgeOk)(m).appendArgs(appendIDs(b, ClassQueue, MethodQueueDeleteOk))
}

func (m *QueueDeleteOk) Decode(args []byte) error { return (*QueuePurgeOk)(m).decodeArgs(args) }

// QueueUnbind is queue.unbind.
//
//	queue.unbind (50, 50)
//	  ticket             short
//	  queue              shortstr
//	  exchange           shortstr
//	  routing-key        shortstr
//	  arguments          table
type QueueUnbind struct {
	Ticket     uint16
	Queue      string
	Exchange   string
	RoutingKey string
	Arguments  Table
}

func (*QueueUnbind) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueUnbind }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *QueueUnbind) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("routing-key", len(m.RoutingKey))
	}
	b = appendIDs(b, ClassQueue, MethodQueueUnbind)
	var err error
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Queue)
	b = appendShortstr(b, m.Exchange)
	b = appendShortstr(b, m.RoutingKey)
	if b, err = AppendTable(b, m.Arguments); err != nil {
		return b, err
	}
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueueUnbind) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Queue, true)
	d.shortstrTo(&m.Exchange, true)
	d.shortstrTo(&m.RoutingKey, true)
	m.Arguments = d.table()
	return d.finish()
}

// QueueUnbindOk is queue.unbind-ok, which has no arguments.
//
//	queue.unbind-ok (50, 51)
type QueueUnbindOk struct{}

func (*QueueUnbindOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueUnbindOk }
func (*QueueUnbindOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassQueue, MethodQueueUnbindOk), nil
}
func (*QueueUnbindOk) Decode(args []byte) error { return noArgs(args) }

// BasicQos is basic.qos.
//
//	basic.qos (60, 10)
//	  prefetch-size      long
//	  prefetch-count     short
//	  global             bit
type BasicQos struct {
	PrefetchSize  uint32
	PrefetchCount uint16
	Global        bool
}

func (*BasicQos) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicQos }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicQos) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassBasic, MethodBasicQos)
	b = binary.BigEndian.AppendUint32(b, m.PrefetchSize)
	b = binary.BigEndian.AppendUint16(b, m.PrefetchCount)
	b = append(b, flag(m.Global, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicQos) Decode(args []byte) error {
	d := decoder{b: args}
	m.PrefetchSize = d.long()
	m.PrefetchCount = d.short()
	m.Global = d.octet()&1 != 0
	return d.finish()
}

// BasicQosOk is basic.qos-ok, which has no arguments.
//
//	basic.qos-ok (60, 11)
type BasicQosOk struct{}

func (*BasicQosOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicQosOk }
func (*BasicQosOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassBasic, MethodBasicQosOk), nil
}
func (*BasicQosOk) Decode(args []byte) error { return noArgs(args) }

// BasicConsume is basic.consume.
//
//	basic.consume (60, 20)
//	  ticket             short
//	  queue              shortstr
//	  consumer-tag       shortstr
//	  no-local           bit
//	  no-ack             bit
//	  exclusive          bit
//	  no-wait            bit
//	  arguments          table
type BasicConsume struct {
	Ticket      uint16
	Queue       string
	ConsumerTag string
	NoLocal     bool
	NoAck       bool
	Exclusive   bool
	NoWait      bool
	Arguments   Table
}

func (*BasicConsume) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicConsume }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicConsume) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("consumer-tag", len(m.ConsumerTag))
	}
	b = appendIDs(b, ClassBasic, MethodBasicConsume)
	var err error
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Queue)
	b = appendShortstr(b, m.ConsumerTag)
	b = append(b, flag(m.NoLocal, 0)|flag(m.NoAck, 1)|flag(m.Exclusive, 2)|flag(m.NoWait, 3))
	if b, err = AppendTable(b, m.Arguments); err != nil {
		return b, err
	}
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicConsume) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Queue, true)
	d.shortstrTo(&m.ConsumerTag, true)
	bits := d.octet()
	m.NoLocal = bits&1 != 0
	m.NoAck = bits&2 != 0
	m.Exclusive = bits&4 != 0
	m.NoWait = bits&8 != 0
	m.Arguments = d.table()
	return d.finish()
}

// BasicConsumeOk is basic.consume-ok.
//
//	basic.consume-ok (60, 21)
//	  consumer-tag       shortstr
type BasicConsumeOk struct {
	ConsumerTag string
}

func (*BasicConsumeOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicConsumeOk }

func (m *BasicConsumeOk) Append(b []byte) ([]byte, error) {
	return m.appendArgs(appendIDs(b, ClassBasic, MethodBasicConsumeOk))
}

func (m *BasicConsumeOk) Decode(args []byte) error { return m.decodeArgs(args) }

func (m *BasicConsumeOk) appendArgs(b []byte) ([]byte, error) {
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("consumer-tag", len(m.ConsumerTag))
	}
	b = appendShortstr(b, m.ConsumerTag)
	return b, nil
}

func (m *BasicConsumeOk) decodeArgs(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.ConsumerTag, true)
	return d.finish()
}

// BasicCancel is basic.cancel.
//
//	basic.cancel (60, 30)
//	  consumer-tag       shortstr
//	  no-wait            bit
type BasicCancel struct {
	ConsumerTag string
	NoWait      bool
}

func (*BasicCancel) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicCancel }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicCancel) Append(b []byte) ([]byte, error) {
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("consumer-tag", len(m.ConsumerTag))
	}
	b = appendIDs(b, ClassBasic, MethodBasicCancel)
	b = appendShortstr(b, m.ConsumerTag)
	b = append(b, flag(m.NoWait, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicCancel) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.ConsumerTag, true)
	m.NoWait = d.octet()&1 != 0
	return d.finish()
}

// BasicCancelOk is basic.cancel-ok, with the arguments of BasicConsumeOk.
//
//	basic.cancel-ok (60, 31)
//	  consumer-tag       shortstr
type BasicCancelOk BasicConsumeOk

func (*BasicCancelOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicCancelOk }

func (m *BasicCancelOk) Append(b []byte) ([]byte, error) {
	return (*BasicConsumeOk)(m).appendArgs(appendIDs(b, ClassBasic, MethodBasicCancelOk))
}

func (m *BasicCancelOk) Decode(args []byte) error { return (*BasicConsumeOk)(m).decodeArgs(args) }

// BasicPublish is basic.publish.
//
//	basic.publish (60, 40), carries content
//	  ticket             short
//	  exchange           shortstr
//	  routing-key        shortstr
//	  mandatory          bit
//	  immediate          bit
type BasicPublish struct {
	Ticket     uint16
	Exchange   string
	RoutingKey string
	Mandatory  bool
	Immediate  bool
}

func (*BasicPublish) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicPublish }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicPublish) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("routing-key", len(m.RoutingKey))
	}
	b = appendIDs(b, ClassBasic, MethodBasicPublish)
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Exchange)
	b = appendShortstr(b, m.RoutingKey)
	b = append(b, flag(m.Mandatory, 0)|flag(m.Immediate, 1))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicPublish) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Exchange, false)
	d.shortstrTo(&m.RoutingKey, false)
	bits := d.octet()
	m.Mandatory = bits&1 != 0
	m.Immediate = bits&2 != 0
	return d.finish()
}

// BasicReturn is basic.return.
//
//	basic.return (60, 50), carries content
//	  reply-code         short
//	  reply-text         shortstr
//	  exchange           shortstr
//	  routing-key        shortstr
type BasicReturn struct {
	ReplyCode  uint16
	ReplyText  string
	Exchange   string
	RoutingKey string
}

func (*BasicReturn) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicReturn }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicReturn) Append(b []byte) ([]byte, error) {
	if len(m.ReplyText) > 255 {
		return b, shortstrErr("reply-text", len(m.ReplyText))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("routing-key", len(m.RoutingKey))
	}
	b = appendIDs(b, ClassBasic, MethodBasicReturn)
	b = binary.BigEndian.AppendUint16(b, m.ReplyCode)
	b = appendShortstr(b, m.ReplyText)
	b = appendShortstr(b, m.Exchange)
	b = appendShortstr(b, m.RoutingKey)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicReturn) Decode(args []byte) error {
	d := decoder{b: args}
	m.ReplyCode = d.short()
	d.shortstrTo(&m.ReplyText, false)
	d.shortstrTo(&m.Exchange, false)
	d.shortstrTo(&m.RoutingKey, false)
	return d.finish()
}

// BasicDeliver is basic.deliver.
//
//	basic.deliver (60, 60), carries content
//	  consumer-tag       shortstr
//	  delivery-tag       longlong
//	  redelivered        bit
//	  exchange           shortstr
//	  routing-key        shortstr
type BasicDeliver struct {
	ConsumerTag string
	DeliveryTag uint64
	Redelivered bool
	Exchange    string
	RoutingKey  string
}

func (*BasicDeliver) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicDeliver }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicDeliver) Append(b []byte) ([]byte, error) {
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("consumer-tag", len(m.ConsumerTag))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("routing-key", len(m.RoutingKey))
	}
	b = appendIDs(b, ClassBasic, MethodBasicDeliver)
	b = appendShortstr(b, m.ConsumerTag)
	b = binary.BigEndian.AppendUint64(b, m.DeliveryTag)
	b = append(b, flag(m.Redelivered, 0))
	b = appendShortstr(b, m.Exchange)
	b = appendShortstr(b, m.RoutingKey)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicDeliver) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.ConsumerTag, false)
	m.DeliveryTag = d.longlong()
	m.Redelivered = d.octet()&1 != 0
	d.shortstrTo(&m.Exchange, false)
	d.shortstrTo(&m.RoutingKey, false)
	return d.finish()
}

// BasicGet is basic.get.
//
//	basic.get (60, 70)
//	  ticket             short
//	  queue              shortstr
//	  no-ack             bit
type BasicGet struct {
	Ticket uint16
	Queue  string
	NoAck  bool
}

func (*BasicGet) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicGet }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicGet) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue", len(m.Queue))
	}
	b = appendIDs(b, ClassBasic, MethodBasicGet)
	b = binary.BigEndian.AppendUint16(b, m.Ticket)
	b = appendShortstr(b, m.Queue)
	b = append(b, flag(m.NoAck, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicGet) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Queue, true)
	m.NoAck = d.octet()&1 != 0
	return d.finish()
}

// BasicGetOk is basic.get-ok.
//
//	basic.get-ok (60, 71), carries content
//	  delivery-tag       longlong
//	  redelivered        bit
//	  exchange           shortstr
//	  routing-key        shortstr
//	  message-count      long
type BasicGetOk struct {
	DeliveryTag  uint64
	Redelivered  bool
	Exchange     string
	RoutingKey   string
	MessageCount uint32
}

func (*BasicGetOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicGetOk }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicGetOk) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("routing-key", len(m.RoutingKey))
	}
	b = appendIDs(b, ClassBasic, MethodBasicGetOk)
	b = binary.BigEndian.AppendUint64(b, m.DeliveryTag)
	b = append(b, flag(m.Redelivered, 0))
	b = appendShortstr(b, m.Exchange)
	b = appendShortstr(b, m.RoutingKey)
	b = binary.BigEndian.AppendUint32(b, m.MessageCount)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicGetOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.DeliveryTag = d.longlong()
	m.Redelivered = d.octet()&1 != 0
	d.shortstrTo(&m.Exchange, false)
	d.shortstrTo(&m.RoutingKey, false)
	m.MessageCount = d.long()
	return d.finish()
}

// BasicGetEmpty is basic.get-empty.
//
//	basic.get-empty (60, 72)
//	  cluster-id         shortstr
type BasicGetEmpty struct {
	ClusterID string
}

func (*BasicGetEmpty) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicGetEmpty }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicGetEmpty) Append(b []byte) ([]byte, error) {
	if len(m.ClusterID) > 255 {
		return b, shortstrErr("cluster-id", len(m.ClusterID))
	}
	b = appendIDs(b, ClassBasic, MethodBasicGetEmpty)
	b = appendShortstr(b, m.ClusterID)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicGetEmpty) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.ClusterID, true)
	return d.finish()
}

// BasicAck is basic.ack.
//
//	basic.ack (60, 80)
//	  delivery-tag       longlong
//	  multiple           bit
type BasicAck struct {
	DeliveryTag uint64
	Multiple    bool
}

func (*BasicAck) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicAck }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicAck) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassBasic, MethodBasicAck)
	b = binary.BigEndian.AppendUint64(b, m.DeliveryTag)
	b = append(b, flag(m.Multiple, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicAck) Decode(args []byte) error {
	d := decoder{b: args}
	m.DeliveryTag = d.longlong()
	m.Multiple = d.octet()&1 != 0
	return d.finish()
}

// BasicReject is basic.reject.
//
//	basic.reject (60, 90)
//	  delivery-tag       longlong
//	  requeue            bit
type BasicReject struct {
	DeliveryTag uint64
	Requeue     bool
}

func (*BasicReject) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicReject }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicReject) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassBasic, MethodBasicReject)
	b = binary.BigEndian.AppendUint64(b, m.DeliveryTag)
	b = append(b, flag(m.Requeue, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicReject) Decode(args []byte) error {
	d := decoder{b: args}
	m.DeliveryTag = d.longlong()
	m.Requeue = d.octet()&1 != 0
	return d.finish()
}

// BasicRecoverAsync is basic.recover-async.
//
//	basic.recover-async (60, 100)
//	  requeue            bit
type BasicRecoverAsync struct {
	Requeue bool
}

func (*BasicRecoverAsync) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicRecoverAsync }

func (m *BasicRecoverAsync) Append(b []byte) ([]byte, error) {
	return m.appendArgs(appendIDs(b, ClassBasic, MethodBasicRecoverAsync))
}

func (m *BasicRecoverAsync) Decode(args []byte) error { return m.decodeArgs(args) }

func (m *BasicRecoverAsync) appendArgs(b []byte) ([]byte, error) {
	b = append(b, flag(m.Requeue, 0))
	return b, nil
}

func (m *BasicRecoverAsync) decodeArgs(args []byte) error {
	d := decoder{b: args}
	m.Requeue = d.octet()&1 != 0
	return d.finish()
}

// BasicRecover is basic.recover, with the arguments of BasicRecoverAsync.
//
//	basic.recover (60, 110)
//	  requeue            bit
type BasicRecover BasicRecoverAsync

func (*BasicRecover) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicRecover }

func (m *BasicRecover) Append(b []byte) ([]byte, error) {
	return (*BasicRecoverAsync)(m).appendArgs(appendIDs(b, ClassBasic, MethodBasicRecover))
}

func (m *BasicRecover) Decode(args []byte) error { return (*BasicRecoverAsync)(m).decodeArgs(args) }

// BasicRecoverOk is basic.recover-ok, which has no arguments.
//
//	basic.recover-ok (60, 111)
type BasicRecoverOk struct{}

func (*BasicRecoverOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicRecoverOk }
func (*BasicRecoverOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassBasic, MethodBasicRecoverOk), nil
}
func (*BasicRecoverOk) Decode(args []byte) error { return noArgs(args) }

// BasicNack is basic.nack.
//
//	basic.nack (60, 120)
//	  delivery-tag       longlong
//	  multiple           bit
//	  requeue            bit
type BasicNack struct {
	DeliveryTag uint64
	Multiple    bool
	Requeue     bool
}

func (*BasicNack) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicNack }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *BasicNack) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassBasic, MethodBasicNack)
	b = binary.BigEndian.AppendUint64(b, m.DeliveryTag)
	b = append(b, flag(m.Multiple, 0)|flag(m.Requeue, 1))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicNack) Decode(args []byte) error {
	d := decoder{b: args}
	m.DeliveryTag = d.longlong()
	bits := d.octet()
	m.Multiple = bits&1 != 0
	m.Requeue = bits&2 != 0
	return d.finish()
}

// ConfirmSelect is confirm.select.
//
//	confirm.select (85, 10)
//	  no-wait            bit
type ConfirmSelect struct {
	NoWait bool
}

func (*ConfirmSelect) ID() (classID, methodID uint16) { return ClassConfirm, MethodConfirmSelect }

// Append appends the method frame payload: class-id, method-id, arguments.
func (m *ConfirmSelect) Append(b []byte) ([]byte, error) {
	b = appendIDs(b, ClassConfirm, MethodConfirmSelect)
	b = append(b, flag(m.NoWait, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConfirmSelect) Decode(args []byte) error {
	d := decoder{b: args}
	m.NoWait = d.octet()&1 != 0
	return d.finish()
}

// ConfirmSelectOk is confirm.select-ok, which has no arguments.
//
//	confirm.select-ok (85, 11)
type ConfirmSelectOk struct{}

func (*ConfirmSelectOk) ID() (classID, methodID uint16) { return ClassConfirm, MethodConfirmSelectOk }
func (*ConfirmSelectOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassConfirm, MethodConfirmSelectOk), nil
}
func (*ConfirmSelectOk) Decode(args []byte) error { return noArgs(args) }

// TxSelect is tx.select, which has no arguments.
//
//	tx.select (90, 10)
type TxSelect struct{}

func (*TxSelect) ID() (classID, methodID uint16)  { return ClassTx, MethodTxSelect }
func (*TxSelect) Append(b []byte) ([]byte, error) { return appendIDs(b, ClassTx, MethodTxSelect), nil }
func (*TxSelect) Decode(args []byte) error        { return noArgs(args) }

// TxSelectOk is tx.select-ok, which has no arguments.
//
//	tx.select-ok (90, 11)
type TxSelectOk struct{}

func (*TxSelectOk) ID() (classID, methodID uint16) { return ClassTx, MethodTxSelectOk }
func (*TxSelectOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassTx, MethodTxSelectOk), nil
}
func (*TxSelectOk) Decode(args []byte) error { return noArgs(args) }

// TxCommit is tx.commit, which has no arguments.
//
//	tx.commit (90, 20)
type TxCommit struct{}

func (*TxCommit) ID() (classID, methodID uint16)  { return ClassTx, MethodTxCommit }
func (*TxCommit) Append(b []byte) ([]byte, error) { return appendIDs(b, ClassTx, MethodTxCommit), nil }
func (*TxCommit) Decode(args []byte) error        { return noArgs(args) }

// TxCommitOk is tx.commit-ok, which has no arguments.
//
//	tx.commit-ok (90, 21)
type TxCommitOk struct{}

func (*TxCommitOk) ID() (classID, methodID uint16) { return ClassTx, MethodTxCommitOk }
func (*TxCommitOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassTx, MethodTxCommitOk), nil
}
func (*TxCommitOk) Decode(args []byte) error { return noArgs(args) }

// TxRollback is tx.rollback, which has no arguments.
//
//	tx.rollback (90, 30)
type TxRollback struct{}

func (*TxRollback) ID() (classID, methodID uint16) { return ClassTx, MethodTxRollback }
func (*TxRollback) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassTx, MethodTxRollback), nil
}
func (*TxRollback) Decode(args []byte) error { return noArgs(args) }

// TxRollbackOk is tx.rollback-ok, which has no arguments.
//
//	tx.rollback-ok (90, 31)
type TxRollbackOk struct{}

func (*TxRollbackOk) ID() (classID, methodID uint16) { return ClassTx, MethodTxRollbackOk }
func (*TxRollbackOk) Append(b []byte) ([]byte, error) {
	return appendIDs(b, ClassTx, MethodTxRollbackOk), nil
}
func (*TxRollbackOk) Decode(args []byte) error { return noArgs(args) }

// methodInfo is a method's name as RabbitMQ writes it and a constructor.
type methodInfo struct {
	name string
	new  func() Method
}

// lookupMethod returns what the ids name; ok is false for ids the protocol does not define.
func lookupMethod(classID, methodID uint16) (info methodInfo, ok bool) {
	switch uint32(classID)<<16 | uint32(methodID) {
	case ClassConnection<<16 | MethodConnectionStart:
		return methodInfo{"connection.start", func() Method { return new(ConnectionStart) }}, true
	case ClassConnection<<16 | MethodConnectionStartOk:
		return methodInfo{"connection.start_ok", func() Method { return new(ConnectionStartOk) }}, true
	case ClassConnection<<16 | MethodConnectionSecure:
		return methodInfo{"connection.secure", func() Method { return new(ConnectionSecure) }}, true
	case ClassConnection<<16 | MethodConnectionSecureOk:
		return methodInfo{"connection.secure_ok", func() Method { return new(ConnectionSecureOk) }}, true
	case ClassConnection<<16 | MethodConnectionTune:
		return methodInfo{"connection.tune", func() Method { return new(ConnectionTune) }}, true
	case ClassConnection<<16 | MethodConnectionTuneOk:
		return methodInfo{"connection.tune_ok", func() Method { return new(ConnectionTuneOk) }}, true
	case ClassConnection<<16 | MethodConnectionOpen:
		return methodInfo{"connection.open", func() Method { return new(ConnectionOpen) }}, true
	case ClassConnection<<16 | MethodConnectionOpenOk:
		return methodInfo{"connection.open_ok", func() Method { return new(ConnectionOpenOk) }}, true
	case ClassConnection<<16 | MethodConnectionClose:
		return methodInfo{"connection.close", func() Method { return new(ConnectionClose) }}, true
	case ClassConnection<<16 | MethodConnectionCloseOk:
		return methodInfo{"connection.close_ok", func() Method { return new(ConnectionCloseOk) }}, true
	case ClassConnection<<16 | MethodConnectionBlocked:
		return methodInfo{"connection.blocked", func() Method { return new(ConnectionBlocked) }}, true
	case ClassConnection<<16 | MethodConnectionUnblocked:
		return methodInfo{"connection.unblocked", func() Method { return new(ConnectionUnblocked) }}, true
	case ClassConnection<<16 | MethodConnectionUpdateSecret:
		return methodInfo{"connection.update_secret", func() Method { return new(ConnectionUpdateSecret) }}, true
	case ClassConnection<<16 | MethodConnectionUpdateSecretOk:
		return methodInfo{"connection.update_secret_ok", func() Method { return new(ConnectionUpdateSecretOk) }}, true
	case ClassChannel<<16 | MethodChannelOpen:
		return methodInfo{"channel.open", func() Method { return new(ChannelOpen) }}, true
	case ClassChannel<<16 | MethodChannelOpenOk:
		return methodInfo{"channel.open_ok", func() Method { return new(ChannelOpenOk) }}, true
	case ClassChannel<<16 | MethodChannelFlow:
		return methodInfo{"channel.flow", func() Method { return new(ChannelFlow) }}, true
	case ClassChannel<<16 | MethodChannelFlowOk:
		return methodInfo{"channel.flow_ok", func() Method { return new(ChannelFlowOk) }}, true
	case ClassChannel<<16 | MethodChannelClose:
		return methodInfo{"channel.close", func() Method { return new(ChannelClose) }}, true
	case ClassChannel<<16 | MethodChannelCloseOk:
		return methodInfo{"channel.close_ok", func() Method { return new(ChannelCloseOk) }}, true
	case ClassAccess<<16 | MethodAccessRequest:
		return methodInfo{"access.request", func() Method { return new(AccessRequest) }}, true
	case ClassAccess<<16 | MethodAccessRequestOk:
		return methodInfo{"access.request_ok", func() Method { return new(AccessRequestOk) }}, true
	case ClassExchange<<16 | MethodExchangeDeclare:
		return methodInfo{"exchange.declare", func() Method { return new(ExchangeDeclare) }}, true
	case ClassExchange<<16 | MethodExchangeDeclareOk:
		return methodInfo{"exchange.declare_ok", func() Method { return new(ExchangeDeclareOk) }}, true
	case ClassExchange<<16 | MethodExchangeDelete:
		return methodInfo{"exchange.delete", func() Method { return new(ExchangeDelete) }}, true
	case ClassExchange<<16 | MethodExchangeDeleteOk:
		return methodInfo{"exchange.delete_ok", func() Method { return new(ExchangeDeleteOk) }}, true
	case ClassExchange<<16 | MethodExchangeBind:
		return methodInfo{"exchange.bind", func() Method { return new(ExchangeBind) }}, true
	case ClassExchange<<16 | MethodExchangeBindOk:
		return methodInfo{"exchange.bind_ok", func() Method { return new(ExchangeBindOk) }}, true
	case ClassExchange<<16 | MethodExchangeUnbind:
		return methodInfo{"exchange.unbind", func() Method { return new(ExchangeUnbind) }}, true
	case ClassExchange<<16 | MethodExchangeUnbindOk:
		return methodInfo{"exchange.unbind_ok", func() Method { return new(ExchangeUnbindOk) }}, true
	case ClassQueue<<16 | MethodQueueDeclare:
		return methodInfo{"queue.declare", func() Method { return new(QueueDeclare) }}, true
	case ClassQueue<<16 | MethodQueueDeclareOk:
		return methodInfo{"queue.declare_ok", func() Method { return new(QueueDeclareOk) }}, true
	case ClassQueue<<16 | MethodQueueBind:
		return methodInfo{"queue.bind", func() Method { return new(QueueBind) }}, true
	case ClassQueue<<16 | MethodQueueBindOk:
		return methodInfo{"queue.bind_ok", func() Method { return new(QueueBindOk) }}, true
	case ClassQueue<<16 | MethodQueuePurge:
		return methodInfo{"queue.purge", func() Method { return new(QueuePurge) }}, true
	case ClassQueue<<16 | MethodQueuePurgeOk:
		return methodInfo{"queue.purge_ok", func() Method { return new(QueuePurgeOk) }}, true
	case ClassQueue<<16 | MethodQueueDelete:
		return methodInfo{"queue.delete", func() Method { return new(QueueDelete) }}, true
	case ClassQueue<<16 | MethodQueueDeleteOk:
		return methodInfo{"queue.delete_ok", func() Method { return new(QueueDeleteOk) }}, true
	case ClassQueue<<16 | MethodQueueUnbind:
		return methodInfo{"queue.unbind", func() Method { return new(QueueUnbind) }}, true
	case ClassQueue<<16 | MethodQueueUnbindOk:
		return methodInfo{"queue.unbind_ok", func() Method { return new(QueueUnbindOk) }}, true
	case ClassBasic<<16 | MethodBasicQos:
		return methodInfo{"basic.qos", func() Method { return new(BasicQos) }}, true
	case ClassBasic<<16 | MethodBasicQosOk:
		return methodInfo{"basic.qos_ok", func() Method { return new(BasicQosOk) }}, true
	case ClassBasic<<16 | MethodBasicConsume:
		return methodInfo{"basic.consume", func() Method { return new(BasicConsume) }}, true
	case ClassBasic<<16 | MethodBasicConsumeOk:
		return methodInfo{"basic.consume_ok", func() Method { return new(BasicConsumeOk) }}, true
	case ClassBasic<<16 | MethodBasicCancel:
		return methodInfo{"basic.cancel", func() Method { return new(BasicCancel) }}, true
	case ClassBasic<<16 | MethodBasicCancelOk:
		return methodInfo{"basic.cancel_ok", func() Method { return new(BasicCancelOk) }}, true
	case ClassBasic<<16 | MethodBasicPublish:
		return methodInfo{"basic.publish", func() Method { return new(BasicPublish) }}, true
	case ClassBasic<<16 | MethodBasicReturn:
		return methodInfo{"basic.return", func() Method { return new(BasicReturn) }}, true
	case ClassBasic<<16 | MethodBasicDeliver:
		return methodInfo{"basic.deliver", func() Method { return new(BasicDeliver) }}, true
	case ClassBasic<<16 | MethodBasicGet:
		return methodInfo{"basic.get", func() Method { return new(BasicGet) }}, true
	case ClassBasic<<16 | MethodBasicGetOk:
		return methodInfo{"basic.get_ok", func() Method { return new(BasicGetOk) }}, true
	case ClassBasic<<16 | MethodBasicGetEmpty:
		return methodInfo{"basic.get_empty", func() Method { return new(BasicGetEmpty) }}, true
	case ClassBasic<<16 | MethodBasicAck:
		return methodInfo{"basic.ack", func() Method { return new(BasicAck) }}, true
	case ClassBasic<<16 | MethodBasicReject:
		return methodInfo{"basic.reject", func() Method { return new(BasicReject) }}, true
	case ClassBasic<<16 | MethodBasicRecoverAsync:
		return methodInfo{"basic.recover_async", func() Method { return new(BasicRecoverAsync) }}, true
	case ClassBasic<<16 | MethodBasicRecover:
		return methodInfo{"basic.recover", func() Method { return new(BasicRecover) }}, true
	case ClassBasic<<16 | MethodBasicRecoverOk:
		return methodInfo{"basic.recover_ok", func() Method { return new(BasicRecoverOk) }}, true
	case ClassBasic<<16 | MethodBasicNack:
		return methodInfo{"basic.nack", func() Method { return new(BasicNack) }}, true
	case ClassConfirm<<16 | MethodConfirmSelect:
		return methodInfo{"confirm.select", func() Method { return new(ConfirmSelect) }}, true
	case ClassConfirm<<16 | MethodConfirmSelectOk:
		return methodInfo{"confirm.select_ok", func() Method { return new(ConfirmSelectOk) }}, true
	case ClassTx<<16 | MethodTxSelect:
		return methodInfo{"tx.select", func() Method { return new(TxSelect) }}, true
	case ClassTx<<16 | MethodTxSelectOk:
		return methodInfo{"tx.select_ok", func() Method { return new(TxSelectOk) }}, true
	case ClassTx<<16 | MethodTxCommit:
		return methodInfo{"tx.commit", func() Method { return new(TxCommit) }}, true
	case ClassTx<<16 | MethodTxCommitOk:
		return methodInfo{"tx.commit_ok", func() Method { return new(TxCommitOk) }}, true
	case ClassTx<<16 | MethodTxRollback:
		return methodInfo{"tx.rollback", func() Method { return new(TxRollback) }}, true
	case ClassTx<<16 | MethodTxRollbackOk:
		return methodInfo{"tx.rollback_ok", func() Method { return new(TxRollbackOk) }}, true
	}
	return methodInfo{}, false
}

// HasContent reports whether the method carries content (a header and
// body frames follow it).
func HasContent(classID, methodID uint16) bool {
	return classID == ClassBasic && (methodID == MethodBasicPublish || methodID == MethodBasicReturn || methodID == MethodBasicDeliver || methodID == MethodBasicGetOk)
}

// allMethods lists one zero value of every method, for tests.
func allMethods() []Method {
	return []Method{
		new(ConnectionStart),
		new(ConnectionStartOk),
		new(ConnectionSecure),
		new(ConnectionSecureOk),
		new(ConnectionTune),
		new(ConnectionTuneOk),
		new(ConnectionOpen),
		new(ConnectionOpenOk),
		new(ConnectionClose),
		new(ConnectionCloseOk),
		new(ConnectionBlocked),
		new(ConnectionUnblocked),
		new(ConnectionUpdateSecret),
		new(ConnectionUpdateSecretOk),
		new(ChannelOpen),
		new(ChannelOpenOk),
		new(ChannelFlow),
		new(ChannelFlowOk),
		new(ChannelClose),
		new(ChannelCloseOk),
		new(AccessRequest),
		new(AccessRequestOk),
		new(ExchangeDeclare),
		new(ExchangeDeclareOk),
		new(ExchangeDelete),
		new(ExchangeDeleteOk),
		new(ExchangeBind),
		new(ExchangeBindOk),
		new(ExchangeUnbind),
		new(ExchangeUnbindOk),
		new(QueueDeclare),
		new(QueueDeclareOk),
		new(QueueBind),
		new(QueueBindOk),
		new(QueuePurge),
		new(QueuePurgeOk),
		new(QueueDelete),
		new(QueueDeleteOk),
		new(QueueUnbind),
		new(QueueUnbindOk),
		new(BasicQos),
		new(BasicQosOk),
		new(BasicConsume),
		new(BasicConsumeOk),
		new(BasicCancel),
		new(BasicCancelOk),
		new(BasicPublish),
		new(BasicReturn),
		new(BasicDeliver),
		new(BasicGet),
		new(BasicGetOk),
		new(BasicGetEmpty),
		new(BasicAck),
		new(BasicReject),
		new(BasicRecoverAsync),
		new(BasicRecover),
		new(BasicRecoverOk),
		new(BasicNack),
		new(ConfirmSelect),
		new(ConfirmSelectOk),
		new(TxSelect),
		new(TxSelectOk),
		new(TxCommit),
		new(TxCommitOk),
		new(TxRollback),
		new(TxRollbackOk),
	}
}
