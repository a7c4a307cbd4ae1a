package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp091"
)

// raw091 is a hand-driven AMQP 0-9-1 client, for input no library sends.
type raw091 struct {
	t  *testing.T
	nc net.Conn
	fr *amqp091.FrameReader
}

func dialRaw091(t *testing.T, b *epitaph.Broker) *raw091 {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	r := &raw091{t: t, nc: nc, fr: amqp091.NewFrameReader(bufio.NewReader(nc))}
	r.fr.SetFrameMax(1 << 20)
	r.write(amqp091.ProtoHeader091[:])
	_, ok := r.method().(*amqp091.ConnectionStart)
	require.True(t, ok, "expected connection.start")
	return r
}

func (r *raw091) write(b []byte) {
	r.t.Helper()
	_, err := r.nc.Write(b)
	require.NoError(r.t, err)
}

func (r *raw091) send(ch uint16, m amqp091.Method) {
	r.t.Helper()
	b, err := amqp091.AppendMethodFrame(nil, ch, m)
	require.NoError(r.t, err)
	r.write(b)
}

// method reads the next method frame (skipping heartbeats).
func (r *raw091) method() amqp091.Method {
	r.t.Helper()
	for {
		f, err := r.fr.ReadFrame()
		require.NoError(r.t, err)
		if f.Type == amqp091.FrameHeartbeat {
			continue
		}
		require.Equal(r.t, amqp091.FrameMethod, f.Type, "frame type")
		m, err := amqp091.ParseMethod(f.Payload)
		require.NoError(r.t, err)
		return m
	}
}

// login sends start-ok (PLAIN guest/pass and capabilities), and returns
// what the broker answers.
func (r *raw091) login(pass string, caps amqp091.Table) amqp091.Method {
	r.t.Helper()
	r.send(0, &amqp091.ConnectionStartOk{ClientProperties: amqp091.Table{{Key: "capabilities", Value: caps}},
		Mechanism: "PLAIN", Response: "\x00guest\x00" + pass, Locale: "en_US"})
	return r.method()
}

// open completes the handshake with these tune-ok values and opens channel 1.
func (r *raw091) open(frameMax uint32) {
	r.t.Helper()
	_, ok := r.login("guest", nil).(*amqp091.ConnectionTune)
	require.True(r.t, ok)
	r.send(0, &amqp091.ConnectionTuneOk{ChannelMax: 10, FrameMax: frameMax, Heartbeat: 0})
	r.send(0, &amqp091.ConnectionOpen{VirtualHost: "/"})
	_, ok = r.method().(*amqp091.ConnectionOpenOk)
	require.True(r.t, ok, "expected open-ok")
	r.send(1, &amqp091.ChannelOpen{})
	_, ok = r.method().(*amqp091.ChannelOpenOk)
	require.True(r.t, ok, "expected channel.open-ok")
}

// expectConnClose reads up to connection.close and checks its code.
func (r *raw091) expectConnClose(code uint16, text string) {
	r.t.Helper()
	m := r.method()
	cl, ok := m.(*amqp091.ConnectionClose)
	require.True(r.t, ok, "expected connection.close, got %T %+v", m, m)
	assert.Equal(r.t, code, cl.ReplyCode, "reply code (%s)", cl.ReplyText)
	assert.Contains(r.t, cl.ReplyText, text)
	r.send(0, &amqp091.ConnectionCloseOk{})
}

