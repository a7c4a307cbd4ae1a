package e2e

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/internal/testhooks"
)

// TestAMQP091ConfirmsAndReturns: publisher confirms ack routed and
// unroutable messages, nack a reject-publish refusal; a mandatory
// unroutable message comes back as basic.return 312 NO_ROUTE first.
func TestAMQP091ConfirmsAndReturns(t *testing.T) {
	b := startBroker(t, `{"queues":[{"name":"one","vhost":"/","durable":true,"arguments":{"x-max-length":1,"x-overflow":"reject-publish"}}]}`)
	ch := channel091(t, dial091(t, b))
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 10))
	pub := func(rk string, mandatory bool) {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", rk, mandatory, false, amqp091.Publishing{Body: []byte(rk), MessageId: "id-" + rk}))
	}
	pub("one", false)     // 1: accepted
	pub("one", false)     // 2: refused (reject-publish): nack
	pub("nowhere", true)  // 3: returned, then acked
	pub("nowhere", false) // 4: dropped, acked
	want := []bool{true, false, true, true}
	for i, ack := range want {
		select {
		case c := <-confirms:
			assert.Equal(t, uint64(i+1), c.DeliveryTag)
			assert.Equal(t, ack, c.Ack, "confirm %d", i+1)
		case <-time.After(5 * time.Second):
			t.Fatalf("no confirm %d", i+1)
		}
	}
	select {
	case r := <-returns:
		assert.Equal(t, uint16(312), r.ReplyCode)
		assert.Equal(t, "NO_ROUTE", r.ReplyText)
		assert.Equal(t, "nowhere", r.RoutingKey)
		assert.Equal(t, "id-nowhere", r.MessageId)
		assert.Equal(t, "nowhere", string(r.Body))
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.return")
	}
	assert.Empty(t, returns)
}

