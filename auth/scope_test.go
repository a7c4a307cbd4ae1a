package auth

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/router"
)

// The cases of RabbitMQ's wildcard_match_SUITE (rabbitmq_auth_backend_oauth2),
// which define how a scope pattern matches a vhost or resource name.
func TestWildcardMatchAsRabbitMQ(t *testing.T) {
	cases := []struct {
		subject, pattern string
		want             bool
	}{
		// exact matches, with URL encoding
		{"value", "value", true},
		{"string with / special % characters", "string%20with%20%2F%20special%20%25%20characters", true},
		{"pattern with  plus  spaces", "pattern+with++plus++spaces", true},
		{"pattern with plus spaces and * wildcard encoded", "pattern+with+plus+spaces+and+%2A+wildcard+encoded", true},
		{"case with * special / characters", "case+with+%2a+special+%2f+characters", true},
		{"casesensitive", "CaseSensitive", false},
		{"foo", "fo", false},
		{"foo", "fooo", false},
		{"string with unescaped % character", "string with unescaped % character", false},
		{"wildcard * is matched by wildcard", "wildcard * is matched by wildcard", true},
		{"wildcard * and anything else is matched by wildcard", "wildcard * is matched by wildcard", true},
		{"wildcard * is matched by urlencoded", "wildcard+%2a+is+matched+by+urlencoded", true},
		{"wildcard * and extra content is not matched by urlencoded", "wildcard+%2a+is+not+matched+by+urlencoded", false},
		{"pattern with  spaces", "pattern with  spaces", true},
		// suffix
		{"foo", "*oo", true},
		{"foo", "*foo", true},
		{"foo", "*", true},
		{"line * with * special * characters", "*+characters", true},
		{"line * with * special * characters", "*special+%2A+characters", true},
		{"foo", "*r", false},
		{"foo", "*foobar", false},
		// prefix
		{"foo", "fo*", true},
		{"foo", "foo*", true},
		{"line * with * special * characters", "line+*", true},
		{"line * with * special * characters", "line+%2a*", true},
		{"foo", "b*", false},
		{"foo", "barfoo*", false},
		// mixed
		{"string", "*str*ing*", true},
		{"str*ing", "*str*ing*", true},
		{"some long string", "some*string", true},
		{"some long string", "some*long*string", true},
		{"some long string", "*some*string*", true},
		{"some long string", "*long*", true},
		{"some long string", "*+*+*", true},
		{"some string", "*+*+*", false},
		{"some long string", "some*other*string", false},
		{"some long string", "s*e*str*", true},
		{"some long string", "s*z*str*", false},
		{"string", "*some*", false},
		{"string", "*some*string*", false},
		// RabbitMQ's scan takes each part's leftmost place: not a full glob
		{"abab", "a*b", false},
		{"/", "%2F", true},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, wildcardMatch(c.subject, c.pattern), "match(%q, %q)", c.subject, c.pattern)
	}
}

func TestParseScope(t *testing.T) {
	g, ok := parseScope("read:vh/q")
	require.True(t, ok)
	assert.Equal(t, scopeGrant{access: Read, vhost: "vh", name: "q"}, g)
	g, ok = parseScope("write:*/amq.topic/orders.*")
	require.True(t, ok)
	assert.Equal(t, scopeGrant{access: Write, vhost: "*", name: "amq.topic", routing: "orders.*"}, g)
	g, ok = parseScope("configure:%2F/*")
	require.True(t, ok)
	assert.Equal(t, Configure, g.access)
	for _, bad := range []string{"read:vh", "read:a/b/c/d", "delete:*/*", "tag:administrator", "read", "", "READ:*/*"} {
		_, ok := parseScope(bad)
		assert.False(t, ok, "%q", bad)
	}
}

func TestFilterScopesKeepsPrefixedSortedUnique(t *testing.T) {
	got := FilterScopes([]string{"rabbitmq.write:*/*", "other.read:*/*", "rabbitmq.read:*/*", "rabbitmq.read:*/*", "openid", "rabbitmqread:*/*"}, "rabbitmq.")
	assert.Equal(t, []string{"read:*/*", "write:*/*"}, got)
}

