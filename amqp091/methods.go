package amqp091

import (
	"encoding/binary"
)

// Class ids (section 1 of the protocol XML; exchange.bind, confirm and the
// connection.blocked and update-secret methods are RabbitMQ extensions).
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

// ID returns the class and method ids.
func (*ConnectionStart) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionStart
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionStart) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionStart>>8), byte(MethodConnectionStart))
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

// ID returns the class and method ids.
func (*ConnectionStartOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionStartOk
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionStartOk) Append(b []byte) ([]byte, error) {
	if len(m.Mechanism) > 255 {
		return b, shortstrErr("connection.start-ok mechanism", len(m.Mechanism))
	}
	if len(m.Locale) > 255 {
		return b, shortstrErr("connection.start-ok locale", len(m.Locale))
	}
	b = append(b, 0, ClassConnection, byte(MethodConnectionStartOk>>8), byte(MethodConnectionStartOk))
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

// ID returns the class and method ids.
func (*ConnectionSecure) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionSecure
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionSecure) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionSecure>>8), byte(MethodConnectionSecure))
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

// ID returns the class and method ids.
func (*ConnectionSecureOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionSecureOk
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionSecureOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionSecureOk>>8), byte(MethodConnectionSecureOk))
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

// ID returns the class and method ids.
func (*ConnectionTune) ID() (classID, methodID uint16) { return ClassConnection, MethodConnectionTune }

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionTune) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionTune>>8), byte(MethodConnectionTune))
	b = binary.BigEndian.AppendUint16(b, m.ChannelMax)
	b = binary.BigEndian.AppendUint32(b, m.FrameMax)
	b = binary.BigEndian.AppendUint16(b, m.Heartbeat)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionTune) Decode(args []byte) error {
	d := decoder{b: args}
	m.ChannelMax = d.short()
	m.FrameMax = d.long()
	m.Heartbeat = d.short()
	return d.finish()
}

// ConnectionTuneOk is connection.tune-ok.
//
//	connection.tune-ok (10, 31)
//	  channel-max        short
//	  frame-max          long
//	  heartbeat          short
type ConnectionTuneOk struct {
	ChannelMax uint16
	FrameMax   uint32
	Heartbeat  uint16
}

// ID returns the class and method ids.
func (*ConnectionTuneOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionTuneOk
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionTuneOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionTuneOk>>8), byte(MethodConnectionTuneOk))
	b = binary.BigEndian.AppendUint16(b, m.ChannelMax)
	b = binary.BigEndian.AppendUint32(b, m.FrameMax)
	b = binary.BigEndian.AppendUint16(b, m.Heartbeat)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionTuneOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.ChannelMax = d.short()
	m.FrameMax = d.long()
	m.Heartbeat = d.short()
	return d.finish()
}

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

// ID returns the class and method ids.
func (*ConnectionOpen) ID() (classID, methodID uint16) { return ClassConnection, MethodConnectionOpen }

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionOpen) Append(b []byte) ([]byte, error) {
	if len(m.VirtualHost) > 255 {
		return b, shortstrErr("connection.open virtual-host", len(m.VirtualHost))
	}
	if len(m.Capabilities) > 255 {
		return b, shortstrErr("connection.open capabilities", len(m.Capabilities))
	}
	b = append(b, 0, ClassConnection, byte(MethodConnectionOpen>>8), byte(MethodConnectionOpen))
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

// ID returns the class and method ids.
func (*ConnectionOpenOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionOpenOk
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionOpenOk) Append(b []byte) ([]byte, error) {
	if len(m.KnownHosts) > 255 {
		return b, shortstrErr("connection.open-ok known-hosts", len(m.KnownHosts))
	}
	b = append(b, 0, ClassConnection, byte(MethodConnectionOpenOk>>8), byte(MethodConnectionOpenOk))
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

// ID returns the class and method ids.
func (*ConnectionClose) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionClose
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionClose) Append(b []byte) ([]byte, error) {
	if len(m.ReplyText) > 255 {
		return b, shortstrErr("connection.close reply-text", len(m.ReplyText))
	}
	b = append(b, 0, ClassConnection, byte(MethodConnectionClose>>8), byte(MethodConnectionClose))
	b = binary.BigEndian.AppendUint16(b, m.ReplyCode)
	b = appendShortstr(b, m.ReplyText)
	b = binary.BigEndian.AppendUint16(b, m.ClassID)
	b = binary.BigEndian.AppendUint16(b, m.MethodID)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionClose) Decode(args []byte) error {
	d := decoder{b: args}
	m.ReplyCode = d.short()
	d.shortstrTo(&m.ReplyText, true)
	m.ClassID = d.short()
	m.MethodID = d.short()
	return d.finish()
}

// ConnectionCloseOk is connection.close-ok.
//
//	connection.close-ok (10, 51)
type ConnectionCloseOk struct{}

// ID returns the class and method ids.
func (*ConnectionCloseOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionCloseOk
}

// Append appends the method frame payload: ids, then arguments.
func (_ *ConnectionCloseOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionCloseOk>>8), byte(MethodConnectionCloseOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ConnectionCloseOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// ConnectionBlocked is connection.blocked.
//
//	connection.blocked (10, 60)
//	  reason             shortstr
type ConnectionBlocked struct {
	Reason string
}

// ID returns the class and method ids.
func (*ConnectionBlocked) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionBlocked
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionBlocked) Append(b []byte) ([]byte, error) {
	if len(m.Reason) > 255 {
		return b, shortstrErr("connection.blocked reason", len(m.Reason))
	}
	b = append(b, 0, ClassConnection, byte(MethodConnectionBlocked>>8), byte(MethodConnectionBlocked))
	b = appendShortstr(b, m.Reason)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConnectionBlocked) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.Reason, true)
	return d.finish()
}

