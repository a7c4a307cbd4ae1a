package e2e

import (
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAMQP091To10Conversion is the spec's example E1: a 0-9-1 publish with
// every property and a header of each kind, consumed over AMQP 1.0.
func TestAMQP091To10Conversion(t *testing.T) {
	b := startBroker(t, "")
	c := dial091(t, b)
	ch := channel091(t, c)
	_, err := ch.QueueDeclare("e1", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("orders", "direct", true, false, false, false, nil))
	require.NoError(t, ch.QueueBind("e1", "new", "orders", false, nil))
	ts := time.Unix(1700000000, 0)
	pub := amqp091.Publishing{
		ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: 2, Priority: 5,
		CorrelationId: "urn:uuid:58b867b0-8151-1f56-1bd4-73229807fd60", ReplyTo: "replies/q", Expiration: "60000",
		MessageId: "m-1", Timestamp: ts, Type: "order.created", UserId: "guest", AppId: "shop",
		Headers: amqp091.Table{
			"tenant": "acme", "attempt": int32(3), "big": int64(1) << 40, "flag": true, "ts": ts,
			"nested": amqp091.Table{"a": "b"}, "list": []any{"x", int64(1)}, "bin": []byte{0, 1, 2}, "nothing": nil,
			"x-trace": "t-1", "x-tbl": amqp091.Table{"k": int64(1)}, "x-arr": []any{"a"},
			"CC": []any{"audit"}, "BCC": []any{"secret"},
		},
		Body: []byte(`{"id":1}`),
	}
	require.NoError(t, ch.PublishWithContext(ctxT(t), "orders", "new", false, false, pub))

	s := session(t, dial(t, b, nil))
	m := recv(t, receiver(t, s, "/queues/e1", nil))
	require.NotNil(t, m.Header)
	assert.True(t, m.Header.Durable)
	assert.Equal(t, uint8(5), m.Header.Priority)
	assert.Equal(t, 60*time.Second, m.Header.TTL)
	assert.True(t, m.Header.FirstAcquirer)
	assert.Equal(t, uint32(0), m.Header.DeliveryCount)

	a := m.Annotations
	assert.Equal(t, "orders", a["x-exchange"])
	assert.Equal(t, "new", a["x-routing-key"])
	assert.Equal(t, "order.created", a["x-basic-type"])
	assert.Equal(t, "t-1", a["x-trace"])
	assert.Equal(t, map[string]any{"k": int64(1)}, a["x-tbl"]) // symbol keys; go-amqp decodes them as strings
	assert.Equal(t, []any{"a"}, a["x-arr"])
	assert.Equal(t, []any{"audit"}, a["x-cc"])
	assert.Len(t, a, 7, "annotations: %v", a)

	p := m.Properties
	require.NotNil(t, p)
	assert.Equal(t, "m-1", p.MessageID)
	assert.Equal(t, []byte("guest"), p.UserID)
	assert.Equal(t, "/queues/replies%2Fq", *p.ReplyTo)
	assert.Equal(t, amqp.UUID{0x58, 0xb8, 0x67, 0xb0, 0x81, 0x51, 0x1f, 0x56, 0x1b, 0xd4, 0x73, 0x22, 0x98, 0x07, 0xfd, 0x60}, p.CorrelationID)
	assert.Equal(t, "application/json", *p.ContentType)
	assert.Equal(t, "gzip", *p.ContentEncoding)
	assert.Equal(t, ts, p.CreationTime.UTC().Local())
	assert.Equal(t, "shop", *p.GroupID)

	ap := m.ApplicationProperties
	assert.Equal(t, "acme", ap["tenant"])
	assert.Equal(t, int32(3), ap["attempt"])
	assert.Equal(t, int64(1)<<40, ap["big"])
	assert.Equal(t, true, ap["flag"])
	assert.Equal(t, ts, ap["ts"].(time.Time).Local())
	assert.Equal(t, []byte{0, 1, 2}, ap["bin"])
	assert.Contains(t, ap, "nothing")
	assert.Nil(t, ap["nothing"])
	assert.NotContains(t, ap, "nested")
	assert.NotContains(t, ap, "list")
	assert.NotContains(t, ap, "BCC")
	assert.Len(t, ap, 7)
	assert.Equal(t, []byte(`{"id":1}`), m.GetData())
}

// TestAMQP10To091Conversion is the spec's example E2: an AMQP 1.0 publish
// consumed over 0-9-1.
func TestAMQP10To091Conversion(t *testing.T) {
	b := startBroker(t, `{"queues":[{"name":"work","vhost":"/","durable":true}]}`)
	s := session(t, dial(t, b, nil))
	ct, ce, rt, gid, rtg, to, subj := amqp.Symbol("text/plain"), amqp.Symbol("utf-8"), "/queues/replies", "g1", "rg", "/queues/work", "subj"
	gseq := uint32(3)
	m := &amqp.Message{
		Header:      &amqp.MessageHeader{Durable: true, TTL: 10 * time.Second, Priority: 7},
		Annotations: amqp.Annotations{"x-opt-tenant": "acme", "x-num": uint64(7), "x-list": []any{"a", int32(2)}},
		Properties: &amqp.MessageProperties{MessageID: uint64(42), UserID: []byte("guest"), To: &to, Subject: &subj,
			ReplyTo: &rt, CorrelationID: amqp.UUID{0x58, 0xb8, 0x67, 0xb0, 0x81, 0x51, 0x1f, 0x56, 0x1b, 0xd4, 0x73, 0x22, 0x98, 0x07, 0xfd, 0x60},
			ContentType: (*string)(&ct), ContentEncoding: (*string)(&ce), AbsoluteExpiryTime: ptr(time.UnixMilli(1800000000000)),
			CreationTime: ptr(time.UnixMilli(1700000000123)), GroupID: &gid, GroupSequence: &gseq, ReplyToGroupID: &rtg},
		ApplicationProperties: map[string]any{"s": "str", "sym": amqp.Symbol("sy"), "ul": uint64(1<<64 - 1), "ui": uint32(4294967295),
			"by": int8(-1), "ts": time.UnixMilli(1700000000999), "bo": false, "nu": nil, "d": 1.5},
		Data: [][]byte{[]byte("body")},
	}
	publish(t, s, "/queues/work", m)

	ch := channel091(t, dial091(t, b))
	d := get091(t, ch, "work", true)
	assert.Equal(t, "", d.Exchange)
	assert.Equal(t, "work", d.RoutingKey)
	assert.Equal(t, "text/plain", d.ContentType)
	assert.Equal(t, "utf-8", d.ContentEncoding)
	assert.Equal(t, uint8(2), d.DeliveryMode)
	assert.Equal(t, uint8(7), d.Priority)
	assert.Equal(t, "10000", d.Expiration)
	assert.Equal(t, "42", d.MessageId)
	assert.Equal(t, "urn:uuid:58b867b0-8151-1f56-1bd4-73229807fd60", d.CorrelationId)
	assert.Equal(t, "replies", d.ReplyTo)
	assert.Equal(t, time.Unix(1700000000, 0), d.Timestamp)
	assert.Equal(t, "guest", d.UserId)
	assert.Equal(t, "g1", d.AppId)
	assert.Equal(t, "", d.Type)
	assert.Equal(t, amqp091.Table{
		"bo": false, "by": int8(-1), "d": 1.5, "nu": nil, "s": "str", "sym": "sy", "ts": time.Unix(1700000000, 0),
		"ui": uint32(4294967295), "ul": int64(-1), "x-list": []any{"a", int32(2)}, "x-num": int64(7), "x-opt-tenant": "acme",
	}, d.Headers)
	assert.Equal(t, "body", string(d.Body))
}

// TestAMQP091To091Unchanged: a 0-9-1 message consumed over 0-9-1 keeps its
// properties; headers are sorted with duplicates dropped (E14) and BCC
// routes without being delivered.
func TestAMQP091To091Unchanged(t *testing.T) {
	b := startBroker(t, "")
	ch := channel091(t, dial091(t, b))
	for _, q := range []string{"q1", "q2", "q3"} {
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "q1", false, false, amqp091.Publishing{
		Headers: amqp091.Table{"CC": []any{"q3"}, "BCC": []any{"q2"}, "k": "v"}, Body: []byte("x")}))
	for _, q := range []string{"q1", "q2", "q3"} {
		d := get091(t, ch, q, true)
		assert.Equal(t, amqp091.Table{"CC": []any{"q3"}, "k": "v"}, d.Headers, q)
		assert.Equal(t, "q1", d.RoutingKey)
		assert.Equal(t, "x", string(d.Body))
	}
}
