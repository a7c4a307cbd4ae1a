package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// The official RabbitMQ AMQP 1.0 Go client (v1.0.0), unchanged, against
// epitaph: topology through the /management node, publish, consume, the
// consumer outcomes and the dead letters they produce.

// rmqConnect opens a client connection as user (SASL PLAIN) to vhost "/".
func rmqConnect(t *testing.T, b *epitaph.Broker, user, password string) *rmq.AmqpConnection {
	t.Helper()
	env := rmq.NewEnvironment("amqp://"+user+":"+password+"@"+b.Addr().String()+"/", nil)
	conn, err := env.NewConnection(ctxT(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = env.CloseConnections(ctx)
	})
	return conn
}

// rmqReceive receives one delivery within the test's deadline.
func rmqReceive(t *testing.T, c *rmq.Consumer) rmq.IDeliveryContext {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	dc, err := c.Receive(ctx)
	require.NoError(t, err)
	return dc
}

func rmqBody(dc rmq.IDeliveryContext) string { return string(dc.Message().GetData()) }

// rmqPublish publishes bodies and requires each to be accepted.
func rmqPublish(t *testing.T, p *rmq.Publisher, bodies ...string) {
	t.Helper()
	for _, s := range bodies {
		res, err := p.Publish(ctxT(t), amqp.NewMessage([]byte(s)))
		require.NoError(t, err)
		require.IsType(t, &rmq.StateAccepted{}, res.Outcome, "publish %q", s)
	}
}

// rmqDeath returns the single x-opt-deaths entry of m.
func rmqDeath(t *testing.T, m *amqp.Message) map[any]any {
	t.Helper()
	v, ok := m.Annotations["x-opt-deaths"]
	require.True(t, ok, "no x-opt-deaths in %v", m.Annotations)
	deaths, ok := v.([]map[any]any)
	require.True(t, ok, "x-opt-deaths is %T", v)
	require.Len(t, deaths, 1)
	return deaths[0]
}

// rmqWaitCount polls QueueInfo until the queue holds want messages.
func rmqWaitCount(t *testing.T, m *rmq.AmqpManagement, queue string, want uint64) {
	t.Helper()
	var got uint64
	eventually(t, "message count of "+queue, func() bool {
		qi, err := m.QueueInfo(ctxT(t), queue)
		require.NoError(t, err)
		got = qi.MessageCount()
		return got == want
	})
}

