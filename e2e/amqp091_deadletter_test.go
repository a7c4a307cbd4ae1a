package e2e

import (
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// assertXDeath checks one x-death table of a 0-9-1 delivery: exactly these
// fields and types (time within 5 s of now, in seconds).
func assertXDeath(t *testing.T, v any, queue, reason string, count int64, exchange string, rks []any, origExp ...string) {
	t.Helper()
	d, ok := v.(amqp091.Table)
	require.True(t, ok, "x-death entry is %T", v)
	n := 6
	if len(origExp) > 0 {
		n = 7
		assert.Equal(t, origExp[0], d["original-expiration"], "original-expiration")
	} else {
		assert.NotContains(t, d, "original-expiration")
	}
	assert.Len(t, d, n, "x-death fields: %v", d)
	assert.Equal(t, queue, d["queue"], "queue")
	assert.Equal(t, reason, d["reason"], "reason")
	assert.Equal(t, count, d["count"], "count")
	assert.Equal(t, exchange, d["exchange"], "exchange")
	assert.Equal(t, rks, d["routing-keys"], "routing-keys")
	tm, ok := d["time"].(time.Time)
	if assert.True(t, ok, "time is %T", d["time"]) {
		assert.WithinDuration(t, time.Now(), tm, 5*time.Second)
		assert.Zero(t, tm.Nanosecond(), "time is in seconds")
	}
}

// assertSix091 checks the six x-first/last-death-* headers, as longstr.
func assertSix091(t *testing.T, h amqp091.Table, fq, fr, fx, lq, lr, lx string) {
	t.Helper()
	assert.Equal(t, fq, h["x-first-death-queue"], "x-first-death-queue")
	assert.Equal(t, fr, h["x-first-death-reason"], "x-first-death-reason")
	assert.Equal(t, fx, h["x-first-death-exchange"], "x-first-death-exchange")
	assert.Equal(t, lq, h["x-last-death-queue"], "x-last-death-queue")
	assert.Equal(t, lr, h["x-last-death-reason"], "x-last-death-reason")
	assert.Equal(t, lx, h["x-last-death-exchange"], "x-last-death-exchange")
}

// TestAMQP091RejectedToAMQP10 is the spec's E7: a 0-9-1 publish to a quorum
// queue, basic.reject(requeue=false), the dead letter read over AMQP 1.0
// and over 0-9-1.
func TestAMQP091RejectedToAMQP10(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"work","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-dead-letter-exchange":"","x-dead-letter-routing-key":"work.dlq"}},
		{"name":"work.dlq","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum"}}]}`)
	ch := channel091(t, dial091(t, b))
	for i := range 2 {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "work", false, false, amqp091.Publishing{
			DeliveryMode: 2, ContentType: "text/plain", MessageId: "m-7", Expiration: "60000",
			Headers: amqp091.Table{"tenant": "acme"}, Body: []byte{'j', 'o', 'b', '0' + byte(i)}}))
	}
	ds, err := ch.Consume("work", "", false, false, false, false, nil)
	require.NoError(t, err)
	for range 2 {
		d := recv091(t, ds)
		require.NoError(t, d.Reject(false))
	}
	eventually(t, "two dead letters", func() bool { return queueLen(t, b, "work.dlq") == 2 })

	s := session(t, dial(t, b, nil))
	m := recv(t, receiver(t, s, "/queues/work.dlq", &amqp.ReceiverOptions{Credit: 1}))
	assert.Equal(t, "job0", string(m.GetData()))
	require.NotNil(t, m.Header)
	assert.True(t, m.Header.Durable)
	assert.Equal(t, 60*time.Second, m.Header.TTL, "the stale ttl RabbitMQ 4.3 keeps")
	assert.False(t, m.Header.FirstAcquirer)
	assert.Equal(t, uint32(1), m.Header.DeliveryCount)
	assertSix(t, m, "work", "rejected", "", "work", "rejected", "")
	assert.Equal(t, int64(1), m.Annotations["x-delivery-count"])
	assert.Equal(t, int64(1), m.Annotations["x-acquired-count"])
	assert.Equal(t, "", m.Annotations["x-exchange"])
	assert.Equal(t, "work.dlq", m.Annotations["x-routing-key"])
	deaths := deathsOf(t, m)
	require.Len(t, deaths, 1)
	assertDeath(t, deaths[0], "work", "rejected", 1, "", []string{"work"}, 60000)
	assert.Len(t, m.Annotations, 11, "annotations: %v", m.Annotations)
	assert.Equal(t, "m-7", m.Properties.MessageID)
	assert.Equal(t, "text/plain", *m.Properties.ContentType)
	assert.Equal(t, map[string]any{"tenant": "acme"}, m.ApplicationProperties)

	d := get091(t, ch, "work.dlq", true)
	assert.Equal(t, "job1", string(d.Body))
	assert.Equal(t, "", d.Exchange)
	assert.Equal(t, "work.dlq", d.RoutingKey)
	assert.True(t, d.Redelivered)
	assert.Equal(t, uint8(2), d.DeliveryMode)
	assert.Equal(t, "text/plain", d.ContentType)
	assert.Equal(t, "m-7", d.MessageId)
	assert.Equal(t, "", d.Expiration, "no expiration after a death")
	h := d.Headers
	assert.Equal(t, "acme", h["tenant"])
	assert.Equal(t, int64(1), h["x-acquired-count"])
	assert.Equal(t, int64(1), h["x-delivery-count"])
	xd, ok := h["x-death"].([]any)
	require.True(t, ok, "x-death is %T", h["x-death"])
	require.Len(t, xd, 1)
	assertXDeath(t, xd[0], "work", "rejected", 1, "", []any{"work"}, "60000")
	assertSix091(t, h, "work", "rejected", "", "work", "rejected", "")
	assert.Len(t, h, 10, "headers: %v", h)
}

// TestAMQP10ExpiredToAMQP091 is the spec's E8: an AMQP 1.0 publish with a
// ttl expires from a classic queue into a DLX and is read over 0-9-1 (and
// over 1.0).
func TestAMQP10ExpiredToAMQP091(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"work","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"dlx"}},
		{"name":"dlq","vhost":"/","durable":true,"arguments":{}}],
		"exchanges":[{"name":"dlx","vhost":"/","type":"direct","durable":true}],
		"bindings":[{"source":"dlx","vhost":"/","destination":"dlq","destination_type":"queue","routing_key":"work"}]}`)
	s := session(t, dial(t, b, nil))
	for range 2 {
		publish(t, s, "/queues/work", &amqp.Message{Header: &amqp.MessageHeader{Durable: true, TTL: 200 * time.Millisecond, Priority: 7},
			ApplicationProperties: map[string]any{"s": "str"}, Data: [][]byte{[]byte("body")}})
	}
	eventually(t, "both expired", func() bool { return queueLen(t, b, "dlq") == 2 })

	ch := channel091(t, dial091(t, b))
	d := get091(t, ch, "dlq", true)
	assert.Equal(t, "dlx", d.Exchange)
	assert.Equal(t, "work", d.RoutingKey)
	assert.Equal(t, uint8(2), d.DeliveryMode)
	assert.Equal(t, uint8(7), d.Priority)
	assert.Equal(t, "", d.Expiration)
	h := d.Headers
	assert.Equal(t, "str", h["s"])
	xd, ok := h["x-death"].([]any)
	require.True(t, ok, "x-death is %T", h["x-death"])
	require.Len(t, xd, 1)
	assertXDeath(t, xd[0], "work", "expired", 1, "", []any{"work"}, "200")
	assertSix091(t, h, "work", "expired", "", "work", "expired", "")
	assert.Len(t, h, 8, "headers: %v", h)

	m := recv(t, receiver(t, s, "/queues/dlq", nil))
	assert.True(t, m.Header.Durable)
	assert.Equal(t, uint8(7), m.Header.Priority)
	assert.Zero(t, m.Header.TTL)
	assert.False(t, m.Header.FirstAcquirer)
	assert.Equal(t, "dlx", m.Annotations["x-exchange"])
	deaths := deathsOf(t, m)
	require.Len(t, deaths, 1)
	assertDeath(t, deaths[0], "work", "expired", 1, "", []string{"work"}, 200)
}

