package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

const oneQueue = `{"queues":[{"name":"q","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`

func TestConnectNoSASLAnonymousPlain(t *testing.T) {
	b := startBroker(t, `{"rabbit_version":"4.1.0","users":[{"name":"alice","password":"s3cret","tags":""},
		{"name":"guest","password":"guest","tags":"administrator"}],
		"vhosts":[{"name":"/"}],"permissions":[{"user":"alice","vhost":"/","configure":".*","write":".*","read":".*"},
		{"user":"guest","vhost":"/","configure":".*","write":".*","read":".*"}]}`,
		func(o *epitaph.Options) { o.AuthFailureDelay = time.Millisecond }) // the wrong password below
	addr := "amqp://" + b.Addr().String()
	for _, tc := range []struct {
		label string
		url   string
		opts  *amqp.ConnOptions
	}{
		{"no SASL", addr, nil},
		{"ANONYMOUS", addr, &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()}},
		{"PLAIN", "amqp://alice:s3cret@" + b.Addr().String(), nil},
	} {
		t.Run(tc.label, func(t *testing.T) {
			c, err := amqp.Dial(ctxT(t), tc.url, tc.opts)
			require.NoError(t, err)
			props := c.Properties()
			assert.Equal(t, "epitaph", props["product"])
			assert.Equal(t, "4.3.0", props["version"])
			require.NoError(t, c.Close())
		})
	}
	t.Run("PLAIN wrong password", func(t *testing.T) {
		_, err := amqp.Dial(ctxT(t), "amqp://alice:wrong@"+b.Addr().String(), nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "SASL")
	})
	t.Run("unknown vhost", func(t *testing.T) {
		// The broker answers open with open, then close(unauthorized-access).
		c, err := amqp.Dial(ctxT(t), addr, &amqp.ConnOptions{HostName: "vhost:nope"})
		if err == nil {
			select {
			case <-c.Done():
				err = c.Err()
			case <-ctxT(t).Done():
				t.Fatal("connection to an unknown vhost stayed open")
			}
		}
		var ce *amqp.ConnError
		require.ErrorAs(t, err, &ce)
		require.NotNil(t, ce.RemoteErr)
		assert.Equal(t, amqp.ErrCond("amqp:unauthorized-access"), ce.RemoteErr.Condition)
	})
}

func TestAnonymousForbidden(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.Anonymous = epitaph.AnonymousNone })
	_, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), nil)
	require.Error(t, err)
	_, err = amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	require.Error(t, err)
	c, err := amqp.Dial(ctxT(t), "amqp://guest:guest@"+b.Addr().String(), nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

func TestQueueAddressRoundTrip(t *testing.T) {
	b := startBroker(t, oneQueue)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/q", nil)
	m := msg("hello")
	m.Annotations = amqp.Annotations{"x-opt-app": "v"}
	m.ApplicationProperties = map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	m.Properties = &amqp.MessageProperties{MessageID: "id-1"}
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, m))

	r := receiver(t, s, "/queues/q", nil)
	got := recv(t, r)
	assert.Equal(t, "hello", body(got))
	assert.Equal(t, "v", got.Annotations["x-opt-app"])
	assert.Equal(t, "", got.Annotations["x-exchange"])
	assert.Equal(t, "q", got.Annotations["x-routing-key"])
	assert.Equal(t, "id-1", got.Properties.MessageID)
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", got.ApplicationProperties["traceparent"])
	assert.True(t, got.Header.FirstAcquirer)
	assert.Zero(t, got.Header.DeliveryCount)
	require.NoError(t, r.AcceptMessage(ctxT(t), got))
	eventually(t, "queue empty", func() bool { return queueLen(t, b, "q") == 0 })
}

