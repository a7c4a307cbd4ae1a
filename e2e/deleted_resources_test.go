package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// RabbitMQ 4 detaches the links of a deleted queue, consumers and
// publishers alike, with amqp:resource-deleted (closed, no description),
// whatever deleted it; a publisher whose exchange was deleted has its next
// message released and the link detached with amqp:not-found.

// remoteLinkErr returns the broker's error that detached a link.
func remoteLinkErr(t *testing.T, err error) *amqp.Error {
	t.Helper()
	var le *amqp.LinkError
	require.True(t, errors.As(err, &le), "want *amqp.LinkError, got %T: %v", err, err)
	require.NotNil(t, le.RemoteErr, "the link was not detached by the broker: %v", err)
	return le.RemoteErr
}

// requireDetachedDeleted requires that err is the broker's detach with
// resource-deleted, as RabbitMQ 4 sends it: no description.
func requireDetachedDeleted(t *testing.T, err error) {
	t.Helper()
	re := remoteLinkErr(t, err)
	assert.Equal(t, amqp.ErrCond(amqp10.ErrCondResourceDeleted), re.Condition)
	assert.Empty(t, re.Description)
}

// publishUntilDetached sends until the broker's detach reaches snd (a
// message sent before it is released: the queue is gone) and returns the
// send's error.
func publishUntilDetached(t *testing.T, snd *amqp.Sender) error {
	t.Helper()
	var err error
	eventually(t, "publisher detached", func() bool {
		var rcpt amqp.SendReceipt
		rcpt, err = snd.SendWithReceipt(ctxT(t), msg("after delete"), nil)
		if err == nil {
			var out amqp.DeliveryState
			out, err = rcpt.Wait(ctxT(t))
			if err == nil {
				require.IsType(t, &amqp.StateReleased{}, out)
			}
		}
		return err != nil
	})
	return err
}

func TestDeletedQueueDetachesItsLinks(t *testing.T) {
	var ownerConn *rmq.AmqpConnection // the exclusive queue's owner (the subtests run one by one)
	paths := []struct {
		name string
		// declare declares queue q; remove deletes it by the path tested.
		declare func(t *testing.T, b *epitaph.Broker)
		remove  func(t *testing.T, b *epitaph.Broker)
		// noConsumer: the path deletes only a queue without consumers.
		noConsumer bool
	}{
		{name: "HTTP API", remove: func(t *testing.T, b *epitaph.Broker) {
			api(t, apiServer(t, b), "DELETE", "/api/queues/%2F/q", nil, 204)
		}},
		{name: "management node", remove: func(t *testing.T, b *epitaph.Broker) {
			require.NoError(t, rmqConnect(t, b, "guest", "guest").Management().DeleteQueue(ctxT(t), "q"))
		}},
		{name: "x-expires", noConsumer: true, declare: func(t *testing.T, b *epitaph.Broker) {
			declareQueue(t, b, "q", router.Classic, amqp10.Map{kv("x-expires", int64(300))})
		}, remove: func(*testing.T, *epitaph.Broker) {}}, // the loop below waits for the expiry
		{name: "auto-delete", noConsumer: true, declare: func(t *testing.T, b *epitaph.Broker) {
			_, _, err := rootVHost(t, b).DeclareQueue(router.QueueSpec{Name: "q", AutoDelete: true})
			require.NoError(t, err)
		}, remove: func(t *testing.T, b *epitaph.Broker) {
			// Its only consumer (on a connection of its own) goes.
			r := receiver(t, session(t, dial(t, b, nil)), "/queues/q", nil)
			require.NoError(t, r.Close(ctxT(t)))
		}},
		{name: "exclusive owner gone", noConsumer: true, declare: func(t *testing.T, b *epitaph.Broker) {
			c := rmqConnect(t, b, "guest", "guest")
			_, err := c.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "q", IsExclusive: true})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close(t.Context()) })
			ownerConn = c
		}, remove: func(t *testing.T, b *epitaph.Broker) {
			require.NoError(t, ownerConn.Close(ctxT(t)))
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			b := startBroker(t, "", withHTTP)
			if p.declare != nil {
				p.declare(t, b)
			} else {
				declareQueue(t, b, "q", router.Classic, nil)
			}
			declareQueue(t, b, "other", router.Classic, nil)
			s := session(t, dial(t, b, nil))
			pub := sender(t, s, "/queues/q", nil)
			require.IsType(t, &amqp.StateAccepted{}, send(t, pub, msg("before")))
			otherPub := sender(t, s, "/queues/other", nil)
			anon := sender(t, s, "", nil)
			var cons *amqp.Receiver
			if !p.noConsumer {
				cons = receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 10})
				assert.Equal(t, "before", body(recv(t, cons)))
			}

			p.remove(t, b)
			eventually(t, "q deleted", func() bool { _, ok := rootVHost(t, b).Queue("q"); return !ok })

			if cons != nil {
				// The consumer learns at once; it does not wait forever.
				_, err := cons.Receive(ctxT(t), nil)
				requireDetachedDeleted(t, err)
			}
			requireDetachedDeleted(t, publishUntilDetached(t, pub))

			// The links to other targets and the anonymous one stay.
			require.IsType(t, &amqp.StateAccepted{}, send(t, otherPub, msg("o")))
			to := "/queues/other"
			m := msg("anon")
			m.Properties = &amqp.MessageProperties{To: &to}
			require.IsType(t, &amqp.StateAccepted{}, send(t, anon, m))

			// Declared again, the queue has new links that work.
			declareQueue(t, b, "q", router.Classic, nil)
			require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/queues/q", nil), msg("again")))
			assert.Equal(t, "again", body(recv(t, receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 1}))))
		})
	}
}

