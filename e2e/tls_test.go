package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/config"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/router"
)

// testCA is a certificate authority made in the test with crypto/x509.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serialCounter = big.NewInt(1)

func nextSerial() *big.Int {
	serialCounter = new(big.Int).Add(serialCounter, big.NewInt(1))
	return new(big.Int).Set(serialCounter)
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// leafSpec describes a certificate the CA issues. rawSubject, when set,
// replaces subject (to control the RDN order and multi-valued RDNs).
type leafSpec struct {
	subject    pkix.Name
	rawSubject pkix.RDNSequence
	dns        []string
	ips        []net.IP
	emails     []string
	uris       []string
	client     bool
}

// issue returns the PEM certificate and key, and a tls.Certificate.
func (ca *testCA) issue(t *testing.T, s leafSpec) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:   nextSerial(),
		Subject:        s.subject,
		NotBefore:      time.Now().Add(-time.Hour),
		NotAfter:       time.Now().Add(24 * time.Hour),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:       s.dns,
		IPAddresses:    s.ips,
		EmailAddresses: s.emails,
	}
	if s.rawSubject != nil {
		raw, err := asn1.Marshal(s.rawSubject)
		require.NoError(t, err)
		tmpl.RawSubject = raw
	}
	for _, u := range s.uris {
		pu, err := url.Parse(u)
		require.NoError(t, err)
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	if s.client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return certPEM, keyPEM, pair
}

// tlsFixture is a server certificate for localhost and 127.0.0.1, its CA,
// and the files a broker reads.
type tlsFixture struct {
	ca                        *testCA
	certFile, keyFile, caFile string
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	dir := t.TempDir()
	f := &tlsFixture{ca: newTestCA(t, "epitaph test CA"), certFile: filepath.Join(dir, "server.pem"),
		keyFile: filepath.Join(dir, "server.key"), caFile: filepath.Join(dir, "ca.pem")}
	f.writeServerCert(t, "server-1")
	require.NoError(t, os.WriteFile(f.caFile, f.ca.pem, 0o600))
	return f
}

// writeServerCert issues a server certificate with common name cn and
// writes it over the broker's files.
func (f *tlsFixture) writeServerCert(t *testing.T, cn string) {
	t.Helper()
	c, k, _ := f.ca.issue(t, leafSpec{subject: pkix.Name{CommonName: cn, Organization: []string{"server"}},
		dns: []string{"localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}})
	require.NoError(t, os.WriteFile(f.certFile, c, 0o600))
	require.NoError(t, os.WriteFile(f.keyFile, k, 0o600))
}

// options sets the broker's TLS options: amqps on a free loopback port,
// client certificates verified against the fixture's CA when given.
func (f *tlsFixture) options(o *epitaph.Options) {
	o.TLSListen = "127.0.0.1:0"
	o.TLSCertFile, o.TLSKeyFile, o.TLSCAFile = f.certFile, f.keyFile, f.caFile
	o.TLSVerifyPeer = true
	o.AutoCreateQueues = true
}

func (f *tlsFixture) clientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: f.ca.pool(), ServerName: "localhost", Certificates: certs}
}

func dialTLS(t *testing.T, b *epitaph.Broker, cfg *tls.Config, sasl amqp.SASLType, vhost string) (*amqp.Conn, error) {
	t.Helper()
	opts := &amqp.ConnOptions{TLSConfig: cfg, SASLType: sasl}
	if vhost != "" {
		opts.HostName = "vhost:" + vhost
	}
	c, err := amqp.Dial(ctxT(t), "amqps://"+b.TLSAddr().String(), opts)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// sessionErr returns a dial's error, or else the error of beginning a
// session: a connection refused after SASL is answered with open then
// close, and go-amqp's Dial may return before it has read the close.
func sessionErr(t *testing.T, c *amqp.Conn, err error) error {
	t.Helper()
	if err != nil {
		return err
	}
	if _, err = c.NewSession(ctxT(t), nil); err != nil {
		if cerr := c.Close(); cerr != nil {
			return cerr // carries the broker's close
		}
	}
	return err
}

// tlsRoundTrip publishes one message to queue q and reads it back.
func tlsRoundTrip(t *testing.T, c *amqp.Conn, q string) {
	t.Helper()
	s := session(t, c)
	snd := sender(t, s, q, nil) // a bare address: the brokers auto-create queues
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("over tls")))
	r := receiver(t, s, q, nil)
	m := recv(t, r)
	require.Equal(t, "over tls", body(m))
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
}

