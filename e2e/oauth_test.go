package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/golang-jwt/jwt/v5"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/config"
)

// OAuth 2 tokens as RabbitMQ's OAuth 2 plugin takes them, driven as the
// official Go client's OAuth2 specs drive RabbitMQ: the token is the SASL
// PLAIN password, PUT /auth/tokens refreshes it, and the connection is
// closed with amqp:unauthorized-access "credential expired" at its exp.

// oauthKeyB64 is the HS256 key of the official client's OAuth2 specs (kid
// "token-key"; the token is signed with its base64-decoded bytes).
const oauthKeyB64 = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"

type oauthBroker struct {
	*epitaph.Broker
	rsa  *rsa.PrivateKey // signs RS256 tokens, kid "rsa-1" in the JWKS file
	jwks string          // the JWKS file
	logs *syncBuffer
}

// startOAuthBroker starts a broker with resource server "rabbitmq", a JWKS
// file holding the official specs' HS256 key and an RSA key, and an HTTP
// listener; failed logins are answered at once.
func startOAuthBroker(t *testing.T) *oauthBroker {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	b64u := base64.RawURLEncoding.EncodeToString
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "oct", "kid": "token-key", "alg": "HS256", "use": "sig", "k": oauthKeyB64},
		{"kty": "RSA", "kid": "rsa-1", "n": b64u(key.N.Bytes()), "e": b64u(big.NewInt(int64(key.E)).Bytes())},
	}})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "jwks.json")
	require.NoError(t, os.WriteFile(file, jwks, 0o600))
	logs := &syncBuffer{}
	b := startBroker(t, "", withHTTP, func(o *epitaph.Options) {
		o.OAuthResourceServerID = "rabbitmq"
		o.OAuthJWKSFile = file
		o.AuthFailureDelay = 0
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return &oauthBroker{Broker: b, rsa: key, jwks: file, logs: logs}
}

// hsToken is the official specs' token: aud rabbitmq, full scopes on every
// vhost, signed HS256 with kid "token-key".
func hsToken(t *testing.T, sub string, exp time.Time, scopes ...string) string {
	t.Helper()
	if scopes == nil {
		scopes = []string{"rabbitmq.configure:*/*", "rabbitmq.write:*/*", "rabbitmq.read:*/*"}
	}
	key, err := base64.StdEncoding.DecodeString(oauthKeyB64)
	require.NoError(t, err)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "unit_test", "aud": "rabbitmq", "sub": sub, "exp": jwt.NewNumericDate(exp), "scope": scopes,
	})
	tok.Header["kid"] = "token-key"
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

// rmqOAuthDial connects the official client with token.
func rmqOAuthDial(t *testing.T, b *oauthBroker, token string) (*rmq.AmqpConnection, error) {
	t.Helper()
	conn, err := rmq.Dial(ctxT(t), "amqp://"+b.Addr().String(), &rmq.AmqpConnOptions{
		OAuth2Options:         &rmq.OAuth2Options{Token: token},
		RecoveryConfiguration: &rmq.RecoveryConfiguration{ActiveRecovery: false},
	})
	if err == nil {
		t.Cleanup(func() {
			if _, closed := conn.State().(*rmq.StateClosed); closed {
				return // the broker closed it
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = conn.Close(ctx)
		})
	}
	return conn, err
}

// awaitClosed waits for the client's connection to close and returns the
// error it was closed with.
func awaitClosed(t *testing.T, ch chan *rmq.StateChanged, within time.Duration) error {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case sc := <-ch:
			if closed, ok := sc.To.(*rmq.StateClosed); ok {
				return closed.GetError()
			}
		case <-deadline:
			t.Fatalf("connection not closed within %v", within)
		}
	}
}