// ConnectionUnblocked is connection.unblocked.
//
//	connection.unblocked (10, 61)
type ConnectionUnblocked struct{}

// ID returns the class and method ids.
func (*ConnectionUnblocked) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionUnblocked
}

// Append appends the method frame payload: ids, then arguments.
func (_ *ConnectionUnblocked) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionUnblocked>>8), byte(MethodConnectionUnblocked))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ConnectionUnblocked) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// ConnectionUpdateSecret is connection.update-secret.
//
//	connection.update-secret (10, 70)
//	  new-secret         longstr
//	  reason             shortstr
type ConnectionUpdateSecret struct {
	NewSecret string
	Reason    string
}

// ID returns the class and method ids.
func (*ConnectionUpdateSecret) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionUpdateSecret
}

// Append appends the method frame payload: ids, then arguments.
func (m *ConnectionUpdateSecret) Append(b []byte) ([]byte, error) {
	if len(m.Reason) > 255 {
		return b, shortstrErr("connection.update-secret reason", len(m.Reason))
	}
	b = append(b, 0, ClassConnection, byte(MethodConnectionUpdateSecret>>8), byte(MethodConnectionUpdateSecret))
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

// ConnectionUpdateSecretOk is connection.update-secret-ok.
//
//	connection.update-secret-ok (10, 71)
type ConnectionUpdateSecretOk struct{}

// ID returns the class and method ids.
func (*ConnectionUpdateSecretOk) ID() (classID, methodID uint16) {
	return ClassConnection, MethodConnectionUpdateSecretOk
}

// Append appends the method frame payload: ids, then arguments.
func (_ *ConnectionUpdateSecretOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConnection, byte(MethodConnectionUpdateSecretOk>>8), byte(MethodConnectionUpdateSecretOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ConnectionUpdateSecretOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// ChannelOpen is channel.open.
//
//	channel.open (20, 10)
//	  out-of-band        shortstr
type ChannelOpen struct {
	OutOfBand string
}

// ID returns the class and method ids.
func (*ChannelOpen) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelOpen }

// Append appends the method frame payload: ids, then arguments.
func (m *ChannelOpen) Append(b []byte) ([]byte, error) {
	if len(m.OutOfBand) > 255 {
		return b, shortstrErr("channel.open out-of-band", len(m.OutOfBand))
	}
	b = append(b, 0, ClassChannel, byte(MethodChannelOpen>>8), byte(MethodChannelOpen))
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

// ID returns the class and method ids.
func (*ChannelOpenOk) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelOpenOk }

// Append appends the method frame payload: ids, then arguments.
func (m *ChannelOpenOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassChannel, byte(MethodChannelOpenOk>>8), byte(MethodChannelOpenOk))
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

// ID returns the class and method ids.
func (*ChannelFlow) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelFlow }

// Append appends the method frame payload: ids, then arguments.
func (m *ChannelFlow) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassChannel, byte(MethodChannelFlow>>8), byte(MethodChannelFlow))
	b = append(b, flag(m.Active, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ChannelFlow) Decode(args []byte) error {
	d := decoder{b: args}
	m.Active = d.octet()&1 != 0
	return d.finish()
}

// ChannelFlowOk is channel.flow-ok.
//
//	channel.flow-ok (20, 21)
//	  active             bit
type ChannelFlowOk struct {
	Active bool
}

// ID returns the class and method ids.
func (*ChannelFlowOk) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelFlowOk }

// Append appends the method frame payload: ids, then arguments.
func (m *ChannelFlowOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassChannel, byte(MethodChannelFlowOk>>8), byte(MethodChannelFlowOk))
	b = append(b, flag(m.Active, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ChannelFlowOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.Active = d.octet()&1 != 0
	return d.finish()
}

// ChannelClose is channel.close.
//
//	channel.close (20, 40)
//	  reply-code         short
//	  reply-text         shortstr
//	  class-id           short
//	  method-id          short
type ChannelClose struct {
	ReplyCode uint16
	ReplyText string
	ClassID   uint16
	MethodID  uint16
}

// ID returns the class and method ids.
func (*ChannelClose) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelClose }

// Append appends the method frame payload: ids, then arguments.
func (m *ChannelClose) Append(b []byte) ([]byte, error) {
	if len(m.ReplyText) > 255 {
		return b, shortstrErr("channel.close reply-text", len(m.ReplyText))
	}
	b = append(b, 0, ClassChannel, byte(MethodChannelClose>>8), byte(MethodChannelClose))
	b = binary.BigEndian.AppendUint16(b, m.ReplyCode)
	b = appendShortstr(b, m.ReplyText)
	b = binary.BigEndian.AppendUint16(b, m.ClassID)
	b = binary.BigEndian.AppendUint16(b, m.MethodID)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ChannelClose) Decode(args []byte) error {
	d := decoder{b: args}
	m.ReplyCode = d.short()
	d.shortstrTo(&m.ReplyText, true)
	m.ClassID = d.short()
	m.MethodID = d.short()
	return d.finish()
}

// ChannelCloseOk is channel.close-ok.
//
//	channel.close-ok (20, 41)
type ChannelCloseOk struct{}