// TestAMQP091MaxlenToAMQP10: 0-9-1 publishes overflow a classic queue
// (drop-head); the dropped message is read over AMQP 1.0 and 0-9-1.
func TestAMQP091MaxlenToAMQP10(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"small","vhost":"/","durable":true,"arguments":{"x-max-length":1,"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}},
		{"name":"dlq","vhost":"/","durable":true,"arguments":{}}]}`)
	ch := channel091(t, dial091(t, b))
	for _, body := range []string{"a", "b", "c"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "small", false, false, amqp091.Publishing{Body: []byte(body), Type: "t1"}))
	}
	eventually(t, "two dropped", func() bool { return queueLen(t, b, "dlq") == 2 })
	s := session(t, dial(t, b, nil))
	m := recv(t, receiver(t, s, "/queues/dlq", &amqp.ReceiverOptions{Credit: 1}))
	assert.Equal(t, "a", string(m.GetData()))
	assert.False(t, m.Header.Durable)
	assert.Zero(t, m.Header.TTL)
	assert.Equal(t, "t1", m.Annotations["x-basic-type"])
	deaths := deathsOf(t, m)
	require.Len(t, deaths, 1)
	assertDeath(t, deaths[0], "small", "maxlen", 1, "", []string{"small"})
	assertSix(t, m, "small", "maxlen", "", "small", "maxlen", "")

	d := get091(t, ch, "dlq", true)
	assert.Equal(t, "b", string(d.Body))
	assert.Equal(t, "t1", d.Type)
	xd := d.Headers["x-death"].([]any)
	require.Len(t, xd, 1)
	assertXDeath(t, xd[0], "small", "maxlen", 1, "", []any{"small"})
	assertSix091(t, d.Headers, "small", "maxlen", "", "small", "maxlen", "")
	assert.Len(t, d.Headers, 7)
}

// TestAMQP091DeliveryLimit is the spec's E11: basic.reject(requeue=true)
// counts toward a quorum queue's delivery limit (the 21st dead-letters),
// basic.nack(requeue=true) never does.
func TestAMQP091DeliveryLimit(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"jobs","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-dead-letter-exchange":"","x-dead-letter-routing-key":"dl"}},
		{"name":"dl","vhost":"/","durable":true,"arguments":{}}]}`)
	ch := channel091(t, dial091(t, b))
	require.NoError(t, ch.Qos(1, 0, false))
	for _, body := range []string{"r1", "r2"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "jobs", false, false, amqp091.Publishing{Body: []byte(body)}))
	}
	ds, err := ch.Consume("jobs", "c1", false, false, false, false, nil)
	require.NoError(t, err)
	for i := range 21 {
		d := recv091(t, ds)
		require.Equal(t, "r1", string(d.Body), "delivery %d", i)
		assert.Equal(t, i > 0, d.Redelivered, "redelivered %d", i)
		if i > 0 {
			assert.Equal(t, int64(i), d.Headers["x-delivery-count"], "x-delivery-count %d", i)
			assert.Equal(t, int64(i), d.Headers["x-acquired-count"], "x-acquired-count %d", i)
		}
		require.NoError(t, d.Reject(true))
	}
	// r2 comes next: nacked with requeue 30 times, never dead-lettered.
	for i := range 30 {
		d := recv091(t, ds)
		require.Equal(t, "r2", string(d.Body), "delivery %d", i)
		assert.NotContains(t, d.Headers, "x-delivery-count")
		require.NoError(t, d.Nack(false, true))
	}
	d := recv091(t, ds)
	require.Equal(t, "r2", string(d.Body))
	require.NoError(t, d.Ack(false))
	require.Equal(t, 1, queueLen(t, b, "dl"))

	s := session(t, dial(t, b, nil))
	m := recv(t, receiver(t, s, "/queues/dl", nil))
	assert.Equal(t, "r1", string(m.GetData()))
	assert.Equal(t, uint32(21), m.Header.DeliveryCount)
	assert.False(t, m.Header.FirstAcquirer)
	deaths := deathsOf(t, m)
	require.Len(t, deaths, 1)
	assertDeath(t, deaths[0], "jobs", "delivery_limit", 1, "", []string{"jobs"})
	assertSix(t, m, "jobs", "delivery_limit", "", "jobs", "delivery_limit", "")
}

