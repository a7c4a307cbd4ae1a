package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/epitaph-mq/epitaph/router"
)

// Token errors. Each refusal of a token wraps ErrTokenRefused and one of
// the others, so a log says which check failed while the client is told
// only that authentication failed.
var (
	ErrTokenRefused   = errors.New("auth: token refused")
	ErrOAuthOff       = errors.New("auth: OAuth 2 is not configured")
	ErrTokenMalformed = errors.New("auth: malformed token")
	ErrTokenSignature = errors.New("auth: token signature invalid")
	ErrTokenKey       = errors.New("auth: no signing key for token")
	ErrTokenExpired   = errors.New("auth: token expired or not yet valid")
	ErrTokenAudience  = errors.New("auth: token audience does not name the resource server")
	ErrTokenScopes    = errors.New("auth: token has too many scopes")
	ErrTokenUser      = errors.New("auth: refreshed token names another user")
)

// OAuthConfig configures token validation (RabbitMQ's
// rabbitmq_auth_backend_oauth2 with one resource server).
type OAuthConfig struct {
	// ResourceServerID is the audience a token must name (when VerifyAud)
	// and, followed by ".", the prefix of the scopes that apply here.
	ResourceServerID string
	// JWKSFile is a JSON Web Key Set file of signing keys ("" for none).
	JWKSFile string
	// JWKSURL is fetched for signing keys at start and again, at most
	// once per JWKSRefetch, when a token names a key not yet known.
	JWKSURL string
	// SigningKeyFile holds an HS256 secret, base64-encoded as a JWK's "k";
	// it verifies tokens without a "kid" ("" for none).
	SigningKeyFile string
	// ExtraScopesField names more claims holding scopes, space-separated,
	// each a dot-separated path (RabbitMQ's additional_scopes_key).
	ExtraScopesField string
	// VerifyAud requires the token's aud to name ResourceServerID.
	VerifyAud bool
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway time.Duration
	// MaxScopes refuses tokens with more scopes (0: no limit).
	MaxScopes int
	// HTTPClient fetches JWKSURL; nil uses a client with a 10 s time-out.
	HTTPClient *http.Client
}

// Enabled reports whether c configures OAuth 2 at all.
func (c OAuthConfig) Enabled() bool { return c.ResourceServerID != "" }

// jwksRefetch is the least time between two fetches of the key set URL,
// so that tokens naming unknown keys cannot make the broker hammer it.
const jwksRefetch = 30 * time.Second

// validMethods are the signing algorithms accepted; "none" is not one.
var validMethods = []string{"RS256", "ES256", "HS256"}

// TokenValidator checks JWTs against the configured signing keys. It is
// safe for concurrent use.
type TokenValidator struct {
	cfg    OAuthConfig
	client *http.Client
	secret []byte // the static HS256 key; nil when none

	// fetching serializes fetches of the URL; mu guards the keys, and is
	// not held while fetching, so that known keys verify meanwhile.
	fetching  sync.Mutex
	mu        sync.Mutex
	keys      map[string]any // by kid: *rsa.PublicKey, *ecdsa.PublicKey or []byte
	fileKeys  map[string]any
	lastFetch time.Time
	now       func() time.Time
}

// NewTokenValidator loads the configured keys. A JWKS URL that cannot be
// fetched now is not an error: it is fetched again when a token needs it.
func NewTokenValidator(cfg OAuthConfig) (*TokenValidator, error) {
	if !cfg.Enabled() {
		return nil, ErrOAuthOff
	}
	v := &TokenValidator{cfg: cfg, client: cfg.HTTPClient, now: time.Now, keys: map[string]any{}}
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.SigningKeyFile != "" {
		raw, err := os.ReadFile(cfg.SigningKeyFile)
		if err != nil {
			return nil, fmt.Errorf("auth: oauth signing key: %w", err)
		}
		if v.secret, err = decodeB64(strings.TrimSpace(string(raw))); err != nil || len(v.secret) == 0 {
			return nil, fmt.Errorf("auth: oauth signing key %s: not base64: %v", cfg.SigningKeyFile, err)
		}
	}
	if cfg.JWKSFile != "" {
		raw, err := os.ReadFile(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("auth: oauth jwks file: %w", err)
		}
		if v.fileKeys, err = ParseJWKS(raw); err != nil {
			return nil, fmt.Errorf("auth: oauth jwks file %s: %w", cfg.JWKSFile, err)
		}
	}
	if v.secret == nil && cfg.JWKSFile == "" && cfg.JWKSURL == "" {
		return nil, errors.New("auth: oauth: no signing keys configured (a JWKS file or URL, or a signing key)")
	}
	if cfg.JWKSURL != "" {
		_ = v.refetch(context.Background()) // a failure here is retried per token
	}
	return v, nil
}