func TestRabbitMQClientDeadLetterFlow(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()
	ctx := ctxT(t)

	// topology: a fanout DLX, a quorum DLQ bound to it, and a quorum work
	// queue dead-lettering to it with delivery limit 1
	_, err := m.DeclareExchange(ctx, &rmq.FanOutExchangeSpecification{Name: "dlx"})
	require.NoError(t, err)
	dlq, err := m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: "dlq"})
	require.NoError(t, err)
	assert.Equal(t, rmq.Quorum, dlq.Type())
	bindPath, err := m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "dlx", DestinationQueue: "dlq"})
	require.NoError(t, err)
	assert.Equal(t, "/bindings/src=dlx;dstq=dlq;key=;args=", bindPath)

	work, err := m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: "work", DeadLetterExchange: "dlx", DeliveryLimit: 1})
	require.NoError(t, err)
	assert.Equal(t, "work", work.Name())
	assert.Equal(t, rmq.Quorum, work.Type())
	assert.True(t, work.IsDurable())
	assert.False(t, work.IsAutoDelete())
	assert.False(t, work.IsExclusive())
	assert.NotEmpty(t, work.Leader())
	assert.Equal(t, []string{work.Leader()}, work.Members())
	assert.Equal(t, map[string]any{"x-queue-type": "quorum", "x-dead-letter-exchange": "dlx", "x-delivery-limit": int64(1)}, work.Arguments())
	assert.Equal(t, uint32(0), work.ConsumerCount())
	assert.Equal(t, uint64(0), work.MessageCount())

	// an equivalent redeclare succeeds; different arguments are ErrPreconditionFailed (409)
	_, err = m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: "work", DeadLetterExchange: "dlx", DeliveryLimit: 1})
	require.NoError(t, err)
	_, err = m.DeclareQueue(ctx, &rmq.QuorumQueueSpecification{Name: "work", DeadLetterExchange: "other", DeliveryLimit: 1})
	require.ErrorIs(t, err, rmq.ErrPreconditionFailed)
	_, err = m.DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: "work"})
	require.ErrorIs(t, err, rmq.ErrPreconditionFailed)
	_, err = m.DeclareExchange(ctx, &rmq.DirectExchangeSpecification{Name: "dlx"})
	require.ErrorIs(t, err, rmq.ErrPreconditionFailed)

	pub, err := conn.NewPublisher(ctx, &rmq.QueueAddress{Queue: "work"}, nil)
	require.NoError(t, err)
	cons, err := conn.NewConsumer(ctx, "work", nil)
	require.NoError(t, err)

	// m1: Discard with an error → rejected, with the error annotations
	rmqPublish(t, pub, "m1")
	dc := rmqReceive(t, cons)
	require.Equal(t, "m1", rmqBody(dc))
	require.NoError(t, dc.Discard(ctx, &amqp.Error{Condition: "amqp:internal-error", Description: "cannot process m1"}))

	// m2: DiscardWithAnnotations → rejected, the annotations merged in (quorum)
	rmqPublish(t, pub, "m2")
	dc = rmqReceive(t, cons)
	require.Equal(t, "m2", rmqBody(dc))
	require.NoError(t, dc.DiscardWithAnnotations(ctx, amqp.Annotations{"x-opt-why": "bad"}))

	// m3: Requeue (released) three times does not count towards the limit of 1,
	// nor does RequeueWithAnnotations (modified, delivery-failed false)
	rmqPublish(t, pub, "m3")
	for range 3 {
		dc = rmqReceive(t, cons)
		require.Equal(t, "m3", rmqBody(dc))
		require.NoError(t, dc.Requeue(ctx))
	}
	dc = rmqReceive(t, cons)
	require.Equal(t, "m3", rmqBody(dc))
	require.NoError(t, dc.RequeueWithAnnotations(ctx, amqp.Annotations{"x-opt-note": "n"}))
	dc = rmqReceive(t, cons)
	require.Equal(t, "m3", rmqBody(dc))
	assert.Equal(t, "n", dc.Message().Annotations["x-opt-note"], "requeue annotations are merged")
	if h := dc.Message().Header; h != nil {
		assert.Zero(t, h.DeliveryCount, "released and modified(delivery-failed=false) do not count")
	}
	require.NoError(t, dc.Requeue(ctx))
	// wait until the consumer holds m3 again before closing it (it is
	// returned to the queue either way; this keeps the test deterministic)
	dc = rmqReceive(t, cons)
	require.Equal(t, "m3", rmqBody(dc))
	require.NoError(t, dc.Requeue(ctx))
	require.NoError(t, cons.Close(ctx))
	eventually(t, "m3 back in work with no consumer", func() bool {
		qi, err := m.QueueInfo(ctxT(t), "work")
		require.NoError(t, err)
		return qi.MessageCount() == 1 && qi.ConsumerCount() == 0
	})

	// v1.0.0 has no RequeueWithAnnotationsAndDeliveryFailed: fail m3 past
	// its delivery limit with go-amqp's modified{delivery-failed}
	s := session(t, dial(t, b, nil))
	r := receiver(t, s, "/queues/work", nil)
	for i := range 2 {
		msg := recv(t, r)
		require.Equal(t, "m3", body(msg))
		require.NotNil(t, msg.Header)
		require.Equal(t, uint32(i), msg.Header.DeliveryCount)
		require.NoError(t, r.ModifyMessage(ctx, msg, &amqp.ModifyMessageOptions{DeliveryFailed: true}))
	}
	require.NoError(t, r.Close(ctx))
	rmqWaitCount(t, m, "work", 0)
	rmqWaitCount(t, m, "dlq", 3)

	// read the dead letters with the client
	dl, err := conn.NewConsumer(ctx, "dlq", nil)
	require.NoError(t, err)

	d := rmqReceive(t, dl)
	require.Equal(t, "m1", rmqBody(d))
	anns := d.Message().Annotations
	death := rmqDeath(t, d.Message())
	assert.Equal(t, "work", death["queue"])
	assert.Equal(t, "rejected", death["reason"])
	assert.Equal(t, uint64(1), death["count"])
	assert.Equal(t, "", death["exchange"])
	assert.Equal(t, []string{"work"}, death["routing-keys"])
	assert.Equal(t, "rejected", anns["x-first-death-reason"])
	assert.Equal(t, "work", anns["x-last-death-queue"])
	assert.Equal(t, "amqp:internal-error", anns["x-last-death-error-condition"])
	assert.Equal(t, "cannot process m1", anns["x-last-death-error-description"])
	require.NoError(t, d.Accept(ctx))

	d = rmqReceive(t, dl)
	require.Equal(t, "m2", rmqBody(d))
	death = rmqDeath(t, d.Message())
	assert.Equal(t, "rejected", death["reason"])
	assert.Equal(t, "bad", d.Message().Annotations["x-opt-why"])
	require.NoError(t, d.Accept(ctx))

	d = rmqReceive(t, dl)
	require.Equal(t, "m3", rmqBody(d))
	death = rmqDeath(t, d.Message())
	assert.Equal(t, "delivery_limit", death["reason"])
	assert.Equal(t, "work", death["queue"])
	assert.Equal(t, "delivery_limit", d.Message().Annotations["x-last-death-reason"])
	assert.Equal(t, "n", d.Message().Annotations["x-opt-note"], "modified annotations survive dead-lettering")
	require.NotNil(t, d.Message().Header)
	assert.Equal(t, uint32(2), d.Message().Header.DeliveryCount)
	require.NoError(t, d.Accept(ctx))
	rmqWaitCount(t, m, "dlq", 0)

	qi, err := m.QueueInfo(ctx, "dlq")
	require.NoError(t, err)
	assert.Equal(t, uint32(1), qi.ConsumerCount())
	require.NoError(t, dl.Close(ctx))

	// purge, unbind, delete
	rmqPublish(t, pub, "p1", "p2")
	rmqWaitCount(t, m, "work", 2)
	n, err := m.PurgeQueue(ctx, "work")
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	rmqWaitCount(t, m, "work", 0)

	require.NoError(t, m.Unbind(ctx, bindPath))
	for _, bd := range rootVHost(t, b).Bindings() {
		assert.NotEqual(t, "dlx", bd.Source, "binding %v survived Unbind", bd)
	}
	require.NoError(t, pub.Close(ctx))
	require.NoError(t, m.DeleteQueue(ctx, "work"))
	_, err = m.QueueInfo(ctx, "work")
	require.ErrorIs(t, err, rmq.ErrDoesNotExist)
	require.NoError(t, m.DeleteQueue(ctx, "dlq"))
	require.NoError(t, m.DeleteExchange(ctx, "dlx"))
	assert.False(t, rootVHost(t, b).HasExchange("dlx"))
}