func TestOAuthOfficialClientConnectsWithToken(t *testing.T) {
	b := startOAuthBroker(t)
	conn, err := rmqOAuthDial(t, b, hsToken(t, "alice", time.Now().Add(time.Minute)))
	require.NoError(t, err)
	m := conn.Management()
	_, err = m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "oauth-q"})
	require.NoError(t, err)
	pub, err := conn.NewPublisher(ctxT(t), &rmq.QueueAddress{Queue: "oauth-q"}, nil)
	require.NoError(t, err)
	rmqPublish(t, pub, "hello")
	cons, err := conn.NewConsumer(ctxT(t), "oauth-q", nil)
	require.NoError(t, err)
	dc := rmqReceive(t, cons)
	assert.Equal(t, "hello", rmqBody(dc))
	require.NoError(t, dc.Accept(ctxT(t)))
	require.NoError(t, m.DeleteQueue(ctxT(t), "oauth-q"))

	// An RS256 token from the JWKS file, with any user name.
	rs := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"aud": []string{"rabbitmq"}, "sub": "bob",
		"exp": jwt.NewNumericDate(time.Now().Add(time.Minute)), "scope": "rabbitmq.read:*/*"})
	rs.Header["kid"] = "rsa-1"
	raw, err := rs.SignedString(b.rsa)
	require.NoError(t, err)
	c := dial(t, b.Broker, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("whoever", raw)})
	_ = session(t, c)
}

// A bad token fails SASL like a bad password: the client learns nothing
// of which check failed; the log says. The broker goes on serving.
func TestOAuthBadTokensFailSASL(t *testing.T) {
	b := startOAuthBroker(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"aud": "rabbitmq", "sub": "eve",
		"exp": jwt.NewNumericDate(time.Now().Add(time.Minute)), "scope": "rabbitmq.read:*/*"})
	forged.Header["kid"] = "rsa-1"
	forgedRaw, err := forged.SignedString(other)
	require.NoError(t, err)
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"aud": "rabbitmq", "sub": "eve",
		"exp": jwt.NewNumericDate(time.Now().Add(time.Minute)), "scope": "rabbitmq.read:*/*"})
	noneRaw, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	wrongAud := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"aud": "other", "sub": "eve",
		"exp": jwt.NewNumericDate(time.Now().Add(time.Minute)), "scope": "rabbitmq.read:*/*"})
	wrongAud.Header["kid"] = "rsa-1"
	wrongAudRaw, err := wrongAud.SignedString(b.rsa)
	require.NoError(t, err)

	cases := map[string]struct{ token, logged string }{
		"wrong signature": {forgedRaw, "token signature invalid"},
		"alg none":        {noneRaw, "token signature invalid"},
		"expired":         {hsToken(t, "eve", time.Now().Add(-2*time.Second)), "token expired"},
		"wrong audience":  {wrongAudRaw, "audience"},
		"garbage":         {"eyJ.not.json", "malformed token"},
	}
	for name, c := range cases {
		_, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", c.token)})
		require.Error(t, err, name)
		for _, leak := range []string{"signature", "expired", "audience", "malformed"} {
			assert.NotContains(t, strings.ToLower(err.Error()), leak, "%s: the client is told which check failed", name)
		}
		// logged after the outcome is sent
		eventually(t, "log of "+name, func() bool { return strings.Contains(b.logs.String(), c.logged) })
		_, err = rmqOAuthDial(t, b, c.token)
		require.Error(t, err, "official client: %s", name)
	}
	// The broker still serves a good token.
	_, err = rmqOAuthDial(t, b, hsToken(t, "alice", time.Now().Add(time.Minute)))
	require.NoError(t, err)
}

