package interop

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// The type names each 0-9-1 client decodes a field value to.
type clientTypes struct {
	str, long, timestamp, table, array string
	// unordered: the client decodes tables into hash maps, so the key
	// order on the wire is not seen (Java)
	unordered bool
}

func typesOf(client string) clientTypes {
	switch client {
	case "pika":
		return clientTypes{str: "str", long: "int", timestamp: "datetime", table: "dict", array: "list"}
	case "amqplib":
		return clientTypes{str: "string", long: "number", timestamp: "timestamp", table: "object", array: "array"}
	case "java":
		return clientTypes{str: "LongString", long: "Long", timestamp: "Date", table: "Map", array: "List", unordered: true}
	}
	panic("unknown client " + client)
}

func TestPika091Basic(t *testing.T)    { checkBasic091(t, pika(t)) }
func TestAmqplib091Basic(t *testing.T) { checkBasic091(t, amqplib(t)) }

// checkBasic091: confirms, a returned mandatory publish, consume with
// prefetch, ack, reject(requeue=false), nack(requeue=true) and its
// redelivery, nack(requeue=false); the two dead letters read back from the
// dead-letter queue over 0-9-1 with their x-death.
func checkBasic091(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	q := uniqueName(c.name + "-basic")
	dlq := q + ".dlq"
	tp.queue(dlq, nil)
	tp.queue(q, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	before := time.Now().Unix()

	events := c.run(t, b, "basic", "--queue", q, "--dlq", dlq)
	open := only(t, events, "open")
	for _, capability := range []string{"publisher_confirms", "basic.nack", "consumer_cancel_notify",
		"exchange_exchange_bindings", "connection.blocked", "authentication_failure_close", "per_consumer_qos"} {
		require.Contains(t, open.Capabilities, capability)
	}
	var kinds []string
	for _, e := range events {
		if e.Event != "dead_lettered" {
			kinds = append(kinds, e.Event+" "+e.ID)
		}
	}
	p := c.name + "-"
	require.Equal(t, []string{"open ",
		"confirmed " + p + "1", "confirmed " + p + "2", "confirmed " + p + "3", "returned " + p + "unroutable",
		"message " + p + "1", "acked " + p + "1",
		"message " + p + "2", "rejected " + p + "2",
		"message " + p + "3", "requeued " + p + "3",
		"message " + p + "3", "nacked " + p + "3",
		"closed "}, kinds)
	returned := only(t, events, "returned")
	require.Equal(t, 312, returned.ReplyCode)
	require.Equal(t, "NO_ROUTE", returned.ReplyText)
	var redelivered []bool
	for _, e := range events {
		if e.Event == "message" {
			redelivered = append(redelivered, e.Redelivered)
		}
	}
	require.Equal(t, []bool{false, false, false, true}, redelivered, "redelivered flags")

	ty := typesOf(c.name)
	var dead []event091
	for _, e := range events {
		if e.Event == "dead_lettered" {
			dead = append(dead, e)
		}
	}
	require.Len(t, dead, 2)
	for i, id := range []string{p + "2", p + "3"} {
		d := dead[i].Delivery
		require.Equal(t, id, dead[i].ID)
		require.Equal(t, "", d.Exchange)
		require.Equal(t, dlq, d.RoutingKey)
		require.False(t, d.Redelivered)
		require.EqualValues(t, 2, d.Properties["delivery_mode"])
		checkXDeath(t, ty, d.Headers["x-death"], []xDeath{{queue: q, reason: "rejected", exchange: "", routingKeys: []string{q}}}, before)
		checkFirstLast(t, ty, d.Headers, xDeath{queue: q, reason: "rejected"}, xDeath{queue: q, reason: "rejected"})
		require.Equal(t, []string{"seq", "x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
			"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason"}, d.HeaderKeys,
			"headers sorted by key, as RabbitMQ 4.3 delivers them")
	}
}

// xDeath is one expected x-death table.
type xDeath struct {
	queue, reason, exchange string
	routingKeys             []string
	originalExpiration      string // "" when the message had no TTL
}

// checkXDeath checks an x-death header as a 0-9-1 client decoded it: an
// array of tables with RabbitMQ 4.3's keys in its order, count a long,
// time a timestamp in seconds, the strings longstr.
func checkXDeath(t *testing.T, ty clientTypes, v typedValue, want []xDeath, notBefore int64) {
	t.Helper()
	require.Equal(t, ty.array, v.Type, "x-death is an array")
	got := v.list(t)
	require.Len(t, got, len(want))
	for i, w := range want {
		e := got[i]
		require.Equal(t, ty.table, e.Type, "x-death[%d] is a table", i)
		keys := []string{"count", "reason", "queue", "time", "exchange", "routing-keys"}
		if w.originalExpiration != "" {
			keys = append([]string{"original-expiration"}, keys...)
		}
		f := e.table(t)
		if ty.unordered {
			require.ElementsMatch(t, keys, mapKeys(f), "x-death[%d] keys", i)
		} else {
			require.Equal(t, keys, e.Keys, "x-death[%d] keys in RabbitMQ's order", i)
		}
		require.Equal(t, ty.long, f["count"].Type)
		require.EqualValues(t, 1, f["count"].num(t))
		for k, s := range map[string]string{"reason": w.reason, "queue": w.queue, "exchange": w.exchange, "original-expiration": w.originalExpiration} {
			if k == "original-expiration" && s == "" {
				continue
			}
			require.Equal(t, ty.str, f[k].Type, "x-death[%d].%s is a longstr", i, k)
			require.Equal(t, s, f[k].str(t), "x-death[%d].%s", i, k)
		}
		require.Equal(t, ty.timestamp, f["time"].Type, "x-death[%d].time is a timestamp", i)
		require.InDelta(t, notBefore, f["time"].num(t), 5, "x-death[%d].time in seconds", i)
		require.GreaterOrEqual(t, f["time"].num(t), notBefore)
		rks := f["routing-keys"]
		require.Equal(t, ty.array, rks.Type)
		var keysGot []string
		for _, k := range rks.list(t) {
			require.Equal(t, ty.str, k.Type)
			keysGot = append(keysGot, k.str(t))
		}
		require.Equal(t, w.routingKeys, keysGot)
	}
}

// checkHeaderKeys checks the header names, and their order (RabbitMQ 4.3
// sorts them) where the client shows it.
func checkHeaderKeys(t *testing.T, ty clientTypes, d *delivery091, want []string) {
	t.Helper()
	if ty.unordered {
		require.ElementsMatch(t, want, mapKeys(d.Headers), "header names")
		return
	}
	require.Equal(t, want, d.HeaderKeys, "headers sorted by key")
}

func mapKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkFirstLast checks the six x-first-death-* and x-last-death-* headers
// (longstr).
func checkFirstLast(t *testing.T, ty clientTypes, h map[string]typedValue, first, last xDeath) {
	t.Helper()
	for k, want := range map[string]string{
		"x-first-death-queue": first.queue, "x-first-death-reason": first.reason, "x-first-death-exchange": first.exchange,
		"x-last-death-queue": last.queue, "x-last-death-reason": last.reason, "x-last-death-exchange": last.exchange,
	} {
		require.Contains(t, h, k)
		require.Equal(t, ty.str, h[k].Type, "%s is a longstr", k)
		require.Equal(t, want, h[k].str(t), k)
	}
}

// ---- 0-9-1 in, AMQP 1.0 out ----

func TestPika091RejectedReadOver10(t *testing.T)    { checkRejectedReadOver10(t, pika(t)) }
func TestAmqplib091RejectedReadOver10(t *testing.T) { checkRejectedReadOver10(t, amqplib(t)) }

// checkRejectedReadOver10 is RabbitMQ 4.3's worked example of a message
// published over 0-9-1 to a quorum queue, basic.reject(requeue=false) into
// a quorum dead-letter queue, consumed over AMQP 1.0.
func checkRejectedReadOver10(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	work := uniqueName(c.name + "-work")
	dlq := work + ".dlq"
	tp.queue(dlq, amqp091.Table{"x-queue-type": "quorum"})
	tp.queue(work, amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	before := time.Now()

	msg := map[string]any{"routing_key": work, "delivery_mode": 2, "content_type": "text/plain", "message_id": "m-7",
		"expiration": "60000", "headers": map[string]any{"tenant": map[string]any{"S": "acme"}}, "body": "job"}
	c.run(t, b, "publish", "--message", mustJSON(t, msg))
	c.run(t, b, "settle", "--queue", work, "--action", "reject")

	m := receive10(t, b, dlq)
	require.NotNil(t, m.Header)
	require.True(t, m.Header.Durable)
	require.Equal(t, 60*time.Second, m.Header.TTL, "the 0-9-1 expiration stays in the header after dead-lettering (RabbitMQ 4.3)")
	require.False(t, m.Header.FirstAcquirer)
	require.EqualValues(t, 1, m.Header.DeliveryCount)
	require.Equal(t, sortedKeys(map[string]bool{"x-first-death-reason": true, "x-first-death-queue": true, "x-first-death-exchange": true,
		"x-last-death-reason": true, "x-last-death-queue": true, "x-last-death-exchange": true, "x-delivery-count": true,
		"x-acquired-count": true, "x-exchange": true, "x-routing-key": true, "x-opt-deaths": true}), annotationKeys(m))
	for k, want := range map[string]string{"x-first-death-reason": "rejected", "x-first-death-queue": work, "x-first-death-exchange": "",
		"x-last-death-reason": "rejected", "x-last-death-queue": work, "x-last-death-exchange": "", "x-exchange": "", "x-routing-key": dlq} {
		require.Equal(t, want, m.Annotations[k], k)
	}
	require.Equal(t, int64(1), m.Annotations["x-delivery-count"])
	require.Equal(t, int64(1), m.Annotations["x-acquired-count"])
	checkOptDeaths(t, m, []map[string]any{{"ttl": uint32(60000), "queue": work, "reason": "rejected", "count": uint64(1),
		"exchange": "", "routing-keys": []string{work}}}, before)
	require.NotNil(t, m.Properties)
	require.Equal(t, "m-7", m.Properties.MessageID)
	require.NotNil(t, m.Properties.ContentType)
	require.Equal(t, "text/plain", *m.Properties.ContentType)
	require.Equal(t, map[string]any{"tenant": "acme"}, m.ApplicationProperties)
	require.Equal(t, [][]byte{[]byte("job")}, m.Data)
}

func TestPika091ExpiredReadOver10(t *testing.T)    { checkExpiredReadOver10(t, pika(t)) }
func TestAmqplib091ExpiredReadOver10(t *testing.T) { checkExpiredReadOver10(t, amqplib(t)) }

// checkExpiredReadOver10 is RabbitMQ 4.3's stale-TTL example: published over
// 0-9-1 with an expiration, expired from a classic queue into a
// dead-letter exchange, consumed over AMQP 1.0, whose header still carries
// the original TTL.
func checkExpiredReadOver10(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	work := uniqueName(c.name + "-work")
	dlx, dlq := work+".dlx", work+".dlq"
	tp.exchange(dlx, "direct")
	tp.queue(dlq, nil)
	tp.bind(dlq, "dlq", dlx)
	tp.queue(work, amqp091.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dlq"})
	before := time.Now()

	msg := map[string]any{"routing_key": work, "delivery_mode": 2, "message_id": "m-2", "expiration": "300",
		"headers": map[string]any{"k": map[string]any{"S": "v"}}, "body": "e-1"}
	c.run(t, b, "publish", "--message", mustJSON(t, msg))

	m := receive10(t, b, dlq)
	require.NotNil(t, m.Header)
	require.True(t, m.Header.Durable)
	require.Equal(t, 300*time.Millisecond, m.Header.TTL, "the 0-9-1 expiration stays in the header after dead-lettering (RabbitMQ 4.3)")
	require.False(t, m.Header.FirstAcquirer)
	require.Zero(t, m.Header.DeliveryCount)
	for k, want := range map[string]string{"x-first-death-reason": "expired", "x-first-death-queue": work, "x-first-death-exchange": "",
		"x-last-death-reason": "expired", "x-last-death-queue": work, "x-last-death-exchange": "", "x-exchange": dlx, "x-routing-key": "dlq"} {
		require.Equal(t, want, m.Annotations[k], k)
	}
	checkOptDeaths(t, m, []map[string]any{{"ttl": uint32(300), "queue": work, "reason": "expired", "count": uint64(1),
		"exchange": "", "routing-keys": []string{work}}}, before)
	require.NotNil(t, m.Properties)
	require.Equal(t, "m-2", m.Properties.MessageID)
	require.Equal(t, map[string]any{"k": "v"}, m.ApplicationProperties)
	require.Equal(t, [][]byte{[]byte("e-1")}, m.Data)
}

// ---- AMQP 1.0 in, 0-9-1 out ----

func TestPika091ReadsRejectedFrom10(t *testing.T)    { checkReadsRejectedFrom10(t, pika(t)) }
func TestAmqplib091ReadsRejectedFrom10(t *testing.T) { checkReadsRejectedFrom10(t, amqplib(t)) }

// checkReadsRejectedFrom10: published and rejected over AMQP 1.0 (a quorum
// queue into a classic dead-letter queue), read over 0-9-1: x-death and
// the six first/last headers, the properties converted as RabbitMQ 4.3
// converts them, the headers sorted.
func checkReadsRejectedFrom10(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	work := uniqueName(c.name + "-work")
	dlq := work + ".dlq"
	tp.queue(dlq, nil)
	tp.queue(work, amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	before := time.Now().Unix()

	ct := "text/plain"
	m := &amqp.Message{
		Header:                &amqp.MessageHeader{Durable: true, Priority: 7},
		Properties:            &amqp.MessageProperties{MessageID: "m-1", ContentType: &ct},
		ApplicationProperties: map[string]any{"s": "str", "n": int64(5)},
		Data:                  [][]byte{[]byte("from 1.0")},
	}
	send10(t, b, work, m)
	reject10(t, b, work)

	e := only(t, c.run(t, b, "get", "--queue", dlq), "message")
	d := e.Delivery
	ty := typesOf(c.name)
	require.Equal(t, "", d.Exchange)
	require.Equal(t, dlq, d.RoutingKey)
	require.Equal(t, "from 1.0", d.Body)
	require.EqualValues(t, 2, d.Properties["delivery_mode"])
	require.EqualValues(t, 7, d.Properties["priority"])
	require.Equal(t, "m-1", d.Properties["message_id"])
	require.Equal(t, "text/plain", d.Properties["content_type"])
	require.NotContains(t, d.Properties, "expiration")
	checkXDeath(t, ty, d.Headers["x-death"], []xDeath{{queue: work, reason: "rejected", exchange: "", routingKeys: []string{work}}}, before)
	checkFirstLast(t, ty, d.Headers, xDeath{queue: work, reason: "rejected"}, xDeath{queue: work, reason: "rejected"})
	// application-properties become headers: a long is l, a string longstr
	require.Equal(t, ty.long, d.Headers["n"].Type)
	require.EqualValues(t, 5, d.Headers["n"].num(t))
	require.Equal(t, ty.str, d.Headers["s"].Type)
	require.Equal(t, "str", d.Headers["s"].str(t))
	checkHeaderKeys(t, ty, d, []string{"n", "s", "x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
		"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason"})
}

func TestPika091ReadsExpiredFrom10(t *testing.T)    { checkReadsExpiredFrom10(t, pika(t)) }
func TestAmqplib091ReadsExpiredFrom10(t *testing.T) { checkReadsExpiredFrom10(t, amqplib(t)) }

// checkReadsExpiredFrom10 is RabbitMQ 4.3's worked example of a message
// published over AMQP 1.0 with a TTL to a classic queue whose dead-letter
// exchange has no routing key, expired, read over 0-9-1: no expiration,
// x-death with original-expiration.
func checkReadsExpiredFrom10(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	work := uniqueName(c.name + "-work")
	dlx, dlq := work+".dlx", work+".dlq"
	tp.exchange(dlx, "direct")
	tp.queue(dlq, nil)
	tp.bind(dlq, work, dlx)
	tp.queue(work, amqp091.Table{"x-dead-letter-exchange": dlx})
	before := time.Now().Unix()

	m := &amqp.Message{
		Header:     &amqp.MessageHeader{Durable: true, Priority: 7, TTL: 300 * time.Millisecond},
		Properties: &amqp.MessageProperties{MessageID: "m-8"},
		Data:       [][]byte{[]byte("expires")},
	}
	send10(t, b, work, m)

	e := only(t, c.run(t, b, "get", "--queue", dlq), "message")
	d := e.Delivery
	ty := typesOf(c.name)
	require.Equal(t, dlx, d.Exchange)
	require.Equal(t, work, d.RoutingKey)
	require.EqualValues(t, 2, d.Properties["delivery_mode"])
	require.EqualValues(t, 7, d.Properties["priority"])
	require.Equal(t, "m-8", d.Properties["message_id"])
	require.NotContains(t, d.Properties, "expiration", "dead-lettering removes the expiration")
	checkXDeath(t, ty, d.Headers["x-death"], []xDeath{{queue: work, reason: "expired", exchange: "", routingKeys: []string{work},
		originalExpiration: "300"}}, before)
	checkFirstLast(t, ty, d.Headers, xDeath{queue: work, reason: "expired"}, xDeath{queue: work, reason: "expired"})
	checkHeaderKeys(t, ty, d, []string{"x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
		"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason"})
}

// ---- AMQP 1.0 side (go-amqp) ----

func dial10(t *testing.T, b broker091) *amqp.Session {
	t.Helper()
	conn, err := amqp.Dial(t.Context(), "amqp://"+b.host+":"+b.port, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	require.NoError(t, err, "go-amqp dial")
	t.Cleanup(func() { _ = conn.Close() })
	sess, err := conn.NewSession(t.Context(), nil)
	require.NoError(t, err)
	return sess
}

func send10(t *testing.T, b broker091, queue string, m *amqp.Message) {
	t.Helper()
	sess := dial10(t, b)
	snd, err := sess.NewSender(t.Context(), b.address10(queue), nil)
	require.NoError(t, err)
	r, err := snd.SendWithReceipt(t.Context(), m, nil)
	require.NoError(t, err)
	st, err := r.Wait(t.Context())
	require.NoError(t, err)
	require.IsType(t, &amqp.StateAccepted{}, st)
}

// reject10 takes one message from queue over AMQP 1.0 and rejects it
// (without an error, so that the dead letter carries only RabbitMQ 4.3's
// annotations).
func reject10(t *testing.T, b broker091, queue string) {
	t.Helper()
	sess := dial10(t, b)
	rcv, err := sess.NewReceiver(t.Context(), b.address10(queue), nil)
	require.NoError(t, err)
	m, err := rcv.Receive(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, rcv.RejectMessage(t.Context(), m, nil))
}

// receive10 takes one message from queue over AMQP 1.0 and accepts it.
func receive10(t *testing.T, b broker091, queue string) *amqp.Message {
	t.Helper()
	sess := dial10(t, b)
	rcv, err := sess.NewReceiver(t.Context(), b.address10(queue), nil)
	require.NoError(t, err)
	m, err := rcv.Receive(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, rcv.AcceptMessage(t.Context(), m))
	return m
}

// checkOptDeaths checks x-opt-deaths field by field, Go types included
// (go-amqp: uint32 ttl, uint64 count, time.Time first-/last-time, []string
// routing-keys); the times must be equal and not before notBefore.
func checkOptDeaths(t *testing.T, m *amqp.Message, want []map[string]any, notBefore time.Time) {
	t.Helper()
	raw, ok := m.Annotations["x-opt-deaths"]
	require.True(t, ok, "x-opt-deaths missing: %v", m.Annotations)
	deaths, ok := raw.([]map[string]any)
	if !ok {
		// an array of maps with all-string keys decodes as []map[any]any
		anyDeaths, ok2 := raw.([]map[any]any)
		require.True(t, ok2, "x-opt-deaths is an array of maps, got %T", raw)
		for _, d := range anyDeaths {
			sm := map[string]any{}
			for k, v := range d {
				sm[k.(string)] = v
			}
			deaths = append(deaths, sm)
		}
	}
	require.Len(t, deaths, len(want))
	for i, w := range want {
		d := deaths[i]
		ft, ok := d["first-time"].(time.Time)
		require.True(t, ok, "first-time is a timestamp: %T", d["first-time"])
		lt, ok := d["last-time"].(time.Time)
		require.True(t, ok, "last-time is a timestamp: %T", d["last-time"])
		require.True(t, ft.Equal(lt))
		require.False(t, ft.Before(notBefore.Truncate(time.Millisecond)), "first-time %v before %v", ft, notBefore)
		require.WithinDuration(t, notBefore, ft, 5*time.Second)
		rest := map[string]any{}
		for k, v := range d {
			if k != "first-time" && k != "last-time" {
				rest[k] = v
			}
		}
		require.Equal(t, w, rest, "x-opt-deaths[%d]", i)
	}
}

func annotationKeys(m *amqp.Message) []string {
	var keys []string
	for k := range m.Annotations {
		keys = append(keys, k.(string))
	}
	sort.Strings(keys)
	return keys
}

func sortedKeys(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// ---- maxlen and delivery_limit, and a message that dies twice ----

func TestPika091MaxlenReadOver10(t *testing.T)    { checkMaxlenReadOver10(t, pika(t)) }
func TestAmqplib091MaxlenReadOver10(t *testing.T) { checkMaxlenReadOver10(t, amqplib(t)) }

// checkMaxlenReadOver10: two messages published over 0-9-1 into a classic
// queue of x-max-length 1; the first is dropped from the head into the
// dead-letter queue and read over AMQP 1.0.
func checkMaxlenReadOver10(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	work := uniqueName(c.name + "-work")
	dlq := work + ".dlq"
	tp.queue(dlq, nil)
	tp.queue(work, amqp091.Table{"x-max-length": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	before := time.Now()

	for _, id := range []string{"m-a", "m-b"} {
		c.run(t, b, "publish", "--message", mustJSON(t, map[string]any{"routing_key": work, "delivery_mode": 2, "message_id": id, "body": id}))
	}

	m := receive10(t, b, dlq)
	require.NotNil(t, m.Header)
	require.True(t, m.Header.Durable)
	require.Zero(t, m.Header.TTL)
	require.False(t, m.Header.FirstAcquirer)
	require.Zero(t, m.Header.DeliveryCount)
	require.Equal(t, []string{"x-exchange", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
		"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason", "x-opt-deaths", "x-routing-key"}, annotationKeys(m))
	for k, want := range map[string]string{"x-first-death-reason": "maxlen", "x-first-death-queue": work, "x-first-death-exchange": "",
		"x-last-death-reason": "maxlen", "x-last-death-queue": work, "x-last-death-exchange": "", "x-exchange": "", "x-routing-key": dlq} {
		require.Equal(t, want, m.Annotations[k], k)
	}
	checkOptDeaths(t, m, []map[string]any{{"queue": work, "reason": "maxlen", "count": uint64(1), "exchange": "", "routing-keys": []string{work}}}, before)
	require.Equal(t, "m-a", m.Properties.MessageID)
	require.Equal(t, [][]byte{[]byte("m-a")}, m.Data)
}

func TestPika091ReadsDeliveryLimitFrom10(t *testing.T) { checkReadsDeliveryLimitFrom10(t, pika(t)) }
func TestAmqplib091ReadsDeliveryLimitFrom10(t *testing.T) {
	checkReadsDeliveryLimitFrom10(t, amqplib(t))
}

// checkReadsDeliveryLimitFrom10: published over AMQP 1.0 to a quorum queue
// of x-delivery-limit 2, settled modified(delivery-failed) three times over
// 1.0 (the third exceeds the limit), read from the classic dead-letter
// queue over 0-9-1.
func checkReadsDeliveryLimitFrom10(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	work := uniqueName(c.name + "-work")
	dlq := work + ".dlq"
	tp.queue(dlq, nil)
	tp.queue(work, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(2), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	before := time.Now().Unix()

	send10(t, b, work, &amqp.Message{Header: &amqp.MessageHeader{Durable: true, Priority: 4},
		Properties: &amqp.MessageProperties{MessageID: "m-d"}, Data: [][]byte{[]byte("poison")}})
	sess := dial10(t, b)
	rcv, err := sess.NewReceiver(t.Context(), b.address10(work), nil)
	require.NoError(t, err)
	for attempt := 1; attempt <= 3; attempt++ {
		m, err := rcv.Receive(t.Context(), nil)
		require.NoError(t, err, "delivery %d", attempt)
		require.EqualValues(t, attempt-1, m.Header.DeliveryCount, "delivery %d", attempt)
		require.NoError(t, rcv.ModifyMessage(t.Context(), m, &amqp.ModifyMessageOptions{DeliveryFailed: true}))
	}

	e := only(t, c.run(t, b, "get", "--queue", dlq), "message")
	d := e.Delivery
	ty := typesOf(c.name)
	require.Equal(t, "", d.Exchange)
	require.Equal(t, dlq, d.RoutingKey)
	require.Equal(t, "poison", d.Body)
	require.Equal(t, "m-d", d.Properties["message_id"])
	checkXDeath(t, ty, d.Headers["x-death"], []xDeath{{queue: work, reason: "delivery_limit", exchange: "", routingKeys: []string{work}}}, before)
	checkFirstLast(t, ty, d.Headers, xDeath{queue: work, reason: "delivery_limit"}, xDeath{queue: work, reason: "delivery_limit"})
	checkHeaderKeys(t, ty, d, []string{"x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
		"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason"})
}

func TestPika091DiesTwiceAcrossProtocols(t *testing.T) { checkDiesTwiceAcrossProtocols(t, pika(t)) }
func TestAmqplib091DiesTwiceAcrossProtocols(t *testing.T) {
	checkDiesTwiceAcrossProtocols(t, amqplib(t))
}

// checkDiesTwiceAcrossProtocols: published over 0-9-1 to a quorum queue,
// rejected there over AMQP 1.0 into a classic retry queue whose
// x-message-ttl expires it into a parking queue, read over 0-9-1: two
// x-death entries, most recent first, and the first and last deaths told
// apart.
func checkDiesTwiceAcrossProtocols(t *testing.T, c client091) {
	b := startBroker091(t)
	tp := newTopology091(t, b)
	work := uniqueName(c.name + "-work")
	retry, parking := work+".retry", work+".parking"
	tp.queue(parking, nil)
	tp.queue(retry, amqp091.Table{"x-message-ttl": int32(200), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": parking})
	tp.queue(work, amqp091.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": retry})
	before := time.Now().Unix()

	c.run(t, b, "publish", "--message", mustJSON(t, map[string]any{"routing_key": work, "delivery_mode": 2, "message_id": "m-9",
		"headers": map[string]any{"tenant": map[string]any{"S": "acme"}}, "body": "o-1"}))
	reject10(t, b, work)

	e := only(t, c.run(t, b, "get", "--queue", parking), "message")
	d := e.Delivery
	ty := typesOf(c.name)
	require.Equal(t, "", d.Exchange)
	require.Equal(t, parking, d.RoutingKey)
	require.Equal(t, "o-1", d.Body)
	require.EqualValues(t, 2, d.Properties["delivery_mode"])
	require.Equal(t, "m-9", d.Properties["message_id"])
	require.Equal(t, ty.str, d.Headers["tenant"].Type)
	require.Equal(t, "acme", d.Headers["tenant"].str(t))
	checkXDeath(t, ty, d.Headers["x-death"], []xDeath{
		{queue: retry, reason: "expired", exchange: "", routingKeys: []string{retry}},
		{queue: work, reason: "rejected", exchange: "", routingKeys: []string{work}},
	}, before)
	checkFirstLast(t, ty, d.Headers, xDeath{queue: work, reason: "rejected"}, xDeath{queue: retry, reason: "expired"})
	checkHeaderKeys(t, ty, d, []string{"tenant", "x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
		"x-last-death-exchange", "x-last-death-queue", "x-last-death-reason"})
}
