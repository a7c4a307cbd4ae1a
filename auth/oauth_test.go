package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hsSecret is the official Go client's test key (its OAuth2 specs sign with
// the base64-decoded bytes of this string, kid "token-key").
const hsSecretB64 = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"

func hsSecret(t testing.TB) []byte {
	b, err := base64.StdEncoding.DecodeString(hsSecretB64)
	require.NoError(t, err)
	return b
}

func writeFile(t testing.TB, name string, data []byte) string {
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwksJSON encodes keys by kid as a JSON Web Key Set.
func jwksJSON(t testing.TB, keys map[string]any) []byte {
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	for kid, k := range keys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			set.Keys = append(set.Keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig",
				"n": b64u(k.N.Bytes()), "e": b64u(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PublicKey:
			raw, err := k.Bytes()
			require.NoError(t, err)
			set.Keys = append(set.Keys, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256",
				"x": b64u(raw[1:33]), "y": b64u(raw[33:])})
		case []byte:
			set.Keys = append(set.Keys, map[string]string{"kty": "oct", "kid": kid, "alg": "HS256", "k": b64u(k)})
		}
	}
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	return raw
}

func sign(t testing.TB, m jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func claimsFor(exp time.Time, scope any) jwt.MapClaims {
	return jwt.MapClaims{"sub": "alice", "aud": "rabbitmq", "exp": jwt.NewNumericDate(exp), "scope": scope}
}

type testKeys struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	jwk string // the JWKS file: "rsa-1", "ec-1" and "token-key" (oct)
}

func newTestKeys(t testing.TB) testKeys {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	file := writeFile(t, "jwks.json", jwksJSON(t, map[string]any{"rsa-1": &rk.PublicKey, "ec-1": &ek.PublicKey, "token-key": hsSecret(t)}))
	return testKeys{rsa: rk, ec: ek, jwk: file}
}