// saslMechanisms opens a raw connection (TLS when cfg is set), sends the
// SASL protocol header and returns the mechanisms the broker offers.
func saslMechanisms(t *testing.T, addr string, cfg *tls.Config) []amqp10.Symbol {
	t.Helper()
	var nc net.Conn
	var err error
	d := &net.Dialer{Timeout: 5 * time.Second}
	if cfg != nil {
		nc, err = tls.DialWithDialer(d, "tcp", addr, cfg)
	} else {
		nc, err = d.Dial("tcp", addr)
	}
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = nc.Write(amqp10.ProtoHeaderSASL[:])
	require.NoError(t, err)
	br := bufio.NewReader(nc)
	var hdr [8]byte
	_, err = io.ReadFull(br, hdr[:])
	require.NoError(t, err)
	require.Equal(t, amqp10.ProtoHeaderSASL, hdr)
	var fh [8]byte
	_, err = io.ReadFull(br, fh[:])
	require.NoError(t, err)
	h, err := amqp10.ParseFrameHeader(fh[:])
	require.NoError(t, err)
	rest := make([]byte, h.Size-8)
	_, err = io.ReadFull(br, rest)
	require.NoError(t, err)
	p, _, err := amqp10.ParsePerformative(rest[int(h.DataOffset)*4-8:])
	require.NoError(t, err)
	mechs, ok := p.(*amqp10.SASLMechanisms)
	require.True(t, ok, "got %T", p)
	return mechs.Mechanisms
}

// TLS 1.0 and 1.1 are refused by the server (a protocol-version alert),
// 1.2 and 1.3 are accepted and carry AMQP.
func TestTLSVersions(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, "", f.options)
	addr := b.TLSAddr().String()
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		cfg := f.clientConfig()
		cfg.MinVersion, cfg.MaxVersion = v, v
		_, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		require.Error(t, err, "TLS version %x accepted", v)
		require.Contains(t, err.Error(), "protocol version", "TLS version %x", v)
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cfg := f.clientConfig()
		cfg.MinVersion, cfg.MaxVersion = v, v
		c, err := dialTLS(t, b, cfg, amqp.SASLTypeAnonymous(), "")
		require.NoError(t, err, "TLS version %x", v)
		tlsRoundTrip(t, c, tls.VersionName(v))
	}
}

// A client that connects to the amqps port and sends nothing is closed
// once the TLS handshake time-out has passed.
func TestTLSHandshakeTimeout(t *testing.T) {
	f := newTLSFixture(t)
	const timeout = 300 * time.Millisecond
	b := startBroker(t, "", f.options, func(o *epitaph.Options) {
		o.TLSHandshakeTimeout = timeout
		o.HandshakeTimeout = time.Minute // the AMQP handshake's own limit must not be what closes it
	})
	nc, err := net.Dial("tcp", b.TLSAddr().String())
	require.NoError(t, err)
	defer nc.Close()
	start := time.Now()
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := nc.Read(make([]byte, 1))
	elapsed := time.Since(start)
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF, "the broker should close the silent connection")
	require.GreaterOrEqual(t, elapsed, timeout-50*time.Millisecond)
	require.Less(t, elapsed, timeout+3*time.Second, "closed after %v", elapsed)
}