// Scopes are the connection's permissions: vhost access, read, write and
// configure per name pattern.
func TestOAuthScopesArePermissions(t *testing.T) {
	b := startOAuthBroker(t)
	declareQueue(t, b.Broker, "orders-1", "classic", nil)
	declareQueue(t, b.Broker, "audit", "classic", nil)
	tok := hsToken(t, "carol", time.Now().Add(time.Minute), "rabbitmq.read:%2F/orders-*", "rabbitmq.write:*/amq.default")
	c := dial(t, b.Broker, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", tok)})
	s := session(t, c)
	_ = receiver(t, s, "/queues/orders-1", nil)
	_, err := s.NewReceiver(ctxT(t), "/queues/audit", nil)
	require.Equal(t, amqp.ErrCondUnauthorizedAccess, amqpErr(t, err).Condition)
	_ = sender(t, s, "/queues/audit", nil) // write on the default exchange

	// No scope for vhost "other": the open is refused.
	noVH := hsToken(t, "carol", time.Now().Add(time.Minute), "rabbitmq.read:other/*")
	refused, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", noVH)})
	if err == nil { // the refusal is a close after our open
		_, err = refused.NewSession(ctxT(t), nil)
	}
	var ce *amqp.ConnError
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.RemoteErr)
	assert.Equal(t, amqp.ErrCondUnauthorizedAccess, ce.RemoteErr.Condition)

	// The management node checks the token's configure scopes.
	conn, err := rmqOAuthDial(t, b, hsToken(t, "carol", time.Now().Add(time.Minute), "rabbitmq.configure:*/mine-*"))
	require.NoError(t, err)
	_, err = conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "mine-1"})
	require.NoError(t, err)
	_, err = conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "theirs"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "403")
}

func TestOAuthConnectionClosedAtExpiry(t *testing.T) {
	b := startOAuthBroker(t)
	conn, err := rmqOAuthDial(t, b, hsToken(t, "alice", time.Now().Add(2*time.Second)))
	require.NoError(t, err)
	ch := make(chan *rmq.StateChanged, 4)
	conn.NotifyStatusChange(ch)
	cerr := awaitClosed(t, ch, 10*time.Second)
	require.Error(t, cerr)
	assert.Contains(t, cerr.Error(), "credential expired")

	// go-amqp sees RabbitMQ's condition.
	c := dial(t, b.Broker, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", hsToken(t, "alice", time.Now().Add(2*time.Second)))})
	s := session(t, c)
	declareQueue(t, b.Broker, "q", "classic", nil)
	r := receiver(t, s, "/queues/q", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = r.Receive(ctx, nil)
	var ce *amqp.ConnError
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.RemoteErr)
	assert.Equal(t, amqp.ErrCondUnauthorizedAccess, ce.RemoteErr.Condition)
	assert.Equal(t, "credential expired", ce.RemoteErr.Description)
}

// RabbitMQ 4.3's reader arms the expiry timer for (exp - now) whole
// seconds, now in whole seconds (rabbit_amqp_reader's
// maybe_start_credential_expiry_timer): a token whose exp is the next
// second keeps its connection a full second, not only what is left of the
// current one. The official client's "alive after token refresh" spec
// depends on it: its token's exp is a second away, truncated to whole
// seconds, and it refreshes 100 ms after connecting.
func TestOAuthExpiryTimerCountsWholeSeconds(t *testing.T) {
	b := startOAuthBroker(t)
	declareQueue(t, b.Broker, "q", "classic", nil)
	// Start 0.4 s into a second, so that the next second is 0.6 s away.
	<-time.After(time.Duration((int64(1400*time.Millisecond) - int64(time.Now().Nanosecond())) % int64(time.Second)))
	start := time.Now()
	exp := start.Truncate(time.Second).Add(time.Second)
	c := dial(t, b.Broker, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", hsToken(t, "alice", exp))})
	r := receiver(t, session(t, c), "/queues/q", nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := r.Receive(ctx, nil)
	closedAfter := time.Since(start)
	var ce *amqp.ConnError
	require.ErrorAs(t, err, &ce)
	require.NotNil(t, ce.RemoteErr)
	assert.Equal(t, "credential expired", ce.RemoteErr.Description)
	assert.GreaterOrEqual(t, closedAfter, 900*time.Millisecond,
		"closed %v after the login, at the token's exp; RabbitMQ waits exp minus the login's whole second", closedAfter)
	assert.Less(t, closedAfter, 2*time.Second)
}

func TestOAuthRefreshExtendsAndReplacesPermissions(t *testing.T) {
	b := startOAuthBroker(t)
	first := time.Now().Add(2 * time.Second)
	conn, err := rmqOAuthDial(t, b, hsToken(t, "alice", first))
	require.NoError(t, err)
	ch := make(chan *rmq.StateChanged, 4)
	conn.NotifyStatusChange(ch)
	// The new token allows configure only on "late-*".
	require.NoError(t, conn.RefreshToken(ctxT(t), hsToken(t, "alice", time.Now().Add(time.Hour),
		"rabbitmq.configure:*/late-*", "rabbitmq.read:*/*")))
	_, err = conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "early"})
	require.Error(t, err, "the refreshed token's scopes replace the first's")
	assert.Contains(t, err.Error(), "403")

	// Past the first token's expiry (plus its second of rounding), the
	// connection is still open.
	<-time.After(time.Until(first.Add(1500 * time.Millisecond)))
	_, err = conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "late-1"})
	require.NoError(t, err)
	select {
	case sc := <-ch:
		t.Fatalf("connection changed state after refresh: %v", sc.To)
	default:
	}
}

