package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/router"
)

// The permission matrix (including the dead-letter rule: declaring a queue
// with a DLX needs write on the DLX): every combination of
// configure/write/read, each operation on the AMQP listener (link attaches and /management requests), as RabbitMQ
// decides. "^$" is the pattern that grants nothing on a named resource.

const permPassword = "pw"

// permUser is a user with a configure, write and read pattern.
type permUser struct {
	name                   string
	configure, write, read string
}

// permMatrixUsers are the 8 combinations of "^$" (none) and ".*" (all).
func permMatrixUsers() []permUser {
	var out []permUser
	for bits := range 8 {
		u := permUser{configure: "^$", write: "^$", read: "^$"}
		name := "user-"
		for i, p := range []*string{&u.configure, &u.write, &u.read} {
			if bits&(4>>i) != 0 {
				*p = ".*"
				name += string("cwr"[i])
			} else {
				name += "-"
			}
		}
		u.name = name
		out = append(out, u)
	}
	return out
}

// permDefinitions is a definitions document with the users (plain
// passwords) and their permissions on "/".
func permDefinitions(t *testing.T, users []permUser) string {
	t.Helper()
	type user struct {
		Name     string   `json:"name"`
		Password string   `json:"password"`
		Tags     []string `json:"tags"`
	}
	type perm struct {
		User      string `json:"user"`
		VHost     string `json:"vhost"`
		Configure string `json:"configure"`
		Write     string `json:"write"`
		Read      string `json:"read"`
	}
	var d struct {
		VHosts      []map[string]string `json:"vhosts"`
		Users       []user              `json:"users"`
		Permissions []perm              `json:"permissions"`
	}
	d.VHosts = []map[string]string{{"name": "/"}}
	for _, u := range users {
		d.Users = append(d.Users, user{Name: u.name, Password: permPassword, Tags: []string{}})
		d.Permissions = append(d.Permissions, perm{User: u.name, VHost: "/", Configure: u.configure, Write: u.write, Read: u.read})
	}
	b, err := json.Marshal(d)
	require.NoError(t, err)
	return string(b)
}