// Client certificates name users as RabbitMQ's rabbitmq_auth_mechanism_ssl
// does, for each ssl-cert-login-from setting. Each user may use only its
// own vhost, so a successful open proves the name the certificate mapped to.
func TestTLSExternalLogin(t *testing.T) {
	subject := pkix.RDNSequence{ // certificate order: CN first, as the official client's CI certificate
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "app, one"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "client"},
			{Type: asn1.ObjectIdentifier{2, 5, 4, 11}, Value: "ops"}},
	}
	for _, tc := range []struct {
		name string
		from func(*epitaph.Options)
		user string
	}{
		{"distinguished_name (default)", func(*epitaph.Options) {}, `OU=ops+O=client,CN=app\, one`},
		{"common_name", func(o *epitaph.Options) { o.SSLCertLoginFrom = "common_name" }, "app, one"},
		{"subject_alternative_name dns index 1", func(o *epitaph.Options) {
			o.SSLCertLoginFrom, o.SSLCertLoginSANIndex = "subject_alternative_name", 1
		}, "second.example"},
		{"subject_alternative_name email", func(o *epitaph.Options) {
			o.SSLCertLoginFrom, o.SSLCertLoginSANType = "subject_alternative_name", "email"
		}, "app@example.com"},
		{"subject_alternative_name uri", func(o *epitaph.Options) {
			o.SSLCertLoginFrom, o.SSLCertLoginSANType = "subject_alternative_name", "uri"
		}, "spiffe://example/app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTLSFixture(t)
			defs := `{"vhosts":[{"name":"/"},{"name":"mine"}],
				"users":[{"name":` + jsonString(tc.user) + `,"tags":[]},{"name":"other","password":"x","tags":[]}],
				"permissions":[{"user":` + jsonString(tc.user) + `,"vhost":"mine","configure":".*","write":".*","read":".*"},
					{"user":"other","vhost":"/","configure":".*","write":".*","read":".*"}]}`
			b := startBroker(t, defs, f.options, tc.from)
			_, _, client := f.ca.issue(t, leafSpec{rawSubject: subject, client: true,
				dns: []string{"first.example", "second.example"}, emails: []string{"app@example.com"},
				uris: []string{"spiffe://example/app"}})

			c, err := dialTLS(t, b, f.clientConfig(client), amqp.SASLTypeExternal(""), "mine")
			require.NoError(t, err)
			tlsRoundTrip(t, c, "ext")

			// The same user has no access to "/": the open is refused.
			c, err = dialTLS(t, b, f.clientConfig(client), amqp.SASLTypeExternal(""), "/")
			require.Error(t, sessionErr(t, c, err))
		})
	}
}

func jsonString(s string) string {
	b := []byte{'"'}
	for _, c := range []byte(s) {
		if c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, c)
	}
	return string(append(b, '"'))
}