// TestAMQP091RawLoginRefused: a client with authentication_failure_close
// gets 403 ACCESS_REFUSED; one without it only sees the socket close.
func TestAMQP091RawLoginRefused(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.AuthFailureDelay = 0 })
	r := dialRaw091(t, b)
	m := r.login("wrong", amqp091.Table{{Key: "authentication_failure_close", Value: true}})
	cl, ok := m.(*amqp091.ConnectionClose)
	require.True(t, ok, "got %T", m)
	assert.Equal(t, uint16(403), cl.ReplyCode)
	assert.Equal(t, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile.", cl.ReplyText)

	r = dialRaw091(t, b)
	r.send(0, &amqp091.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00wrong", Locale: "en_US"})
	_, err := r.fr.ReadFrame()
	require.Error(t, err, "the socket closes without a connection.close")
}

// TestAMQP091RawTuneOk: tune-ok values outside what the broker offered are
// refused with 530, as RabbitMQ does.
func TestAMQP091RawTuneOk(t *testing.T) {
	b := startBroker(t, "")
	for _, tc := range []struct {
		frameMax, channelMax uint32
		text                 string
	}{
		{0, 10, "negotiated frame_max = 0 is higher than the maximum allowed value (131072)"},
		{1 << 20, 10, "negotiated frame_max = 1048576 is higher than the maximum allowed value (131072)"},
		{4096, 10, "negotiated frame_max = 4096 is lower than the minimum allowed value (8192)"},
		{8192, 0, "negotiated channel_max = 0 is higher than the maximum allowed value (2047)"},
	} {
		r := dialRaw091(t, b)
		_, ok := r.login("guest", nil).(*amqp091.ConnectionTune)
		require.True(t, ok)
		r.send(0, &amqp091.ConnectionTuneOk{ChannelMax: uint16(tc.channelMax), FrameMax: tc.frameMax})
		r.expectConnClose(530, tc.text)
	}
}

// nestedTable returns a field table nested depth levels deep (key "a",
// type F), without its own length prefix.
func nestedTable(depth int) []byte {
	b := make([]byte, 0, 7*depth)
	for i := range depth {
		// Each level is key, type and the length of the levels inside it.
		b = binary.BigEndian.AppendUint32(append(b, 1, 'a', 'F'), uint32(7*(depth-1-i)))
	}
	return b
}

// queueDeclareArgs is a queue.declare payload whose arguments table is tbl
// with the length prefix declared.
func queueDeclareFrame(declared uint32, tbl []byte) []byte {
	p := []byte{0, 50, 0, 10, 0, 0, 1, 'q', 0}
	p = binary.BigEndian.AppendUint32(p, declared)
	p = append(p, tbl...)
	f := []byte{amqp091.FrameMethod, 0, 1}
	f = binary.BigEndian.AppendUint32(f, uint32(len(p)))
	return append(append(f, p...), amqp091.FrameEnd)
}

// TestAMQP091Malformed: malformed frames, methods and tables get
// RabbitMQ's reply codes at the right scope; a table nested 10,000 deep,
// a table or a frame declaring 4 GiB are refused without allocating what
// they claim; another connection is unaffected throughout.
func TestAMQP091Malformed(t *testing.T) {
	b := startBroker(t, "")
	bystander := dial091(t, b)
	bch := channel091(t, bystander)
	_, err := bch.QueueDeclare("bystander", true, false, false, false, nil)
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		frame []byte
		code  uint16
		text  string
	}{
		{"bad frame end", []byte{amqp091.FrameMethod, 0, 1, 0, 0, 0, 4, 0, 20, 0, 40, 0xAB}, 501, ""},
		{"unknown method", []byte{amqp091.FrameMethod, 0, 1, 0, 0, 0, 4, 0, 99, 0, 1, amqp091.FrameEnd}, 503, ""},
		{"content header without a method", func() []byte {
			h, _ := amqp091.AppendHeaderFrame(nil, 1, 1, &amqp091.Properties{})
			return h
		}(), 505, ""},
		{"frame on a channel not opened", []byte{amqp091.FrameMethod, 0, 7, 0, 0, 0, 4, 0, 60, 0, 80, amqp091.FrameEnd}, 504, "expected 'channel.open'"},
		{"table nested 10,000 deep", queueDeclareFrame(uint32(len(nestedTable(10000))), nestedTable(10000)), 501, ""},
		{"table declaring 4 GiB", queueDeclareFrame(0xFFFFFFFF, nil), 501, ""},
		{"frame declaring 4 GiB", []byte{amqp091.FrameMethod, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0, 50}, 501, ""},
		{"truncated method arguments", []byte{amqp091.FrameMethod, 0, 1, 0, 0, 0, 5, 0, 50, 0, 10, 0, amqp091.FrameEnd}, 501, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			r := dialRaw091(t, b)
			r.open(131072)
			r.write(tc.frame)
			r.expectConnClose(tc.code, tc.text)
			runtime.ReadMemStats(&m1)
			assert.Less(t, m1.TotalAlloc-m0.TotalAlloc, uint64(16<<20), "allocated while refusing")
			_, err := bch.QueueDeclarePassive("bystander", true, false, false, false, nil)
			require.NoError(t, err, "the other connection is unaffected")
		})
	}

	// A soft error on a channel: publish to a missing exchange closes the
	// channel only; the connection's channel 2 keeps working.
	r := dialRaw091(t, b)
	r.open(131072)
	r.send(2, &amqp091.ChannelOpen{})
	_, ok := r.method().(*amqp091.ChannelOpenOk)
	require.True(t, ok)
	pub, err := amqp091.AppendContent(nil, 1, 131072, &amqp091.BasicPublish{Exchange: "missing"}, &amqp091.Properties{}, []byte("x"))
	require.NoError(t, err)
	r.write(pub)
	m := r.method()
	cc, ok := m.(*amqp091.ChannelClose)
	require.True(t, ok, "got %T", m)
	assert.Equal(t, uint16(404), cc.ReplyCode)
	assert.Equal(t, "NOT_FOUND - no exchange 'missing' in vhost '/'", cc.ReplyText)
	assert.Equal(t, uint16(60), cc.ClassID)
	assert.Equal(t, uint16(40), cc.MethodID)
	r.send(1, &amqp091.ChannelCloseOk{})
	r.send(2, &amqp091.QueueDeclare{Queue: "bystander", Passive: true})
	_, ok = r.method().(*amqp091.QueueDeclareOk)
	require.True(t, ok)

	// A body over max-message-size: 406 on the channel.
	small := startBroker(t, "", func(o *epitaph.Options) { o.MaxMessageSize = 1024 })
	r = dialRaw091(t, small)
	r.open(131072)
	pub, err = amqp091.AppendContent(nil, 1, 131072, &amqp091.BasicPublish{RoutingKey: "q"}, &amqp091.Properties{}, bytes.Repeat([]byte("x"), 2048))
	require.NoError(t, err)
	r.write(pub)
	cc, ok = r.method().(*amqp091.ChannelClose)
	require.True(t, ok)
	assert.Equal(t, uint16(406), cc.ReplyCode)
	assert.Equal(t, "PRECONDITION_FAILED - message size 2048 is larger than configured max size 1024", cc.ReplyText)
	// The body frames that followed were dropped; the connection goes on.
	r.send(1, &amqp091.ChannelCloseOk{})
	r.send(1, &amqp091.ChannelOpen{})
	_, ok = r.method().(*amqp091.ChannelOpenOk)
	require.True(t, ok)
	r.send(1, &amqp091.QueueDeclare{Queue: "", Exclusive: true})
	_, ok = r.method().(*amqp091.QueueDeclareOk)
	require.True(t, ok)

	require.False(t, bystander.IsClosed())
}

