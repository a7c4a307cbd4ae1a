package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// Single active consumer, consumer priorities and the refusal of settings
// epitaph does not implement, over TCP with go-amqp and the official
// client.

// linkStates records the rabbitmq:active values a receiver's flows carry,
// as the official client's SingleActiveConsumerStateChanged reads them
// (go-amqp's OnLinkStateProperties).
type linkStates struct {
	mu     sync.Mutex
	active []bool
}

func (ls *linkStates) record(props map[string]any) {
	v, ok := props["rabbitmq:active"]
	if !ok {
		return
	}
	b, _ := v.(bool)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.active = append(ls.active, b)
}

func (ls *linkStates) seen() []bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return append([]bool(nil), ls.active...)
}

func (ls *linkStates) waitFor(t *testing.T, what string, want ...bool) {
	t.Helper()
	eventually(t, what, func() bool { return assert.ObjectsAreEqual(want, ls.seen()) })
}

func sacReceiver(t *testing.T, s *amqp.Session, queue string, ls *linkStates) *amqp.Receiver {
	t.Helper()
	return receiver(t, s, "/queues/"+queue, &amqp.ReceiverOptions{Credit: 10, OnLinkStateProperties: ls.record})
}

// A quorum queue with x-single-active-consumer: the first consumer gets
// every message and is told rabbitmq:active true; a second one is told
// false and gets nothing until the first detaches, when it is told true
// and gets the first one's unsettled message, as RabbitMQ 4.3 does.
func TestSingleActiveConsumerQuorumLinkState(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "sac", router.Quorum, amqp10.Map{{Key: "x-single-active-consumer", Value: true}})
	c := dial(t, b, nil)
	s := session(t, c)
	var ls1, ls2 linkStates
	r1 := sacReceiver(t, s, "sac", &ls1)
	ls1.waitFor(t, "the first consumer to be told it is active", true)
	r2 := sacReceiver(t, s, "sac", &ls2)
	ls2.waitFor(t, "the second consumer to be told it waits", false)

	snd := sender(t, s, "/queues/sac", nil)
	send(t, snd, msg("m1"))
	send(t, snd, msg("m2"))
	m1 := recv(t, r1)
	assert.Equal(t, "m1", body(m1))
	require.NoError(t, r1.AcceptMessage(ctxT(t), m1))
	assert.Equal(t, "m2", body(recv(t, r1)))
	requireNoMessage(t, r2, 100*time.Millisecond)

	require.NoError(t, r1.Close(ctxT(t))) // m2 unsettled: it returns to the queue
	ls2.waitFor(t, "the second consumer to be promoted", false, true)
	m2 := recv(t, r2)
	assert.Equal(t, "m2", body(m2))
	require.NoError(t, r2.AcceptMessage(ctxT(t), m2))
	assert.Equal(t, []bool{true}, ls1.seen(), "the first consumer heard it once")
}

// A classic queue with x-single-active-consumer: the standby consumers
// are promoted in attach order; RabbitMQ 4.3's classic queues send no
// rabbitmq:active, and neither does epitaph.
func TestSingleActiveConsumerClassic(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "sac", router.Classic, amqp10.Map{{Key: "x-single-active-consumer", Value: true}})
	c := dial(t, b, nil)
	s := session(t, c)
	var ls [3]linkStates
	rs := make([]*amqp.Receiver, 3)
	for i := range rs {
		rs[i] = sacReceiver(t, s, "sac", &ls[i])
	}
	vh := rootVHost(t, b)
	q, _ := vh.Queue("sac")
	eventually(t, "the active consumer's credit", func() bool { return q.Info().ConsumerCredit == 10 })

	snd := sender(t, s, "/queues/sac", nil)
	for _, m := range []string{"a", "b"} {
		send(t, snd, msg(m))
	}
	for _, want := range []string{"a", "b"} {
		m := recv(t, rs[0])
		assert.Equal(t, want, body(m))
		require.NoError(t, rs[0].AcceptMessage(ctxT(t), m))
	}
	requireNoMessage(t, rs[1], 50*time.Millisecond)
	requireNoMessage(t, rs[2], 50*time.Millisecond)

	require.NoError(t, rs[0].Close(ctxT(t)))
	send(t, snd, msg("c"))
	m := recv(t, rs[1])
	assert.Equal(t, "c", body(m), "the next in attach order is promoted")
	require.NoError(t, rs[1].AcceptMessage(ctxT(t), m))
	requireNoMessage(t, rs[2], 50*time.Millisecond)
	for i := range ls {
		assert.Empty(t, ls[i].seen(), "classic queues report no rabbitmq:active")
	}
}