// EXTERNAL is offered only when the TLS handshake verified a client
// certificate; an untrusted certificate fails the handshake; a verified
// certificate whose name is no user fails SASL.
func TestTLSExternalOffered(t *testing.T) {
	f := newTLSFixture(t)
	defs := `{"users":[{"name":"CN=known","tags":[]}],
		"permissions":[{"user":"CN=known","vhost":"/","configure":".*","write":".*","read":".*"}]}`
	b := startBroker(t, defs, f.options)
	addr := b.TLSAddr().String()
	_, _, known := f.ca.issue(t, leafSpec{subject: pkix.Name{CommonName: "known"}, client: true})
	_, _, unknown := f.ca.issue(t, leafSpec{subject: pkix.Name{CommonName: "stranger"}, client: true})

	require.Equal(t, []amqp10.Symbol{"PLAIN", "ANONYMOUS"}, saslMechanisms(t, addr, f.clientConfig()))
	require.Equal(t, []amqp10.Symbol{"EXTERNAL", "PLAIN", "ANONYMOUS"}, saslMechanisms(t, addr, f.clientConfig(known)))
	// The plain listener never offers EXTERNAL.
	require.Equal(t, []amqp10.Symbol{"PLAIN", "ANONYMOUS"}, saslMechanisms(t, b.Addr().String(), nil))

	c, err := dialTLS(t, b, f.clientConfig(known), amqp.SASLTypeExternal(""), "")
	require.NoError(t, err)
	tlsRoundTrip(t, c, "known")

	_, err = dialTLS(t, b, f.clientConfig(), amqp.SASLTypeExternal(""), "")
	require.Error(t, err, "EXTERNAL without a client certificate")
	_, err = dialTLS(t, b, f.clientConfig(unknown), amqp.SASLTypeExternal(""), "")
	require.Error(t, err, "EXTERNAL as a user that does not exist")

	other := newTestCA(t, "another CA")
	_, _, untrusted := other.issue(t, leafSpec{subject: pkix.Name{CommonName: "known"}, client: true})
	cfg := f.clientConfig()
	// Go's client sends only a certificate issued by a CA the server
	// named; force this one on it, as a foreign client would.
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &untrusted, nil }
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err == nil {
		// TLS 1.3: the client finishes before the server has checked
		// its certificate; the server's verdict arrives on the first read.
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = nc.Read(make([]byte, 1))
		nc.Close()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "certificate", "an untrusted client certificate must fail the handshake")
}

// With fail-if-no-peer-cert, a TLS client without a certificate is refused
// in the handshake.
func TestTLSFailIfNoPeerCert(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, "", f.options, func(o *epitaph.Options) { o.TLSFailIfNoPeerCert = true })
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", b.TLSAddr().String(), f.clientConfig())
	if err == nil {
		require.NoError(t, nc.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = nc.Read(make([]byte, 1))
		nc.Close()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "certificate required")
	_, _, client := f.ca.issue(t, leafSpec{subject: pkix.Name{CommonName: "guest"}, client: true})
	c, err := dialTLS(t, b, f.clientConfig(client), amqp.SASLTypeAnonymous(), "")
	require.NoError(t, err)
	tlsRoundTrip(t, c, "required")
}

// ReloadTLS makes new handshakes present the new certificate; a connection
// opened before keeps working.
func TestTLSReload(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, "", f.options)
	before, err := dialTLS(t, b, f.clientConfig(), amqp.SASLTypeAnonymous(), "")
	require.NoError(t, err)
	require.Equal(t, "server-1", serverCN(t, b.TLSAddr().String(), f))

	f.writeServerCert(t, "server-2")
	require.Equal(t, "server-1", serverCN(t, b.TLSAddr().String(), f), "no reload yet")
	require.NoError(t, b.ReloadTLS())
	require.Equal(t, "server-2", serverCN(t, b.TLSAddr().String(), f))
	tlsRoundTrip(t, before, "reload")

	// A broken file keeps the previous certificate.
	require.NoError(t, os.WriteFile(f.certFile, []byte("not a certificate"), 0o600))
	require.Error(t, b.ReloadTLS())
	require.Equal(t, "server-2", serverCN(t, b.TLSAddr().String(), f))
}

func serverCN(t *testing.T, addr string, f *tlsFixture) string {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, f.clientConfig())
	require.NoError(t, err)
	defer nc.Close()
	return nc.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// The management API over HTTPS, with the configured certificate.
