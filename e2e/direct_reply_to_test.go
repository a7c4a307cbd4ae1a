package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// Direct reply-to over AMQP 1.0, as RabbitMQ 4.2+ has it: a consumer
// attaching a dynamic source with the rabbitmq:volatile-queue capability
// (pre-settled, expiry-policy link-detach) gets an address
// /queues/amq.rabbitmq.reply-to.…; messages sent there, by a target or by
// 'to', reach that consumer directly, at most once, and only while it has
// credit (no buffer: without credit they are dropped); once the consumer
// is gone the address is a missing queue.

// volatileReceiver attaches a direct reply-to consumer with the given credit
// (-1: the test issues credit itself).
func volatileReceiver(t *testing.T, s *amqp.Session, credit int32) *amqp.Receiver {
	t.Helper()
	return receiver(t, s, "", &amqp.ReceiverOptions{
		Name:                      "reply-reader",
		DynamicAddress:            true,
		SourceCapabilities:        []string{"rabbitmq:volatile-queue"},
		SourceExpiryPolicy:        amqp.ExpiryPolicyLinkDetach,
		RequestedSenderSettleMode: amqp.SenderSettleModeSettled.Ptr(),
		Credit:                    credit,
	})
}

// waitReaderCredit waits until the broker sees credit on the link
// "reply-reader" (go-amqp grants credit in a flow after the attach): a
// volatile queue drops what comes before.
func waitReaderCredit(t *testing.T, base string, credit uint32) {
	t.Helper()
	waitLinkCredit(t, base, "link reply-reader", credit, func(link map[string]any) bool {
		return link["link_name"] == "reply-reader"
	})
}

// waitLinkCredit waits until the broker's outgoing link that matches has
// the credit its receiver granted. A receiver's first flow is sent after
// its attach returns, and a volatile queue drops what comes before it.
func waitLinkCredit(t *testing.T, base, what string, credit uint32, match func(map[string]any) bool) {
	t.Helper()
	eventually(t, fmt.Sprintf("credit %d on %s", credit, what), func() bool {
		st, out := apiCallAs(t, base, "guest", "guest", "GET", "/api/connections", "")
		require.Equal(t, http.StatusOK, st, "%s", out)
		for _, c := range apiJSON[[]map[string]any](t, out) {
			st, out := apiCallAs(t, base, "guest", "guest", "GET",
				"/api/connections/"+url.PathEscape(c["name"].(string))+"/sessions", "")
			require.Equal(t, http.StatusOK, st, "%s", out)
			for _, s := range apiJSON[[]map[string]any](t, out) {
				links, _ := s["outgoing_links"].([]any)
				for _, l := range links {
					if l := l.(map[string]any); match(l) {
						return l["credit"] == float64(credit)
					}
				}
			}
		}
		return false
	})
}

func TestDirectReplyTo(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	cs := session(t, dial(t, b, nil))
	r := volatileReceiver(t, cs, 10)
	addr := r.Address()
	waitReaderCredit(t, apiServer(t, b), 10)
	require.True(t, strings.HasPrefix(addr, "/queues/amq.rabbitmq.reply-to."), "address %q", addr)

	// A volatile queue is no queue of the vhost: not listed, not declared.
	for _, q := range rootVHost(t, b).Queues() {
		assert.False(t, strings.HasPrefix(q.Name(), "amq.rabbitmq.reply-to."), "listed: %s", q.Name())
	}

	ps := session(t, dial(t, b, nil))
	// Through the anonymous terminus's 'to', as a responder replies.
	anon := sender(t, ps, "", nil)
	m := msg("by to")
	m.Properties = &amqp.MessageProperties{To: &addr}
	assert.Equal(t, &amqp.StateAccepted{}, send(t, anon, m))
	got := recv(t, r)
	assert.Equal(t, "by to", body(got))

	// Through a link whose target is the address.
	direct := sender(t, ps, addr, nil)
	assert.Equal(t, &amqp.StateAccepted{}, send(t, direct, msg("by target")))
	assert.Equal(t, "by target", body(recv(t, r)))

	// The consumer gone, the address is a missing queue: 'to' is released,
	// a new link to it refused with not-found.
	require.NoError(t, r.Close(ctxT(t)))
	m = msg("late")
	m.Properties = &amqp.MessageProperties{To: &addr}
	assert.Equal(t, &amqp.StateReleased{}, send(t, anon, m))
	_, err := ps.NewSender(ctxT(t), addr, nil)
	require.Error(t, err)
	assert.Equal(t, amqp.ErrCondNotFound, amqpErr(t, err).Condition)
}