// refetch loads the key set from the URL, at most once per jwksRefetch.
// Called with v.mu unlocked.
func (v *TokenValidator) refetch(ctx context.Context) error {
	v.fetching.Lock()
	defer v.fetching.Unlock()
	v.mu.Lock()
	recent := !v.lastFetch.IsZero() && v.now().Sub(v.lastFetch) < jwksRefetch
	if !recent {
		v.lastFetch = v.now()
	}
	v.mu.Unlock()
	if recent {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return fmt.Errorf("auth: jwks url: %w", err)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("auth: jwks url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("auth: jwks url: status %s", resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("auth: jwks url: %w", err)
	}
	keys, err := ParseJWKS(raw)
	if err != nil {
		return fmt.Errorf("auth: jwks url: %w", err)
	}
	v.mu.Lock()
	v.keys = keys
	v.mu.Unlock()
	return nil
}

// key finds the key a token's header names: by kid in the JWKS file, then
// the JWKS URL (fetched again for an unknown kid); without a kid, the
// static signing key, or the only key there is.
func (v *TokenValidator) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		if v.secret != nil {
			return v.secret, nil
		}
		v.mu.Lock()
		all := len(v.fileKeys) + len(v.keys)
		var only any
		for _, k := range v.fileKeys {
			only = k
		}
		for _, k := range v.keys {
			only = k
		}
		v.mu.Unlock()
		if all == 1 {
			return only, nil
		}
		return nil, fmt.Errorf("%w: no kid and no default key", ErrTokenKey)
	}
	lookup := func() (any, bool) {
		v.mu.Lock()
		defer v.mu.Unlock()
		if k, ok := v.fileKeys[kid]; ok {
			return k, true
		}
		k, ok := v.keys[kid]
		return k, ok
	}
	if k, ok := lookup(); ok {
		return k, nil
	}
	if v.cfg.JWKSURL != "" {
		if err := v.refetch(context.Background()); err != nil {
			return nil, fmt.Errorf("%w: kid %q: %w", ErrTokenKey, kid, err)
		}
		if k, ok := lookup(); ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: kid %q", ErrTokenKey, kid)
}

// Validate checks a token's signature, exp and nbf (with the leeway), and
// audience, and reads its scopes. A refusal wraps ErrTokenRefused and the
// reason (ErrTokenSignature, ErrTokenExpired, ...).
func (v *TokenValidator) Validate(raw string) (*Token, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, v.key,
		jwt.WithValidMethods(validMethods),
		jwt.WithLeeway(v.cfg.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(v.now))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenRefused, classify(err))
	}
	if v.cfg.VerifyAud && !audienceHas(claims["aud"], v.cfg.ResourceServerID) {
		return nil, fmt.Errorf("%w: %w: %v", ErrTokenRefused, ErrTokenAudience, claims["aud"])
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return nil, fmt.Errorf("%w: %w: bad exp", ErrTokenRefused, ErrTokenMalformed)
	}
	scopes := v.scopes(claims)
	if v.cfg.MaxScopes > 0 && len(scopes) > v.cfg.MaxScopes {
		return nil, fmt.Errorf("%w: %w: %d > %d", ErrTokenRefused, ErrTokenScopes, len(scopes), v.cfg.MaxScopes)
	}
	return newToken(usernameFrom(claims), exp.Add(v.cfg.Leeway), scopes), nil
}

// classify maps the JWT library's errors to ours.
func classify(err error) error {
	switch {
	case errors.Is(err, ErrTokenKey):
		return err
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenNotValidYet),
		errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return fmt.Errorf("%w: %w", ErrTokenExpired, err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return fmt.Errorf("%w: %w", ErrTokenSignature, err)
	}
	return fmt.Errorf("%w: %w", ErrTokenMalformed, err)
}

