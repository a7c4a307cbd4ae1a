package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	amqp091 "github.com/rabbitmq/amqp091-go"
	rmq "github.com/rabbitmq/rabbitmq-amqp-go-client/pkg/rabbitmqamqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// prioMsg is a message whose header carries priority p; p < 0: no header
// (no priority set).
func prioMsg(body string, p int) *amqp.Message {
	m := amqp.NewMessage([]byte(body))
	if p >= 0 {
		m.Header = &amqp.MessageHeader{Priority: uint8(p)}
	}
	return m
}

// receiveBodies takes n messages from r, accepting each.
func receiveBodies(t *testing.T, r *amqp.Receiver, n int) []string {
	t.Helper()
	var got []string
	for range n {
		m := recv(t, r)
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
		got = append(got, body(m))
	}
	return got
}

// A classic queue declared by the official client with x-max-priority
// delivers to go-amqp the highest priority first, in order within one, a
// priority above the maximum as the maximum and a message without one as
// 0; the queue's info shows the argument.
func TestPriorityClassicQueueOfficialClient(t *testing.T) {
	b := startBroker(t, "")
	conn := rmqConnect(t, b, "guest", "guest")
	info, err := conn.Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "prio", MaxPriority: 5})
	require.NoError(t, err)
	assert.Equal(t, int64(5), info.Arguments()["x-max-priority"])

	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/prio", nil)
	for _, p := range []struct {
		body string
		prio int
	}{{"none1", -1}, {"p1", 1}, {"p5", 5}, {"p0", 0}, {"p9", 9}, {"p3", 3}, {"none2", -1}, {"p5b", 5}} {
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, prioMsg(p.body, p.prio)))
	}
	r := receiver(t, s, "/queues/prio", &amqp.ReceiverOptions{Credit: 100})
	assert.Equal(t, []string{"p5", "p9", "p5b", "p3", "p1", "none1", "p0", "none2"}, receiveBodies(t, r, 8))
	require.NoError(t, r.Close(ctxT(t)))

	// The official client's own publisher and consumer.
	pub, err := conn.NewPublisher(ctxT(t), &rmq.QueueAddress{Queue: "prio"}, nil)
	require.NoError(t, err)
	for _, p := range []int{-1, 2, 4} {
		res, err := pub.Publish(ctxT(t), prioMsg(fmt.Sprint("official-", p), p))
		require.NoError(t, err)
		require.IsType(t, &rmq.StateAccepted{}, res.Outcome, "%v", res.Outcome)
	}
	cons, err := conn.NewConsumer(ctxT(t), "prio", nil)
	require.NoError(t, err)
	var got []string
	for range 3 {
		d, err := cons.Receive(ctxT(t))
		require.NoError(t, err)
		got = append(got, string(d.Message().GetData()))
		require.NoError(t, d.Accept(ctxT(t)))
	}
	// go-amqp leaves a priority of 4 out of the header (the AMQP default),
	// so that message carries none, as RabbitMQ would also see it.
	assert.Equal(t, []string{"official-2", "official--1", "official-4"}, got)
}

// Bad x-max-priority values are refused as RabbitMQ refuses them, over
// AMQP management and the HTTP API; on a quorum queue the argument is
// refused, as RabbitMQ refuses it.
func TestPriorityArgumentRefused(t *testing.T) {
	b := startBroker(t, "", withHTTP)
	base := apiServer(t, b)
	m := rmqConnect(t, b, "guest", "guest").Management()
	_, err := m.DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "big", MaxPriority: 256})
	require.ErrorIs(t, err, rmq.ErrPreconditionFailed)
	_, err = m.DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "qq", Arguments: map[string]any{"x-max-priority": int64(5)}})
	require.ErrorIs(t, err, rmq.ErrPreconditionFailed)

	st, out := apiCall(t, base, "PUT", "/api/queues/%2f/big", map[string]any{"durable": true,
		"arguments": map[string]any{"x-max-priority": 300}})
	assert.Equal(t, http.StatusBadRequest, st)
	assert.Contains(t, string(out), "invalid arg 'x-max-priority' for queue 'big'")
	st, out = apiCall(t, base, "PUT", "/api/queues/%2f/word", map[string]any{"durable": true,
		"arguments": map[string]any{"x-max-priority": "high"}})
	assert.Equal(t, http.StatusBadRequest, st)
	assert.Contains(t, string(out), "x-max-priority")
	// max-priority is not a policy key in RabbitMQ 4.3.
	st, out = apiCall(t, base, "PUT", "/api/policies/%2f/p", map[string]any{"pattern": ".*",
		"definition": map[string]any{"max-priority": 5}})
	assert.Equal(t, http.StatusBadRequest, st)
	assert.Contains(t, string(out), "max-priority")
	// 0 is accepted (RabbitMQ makes it one level above 0).
	st, _ = apiCall(t, base, "PUT", "/api/queues/%2f/zero", map[string]any{"durable": true,
		"arguments": map[string]any{"x-max-priority": 0}})
	assert.Equal(t, http.StatusCreated, st)
}