func TestAttachUnknownQueueNotFound(t *testing.T) {
	b := startBroker(t, "")
	s := session(t, dial(t, b, nil))
	_, err := s.NewReceiver(ctxT(t), "/queues/missing", nil)
	assert.Equal(t, amqp.ErrCond("amqp:not-found"), amqpErr(t, err).Condition)
	_, err = s.NewSender(ctxT(t), "/queues/missing", nil)
	assert.Equal(t, amqp.ErrCond("amqp:not-found"), amqpErr(t, err).Condition)
	_, err = s.NewSender(ctxT(t), "/exchanges/missing", nil)
	assert.Equal(t, amqp.ErrCond("amqp:not-found"), amqpErr(t, err).Condition)
	_, err = s.NewReceiver(ctxT(t), "missing", nil)
	assert.Equal(t, amqp.ErrCond("amqp:not-found"), amqpErr(t, err).Condition)
	// The session still works.
	_, err = s.NewSender(ctxT(t), "/exchanges/amq.direct", nil)
	require.NoError(t, err)
}

func TestAutoCreateBareAddress(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.AutoCreateQueues = true })
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "bare-q", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("x")))
	r := receiver(t, s, "bare-q", nil)
	assert.Equal(t, "x", body(recv(t, r)))
}

const exchangesDefs = `{
 "queues":[{"name":"qa","vhost":"/","durable":true},{"name":"qb","vhost":"/","durable":true},
           {"name":"q c/d","vhost":"/","durable":true},{"name":"trash","vhost":"/","durable":true}],
 "exchanges":[{"name":"fan","vhost":"/","type":"fanout","durable":true},
              {"name":"top","vhost":"/","type":"topic","durable":true},
              {"name":"dir","vhost":"/","type":"direct","durable":true,"arguments":{"alternate-exchange":"ae"}},
              {"name":"ae","vhost":"/","type":"fanout","durable":true},
              {"name":"hdr","vhost":"/","type":"headers","durable":true}],
 "bindings":[{"source":"fan","vhost":"/","destination":"qa","destination_type":"queue","routing_key":""},
             {"source":"fan","vhost":"/","destination":"qb","destination_type":"queue","routing_key":""},
             {"source":"top","vhost":"/","destination":"qa","destination_type":"queue","routing_key":"orders.*.eu"},
             {"source":"top","vhost":"/","destination":"qb","destination_type":"queue","routing_key":"orders.#"},
             {"source":"dir","vhost":"/","destination":"qa","destination_type":"queue","routing_key":"a"},
             {"source":"ae","vhost":"/","destination":"trash","destination_type":"queue","routing_key":""},
             {"source":"hdr","vhost":"/","destination":"qa","destination_type":"queue","routing_key":"","arguments":{"x-match":"all","k":"v","n":5}},
             {"source":"hdr","vhost":"/","destination":"qb","destination_type":"queue","routing_key":"","arguments":{"x-match":"any","k":"v","n":6}},
             {"source":"amq.direct","vhost":"/","destination":"q c/d","destination_type":"queue","routing_key":"k/1"}]}`

func TestExchangeTypesAndAddresses(t *testing.T) {
	b := startBroker(t, exchangesDefs)
	s := session(t, dial(t, b, nil))
	ra := receiver(t, s, "/queues/qa", &amqp.ReceiverOptions{Credit: 100})
	rb := receiver(t, s, "/queues/qb", &amqp.ReceiverOptions{Credit: 100})
	rtrash := receiver(t, s, "/queues/trash", nil)
	rcd := receiver(t, s, "/queues/q%20c%2Fd", nil)

	expect := func(r *amqp.Receiver, want string) {
		t.Helper()
		m := recv(t, r)
		assert.Equal(t, want, body(m))
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	// fanout
	require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/exchanges/fan", nil), msg("f1")))
	expect(ra, "f1")
	expect(rb, "f1")
	// topic
	top := sender(t, s, "/exchanges/top/orders.new.eu", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, top, msg("t1")))
	expect(ra, "t1")
	expect(rb, "t1")
	require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/exchanges/top/orders", nil), msg("t2")))
	expect(rb, "t2")
	require.IsType(t, &amqp.StateReleased{}, send(t, sender(t, s, "/exchanges/top/invoices.x", nil), msg("t3")))
	// direct with alternate exchange
	require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/exchanges/dir/a", nil), msg("d1")))
	expect(ra, "d1")
	require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/exchanges/dir/zzz", nil), msg("d2")))
	expect(rtrash, "d2")
	// headers
	hs := sender(t, s, "/exchanges/hdr", nil)
	m := msg("h1")
	m.ApplicationProperties = map[string]any{"k": "v", "n": int64(5)}
	require.IsType(t, &amqp.StateAccepted{}, send(t, hs, m))
	expect(ra, "h1")
	expect(rb, "h1")
	m = msg("h2")
	m.ApplicationProperties = map[string]any{"n": int32(6)}
	require.IsType(t, &amqp.StateAccepted{}, send(t, hs, m))
	expect(rb, "h2")
	// percent-encoded segments
	require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/exchanges/amq.direct/k%2F1", nil), msg("p1")))
	expect(rcd, "p1")
	require.IsType(t, &amqp.StateAccepted{}, send(t, sender(t, s, "/queues/q%20c%2Fd", nil), msg("p2")))
	expect(rcd, "p2")
	// amq.fanout with nothing bound: released
	require.IsType(t, &amqp.StateReleased{}, send(t, sender(t, s, "/exchanges/amq.fanout", nil), msg("u")))
}