func TestTLSHTTPS(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, "", f.options, func(o *epitaph.Options) {
		o.HTTPListen = "127.0.0.1:0"
		o.HTTPTLS = true
	})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: f.clientConfig()}}
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "https://"+b.HTTPAddr().String()+"/api/overview", nil)
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS)
	require.Equal(t, "server-1", resp.TLS.PeerCertificates[0].Subject.CommonName)

	// After a reload HTTPS presents the new certificate too.
	f.writeServerCert(t, "server-2")
	require.NoError(t, b.ReloadTLS())
	client.CloseIdleConnections()
	req2, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, "https://"+b.HTTPAddr().String()+"/api/overview", nil)
	require.NoError(t, err)
	req2.SetBasicAuth("guest", "guest")
	resp2, err := client.Do(req2)
	require.NoError(t, err)
	defer resp2.Body.Close()
	require.Equal(t, "server-2", resp2.TLS.PeerCertificates[0].Subject.CommonName)

	// Plain HTTP on the HTTPS port gets no API answer.
	plain := &http.Client{Timeout: 10 * time.Second}
	resp3, err := plain.Get("http://" + b.HTTPAddr().String() + "/api/overview")
	if err == nil {
		resp3.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp3.StatusCode)
	}
}

// max-connections counts the plain and the TLS listener together.
func TestTLSConnectionLimitSharedWithPlain(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, "", f.options, func(o *epitaph.Options) { o.MaxConnections = 1 })
	dial(t, b, nil)
	c, err := dialTLS(t, b, f.clientConfig(), amqp.SASLTypeAnonymous(), "")
	requireLimitRefusal(t, sessionErr(t, c, err), "1")
}

// The plain listener can be turned off: only amqps then.
func TestTLSOnlyListener(t *testing.T) {
	f := newTLSFixture(t)
	b := startBroker(t, "", f.options, func(o *epitaph.Options) { o.Listen = "" })
	require.Nil(t, b.Addr())
	c, err := dialTLS(t, b, f.clientConfig(), amqp.SASLTypeAnonymous(), "")
	require.NoError(t, err)
	tlsRoundTrip(t, c, "only")

	noListener := testOptions()
	noListener.Listen = ""
	_, err = epitaph.Start(noListener)
	require.ErrorIs(t, err, epitaph.ErrInvalidOptions, "no listener at all")
}

// On a plain listener, PLAIN is neither offered nor accepted from a
// non-loopback address by default (the password would cross the network
// in the clear); plain-without-tls=all allows it; over TLS it always is.
func TestPlainRefusedWithoutTLSOffLoopback(t *testing.T) {
	ip := nonLoopbackIPv4(t)
	if ip == nil {
		t.Fatal("this test needs a non-loopback IPv4 address on the machine; " +
			"TestPlainRefusedForNonLoopbackPeer covers the decision without one")
	}
	defs := `{"users":[{"name":"app","password":"secret","tags":[]}],
		"permissions":[{"user":"app","vhost":"/","configure":".*","write":".*","read":".*"}]}`
	f := newTLSFixture(t)
	listenHere := func(o *epitaph.Options) {
		o.Listen = net.JoinHostPort(ip.String(), "0")
		o.TLSListen = net.JoinHostPort(ip.String(), "0")
	}
	b := startBroker(t, defs, f.options, listenHere)
	plainURL := "amqp://" + b.Addr().String()

	require.Empty(t, saslMechanisms(t, b.Addr().String(), nil), "nothing to offer: no PLAIN, ANONYMOUS is loopback-only")
	_, err := amqp.Dial(ctxT(t), plainURL, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("app", "secret")})
	require.Error(t, err, "PLAIN over a plain non-loopback connection")

	// Over TLS from the same address PLAIN works.
	cfg := f.clientConfig()
	cfg.ServerName = "" // the certificate names localhost and 127.0.0.1
	cfg.InsecureSkipVerify = true
	c, err := amqp.Dial(ctxT(t), "amqps://"+b.TLSAddr().String(), &amqp.ConnOptions{TLSConfig: cfg,
		SASLType: amqp.SASLTypePlain("app", "secret")})
	require.NoError(t, err)
	tlsRoundTrip(t, c, "tls-plain")
	require.NoError(t, c.Close())

	// From loopback, PLAIN without TLS still works.
	lb := startBroker(t, defs, func(o *epitaph.Options) { o.AutoCreateQueues = true })
	c, err = amqp.Dial(ctxT(t), "amqp://"+lb.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("app", "secret")})
	require.NoError(t, err)
	require.NoError(t, c.Close())

	// plain-without-tls=all: accepted off loopback.
	all := startBroker(t, defs, func(o *epitaph.Options) {
		o.Listen = net.JoinHostPort(ip.String(), "0")
		o.PlainWithoutTLS = "all"
		o.AutoCreateQueues = true
	})
	require.Equal(t, []amqp10.Symbol{"PLAIN"}, saslMechanisms(t, all.Addr().String(), nil))
	c, err = amqp.Dial(ctxT(t), "amqp://"+all.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("app", "secret")})
	require.NoError(t, err)
	tlsRoundTrip(t, c, "plain-all")
}

