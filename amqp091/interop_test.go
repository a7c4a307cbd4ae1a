package amqp091

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// peer is the server side of an interop test: it speaks through this
// package only, one frame at a time, over its end of a net.Pipe.
type peer struct {
	conn net.Conn
	fr   *FrameReader
	out  []byte
}

func (p *peer) frame() (Frame, error) {
	for {
		f, err := p.fr.ReadFrame()
		if err != nil || f.Type != FrameHeartbeat {
			return f, err
		}
	}
}

// expect reads the next method into m, which must be of the same method.
func (p *peer) expect(ch uint16, m Method) error {
	f, err := p.frame()
	if err != nil {
		return err
	}
	classID, methodID, args, err := ParseMethodHeader(f.Payload)
	if err != nil {
		return err
	}
	wc, wm := m.ID()
	if f.Type != FrameMethod || f.Channel != ch || classID != wc || methodID != wm {
		return fmt.Errorf("want %s on channel %d, got frame type %d on %d, method %s", MethodName(wc, wm), ch, f.Type, f.Channel, MethodName(classID, methodID))
	}
	return DecodeArgs(m, args)
}

// content reads a content header and its body frames.
func (p *peer) content(ch uint16) (*Properties, []byte, error) {
	f, err := p.frame()
	if err != nil {
		return nil, nil, err
	}
	h, err := ParseContentHeader(f.Payload)
	if err != nil {
		return nil, nil, err
	}
	var props Properties
	if err := props.Decode(h.Properties); err != nil {
		return nil, nil, err
	}
	var body []byte
	for uint64(len(body)) < h.BodySize {
		if f, err = p.frame(); err != nil {
			return nil, nil, err
		}
		body = append(body, f.Payload...)
	}
	return &props, body, nil
}

func (p *peer) send(ch uint16, m Method) error {
	var err error
	if p.out, err = AppendMethodFrame(p.out[:0], ch, m); err != nil {
		return err
	}
	_, err = p.conn.Write(p.out)
	return err
}

// interopHeaders is a header table with every type amqp091-go writes.
func interopHeaders() amqp.Table {
	return amqp.Table{
		"bool": true, "ubyte": byte(7), "byte": int8(-7), "short": int16(-300), "ushort": uint16(60000),
		"int": int32(-70000), "uint": uint32(4000000000), "long": int64(1) << 40, "float": float32(1.5),
		"double": 2.25, "decimal": amqp.Decimal{Scale: 2, Value: 12345}, "str": "acme",
		"bin": []byte{0, 1, 2}, "ts": time.Unix(1700000000, 0), "void": nil,
		"arr": []any{"a", int64(1)}, "tbl": amqp.Table{"k": int32(1)},
	}
}

// ours is interopHeaders as this package decodes it.
func ours(t *testing.T, tab Table) map[string]any {
	m := map[string]any{}
	for _, f := range tab {
		_, dup := m[f.Key]
		require.False(t, dup, f.Key)
		m[f.Key] = f.Value
	}
	return m
}

var wantHeaders = map[string]any{
	"bool": true, "ubyte": uint8(7), "byte": int8(-7), "short": int16(-300), "ushort": uint16(60000),
	"int": int32(-70000), "uint": uint32(4000000000), "long": int64(1) << 40, "float": float32(1.5),
	"double": 2.25, "decimal": Decimal{Scale: 2, Value: 12345}, "str": "acme",
	"bin": Binary{0, 1, 2}, "ts": Timestamp(1700000000), "void": nil,
	"arr": Array{"a", int64(1)}, "tbl": Table{{"k", int32(1)}},
}