func TestAnonymousTerminusAndXCC(t *testing.T) {
	b := startBroker(t, exchangesDefs)
	s := session(t, dial(t, b, nil))
	ra := receiver(t, s, "/queues/qa", &amqp.ReceiverOptions{Credit: 10})
	rb := receiver(t, s, "/queues/qb", &amqp.ReceiverOptions{Credit: 10})
	anon := sender(t, s, "", nil)

	to := func(addr, text string) *amqp.Message {
		m := msg(text)
		m.Properties = &amqp.MessageProperties{To: &addr}
		return m
	}
	require.IsType(t, &amqp.StateAccepted{}, send(t, anon, to("/queues/qa", "a1")))
	assert.Equal(t, "a1", body(recv(t, ra)))
	require.IsType(t, &amqp.StateAccepted{}, send(t, anon, to("/exchanges/dir/a", "a2")))
	assert.Equal(t, "a2", body(recv(t, ra)))
	// No 'to': rejected, the link stays up.
	_, err := anon.SendWithReceipt(ctxT(t), msg("no-to"), nil)
	require.NoError(t, err)
	// A missing queue: routed through the default exchange to nowhere,
	// released (RabbitMQ 4.3); a missing exchange is rejected, not-found.
	require.IsType(t, &amqp.StateReleased{}, send(t, anon, to("/queues/nope", "a3")))
	st := send(t, anon, to("/exchanges/nope", "a3"))
	require.IsType(t, &amqp.StateRejected{}, st)
	assert.Equal(t, amqp.ErrCond("amqp:not-found"), st.(*amqp.StateRejected).Error.Condition)

	// x-cc adds routing keys: to /queues/qa with CC qb.
	m := to("/queues/qa", "cc1")
	m.Annotations = amqp.Annotations{"x-cc": []any{"qb"}}
	require.IsType(t, &amqp.StateAccepted{}, send(t, anon, m))
	assert.Equal(t, "cc1", body(recv(t, ra)))
	got := recv(t, rb)
	assert.Equal(t, "cc1", body(got))
	assert.Equal(t, "qa", got.Annotations["x-routing-key"])

	// x-cc as an array on the anonymous terminus: rejected with invalid-field, link stays.
	m = to("/queues/qa", "cc2")
	m.Annotations = amqp.Annotations{"x-cc": []string{"qb"}}
	st = send(t, anon, m)
	require.IsType(t, &amqp.StateRejected{}, st)
	assert.Equal(t, amqp.ErrCond("amqp:invalid-field"), st.(*amqp.StateRejected).Error.Condition)
	require.IsType(t, &amqp.StateAccepted{}, send(t, anon, to("/queues/qa", "after")))

	// x-cc as an array on a fixed address: the link is detached with invalid-field.
	fixed := sender(t, s, "/exchanges/amq.direct/key-1", nil)
	m = msg("bad")
	m.Annotations = amqp.Annotations{"x-cc": []string{"qb"}}
	// The broker settles it released, then detaches; go-amqp may surface the
	// detach before the outcome (they are handled on different goroutines).
	if rcpt, e := fixed.SendWithReceipt(ctxT(t), m, nil); e == nil {
		if st, e := rcpt.Wait(ctxT(t)); e == nil {
			require.IsType(t, &amqp.StateReleased{}, st)
		}
	}
	// The detach follows the released outcome; the next send fails with it.
	eventually(t, "the link to be detached", func() bool {
		rcpt, e := fixed.SendWithReceipt(ctxT(t), msg("next"), nil)
		if e == nil {
			_, e = rcpt.Wait(ctxT(t))
		}
		err = e
		return err != nil
	})
	assert.Equal(t, amqp.ErrCond("amqp:invalid-field"), amqpErr(t, err).Condition)
}

