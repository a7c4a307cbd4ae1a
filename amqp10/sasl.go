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

// Append encodes the sasl-mechanisms frame body; the mechanisms are always
// sent as an array of symbols.
func (p *SASLMechanisms) Append(b []byte) []byte {
	b, w := beginList(b, DescSASLMechanisms)
	b = w.mark(appendSymbolArray(b, p.Mechanisms))
	return w.end(b)
}

// Append encodes the sasl-init frame body.
func (p *SASLInit) Append(b []byte) []byte {
	b, w := beginList(b, DescSASLInit)
	b = w.sym(b, p.Mechanism, true)
	b = w.binary(b, p.InitialResponse, p.InitialResponse != nil)
	b = w.str(b, p.Hostname, p.Hostname != "")
	return w.end(b)
}

// Append encodes the sasl-challenge frame body.
func (p *SASLChallenge) Append(b []byte) []byte {
	b, w := beginList(b, DescSASLChallenge)
	b = w.binary(b, p.Challenge, true)
	return w.end(b)
}

// Append encodes the sasl-response frame body.
func (p *SASLResponse) Append(b []byte) []byte {
	b, w := beginList(b, DescSASLResponse)
	b = w.binary(b, p.Response, true)
	return w.end(b)
}

// Append encodes the sasl-outcome frame body.
func (p *SASLOutcome) Append(b []byte) []byte {
	b, w := beginList(b, DescSASLOutcome)
	b = w.ubyte(b, p.Code, true)
	b = w.binary(b, p.AdditionalData, p.AdditionalData != nil)
	return w.end(b)
}

// Unmarshal decodes a sasl-mechanisms frame body into p.
func (p *SASLMechanisms) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescSASLMechanisms, "sasl-mechanisms")
	*p = SASLMechanisms{}
	f.mandatory(f.symbols("sasl-server-mechanisms", &p.Mechanisms))
	return f.end(body, rest)
}

// Unmarshal decodes a sasl-init frame body into p. InitialResponse aliases body.
func (p *SASLInit) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescSASLInit, "sasl-init")
	*p = SASLInit{}
	f.mandatory(f.sym("mechanism", &p.Mechanism))
	f.binary("initial-response", &p.InitialResponse)
	f.str("hostname", &p.Hostname)
	return f.end(body, rest)
}

// Unmarshal decodes a sasl-challenge frame body into p. Challenge aliases body.
func (p *SASLChallenge) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescSASLChallenge, "sasl-challenge")
	*p = SASLChallenge{}
	f.mandatory(f.binary("challenge", &p.Challenge))
	return f.end(body, rest)
}

// Unmarshal decodes a sasl-response frame body into p. Response aliases body.
func (p *SASLResponse) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescSASLResponse, "sasl-response")
	*p = SASLResponse{}
	f.mandatory(f.binary("response", &p.Response))
	return f.end(body, rest)
}

// Unmarshal decodes a sasl-outcome frame body into p. AdditionalData aliases body.
func (p *SASLOutcome) Unmarshal(body []byte) (rest []byte, err error) {
	f, rest := openDescribed(body, DescSASLOutcome, "sasl-outcome")
	*p = SASLOutcome{}
	f.mandatory(f.ubyte("code", &p.Code))
	f.binary("additional-data", &p.AdditionalData)
	return f.end(body, rest)
}