func TestRabbitMQClientClassicQueueAndExchanges(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	m := conn.Management()
	ctx := ctxT(t)

	_, err := m.DeclareExchange(ctx, &rmq.DirectExchangeSpecification{Name: "orders"})
	require.NoError(t, err)
	_, err = m.DeclareExchange(ctx, &rmq.TopicExchangeSpecification{Name: "dead"})
	require.NoError(t, err)
	_, err = m.DeclareExchange(ctx, &rmq.FanOutExchangeSpecification{Name: "fan"})
	require.NoError(t, err)
	_, err = m.DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: "parking lot/1"})
	require.NoError(t, err)
	_, err = m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "dead", DestinationQueue: "parking lot/1", BindingKey: "dead.#"})
	require.NoError(t, err)

	q, err := m.DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: "orders.new",
		DeadLetterExchange: "dead", DeadLetterRoutingKey: "dead.orders", MaxLength: 100})
	require.NoError(t, err)
	assert.Equal(t, rmq.Classic, q.Type())
	assert.Equal(t, map[string]any{"x-queue-type": "classic", "x-dead-letter-exchange": "dead",
		"x-dead-letter-routing-key": "dead.orders", "x-max-length": int64(100)}, q.Arguments())
	_, err = m.DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: "orders.new", DeadLetterExchange: "dead", DeadLetterRoutingKey: "other"})
	require.ErrorIs(t, err, rmq.ErrPreconditionFailed)

	// a queue without a type gets the default (classic), reported in its arguments
	dq, err := m.DeclareQueue(ctx, &rmq.DefaultQueueSpecification{Name: "default"})
	require.NoError(t, err)
	assert.Equal(t, rmq.Classic, dq.Type())
	assert.Equal(t, map[string]any{"x-queue-type": "classic"}, dq.Arguments())

	// exchange-to-exchange and exchange-to-queue bindings with keys
	_, err = m.Bind(ctx, &rmq.ExchangeToExchangeBindingSpecification{SourceExchange: "fan", DestinationExchange: "orders", BindingKey: "ignored"})
	require.NoError(t, err)
	_, err = m.Bind(ctx, &rmq.ExchangeToQueueBindingSpecification{SourceExchange: "orders", DestinationQueue: "orders.new", BindingKey: "new"})
	require.NoError(t, err)

	pub, err := conn.NewPublisher(ctx, &rmq.ExchangeAddress{Exchange: "orders", Key: "new"}, nil)
	require.NoError(t, err)
	rmqPublish(t, pub, "o1")
	res, err := pub.Publish(ctx, amqp.NewMessage([]byte("nowhere"))) // same key: routed
	require.NoError(t, err)
	require.IsType(t, &rmq.StateAccepted{}, res.Outcome)

	cons, err := conn.NewConsumer(ctx, "orders.new", nil)
	require.NoError(t, err)
	dc := rmqReceive(t, cons)
	require.Equal(t, "o1", rmqBody(dc))
	require.NoError(t, dc.Discard(ctx, nil))
	dc = rmqReceive(t, cons)
	require.NoError(t, dc.Accept(ctx))
	require.NoError(t, cons.Close(ctx))

	dl, err := conn.NewConsumer(ctx, "parking lot/1", nil)
	require.NoError(t, err)
	d := rmqReceive(t, dl)
	require.Equal(t, "o1", rmqBody(d))
	death := rmqDeath(t, d.Message())
	assert.Equal(t, "orders.new", death["queue"])
	assert.Equal(t, "rejected", death["reason"])
	assert.Equal(t, "orders", death["exchange"])
	assert.Equal(t, []string{"new"}, death["routing-keys"])
	require.NoError(t, d.Accept(ctx))
	require.NoError(t, dl.Close(ctx))

	// unbinding the queue stops routing: the publish is released (unroutable)
	require.NoError(t, m.Unbind(ctx, "/bindings/src=orders;dstq=orders.new;key=new;args="))
	res, err = pub.Publish(ctx, amqp.NewMessage([]byte("unroutable")))
	require.NoError(t, err)
	require.IsType(t, &rmq.StateReleased{}, res.Outcome)
	require.NoError(t, pub.Close(ctx))

	// reserved names and the default exchange are refused
	_, err = m.DeclareQueue(ctx, &rmq.ClassicQueueSpecification{Name: "amq.mine"})
	require.Error(t, err)
	_, err = m.DeclareExchange(ctx, &rmq.DirectExchangeSpecification{Name: "amq.mine"})
	require.Error(t, err)
	_, err = m.QueueInfo(ctx, "missing")
	require.ErrorIs(t, err, rmq.ErrDoesNotExist)

	for _, name := range []string{"orders.new", "parking lot/1", "default"} {
		require.NoError(t, m.DeleteQueue(ctx, name))
	}
	// deleting twice is fine, as in RabbitMQ
	require.NoError(t, m.DeleteQueue(ctx, "default"))
	for _, name := range []string{"orders", "dead", "fan"} {
		require.NoError(t, m.DeleteExchange(ctx, name))
	}
	assert.Empty(t, rootVHost(t, b).Queues())
}