// audienceHas reports whether aud (a string or a list of them) names id.
func audienceHas(aud any, id string) bool {
	switch a := aud.(type) {
	case string:
		return a == id
	case []any:
		return slices.ContainsFunc(a, func(e any) bool { s, _ := e.(string); return s == id })
	}
	return false
}

// usernameFrom is RabbitMQ's default preferred_username_claims: sub, then
// client_id, else "unknown".
func usernameFrom(claims jwt.MapClaims) string {
	for _, c := range []string{"sub", "client_id"} {
		if s, ok := claims[c].(string); ok {
			return s
		}
	}
	return "unknown"
}

// scopes collects the token's scopes as RabbitMQ's normalize_token_scope
// does: the scope claim (a string split on spaces, or a list), plus the
// extra scope claims, then only those with the resource server's prefix,
// without it, sorted and without duplicates.
func (v *TokenValidator) scopes(claims jwt.MapClaims) []string {
	all := scopeList(claims["scope"], "")
	for path := range strings.SplitSeq(v.cfg.ExtraScopesField, " ") {
		if path == "" {
			continue
		}
		all = append(all, v.extraScopes(claims, strings.Split(path, "."))...)
	}
	return FilterScopes(all, v.cfg.ResourceServerID+".")
}

// extraScopes reads the scopes at a dot-separated claim path. A map value
// holds scopes keyed by resource server id, which are then prefixed.
func (v *TokenValidator) extraScopes(claims map[string]any, path []string) []string {
	var cur any = claims
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[p]; !ok {
			return nil
		}
	}
	if m, ok := cur.(map[string]any); ok {
		return scopeList(m[v.cfg.ResourceServerID], v.cfg.ResourceServerID+".")
	}
	return scopeList(cur, "")
}

// scopeList reads a scope claim value: a space-separated string or a list
// of strings; each gets prefix.
func scopeList(v any, prefix string) []string {
	var out []string
	switch s := v.(type) {
	case string:
		for _, f := range splitScopes(s) {
			out = append(out, prefix+f)
		}
	case []any:
		for _, e := range s {
			if str, ok := e.(string); ok {
				out = append(out, prefix+str)
			}
		}
	}
	return out
}

// FilterScopes keeps the scopes that start with prefix, without it, sorted
// and without duplicates (RabbitMQ's filter_matching_scope_prefix_and_drop_it
// and filter_duplicates).
func FilterScopes(scopes []string, prefix string) []string {
	var out []string
	for _, s := range scopes {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Token is a validated token's identity and grants. It is not stored: the
// connection (or HTTP request) that presented it holds it, and a refresh
// replaces it.
type Token struct {
	// User is the token's user name (sub, else client_id, else "unknown").
	User string
	// Expiry is exp plus the leeway: when the connection is closed.
	Expiry time.Time
	// Scopes are the token's scopes without the resource server's prefix.
	Scopes []string
	// Tags are the user tags granted by "tag:" scopes.
	Tags   []string
	grants []scopeGrant
}

func newToken(user string, expiry time.Time, scopes []string) *Token {
	t := &Token{User: user, Expiry: expiry, Scopes: scopes}
	for _, s := range scopes {
		if tag, ok := strings.CutPrefix(s, "tag:"); ok {
			t.Tags = append(t.Tags, tag)
			continue
		}
		if g, ok := parseScope(s); ok {
			t.grants = append(t.grants, g)
		}
	}
	return t
}

// NewTokenForScopes is a Token with the given unprefixed scopes (for tests
// of the permission rules and for callers that decoded a token elsewhere).
func NewTokenForScopes(user string, expiry time.Time, scopes []string) *Token {
	return newToken(user, expiry, scopes)
}

// ExpiresIn is how long a connection holding t may stay open from now, as
// RabbitMQ 4.3's readers time it: the expiry minus now, both in whole
// seconds since the epoch (a token expiring at the next second keeps its
// connection a whole second), never less than the time left to the
// expiry (a fractional exp, or leeway, is not cut short).
func (t *Token) ExpiresIn(now time.Time) time.Duration {
	wait := time.Duration(t.Expiry.Unix()-now.Unix()) * time.Second
	return max(wait, t.Expiry.Sub(now))
}

// HasTag reports whether a tag scope grants tag.
func (t *Token) HasTag(tag string) bool { return slices.Contains(t.Tags, tag) }

// CanAccessVHost is RabbitMQ's vhost_access for tokens: some permission
// scope's vhost pattern matches vhost.
func (t *Token) CanAccessVHost(vhost string) bool {
	return slices.ContainsFunc(t.grants, func(g scopeGrant) bool { return wildcardMatch(vhost, g.vhost) })
}

// GrantsRead is Registry.GrantsRead for a token: some read scope's vhost
// pattern matches vhost.
func (t *Token) GrantsRead(vhost string) bool {
	return slices.ContainsFunc(t.grants, func(g scopeGrant) bool { return g.access == Read && wildcardMatch(vhost, g.vhost) })
}

// Authorize is Registry.Authorize for a token's scopes (RabbitMQ's
// resource_access): a scope of access a whose vhost and name patterns
// match. A refusal wraps router.ErrAccessRefused.
func (t *Token) Authorize(vhost, kind, name string, a Access) error {
	if kind == ResourceExchange && name == "" {
		name = "amq.default"
	}
	for _, g := range t.grants {
		if g.access == a && wildcardMatch(vhost, g.vhost) && wildcardMatch(name, g.name) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s access to %s '%s' in vhost '%s' refused for user '%s'",
		router.ErrAccessRefused, a, kind, name, vhost, t.User)
}

// SameUser reports whether a refreshed token may replace t: RabbitMQ
// refuses to change the user name on a refresh.
func (t *Token) SameUser(next *Token) error {
	if t.User != next.User {
		return fmt.Errorf("%w: %w: '%s' after '%s'", ErrTokenRefused, ErrTokenUser, next.User, t.User)
	}
	return nil
}

// jwk is one JSON Web Key (RFC 7517) of the kinds a signing key can be.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	K   string `json:"k"`
}

// ParseJWKS reads a JSON Web Key Set's RSA, P-256 EC and symmetric keys by
// kid. Keys for encryption ("use": "enc") and of other kinds are skipped;
// a malformed signing key is an error.
func ParseJWKS(raw []byte) (map[string]any, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	keys := map[string]any{}
	for i, k := range set.Keys {
		if k.Use == "enc" {
			continue
		}
		key, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("jwks: key %d (kid %q): %w", i, k.Kid, err)
		}
		if key != nil {
			keys[k.Kid] = key
		}
	}
	return keys, nil
}