// A quorum queue has 32 priorities without an argument: above 4 comes
// first, a message without a priority counts as 4.
func TestPriorityQuorumQueue(t *testing.T) {
	b := startBroker(t, "")
	_, err := rmqConnect(t, b, "guest", "guest").Management().DeclareQueue(ctxT(t), &rmq.QuorumQueueSpecification{Name: "qq"})
	require.NoError(t, err)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/qq", nil)
	for _, p := range []struct {
		body string
		prio int
	}{{"none", -1}, {"p3", 3}, {"p5", 5}, {"p31", 31}, {"p0", 0}, {"p200", 200}, {"p10", 10}} {
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, prioMsg(p.body, p.prio)))
	}
	r := receiver(t, s, "/queues/qq", &amqp.ReceiverOptions{Credit: 100})
	assert.Equal(t, []string{"p31", "p200", "p10", "p5", "none", "p3", "p0"}, receiveBodies(t, r, 7))
}

// AMQP 0.9.1 publishers set the priority in the basic properties: a
// classic priority queue and a quorum queue order by it, and a consumer
// sees the property it was published with.
func TestPriorityAMQP091(t *testing.T) {
	b := startBroker(t, "")
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("c", true, false, false, false, amqp091.Table{"x-max-priority": int32(10)})
	require.NoError(t, err)
	_, err = ch.QueueDeclare("q", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	for _, q := range []string{"c", "q"} {
		for _, p := range []struct {
			body string
			prio uint8
		}{{"none", 0}, {"p2", 2}, {"p12", 12}, {"p7", 7}, {"p4", 4}} {
			pub := amqp091.Publishing{Body: []byte(p.body), Priority: p.prio}
			require.NoError(t, ch.PublishWithContext(ctxT(t), "", q, false, false, pub))
		}
	}
	// amqp091-go leaves a zero priority out of the properties: "none" has
	// no priority, level 0 of the classic queue and 4 of the quorum queue
	// (published before p4, so delivered before it).
	want := map[string][]string{"c": {"p12", "p7", "p4", "p2", "none"}, "q": {"p12", "p7", "none", "p4", "p2"}}
	wantPrio := map[string]uint8{"p12": 12, "p7": 7, "p4": 4, "p2": 2, "none": 0}
	for _, q := range []string{"c", "q"} {
		eventually(t, "published", func() bool { return queueLen(t, b, q) == 5 })
		ds, err := ch.Consume(q, "", false, false, false, false, nil)
		require.NoError(t, err)
		var got []string
		for range 5 {
			d := recv091(t, ds)
			got = append(got, string(d.Body))
			assert.Equal(t, wantPrio[string(d.Body)], d.Priority, "the published priority is delivered")
			require.NoError(t, d.Ack(false))
		}
		assert.Equal(t, want[q], got, q)
	}
	// Over the maximum: refused at declare with 406.
	ch2 := channel091(t, dial091(t, b))
	_, err = ch2.QueueDeclare("big", true, false, false, false, amqp091.Table{"x-max-priority": int32(256)})
	assert.Equal(t, amqp091.PreconditionFailed, amqp091Error(t, err).Code)
}

// A durable classic priority queue paged behind a one-byte window keeps
// its priorities across a restart.
func TestPriorityDurableRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *epitaph.Broker {
		return startBroker(t, "", func(o *epitaph.Options) { o.InMemory, o.DataDir, o.QueueWindowBytes = false, dir, 1 })
	}
	b := start()
	_, err := rmqConnect(t, b, "guest", "guest").Management().DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "prio", MaxPriority: 3})
	require.NoError(t, err)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/prio", nil)
	var want [4][]string
	for i := range 40 {
		p := i % 4
		m := prioMsg(fmt.Sprint("m", i), p)
		m.Header.Durable = true
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, m))
		want[3-p] = append(want[3-p], fmt.Sprint("m", i))
	}
	require.NoError(t, b.Close())

	b = start()
	s = session(t, dial(t, b, nil))
	r := receiver(t, s, "/queues/prio", &amqp.ReceiverOptions{Credit: 100})
	var all []string
	for _, w := range want {
		all = append(all, w...)
	}
	assert.Equal(t, all, receiveBodies(t, r, 40))
}

// Over the wire: max-length drop-head dead-letters the message that would
// be delivered next (the highest priority's head), and a message TTL
// expires a low-priority message behind higher ones at its deadline, each
// with its x-opt-deaths reason.
func TestPriorityDeadLetteringOverTheWire(t *testing.T) {
	b := startBroker(t, "")
	m := rmqConnect(t, b, "guest", "guest").Management()
	_, err := m.DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "dlq"})
	require.NoError(t, err)
	_, err = m.DeclareQueue(ctxT(t), &rmq.ClassicQueueSpecification{Name: "prio", MaxPriority: 9, MaxLength: 2,
		DeadLetterExchange: "", DeadLetterRoutingKey: "dlq", Arguments: map[string]any{"x-dead-letter-exchange": ""}})
	require.NoError(t, err)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/prio", nil)
	short := prioMsg("short", 1)
	short.Header.TTL = 2 * time.Second // long enough to be behind the drop, whatever the load
	for _, msg := range []*amqp.Message{prioMsg("hi", 8), short, prioMsg("mid", 5)} {
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg))
	}
	dl := receiver(t, s, "/queues/dlq", &amqp.ReceiverOptions{Credit: 10})
	first := recv(t, dl)
	assert.Equal(t, "hi", body(first), "drop-head takes the next message to deliver")
	assert.Equal(t, "maxlen", deathsOf(t, first)[0]["reason"])
	second := recv(t, dl)
	assert.Equal(t, "short", body(second), "expired behind a higher priority")
	assert.Equal(t, "expired", deathsOf(t, second)[0]["reason"])
	r := receiver(t, s, "/queues/prio", &amqp.ReceiverOptions{Credit: 10})
	assert.Equal(t, []string{"mid"}, receiveBodies(t, r, 1))
}
