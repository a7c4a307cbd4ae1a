package e2e

import (
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

// Input that gets an error reply is in the corpus (conformance_test.go);
// these are the cases whose check is more than one reply.
func TestMalformedInput(t *testing.T) {
	b := startBroker(t, "")

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
}