// TestAMQP091RawLimits: channels beyond the negotiated channel-max are
// 530; like RabbitMQ (rabbit_reader:create_channel/2) the broker counts the
// open channels and does not limit their numbers. A client that sends
// nothing for two heartbeat intervals is disconnected.
func TestAMQP091RawLimits(t *testing.T) {
	b := startBroker(t, "")
	r := dialRaw091(t, b)
	r.open(131072) // channel-max 10, channel 1 open
	for _, ch := range []uint16{11, 65535, 2, 3, 4, 5, 6, 7, 8} {
		r.send(ch, &amqp091.ChannelOpen{})
		_, ok := r.method().(*amqp091.ChannelOpenOk)
		require.True(t, ok, "channel %d", ch)
	}
	r.send(9, &amqp091.ChannelOpen{})
	r.expectConnClose(530, "NOT_ALLOWED - number of channels opened (10) has reached the negotiated channel_max (10)")

	r = dialRaw091(t, b)
	_, ok := r.login("guest", nil).(*amqp091.ConnectionTune)
	require.True(t, ok)
	r.send(0, &amqp091.ConnectionTuneOk{ChannelMax: 10, FrameMax: 131072, Heartbeat: 1})
	r.send(0, &amqp091.ConnectionOpen{VirtualHost: "/"})
	_, ok = r.method().(*amqp091.ConnectionOpenOk)
	require.True(t, ok)
	start := time.Now()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			break // closed by the broker
		}
		require.Equal(t, amqp091.FrameHeartbeat, f.Type, "only heartbeats while idle")
	}
	assert.WithinRange(t, time.Now(), start.Add(1500*time.Millisecond), start.Add(5*time.Second))
}