// ID returns the class and method ids.
func (*ChannelCloseOk) ID() (classID, methodID uint16) { return ClassChannel, MethodChannelCloseOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *ChannelCloseOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassChannel, byte(MethodChannelCloseOk>>8), byte(MethodChannelCloseOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ChannelCloseOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*AccessRequest) ID() (classID, methodID uint16) { return ClassAccess, MethodAccessRequest }

// Append appends the method frame payload: ids, then arguments.
func (m *AccessRequest) Append(b []byte) ([]byte, error) {
	if len(m.Realm) > 255 {
		return b, shortstrErr("access.request realm", len(m.Realm))
	}
	b = append(b, 0, ClassAccess, byte(MethodAccessRequest>>8), byte(MethodAccessRequest))
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

// ID returns the class and method ids.
func (*AccessRequestOk) ID() (classID, methodID uint16) { return ClassAccess, MethodAccessRequestOk }

// Append appends the method frame payload: ids, then arguments.
func (m *AccessRequestOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassAccess, byte(MethodAccessRequestOk>>8), byte(MethodAccessRequestOk))
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

// ID returns the class and method ids.
func (*ExchangeDeclare) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeDeclare }

// Append appends the method frame payload: ids, then arguments.
func (m *ExchangeDeclare) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange.declare exchange", len(m.Exchange))
	}
	if len(m.Type) > 255 {
		return b, shortstrErr("exchange.declare type", len(m.Type))
	}
	b = append(b, 0, ClassExchange, byte(MethodExchangeDeclare>>8), byte(MethodExchangeDeclare))
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

// ExchangeDeclareOk is exchange.declare-ok.
//
//	exchange.declare-ok (40, 11)
type ExchangeDeclareOk struct{}

// ID returns the class and method ids.
func (*ExchangeDeclareOk) ID() (classID, methodID uint16) {
	return ClassExchange, MethodExchangeDeclareOk
}

// Append appends the method frame payload: ids, then arguments.
func (_ *ExchangeDeclareOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassExchange, byte(MethodExchangeDeclareOk>>8), byte(MethodExchangeDeclareOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ExchangeDeclareOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*ExchangeDelete) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeDelete }

// Append appends the method frame payload: ids, then arguments.
func (m *ExchangeDelete) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("exchange.delete exchange", len(m.Exchange))
	}
	b = append(b, 0, ClassExchange, byte(MethodExchangeDelete>>8), byte(MethodExchangeDelete))
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

// ExchangeDeleteOk is exchange.delete-ok.
//
//	exchange.delete-ok (40, 21)
type ExchangeDeleteOk struct{}

// ID returns the class and method ids.
func (*ExchangeDeleteOk) ID() (classID, methodID uint16) {
	return ClassExchange, MethodExchangeDeleteOk
}

// Append appends the method frame payload: ids, then arguments.
func (_ *ExchangeDeleteOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassExchange, byte(MethodExchangeDeleteOk>>8), byte(MethodExchangeDeleteOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ExchangeDeleteOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*ExchangeBind) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeBind }

// Append appends the method frame payload: ids, then arguments.
func (m *ExchangeBind) Append(b []byte) ([]byte, error) {
	if len(m.Destination) > 255 {
		return b, shortstrErr("exchange.bind destination", len(m.Destination))
	}
	if len(m.Source) > 255 {
		return b, shortstrErr("exchange.bind source", len(m.Source))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("exchange.bind routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassExchange, byte(MethodExchangeBind>>8), byte(MethodExchangeBind))
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

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ExchangeBind) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Destination, true)
	d.shortstrTo(&m.Source, true)
	d.shortstrTo(&m.RoutingKey, true)
	m.NoWait = d.octet()&1 != 0
	m.Arguments = d.table()
	return d.finish()
}

// ExchangeBindOk is exchange.bind-ok.
//
//	exchange.bind-ok (40, 31)
type ExchangeBindOk struct{}

// ID returns the class and method ids.
func (*ExchangeBindOk) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeBindOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *ExchangeBindOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassExchange, byte(MethodExchangeBindOk>>8), byte(MethodExchangeBindOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ExchangeBindOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// ExchangeUnbind is exchange.unbind.
//
//	exchange.unbind (40, 40)
//	  ticket             short
//	  destination        shortstr
//	  source             shortstr
//	  routing-key        shortstr
//	  no-wait            bit
//	  arguments          table
type ExchangeUnbind struct {
	Ticket      uint16
	Destination string
	Source      string
	RoutingKey  string
	NoWait      bool
	Arguments   Table
}

// ID returns the class and method ids.
func (*ExchangeUnbind) ID() (classID, methodID uint16) { return ClassExchange, MethodExchangeUnbind }

// Append appends the method frame payload: ids, then arguments.
func (m *ExchangeUnbind) Append(b []byte) ([]byte, error) {
	if len(m.Destination) > 255 {
		return b, shortstrErr("exchange.unbind destination", len(m.Destination))
	}
	if len(m.Source) > 255 {
		return b, shortstrErr("exchange.unbind source", len(m.Source))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("exchange.unbind routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassExchange, byte(MethodExchangeUnbind>>8), byte(MethodExchangeUnbind))
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

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ExchangeUnbind) Decode(args []byte) error {
	d := decoder{b: args}
	m.Ticket = d.short()
	d.shortstrTo(&m.Destination, true)
	d.shortstrTo(&m.Source, true)
	d.shortstrTo(&m.RoutingKey, true)
	m.NoWait = d.octet()&1 != 0
	m.Arguments = d.table()
	return d.finish()
}

// ExchangeUnbindOk is exchange.unbind-ok.
//
//	exchange.unbind-ok (40, 51)
type ExchangeUnbindOk struct{}

// ID returns the class and method ids.
func (*ExchangeUnbindOk) ID() (classID, methodID uint16) {
	return ClassExchange, MethodExchangeUnbindOk
}

// Append appends the method frame payload: ids, then arguments.
func (_ *ExchangeUnbindOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassExchange, byte(MethodExchangeUnbindOk>>8), byte(MethodExchangeUnbindOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ExchangeUnbindOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*QueueDeclare) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDeclare }

// Append appends the method frame payload: ids, then arguments.
func (m *QueueDeclare) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue.declare queue", len(m.Queue))
	}
	b = append(b, 0, ClassQueue, byte(MethodQueueDeclare>>8), byte(MethodQueueDeclare))
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

// ID returns the class and method ids.
func (*QueueDeclareOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDeclareOk }

// Append appends the method frame payload: ids, then arguments.
func (m *QueueDeclareOk) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue.declare-ok queue", len(m.Queue))
	}
	b = append(b, 0, ClassQueue, byte(MethodQueueDeclareOk>>8), byte(MethodQueueDeclareOk))
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

// ID returns the class and method ids.
func (*QueueBind) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueBind }

// Append appends the method frame payload: ids, then arguments.
func (m *QueueBind) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue.bind queue", len(m.Queue))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("queue.bind exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("queue.bind routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassQueue, byte(MethodQueueBind>>8), byte(MethodQueueBind))
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

// QueueBindOk is queue.bind-ok.
//
//	queue.bind-ok (50, 21)
type QueueBindOk struct{}

// ID returns the class and method ids.
func (*QueueBindOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueBindOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *QueueBindOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassQueue, byte(MethodQueueBindOk>>8), byte(MethodQueueBindOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *QueueBindOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*QueuePurge) ID() (classID, methodID uint16) { return ClassQueue, MethodQueuePurge }

// Append appends the method frame payload: ids, then arguments.
func (m *QueuePurge) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue.purge queue", len(m.Queue))
	}
	b = append(b, 0, ClassQueue, byte(MethodQueuePurge>>8), byte(MethodQueuePurge))
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

// ID returns the class and method ids.
func (*QueuePurgeOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueuePurgeOk }

// Append appends the method frame payload: ids, then arguments.
func (m *QueuePurgeOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassQueue, byte(MethodQueuePurgeOk>>8), byte(MethodQueuePurgeOk))
	b = binary.BigEndian.AppendUint32(b, m.MessageCount)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueuePurgeOk) Decode(args []byte) error {
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

// ID returns the class and method ids.
func (*QueueDelete) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDelete }

// Append appends the method frame payload: ids, then arguments.
func (m *QueueDelete) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue.delete queue", len(m.Queue))
	}
	b = append(b, 0, ClassQueue, byte(MethodQueueDelete>>8), byte(MethodQueueDelete))
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

// QueueDeleteOk is queue.delete-ok.
//
//	queue.delete-ok (50, 41)
//	  message-count      long
type QueueDeleteOk struct {
	MessageCount uint32
}

// ID returns the class and method ids.
func (*QueueDeleteOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueDeleteOk }

// Append appends the method frame payload: ids, then arguments.
func (m *QueueDeleteOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassQueue, byte(MethodQueueDeleteOk>>8), byte(MethodQueueDeleteOk))
	b = binary.BigEndian.AppendUint32(b, m.MessageCount)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *QueueDeleteOk) Decode(args []byte) error {
	d := decoder{b: args}
	m.MessageCount = d.long()
	return d.finish()
}

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

// ID returns the class and method ids.
func (*QueueUnbind) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueUnbind }

// Append appends the method frame payload: ids, then arguments.
func (m *QueueUnbind) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("queue.unbind queue", len(m.Queue))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("queue.unbind exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("queue.unbind routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassQueue, byte(MethodQueueUnbind>>8), byte(MethodQueueUnbind))
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

// QueueUnbindOk is queue.unbind-ok.
//
//	queue.unbind-ok (50, 51)
type QueueUnbindOk struct{}

// ID returns the class and method ids.
func (*QueueUnbindOk) ID() (classID, methodID uint16) { return ClassQueue, MethodQueueUnbindOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *QueueUnbindOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassQueue, byte(MethodQueueUnbindOk>>8), byte(MethodQueueUnbindOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *QueueUnbindOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*BasicQos) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicQos }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicQos) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicQos>>8), byte(MethodBasicQos))
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

// BasicQosOk is basic.qos-ok.
//
//	basic.qos-ok (60, 11)
type BasicQosOk struct{}

// ID returns the class and method ids.
func (*BasicQosOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicQosOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *BasicQosOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicQosOk>>8), byte(MethodBasicQosOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *BasicQosOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*BasicConsume) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicConsume }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicConsume) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("basic.consume queue", len(m.Queue))
	}
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("basic.consume consumer-tag", len(m.ConsumerTag))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicConsume>>8), byte(MethodBasicConsume))
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

// ID returns the class and method ids.
func (*BasicConsumeOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicConsumeOk }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicConsumeOk) Append(b []byte) ([]byte, error) {
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("basic.consume-ok consumer-tag", len(m.ConsumerTag))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicConsumeOk>>8), byte(MethodBasicConsumeOk))
	b = appendShortstr(b, m.ConsumerTag)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicConsumeOk) Decode(args []byte) error {
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

// ID returns the class and method ids.
func (*BasicCancel) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicCancel }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicCancel) Append(b []byte) ([]byte, error) {
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("basic.cancel consumer-tag", len(m.ConsumerTag))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicCancel>>8), byte(MethodBasicCancel))
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

// BasicCancelOk is basic.cancel-ok.
//
//	basic.cancel-ok (60, 31)
//	  consumer-tag       shortstr
type BasicCancelOk struct {
	ConsumerTag string
}

// ID returns the class and method ids.
func (*BasicCancelOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicCancelOk }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicCancelOk) Append(b []byte) ([]byte, error) {
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("basic.cancel-ok consumer-tag", len(m.ConsumerTag))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicCancelOk>>8), byte(MethodBasicCancelOk))
	b = appendShortstr(b, m.ConsumerTag)
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicCancelOk) Decode(args []byte) error {
	d := decoder{b: args}
	d.shortstrTo(&m.ConsumerTag, true)
	return d.finish()
}

// BasicPublish is basic.publish.
//
//	basic.publish (60, 40) carries content
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

// ID returns the class and method ids.
func (*BasicPublish) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicPublish }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicPublish) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("basic.publish exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("basic.publish routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicPublish>>8), byte(MethodBasicPublish))
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
//	basic.return (60, 50) carries content
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