// The official RabbitMQ AMQP Go client's TLS specs (its
// amqp_connection_test.go, "TLS connection should success in different
// vhosts"), done here with that client against epitaph: a server
// certificate for localhost, a client certificate whose subject is
// CN=localhost, O=client, a broker set up like the client's CI (the user
// "O=client,CN=localhost" as RabbitMQ's default distinguished_name login
// names it, vhosts "/" and "tls", verify_peer without
// fail_if_no_peer_cert), and amqps://localhost:PORT/{vhost} with
// EXTERNAL and ANONYMOUS.
func TestTLSOfficialClient(t *testing.T) {
	f := newTLSFixture(t)
	defs := `{"vhosts":[{"name":"/"},{"name":"tls"}],
		"users":[{"name":"guest","password":"guest","tags":["administrator"]},
			{"name":"O=client,CN=localhost","tags":["administrator"]}],
		"permissions":[
			{"user":"O=client,CN=localhost","vhost":"/","configure":".*","write":".*","read":".*"},
			{"user":"O=client,CN=localhost","vhost":"tls","configure":".*","write":".*","read":".*"},
			{"user":"guest","vhost":"/","configure":".*","write":".*","read":".*"},
			{"user":"guest","vhost":"tls","configure":".*","write":".*","read":".*"}]}`
	b := startBroker(t, defs, f.options)
	_, port, err := net.SplitHostPort(b.TLSAddr().String())
	require.NoError(t, err)
	// The client CI's certificate subject, in the same RDN order.
	_, _, client := f.ca.issue(t, leafSpec{client: true, dns: []string{"localhost"}, rawSubject: pkix.RDNSequence{
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "localhost"}},
		{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: "client"}},
	}})

	for _, tc := range []struct {
		name  string
		vhost string
		sasl  amqp.SASLType
	}{
		{"default virtual host + External", "%2F", amqp.SASLTypeExternal("")},
		{"non-default virtual host + External", "tls", amqp.SASLTypeExternal("")},
		{"default virtual host + Anonymous", "%2F", amqp.SASLTypeAnonymous()},
		{"non-default virtual host + Anonymous", "tls", amqp.SASLTypeAnonymous()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{Certificates: []tls.Certificate{client}, RootCAs: f.ca.pool(), ServerName: "localhost"}
			conn, err := rmq.Dial(ctxT(t), "amqps://localhost:"+port+"/"+tc.vhost, &rmq.AmqpConnOptions{
				SASLType: tc.sasl, TLSConfig: cfg})
			require.NoError(t, err)
			require.NotNil(t, conn)
			// Beyond the spec: the connection works (management and a
			// message), so a refusal after open cannot pass unnoticed.
			q := "tls-official-" + tc.vhost
			_, err = conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: q})
			require.NoError(t, err)
			pub, err := conn.NewPublisher(ctxT(t), &rmq.QueueAddress{Queue: q}, nil)
			require.NoError(t, err)
			res, err := pub.Publish(ctxT(t), rmq.NewMessage([]byte("hello")))
			require.NoError(t, err)
			require.IsType(t, &rmq.StateAccepted{}, res.Outcome)
			require.NoError(t, conn.Management().DeleteQueue(ctxT(t), q))
			require.NoError(t, conn.Close(ctxT(t)))
		})
	}

	// The spec's failing case: an unresolvable host.
	_, err = rmq.Dial(ctxT(t), "amqps://does_not_exist:"+port, &rmq.AmqpConnOptions{TLSConfig: &tls.Config{}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "failed to open TLS connection")
}