// Without credit a volatile queue drops what is sent to it (RabbitMQ's
// volatile queue has no buffer); the publisher's outcome is accepted all
// the same. With credit again, the next message arrives, not the dropped
// one (which a buffering queue would deliver first).
func TestDirectReplyToDropsWithoutCredit(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	cc := dial(t, b, nil)
	cs := session(t, cc)
	r := volatileReceiver(t, cs, -1) // no credit until the test issues it
	addr := r.Address()
	ps := session(t, dial(t, b, nil))
	snd := sender(t, ps, addr, nil)

	assert.Equal(t, &amqp.StateAccepted{}, send(t, snd, msg("dropped")))
	require.NoError(t, r.IssueCredit(1))
	waitReaderCredit(t, apiServer(t, b), 1)
	assert.Equal(t, &amqp.StateAccepted{}, send(t, snd, msg("kept")))
	assert.Equal(t, "kept", body(recv(t, r)))
	assert.Equal(t, uint64(1), rootVHost(t, b).VolatileDropped(), "the dropped message is counted")

	// A drain takes the credit left: the broker answers it, and what comes
	// after is dropped.
	require.NoError(t, r.IssueCredit(3))
	require.NoError(t, r.DrainCredit(ctxT(t), nil))
	assert.Equal(t, &amqp.StateAccepted{}, send(t, snd, msg("after the drain")))
	assert.Equal(t, uint64(2), rootVHost(t, b).VolatileDropped())
	require.NoError(t, r.IssueCredit(1))
	waitReaderCredit(t, apiServer(t, b), 1)
	assert.Equal(t, &amqp.StateAccepted{}, send(t, snd, msg("credit again")))
	assert.Equal(t, "credit again", body(recv(t, r)))

	// The consumer's connection closed, its queue is gone: the publisher's
	// link gets released.
	require.NoError(t, cc.Close())
	eventually(t, "the volatile queue to go with its connection", func() bool {
		return !rootVHost(t, b).HasVolatile(strings.TrimPrefix(addr, "/queues/"))
	})
	assert.Equal(t, &amqp.StateReleased{}, send(t, snd, msg("nobody")))
}

// A dynamic source asking for a volatile queue must be pre-settled with
// expiry-policy link-detach; otherwise RabbitMQ 4.3 refuses it as
// not-implemented.
func TestDirectReplyToRefusesUnsettled(t *testing.T) {
	b := startBroker(t, "")
	s := session(t, dial(t, b, nil))
	_, err := s.NewReceiver(ctxT(t), "", &amqp.ReceiverOptions{
		DynamicAddress:     true,
		SourceCapabilities: []string{"rabbitmq:volatile-queue"},
		SourceExpiryPolicy: amqp.ExpiryPolicyLinkDetach,
	})
	require.Error(t, err)
	assert.Equal(t, amqp.ErrCondNotImplemented, amqpErr(t, err).Condition)
}

