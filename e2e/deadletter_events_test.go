package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/router"
)

// sseEvent is one Server-Sent Event: its event name, id and data.
type sseEvent struct {
	name, id, data string
}

// sseStream is a client of the HTTP dead-letter event stream (net/http).
type sseStream struct {
	events   chan sseEvent
	comments chan string
	done     chan struct{} // closed when the stream has ended
	err      error         // why it ended; nil for a clean end (EOF)
	resp     *http.Response
}

// openSSE opens GET /api/events/dead-letters?query as user and requires
// status want; for 200 it reads the stream in the background until it
// ends, which the test's cleanup waits for.
func openSSE(t *testing.T, b *epitaph.Broker, query, user, pass string, want int) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiServer(t, b)+"/api/events/dead-letters?"+query, nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != want || want != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		require.Equal(t, want, resp.StatusCode, "%s", out)
		return nil
	}
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	s := &sseStream{events: make(chan sseEvent, 1000), comments: make(chan string, 1000), done: make(chan struct{}), resp: resp}
	go func() {
		defer close(s.done)
		rd := bufio.NewReader(resp.Body)
		var ev sseEvent
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					s.err = err
				}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				select { // heartbeats nobody waits for are dropped
				case s.comments <- strings.TrimSpace(line[1:]):
				default:
				}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[len("id: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[len("data: "):]
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-s.done
	})
	// The greeting comment is written once the subscription exists.
	select {
	case c := <-s.comments:
		require.Equal(t, "epitaph dead-letter events", c)
	case <-ctxT(t).Done():
		t.Fatal("no greeting on the event stream")
	}
	return s
}

// next returns the next event of the stream.
func (s *sseStream) next(t *testing.T) (sseEvent, dlevents.Parsed) {
	t.Helper()
	select {
	case ev := <-s.events:
		p, err := dlevents.ParseJSON([]byte(ev.data))
		require.NoError(t, err, "%s", ev.data)
		return ev, p
	case <-s.done:
		t.Fatalf("the event stream ended: %v", s.err)
	case <-ctxT(t).Done():
		t.Fatal("no event on the stream")
	}
	panic("unreachable")
}

// eventOf decodes an event message from the AMQP source: its JSON body,
// checked against its application-properties and properties.
func eventOf(t *testing.T, m *amqp.Message) dlevents.Parsed {
	t.Helper()
	require.NotNil(t, m.Properties)
	require.NotNil(t, m.Properties.ContentType)
	assert.Equal(t, "application/json", *m.Properties.ContentType)
	p, err := dlevents.ParseJSON(m.GetData())
	require.NoError(t, err, "%s", m.GetData())
	ap := m.ApplicationProperties
	require.NotNil(t, m.Properties.Subject)
	assert.Equal(t, p.Type, *m.Properties.Subject)
	assert.Equal(t, p.Type, ap["type"])
	if p.Type == dlevents.TypeGap {
		assert.Equal(t, p.Lost, ap["lost"])
		return p
	}
	assert.Equal(t, p.Seq, m.Properties.MessageID)
	assert.Equal(t, p.Seq, ap["seq"])
	for k, v := range map[string]any{"vhost": p.VHost, "queue": p.Queue, "queue_type": p.QueueType, "reason": p.Reason,
		"count": p.Count, "strategy": p.Strategy, "outcome": p.Outcome} {
		assert.Equal(t, v, ap[k], k)
	}
	for k, v := range map[string]*string{"exchange": p.Exchange, "drop_cause": p.DropCause, "message_id": p.MessageID} {
		if v == nil {
			assert.NotContains(t, ap, k)
		} else {
			assert.Equal(t, *v, ap[k], k)
		}
	}
	tm, err := p.ParsedTime()
	require.NoError(t, err)
	require.NotNil(t, m.Properties.CreationTime)
	assert.True(t, m.Properties.CreationTime.Equal(tm))
	assert.WithinDuration(t, time.Now(), tm, time.Minute)
	return p
}

// eventsReceiver attaches to an events address with settle mode mixed
// (events come pre-settled).
func eventsReceiver(t *testing.T, s *amqp.Session, address string, credit int32) *amqp.Receiver {
	t.Helper()
	return receiver(t, s, address, &amqp.ReceiverOptions{Credit: credit})
}

func withMsgID(id string, m *amqp.Message) *amqp.Message {
	m.Properties = &amqp.MessageProperties{MessageID: id}
	return m
}