// TestInteropAMQP091Go runs the amqp091-go client against a peer built
// from this package: the handshake, queue.declare with a table of every
// type, confirm.select, a publish with all properties, a consume and a
// deliver carrying an x-death table, ack, nack and reject, and the close.
// Each side decodes what the other encoded.
func TestInteropAMQP091Go(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	p := &peer{conn: server, fr: NewFrameReader(server)}
	published := amqp.Publishing{
		Headers: interopHeaders(), ContentType: "application/json", ContentEncoding: "gzip",
		DeliveryMode: 2, Priority: 5, CorrelationId: "c-1", ReplyTo: "replies", Expiration: "60000",
		MessageId: "m-1", Timestamp: time.Unix(1700000000, 0), Type: "order.created", UserId: "guest",
		AppId: "shop", Body: make([]byte, 20000),
	}
	deliverProps := basicProperties()
	deliverProps.Headers = append(deliverProps.Headers, xDeath()...)

	done := make(chan error, 1)
	go func() {
		defer server.Close()
		done <- func() error {
			var hdr [8]byte
			if _, err := io.ReadFull(server, hdr[:]); err != nil {
				return err
			}
			if h := Classify(hdr); h.Protocol != ProtocolAMQP091 || h.Refuse {
				return fmt.Errorf("header %q classified %+v", hdr, h)
			}
			caps := Table{{"publisher_confirms", true}, {"basic.nack", true}, {"consumer_cancel_notify", true}, {"connection.blocked", true}}
			if err := p.send(0, &ConnectionStart{VersionMajor: 0, VersionMinor: 9, Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US",
				ServerProperties: Table{{"capabilities", caps}, {"product", "epitaph"}}}); err != nil {
				return err
			}
			var startOk ConnectionStartOk
			if err := p.expect(0, &startOk); err != nil {
				return err
			}
			if startOk.Mechanism != "PLAIN" || startOk.Response != "\x00guest\x00guest" {
				return fmt.Errorf("start-ok %+v", startOk)
			}
			if c, _ := startOk.ClientProperties.Get("capabilities"); c == nil {
				return fmt.Errorf("no capabilities in %v", startOk.ClientProperties)
			}
			if err := p.send(0, &ConnectionTune{ChannelMax: 2047, FrameMax: InitialFrameMax, Heartbeat: 0}); err != nil {
				return err
			}
			var tuneOk ConnectionTuneOk
			if err := p.expect(0, &tuneOk); err != nil {
				return err
			}
			p.fr.SetFrameMax(tuneOk.FrameMax)
			var open ConnectionOpen
			if err := p.expect(0, &open); err != nil || open.VirtualHost != "/" {
				return fmt.Errorf("open %+v: %w", open, err)
			}
			if err := p.send(0, &ConnectionOpenOk{}); err != nil {
				return err
			}
			if err := p.expect(1, &ChannelOpen{}); err != nil {
				return err
			}
			if err := p.send(1, &ChannelOpenOk{}); err != nil {
				return err
			}
			var declare QueueDeclare
			if err := p.expect(1, &declare); err != nil {
				return err
			}
			if declare.Queue != "" || !declare.Durable || declare.AutoDelete || !declare.Exclusive || declare.NoWait {
				return fmt.Errorf("declare %+v", declare)
			}
			if got := ours(t, declare.Arguments); fmt.Sprint(got) != fmt.Sprint(wantHeaders) {
				return fmt.Errorf("declare arguments\n got %v\nwant %v", got, wantHeaders)
			}
			if err := p.send(1, &QueueDeclareOk{Queue: "amq.gen-1", MessageCount: 3, ConsumerCount: 1}); err != nil {
				return err
			}
			if err := p.expect(1, &ConfirmSelect{}); err != nil {
				return err
			}
			if err := p.send(1, &ConfirmSelectOk{}); err != nil {
				return err
			}
			var publish BasicPublish
			if err := p.expect(1, &publish); err != nil {
				return err
			}
			if publish != (BasicPublish{Exchange: "orders", RoutingKey: "new", Mandatory: true}) {
				return fmt.Errorf("publish %+v", publish)
			}
			props, body, err := p.content(1)
			if err != nil {
				return err
			}
			if len(body) != len(published.Body) || fmt.Sprint(ours(t, props.Headers)) != fmt.Sprint(wantHeaders) {
				return fmt.Errorf("body of %d octets, headers %v", len(body), props.Headers)
			}
			props.Headers = nil
			want := Properties{Flags: FlagContentType | FlagContentEncoding | FlagHeaders | FlagDeliveryMode | FlagPriority |
				FlagCorrelationID | FlagReplyTo | FlagExpiration | FlagMessageID | FlagTimestamp | FlagType | FlagUserID | FlagAppID,
				ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: 2, Priority: 5, CorrelationID: "c-1",
				ReplyTo: "replies", Expiration: "60000", MessageID: "m-1", Timestamp: 1700000000, Type: "order.created",
				UserID: "guest", AppID: "shop"}
			if fmt.Sprintf("%+v", *props) != fmt.Sprintf("%+v", want) {
				return fmt.Errorf("properties\n got %+v\nwant %+v", *props, want)
			}
			if err := p.send(1, &BasicAck{DeliveryTag: 1}); err != nil {
				return err
			}
			var consume BasicConsume
			if err := p.expect(1, &consume); err != nil {
				return err
			}
			if consume.Queue != "amq.gen-1" || consume.ConsumerTag != "ctag" || consume.NoAck {
				return fmt.Errorf("consume %+v", consume)
			}
			if err := p.send(1, &BasicConsumeOk{ConsumerTag: "ctag"}); err != nil {
				return err
			}
			for tag := uint64(1); tag <= 3; tag++ {
				if p.out, err = AppendContent(p.out[:0], 1, tuneOk.FrameMax,
					&BasicDeliver{ConsumerTag: "ctag", DeliveryTag: tag, Redelivered: tag == 2, Exchange: "dlx", RoutingKey: "work"},
					deliverProps, []byte("job")); err != nil {
					return err
				}
				if _, err := server.Write(p.out); err != nil {
					return err
				}
			}
			var ack BasicAck
			if err := p.expect(1, &ack); err != nil || ack != (BasicAck{DeliveryTag: 1, Multiple: true}) {
				return fmt.Errorf("ack %+v: %w", ack, err)
			}
			var nack BasicNack
			if err := p.expect(1, &nack); err != nil || nack != (BasicNack{DeliveryTag: 2, Requeue: true}) {
				return fmt.Errorf("nack %+v: %w", nack, err)
			}
			var reject BasicReject
			if err := p.expect(1, &reject); err != nil || reject != (BasicReject{DeliveryTag: 3}) {
				return fmt.Errorf("reject %+v: %w", reject, err)
			}
			var closing ConnectionClose
			if err := p.expect(0, &closing); err != nil || closing.ReplyCode != ReplySuccess {
				return fmt.Errorf("close %+v: %w", closing, err)
			}
			return p.send(0, &ConnectionCloseOk{})
		}()
	}()

	conn, err := amqp.Open(client, amqp.Config{
		SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "guest"}}, Vhost: "/", Locale: "en_US",
	})
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	q, err := ch.QueueDeclare("", true, false, true, false, interopHeaders())
	require.NoError(t, err)
	require.Equal(t, amqp.Queue{Name: "amq.gen-1", Messages: 3, Consumers: 1}, q)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	require.NoError(t, ch.Publish("orders", "new", true, false, published))
	require.Equal(t, amqp.Confirmation{DeliveryTag: 1, Ack: true}, <-confirms)
	deliveries, err := ch.Consume("amq.gen-1", "ctag", false, false, false, false, nil)
	require.NoError(t, err)
	var got []amqp.Delivery
	for range 3 {
		got = append(got, <-deliveries)
	}
	d := got[0]
	require.Equal(t, []byte("job"), d.Body)
	require.Equal(t, "dlx", d.Exchange)
	require.Equal(t, "work", d.RoutingKey)
	require.True(t, got[1].Redelivered)
	require.Equal(t, "application/json", d.ContentType)
	require.Equal(t, "gzip", d.ContentEncoding)
	require.Equal(t, uint8(2), d.DeliveryMode)
	require.Equal(t, uint8(5), d.Priority)
	require.Equal(t, "replies/q", d.ReplyTo)
	require.Equal(t, "60000", d.Expiration)
	require.Equal(t, "m-1", d.MessageId)
	require.Equal(t, time.Unix(1700000000, 0), d.Timestamp)
	require.Equal(t, "order.created", d.Type)
	require.Equal(t, "guest", d.UserId)
	require.Equal(t, "shop", d.AppId)
	require.Equal(t, "acme", d.Headers["tenant"])
	require.Equal(t, "expired", d.Headers["x-last-death-reason"])
	deaths, ok := d.Headers["x-death"].([]any)
	require.True(t, ok, "x-death is %T", d.Headers["x-death"])
	require.Len(t, deaths, 2)
	require.Equal(t, amqp.Table{
		"count": int64(1), "reason": "expired", "queue": "retry", "time": time.Unix(1700000000, 0),
		"exchange": "orders", "routing-keys": []any{"new", "audit"}, "original-expiration": "60000",
	}, deaths[0])
	require.NoError(t, got[0].Ack(true))
	require.NoError(t, got[1].Nack(false, true))
	require.NoError(t, got[2].Reject(false))
	require.NoError(t, conn.Close())
	require.NoError(t, <-done)
}