func (k jwk) publicKey() (any, error) {
	switch k.Kty {
	case "RSA":
		n, err := decodeB64(k.N)
		if err != nil || len(n) == 0 {
			return nil, fmt.Errorf("bad n: %v", err)
		}
		e, err := decodeB64(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("bad e: %v", err)
		}
		exp := int(new(big.Int).SetBytes(e).Int64())
		if exp < 3 || exp%2 == 0 {
			return nil, fmt.Errorf("bad e: %d", exp)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, nil
	case "EC":
		if k.Crv != "P-256" {
			return nil, nil // not an ES256 key
		}
		x, err := decodeB64(k.X)
		if err != nil || len(x) != 32 {
			return nil, fmt.Errorf("bad x: %v", err)
		}
		y, err := decodeB64(k.Y)
		if err != nil || len(y) != 32 {
			return nil, fmt.Errorf("bad y: %v", err)
		}
		pk, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, err
		}
		return pk, nil
	case "oct":
		secret, err := decodeB64(k.K)
		if err != nil || len(secret) == 0 {
			return nil, fmt.Errorf("bad k: %v", err)
		}
		return secret, nil
	}
	return nil, nil
}

// decodeB64 decodes base64url (RFC 7515) or standard base64, padded or not.
func decodeB64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "+/") {
		return base64.RawStdEncoding.DecodeString(s)
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// SetTokenValidator makes r accept OAuth 2 tokens (nil: none).
func (r *Registry) SetTokenValidator(v *TokenValidator) { r.tokens.Store(v) }

// OAuthEnabled reports whether r accepts tokens.
func (r *Registry) OAuthEnabled() bool { return r.tokens.Load() != nil }

// AuthenticateToken validates a token given as a password. It wraps
// ErrOAuthOff when no validator is set, else Validate's refusals.
func (r *Registry) AuthenticateToken(raw string) (*Token, error) {
	v := r.tokens.Load()
	if v == nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenRefused, ErrOAuthOff)
	}
	return v.Validate(raw)
}

// LooksLikeJWT reports whether s has a JWT's shape (three dot-separated
// parts), so that a password is tried as a token first.
func LooksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 }