func TestValidateSignaturesAndKidSelection(t *testing.T) {
	k := newTestKeys(t)
	v, err := NewTokenValidator(OAuthConfig{ResourceServerID: "rabbitmq", JWKSFile: k.jwk, VerifyAud: true, MaxScopes: 2048})
	require.NoError(t, err)
	exp := time.Now().Add(time.Minute)
	scope := []any{"rabbitmq.read:*/*", "rabbitmq.write:vh/q*", "other.configure:*/*", "rabbitmq.tag:administrator"}

	for name, raw := range map[string]string{
		"RS256": sign(t, jwt.SigningMethodRS256, "rsa-1", k.rsa, claimsFor(exp, scope)),
		"ES256": sign(t, jwt.SigningMethodES256, "ec-1", k.ec, claimsFor(exp, scope)),
		"HS256": sign(t, jwt.SigningMethodHS256, "token-key", hsSecret(t), claimsFor(exp, scope)),
	} {
		tok, err := v.Validate(raw)
		require.NoError(t, err, name)
		assert.Equal(t, "alice", tok.User)
		assert.Equal(t, []string{"read:*/*", "tag:administrator", "write:vh/q*"}, tok.Scopes, name)
		assert.True(t, tok.HasTag("administrator"))
		assert.Equal(t, exp.Unix(), tok.Expiry.Unix())
	}

	refused := func(raw string, reason error) {
		t.Helper()
		_, err := v.Validate(raw)
		require.ErrorIs(t, err, ErrTokenRefused)
		require.ErrorIs(t, err, reason)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	refused(sign(t, jwt.SigningMethodRS256, "rsa-1", other, claimsFor(exp, scope)), ErrTokenSignature)
	refused(sign(t, jwt.SigningMethodHS256, "token-key", []byte("wrong"), claimsFor(exp, scope)), ErrTokenSignature)
	refused(sign(t, jwt.SigningMethodRS256, "nope", k.rsa, claimsFor(exp, scope)), ErrTokenKey)
	// a kid naming an RSA key with HS256 (the key confusion attack)
	pub, err := json.Marshal(k.rsa.PublicKey)
	require.NoError(t, err)
	refused(sign(t, jwt.SigningMethodHS256, "rsa-1", pub, claimsFor(exp, scope)), ErrTokenSignature)
	// alg none
	none := sign(t, jwt.SigningMethodNone, "rsa-1", jwt.UnsafeAllowNoneSignatureType, claimsFor(exp, scope))
	refused(none, ErrTokenSignature)
	// HS384 is not accepted
	refused(sign(t, jwt.SigningMethodHS384, "token-key", hsSecret(t), claimsFor(exp, scope)), ErrTokenSignature)
	// no kid, several keys, no static key
	refused(sign(t, jwt.SigningMethodRS256, "", k.rsa, claimsFor(exp, scope)), ErrTokenKey)
	refused("not.a.token", ErrTokenMalformed)
	refused("", ErrTokenMalformed)
}

func TestValidateTimeAndAudience(t *testing.T) {
	key := writeFile(t, "key", []byte(hsSecretB64+"\n"))
	v, err := NewTokenValidator(OAuthConfig{ResourceServerID: "rabbitmq", SigningKeyFile: key, VerifyAud: true, MaxScopes: 3})
	require.NoError(t, err)
	hs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, "", hsSecret(t), c) }
	refused := func(raw string, reason error) {
		t.Helper()
		_, err := v.Validate(raw)
		require.ErrorIs(t, err, ErrTokenRefused)
		require.ErrorIs(t, err, reason)
	}
	now := time.Now()
	_, err = v.Validate(hs(claimsFor(now.Add(time.Minute), "rabbitmq.read:*/*")))
	require.NoError(t, err, "a token without kid, verified with the static key")

	refused(hs(claimsFor(now.Add(-time.Second), "rabbitmq.read:*/*")), ErrTokenExpired)
	noExp := claimsFor(now, "rabbitmq.read:*/*")
	delete(noExp, "exp")
	refused(hs(noExp), ErrTokenExpired) // RabbitMQ: "Provided JWT token has no exp claim"
	nbf := claimsFor(now.Add(time.Minute), "rabbitmq.read:*/*")
	nbf["nbf"] = jwt.NewNumericDate(now.Add(time.Minute))
	refused(hs(nbf), ErrTokenExpired)

	wrongAud := claimsFor(now.Add(time.Minute), "rabbitmq.read:*/*")
	wrongAud["aud"] = "other"
	refused(hs(wrongAud), ErrTokenAudience)
	noAud := claimsFor(now.Add(time.Minute), "rabbitmq.read:*/*")
	delete(noAud, "aud")
	refused(hs(noAud), ErrTokenAudience)
	listAud := claimsFor(now.Add(time.Minute), "rabbitmq.read:*/*")
	listAud["aud"] = []string{"other", "rabbitmq"}
	_, err = v.Validate(hs(listAud))
	require.NoError(t, err)

	refused(hs(claimsFor(now.Add(time.Minute), "rabbitmq.a rabbitmq.b rabbitmq.c rabbitmq.d")), ErrTokenScopes)

	// verify_aud false: any audience, or none
	lax, err := NewTokenValidator(OAuthConfig{ResourceServerID: "rabbitmq", SigningKeyFile: key, Leeway: time.Minute})
	require.NoError(t, err)
	tok, err := lax.Validate(hs(wrongAud))
	require.NoError(t, err)
	assert.Equal(t, []string{"read:*/*"}, tok.Scopes)
	// the leeway admits a token just expired, and moves its expiry
	tok, err = lax.Validate(hs(claimsFor(now.Add(-time.Second), "rabbitmq.read:*/*")))
	require.NoError(t, err)
	assert.True(t, tok.Expiry.After(now))
}

func TestValidateScopeSources(t *testing.T) {
	key := writeFile(t, "key", []byte(hsSecretB64))
	v, err := NewTokenValidator(OAuthConfig{ResourceServerID: "rabbitmq", SigningKeyFile: key, VerifyAud: true,
		ExtraScopesField: "roles realm_access.roles resource_access"})
	require.NoError(t, err)
	c := claimsFor(time.Now().Add(time.Minute), "openid rabbitmq.read:*/*  rabbitmq.read:*/*")
	c["roles"] = []any{"rabbitmq.write:*/*", 7}
	c["realm_access"] = map[string]any{"roles": "rabbitmq.tag:management"}
	c["resource_access"] = map[string]any{"rabbitmq": []any{"configure:vh/*"}, "other": []any{"read:x/y"}}
	tok, err := v.Validate(sign(t, jwt.SigningMethodHS256, "", hsSecret(t), c))
	require.NoError(t, err)
	assert.Equal(t, []string{"configure:vh/*", "read:*/*", "tag:management", "write:*/*"}, tok.Scopes)
	assert.True(t, tok.HasTag("management"))

	delete(c, "sub")
	c["client_id"] = "svc"
	tok, err = v.Validate(sign(t, jwt.SigningMethodHS256, "", hsSecret(t), c))
	require.NoError(t, err)
	assert.Equal(t, "svc", tok.User)
	delete(c, "client_id")
	tok, err = v.Validate(sign(t, jwt.SigningMethodHS256, "", hsSecret(t), c))
	require.NoError(t, err)
	assert.Equal(t, "unknown", tok.User)
}