// cmd/epitaph reloads the TLS certificate on SIGHUP: new handshakes get the
// new certificate, an open connection keeps working, a broken file leaves
// the old certificate in place and the broker running.
func TestCmdTLSReloadOnSIGHUP(t *testing.T) {
	f := newTLSFixture(t)
	p := startEpitaph(t, "--listen", "127.0.0.1:0", "--in-memory", "--http-listen", "",
		"--auto-create-queues", "--tls-listen", "127.0.0.1:0",
		"--tls-cert-file", f.certFile, "--tls-key-file", f.keyFile)
	var tlsAddr string
	select {
	case line := <-p.lines:
		var ok bool
		tlsAddr, ok = strings.CutPrefix(line, "amqps listening on ")
		require.True(t, ok, "second stdout line %q", line)
	case <-time.After(startTimeout):
		t.Fatal("no amqps listening line")
	}
	require.Equal(t, "server-1", serverCN(t, tlsAddr, f))
	c, err := amqp.Dial(ctxT(t), "amqps://"+tlsAddr, &amqp.ConnOptions{TLSConfig: f.clientConfig(),
		SASLType: amqp.SASLTypeAnonymous()})
	require.NoError(t, err)
	defer c.Close()

	f.writeServerCert(t, "server-2")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	deadline := time.Now().Add(startTimeout)
	for serverCN(t, tlsAddr, f) != "server-2" {
		require.True(t, time.Now().Before(deadline), "the certificate was not reloaded after SIGHUP")
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	tlsRoundTrip(t, c, "sighup")

	require.NoError(t, os.WriteFile(f.keyFile, []byte("broken"), 0o600))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	for !strings.Contains(p.stderr.String(), "TLS certificate not reloaded") {
		require.True(t, time.Now().Before(deadline), "no log line for the failed reload")
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	require.Equal(t, "server-2", serverCN(t, tlsAddr, f))
	tlsRoundTrip(t, c, "sighup-2")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t))
}

// remoteAddrListener hands out connections whose RemoteAddr claims a
// non-loopback peer, so the broker's real handshake code decides as it
// would for a remote client on a machine without a second address.
type remoteAddrListener struct {
	net.Listener
	remote net.Addr
}

type remoteAddrConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteAddrConn) RemoteAddr() net.Addr { return c.remote }

func (l remoteAddrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteAddrConn{Conn: c, remote: l.remote}, nil
}

// The PLAIN decision through link.Server's real accept and handshake path,
// with connections whose peer address is 192.0.2.77 (TEST-NET-1): PLAIN is
// neither offered nor accepted by default, and is with plain-without-tls=all.
func TestPlainRefusedForNonLoopbackPeer(t *testing.T) {
	rt := router.New(router.Options{})
	defer rt.Close()
	users := auth.New(rt)
	require.NoError(t, rt.LoadDefinitions([]byte(`{"users":[{"name":"app","password":"secret","tags":[]}],
		"permissions":[{"user":"app","vhost":"/","configure":".*","write":".*","read":".*"}]}`)))
	remote := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 77), Port: 40000}
	for _, tc := range []struct {
		policy string
		mechs  []amqp10.Symbol
		ok     bool
	}{
		{"", nil, false},
		{link.PlainWithoutTLSLoopback, nil, false},
		{link.PlainWithoutTLSAll, []amqp10.Symbol{"PLAIN"}, true},
	} {
		t.Run("policy="+tc.policy, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			settings := config.Default().AMQP
			if tc.policy != "" { // "": the default
				settings.PlainWithoutTLS = tc.policy
			}
			srv := link.NewServer(link.Options{AMQP: settings, Router: rt, Auth: users})
			served := make(chan error, 1)
			go func() { served <- srv.Serve(remoteAddrListener{Listener: ln, remote: remote}) }() // exits when ln closes
			defer func() {
				require.NoError(t, ln.Close())
				require.NoError(t, srv.Shutdown(ctxT(t)))
				require.ErrorIs(t, <-served, link.ErrServerClosed)
			}()

			if mechs := saslMechanisms(t, ln.Addr().String(), nil); tc.mechs == nil {
				require.Empty(t, mechs, "nothing to offer: no PLAIN, ANONYMOUS is loopback-only")
			} else {
				require.Equal(t, tc.mechs, mechs)
			}
			c, err := amqp.Dial(ctxT(t), "amqp://"+ln.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("app", "secret")})
			if !tc.ok {
				require.Error(t, err, "PLAIN accepted from a non-loopback peer without TLS")
				return
			}
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
}