// A publisher attached to a queue declared again after its first
// incarnation's deletion is not detached by that old deletion.
func TestDeletedQueueSparesLinksOfItsSuccessor(t *testing.T) {
	b := startBroker(t, "")
	vh := rootVHost(t, b)
	declareQueue(t, b, "q", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	old := sender(t, s, "/queues/q", nil)
	_, err := vh.DeleteQueue("q")
	require.NoError(t, err)
	requireDetachedDeleted(t, publishUntilDetached(t, old))
	declareQueue(t, b, "q", router.Classic, nil)
	pub := sender(t, s, "/queues/q", nil)
	// Deleting another queue detaches nothing here.
	declareQueue(t, b, "x", router.Classic, nil)
	_, err = vh.DeleteQueue("x")
	require.NoError(t, err)
	require.IsType(t, &amqp.StateAccepted{}, send(t, pub, msg("new")))
	assert.Equal(t, 1, queueLen(t, b, "q"))
}

func TestDeletedExchangeReleasesAndDetachesPublisher(t *testing.T) {
	b := startBroker(t, "")
	vh := rootVHost(t, b)
	_, err := vh.DeclareExchange(router.ExchangeSpec{Name: "x", Type: router.ExchangeDirect})
	require.NoError(t, err)
	s := session(t, dial(t, b, nil))
	pub := sender(t, s, "/exchanges/x/k", nil)
	require.IsType(t, &amqp.StateReleased{}, send(t, pub, msg("unrouted")))
	require.NoError(t, vh.DeleteExchange("x"))

	// The next message is released, then the link detached with not-found
	// (go-amqp may surface the detach before the outcome).
	rcpt, err := pub.SendWithReceipt(ctxT(t), msg("gone"), nil)
	if err == nil {
		var st amqp.DeliveryState
		if st, err = rcpt.Wait(ctxT(t)); err == nil {
			require.IsType(t, &amqp.StateReleased{}, st)
			err = pub.Send(ctxT(t), msg("after"), nil)
		}
	}
	re := remoteLinkErr(t, err)
	assert.Equal(t, amqp.ErrCond(amqp10.ErrCondNotFound), re.Condition)
	assert.Equal(t, "no exchange 'x' in vhost '/'", re.Description)
}

func TestAnonymousTerminusAddressForms(t *testing.T) {
	b := startBroker(t, "")
	vh := rootVHost(t, b)
	declareQueue(t, b, "q", router.Classic, nil)
	_, err := vh.DeclareExchange(router.ExchangeSpec{Name: "x", Type: router.ExchangeDirect})
	require.NoError(t, err)
	s := session(t, dial(t, b, nil))
	anon := sender(t, s, "", nil)
	to := func(addr string) *amqp.Message {
		m := msg(addr)
		m.Properties = &amqp.MessageProperties{To: &addr}
		return m
	}
	rejectedWith := func(addr string, cond amqp10.ErrCond, desc string) {
		t.Helper()
		st := send(t, anon, to(addr))
		require.IsType(t, &amqp.StateRejected{}, st, addr)
		e := st.(*amqp.StateRejected).Error
		require.NotNil(t, e, addr)
		assert.Equal(t, amqp.ErrCond(cond), e.Condition, addr)
		assert.Equal(t, desc, e.Description, addr)
	}
	// A missing queue is the default exchange with nowhere to route: released.
	require.IsType(t, &amqp.StateReleased{}, send(t, anon, to("/queues/missing")))
	require.IsType(t, &amqp.StateAccepted{}, send(t, anon, to("/queues/q")))
	require.IsType(t, &amqp.StateReleased{}, send(t, anon, to("/exchanges/x")))
	require.IsType(t, &amqp.StateReleased{}, send(t, anon, to("/exchanges/x/k")))
	rejectedWith("/exchanges/missing", amqp10.ErrCondNotFound, "no exchange 'missing' in vhost '/'")
	rejectedWith("/exchanges/missing/k", amqp10.ErrCondNotFound, "no exchange 'missing' in vhost '/'")
	// v1 forms and the default exchange by name are no 'to' address.
	for _, bad := range []string{"/queue/q", "/amq/queue/q", "/exchange/x/k", "/topic/k", "q",
		"/exchanges/amq.default/q", "/exchanges//q"} {
		rejectedWith(bad, amqp10.ErrCondPreconditionFailed, "bad 'to' address string: "+bad)
	}
	st := send(t, anon, msg("no to"))
	require.IsType(t, &amqp.StateRejected{}, st)
	assert.Equal(t, "anonymous terminus requires 'to' address to be set", st.(*amqp.StateRejected).Error.Description)
	// The link stayed attached through all of it.
	require.IsType(t, &amqp.StateAccepted{}, send(t, anon, to("/queues/q")))
	assert.Equal(t, 2, queueLen(t, b, "q"))
}

// The official client's specs "Send a message to a deleted queue should
// fail" and "Multi Targets NewPublisher should fail with StateReleased when
// the destination does not exist", and a consumer of a deleted queue.
func TestRabbitMQClientDeletedQueue(t *testing.T) {
	b := startBroker(t, "")
	c := rmqConnect(t, b, "guest", "guest")
	m := c.Management()
	_, err := m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "dq"})
	require.NoError(t, err)
	pub, err := c.NewPublisher(ctxT(t), &rmq.QueueAddress{Queue: "dq"}, nil)
	require.NoError(t, err)
	cons, err := c.NewConsumer(ctxT(t), "dq", nil)
	require.NoError(t, err)
	rmqPublish(t, pub, "hello")
	require.NoError(t, rmqReceive(t, cons).Accept(ctxT(t)))
	require.NoError(t, m.DeleteQueue(ctxT(t), "dq"))

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = cons.Receive(ctx)
	requireDetachedDeleted(t, err)
	eventually(t, "publish fails", func() bool {
		res, err := pub.Publish(ctxT(t), amqp.NewMessage([]byte("hello")))
		if err != nil {
			return true
		}
		require.IsType(t, &rmq.StateReleased{}, res.Outcome)
		return false
	})

	anon, err := c.NewPublisher(ctxT(t), nil, nil)
	require.NoError(t, err)
	msgTo, err := rmq.NewMessageWithAddress([]byte("hello"), &rmq.QueueAddress{Queue: "missing"})
	require.NoError(t, err)
	res, err := anon.Publish(ctxT(t), msgTo)
	require.NoError(t, err)
	require.IsType(t, &rmq.StateReleased{}, res.Outcome)
}

// Deleting a vhost deletes its queues: their links are detached too.
func TestDeletedVHostDetachesQueueLinks(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	api(t, base, "PUT", "/api/vhosts/v", nil, 201)
	api(t, base, "PUT", "/api/permissions/v/guest", map[string]string{"configure": ".*", "write": ".*", "read": ".*"}, 204)
	vh, ok := b.Router().VHost("v")
	require.True(t, ok)
	_, _, err := vh.DeclareQueue(router.QueueSpec{Name: "q", Durable: true})
	require.NoError(t, err)
	s := session(t, dial(t, b, &amqp.ConnOptions{HostName: "vhost:v", SASLType: amqp.SASLTypePlain("guest", "guest")}))
	pub := sender(t, s, "/queues/q", nil)
	cons := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 1})
	api(t, base, "DELETE", "/api/vhosts/v", nil, 204)
	_, err = cons.Receive(ctxT(t), nil)
	requireDetachedDeleted(t, err)
	requireDetachedDeleted(t, publishUntilDetached(t, pub))
}