// TestAMQP091DiedTwiceMixed is the spec's E9: a 0-9-1 publish with CC dies
// by basic.nack(requeue=false) in a quorum queue, then by expiry in a
// classic queue, and is read over AMQP 1.0 and 0-9-1.
func TestAMQP091DiedTwiceMixed(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"orders.q","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-dead-letter-exchange":"dlx"}},
		{"name":"retry","vhost":"/","durable":true,"arguments":{"x-message-ttl":100,"x-dead-letter-exchange":"","x-dead-letter-routing-key":"parking"}},
		{"name":"parking","vhost":"/","durable":true,"arguments":{}}],
		"exchanges":[{"name":"orders","vhost":"/","type":"direct","durable":true},{"name":"dlx","vhost":"/","type":"direct","durable":true}],
		"bindings":[{"source":"orders","vhost":"/","destination":"orders.q","destination_type":"queue","routing_key":"new"},
		{"source":"dlx","vhost":"/","destination":"retry","destination_type":"queue","routing_key":"new"}]}`)
	ch := channel091(t, dial091(t, b))
	for _, body := range []string{"o-1", "o-2"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "orders", "new", false, false, amqp091.Publishing{
			DeliveryMode: 2, Headers: amqp091.Table{"CC": []any{"audit"}}, Body: []byte(body)}))
	}
	ds, err := ch.Consume("orders.q", "", false, false, false, false, nil)
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, recv091(t, ds).Nack(false, false))
	}
	eventually(t, "both parked", func() bool { return queueLen(t, b, "parking") == 2 })

	s := session(t, dial(t, b, nil))
	m := recv(t, receiver(t, s, "/queues/parking", &amqp.ReceiverOptions{Credit: 1}))
	assert.Equal(t, "o-1", string(m.GetData()))
	assert.True(t, m.Header.Durable)
	assert.False(t, m.Header.FirstAcquirer)
	assert.Zero(t, m.Header.DeliveryCount, "nack counts no delivery")
	assertSix(t, m, "orders.q", "rejected", "orders", "retry", "expired", "dlx")
	assert.Equal(t, "", m.Annotations["x-exchange"])
	assert.Equal(t, "parking", m.Annotations["x-routing-key"])
	assert.Equal(t, []any{"audit"}, m.Annotations["x-cc"])
	deaths := deathsOf(t, m)
	require.Len(t, deaths, 2)
	assertDeath(t, deaths[0], "retry", "expired", 1, "dlx", []string{"new", "audit"})
	assertDeath(t, deaths[1], "orders.q", "rejected", 1, "orders", []string{"new", "audit"})
	assert.Nil(t, m.Properties)
	assert.Nil(t, m.ApplicationProperties)

	d := get091(t, ch, "parking", true)
	assert.Equal(t, "o-2", string(d.Body))
	assert.Equal(t, "", d.Exchange)
	assert.Equal(t, "parking", d.RoutingKey)
	assert.Equal(t, uint8(2), d.DeliveryMode)
	h := d.Headers
	assert.Equal(t, []any{"audit"}, h["CC"])
	xd := h["x-death"].([]any)
	require.Len(t, xd, 2)
	assertXDeath(t, xd[0], "retry", "expired", 1, "dlx", []any{"new", "audit"})
	assertXDeath(t, xd[1], "orders.q", "rejected", 1, "orders", []any{"new", "audit"})
	assertSix091(t, h, "orders.q", "rejected", "orders", "retry", "expired", "dlx")
	assert.Len(t, h, 8)
}

// TestAMQP10RejectedTwiceOver091: an AMQP 1.0 publish is rejected twice by
// 0-9-1 consumers (basic.reject, then basic.nack) and read over AMQP 1.0
// and 0-9-1: one history, in each protocol's form.
func TestAMQP10RejectedTwiceOver091(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"a","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"b"}},
		{"name":"b","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"c"}},
		{"name":"c","vhost":"/","durable":true,"arguments":{}}]}`)
	s := session(t, dial(t, b, nil))
	mid := "id-1"
	for range 2 {
		publish(t, s, "/queues/a", &amqp.Message{Properties: &amqp.MessageProperties{MessageID: mid}, Data: [][]byte{[]byte("x")}})
	}
	ch := channel091(t, dial091(t, b))
	for range 2 {
		require.NoError(t, get091(t, ch, "a", false).Reject(false))
	}
	for range 2 {
		require.NoError(t, get091(t, ch, "b", false).Nack(false, false))
	}
	eventually(t, "both in c", func() bool { return queueLen(t, b, "c") == 2 })
	d := get091(t, ch, "c", true)
	assert.Equal(t, "id-1", d.MessageId)
	assert.Equal(t, uint8(0), d.DeliveryMode)
	xd := d.Headers["x-death"].([]any)
	require.Len(t, xd, 2)
	assertXDeath(t, xd[0], "b", "rejected", 1, "", []any{"b"})
	assertXDeath(t, xd[1], "a", "rejected", 1, "", []any{"a"})
	assertSix091(t, d.Headers, "a", "rejected", "", "b", "rejected", "")

	m := recv(t, receiver(t, s, "/queues/c", nil))
	deaths := deathsOf(t, m)
	require.Len(t, deaths, 2)
	assertDeath(t, deaths[0], "b", "rejected", 1, "", []string{"b"})
	assertDeath(t, deaths[1], "a", "rejected", 1, "", []string{"a"})
	assertSix(t, m, "a", "rejected", "", "b", "rejected", "")
}