// ID returns the class and method ids.
func (*BasicReturn) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicReturn }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicReturn) Append(b []byte) ([]byte, error) {
	if len(m.ReplyText) > 255 {
		return b, shortstrErr("basic.return reply-text", len(m.ReplyText))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("basic.return exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("basic.return routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicReturn>>8), byte(MethodBasicReturn))
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
//	basic.deliver (60, 60) carries content
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

// ID returns the class and method ids.
func (*BasicDeliver) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicDeliver }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicDeliver) Append(b []byte) ([]byte, error) {
	if len(m.ConsumerTag) > 255 {
		return b, shortstrErr("basic.deliver consumer-tag", len(m.ConsumerTag))
	}
	if len(m.Exchange) > 255 {
		return b, shortstrErr("basic.deliver exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("basic.deliver routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicDeliver>>8), byte(MethodBasicDeliver))
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

// ID returns the class and method ids.
func (*BasicGet) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicGet }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicGet) Append(b []byte) ([]byte, error) {
	if len(m.Queue) > 255 {
		return b, shortstrErr("basic.get queue", len(m.Queue))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicGet>>8), byte(MethodBasicGet))
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
//	basic.get-ok (60, 71) carries content
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

// ID returns the class and method ids.
func (*BasicGetOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicGetOk }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicGetOk) Append(b []byte) ([]byte, error) {
	if len(m.Exchange) > 255 {
		return b, shortstrErr("basic.get-ok exchange", len(m.Exchange))
	}
	if len(m.RoutingKey) > 255 {
		return b, shortstrErr("basic.get-ok routing-key", len(m.RoutingKey))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicGetOk>>8), byte(MethodBasicGetOk))
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

// ID returns the class and method ids.
func (*BasicGetEmpty) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicGetEmpty }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicGetEmpty) Append(b []byte) ([]byte, error) {
	if len(m.ClusterID) > 255 {
		return b, shortstrErr("basic.get-empty cluster-id", len(m.ClusterID))
	}
	b = append(b, 0, ClassBasic, byte(MethodBasicGetEmpty>>8), byte(MethodBasicGetEmpty))
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

// ID returns the class and method ids.
func (*BasicAck) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicAck }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicAck) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicAck>>8), byte(MethodBasicAck))
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

// ID returns the class and method ids.
func (*BasicReject) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicReject }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicReject) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicReject>>8), byte(MethodBasicReject))
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

// ID returns the class and method ids.
func (*BasicRecoverAsync) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicRecoverAsync }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicRecoverAsync) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicRecoverAsync>>8), byte(MethodBasicRecoverAsync))
	b = append(b, flag(m.Requeue, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicRecoverAsync) Decode(args []byte) error {
	d := decoder{b: args}
	m.Requeue = d.octet()&1 != 0
	return d.finish()
}

// BasicRecover is basic.recover.
//
//	basic.recover (60, 110)
//	  requeue            bit
type BasicRecover struct {
	Requeue bool
}

// ID returns the class and method ids.
func (*BasicRecover) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicRecover }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicRecover) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicRecover>>8), byte(MethodBasicRecover))
	b = append(b, flag(m.Requeue, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *BasicRecover) Decode(args []byte) error {
	d := decoder{b: args}
	m.Requeue = d.octet()&1 != 0
	return d.finish()
}

// BasicRecoverOk is basic.recover-ok.
//
//	basic.recover-ok (60, 111)
type BasicRecoverOk struct{}

// ID returns the class and method ids.
func (*BasicRecoverOk) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicRecoverOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *BasicRecoverOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicRecoverOk>>8), byte(MethodBasicRecoverOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *BasicRecoverOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

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

// ID returns the class and method ids.
func (*BasicNack) ID() (classID, methodID uint16) { return ClassBasic, MethodBasicNack }

// Append appends the method frame payload: ids, then arguments.
func (m *BasicNack) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassBasic, byte(MethodBasicNack>>8), byte(MethodBasicNack))
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

// ID returns the class and method ids.
func (*ConfirmSelect) ID() (classID, methodID uint16) { return ClassConfirm, MethodConfirmSelect }

// Append appends the method frame payload: ids, then arguments.
func (m *ConfirmSelect) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConfirm, byte(MethodConfirmSelect>>8), byte(MethodConfirmSelect))
	b = append(b, flag(m.NoWait, 0))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (m *ConfirmSelect) Decode(args []byte) error {
	d := decoder{b: args}
	m.NoWait = d.octet()&1 != 0
	return d.finish()
}

// ConfirmSelectOk is confirm.select-ok.
//
//	confirm.select-ok (85, 11)
type ConfirmSelectOk struct{}

// ID returns the class and method ids.
func (*ConfirmSelectOk) ID() (classID, methodID uint16) { return ClassConfirm, MethodConfirmSelectOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *ConfirmSelectOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassConfirm, byte(MethodConfirmSelectOk>>8), byte(MethodConfirmSelectOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *ConfirmSelectOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// TxSelect is tx.select.
//
//	tx.select (90, 10)
type TxSelect struct{}

// ID returns the class and method ids.
func (*TxSelect) ID() (classID, methodID uint16) { return ClassTx, MethodTxSelect }

// Append appends the method frame payload: ids, then arguments.
func (_ *TxSelect) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassTx, byte(MethodTxSelect>>8), byte(MethodTxSelect))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *TxSelect) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// TxSelectOk is tx.select-ok.
//
//	tx.select-ok (90, 11)
type TxSelectOk struct{}