const eventsTopology = `{"queues":[
 {"name":"rej","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}},
 {"name":"ttl","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq","x-message-ttl":0}},
 {"name":"len","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq","x-max-length":1}},
 {"name":"lim","vhost":"/","durable":true,"arguments":{"x-queue-type":"quorum","x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq","x-delivery-limit":0}},
 {"name":"nodlx","vhost":"/","durable":true,"arguments":{"x-message-ttl":0}},
 {"name":"cyc","vhost":"/","durable":true,"arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"cyc","x-message-ttl":0}},
 {"name":"dlq","vhost":"/","durable":true,"arguments":{}}
]}`

// wantEvent is what one death's event must say.
type wantEvent struct {
	queue, queueType, reason, strategy, outcome, msgID string
	exchange, dropCause                                *string
	routingKeys, targets, cycles                       []string
	errCond                                            string
}

func checkEvent(t *testing.T, p dlevents.Parsed, w wantEvent) {
	t.Helper()
	assert.Equal(t, dlevents.TypeDeadLetter, p.Type)
	assert.Equal(t, "/", p.VHost)
	assert.Equal(t, w.queue, p.Queue)
	assert.Equal(t, w.queueType, p.QueueType)
	assert.Equal(t, w.reason, p.Reason)
	assert.Equal(t, uint64(1), p.Count)
	assert.Equal(t, w.strategy, p.Strategy)
	assert.Equal(t, w.outcome, p.Outcome)
	assert.Equal(t, w.exchange, p.Exchange)
	assert.Equal(t, w.dropCause, p.DropCause)
	require.NotNil(t, p.MessageID)
	assert.Equal(t, w.msgID, *p.MessageID)
	assert.Equal(t, orNone(w.routingKeys), p.RoutingKeys)
	assert.Equal(t, orNone(w.targets), p.TargetQueues)
	assert.Equal(t, orNone(w.cycles), p.CycleQueues)
	assert.Equal(t, []string{}, p.RefusedQueues)
	if w.errCond == "" {
		assert.Nil(t, p.Error)
	} else {
		require.NotNil(t, p.Error)
		assert.Equal(t, w.errCond, p.Error.Condition)
	}
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Each of the four reasons and both drop causes, as a go-amqp consumer of
// /events/dead-letters and an SSE client (net/http) see them: the same
// events, with the same seq, in the order the messages died.
func TestDeadLetterEventsEachReasonOverAMQPAndSSE(t *testing.T) {
	b := startBroker(t, eventsTopology, withHTTP)
	s := session(t, dial(t, b, nil))
	events := eventsReceiver(t, s, "/events/dead-letters", 10)
	stream := openSSE(t, b, "vhost=%2F", "guest", "guest", http.StatusOK)

	dlq := ptr("")
	cases := []struct {
		kill func()
		want wantEvent
	}{
		{func() {
			publish(t, s, "/queues/rej", withMsgID("m-rej", msg("r")))
			r := receiver(t, s, "/queues/rej", nil)
			m := recv(t, r)
			require.NoError(t, r.RejectMessage(ctxT(t), m, &amqp.Error{Condition: "app:bad", Description: "no such product"}))
		}, wantEvent{queue: "rej", queueType: "classic", reason: "rejected", strategy: "at_most_once", outcome: "dead_lettered",
			msgID: "m-rej", exchange: dlq, routingKeys: []string{"dlq"}, targets: []string{"dlq"}, errCond: "app:bad"}},
		{func() { publish(t, s, "/queues/ttl", withMsgID("m-ttl", msg("t"))) },
			wantEvent{queue: "ttl", queueType: "classic", reason: "expired", strategy: "at_most_once", outcome: "dead_lettered",
				msgID: "m-ttl", exchange: dlq, routingKeys: []string{"dlq"}, targets: []string{"dlq"}}},
		{func() { publish(t, s, "/queues/len", withMsgID("m-len-1", msg("l1")), withMsgID("m-len-2", msg("l2"))) },
			wantEvent{queue: "len", queueType: "classic", reason: "maxlen", strategy: "at_most_once", outcome: "dead_lettered",
				msgID: "m-len-1", exchange: dlq, routingKeys: []string{"dlq"}, targets: []string{"dlq"}}},
		{func() {
			publish(t, s, "/queues/lim", withMsgID("m-lim", msg("d")))
			r := receiver(t, s, "/queues/lim", nil)
			modify(t, r, recv(t, r), true, false, nil)
		}, wantEvent{queue: "lim", queueType: "quorum", reason: "delivery_limit", strategy: "at_most_once", outcome: "dead_lettered",
			msgID: "m-lim", exchange: dlq, routingKeys: []string{"dlq"}, targets: []string{"dlq"}}},
		{func() { publish(t, s, "/queues/nodlx", withMsgID("m-nodlx", msg("n"))) },
			wantEvent{queue: "nodlx", queueType: "classic", reason: "expired", strategy: "disabled", outcome: "dropped",
				msgID: "m-nodlx", dropCause: ptr("no_dlx")}},
		{func() { publish(t, s, "/queues/cyc", withMsgID("m-cyc", msg("c"))) },
			wantEvent{queue: "cyc", queueType: "classic", reason: "expired", strategy: "at_most_once", outcome: "dropped",
				msgID: "m-cyc", exchange: dlq, dropCause: ptr("cycle"), routingKeys: []string{"cyc"}, cycles: []string{"cyc"}}},
	}
	var lastSeq uint64
	for _, c := range cases {
		t.Run(c.want.queue, func(t *testing.T) {
			c.kill()
			p := eventOf(t, recv(t, events))
			checkEvent(t, p, c.want)
			assert.Greater(t, p.Seq, lastSeq)
			lastSeq = p.Seq

			ev, sp := stream.next(t)
			assert.Equal(t, dlevents.TypeDeadLetter, ev.name)
			assert.Equal(t, p, sp, "the SSE client sees the same event")
			var raw map[string]any
			require.NoError(t, json.Unmarshal([]byte(ev.data), &raw))
			assert.Len(t, raw, 18, "every key of the documented shape, always: %v", raw)
			assert.Equal(t, ev.id, jsonNumber(p.Seq))
		})
	}
	assert.Equal(t, 4, queueLen(t, b, "dlq"))
}

func jsonNumber(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A queue filter: /events/dead-letters/{queue} and ?queue= carry only that
// queue's events.
func TestDeadLetterEventsQueueFilter(t *testing.T) {
	b := startBroker(t, eventsTopology, withHTTP)
	s := session(t, dial(t, b, nil))
	onlyLen := eventsReceiver(t, s, "/events/dead-letters/"+url.PathEscape("len"), 10)
	stream := openSSE(t, b, "vhost=%2F&queue=len", "guest", "guest", http.StatusOK)
	publish(t, s, "/queues/ttl", msg("t1"), msg("t2"))
	publish(t, s, "/queues/len", withMsgID("a", msg("a")), withMsgID("b", msg("b")))
	p := eventOf(t, recv(t, onlyLen))
	assert.Equal(t, "len", p.Queue)
	assert.Equal(t, "a", *p.MessageID)
	_, sp := stream.next(t)
	assert.Equal(t, p, sp)
	// The ttl deaths came first and were not delivered: the next event is
	// the next len death.
	publish(t, s, "/queues/len", withMsgID("c", msg("c")))
	p = eventOf(t, recv(t, onlyLen))
	assert.Equal(t, "b", *p.MessageID)
	_, sp = stream.next(t)
	assert.Equal(t, "b", *sp.MessageID)
}

// Permissions: one queue's events need read on it, the vhost's stream a
// read permission there, and it then carries only the readable queues'
// events; refusals are amqp:unauthorized-access at attach and 403 (401 for
// bad credentials) over HTTP.
func TestDeadLetterEventsPermissions(t *testing.T) {
	users := []permUser{{name: "reader-len", configure: "^$", write: ".*", read: "^len$"},
		{name: "reader-none", configure: "^$", write: ".*", read: ""}}
	defs := permDefinitions(t, users)
	var topo, d map[string]any
	require.NoError(t, json.Unmarshal([]byte(eventsTopology), &topo))
	require.NoError(t, json.Unmarshal([]byte(defs), &d))
	d["queues"] = topo["queues"]
	for _, u := range d["users"].([]any) {
		u.(map[string]any)["tags"] = []string{"management"}
	}
	doc, err := json.Marshal(d)
	require.NoError(t, err)
	b := startBroker(t, string(doc), withHTTP, func(o *epitaph.Options) { o.AuthFailureDelay = 0 })

	none := permDial(t, b, "reader-none")
	for _, addr := range []string{"/events/dead-letters", "/events/dead-letters/len"} {
		r, err := none.NewReceiver(ctxT(t), addr, nil)
		permAttachOutcome(t, false, r, err)
	}
	rl := permDial(t, b, "reader-len")
	r, err := rl.NewReceiver(ctxT(t), "/events/dead-letters/ttl", nil)
	permAttachOutcome(t, false, r, err)

	openSSE(t, b, "vhost=%2F&queue=len", "reader-none", permPassword, http.StatusForbidden)
	openSSE(t, b, "vhost=%2F", "reader-none", permPassword, http.StatusForbidden)
	openSSE(t, b, "vhost=%2F&queue=ttl", "reader-len", permPassword, http.StatusForbidden)
	openSSE(t, b, "vhost=%2F", "reader-len", "wrong", http.StatusUnauthorized)
	openSSE(t, b, "queue=len", "reader-len", permPassword, http.StatusBadRequest)

	all := eventsReceiver(t, rl, "/events/dead-letters", 10)
	stream := openSSE(t, b, "vhost=%2F", "reader-len", permPassword, http.StatusOK)
	everywhere := openSSE(t, b, "", "reader-len", permPassword, http.StatusOK)
	publish(t, rl, "/queues/ttl", msg("t"))
	publish(t, rl, "/queues/len", withMsgID("a", msg("a")), msg("b"))
	p := eventOf(t, recv(t, all))
	assert.Equal(t, "len", p.Queue, "the ttl death is not readable by this user")
	_, sp := stream.next(t)
	assert.Equal(t, "len", sp.Queue)
	_, sp = everywhere.next(t)
	assert.Equal(t, "len", sp.Queue)
}

// A subscriber that takes nothing loses events beyond its buffer
// (dead-letter-events-buffer): the broker dead-letters everything
// meanwhile, the subscriber then reads the events its buffer held, one gap
// marker counting the rest, and the loss is in the hub's counter and the
// metric.
func TestDeadLetterEventsSlowSubscriberGetsGap(t *testing.T) {
	const buffer, deaths = 4, 30
	b := startBroker(t, eventsTopology, withHTTP, func(o *epitaph.Options) {
		o.DeadLetterEventsBuffer = buffer
		o.Metrics = true
	})
	s := session(t, dial(t, b, nil))
	// Credit 1 and no Receive: go-amqp takes one event and grants no more.
	slow := eventsReceiver(t, s, "/events/dead-letters/ttl", 1)
	stream := openSSE(t, b, "vhost=%2F&queue=ttl", "guest", "guest", http.StatusOK)
	bodies := make([]string, deaths)
	for i := range bodies {
		bodies[i] = "m"
	}
	publishBodies(t, s, "/queues/ttl", bodies...)
	assert.Equal(t, deaths, queueLen(t, b, "dlq"), "every message was dead-lettered while the subscriber read nothing")

	var events, lost uint64
	sawGap := false
	for events+lost < deaths {
		p := eventOf(t, recv(t, slow))
		if p.Type == dlevents.TypeGap {
			require.False(t, sawGap, "one gap marker for one run of losses")
			sawGap = true
			lost += p.Lost
			continue
		}
		events++
	}
	assert.True(t, sawGap)
	assert.LessOrEqual(t, events, uint64(buffer+1), "what the buffer held, and the event the credit took")
	// The SSE client read everything (its buffer never filled, or it lost
	// some: either way, nothing is missing without a gap marker).
	var sseEvents, sseLost uint64
	for sseEvents+sseLost < deaths {
		ev, p := stream.next(t)
		if ev.name == dlevents.TypeGap {
			sseLost += p.Lost
			continue
		}
		sseEvents++
	}
	assert.Equal(t, lost+sseLost, b.DeadLetterEvents().Lost())
	metrics := string(api(t, apiServer(t, b), http.MethodGet, "/metrics", nil, http.StatusOK))
	assert.Contains(t, metrics, "epitaph_dead_letter_events_lost_total "+jsonNumber(lost+sseLost)+"\n")
	assert.Contains(t, metrics, "epitaph_dead_letter_event_subscribers 2\n")
}

// dead-letter-events-max-subscribers: a subscriber beyond it is refused,
// over AMQP with amqp:resource-limit-exceeded, over HTTP with 503; and an
// events address is no target.
func TestDeadLetterEventsLimits(t *testing.T) {
	b := startBroker(t, eventsTopology, withHTTP, func(o *epitaph.Options) { o.DeadLetterEventsMaxSubscribers = 1 })
	s := session(t, dial(t, b, nil))
	c1 := dial(t, b, nil)
	eventsReceiver(t, session(t, c1), "/events/dead-letters", 1)
	_, err := s.NewReceiver(ctxT(t), "/events/dead-letters/ttl", nil)
	require.Error(t, err)
	assert.Equal(t, amqp.ErrCond("amqp:resource-limit-exceeded"), amqpErr(t, err).Condition)
	openSSE(t, b, "vhost=%2F", "guest", "guest", http.StatusServiceUnavailable)
	// A connection that goes takes its subscription with it.
	require.NoError(t, c1.Close())
	eventually(t, "the subscription to end", func() bool { return b.DeadLetterEvents().Subscribers() == 0 })
	openSSE(t, b, "vhost=%2F", "guest", "guest", http.StatusOK)

	_, err = s.NewSender(ctxT(t), "/events/dead-letters", nil)
	require.Error(t, err)
	assert.Equal(t, amqp.ErrCond("amqp:invalid-field"), amqpErr(t, err).Condition)
	_, err = s.NewReceiver(ctxT(t), "/events/dead-letters", &amqp.ReceiverOptions{
		RequestedSenderSettleMode: amqp.SenderSettleModeUnsettled.Ptr()})
	require.Error(t, err)
	assert.Equal(t, amqp.ErrCond("amqp:not-implemented"), amqpErr(t, err).Condition)
}

// Heartbeats are comment lines (dead-letter-events-heartbeat), and the
// broker's shutdown ends the stream cleanly: the client reads EOF after the
// events it was sent.
func TestDeadLetterEventsSSEHeartbeatAndShutdown(t *testing.T) {
	opts := testOptions()
	opts.HTTPListen = "127.0.0.1:0"
	opts.Definitions = []byte(eventsTopology)
	opts.DeadLetterEventsHeartbeat = 20 * time.Millisecond
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	stream := openSSE(t, b, "", "guest", "guest", http.StatusOK)
	select {
	case c := <-stream.comments:
		assert.Equal(t, "heartbeat", c)
	case <-ctxT(t).Done():
		t.Fatal("no heartbeat")
	}
	vh := rootVHost(t, b)
	q, ok := vh.Queue("ttl")
	require.True(t, ok)
	require.Equal(t, router.Classic, q.Type())
	publish(t, session(t, dial(t, b, nil)), "/queues/ttl", msg("t"))
	_, p := stream.next(t)
	assert.Equal(t, "ttl", p.Queue)
	require.NoError(t, b.Close())
	select {
	case <-stream.done:
		assert.NoError(t, stream.err, "a clean end of the stream")
	case <-ctxT(t).Done():
		t.Fatal("the stream outlived the broker")
	}
}

// epitaphctl watch_dead_letters prints each death as it happens, in a
// table or as one JSON event per line.
func TestEpitaphctlWatchDeadLetters(t *testing.T) {
	b := startBroker(t, eventsTopology, withHTTP)
	base := apiServer(t, b)
	bin := epitaphctlBin(t)
	s := session(t, dial(t, b, nil))
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			cmd := exec.CommandContext(ctxT(t), bin, "watch_dead_letters", "--queue", "ttl", "--count", "2", "--formatter", format)
			cmd.Env = append(os.Environ(), "EPITAPH_URL="+base)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Start())
			eventually(t, "epitaphctl to subscribe", func() bool { return b.DeadLetterEvents().Subscribers() == 1 })
			publish(t, s, "/queues/len", msg("not watched"), msg("not watched"))
			publish(t, s, "/queues/ttl", withMsgID("w1", msg("1")), withMsgID("w2", msg("2")))
			require.NoError(t, cmd.Wait(), "stderr: %s", stderr.String())
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if format == "json" {
				require.Len(t, lines, 2, stdout.String())
				for i, l := range lines {
					p, err := dlevents.ParseJSON([]byte(l))
					require.NoError(t, err)
					assert.Equal(t, "ttl", p.Queue)
					assert.Equal(t, []string{"w1", "w2"}[i], *p.MessageID)
				}
			} else {
				require.Len(t, lines, 4, stdout.String()) // the info line, the header, two events
				assert.Equal(t, "time\tqueue\treason\tcount\toutcome\tto\tmessage_id", lines[1])
				assert.Regexp(t, `^\S+\tttl\texpired\t1\tdead_lettered\tdlq\tw1$`, lines[2])
				assert.Regexp(t, `^\S+\tttl\texpired\t1\tdead_lettered\tdlq\tw2$`, lines[3])
			}
			eventually(t, "epitaphctl's subscription to end", func() bool { return b.DeadLetterEvents().Subscribers() == 0 })
		})
	}
}
