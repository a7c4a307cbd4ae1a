package management

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
)

// newRegistry is a router's user registry with the default vhost and
// guest, as at a broker's first start.
func newRegistry(t *testing.T) (*auth.Registry, *router.VHost) {
	t.Helper()
	rt := router.New(router.Options{})
	t.Cleanup(rt.Close)
	users := auth.New(rt)
	users.SeedDefaults()
	vh, ok := rt.VHost("/")
	require.True(t, ok)
	return users, vh
}

// Each operation needs exactly the permissions RabbitMQ asks for: granted
// all of them it is allowed, and missing any one of them it is refused with
// router.ErrAccessRefused naming the resource that was refused.
func TestOperatorPermissionRules(t *testing.T) {
	users, vh := newRegistry(t)
	hash, err := auth.HashPassword("", "pw")
	require.NoError(t, err)
	require.NoError(t, users.PutUser(auth.User{Name: "u", PasswordHash: hash}))
	op := Operator{Auth: users, User: "u", VHost: vh}

	type grant struct{ configure, write, read string }
	// refusal is a grant that misses one permission, and the resource
	// the refusal must name.
	type refusal struct {
		grant   grant
		refused string
	}
	const none = "^$"
	for _, tc := range []struct {
		name    string
		check   func() error
		needs   grant     // the least that allows the operation
		without []refusal // needs with one part taken away, one at a time
	}{
		{"configure queue", func() error { return op.MayConfigureQueue("q") }, grant{"q", none, none},
			[]refusal{{grant{none, ".*", ".*"}, "configure access to queue 'q'"}}},
		{"read queue", func() error { return op.MayReadQueue("q") }, grant{none, none, "q"},
			[]refusal{{grant{".*", ".*", none}, "read access to queue 'q'"}}},
		{"dead-letter to", func() error { return op.MayDeadLetterTo("q", "dlx") }, grant{none, "dlx", "q"},
			[]refusal{{grant{".*", "dlx", none}, "read access to queue 'q'"}, {grant{".*", none, "q"}, "write access to exchange 'dlx'"}}},
		{"configure exchange", func() error { return op.MayConfigureExchange("x") }, grant{"x", none, none},
			[]refusal{{grant{none, ".*", ".*"}, "configure access to exchange 'x'"}}},
		{"alternate exchange", func() error { return op.MayUseAlternateExchange("x", "ae") }, grant{none, "ae", "x"},
			[]refusal{{grant{".*", "ae", none}, "read access to exchange 'x'"}, {grant{".*", none, "x"}, "write access to exchange 'ae'"}}},
		{"bind to queue", func() error { return op.MayBind("x", "q", false) }, grant{none, "q", "x"},
			[]refusal{{grant{".*", none, "x"}, "write access to queue 'q'"}, {grant{".*", "q", none}, "read access to exchange 'x'"}}},
		{"bind to exchange", func() error { return op.MayBind("x", "y", true) }, grant{none, "y", "x"},
			[]refusal{{grant{".*", none, "x"}, "write access to exchange 'y'"}, {grant{".*", "y", none}, "read access to exchange 'x'"}}},
		{"list bindings", func() error { return op.MayListBindings("x", "q", false) }, grant{none, none, "x|q"},
			[]refusal{{grant{".*", ".*", "q"}, "read access to exchange 'x'"}, {grant{".*", ".*", "x"}, "read access to queue 'q'"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := func(g grant) {
				t.Helper()
				require.NoError(t, users.SetPermission(auth.Permission{User: "u", VHost: "/",
					Configure: g.configure, Write: g.write, Read: g.read}))
			}
			set(tc.needs)
			require.NoError(t, tc.check())
			for _, w := range tc.without {
				set(w.grant)
				err := tc.check()
				require.ErrorIs(t, err, router.ErrAccessRefused, "with %+v", w.grant)
				require.Contains(t, err.Error(), w.refused, "with %+v", w.grant)
			}
		})
	}
}

// A user without any permission on the vhost is refused every operation.
func TestOperatorWithoutVHostAccess(t *testing.T) {
	users, vh := newRegistry(t)
	op := Operator{Auth: users, User: "stranger", VHost: vh}
	for _, err := range []error{
		op.MayConfigureQueue("q"), op.MayReadQueue("q"), op.MayDeadLetterTo("q", "dlx"),
		op.MayConfigureExchange("x"), op.MayUseAlternateExchange("x", "ae"),
		op.MayBind("x", "q", false), op.MayListBindings("x", "q", false),
	} {
		require.ErrorIs(t, err, router.ErrAccessRefused)
		require.Contains(t, err.Error(), "refused for user 'stranger'")
	}
}