// ID returns the class and method ids.
func (*TxSelectOk) ID() (classID, methodID uint16) { return ClassTx, MethodTxSelectOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *TxSelectOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassTx, byte(MethodTxSelectOk>>8), byte(MethodTxSelectOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *TxSelectOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// TxCommit is tx.commit.
//
//	tx.commit (90, 20)
type TxCommit struct{}

// ID returns the class and method ids.
func (*TxCommit) ID() (classID, methodID uint16) { return ClassTx, MethodTxCommit }

// Append appends the method frame payload: ids, then arguments.
func (_ *TxCommit) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassTx, byte(MethodTxCommit>>8), byte(MethodTxCommit))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *TxCommit) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// TxCommitOk is tx.commit-ok.
//
//	tx.commit-ok (90, 21)
type TxCommitOk struct{}

// ID returns the class and method ids.
func (*TxCommitOk) ID() (classID, methodID uint16) { return ClassTx, MethodTxCommitOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *TxCommitOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassTx, byte(MethodTxCommitOk>>8), byte(MethodTxCommitOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *TxCommitOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// TxRollback is tx.rollback.
//
//	tx.rollback (90, 30)
type TxRollback struct{}

// ID returns the class and method ids.
func (*TxRollback) ID() (classID, methodID uint16) { return ClassTx, MethodTxRollback }

// Append appends the method frame payload: ids, then arguments.
func (_ *TxRollback) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassTx, byte(MethodTxRollback>>8), byte(MethodTxRollback))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *TxRollback) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// TxRollbackOk is tx.rollback-ok.
//
//	tx.rollback-ok (90, 31)
type TxRollbackOk struct{}

// ID returns the class and method ids.
func (*TxRollbackOk) ID() (classID, methodID uint16) { return ClassTx, MethodTxRollbackOk }

// Append appends the method frame payload: ids, then arguments.
func (_ *TxRollbackOk) Append(b []byte) ([]byte, error) {
	b = append(b, 0, ClassTx, byte(MethodTxRollbackOk>>8), byte(MethodTxRollbackOk))
	return b, nil
}

// Decode decodes the arguments (the payload after the ids) into m.
func (_ *TxRollbackOk) Decode(args []byte) error {
	d := decoder{b: args}
	return d.finish()
}

// newMethod returns a zero method struct for the ids, or nil.
func newMethod(classID, methodID uint16) Method {
	switch uint32(classID)<<16 | uint32(methodID) {
	case ClassConnection<<16 | MethodConnectionStart:
		return &ConnectionStart{}
	case ClassConnection<<16 | MethodConnectionStartOk:
		return &ConnectionStartOk{}
	case ClassConnection<<16 | MethodConnectionSecure:
		return &ConnectionSecure{}
	case ClassConnection<<16 | MethodConnectionSecureOk:
		return &ConnectionSecureOk{}
	case ClassConnection<<16 | MethodConnectionTune:
		return &ConnectionTune{}
	case ClassConnection<<16 | MethodConnectionTuneOk:
		return &ConnectionTuneOk{}
	case ClassConnection<<16 | MethodConnectionOpen:
		return &ConnectionOpen{}
	case ClassConnection<<16 | MethodConnectionOpenOk:
		return &ConnectionOpenOk{}
	case ClassConnection<<16 | MethodConnectionClose:
		return &ConnectionClose{}
	case ClassConnection<<16 | MethodConnectionCloseOk:
		return &ConnectionCloseOk{}
	case ClassConnection<<16 | MethodConnectionBlocked:
		return &ConnectionBlocked{}
	case ClassConnection<<16 | MethodConnectionUnblocked:
		return &ConnectionUnblocked{}
	case ClassConnection<<16 | MethodConnectionUpdateSecret:
		return &ConnectionUpdateSecret{}
	case ClassConnection<<16 | MethodConnectionUpdateSecretOk:
		return &ConnectionUpdateSecretOk{}
	case ClassChannel<<16 | MethodChannelOpen:
		return &ChannelOpen{}
	case ClassChannel<<16 | MethodChannelOpenOk:
		return &ChannelOpenOk{}
	case ClassChannel<<16 | MethodChannelFlow:
		return &ChannelFlow{}
	case ClassChannel<<16 | MethodChannelFlowOk:
		return &ChannelFlowOk{}
	case ClassChannel<<16 | MethodChannelClose:
		return &ChannelClose{}
	case ClassChannel<<16 | MethodChannelCloseOk:
		return &ChannelCloseOk{}
	case ClassAccess<<16 | MethodAccessRequest:
		return &AccessRequest{}
	case ClassAccess<<16 | MethodAccessRequestOk:
		return &AccessRequestOk{}
	case ClassExchange<<16 | MethodExchangeDeclare:
		return &ExchangeDeclare{}
	case ClassExchange<<16 | MethodExchangeDeclareOk:
		return &ExchangeDeclareOk{}
	case ClassExchange<<16 | MethodExchangeDelete:
		return &ExchangeDelete{}
	case ClassExchange<<16 | MethodExchangeDeleteOk:
		return &ExchangeDeleteOk{}
	case ClassExchange<<16 | MethodExchangeBind:
		return &ExchangeBind{}
	case ClassExchange<<16 | MethodExchangeBindOk:
		return &ExchangeBindOk{}
	case ClassExchange<<16 | MethodExchangeUnbind:
		return &ExchangeUnbind{}
	case ClassExchange<<16 | MethodExchangeUnbindOk:
		return &ExchangeUnbindOk{}
	case ClassQueue<<16 | MethodQueueDeclare:
		return &QueueDeclare{}
	case ClassQueue<<16 | MethodQueueDeclareOk:
		return &QueueDeclareOk{}
	case ClassQueue<<16 | MethodQueueBind:
		return &QueueBind{}
	case ClassQueue<<16 | MethodQueueBindOk:
		return &QueueBindOk{}
	case ClassQueue<<16 | MethodQueuePurge:
		return &QueuePurge{}
	case ClassQueue<<16 | MethodQueuePurgeOk:
		return &QueuePurgeOk{}
	case ClassQueue<<16 | MethodQueueDelete:
		return &QueueDelete{}
	case ClassQueue<<16 | MethodQueueDeleteOk:
		return &QueueDeleteOk{}
	case ClassQueue<<16 | MethodQueueUnbind:
		return &QueueUnbind{}
	case ClassQueue<<16 | MethodQueueUnbindOk:
		return &QueueUnbindOk{}
	case ClassBasic<<16 | MethodBasicQos:
		return &BasicQos{}
	case ClassBasic<<16 | MethodBasicQosOk:
		return &BasicQosOk{}
	case ClassBasic<<16 | MethodBasicConsume:
		return &BasicConsume{}
	case ClassBasic<<16 | MethodBasicConsumeOk:
		return &BasicConsumeOk{}
	case ClassBasic<<16 | MethodBasicCancel:
		return &BasicCancel{}
	case ClassBasic<<16 | MethodBasicCancelOk:
		return &BasicCancelOk{}
	case ClassBasic<<16 | MethodBasicPublish:
		return &BasicPublish{}
	case ClassBasic<<16 | MethodBasicReturn:
		return &BasicReturn{}
	case ClassBasic<<16 | MethodBasicDeliver:
		return &BasicDeliver{}
	case ClassBasic<<16 | MethodBasicGet:
		return &BasicGet{}
	case ClassBasic<<16 | MethodBasicGetOk:
		return &BasicGetOk{}
	case ClassBasic<<16 | MethodBasicGetEmpty:
		return &BasicGetEmpty{}
	case ClassBasic<<16 | MethodBasicAck:
		return &BasicAck{}
	case ClassBasic<<16 | MethodBasicReject:
		return &BasicReject{}
	case ClassBasic<<16 | MethodBasicRecoverAsync:
		return &BasicRecoverAsync{}
	case ClassBasic<<16 | MethodBasicRecover:
		return &BasicRecover{}
	case ClassBasic<<16 | MethodBasicRecoverOk:
		return &BasicRecoverOk{}
	case ClassBasic<<16 | MethodBasicNack:
		return &BasicNack{}
	case ClassConfirm<<16 | MethodConfirmSelect:
		return &ConfirmSelect{}
	case ClassConfirm<<16 | MethodConfirmSelectOk:
		return &ConfirmSelectOk{}
	case ClassTx<<16 | MethodTxSelect:
		return &TxSelect{}
	case ClassTx<<16 | MethodTxSelectOk:
		return &TxSelectOk{}
	case ClassTx<<16 | MethodTxCommit:
		return &TxCommit{}
	case ClassTx<<16 | MethodTxCommitOk:
		return &TxCommitOk{}
	case ClassTx<<16 | MethodTxRollback:
		return &TxRollback{}
	case ClassTx<<16 | MethodTxRollbackOk:
		return &TxRollbackOk{}
	}
	return nil
}

