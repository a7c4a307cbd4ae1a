package link

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"testing"

	"github.com/epitaph-mq/epitaph/config"
)

func certWithSubject(t *testing.T, seq pkix.RDNSequence) *x509.Certificate {
	t.Helper()
	raw, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{RawSubject: raw}
}

func atv(oid asn1.ObjectIdentifier, v any) pkix.AttributeTypeAndValue {
	return pkix.AttributeTypeAndValue{Type: oid, Value: v}
}

var (
	oidCN    = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidO     = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidC     = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidDC    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidEmail = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidOther = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}
)

// The user names RabbitMQ's distinguished_name mode gives: the last RDN
// first, its attribute names, dotted decimal for unknown ones, RFC 4514
// escapes, and \XX for bytes below 32 or from 126 (so '~' and UTF-8).
func TestDistinguishedName(t *testing.T) {
	for _, tc := range []struct {
		seq  pkix.RDNSequence
		want string
	}{
		{pkix.RDNSequence{{atv(oidCN, "localhost")}, {atv(oidO, "client")}}, "O=client,CN=localhost"},
		{pkix.RDNSequence{{atv(oidC, "GB")}, {atv(oidO, "Acme")}, {atv(oidCN, "app")}}, "CN=app,O=Acme,C=GB"},
		{pkix.RDNSequence{{atv(oidDC, "example")}, {atv(oidEmail, "a@example.com")}}, "EMAILADDRESS=a@example.com,DC=example"},
		{pkix.RDNSequence{{atv(oidOther, "x")}}, "1.3.6.1.4.1.99999.1=x"},
		{pkix.RDNSequence{{atv(oidCN, `#a,b+c"d;e<f>g\h `)}}, `CN=\#a\,b\+c\"d\;e\<f\>g\\h\ `},
		{pkix.RDNSequence{{atv(oidCN, " lead")}}, `CN=\ lead`},
		{pkix.RDNSequence{{atv(oidCN, "é~\x01")}}, `CN=\C3\A9\7E\01`},
	} {
		got, err := DistinguishedName(certWithSubject(t, tc.seq))
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("DistinguishedName = %q, want %q", got, tc.want)
		}
	}
}

func TestCommonNamesAndSAN(t *testing.T) {
	cert := certWithSubject(t, pkix.RDNSequence{{atv(oidCN, "a")}, {atv(oidO, "o")}, {atv(oidCN, "b,c")}})
	cert.DNSNames = []string{"one.example", "two.example"}
	got, err := commonNames(cert)
	if err != nil || got != "a,b,c" {
		t.Fatalf("commonNames = %q, %v", got, err)
	}
	if got, err := subjectAltName(cert, SANTypeDNS, 1); err != nil || got != "two.example" {
		t.Fatalf("dns[1] = %q, %v", got, err)
	}
	if _, err := subjectAltName(cert, SANTypeDNS, 2); !errors.Is(err, errNoCertName) {
		t.Fatalf("dns[2]: %v", err)
	}
	if _, err := subjectAltName(cert, SANTypeEmail, 0); !errors.Is(err, errNoCertName) {
		t.Fatalf("email[0]: %v", err)
	}
	if _, err := commonNames(certWithSubject(t, pkix.RDNSequence{{atv(oidO, "o")}})); !errors.Is(err, errNoCertName) {
		t.Fatalf("no CN: %v", err)
	}
}

func TestNewTLSCertsRefusesBadOptions(t *testing.T) {
	valid := config.Default().TLS
	valid.TLSCertFile, valid.TLSKeyFile = "c", "k"
	for name, mod := range map[string]func(o *config.TLS){
		"no key":                     func(o *config.TLS) { o.TLSKeyFile = "" },
		"verify without CA":          func(o *config.TLS) { o.TLSVerifyPeer = true },
		"fail-if-no-cert w/o verify": func(o *config.TLS) { o.TLSFailIfNoPeerCert = true },
		"login from":                 func(o *config.TLS) { o.SSLCertLoginFrom = "serial" },
		"SAN type":                   func(o *config.TLS) { o.SSLCertLoginSANType = "other_name" },
		"missing files":              func(o *config.TLS) { o.TLSCertFile, o.TLSKeyFile = "/nonexistent/c", "/nonexistent/k" },
	} {
		o := valid
		mod(&o)
		if _, err := NewTLSCerts(o); !errors.Is(err, ErrTLSConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
