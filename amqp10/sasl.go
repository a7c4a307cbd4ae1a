package amqp10

// Protocol headers (section 2.2 and 5.2).
var (
	ProtoHeaderAMQP = [8]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	ProtoHeaderTLS  = [8]byte{'A', 'M', 'Q', 'P', 2, 1, 0, 0}
	ProtoHeaderSASL = [8]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

// SASL outcome codes (section 5.3.3.6).
const (
	SASLCodeOK      uint8 = 0
	SASLCodeAuth    uint8 = 1
	SASLCodeSys     uint8 = 2
	SASLCodeSysPerm uint8 = 3
	SASLCodeSysTemp uint8 = 4
)

// SASLMechanisms (section 5.3.3.1).
//
//	<field name="sasl-server-mechanisms" type="symbol" multiple="true" mandatory="true"/>
type SASLMechanisms struct {
	Mechanisms []Symbol
}

// SASLInit (section 5.3.3.2).
//
//	<field name="mechanism" type="symbol" mandatory="true"/>
//	<field name="initial-response" type="binary"/>
//	<field name="hostname" type="string"/>
type SASLInit struct {
	Mechanism       Symbol
	InitialResponse []byte
	Hostname        string
}

// SASLChallenge (section 5.3.3.3).
type SASLChallenge struct {
	Challenge []byte
}

// SASLResponse (section 5.3.3.4).
type SASLResponse struct {
	Response []byte
}

// SASLOutcome (section 5.3.3.5).
//
//	<field name="code" type="sasl-code" mandatory="true"/>
//	<field name="additional-data" type="binary"/>
type SASLOutcome struct {
	Code           uint8
	AdditionalData []byte
}

func (*SASLMechanisms) Descriptor() uint64 { return DescSASLMechanisms }
func (*SASLInit) Descriptor() uint64       { return DescSASLInit }
func (*SASLChallenge) Descriptor() uint64  { return DescSASLChallenge }
func (*SASLResponse) Descriptor() uint64   { return DescSASLResponse }
func (*SASLOutcome) Descriptor() uint64    { return DescSASLOutcome }
