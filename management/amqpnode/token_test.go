package amqpnode

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/auth"
)

// tokenOwner stands for a connection that logged in with a token: the
// node reads its permissions and hands it refreshed tokens.
type tokenOwner struct {
	tok       *auth.Token
	refreshed []string
}

func (o *tokenOwner) AuthToken() *auth.Token { return o.tok }

func (o *tokenOwner) RefreshToken(raw string) error {
	o.refreshed = append(o.refreshed, raw)
	return nil
}

func TestTokenConnectionPermissionsAndRefresh(t *testing.T) {
	e := newTestEnv(t)
	key := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(key, []byte("c2VjcmV0"), 0o600))
	v, err := auth.NewTokenValidator(auth.OAuthConfig{ResourceServerID: "rabbitmq", SigningKeyFile: key})
	require.NoError(t, err)
	e.users.SetTokenValidator(v)

	owner := &tokenOwner{tok: auth.NewTokenForScopes("alice", time.Now().Add(time.Hour), []string{"configure:*/mine-*"})}
	do := func(method, path string, body any) testResp {
		return decodeTestResp(t, e.node.Request(owner, "alice", e.vh, testRequest(t, "req-1", method, path, body)))
	}
	// The token's scopes, not the registry (which has no user alice).
	require.Equal(t, "201", do("PUT", "/queues/mine-1", queueBodyMap(nil)).status)
	requireError(t, do("PUT", "/queues/theirs", queueBodyMap(nil)), "403")
	require.Equal(t, "200", do("GET", "/queues/mine-1", nil).status, "any permission scope on the vhost lets it read queues")
	owner.tok = auth.NewTokenForScopes("alice", time.Now().Add(time.Hour), []string{"tag:management"})
	requireError(t, do("GET", "/queues/mine-1", nil), "403") // no vhost access without a permission scope

	r := do("PUT", "/auth/tokens", []byte("new.token.here"))
	assert.Equal(t, "204", r.status)
	assert.Nil(t, r.body)
	assert.Equal(t, []string{"new.token.here"}, owner.refreshed)
	requireError(t, do("PUT", "/auth/tokens", "a string"), "400") // RabbitMQ takes only binary
	requireError(t, do("GET", "/auth/tokens", nil), "405")
	require.Len(t, owner.refreshed, 1)

	// A connection that is not a TokenConnection cannot refresh.
	requireError(t, e.do(t, "PUT", "/auth/tokens", []byte("t.o.k")), "500")
}