// The official client declares a single-active-consumer queue of each type
// and consumes from it: one consumer gets everything, the next takes over
// when it closes.
func TestSingleActiveConsumerOfficialClient(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()
	for _, tc := range []struct {
		name string
		spec rmq.IQueueSpecification
	}{
		{"sac-qq", &rmq.QuorumQueueSpecification{Name: "sac-qq", SingleActiveConsumer: true}},
		{"sac-cq", &rmq.ClassicQueueSpecification{Name: "sac-cq", SingleActiveConsumer: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := m.DeclareQueue(ctxT(t), tc.spec)
			require.NoError(t, err)
			assert.Equal(t, true, info.Arguments()["x-single-active-consumer"])
			c1, err := conn.NewConsumer(ctxT(t), tc.name, nil)
			require.NoError(t, err)
			c2, err := conn.NewConsumer(ctxT(t), tc.name, nil)
			require.NoError(t, err)
			p, err := conn.NewPublisher(ctxT(t), &rmq.QueueAddress{Queue: tc.name}, nil)
			require.NoError(t, err)
			rmqPublish(t, p, "one", "two")
			d1 := rmqReceive(t, c1)
			assert.Equal(t, "one", rmqBody(d1))
			require.NoError(t, d1.Accept(ctxT(t)))
			d2 := rmqReceive(t, c1)
			assert.Equal(t, "two", rmqBody(d2)) // left unsettled
			require.NoError(t, c1.Close(ctxT(t)))
			d3 := rmqReceive(t, c2)
			assert.Equal(t, "two", rmqBody(d3), "the standby consumer gets the unsettled message")
			require.NoError(t, d3.Accept(ctxT(t)))
			require.NoError(t, c2.Close(ctxT(t)))
		})
	}
}

// rabbitmq:priority on attach: the higher-priority consumer gets messages
// while it has credit; then the others, round robin.
func TestConsumerPriorityAttachProperty(t *testing.T) {
	for _, typ := range []router.QueueType{router.Classic, router.Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, nil)
			c := dial(t, b, nil)
			s := session(t, c)
			low1 := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
			low2 := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
			high := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1,
				Properties: map[string]any{"rabbitmq:priority": int32(10)}})
			require.NoError(t, low1.IssueCredit(10))
			require.NoError(t, low2.IssueCredit(10))
			require.NoError(t, high.IssueCredit(2))
			q, _ := rootVHost(t, b).Queue("q")
			eventually(t, "the credit to reach the queue", func() bool { return q.Info().ConsumerCredit == 22 })

			snd := sender(t, s, "/queues/q", nil)
			for _, m := range []string{"m0", "m1", "m2", "m3"} {
				send(t, snd, msg(m))
			}
			assert.Equal(t, "m0", body(recv(t, high)))
			assert.Equal(t, "m1", body(recv(t, high)))
			assert.Equal(t, "m2", body(recv(t, low1)))
			assert.Equal(t, "m3", body(recv(t, low2)))
		})
	}
}

// Settings epitaph does not implement are refused, never accepted without
// their effect: queue arguments at declare (official client, HTTP API),
// policy keys (HTTP API), link properties at attach (go-amqp).
func TestUnimplementedSettingsRefused(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()

	for _, args := range []map[string]any{
		{"x-consumer-timeout": int64(1000)},
	} {
		_, err := m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "retry", Arguments: args})
		require.ErrorIs(t, err, rmq.ErrPreconditionFailed, "%v", args)
	}

	// Delayed retry is implemented on quorum queues (delayed_retry_test.go);
	// a classic queue refuses its arguments, as RabbitMQ's does.
	st, out := apiCall(t, base, "PUT", "/api/queues/%2f/retry", map[string]any{"durable": true,
		"arguments": map[string]any{"x-queue-type": "classic", "x-delayed-retry-type": "failed"}})
	assert.Equal(t, http.StatusBadRequest, st)
	assert.Contains(t, string(out), "invalid arg 'x-delayed-retry-type' for queue 'retry' of queue type classic")
	for key, val := range map[string]any{"delayed-retry-type": "all", "consumer-timeout": 1000, "ha-mode": "all"} {
		st, out := apiCall(t, base, "PUT", "/api/policies/%2f/p", map[string]any{"pattern": ".*",
			"definition": map[string]any{key: val}})
		assert.Equal(t, http.StatusBadRequest, st, key)
		assert.Contains(t, string(out), key)
	}
	_, ok := rootVHost(t, b).Policy("p")
	assert.False(t, ok)
	for _, name := range []string{"retry"} {
		_, ok := rootVHost(t, b).Queue(name)
		assert.False(t, ok, name)
	}

	declareQueue(t, b, "q", router.Quorum, nil)
	c := dial(t, b, nil)
	s := session(t, c)
	for _, tc := range []struct {
		props map[string]any
		cond  amqp.ErrCond
		want  string
	}{
		{map[string]any{"rabbitmq:consumer-timeout": uint32(1000)}, amqp.ErrCondPreconditionFailed, "rabbitmq:consumer-timeout"},
		{map[string]any{"rabbitmq:priority": "high"}, amqp.ErrCondInvalidField, "rabbitmq:priority must be an integer"},
	} {
		_, err := s.NewReceiver(ctxT(t), "/queues/q", &amqp.ReceiverOptions{Properties: tc.props})
		e := amqpErr(t, err)
		assert.Equal(t, tc.cond, e.Condition)
		assert.True(t, strings.Contains(e.Description, tc.want), e.Description)
	}
	// The session is still usable.
	r := receiver(t, s, "/queues/q", nil)
	require.NoError(t, r.Close(context.Background()))
}