// permDial connects with go-amqp as user (SASL PLAIN).
func permDial(t *testing.T, b *epitaph.Broker, user string) *amqp.Session {
	t.Helper()
	c, err := amqp.Dial(ctxT(t), "amqp://"+user+":"+permPassword+"@"+b.Addr().String(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return session(t, c)
}

// permAttachOutcome requires an attach to succeed (allowed) or to be
// refused with amqp:unauthorized-access.
func permAttachOutcome(t *testing.T, allowed bool, closer interface{ Close(context.Context) error }, err error) {
	t.Helper()
	if allowed {
		require.NoError(t, err)
		require.NoError(t, closer.Close(ctxT(t)))
		return
	}
	require.Error(t, err)
	assert.Equal(t, amqp.ErrCond("amqp:unauthorized-access"), amqpErr(t, err).Condition, "%v", err)
}

// permMgmtOutcome requires a management call to succeed (allowed) or to
// fail with the client's "got 403".
func permMgmtOutcome(t *testing.T, allowed bool, err error) {
	t.Helper()
	if allowed {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "got 403"), "want a 403 refusal, got %v", err)
}

// permOp is one operation and the permissions it needs.
type permOp struct {
	name                   string
	configure, write, read bool
	run                    func(t *testing.T, env *permEnv, u permUser, allowed bool)
}

type permEnv struct {
	b    *epitaph.Broker
	s    *amqp.Session
	conn *rmq.AmqpConnection
	m    *rmq.AmqpManagement
}

var permOps = []permOp{
	{name: "attach publisher /queues/q (write on amq.default)", write: true,
		run: func(t *testing.T, e *permEnv, _ permUser, ok bool) {
			snd, err := e.s.NewSender(ctxT(t), "/queues/q", nil)
			permAttachOutcome(t, ok, snd, err)
		}},
	{name: "attach publisher /exchanges/x (write on x)", write: true,
		run: func(t *testing.T, e *permEnv, _ permUser, ok bool) {
			snd, err := e.s.NewSender(ctxT(t), "/exchanges/x", nil)
			permAttachOutcome(t, ok, snd, err)
		}},
	{name: "attach consumer /queues/q (read on q)", read: true,
		run: func(t *testing.T, e *permEnv, _ permUser, ok bool) {
			r, err := e.s.NewReceiver(ctxT(t), "/queues/q", nil)
			permAttachOutcome(t, ok, r, err)
		}},
	{name: "declare queue (configure)", configure: true,
		run: func(t *testing.T, e *permEnv, u permUser, ok bool) {
			_, err := e.m.DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "new-" + u.name})
			permMgmtOutcome(t, ok, err)
			_, exists := rootVHost(t, e.b).Queue("new-" + u.name)
			assert.Equal(t, ok, exists)
		}},
	{name: "declare queue with a DLX (configure + read on the queue + write on the DLX)", configure: true, write: true, read: true,
		run: func(t *testing.T, e *permEnv, u permUser, ok bool) {
			_, err := e.m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "dl-" + u.name, DeadLetterExchange: "dlx"})
			permMgmtOutcome(t, ok, err)
			_, exists := rootVHost(t, e.b).Queue("dl-" + u.name)
			assert.Equal(t, ok, exists)
		}},
	{name: "delete queue (configure)", configure: true,
		run: func(t *testing.T, e *permEnv, u permUser, ok bool) {
			declareQueue(t, e.b, "del-"+u.name, router.Classic, nil)
			permMgmtOutcome(t, ok, e.m.DeleteQueue(ctxT(t), "del-"+u.name))
			_, exists := rootVHost(t, e.b).Queue("del-" + u.name)
			assert.Equal(t, !ok, exists)
		}},
	{name: "declare exchange (configure)", configure: true,
		run: func(t *testing.T, e *permEnv, u permUser, ok bool) {
			_, err := e.m.DeclareExchange(ctxT(t), &rmq.DirectExchangeSpecification{Name: "x-" + u.name})
			permMgmtOutcome(t, ok, err)
			assert.Equal(t, ok, rootVHost(t, e.b).HasExchange("x-"+u.name))
		}},
	{name: "delete exchange (configure)", configure: true,
		run: func(t *testing.T, e *permEnv, u permUser, ok bool) {
			declareExchange(t, e.b, "delx-"+u.name, router.ExchangeDirect, nil)
			permMgmtOutcome(t, ok, e.m.DeleteExchange(ctxT(t), "delx-"+u.name))
			assert.Equal(t, !ok, rootVHost(t, e.b).HasExchange("delx-"+u.name))
		}},
	{name: "bind (write on the queue, read on the exchange)", write: true, read: true,
		run: func(t *testing.T, e *permEnv, u permUser, ok bool) {
			_, err := e.m.Bind(ctxT(t), &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "x", DestinationQueue: "q", BindingKey: u.name})
			permMgmtOutcome(t, ok, err)
			assert.Equal(t, ok, permHasBinding(t, e.b, "x", "q", u.name))
		}},
	{name: "unbind (write on the queue, read on the exchange)", write: true, read: true,
		run: func(t *testing.T, e *permEnv, u permUser, ok bool) {
			bind(t, e.b, "x", "q", "un-"+u.name, nil)
			permMgmtOutcome(t, ok, e.m.Unbind(ctxT(t), "/bindings/src=x;dstq=q;key=un-"+u.name+";args="))
			assert.Equal(t, !ok, permHasBinding(t, e.b, "x", "q", "un-"+u.name))
		}},
	{name: "purge (read on the queue)", read: true,
		run: func(t *testing.T, e *permEnv, _ permUser, ok bool) {
			// PurgeQueue of v1.0.0 panics on an error answer (it asserts the
			// count of a nil map), so the request is made directly
			_, err := e.m.Request(ctxT(t), amqp.Null{}, "/queues/q/messages", "DELETE", []int{200})
			permMgmtOutcome(t, ok, err)
		}},
	{name: "queue info (access to the vhost)",
		run: func(t *testing.T, e *permEnv, _ permUser, ok bool) {
			qi, err := e.m.QueueInfo(ctxT(t), "q")
			require.NoError(t, err)
			assert.Equal(t, "q", qi.Name())
		}},
}

