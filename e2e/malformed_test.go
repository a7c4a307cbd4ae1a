package e2e

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
)

// rawConn is a hand-driven AMQP client for malformed-input tests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
}

func rawDial(t *testing.T, b *epitaph.Broker) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	return &rawConn{t: t, nc: nc}
}

// open does the raw (no SASL) header exchange and open.
func (r *rawConn) open() {
	r.t.Helper()
	r.openWith(&amqp10.Open{ContainerID: "raw", MaxFrameSize: 65536, ChannelMax: 10})
}

// openWith does the raw header exchange, sends o and returns the broker's open.
func (r *rawConn) openWith(o *amqp10.Open) *amqp10.Open {
	r.t.Helper()
	_, err := r.nc.Write(amqp10.ProtoHeaderAMQP[:])
	require.NoError(r.t, err)
	var h [8]byte
	_, err = io.ReadFull(r.nc, h[:])
	require.NoError(r.t, err)
	require.Equal(r.t, amqp10.ProtoHeaderAMQP, h)
	r.write(0, o)
	_, p := r.read()
	require.IsType(r.t, &amqp10.Open{}, p)
	return p.(*amqp10.Open)
}

func (r *rawConn) write(ch uint16, p amqp10.Performative) {
	r.t.Helper()
	_, err := r.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, ch, p, nil))
	require.NoError(r.t, err)
}

// writeBody writes an AMQP frame on channel 0 whose body is the raw bytes
// body (a performative the encoder would not produce).
func (r *rawConn) writeBody(body []byte) {
	r.t.Helper()
	f := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	f = append(f, 2, amqp10.FrameTypeAMQP, 0, 0)
	_, err := r.nc.Write(append(f, body...))
	require.NoError(r.t, err)
}

// read returns the next non-heartbeat frame (readFrame without the payload).
func (r *rawConn) read() (uint16, amqp10.Performative) {
	r.t.Helper()
	ch, p, _ := r.readFrame()
	return ch, p
}

// expectClose reads until a close and returns its error condition, then
// checks the socket is closed.
func (r *rawConn) expectClose() amqp10.ErrCond {
	r.t.Helper()
	for {
		_, p := r.read()
		if c, ok := p.(*amqp10.Close); ok {
			require.NotNil(r.t, c.Error, "close without error")
			return c.Error.Condition
		}
	}
}

// brokerStillServes checks another client can still use the broker.
func brokerStillServes(t *testing.T, b *epitaph.Broker) {
	t.Helper()
	s := session(t, dial(t, b, nil))
	sender(t, s, "/exchanges/amq.direct", nil)
}