// outcomes runs the four outcomes against a queue type and checks the
// delivery-count effects of each outcome (as RabbitMQ 4.3 applies them).
func TestOutcomes(t *testing.T) {
	for _, typ := range []router.QueueType{router.Classic, router.Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, nil)
			s := session(t, dial(t, b, nil))
			snd := sender(t, s, "/queues/q", nil)
			r := receiver(t, s, "/queues/q", nil)

			send(t, snd, msg("m"))
			m := recv(t, r)
			assert.True(t, m.Header.FirstAcquirer)
			assert.Zero(t, m.Header.DeliveryCount)

			// released: requeued, dc unchanged, no longer first acquirer
			require.NoError(t, r.ReleaseMessage(ctxT(t), m))
			m = recv(t, r)
			assert.Equal(t, "m", body(m))
			assert.Zero(t, m.Header.DeliveryCount)
			assert.False(t, m.Header.FirstAcquirer)

			// modified(delivery-failed=false): requeued, dc unchanged
			require.NoError(t, r.ModifyMessage(ctxT(t), m, &amqp.ModifyMessageOptions{}))
			m = recv(t, r)
			assert.Zero(t, m.Header.DeliveryCount)

			// modified(delivery-failed=true): requeued, dc+1
			require.NoError(t, r.ModifyMessage(ctxT(t), m, &amqp.ModifyMessageOptions{DeliveryFailed: true}))
			m = recv(t, r)
			assert.Equal(t, uint32(1), m.Header.DeliveryCount)
			if typ == router.Quorum {
				assert.Equal(t, int64(3), m.Annotations["x-acquired-count"])
				assert.Equal(t, int64(1), m.Annotations["x-delivery-count"])
			}

			// modified(undeliverable-here): discarded (no DLX)
			require.NoError(t, r.ModifyMessage(ctxT(t), m, &amqp.ModifyMessageOptions{UndeliverableHere: true}))
			eventually(t, "q empty", func() bool { return queueLen(t, b, "q") == 0 })

			// rejected: discarded; accepted: removed
			send(t, snd, msg("r"))
			require.NoError(t, r.RejectMessage(ctxT(t), recv(t, r), nil))
			send(t, snd, msg("a"))
			require.NoError(t, r.AcceptMessage(ctxT(t), recv(t, r)))
			requireNoMessage(t, r, 200*time.Millisecond)
			assert.Equal(t, 0, queueLen(t, b, "q"))
		})
	}
}

func TestSettleModes(t *testing.T) {
	b := startBroker(t, oneQueue)
	s := session(t, dial(t, b, nil))
	settled := amqp.SenderSettleModeSettled
	unsettled := amqp.SenderSettleModeUnsettled
	first := amqp.ReceiverSettleModeFirst
	second := amqp.ReceiverSettleModeSecond

	// Pre-settled publisher.
	ps := sender(t, s, "/queues/q", &amqp.SenderOptions{SettlementMode: &settled})
	require.NoError(t, ps.Send(ctxT(t), msg("pre"), nil))
	// Publisher asking for rcv-settle-mode second.
	s2 := sender(t, s, "/queues/q", &amqp.SenderOptions{SettlementMode: &unsettled, RequestedReceiverSettleMode: &second})
	require.IsType(t, &amqp.StateAccepted{}, send(t, s2, msg("second")))
	eventually(t, "2 messages", func() bool { return queueLen(t, b, "q") == 2 })

	// Consumer with settle mode second: the broker settles after the outcome.
	r2 := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{SettlementMode: &second})
	m := recv(t, r2)
	assert.Equal(t, "pre", body(m))
	require.NoError(t, r2.AcceptMessage(ctxT(t), m))
	require.NoError(t, r2.Close(ctxT(t)))

	// Pre-settled consumer (snd-settle-mode settled): removed on delivery.
	r1 := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{RequestedSenderSettleMode: &settled, SettlementMode: &first})
	m = recv(t, r1)
	assert.Equal(t, "second", body(m))
	eventually(t, "queue empty", func() bool { return queueLen(t, b, "q") == 0 })
	require.NoError(t, r1.Close(ctxT(t)))
}