// RabbitMQ's scope_SUITE: permission scopes per vhost and resource, tag
// scopes, encoded vhosts, and routing-key scopes also granting the resource.
func TestTokenPermissionsAsRabbitMQScopes(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	all := NewTokenForScopes("u", exp, []string{"read:*/*", "write:*/*", "configure:*/*"})
	for _, vh := range []string{"/", "foo", "bar"} {
		assert.True(t, all.CanAccessVHost(vh))
		for _, a := range []Access{Read, Write, Configure} {
			assert.NoError(t, all.Authorize(vh, ResourceQueue, "q", a))
			assert.NoError(t, all.Authorize(vh, ResourceExchange, "", a))
		}
	}

	foo := NewTokenForScopes("u", exp, []string{"read:foo/*", "write:foo/*/*"})
	assert.True(t, foo.CanAccessVHost("foo"))
	assert.False(t, foo.CanAccessVHost("bar"))
	assert.NoError(t, foo.Authorize("foo", ResourceQueue, "any", Read))
	assert.NoError(t, foo.Authorize("foo", ResourceExchange, "x", Write), "a routing-key scope grants its resource")
	err := foo.Authorize("foo", ResourceQueue, "any", Configure)
	require.ErrorIs(t, err, router.ErrAccessRefused)
	require.ErrorIs(t, foo.Authorize("bar", ResourceQueue, "any", Read), router.ErrAccessRefused)

	root := NewTokenForScopes("u", exp, []string{"configure:%2F/orders-*", "tag:management", "tag:policymaker"})
	assert.True(t, root.CanAccessVHost("/"))
	assert.NoError(t, root.Authorize("/", ResourceQueue, "orders-1", Configure))
	require.ErrorIs(t, root.Authorize("/", ResourceQueue, "audit", Configure), router.ErrAccessRefused)
	assert.Equal(t, []string{"management", "policymaker"}, root.Tags)
	assert.True(t, root.HasTag("management"))
	assert.False(t, root.HasTag("administrator"))

	// The default exchange is checked as amq.default, as for stored users.
	def := NewTokenForScopes("u", exp, []string{"write:*/amq.default"})
	assert.NoError(t, def.Authorize("/", ResourceExchange, "", Write))

	none := NewTokenForScopes("u", exp, []string{"tag:administrator"})
	assert.False(t, none.CanAccessVHost("/"), "tags grant no vhost")
	assert.True(t, errors.Is(none.Authorize("/", ResourceQueue, "q", Read), router.ErrAccessRefused))
}

func TestSameUserOnRefresh(t *testing.T) {
	a := NewTokenForScopes("alice", time.Now(), nil)
	require.NoError(t, a.SameUser(NewTokenForScopes("alice", time.Now(), nil)))
	err := a.SameUser(NewTokenForScopes("bob", time.Now(), nil))
	require.ErrorIs(t, err, ErrTokenRefused)
	require.ErrorIs(t, err, ErrTokenUser)
}

// FuzzScopeMatch feeds scope strings and names to the scope parser and
// matcher: never a panic, and a token granting "<p>:*/*" for a parsed
// permission grants it on any name.
func FuzzScopeMatch(f *testing.F) {
	f.Add("read:%2F/orders-*", "/", "orders-1")
	f.Add("write:*/amq.topic/a.*", "vh", "amq.topic")
	f.Add("configure:a*b/%zz", "abab", "x")
	f.Add("tag:administrator", "", "")
	f.Fuzz(func(t *testing.T, scope, vhost, name string) {
		_ = wildcardMatch(name, scope)
		tok := NewTokenForScopes("u", time.Now(), splitScopes(scope))
		_ = tok.CanAccessVHost(vhost)
		_ = tok.Authorize(vhost, ResourceQueue, name, Read)
		if g, ok := parseScope(scope); ok {
			wide := NewTokenForScopes("u", time.Now(), []string{g.access.String() + ":*/*"})
			require.NoError(t, wide.Authorize(vhost, ResourceQueue, name, g.access))
		}
	})
}
