package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/config"
)

// Where the user name of a SASL EXTERNAL login comes from, with the names
// of RabbitMQ's ssl_cert_login_from setting (defined in config).
const (
	CertLoginDistinguishedName = config.CertLoginDistinguishedName
	CertLoginCommonName        = config.CertLoginCommonName
	CertLoginSAN               = config.CertLoginSAN
)

// Subject alternative name types for CertLoginSAN, with the names of
// RabbitMQ's ssl_cert_login_san_type setting (defined in config).
const (
	SANTypeDNS   = config.SANTypeDNS
	SANTypeIP    = config.SANTypeIP
	SANTypeEmail = config.SANTypeEmail
	SANTypeURI   = config.SANTypeURI
)

// ErrTLSConfig wraps every error in the TLS settings or in the files they
// name.
var ErrTLSConfig = errors.New("link: invalid TLS configuration")

// tlsMaterial is what one load of the files produced.
type tlsMaterial struct {
	cert    *tls.Certificate
	clients *x509.CertPool // nil unless VerifyPeer
}

// TLSCerts holds the TLS listeners' certificate, key and client CA, which
// Reload replaces while the broker runs: new handshakes use the new files,
// established connections keep the session they negotiated.
type TLSCerts struct {
	opts config.TLS
	cur  atomic.Pointer[tlsMaterial]
}

// NewTLSCerts checks the settings (config.TLS.Validate) and loads the
// files they name.
func NewTLSCerts(settings config.TLS) (*TLSCerts, error) {
	if settings.TLSCertFile == "" || settings.TLSKeyFile == "" {
		return nil, fmt.Errorf("%w: a certificate file and a key file are both required", ErrTLSConfig)
	}
	if err := settings.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	t := &TLSCerts{opts: settings}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the certificate, key and CA files again. On error the
// previous material stays in use.
func (t *TLSCerts) Reload() error {
	cert, err := tls.LoadX509KeyPair(t.opts.TLSCertFile, t.opts.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	m := &tlsMaterial{cert: &cert}
	if t.opts.TLSVerifyPeer {
		pem, err := os.ReadFile(t.opts.TLSCAFile)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrTLSConfig, err)
		}
		m.clients = x509.NewCertPool()
		if !m.clients.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%w: no PEM certificate in CA file %s", ErrTLSConfig, t.opts.TLSCAFile)
		}
	}
	t.cur.Store(m)
	return nil
}

// HandshakeTimeout is the configured TLS handshake time-out.
func (t *TLSCerts) HandshakeTimeout() time.Duration { return t.opts.TLSHandshakeTimeout }

// AMQPConfig is the TLS configuration of the amqps listener: TLS 1.2 or
// later, the current certificate, client certificates as configured.
func (t *TLSCerts) AMQPConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := t.cur.Load()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*m.cert},
				NextProtos:   []string{"amqp"},
			}
			if t.opts.TLSVerifyPeer {
				c.ClientCAs = m.clients
				c.ClientAuth = tls.VerifyClientCertIfGiven
				if t.opts.TLSFailIfNoPeerCert {
					c.ClientAuth = tls.RequireAndVerifyClientCert
				}
			}
			return c, nil
		},
	}
}

// HTTPConfig is the TLS configuration of the HTTPS management listener:
// TLS 1.2 or later with the current certificate, no client certificates.
func (t *TLSCerts) HTTPConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.cur.Load().cert, nil
		},
	}
}

var errNoCertName = errors.New("link: the client certificate has no name of the configured kind")

// loginName is the user name an EXTERNAL login with cert stands for.
func (t *TLSCerts) loginName(cert *x509.Certificate) (string, error) {
	switch t.opts.SSLCertLoginFrom {
	case CertLoginCommonName:
		return commonNames(cert)
	case CertLoginSAN:
		return subjectAltName(cert, t.opts.SSLCertLoginSANType, t.opts.SSLCertLoginSANIndex)
	}
	return DistinguishedName(cert)
}