// The official client's direct reply-to: its consumer's address, and its
// requester and responder doing a round trip through it (the responder
// replies by 'to').
func TestRabbitMQClientDirectReplyTo(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	conn := rmqConnect(t, b, "guest", "guest")
	c, err := conn.NewConsumer(ctxT(t), "", &rmq.ConsumerOptions{SettleStrategy: rmq.DirectReplyTo})
	require.NoError(t, err)
	q, err := c.GetQueue()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(q, "amq.rabbitmq.reply-to."), "queue %q", q)
	require.NoError(t, c.Close(ctxT(t)))

	_, err = conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "rpc"})
	require.NoError(t, err)
	// The client's requester registers a request only once its publish is
	// accepted; a reply coming before that is dropped by the requester
	// itself (v1.0.0), so the responder answers once Publish has returned.
	published := make(chan struct{}, 1)
	srv, err := conn.NewResponder(ctxT(t), rmq.ResponderOptions{RequestQueue: "rpc",
		Handler: func(ctx context.Context, req *amqp.Message) (*amqp.Message, error) {
			select {
			case <-published:
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.Context().Done(): // the test ended without publishing
				return nil, context.Canceled
			}
			return amqp.NewMessage([]byte("re: " + string(req.GetData()))), nil
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(context.Background()) })

	cli := rmqConnect(t, b, "guest", "guest")
	req, err := cli.NewRequester(ctxT(t), &rmq.RequesterOptions{RequestQueueName: "rpc",
		SettleStrategy: rmq.DirectReplyTo})
	require.NoError(t, err)
	t.Cleanup(func() { _ = req.Close(context.Background()) })
	replyTo, err := req.GetReplyQueue()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(replyTo, "/queues/amq.rabbitmq.reply-to.") ||
		strings.HasPrefix(replyTo, "amq.rabbitmq.reply-to."), "reply queue %q", replyTo)
	// The requester's consumer grants its credit (256) after its attach
	// returns; a reply before that is dropped, as RabbitMQ drops it.
	replyQueue := strings.TrimPrefix(replyTo, "/queues/")
	waitLinkCredit(t, apiServer(t, b), "the requester's reply link", 256, func(link map[string]any) bool {
		return link["queue_name"] == replyQueue
	})
	for _, s := range []string{"one", "two"} {
		ch, err := req.Publish(ctxT(t), req.Message([]byte(s)))
		require.NoError(t, err)
		published <- struct{}{}
		select {
		case reply := <-ch:
			require.NotNil(t, reply, "request %q timed out", s)
			assert.Equal(t, "re: "+s, string(reply.GetData()))
		case <-ctxT(t).Done():
			t.Fatalf("no reply to %q", s)
		}
	}
}

// A message a direct reply-to queue takes is routed, as RabbitMQ counts it
// (rabbitmq_global_messages_routed_total), not unroutable.
func TestDirectReplyToCountsRouted(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.HTTPListen = "127.0.0.1:0"
		o.Telemetry.Metrics = true
	})
	r := volatileReceiver(t, session(t, dial(t, b, nil)), 1)
	addr := r.Address()
	waitReaderCredit(t, apiServer(t, b), 1)
	anon := sender(t, session(t, dial(t, b, nil)), "", nil)
	m := msg("reply")
	m.Properties = &amqp.MessageProperties{To: &addr}
	assert.Equal(t, &amqp.StateAccepted{}, send(t, anon, m))
	assert.Equal(t, "reply", body(recv(t, r)))
	text := scrape(t, b)
	for _, line := range []string{
		`rabbitmq_global_messages_routed_total{protocol="amqp10"} 1`,
		`rabbitmq_global_messages_unroutable_returned_total{protocol="amqp10"} 0`,
		`rabbitmq_global_messages_confirmed_total{protocol="amqp10"} 1`,
	} {
		assert.Contains(t, text, line+"\n")
	}
}

// An AMQP 0-9-1 responder replies to an AMQP 1.0 direct reply-to consumer
// as RabbitMQ's responders do: to the default exchange with the reply-to
// name (the request's reply-to, converted to 0-9-1's form) as routing key.
func TestDirectReplyToFromAMQP091(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	r := volatileReceiver(t, session(t, dial(t, b, nil)), 1)
	waitReaderCredit(t, apiServer(t, b), 1)
	name := strings.TrimPrefix(r.Address(), "/queues/")
	ch := channel091(t, dial091(t, b))
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", name, false, false,
		amqp091.Publishing{Body: []byte("over 0-9-1")}))
	select {
	case c := <-confirms:
		assert.True(t, c.Ack, "the publish is confirmed")
	case <-ctxT(t).Done():
		t.Fatal("no confirm")
	}
	assert.Equal(t, "over 0-9-1", body(recv(t, r)))
}