// HasContent reports whether the method carries content (a header and
// body frames follow it).
func HasContent(classID, methodID uint16) bool {
	return classID == ClassBasic && (methodID == MethodBasicPublish || methodID == MethodBasicReturn || methodID == MethodBasicDeliver || methodID == MethodBasicGetOk)
}

// MethodName is the method's name as RabbitMQ writes it ("basic.publish"), or "" if unknown.
func MethodName(classID, methodID uint16) string {
	switch uint32(classID)<<16 | uint32(methodID) {
	case ClassConnection<<16 | MethodConnectionStart:
		return "connection.start"
	case ClassConnection<<16 | MethodConnectionStartOk:
		return "connection.start_ok"
	case ClassConnection<<16 | MethodConnectionSecure:
		return "connection.secure"
	case ClassConnection<<16 | MethodConnectionSecureOk:
		return "connection.secure_ok"
	case ClassConnection<<16 | MethodConnectionTune:
		return "connection.tune"
	case ClassConnection<<16 | MethodConnectionTuneOk:
		return "connection.tune_ok"
	case ClassConnection<<16 | MethodConnectionOpen:
		return "connection.open"
	case ClassConnection<<16 | MethodConnectionOpenOk:
		return "connection.open_ok"
	case ClassConnection<<16 | MethodConnectionClose:
		return "connection.close"
	case ClassConnection<<16 | MethodConnectionCloseOk:
		return "connection.close_ok"
	case ClassConnection<<16 | MethodConnectionBlocked:
		return "connection.blocked"
	case ClassConnection<<16 | MethodConnectionUnblocked:
		return "connection.unblocked"
	case ClassConnection<<16 | MethodConnectionUpdateSecret:
		return "connection.update_secret"
	case ClassConnection<<16 | MethodConnectionUpdateSecretOk:
		return "connection.update_secret_ok"
	case ClassChannel<<16 | MethodChannelOpen:
		return "channel.open"
	case ClassChannel<<16 | MethodChannelOpenOk:
		return "channel.open_ok"
	case ClassChannel<<16 | MethodChannelFlow:
		return "channel.flow"
	case ClassChannel<<16 | MethodChannelFlowOk:
		return "channel.flow_ok"
	case ClassChannel<<16 | MethodChannelClose:
		return "channel.close"
	case ClassChannel<<16 | MethodChannelCloseOk:
		return "channel.close_ok"
	case ClassAccess<<16 | MethodAccessRequest:
		return "access.request"
	case ClassAccess<<16 | MethodAccessRequestOk:
		return "access.request_ok"
	case ClassExchange<<16 | MethodExchangeDeclare:
		return "exchange.declare"
	case ClassExchange<<16 | MethodExchangeDeclareOk:
		return "exchange.declare_ok"
	case ClassExchange<<16 | MethodExchangeDelete:
		return "exchange.delete"
	case ClassExchange<<16 | MethodExchangeDeleteOk:
		return "exchange.delete_ok"
	case ClassExchange<<16 | MethodExchangeBind:
		return "exchange.bind"
	case ClassExchange<<16 | MethodExchangeBindOk:
		return "exchange.bind_ok"
	case ClassExchange<<16 | MethodExchangeUnbind:
		return "exchange.unbind"
	case ClassExchange<<16 | MethodExchangeUnbindOk:
		return "exchange.unbind_ok"
	case ClassQueue<<16 | MethodQueueDeclare:
		return "queue.declare"
	case ClassQueue<<16 | MethodQueueDeclareOk:
		return "queue.declare_ok"
	case ClassQueue<<16 | MethodQueueBind:
		return "queue.bind"
	case ClassQueue<<16 | MethodQueueBindOk:
		return "queue.bind_ok"
	case ClassQueue<<16 | MethodQueuePurge:
		return "queue.purge"
	case ClassQueue<<16 | MethodQueuePurgeOk:
		return "queue.purge_ok"
	case ClassQueue<<16 | MethodQueueDelete:
		return "queue.delete"
	case ClassQueue<<16 | MethodQueueDeleteOk:
		return "queue.delete_ok"
	case ClassQueue<<16 | MethodQueueUnbind:
		return "queue.unbind"
	case ClassQueue<<16 | MethodQueueUnbindOk:
		return "queue.unbind_ok"
	case ClassBasic<<16 | MethodBasicQos:
		return "basic.qos"
	case ClassBasic<<16 | MethodBasicQosOk:
		return "basic.qos_ok"
	case ClassBasic<<16 | MethodBasicConsume:
		return "basic.consume"
	case ClassBasic<<16 | MethodBasicConsumeOk:
		return "basic.consume_ok"
	case ClassBasic<<16 | MethodBasicCancel:
		return "basic.cancel"
	case ClassBasic<<16 | MethodBasicCancelOk:
		return "basic.cancel_ok"
	case ClassBasic<<16 | MethodBasicPublish:
		return "basic.publish"
	case ClassBasic<<16 | MethodBasicReturn:
		return "basic.return"
	case ClassBasic<<16 | MethodBasicDeliver:
		return "basic.deliver"
	case ClassBasic<<16 | MethodBasicGet:
		return "basic.get"
	case ClassBasic<<16 | MethodBasicGetOk:
		return "basic.get_ok"
	case ClassBasic<<16 | MethodBasicGetEmpty:
		return "basic.get_empty"
	case ClassBasic<<16 | MethodBasicAck:
		return "basic.ack"
	case ClassBasic<<16 | MethodBasicReject:
		return "basic.reject"
	case ClassBasic<<16 | MethodBasicRecoverAsync:
		return "basic.recover_async"
	case ClassBasic<<16 | MethodBasicRecover:
		return "basic.recover"
	case ClassBasic<<16 | MethodBasicRecoverOk:
		return "basic.recover_ok"
	case ClassBasic<<16 | MethodBasicNack:
		return "basic.nack"
	case ClassConfirm<<16 | MethodConfirmSelect:
		return "confirm.select"
	case ClassConfirm<<16 | MethodConfirmSelectOk:
		return "confirm.select_ok"
	case ClassTx<<16 | MethodTxSelect:
		return "tx.select"
	case ClassTx<<16 | MethodTxSelectOk:
		return "tx.select_ok"
	case ClassTx<<16 | MethodTxCommit:
		return "tx.commit"
	case ClassTx<<16 | MethodTxCommitOk:
		return "tx.commit_ok"
	case ClassTx<<16 | MethodTxRollback:
		return "tx.rollback"
	case ClassTx<<16 | MethodTxRollbackOk:
		return "tx.rollback_ok"
	}
	return ""
}