// TestAMQP091ClientXDeathIsNotHistory: an x-death header the publisher set
// reaches an AMQP 1.0 consumer as the annotation x-death (no x-opt-deaths),
// and once the message dies the broker's history replaces it.
func TestAMQP091ClientXDeathIsNotHistory(t *testing.T) {
	b := startBroker(t, `{"queues":[
		{"name":"src","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dst"}},
		{"name":"dst","vhost":"/","durable":true,"arguments":{}}]}`)
	ch := channel091(t, dial091(t, b))
	fake := []any{amqp091.Table{"count": int64(5), "reason": "expired", "queue": "elsewhere"}}
	for range 2 {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "src", false, false, amqp091.Publishing{
			Headers: amqp091.Table{"x-death": fake}, Body: []byte("f")}))
	}
	s := session(t, dial(t, b, nil))
	r := receiver(t, s, "/queues/src", &amqp.ReceiverOptions{Credit: 1})
	m := recv(t, r)
	assert.NotContains(t, m.Annotations, "x-opt-deaths")
	assert.Equal(t, []any{map[string]any{"count": int64(5), "reason": "expired", "queue": "elsewhere"}}, m.Annotations["x-death"])
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
	require.NoError(t, r.Close(ctxT(t)))

	require.NoError(t, get091(t, ch, "src", false).Reject(false))
	d := get091(t, ch, "dst", true)
	xd := d.Headers["x-death"].([]any)
	require.Len(t, xd, 1)
	assertXDeath(t, xd[0], "src", "rejected", 1, "", []any{"src"})
}