// TestAMQP091RawConfirmsCoalesced: publisher confirms may ack several
// sequence numbers with one multiple basic.ack, never past a refused one;
// every number is confirmed exactly once with its outcome.
func TestAMQP091RawConfirmsCoalesced(t *testing.T) {
	b := startBroker(t, `{"queues":[{"name":"two","vhost":"/","durable":true,"arguments":{"x-max-length":2,"x-overflow":"reject-publish"}}]}`)
	r := dialRaw091(t, b)
	r.open(131072)
	r.send(1, &amqp091.ConfirmSelect{})
	_, ok := r.method().(*amqp091.ConfirmSelectOk)
	require.True(t, ok)
	var batch []byte
	for _, rk := range []string{"two", "two", "two", "two", "nowhere", "nowhere"} {
		var err error
		batch, err = amqp091.AppendContent(batch, 1, 131072, &amqp091.BasicPublish{RoutingKey: rk}, &amqp091.Properties{}, []byte("x"))
		require.NoError(t, err)
	}
	r.write(batch) // in one write, so that outcomes can arrive together
	want := map[uint64]bool{1: true, 2: true, 3: false, 4: false, 5: true, 6: true}
	got := map[uint64]bool{}
	for len(got) < len(want) {
		switch m := r.method().(type) {
		case *amqp091.BasicAck:
			from := m.DeliveryTag
			if m.Multiple {
				from = 1
			}
			for tag := from; tag <= m.DeliveryTag; tag++ {
				if acked, done := got[tag]; done && m.Multiple {
					require.True(t, acked, "a multiple ack up to %d covers the refused %d", m.DeliveryTag, tag)
					continue
				}
				require.NotContains(t, got, tag, "tag %d confirmed twice", tag)
				got[tag] = true
			}
		case *amqp091.BasicNack:
			require.False(t, m.Multiple)
			require.NotContains(t, got, m.DeliveryTag)
			got[m.DeliveryTag] = false
		default:
			t.Fatalf("unexpected %T", m)
		}
	}
	assert.Equal(t, want, got)
}

// TestAMQP091RawChannelErrors: a second channel.open on an open channel is
// 504; connections that end leave no goroutine behind.
func TestAMQP091RawChannelErrors(t *testing.T) {
	b := startBroker(t, "")
	before := runtime.NumGoroutine()
	for range 5 {
		r := dialRaw091(t, b)
		r.open(131072)
		r.send(1, &amqp091.ChannelOpen{})
		r.expectConnClose(504, "second 'channel.open' seen")
		r.nc.Close()
	}
	eventually(t, "the connections' goroutines ended", func() bool { return runtime.NumGoroutine() <= before })
}

// TestAMQP091RawNoHeartbeat: a client that negotiates heartbeat 0 is not
// timed out, however long it is silent (here: past idle-timeout).
func TestAMQP091RawNoHeartbeat(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.IdleTimeout = time.Second })
	r := dialRaw091(t, b)
	r.open(131072)                      // heartbeat 0
	time.Sleep(2500 * time.Millisecond) // the silence under test, not synchronisation
	r.send(1, &amqp091.QueueDeclare{Queue: "", Exclusive: true})
	_, ok := r.method().(*amqp091.QueueDeclareOk)
	require.True(t, ok, "still open")
}

// Both sides close a channel at once (the broker for an error, the client
// on its own): the broker answers the client's close and waits for the
// close-ok of its own before the channel number is free, so that close-ok
// is no error (amqp091-go's TestChannelExceptionWithCloseIssue43).
func TestAMQP091RawSimultaneousChannelClose(t *testing.T) {
	b := startBroker(t, "")
	r := dialRaw091(t, b)
	r.open(131072)
	r.send(1, &amqp091.ExchangeDeclare{Exchange: "nope", Type: "direct", Passive: true})
	r.send(1, &amqp091.ChannelClose{ReplyCode: 200, ReplyText: "bye"})
	cl, ok := r.method().(*amqp091.ChannelClose)
	require.True(t, ok, "the broker's channel.close")
	assert.Equal(t, uint16(404), cl.ReplyCode)
	_, ok = r.method().(*amqp091.ChannelCloseOk)
	require.True(t, ok, "the answer to the client's close")
	r.send(1, &amqp091.ChannelCloseOk{})
	r.send(1, &amqp091.ChannelOpen{})
	m := r.method()
	_, ok = m.(*amqp091.ChannelOpenOk)
	require.True(t, ok, "channel 1 opens again, the connection unharmed: got %T %+v", m, m)
}
