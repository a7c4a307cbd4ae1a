package auth

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/router"
)

func rabbitExport(t *testing.T, aliceHash string) []byte {
	t.Helper()
	doc := fmt.Sprintf(`{
  "rabbit_version": "4.3.0",
  "rabbitmq_version": "4.3.0",
  "users": [
    {"name": "alice", "password_hash": %q, "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"], "limits": {}},
    {"name": "bob", "password": "bobpw", "tags": "management,monitoring"}
  ],
  "vhosts": [
    {"name": "/", "description": "Default virtual host", "tags": [], "metadata": {"description": "", "tags": []}},
    {"name": "prod", "limits": [], "metadata": {}}
  ],
  "permissions": [
    {"user": "alice", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
    {"user": "bob", "vhost": "prod", "configure": "", "write": "^out", "read": ".*"}
  ],
  "topic_permissions": [],
  "queues": [
    {"name": "events", "vhost": "prod", "durable": true, "auto_delete": false, "arguments": {}}
  ]
}`, aliceHash)
	require.True(t, json.Valid([]byte(doc)))
	return []byte(doc)
}

func TestLoadDefinitions(t *testing.T) {
	r, b := newRegistry(t, nil)
	salt := []byte{0x90, 0x8d, 0xc6, 0x0a}
	require.NoError(t, b.LoadDefinitions(rabbitExport(t, rabbitHash(sha256.New(), salt, "alicepw"))))

	assert.True(t, r.Authenticate("alice", "alicepw"))
	assert.False(t, r.Authenticate("alice", "wrong"))
	assert.True(t, r.Authenticate("bob", "bobpw"))
	assert.False(t, r.Authenticate("guest", "guest"))
	bob, ok := r.User("bob")
	require.True(t, ok)
	assert.Equal(t, []string{"management", "monitoring"}, bob.Tags)

	assert.Equal(t, []string{"/", "prod"}, b.VHosts())
	assert.True(t, r.CanAccessVHost("alice", "/"))
	assert.False(t, r.CanAccessVHost("alice", "prod"))
	assert.True(t, r.CanAccessVHost("bob", "prod"))
	p, ok := r.Permission("bob", "prod")
	require.True(t, ok)
	assert.Equal(t, Permission{User: "bob", VHost: "prod", Configure: "", Write: "^out", Read: ".*"}, p)
	// An empty pattern grants nothing, as in RabbitMQ.
	assert.ErrorIs(t, r.Authorize("bob", "prod", ResourceQueue, "q", Configure), router.ErrAccessRefused)
	assert.NoError(t, r.Authorize("bob", "prod", ResourceExchange, "outbox", Write))
	prod, _ := b.VHost("prod")
	_, ok = prod.Queue("events")
	assert.True(t, ok, "the router's sections load too")

	// Loading the same document again is idempotent.
	require.NoError(t, b.LoadDefinitions(rabbitExport(t, rabbitHash(sha256.New(), salt, "alicepw"))))

	// Export and re-import into a fresh broker.
	out, err := b.ExportDefinitions()
	require.NoError(t, err)
	var doc struct {
		Users       []map[string]any `json:"users"`
		Permissions []map[string]any `json:"permissions"`
	}
	require.NoError(t, json.Unmarshal(out, &doc))
	require.Len(t, doc.Users, 2)
	assert.Equal(t, map[string]any{"name": "alice", "password_hash": rabbitHash(sha256.New(), salt, "alicepw"),
		"hashing_algorithm": HashSHA256, "tags": []any{"administrator"}}, doc.Users[0])
	assert.Equal(t, []map[string]any{
		{"user": "alice", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"},
		{"user": "bob", "vhost": "prod", "configure": "", "write": "^out", "read": ".*"},
	}, doc.Permissions)
	r2, b2 := newRegistry(t, nil)
	require.NoError(t, b2.LoadDefinitions(out))
	assert.True(t, r2.Authenticate("alice", "alicepw"))
	assert.True(t, r2.Authenticate("bob", "bobpw"))
	assert.Equal(t, r.Permissions(), r2.Permissions())
}

// The export is RabbitMQ's layout, byte for byte as before users left the
// router: users before vhosts, permissions after them, two-space indent.
func TestExportDefinitionsLayout(t *testing.T) {
	r, b := newRegistry(t, nil)
	h, err := HashPasswordWithSalt(HashSHA256, [4]byte{1, 2, 3, 4}, "pw")
	require.NoError(t, err)
	require.NoError(t, r.PutUser(User{Name: "alice", PasswordHash: h, Tags: []string{"administrator"}}))
	require.NoError(t, r.SetPermission(Permission{User: "alice", VHost: "/", Configure: ".*", Write: "<w>", Read: ""}))
	out, err := b.ExportDefinitions()
	require.NoError(t, err)
	assert.Equal(t, `{
  "rabbit_version": "4.3.0",
  "users": [
    {
      "name": "alice",
      "password_hash": "`+h+`",
      "hashing_algorithm": "rabbit_password_hashing_sha256",
      "tags": [
        "administrator"
      ]
    }
  ],
  "vhosts": [
    {
      "name": "/"
    }
  ],
  "permissions": [
    {
      "user": "alice",
      "vhost": "/",
      "configure": ".*",
      "write": "\u003cw\u003e",
      "read": ""
    }
  ],
  "policies": [],
  "queues": [],
  "exchanges": [],
  "bindings": []
}`, string(out))
}

func TestLoadDefinitionsErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
		is              error
	}{
		{"bad algorithm", `{"users": [{"name": "u1", "password_hash": "", "hashing_algorithm": "rot13"}]}`, "user 'u1'", router.ErrInvalidArgument},
		{"bad tags", `{"users": [{"name": "u1", "password": "p", "tags": 7}]}`, "user 'u1'", router.ErrInvalidArgument},
		{"permission for unknown user", `{"users": [{"name": "u2", "password": "p"}], "permissions": [{"user": "ghost", "vhost": "/"}]}`, "user 'ghost'", router.ErrNotFound},
		{"permission for unknown vhost", `{"permissions": [{"user": "guest", "vhost": "nope"}]}`, "vhost 'nope'", router.ErrNotFound},
		{"users not a list", `{"vhosts": [{"name": "v1"}], "users": {"name": "u"}}`, "definitions", router.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, b := newRegistry(t, nil)
			err := b.LoadDefinitions([]byte(tt.doc))
			require.ErrorIs(t, err, tt.is)
			assert.Contains(t, err.Error(), tt.want)
			_, ok := b.VHost("v1")
			assert.False(t, ok, "a malformed document applies nothing")
		})
	}
}