func TestDrain(t *testing.T) {
	b := startBroker(t, oneQueue)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/q", nil)
	for i := range 3 {
		send(t, snd, msg(fmt.Sprint(i)))
	}
	r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: -1})
	require.NoError(t, r.IssueCredit(10))
	for i := range 3 {
		m := recv(t, r)
		assert.Equal(t, fmt.Sprint(i), body(m))
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	// Drain the 7 remaining credits: the broker answers with drain and credit 0.
	require.NoError(t, r.DrainCredit(ctxT(t), nil))
	send(t, snd, msg("late"))
	requireNoMessage(t, r, 200*time.Millisecond)
	require.NoError(t, r.IssueCredit(1))
	assert.Equal(t, "late", body(recv(t, r)))
}

func TestLargeMessage(t *testing.T) {
	b := startBroker(t, oneQueue)
	s := session(t, dial(t, b, &amqp.ConnOptions{MaxFrameSize: 16384}))
	payload := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)
	snd := sender(t, s, "/queues/q", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, amqp.NewMessage(payload)))
	r := receiver(t, s, "/queues/q", nil)
	m := recv(t, r)
	require.Equal(t, len(payload), len(m.GetData()))
	require.True(t, bytes.Equal(payload, m.GetData()))
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
}

// Deliveries around the consumer's max-frame-size: the broker encodes a
// delivery that fits one frame in place and splits the others, and no frame
// exceeds the size the consumer announced (go-amqp does not check that, so
// a raw consumer does).
func TestDeliveryAtFrameSizeBoundary(t *testing.T) {
	b := startBroker(t, oneQueue)
	const maxFrame = 4096
	snd := sender(t, session(t, dial(t, b, nil)), "/queues/q", nil)
	var payloads [][]byte
	for size := maxFrame - 200; size <= maxFrame+40; size += 3 {
		payloads = append(payloads, bytes.Repeat([]byte{byte(size)}, size))
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, amqp.NewMessage(payloads[len(payloads)-1])))
	}

	r := rawDial(t, b)
	r.openWith(&amqp10.Open{ContainerID: "raw", MaxFrameSize: maxFrame, ChannelMax: 10})
	r.write(0, &amqp10.Begin{NextOutgoingID: 0, IncomingWindow: 10000, OutgoingWindow: 1000, HandleMax: 10})
	expectFrame[*amqp10.Begin](r)
	r.write(0, &amqp10.Attach{Name: "raw-receiver", Handle: 0, Role: amqp10.RoleReceiver,
		SndSettleMode: amqp10.SndSettled, HasSndSettleMode: true,
		Source: &amqp10.Source{Address: "/queues/q", HasAddress: true}, Target: &amqp10.Target{}})
	expectFrame[*amqp10.Attach](r)
	r.write(0, &amqp10.Flow{NextIncomingID: 0, HasNextIncomingID: true, IncomingWindow: 10000,
		NextOutgoingID: 0, OutgoingWindow: 1000, Handle: 0, HasHandle: true,
		DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: uint32(len(payloads)), HasLinkCredit: true})
	var msg []byte
	for i := 0; i < len(payloads); {
		var hb [8]byte
		_, err := io.ReadFull(r.nc, hb[:])
		require.NoError(t, err)
		fh, err := amqp10.ParseFrameHeader(hb[:])
		require.NoError(t, err)
		require.LessOrEqual(t, fh.Size, uint32(maxFrame), "frame over the consumer's max-frame-size (message %d)", i)
		body := make([]byte, fh.Size-8)
		_, err = io.ReadFull(r.nc, body)
		require.NoError(t, err)
		if len(body) == 0 {
			continue
		}
		p, payload, err := amqp10.ParsePerformative(body[int(fh.DataOffset)*4-8:])
		require.NoError(t, err)
		tr, ok := p.(*amqp10.Transfer)
		require.True(t, ok, "got %T", p)
		msg = append(msg, payload...)
		if !tr.More {
			require.True(t, bytes.Contains(msg, payloads[i]), "message %d (%d bytes) not delivered whole", i, len(payloads[i]))
			msg, i = nil, i+1
		}
	}
}