// A JWKS URL is fetched at start, and again for a kid not yet known (a
// rotated key), at most once per jwksRefetch.
func TestValidateJWKSURLRefetchesForNewKid(t *testing.T) {
	k1, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	k2, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	var set atomic.Value
	set.Store(jwksJSON(t, map[string]any{"k1": &k1.PublicKey}))
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		_, _ = w.Write(set.Load().([]byte))
	}))
	defer srv.Close()

	v, err := NewTokenValidator(OAuthConfig{ResourceServerID: "rabbitmq", JWKSURL: srv.URL, VerifyAud: true})
	require.NoError(t, err)
	clock := time.Now()
	v.now = func() time.Time { return clock }
	require.EqualValues(t, 1, fetches.Load())
	exp := time.Now().Add(time.Hour)
	_, err = v.Validate(sign(t, jwt.SigningMethodES256, "k1", k1, claimsFor(exp, "")))
	require.NoError(t, err)
	_, err = v.Validate(sign(t, jwt.SigningMethodES256, "", k1, claimsFor(exp, "")))
	require.NoError(t, err, "no kid: the only key")

	set.Store(jwksJSON(t, map[string]any{"k1": &k1.PublicKey, "k2": &k2.PublicKey}))
	_, err = v.Validate(sign(t, jwt.SigningMethodES256, "k2", k2, claimsFor(exp, "")))
	require.ErrorIs(t, err, ErrTokenKey, "within jwksRefetch of the last fetch")
	clock = clock.Add(jwksRefetch)
	_, err = v.Validate(sign(t, jwt.SigningMethodES256, "k2", k2, claimsFor(exp, "")))
	require.NoError(t, err)
	require.EqualValues(t, 2, fetches.Load())
}

func TestNewTokenValidatorErrors(t *testing.T) {
	_, err := NewTokenValidator(OAuthConfig{})
	require.ErrorIs(t, err, ErrOAuthOff)
	_, err = NewTokenValidator(OAuthConfig{ResourceServerID: "r"})
	require.Error(t, err, "no key source")
	_, err = NewTokenValidator(OAuthConfig{ResourceServerID: "r", JWKSFile: writeFile(t, "j", []byte(`{"keys":[{"kty":"RSA","kid":"a","n":"!!","e":"AQAB"}]}`))})
	require.Error(t, err)
	_, err = NewTokenValidator(OAuthConfig{ResourceServerID: "r", JWKSFile: writeFile(t, "j", []byte(`{"keys":[{"kty":"EC","crv":"P-256","kid":"a","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}`))})
	require.Error(t, err, "a point not on the curve")
	_, err = NewTokenValidator(OAuthConfig{ResourceServerID: "r", SigningKeyFile: filepath.Join(t.TempDir(), "missing")})
	require.ErrorIs(t, err, os.ErrNotExist)

	reg, _ := newRegistry(t, nil)
	assert.False(t, reg.OAuthEnabled())
	_, err = reg.AuthenticateToken("a.b.c")
	require.ErrorIs(t, err, ErrOAuthOff)
}

// FuzzValidateClaims signs arbitrary claims with the validator's HS256 key,
// so that every payload passes the signature check and reaches our own
// claim handling (audience, scope claim and extra scope paths, prefix
// filter, scope parsing): never a panic, and an accepted token's scopes
// are only those the resource server's prefix selected.
func FuzzValidateClaims(f *testing.F) {
	f.Add([]byte(`{"aud":"rabbitmq","exp":4102444800,"scope":"rabbitmq.read:*/* rabbitmq.tag:x"}`))
	f.Add([]byte(`{"aud":["rabbitmq"],"exp":4102444800,"scope":["rabbitmq.write:%2F/a*b"],"roles":{"rabbitmq":"configure:*/*"}}`))
	f.Add([]byte(`{"aud":"rabbitmq","exp":"soon","realm_access":{"roles":[1,{"a":2}]}}`))
	f.Add([]byte(`{"exp":1e400}`))
	f.Add([]byte(`[]`))
	key := writeFile(f, "key", []byte(hsSecretB64))
	v, err := NewTokenValidator(OAuthConfig{ResourceServerID: "rabbitmq", SigningKeyFile: key, VerifyAud: true,
		ExtraScopesField: "roles realm_access.roles", MaxScopes: 64})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, payload []byte) {
		head := b64u([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + b64u(payload)
		mac := jwt.SigningMethodHS256
		sig, err := mac.Sign(head, hsSecret(t))
		require.NoError(t, err)
		tok, err := v.Validate(head + "." + b64u(sig))
		if err != nil {
			require.ErrorIs(t, err, ErrTokenRefused)
			return
		}
		assert.LessOrEqual(t, len(tok.Scopes), 64)
		for _, s := range tok.Scopes {
			_ = tok.Authorize("/", ResourceQueue, s, Read)
		}
		_ = tok.CanAccessVHost("/")
	})
}