// A refresh with another user's token (or a bad one) closes the
// connection with amqp:unauthorized-access, as RabbitMQ's reader does.
// refusedOrAnswered accepts what a refused token refresh gives the client:
// the 204 answer (nil), or the connection's close with "credential update
// failed" when the close overtakes the answer in the client.
func refusedOrAnswered(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		require.Contains(t, err.Error(), "credential update failed")
	}
}

func TestOAuthRefreshWithOtherUserCloses(t *testing.T) {
	b := startOAuthBroker(t)
	conn, err := rmqOAuthDial(t, b, hsToken(t, "alice", time.Now().Add(time.Minute)))
	require.NoError(t, err)
	ch := make(chan *rmq.StateChanged, 4)
	conn.NotifyStatusChange(ch)
	// Answered 204, as RabbitMQ does, and then closed: the client may see the
	// close before it has taken the answer.
	refusedOrAnswered(t, conn.RefreshToken(ctxT(t), hsToken(t, "mallory", time.Now().Add(time.Hour))))
	cerr := awaitClosed(t, ch, 10*time.Second)
	require.Error(t, cerr)
	assert.Contains(t, cerr.Error(), "credential update failed")
	eventually(t, "the refusal's log", func() bool {
		return strings.Contains(b.logs.String(), "refreshed token names another user")
	})

	// A connection of a stored user cannot take a token.
	conn2 := rmqConnect(t, b.Broker, "guest", "guest")
	ch2 := make(chan *rmq.StateChanged, 4)
	conn2.NotifyStatusChange(ch2)
	_, err = conn2.Management().Request(ctxT(t), []byte(hsToken(t, "guest", time.Now().Add(time.Hour))), "/auth/tokens", "PUT", []int{204})
	refusedOrAnswered(t, err)
	cerr = awaitClosed(t, ch2, 10*time.Second)
	assert.Contains(t, cerr.Error(), "credential update failed")
}

// The HTTP API takes a token as the basic-auth password or as a bearer
// token; its tag scopes decide what the user may do there.
func TestOAuthHTTPAPIToken(t *testing.T) {
	b := startOAuthBroker(t)
	base := "http://" + b.HTTPAddr().String()
	get := func(path string, set func(*http.Request)) int {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, base+path, nil)
		require.NoError(t, err)
		set(req)
		st, _ := httpDo(t, req)
		return st
	}
	admin := hsToken(t, "root", time.Now().Add(time.Minute), "rabbitmq.tag:administrator", "rabbitmq.read:*/*")
	assert.Equal(t, http.StatusOK, get("/api/users", func(r *http.Request) { r.SetBasicAuth("", admin) }))
	assert.Equal(t, http.StatusOK, get("/api/users", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+admin) }))

	mgmt := hsToken(t, "dev", time.Now().Add(time.Minute), "rabbitmq.tag:management", "rabbitmq.read:%2F/*")
	assert.Equal(t, http.StatusOK, get("/api/queues/%2F", func(r *http.Request) { r.SetBasicAuth("dev", mgmt) }))
	assert.Equal(t, http.StatusForbidden, get("/api/users", func(r *http.Request) { r.SetBasicAuth("dev", mgmt) }))

	noTag := hsToken(t, "app", time.Now().Add(time.Minute))
	assert.Equal(t, http.StatusUnauthorized, get("/api/overview", func(r *http.Request) { r.SetBasicAuth("", noTag) }))
	expired := hsToken(t, "root", time.Now().Add(-2*time.Second), "rabbitmq.tag:administrator")
	assert.Equal(t, http.StatusUnauthorized, get("/api/overview", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+expired) }))
}