// A consumer that stops reading fills the socket: the broker's writes then
// end part-way through a frame, and what is left must still go out first
// and whole. 1,500 deliveries of 16 KiB (24 MB) are far more than loopback
// socket buffers hold, so the consumer reads them only once the queue has
// handed them all out.
func TestConsumerThatStopsReadingGetsEveryFrameWhole(t *testing.T) {
	b := startBroker(t, oneQueue)
	const n, size = 1500, 16 << 10
	snd := sender(t, session(t, dial(t, b, nil)), "/queues/q", &amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
	payload := func(i int) []byte {
		p := bytes.Repeat([]byte{byte(i)}, size)
		binary.BigEndian.PutUint32(p, uint32(i))
		return p
	}
	for i := range n {
		require.NoError(t, snd.Send(ctxT(t), amqp.NewMessage(payload(i)), nil))
	}
	eventually(t, "all published", func() bool { return queueLen(t, b, "q") == n })

	r := rawDial(t, b)
	r.open()
	r.write(0, &amqp10.Begin{NextOutgoingID: 0, IncomingWindow: n, OutgoingWindow: 1000, HandleMax: 10})
	expectFrame[*amqp10.Begin](r)
	r.write(0, &amqp10.Attach{Name: "stalled", Handle: 0, Role: amqp10.RoleReceiver,
		SndSettleMode: amqp10.SndSettled, HasSndSettleMode: true,
		Source: &amqp10.Source{Address: "/queues/q", HasAddress: true}, Target: &amqp10.Target{}})
	expectFrame[*amqp10.Attach](r)
	r.write(0, &amqp10.Flow{NextIncomingID: 0, HasNextIncomingID: true, IncomingWindow: n,
		NextOutgoingID: 0, OutgoingWindow: 1000, Handle: 0, HasHandle: true,
		DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: n, HasLinkCredit: true})
	eventually(t, "all handed out", func() bool { return queueLen(t, b, "q") == 0 })

	for i := range n {
		tr, body := expectFrame[*amqp10.Transfer](r)
		require.False(t, tr.More, "a 16 KiB message fits one 64 KiB frame")
		require.Equal(t, uint32(i), tr.DeliveryID, "delivery-ids are contiguous")
		require.True(t, bytes.Contains(body, payload(i)), "message %d not delivered whole", i)
	}
}

// go-amqp refuses, client-side, to send a message over the max-message-size
// the broker advertised; the broker's own enforcement is tested with a raw
// client in malformed_test.go.
func TestMessageSizeAdvertised(t *testing.T) {
	b := startBroker(t, oneQueue, func(o *epitaph.Options) { o.MaxMessageSize = 1024 })
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/q", nil)
	assert.Equal(t, uint64(1024), snd.MaxMessageSize())
	require.Error(t, snd.Send(ctxT(t), amqp.NewMessage(make([]byte, 4096)), nil))
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("small")))
}

func TestManySessions(t *testing.T) {
	b := startBroker(t, oneQueue)
	c := dial(t, b, nil)
	var sessions []*amqp.Session
	for i := range 100 {
		s, err := c.NewSession(ctxT(t), nil)
		require.NoError(t, err, "session %d", i)
		sessions = append(sessions, s)
	}
	for i, s := range sessions {
		snd := sender(t, s, "/queues/q", nil)
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg(fmt.Sprint(i))))
	}
	assert.Equal(t, 100, queueLen(t, b, "q"))
	for _, s := range sessions {
		require.NoError(t, s.Close(ctxT(t)))
	}
}