func permHasBinding(t *testing.T, b *epitaph.Broker, src, dst, key string) bool {
	t.Helper()
	for _, bd := range rootVHost(t, b).Bindings() {
		if bd.Source == src && bd.Destination == dst && !bd.DestinationIsExchange && bd.Key == key {
			return true
		}
	}
	return false
}

// permSetup declares the shared topology: exchanges x and dlx, queue q.
func permSetup(t *testing.T, b *epitaph.Broker) {
	t.Helper()
	declareExchange(t, b, "x", router.ExchangeDirect, nil)
	declareExchange(t, b, "dlx", router.ExchangeFanout, nil)
	declareQueue(t, b, "q", router.Classic, nil)
}

func permEnvFor(t *testing.T, b *epitaph.Broker, user string) *permEnv {
	t.Helper()
	conn := rmqConnect(t, b, user, permPassword)
	return &permEnv{b: b, s: permDial(t, b, user), conn: conn, m: conn.Management()}
}

func TestPermissionMatrix(t *testing.T) {
	users := permMatrixUsers()
	b := startBroker(t, permDefinitions(t, users))
	permSetup(t, b)
	for _, u := range users {
		t.Run(u.name, func(t *testing.T) {
			e := permEnvFor(t, b, u.name)
			has := map[string]bool{"c": u.configure == ".*", "w": u.write == ".*", "r": u.read == ".*"}
			for _, op := range permOps {
				allowed := (!op.configure || has["c"]) && (!op.write || has["w"]) && (!op.read || has["r"])
				t.Run(fmt.Sprintf("%s/allowed=%t", op.name, allowed), func(t *testing.T) {
					op.run(t, e, u, allowed)
				})
			}
		})
	}
}

// TestPermissionDeadLetterExchangeRule isolates each part of the DLX rule:
// declaring a queue with x-dead-letter-exchange needs configure on the
// queue, read on the queue and write on the DLX; without the argument,
// or when the queue already exists, configure alone suffices.
func TestPermissionDeadLetterExchangeRule(t *testing.T) {
	users := []permUser{
		{name: "dlx-ok", configure: "^dq", write: "^dlx$", read: "^dq"},
		{name: "dlx-no-read", configure: "^dq", write: "^dlx$", read: "^other$"},
		{name: "dlx-no-write", configure: "^dq", write: "^other$", read: "^dq"},
		{name: "dlx-no-configure", configure: "^other$", write: "^dlx$", read: "^dq"},
		{name: "admin", configure: ".*", write: ".*", read: ".*"},
	}
	b := startBroker(t, permDefinitions(t, users))
	permSetup(t, b)
	for _, tc := range []struct {
		user    string
		allowed bool
	}{{"dlx-ok", true}, {"dlx-no-read", false}, {"dlx-no-write", false}, {"dlx-no-configure", false}} {
		t.Run(tc.user, func(t *testing.T) {
			m := rmqConnect(t, b, tc.user, permPassword).Management()
			ctx := ctxT(t)
			name := "dq-" + tc.user
			_, err := m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: name, DeadLetterExchange: "dlx", DeadLetterRoutingKey: "k"})
			permMgmtOutcome(t, tc.allowed, err)
			// the same declaration without a DLX needs configure only
			_, err = m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: name + "-plain"})
			permMgmtOutcome(t, tc.user != "dlx-no-configure", err)
		})
	}
	// the DLX is checked when the queue is created, not on an equivalent
	// redeclare (rabbit_amqp_management checks it only for new queues)
	admin := rmqConnect(t, b, "admin", permPassword).Management()
	_, err := admin.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "dq-existing", DeadLetterExchange: "dlx"})
	require.NoError(t, err)
	m := rmqConnect(t, b, "dlx-no-write", permPassword).Management()
	_, err = m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "dq-existing", DeadLetterExchange: "dlx"})
	require.NoError(t, err)
	// and the rule applies to a DLX of the default exchange ("" is amq.default)
	_, err = m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "dq-default-dlx",
		Arguments: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "q"}})
	permMgmtOutcome(t, false, err)
	q, ok := rootVHost(t, b).Queue("dq-existing")
	require.True(t, ok)
	dlx, _ := q.DeadLetterExchange()
	assert.Equal(t, "dlx", dlx)
}