// TestAMQP091ChannelCloseCountsDelivery: unacknowledged messages return to
// their queue when the channel closes (even cleanly), counted as a failed
// delivery (RabbitMQ 4.3), so a quorum queue's delivery limit applies;
// basic.cancel leaves them checked out and settleable.
func TestAMQP091ChannelCloseCountsDelivery(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"qq","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-delivery-limit":1,"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dl"}},
		{"name":"dl","vhost":"/","durable":true,"arguments":{}}]}`)
	c := dial091(t, b)
	pub := channel091(t, c)
	require.NoError(t, pub.PublishWithContext(ctxT(t), "", "qq", false, false, amqp091.Publishing{Body: []byte("m")}))
	for i := range 2 {
		ch := channel091(t, c)
		ds, err := ch.Consume("qq", "", false, false, false, false, nil)
		require.NoError(t, err)
		d := recv091(t, ds)
		assert.Equal(t, i > 0, d.Redelivered)
		require.NoError(t, ch.Close()) // unacked: delivery-count +1
	}
	eventually(t, "dead-lettered after the second close", func() bool { return queueLen(t, b, "dl") == 1 })
	d := get091(t, pub, "dl", true)
	xd := d.Headers["x-death"].([]any)
	assertXDeath(t, xd[0], "qq", "delivery_limit", 1, "", []any{"qq"})

	// basic.cancel: the unacked delivery can still be acked.
	require.NoError(t, pub.PublishWithContext(ctxT(t), "", "qq", false, false, amqp091.Publishing{Body: []byte("n")}))
	ch := channel091(t, c)
	ds, err := ch.Consume("qq", "k", false, false, false, false, nil)
	require.NoError(t, err)
	d = recv091(t, ds)
	require.NoError(t, ch.Cancel("k", false))
	require.NoError(t, d.Ack(false))
	eventually(t, "acked after cancel", func() bool { return queueLen(t, b, "qq") == 0 && unacked(t, b, "qq") == 0 })
	_, err = ch.QueueDeclarePassive("qq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
	require.NoError(t, err, "the channel is still open")
}

// TestAMQP091PrefetchMultipleRecover: basic.qos bounds the unacknowledged
// deliveries; ack with multiple settles every tag up to it; basic.recover
// redelivers the rest.
func TestAMQP091PrefetchMultipleRecover(t *testing.T) {
	b := startBroker(t, "")
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("pf", true, false, false, false, nil)
	require.NoError(t, err)
	for range 10 {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "pf", false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	require.NoError(t, ch.Qos(3, 0, false))
	ds, err := ch.Consume("pf", "", false, false, false, false, nil)
	require.NoError(t, err)
	var last amqp091.Delivery
	for range 3 {
		last = recv091(t, ds)
	}
	select {
	case d := <-ds:
		t.Fatalf("a fourth delivery (tag %d) beyond prefetch 3", d.DeliveryTag)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, last.Ack(true)) // tags 1..3
	for range 3 {
		last = recv091(t, ds)
	}
	assert.Equal(t, uint64(6), last.DeliveryTag)
	eventually(t, "3 unacked", func() bool { return unacked(t, b, "pf") == 3 })
	//lint:ignore SA1019 basic.recover is AMQP 0-9-1, which the broker serves
	require.NoError(t, ch.Recover(true))
	for range 3 {
		d := recv091(t, ds)
		assert.True(t, d.Redelivered)
		require.NoError(t, d.Ack(false))
	}
	eventually(t, "4 left", func() bool { return queueLen(t, b, "pf")+unacked(t, b, "pf") == 4 })
}

// TestAMQP091GetAndCancelNotify: basic.get answers get-empty on an empty
// queue; a consumer of a deleted queue is sent basic.cancel.
func TestAMQP091GetAndCancelNotify(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	ch := channel091(t, c)
	_, err := ch.QueueDeclare("g", true, false, false, false, nil)
	require.NoError(t, err)
	_, ok, err := ch.Get("g", false)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "g", false, false, amqp091.Publishing{Body: []byte("1")}))
	d := get091(t, ch, "g", false)
	assert.Equal(t, uint32(0), d.MessageCount)
	require.NoError(t, d.Nack(false, true))
	d = get091(t, ch, "g", false)
	assert.True(t, d.Redelivered)
	require.NoError(t, d.Ack(false))
	// basic.get is no consumer: not counted, and no obstacle to an
	// exclusive consumer.
	info, err := ch.QueueDeclarePassive("g", true, false, false, false, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, info.Consumers)
	excl := channel091(t, c)
	_, err = excl.Consume("g", "excl", false, true, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, excl.Cancel("excl", false))

	cancels := ch.NotifyCancel(make(chan string, 1))
	_, err = ch.Consume("g", "watcher", false, false, false, false, nil)
	require.NoError(t, err)
	other := channel091(t, c)
	n, err := other.QueueDelete("g", false, false, false)
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	select {
	case tag := <-cancels:
		assert.Equal(t, "watcher", tag)
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel from the broker")
	}
}

// TestAMQP091ExclusiveAndExchangeBindings: an exclusive queue goes with its
// connection; exchange-to-exchange bindings route; queue.unbind and
// exchange.unbind stop it.
func TestAMQP091ExclusiveAndExchangeBindings(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	ch := channel091(t, c)
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("src", "topic", false, false, false, false, nil))
	require.NoError(t, ch.ExchangeDeclare("dst", "fanout", false, false, false, false, nil))
	require.NoError(t, ch.ExchangeBind("dst", "a.*", "src", false, nil))
	require.NoError(t, ch.QueueBind(q.Name, "", "dst", false, nil))
	require.NoError(t, ch.PublishWithContext(ctxT(t), "src", "a.b", false, false, amqp091.Publishing{Body: []byte("via e2e")}))
	d := get091(t, ch, q.Name, true)
	assert.Equal(t, "via e2e", string(d.Body))
	assert.Equal(t, "src", d.Exchange)
	require.NoError(t, ch.ExchangeUnbind("dst", "a.*", "src", false, nil))
	require.NoError(t, ch.Confirm(false))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	require.NoError(t, ch.PublishWithContext(ctxT(t), "src", "a.b", true, false, amqp091.Publishing{}))
	select {
	case <-returns:
	case <-time.After(5 * time.Second):
		t.Fatal("still routed after exchange.unbind")
	}
	_, ok := rootVHost(t, b).Queue(q.Name)
	require.True(t, ok)
	require.NoError(t, c.Close())
	eventually(t, "exclusive queue deleted with its connection", func() bool {
		_, ok := rootVHost(t, b).Queue(q.Name)
		return !ok
	})
}

// TestAMQP091Negotiation: amqp091-channel-max (not AMQP 1.0's channel-max)
// bounds channel.open, and its default is RabbitMQ's 2047; a failed login
// is answered with 403 to a client with authentication_failure_close.
func TestAMQP091Negotiation(t *testing.T) {
	def := startBroker(t, "")
	dc, err := amqp091.Dial("amqp://guest:guest@" + def.Addr().String() + "/")
	require.NoError(t, err)
	assert.Equal(t, uint16(2047), dc.Config.ChannelMax)
	require.NoError(t, dc.Close())

	b := startBroker(t, "", func(o *epitaph.Options) { o.AMQP091ChannelMax = 2; o.ChannelMax = 100; o.AuthFailureDelay = 0 })
	url := "amqp://guest:guest@" + b.Addr().String() + "/"
	c, err := amqp091.DialConfig(url, amqp091.Config{Heartbeat: time.Second})
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, uint16(2), c.Config.ChannelMax)
	for range 2 {
		_, err := c.Channel()
		require.NoError(t, err)
	}
	_, err = c.Channel()
	require.Error(t, err) // amqp091-go refuses beyond the negotiated channel-max itself

	_, err = amqp091.Dial("amqp://guest:wrong@" + b.Addr().String() + "/")
	e := amqp091Error(t, err)
	assert.Equal(t, 403, e.Code)
	// amqp091-go reports the 403 close as its ErrCredentials; the reply
	// text is asserted over raw frames (TestAMQP091RawLoginRefused).

	_, err = amqp091.Dial("amqp://guest:guest@" + b.Addr().String() + "/nohost")
	e = amqp091Error(t, err)
	assert.Equal(t, 530, e.Code)
	assert.Equal(t, "NOT_ALLOWED - vhost nohost not found", e.Reason)

	// Heartbeats keep an idle connection open past twice the interval.
	time.Sleep(2500 * time.Millisecond) // the idle period under test, not synchronisation
	assert.False(t, c.IsClosed())
	ch, err := c.Channel()
	if err == nil {
		_ = ch.Close()
	}
}

// TestAMQP091CrossProtocolConsumers: a 0-9-1 publish goes to an AMQP 1.0
// consumer that settles it, and a 1.0 publish to a 0-9-1 consumer, on the
// same queue.
func TestAMQP091CrossProtocolConsumers(t *testing.T) {
	b := startBroker(t, `{"queues":[{"name":"x","vhost":"/","durable":true}]}`)
	ch := channel091(t, dial091(t, b))
	s := session(t, dial(t, b, nil))
	r := receiver(t, s, "/queues/x", nil)
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "x", false, false, amqp091.Publishing{Body: []byte("to 1.0")}))
	m := recv(t, r)
	assert.Equal(t, "to 1.0", string(m.GetData()))
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
	require.NoError(t, r.Close(ctxT(t)))
	publish(t, s, "/queues/x", amqp.NewMessage([]byte("to 0-9-1")))
	d := get091(t, ch, "x", false)
	assert.Equal(t, "to 0-9-1", string(d.Body))
	require.NoError(t, d.Ack(false))
}

// TestAMQP091Metrics: 0-9-1 traffic is counted under protocol="amqp091"
// in RabbitMQ's global families, and in epitaph's connection gauges.
func TestAMQP091Metrics(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.HTTPListen = "127.0.0.1:0"
		o.Telemetry.Metrics = true
	})
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("met", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
	for _, rk := range []string{"met", "met", "nowhere"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", rk, rk == "nowhere", false, amqp091.Publishing{}))
	}
	for range 3 {
		<-confirms
	}
	d := get091(t, ch, "met", false)
	require.NoError(t, d.Ack(false))
	ds, err := ch.Consume("met", "", true, false, false, false, nil)
	require.NoError(t, err)
	recv091(t, ds)
	wants := []string{
		`epitaph_connections 1`,
		`rabbitmq_global_messages_received_total{protocol="amqp091"} 3`,
		`rabbitmq_global_messages_received_confirm_total{protocol="amqp091"} 3`,
		`rabbitmq_global_messages_routed_total{protocol="amqp091"} 2`,
		`rabbitmq_global_messages_unroutable_returned_total{protocol="amqp091"} 1`,
		`rabbitmq_global_messages_confirmed_total{protocol="amqp091"} 2`,
		`rabbitmq_global_consumers{protocol="amqp091"} 1`,
		`rabbitmq_global_messages_delivered_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 2`,
		`rabbitmq_global_messages_delivered_consume_auto_ack_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 1`,
		`rabbitmq_global_messages_acknowledged_total{protocol="amqp091",queue_type="rabbit_classic_queue"} 1`,
		`rabbitmq_global_messages_received_total{protocol="amqp10"} 0`,
	}
	// A delivery is counted by the connection's loop after it is written,
	// so the client may hold it a moment before the counters show it.
	var text string
	missing := func() []string {
		text = scrape(t, b)
		var out []string
		for _, want := range wants {
			if !strings.Contains(text, want) {
				out = append(out, want)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.Empty(t, missing(), "metrics:\n%s", text)
}

// TestAMQP091Blocked: a resource alarm sends connection.blocked ("low on
// memory") to a client with the capability and holds its publishes; the
// alarm's end sends connection.unblocked and the held publish is confirmed.
func TestAMQP091Blocked(t *testing.T) {
	var used atomic.Uint64
	used.Store(1 << 20)
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.MemoryHighWatermark = 1 << 30
		testhooks.SetAlarms(o, testhooks.Alarms{MemoryUsed: used.Load, Interval: 20 * time.Millisecond})
	})
	c := dial091(t, b)
	blocks := c.NotifyBlocked(make(chan amqp091.Blocking, 2))
	ch := channel091(t, c)
	_, err := ch.QueueDeclare("blk", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))

	used.Store(1 << 31)
	select {
	case bl := <-blocks:
		assert.True(t, bl.Active)
		assert.Equal(t, "low on memory", bl.Reason)
	case <-time.After(5 * time.Second):
		t.Fatal("no connection.blocked")
	}
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "blk", false, false, amqp091.Publishing{Body: []byte("held")}))
	select {
	case <-confirms:
		t.Fatal("a publish was confirmed during the alarm")
	case <-time.After(200 * time.Millisecond): // the alarm holds it: nothing to wait for
	}
	assert.Equal(t, 0, queueLen(t, b, "blk"))
	used.Store(1 << 20)
	select {
	case bl := <-blocks:
		assert.False(t, bl.Active)
	case <-time.After(5 * time.Second):
		t.Fatal("no connection.unblocked")
	}
	select {
	case cf := <-confirms:
		assert.True(t, cf.Ack)
	case <-time.After(5 * time.Second):
		t.Fatal("the held publish was not confirmed")
	}
	assert.Equal(t, 1, queueLen(t, b, "blk"))
}

// TestAMQP091MaxConnections: a 0-9-1 connection beyond max-connections is
// refused with 530 at connection.open; the others keep working.
func TestAMQP091MaxConnections(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.MaxConnections = 1 })
	c := dial091(t, b)
	_, err := amqp091.Dial("amqp://guest:guest@" + b.Addr().String() + "/")
	e := amqp091Error(t, err)
	assert.Equal(t, 530, e.Code)
	assert.Contains(t, e.Reason, "NOT_ALLOWED - connection refused: node connection limit (1) is reached")
	ch := channel091(t, c)
	_, err = ch.QueueDeclare("", false, false, true, false, nil)
	require.NoError(t, err)
}

// TestAMQP091CancelledConsumerEndsWithChannel: a consumer cancelled with an
// unacknowledged delivery keeps it until the channel closes, which returns
// it to the queue.
func TestAMQP091CancelledConsumerEndsWithChannel(t *testing.T) {
	b := startBroker(t, `{"queues":[{"name":"cq","vhost":"/","durable":true}]}`)
	c := dial091(t, b)
	ch := channel091(t, c)
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "cq", false, false, amqp091.Publishing{Body: []byte("a")}))
	ds, err := ch.Consume("cq", "k", false, false, false, false, nil)
	require.NoError(t, err)
	recv091(t, ds)
	require.NoError(t, ch.Cancel("k", false))
	assert.Equal(t, 1, unacked(t, b, "cq"))
	require.NoError(t, ch.Close())
	eventually(t, "returned to the queue", func() bool { return queueLen(t, b, "cq") == 1 && unacked(t, b, "cq") == 0 })
	d := get091(t, channel091(t, c), "cq", true)
	assert.True(t, d.Redelivered)
}

// TestAMQP091ConnectionsInHTTPAPI: a 0-9-1 connection is listed by the
// HTTP API with its protocol, user, vhost and channels, and closing it
// there sends 320 CONNECTION_FORCED with the operator's reason.
func TestAMQP091ConnectionsInHTTPAPI(t *testing.T) {
	b := startBroker(t, connUsers, withHTTP)
	base := apiServer(t, b)
	c, err := amqp091.DialConfig("amqp://alice:conn-pw@"+b.Addr().String()+"/", amqp091.Config{
		Properties: amqp091.Table{"connection_name": "orders-091"}})
	require.NoError(t, err)
	defer c.Close()
	channel091(t, c)
	channel091(t, c)
	var row map[string]any
	eventually(t, "the connection with its two channels", func() bool {
		st, out := apiCallAs(t, base, "guest", "guest", "GET", "/api/connections", "")
		require.Equal(t, http.StatusOK, st, "%s", out)
		rows := apiJSON[[]map[string]any](t, out)
		require.Len(t, rows, 1, "%s", out)
		row = rows[0]
		return row["channels"] == float64(2)
	})
	assert.Equal(t, "AMQP 0-9-1", row["protocol"])
	assert.Equal(t, "alice", row["user"])
	assert.Equal(t, "/", row["vhost"])
	assert.Equal(t, "PLAIN", row["auth_mechanism"])
	assert.Equal(t, "orders-091", row["client_properties"].(map[string]any)["connection_name"])
	assert.Greater(t, row["send_oct"].(float64), float64(0))
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	st, out := closeWithReason(t, base, row["name"].(string), "maintenance")
	require.Equal(t, http.StatusNoContent, st, "%s", out)
	select {
	case e := <-closed:
		require.NotNil(t, e)
		assert.Equal(t, 320, e.Code)
		assert.Equal(t, "CONNECTION_FORCED - maintenance", e.Reason)
	case <-time.After(5 * time.Second):
		t.Fatal("not closed")
	}
}

// TestAMQP091CloseOkAfterChannelsEnded: the broker answers connection.close
// with close-ok only once every channel has ended, as RabbitMQ does: the
// consumers are gone, their unacknowledged messages are back in the queue
// and the exclusive queues are deleted, so a client that reconnects when
// Close returns (amqp091-go's own reconnect example) can consume
// exclusively at once.
func TestAMQP091CloseOkAfterChannelsEnded(t *testing.T) {
	b := startBroker(t, "")
	pub := channel091(t, dial091(t, b))
	_, err := pub.QueueDeclare("shared", false, false, false, false, nil)
	require.NoError(t, err)
	for i := range 20 {
		c, err := amqp091.Dial("amqp://guest:guest@" + b.Addr().String() + "/")
		require.NoError(t, err)
		ch := channel091(t, c)
		require.NoError(t, ch.Qos(1, 0, false))
		_, err = ch.QueueDeclare("mine", false, false, true, false, nil)
		require.NoError(t, err)
		ds, err := ch.Consume("shared", "", false, true, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, pub.Publish("", "shared", false, false, amqp091.Publishing{Body: []byte("m")}))
		assert.False(t, recv091(t, ds).Redelivered, "round %d", i)
		require.NoError(t, c.Close()) // returns on close-ok

		q, ok := rootVHost(t, b).Queue("shared")
		require.True(t, ok)
		info := q.Info()
		require.Zero(t, info.Consumers, "round %d: a consumer of the closed connection is still there", i)
		require.Equal(t, 1, info.Messages, "round %d: its unacknowledged message is not back", i)
		_, still := rootVHost(t, b).Queue("mine")
		require.False(t, still, "round %d: its exclusive queue is still there", i)
		// The message came back as a lost consumer's: redelivered.
		assert.True(t, get091(t, pub, "shared", true).Redelivered, "round %d", i)
	}
}