// allMethods lists one zero value of every method, for tests.
func allMethods() []Method {
	return []Method{
		&ConnectionStart{},
		&ConnectionStartOk{},
		&ConnectionSecure{},
		&ConnectionSecureOk{},
		&ConnectionTune{},
		&ConnectionTuneOk{},
		&ConnectionOpen{},
		&ConnectionOpenOk{},
		&ConnectionClose{},
		&ConnectionCloseOk{},
		&ConnectionBlocked{},
		&ConnectionUnblocked{},
		&ConnectionUpdateSecret{},
		&ConnectionUpdateSecretOk{},
		&ChannelOpen{},
		&ChannelOpenOk{},
		&ChannelFlow{},
		&ChannelFlowOk{},
		&ChannelClose{},
		&ChannelCloseOk{},
		&AccessRequest{},
		&AccessRequestOk{},
		&ExchangeDeclare{},
		&ExchangeDeclareOk{},
		&ExchangeDelete{},
		&ExchangeDeleteOk{},
		&ExchangeBind{},
		&ExchangeBindOk{},
		&ExchangeUnbind{},
		&ExchangeUnbindOk{},
		&QueueDeclare{},
		&QueueDeclareOk{},
		&QueueBind{},
		&QueueBindOk{},
		&QueuePurge{},
		&QueuePurgeOk{},
		&QueueDelete{},
		&QueueDeleteOk{},
		&QueueUnbind{},
		&QueueUnbindOk{},
		&BasicQos{},
		&BasicQosOk{},
		&BasicConsume{},
		&BasicConsumeOk{},
		&BasicCancel{},
		&BasicCancelOk{},
		&BasicPublish{},
		&BasicReturn{},
		&BasicDeliver{},
		&BasicGet{},
		&BasicGetOk{},
		&BasicGetEmpty{},
		&BasicAck{},
		&BasicReject{},
		&BasicRecoverAsync{},
		&BasicRecover{},
		&BasicRecoverOk{},
		&BasicNack{},
		&ConfirmSelect{},
		&ConfirmSelectOk{},
		&TxSelect{},
		&TxSelectOk{},
		&TxCommit{},
		&TxCommitOk{},
		&TxRollback{},
		&TxRollbackOk{},
	}
}