// Without oauth-resource-server-id a token is a wrong password.
func TestOAuthOffByDefault(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.AuthFailureDelay = 0 })
	_, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(),
		&amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", hsToken(t, "alice", time.Now().Add(time.Minute)))})
	require.Error(t, err)
}

// A configured key source that cannot be read stops the start.
func TestOAuthStartRefusesMissingKeys(t *testing.T) {
	opts := testOptions()
	opts.OAuthResourceServerID = "rabbitmq"
	opts.OAuthJWKSFile = filepath.Join(t.TempDir(), "missing.json")
	b, err := epitaph.Start(opts)
	if err == nil {
		_ = b.Close()
	}
	require.ErrorIs(t, err, os.ErrNotExist)
}

// As RabbitMQ checks loopback_users on the authenticated name, a token
// naming guest is refused from another host; other names are not.
func TestOAuthGuestTokenOnlyFromLoopback(t *testing.T) {
	ip := nonLoopbackIPv4(t)
	if ip == nil {
		t.Skip("no non-loopback IPv4 interface to connect from")
	}
	b := startOAuthBroker(t)
	remote := startBroker(t, "", func(o *epitaph.Options) {
		o.Listen = net.JoinHostPort(ip.String(), "0")
		o.PlainWithoutTLS = config.PlainWithoutTLSAll
		o.OAuthResourceServerID = "rabbitmq"
		o.OAuthJWKSFile = b.jwks
		o.AuthFailureDelay = 0
	})
	url := "amqp://" + remote.Addr().String()
	_, err := amqp.Dial(ctxT(t), url, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", hsToken(t, "guest", time.Now().Add(time.Minute)))})
	require.Error(t, err)
	c, err := amqp.Dial(ctxT(t), url, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", hsToken(t, "alice", time.Now().Add(time.Minute)))})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// A token user may publish with another user-id only with a tag:impersonator
// scope: a stored user of the same name with the impersonator tag lends the
// token nothing.
func TestOAuthImpersonationNeedsTheTokensTag(t *testing.T) {
	b := startOAuthBroker(t)
	declareQueue(t, b.Broker, "q", "classic", nil)
	require.NoError(t, b.Auth().PutUser(auth.User{Name: "relay", Tags: []string{"impersonator"}}))
	claim := func(id string) *amqp.Message {
		m := msg("as " + id)
		m.Properties = &amqp.MessageProperties{UserID: []byte(id)}
		return m
	}
	full := []string{"rabbitmq.configure:*/*", "rabbitmq.write:*/*", "rabbitmq.read:*/*"}
	asToken := func(scopes ...string) *amqp.Sender {
		c := dial(t, b.Broker, &amqp.ConnOptions{SASLType: amqp.SASLTypePlain("", hsToken(t, "relay", time.Now().Add(time.Minute), scopes...))})
		return sender(t, session(t, c), "/queues/q", nil)
	}

	err := asToken(full...).Send(ctxT(t), claim("admin"), nil)
	var le *amqp.LinkError
	require.ErrorAs(t, err, &le)
	require.NotNil(t, le.RemoteErr, "%v", err)
	require.Equal(t, amqp.ErrCondUnauthorizedAccess, le.RemoteErr.Condition)

	require.IsType(t, &amqp.StateAccepted{}, send(t, asToken(append(full, "rabbitmq.tag:impersonator")...), claim("admin")))
	require.Equal(t, 1, queueLen(t, b.Broker, "q"))
}