// DistinguishedName formats cert's subject as RabbitMQ names users from
// it: RFC 4514 order (the last RDN first), multi-valued RDNs joined with
// "+", RabbitMQ's attribute names (dotted decimal for others), and its
// escaping, which also escapes every byte below 32 or from 126 as \XX.
func DistinguishedName(cert *x509.Certificate) (string, error) {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil {
		return "", fmt.Errorf("decode subject: %w", err)
	} else if len(rest) > 0 {
		return "", errors.New("decode subject: trailing data")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i != len(seq)-1 {
			b.WriteByte(',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			b.WriteString(attributeName(atv.Type))
			b.WriteByte('=')
			escapeRDNValue(&b, fmt.Sprint(atv.Value))
		}
	}
	return b.String(), nil
}

// rdnNames are the attribute names RabbitMQ writes in a subject.
var rdnNames = map[string]string{
	"2.5.4.4":                    "SN",
	"2.5.4.42":                   "GIVENNAME",
	"2.5.4.43":                   "INITIALS",
	"2.5.4.44":                   "GENERATIONQUALIFIER",
	"2.5.4.3":                    "CN",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.12":                   "TITLE",
	"2.5.4.6":                    "C",
	"2.5.4.5":                    "SERIALNUMBER",
	"2.5.4.65":                   "PSEUDONYM",
	"0.9.2342.19200300.100.1.25": "DC",
	"1.2.840.113549.1.9.1":       "EMAILADDRESS",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.1":  "UID",
}

func attributeName(oid asn1.ObjectIdentifier) string {
	s := oid.String()
	if n, ok := rdnNames[s]; ok {
		return n
	}
	return s
}

// escapeRDNValue appends v escaped as RabbitMQ does (RFC 4514 §2.4, plus
// hex escapes for non-printable and non-ASCII bytes).
func escapeRDNValue(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case i == 0 && (c == ' ' || c == '#'):
			b.WriteByte('\\')
			b.WriteByte(c)
		case i > 0 && i == len(v)-1 && c == ' ':
			b.WriteString(`\ `)
		case c == '"' || c == '+' || c == ',' || c == ';' || c == '<' || c == '>' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 32 || c >= 126:
			b.WriteByte('\\')
			b.WriteString(strings.ToUpper(strconv.FormatUint(uint64(c)|0x100, 16)[1:]))
		default:
			b.WriteByte(c)
		}
	}
}

// commonNames joins every CN of the subject with ",", unescaped, as
// RabbitMQ's common_name mode does.
func commonNames(cert *x509.Certificate) (string, error) {
	var seq pkix.RDNSequence
	if _, err := asn1.Unmarshal(cert.RawSubject, &seq); err != nil {
		return "", fmt.Errorf("decode subject: %w", err)
	}
	var cns []string
	for _, rdn := range seq {
		for _, atv := range rdn {
			if atv.Type.String() == "2.5.4.3" {
				cns = append(cns, fmt.Sprint(atv.Value))
			}
		}
	}
	if len(cns) == 0 {
		return "", fmt.Errorf("%w: no common name", errNoCertName)
	}
	return strings.Join(cns, ","), nil
}

// subjectAltName returns the index-th (0-based) subject alternative name
// of the given type, in certificate order.
func subjectAltName(cert *x509.Certificate, typ string, index int) (string, error) {
	var names []string
	switch typ {
	case SANTypeDNS:
		names = cert.DNSNames
	case SANTypeEmail:
		names = cert.EmailAddresses
	case SANTypeIP:
		for _, ip := range cert.IPAddresses {
			names = append(names, ip.String())
		}
	case SANTypeURI:
		for _, u := range cert.URIs {
			names = append(names, u.String())
		}
	}
	if index >= len(names) {
		return "", fmt.Errorf("%w: %d subject alternative names of type %s, index %d", errNoCertName, len(names), typ, index)
	}
	return names[index], nil
}

// tlsHandshake completes the TLS handshake of a connection accepted by
// ServeTLS within the handshake time-out, and keeps the client's
// certificate when it was verified against the CA. A no-op without TLS.
func (c *conn) tlsHandshake() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.certs.HandshakeTimeout())
	defer cancel()
	// Shutdown must not wait out the time-out of a client that is silent
	// in its TLS handshake.
	go func() { // exits when the handshake ends or the server shuts down
		select {
		case <-c.force:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("link: TLS handshake: %w", err)
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		c.peerCert = st.PeerCertificates[0]
	}
	return nil
}