func TestRedeliveryAfterDisconnect(t *testing.T) {
	for _, typ := range []router.QueueType{router.Classic, router.Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", typ, nil)
			c1 := dial(t, b, nil)
			s1 := session(t, c1)
			send(t, sender(t, s1, "/queues/q", nil), msg("m"))

			// A detach returns the message; only a classic queue counts a
			// failed delivery for it (RabbitMQ 4.3).
			detachFailed := uint32(0)
			if typ == router.Classic {
				detachFailed = 1
			}
			r1 := receiver(t, s1, "/queues/q", nil)
			m := recv(t, r1)
			assert.True(t, m.Header.FirstAcquirer)
			require.NoError(t, r1.Close(ctxT(t)))
			r2 := receiver(t, s1, "/queues/q", nil)
			m = recv(t, r2)
			assert.Equal(t, "m", body(m))
			assert.Equal(t, detachFailed, m.Header.DeliveryCount)
			assert.False(t, m.Header.FirstAcquirer)

			// A clean close of the connection returns it to the next consumer
			// and counts a failed delivery, as an abrupt connection loss does
			// (TestDefaultDeliveryLimit, through a proxy that drops the TCP
			// connection).
			require.NoError(t, c1.Close())
			s2 := session(t, dial(t, b, nil))
			r3 := receiver(t, s2, "/queues/q", nil)
			m = recv(t, r3)
			assert.Equal(t, "m", body(m))
			assert.Equal(t, detachFailed+1, m.Header.DeliveryCount)
		})
	}
}

func TestTTLExpiry(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "ttl", router.Classic, amqp10.Map{{Key: "x-message-ttl", Value: int64(50)}})
	declareQueue(t, b, "q", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	send(t, sender(t, s, "/queues/ttl", nil), msg("queue-ttl"))
	m := msg("msg-ttl")
	m.Header = &amqp.MessageHeader{TTL: 50 * time.Millisecond}
	send(t, sender(t, s, "/queues/q", nil), m)
	send(t, sender(t, s, "/queues/q", nil), msg("stays"))
	eventually(t, "expiry", func() bool { return queueLen(t, b, "ttl") == 0 && queueLen(t, b, "q") == 1 })
	r := receiver(t, s, "/queues/q", nil)
	assert.Equal(t, "stays", body(recv(t, r)))
}

func TestOverflow(t *testing.T) {
	t.Run("drop-head", func(t *testing.T) {
		b := startBroker(t, "")
		declareQueue(t, b, "q", router.Classic, amqp10.Map{{Key: "x-max-length", Value: int64(2)}})
		s := session(t, dial(t, b, nil))
		snd := sender(t, s, "/queues/q", nil)
		for _, x := range []string{"m1", "m2", "m3"} {
			require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg(x)))
		}
		r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 10})
		assert.Equal(t, "m2", body(recv(t, r)))
		assert.Equal(t, "m3", body(recv(t, r)))
	})
	for _, mode := range []string{"reject-publish", "reject-publish-dlx"} {
		t.Run(mode, func(t *testing.T) {
			b := startBroker(t, "")
			declareQueue(t, b, "q", router.Classic, amqp10.Map{{Key: "x-max-length", Value: int64(1)},
				{Key: "x-overflow", Value: mode}})
			s := session(t, dial(t, b, nil))
			snd := sender(t, s, "/queues/q", nil)
			require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg("m1")))
			st := send(t, snd, msg("m2"))
			require.IsType(t, &amqp.StateRejected{}, st)
			e := st.(*amqp.StateRejected).Error
			assert.Equal(t, amqp.ErrCond("amqp:resource-limit-exceeded"), e.Condition)
			assert.Equal(t, "queue 'q' exceeded maximum length", e.Description)
			assert.Equal(t, "q", e.Info["queue"])
			assert.Equal(t, 1, queueLen(t, b, "q"))
		})
	}
}

func TestShutdownClosesConnectionsForced(t *testing.T) {
	b, err := epitaph.Start(testOptions())
	require.NoError(t, err)
	c, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), nil)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection not closed")
	}
	var ce *amqp.ConnError
	require.ErrorAs(t, c.Err(), &ce)
	require.NotNil(t, ce.RemoteErr)
	assert.Equal(t, amqp.ErrCond("amqp:connection:forced"), ce.RemoteErr.Condition)
	_ = context.Background
}