func TestMalformedInput(t *testing.T) {
	b := startBroker(t, "")

	t.Run("bad protocol header", func(t *testing.T) {
		r := rawDial(t, b)
		_, err := r.nc.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		require.NoError(t, err)
		var h [8]byte
		_, err = io.ReadFull(r.nc, h[:])
		require.NoError(t, err)
		assert.Equal(t, "AMQP", string(h[:4]))
		_, err = r.nc.Read(h[:])
		assert.ErrorIs(t, err, io.EOF)
		brokerStillServes(t, b)
	})

	t.Run("truncated frame", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		frame := amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10}, nil)
		_, err := r.nc.Write(frame[:len(frame)-3])
		require.NoError(t, err)
		require.NoError(t, r.nc.(*net.TCPConn).CloseWrite())
		_, err = io.ReadAll(r.nc)
		require.NoError(t, err) // the broker closes its side
		brokerStillServes(t, b)
	})

	t.Run("frame over max-frame-size", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		var h [8]byte
		binary.BigEndian.PutUint32(h[:], 1<<24)
		h[4] = 2
		_, err := r.nc.Write(h[:])
		require.NoError(t, err)
		assert.Equal(t, amqp10.ErrCondFramingError, r.expectClose())
		brokerStillServes(t, b)
	})

	t.Run("frame size below 8", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		_, err := r.nc.Write([]byte{0, 0, 0, 4, 2, 0, 0, 0})
		require.NoError(t, err)
		assert.Equal(t, amqp10.ErrCondFramingError, r.expectClose())
	})

	t.Run("unknown performative", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		body := []byte{0x00, 0x53, 0x99, 0x45} // descriptor 0x99, empty list
		r.writeBody(body)
		assert.Equal(t, amqp10.ErrCondDecodeError, r.expectClose())
		brokerStillServes(t, b)
	})

	t.Run("garbage performative", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		body := []byte{0x00, 0x53, 0x11, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}
		r.writeBody(body)
		assert.Equal(t, amqp10.ErrCondDecodeError, r.expectClose())
	})

	// Transfer, flow and disposition bodies reach the connection loop
	// undecoded (it decodes them into values it reuses): their decode
	// errors take that path.
	for _, desc := range []byte{0x13, 0x14, 0x15} {
		t.Run(fmt.Sprintf("garbage hot performative 0x%x", desc), func(t *testing.T) {
			r := rawDial(t, b)
			r.open()
			body := []byte{0x00, 0x53, desc, 0xd0, 0xff, 0xff, 0xff, 0xff, 0x00}
			r.writeBody(body)
			assert.Equal(t, amqp10.ErrCondDecodeError, r.expectClose())
			brokerStillServes(t, b)
		})
	}

	t.Run("channel over channel-max", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		r.write(4000, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		assert.Equal(t, amqp10.ErrCondFramingError, r.expectClose())
	})

	t.Run("frame before begin", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		r.write(3, &amqp10.Flow{IncomingWindow: 10, OutgoingWindow: 10})
		assert.Equal(t, amqp10.ErrCondIllegalState, r.expectClose())
	})

	t.Run("transfer on unattached handle", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		r.write(0, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		_, p := r.read()
		require.IsType(t, &amqp10.Begin{}, p)
		r.write(0, &amqp10.Transfer{Handle: 7, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1}})
		_, p = r.read()
		end, ok := p.(*amqp10.End)
		require.True(t, ok, "want end, got %T", p)
		require.NotNil(t, end.Error)
		assert.Equal(t, amqp10.ErrCondUnattachedHandle, end.Error.Condition)
		// The connection survives: another session works.
		r.write(1, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		_, p = r.read()
		require.IsType(t, &amqp10.Begin{}, p)
		brokerStillServes(t, b)
	})

	t.Run("attach handle in use", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		r.write(0, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		r.read()
		a := &amqp10.Attach{Name: "l", Handle: 0, Role: amqp10.RoleSender,
			Target: &amqp10.Target{Address: "/exchanges/amq.direct", HasAddress: true}}
		r.write(0, a)
		_, p := r.read()
		require.IsType(t, &amqp10.Attach{}, p)
		r.write(0, a)
		for {
			_, p = r.read()
			if end, ok := p.(*amqp10.End); ok {
				require.NotNil(t, end.Error)
				assert.Equal(t, amqp10.ErrCondHandleInUse, end.Error.Condition)
				break
			}
		}
	})

	t.Run("message over max-message-size across frames", func(t *testing.T) {
		small := startBroker(t, "", func(o *epitaph.Options) { o.MaxMessageSize = 1000 })
		r := rawDial(t, small)
		r.open()
		r.write(0, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		r.read()
		r.write(0, &amqp10.Attach{Name: "l", Handle: 0, Role: amqp10.RoleSender,
			Target: &amqp10.Target{Address: "/exchanges/amq.direct", HasAddress: true}})
		r.read()
		for i := range 3 {
			tr := &amqp10.Transfer{Handle: 0, More: true}
			if i == 0 {
				tr.DeliveryID, tr.HasDeliveryID, tr.DeliveryTag, tr.HasMessageFormat = 0, true, []byte{1}, true
			}
			_, err := r.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, tr, make([]byte, 400)))
			require.NoError(t, err)
		}
		for {
			_, p := r.read()
			if d, ok := p.(*amqp10.Detach); ok {
				require.NotNil(t, d.Error)
				assert.Equal(t, amqp10.ErrCondMessageSizeExceeded, d.Error.Condition)
				break
			}
		}
	})

	t.Run("aborted multi-frame transfer is discarded", func(t *testing.T) {
		ab := startBroker(t, oneQueue)
		r := rawDial(t, ab)
		r.open()
		r.write(0, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		r.read()
		r.write(0, &amqp10.Attach{Name: "l", Handle: 0, Role: amqp10.RoleSender,
			Target: &amqp10.Target{Address: "/queues/q", HasAddress: true}})
		r.read() // attach
		r.read() // flow: credit
		first := &amqp10.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1},
			HasMessageFormat: true, More: true}
		_, err := r.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, first, []byte{0x00, 0x53, 0x75, 0xa0}))
		require.NoError(t, err)
		r.write(0, &amqp10.Transfer{Handle: 0, Aborted: true, Settled: true, HasSettled: true})
		// The next delivery on the same link goes through; the aborted one left nothing.
		payload := []byte{0x00, 0x53, 0x75, 0xa0, 0x02, 'o', 'k'}
		next := &amqp10.Transfer{Handle: 0, DeliveryID: 1, HasDeliveryID: true, DeliveryTag: []byte{2}, HasMessageFormat: true}
		_, err = r.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, next, payload))
		require.NoError(t, err)
		for {
			_, p := r.read()
			if d, ok := p.(*amqp10.Disposition); ok {
				assert.Equal(t, uint32(1), d.First)
				assert.Equal(t, amqp10.StateAccepted, d.State.Kind)
				break
			}
		}
		assert.Equal(t, 1, queueLen(t, ab, "q"))
	})

	t.Run("undecodable message", func(t *testing.T) {
		r := rawDial(t, b)
		r.open()
		r.write(0, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		r.read()
		r.write(0, &amqp10.Attach{Name: "l", Handle: 0, Role: amqp10.RoleSender,
			Target: &amqp10.Target{Address: "/exchanges/amq.direct", HasAddress: true}})
		_, p := r.read()
		require.IsType(t, &amqp10.Attach{}, p)
		tr := &amqp10.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte{1}, HasMessageFormat: true}
		// A message-annotations section with a reserved (non-x-) key.
		payload := []byte{0x00, 0x53, 0x72, 0xc1, 0x06, 0x02, 0xa3, 0x01, 'k', 0xa1, 0x00}
		payload = append(payload, 0x00, 0x53, 0x75, 0xa0, 0x01, 'b')
		_, err := r.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, tr, payload))
		require.NoError(t, err)
		for {
			_, p = r.read()
			if d, ok := p.(*amqp10.Detach); ok {
				require.NotNil(t, d.Error)
				assert.Equal(t, amqp10.ErrCondDecodeError, d.Error.Condition)
				assert.True(t, d.Closed)
				break
			}
		}
	})
}