// A queue consumer that names no distribution mode, or move, is told the
// mode in force, move, as RabbitMQ 4.3 answers for classic and quorum
// queues: it takes the messages it gets. (copy browses: see
// TestBrowseDistributionModeCopy.)
func TestAttachReplyDistributionModeMove(t *testing.T) {
	for _, typ := range []router.QueueType{router.Classic, router.Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, nil)
			send(t, sender(t, session(t, dial(t, b, nil)), "/queues/q", nil), msg("m"))
			r := rawBegin(t, b)
			r.write(0, &amqp10.Attach{Name: "browser", Handle: 0, Role: amqp10.RoleReceiver,
				SndSettleMode: amqp10.SndSettled, HasSndSettleMode: true,
				Source: &amqp10.Source{Address: "/queues/q", HasAddress: true},
				Target: &amqp10.Target{}})
			reply, _ := expectFrame[*amqp10.Attach](r)
			require.NotNil(t, reply.Source)
			assert.Equal(t, amqp10.Symbol("move"), reply.Source.DistributionMode)
			r.write(0, &amqp10.Flow{NextIncomingID: 0, HasNextIncomingID: true, IncomingWindow: 1000,
				NextOutgoingID: 0, OutgoingWindow: 1000, Handle: 0, HasHandle: true,
				DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: 1, HasLinkCredit: true})
			expectFrame[*amqp10.Transfer](r)
			assert.Zero(t, queueLen(t, b, "q"), "the message was moved, not copied")
		})
	}
}

// Every quorum queue consumer, single active or not, is told once that it
// is active (RabbitMQ 4.3's quorum queues carry the state in every credit
// reply, and the session sends it on when it first learns it).
func TestQuorumConsumerToldActiveOnce(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "qq", router.Quorum, nil)
	s := session(t, dial(t, b, nil))
	var ls linkStates
	r := sacReceiver(t, s, "qq", &ls)
	ls.waitFor(t, "the consumer to be told it is active", true)
	snd := sender(t, s, "/queues/qq", nil)
	for _, m := range []string{"a", "b", "c"} {
		send(t, snd, msg(m))
		got := recv(t, r)
		require.NoError(t, r.AcceptMessage(ctxT(t), got))
	}
	assert.Equal(t, []bool{true}, ls.seen(), "told once, not at every flow")
}

// On a quorum queue a waiting consumer of a higher rabbitmq:priority takes
// over once the active one has settled what it holds; both hear it.
func TestSingleActiveConsumerQuorumPriorityTakeOver(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "sac", router.Quorum, amqp10.Map{{Key: "x-single-active-consumer", Value: true}})
	s := session(t, dial(t, b, nil))
	var ls1, ls2 linkStates
	r1 := sacReceiver(t, s, "sac", &ls1)
	ls1.waitFor(t, "the first consumer to be active", true)
	snd := sender(t, s, "/queues/sac", nil)
	send(t, snd, msg("held"))
	held := recv(t, r1)

	r2 := receiver(t, s, "/queues/sac", &amqp.ReceiverOptions{Credit: 10, OnLinkStateProperties: ls2.record,
		Properties: map[string]any{"rabbitmq:priority": int32(5)}})
	ls2.waitFor(t, "the higher priority to wait while the active one holds a message", false)
	send(t, snd, msg("next"))
	requireNoMessage(t, r1, 50*time.Millisecond) // quiescing: nothing new
	requireNoMessage(t, r2, 50*time.Millisecond)

	require.NoError(t, r1.AcceptMessage(ctxT(t), held))
	ls2.waitFor(t, "the higher priority to take over", false, true)
	ls1.waitFor(t, "the first consumer to hear it waits", true, false)
	m := recv(t, r2)
	assert.Equal(t, "next", body(m))
	require.NoError(t, r2.AcceptMessage(ctxT(t), m))
}

// A consumer's max-message-size holds: a larger message is not sent; the
// link is detached with amqp:link:message-size-exceeded (AMQP 1.0 section
// 2.7.3) and the message stays in the queue for another consumer. The
// attach reply echoes the size, as RabbitMQ's does.
func TestConsumerMaxMessageSize(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "q", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	big := msg(strings.Repeat("x", 1000))
	send(t, sender(t, s, "/queues/q", nil), big)

	small := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{MaxMessageSize: 200})
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	_, err := small.Receive(ctx, nil)
	var le *amqp.LinkError
	require.ErrorAs(t, err, &le)
	require.NotNil(t, le.RemoteErr, "detached by the broker: %v", err)
	assert.Equal(t, amqp.ErrCondMessageSizeExceeded, le.RemoteErr.Condition)
	assert.Contains(t, le.RemoteErr.Description, "> maximum message size (200 bytes)")
	eventually(t, "the message to be back in the queue", func() bool { return queueLen(t, b, "q") == 1 })

	r := receiver(t, s, "/queues/q", nil)
	m := recv(t, r)
	assert.Equal(t, 1000, len(body(m)))
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
}