// Close does not wait out the TLS handshake time-out of a client that is
// silent in its handshake: the handshake is abandoned at shutdown.
func TestTLSShutdownDuringHandshake(t *testing.T) {
	f := newTLSFixture(t)
	opts := testOptions()
	opts.MaxConnections = 1
	opts.TLSListen, opts.TLSCertFile, opts.TLSKeyFile = "127.0.0.1:0", f.certFile, f.keyFile
	opts.TLSHandshakeTimeout, opts.ShutdownTimeout = time.Minute, 30*time.Second
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = b.Close()
		}
	})
	silent, err := net.Dial("tcp", b.TLSAddr().String())
	require.NoError(t, err)
	defer silent.Close()
	// The silent connection holds the only connection slot once the broker
	// has accepted it: poll until a plain connection is refused for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _, err := connectSession(ctxT(t), "amqp://"+b.Addr().String())
		if err != nil {
			requireLimitRefusal(t, err, "1")
			break
		}
		require.NoError(t, c.Close())
		require.True(t, time.Now().Before(deadline), "the silent TLS connection was never accepted")
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	start := time.Now()
	closed = true
	require.NoError(t, b.Close())
	require.Less(t, time.Since(start), 5*time.Second, "Close waited for the handshake time-out")
}

// Inconsistent TLS options are refused at start.
func TestTLSInvalidOptions(t *testing.T) {
	f := newTLSFixture(t)
	base := testOptions()
	withCert := base
	withCert.TLSListen, withCert.TLSCertFile, withCert.TLSKeyFile = "127.0.0.1:0", f.certFile, f.keyFile
	for name, mod := range map[string]func(o *epitaph.Options){
		"tls-listen without a certificate": func(o *epitaph.Options) { o.TLSListen = "127.0.0.1:0" },
		"https without a certificate":      func(o *epitaph.Options) { o.HTTPTLS = true },
		"key without certificate":          func(o *epitaph.Options) { o.TLSKeyFile = f.keyFile },
		"plain-without-tls value":          func(o *epitaph.Options) { o.PlainWithoutTLS = "none" },
		"verify without CA": func(o *epitaph.Options) {
			*o = withCert
			o.TLSVerifyPeer = true
		},
		"fail-if-no-peer-cert without verify": func(o *epitaph.Options) {
			*o = withCert
			o.TLSCAFile, o.TLSFailIfNoPeerCert = f.caFile, true
		},
		"certificate login source": func(o *epitaph.Options) {
			*o = withCert
			o.SSLCertLoginFrom = "serial_number"
		},
		"key does not match": func(o *epitaph.Options) {
			*o = withCert
			o.TLSKeyFile = f.caFile
		},
	} {
		o := base
		mod(&o)
		b, err := epitaph.Start(o)
		if err == nil {
			_ = b.Close()
		}
		require.ErrorIs(t, err, epitaph.ErrInvalidOptions, name)
	}
}
