package e2e

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
)

// readFrame returns the next non-heartbeat frame's channel, performative and
// payload (the bytes after the performative, e.g. a transfer's message bytes).
func (r *rawConn) readFrame() (uint16, amqp10.Performative, []byte) {
	r.t.Helper()
	for {
		var hb [8]byte
		_, err := io.ReadFull(r.nc, hb[:])
		require.NoError(r.t, err)
		fh, err := amqp10.ParseFrameHeader(hb[:])
		require.NoError(r.t, err)
		body := make([]byte, fh.Size-8)
		_, err = io.ReadFull(r.nc, body)
		require.NoError(r.t, err)
		body = body[int(fh.DataOffset)*4-8:]
		if len(body) == 0 {
			continue
		}
		p, payload, err := amqp10.ParsePerformative(body)
		require.NoError(r.t, err)
		return fh.Channel, p, payload
	}
}

// expectFrame reads frames until one of type T arrives; a close, end or
// detach with an error fails the test.
func expectFrame[T amqp10.Performative](r *rawConn) (T, []byte) {
	r.t.Helper()
	for {
		_, p, payload := r.readFrame()
		if v, ok := p.(T); ok {
			return v, payload
		}
		switch f := p.(type) {
		case *amqp10.Close:
			r.t.Fatalf("connection closed: %+v", f.Error)
		case *amqp10.End:
			r.t.Fatalf("session ended: %+v", f.Error)
		case *amqp10.Detach:
			r.t.Fatalf("link detached: %+v", f.Error)
		}
	}
}

// rawBegin opens a raw connection with one session (channel 0).
func rawBegin(t *testing.T, b *epitaph.Broker) *rawConn {
	t.Helper()
	r := rawDial(t, b)
	r.open()
	r.write(0, &amqp10.Begin{NextOutgoingID: 0, IncomingWindow: 1000, OutgoingWindow: 1000, HandleMax: 10})
	expectFrame[*amqp10.Begin](r)
	return r
}

// rawReceive takes one message from queue with a pre-settled raw receiver
// and returns its exact bytes as the broker sent them.
func rawReceive(t *testing.T, b *epitaph.Broker, queue string) []byte {
	t.Helper()
	r := rawBegin(t, b)
	r.write(0, &amqp10.Attach{Name: "raw-receiver", Handle: 0, Role: amqp10.RoleReceiver,
		SndSettleMode: amqp10.SndSettled, HasSndSettleMode: true,
		RcvSettleMode: amqp10.RcvFirst, HasRcvSettleMode: true,
		Source: &amqp10.Source{Address: "/queues/" + queue, HasAddress: true},
		Target: &amqp10.Target{}})
	expectFrame[*amqp10.Attach](r)
	r.write(0, &amqp10.Flow{NextIncomingID: 0, HasNextIncomingID: true, IncomingWindow: 1000,
		NextOutgoingID: 0, OutgoingWindow: 1000, Handle: 0, HasHandle: true,
		DeliveryCount: 0, HasDeliveryCount: true, LinkCredit: 1, HasLinkCredit: true})
	var out []byte
	for {
		tr, payload := expectFrame[*amqp10.Transfer](r)
		out = append(out, payload...)
		if !tr.More {
			return out
		}
	}
}

// rawSend publishes payload, unsettled, to address and returns the outcome.
func rawSend(t *testing.T, b *epitaph.Broker, address string, payload []byte) amqp10.DeliveryState {
	t.Helper()
	r := rawBegin(t, b)
	r.write(0, &amqp10.Attach{Name: "raw-sender", Handle: 0, Role: amqp10.RoleSender,
		SndSettleMode: amqp10.SndUnsettled, HasSndSettleMode: true,
		Source: &amqp10.Source{}, Target: &amqp10.Target{Address: address, HasAddress: true},
		InitialDeliveryCount: 0, HasInitialDeliveryCount: true})
	expectFrame[*amqp10.Attach](r)
	for {
		f, _ := expectFrame[*amqp10.Flow](r)
		if f.HasHandle && f.LinkCredit > 0 {
			break
		}
	}
	_, err := r.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, &amqp10.Transfer{Handle: 0, DeliveryID: 0,
		HasDeliveryID: true, DeliveryTag: []byte{1}, MessageFormat: 0, HasMessageFormat: true}, payload))
	require.NoError(t, err)
	d, _ := expectFrame[*amqp10.Disposition](r)
	return d.State
}

// parseWire parses a raw message and its message annotations.
func parseWire(t *testing.T, raw []byte) (*amqp10.Message, amqp10.Map) {
	t.Helper()
	m, err := amqp10.ParseMessage(raw)
	require.NoError(t, err)
	ann, err := m.AnnotationMap()
	require.NoError(t, err)
	return m, ann
}

// rawEntry is one key/value pair of an encoded map, as bytes.
type rawEntry struct {
	key   []byte // the encoded key
	value []byte // the encoded value, constructor first
}

func (e rawEntry) keyValue(t *testing.T) any {
	t.Helper()
	k, _, err := amqp10.ReadValue(e.key)
	require.NoError(t, err)
	return k
}

// rawMapEntries splits an encoded map8/map32 (constructor included unless
// ctor is given as the implicit element constructor of an array) into its
// entries and returns the rest.
func rawMapEntries(t *testing.T, b []byte, implicitCtor byte) ([]rawEntry, []byte) {
	t.Helper()
	ctor := implicitCtor
	if ctor == 0 {
		require.NotEmpty(t, b)
		ctor, b = b[0], b[1:]
	}
	var size, count int
	switch ctor {
	case amqp10.TypeMap8:
		require.GreaterOrEqual(t, len(b), 2)
		size, count, b = int(b[0]), int(b[1]), b[2:]
		size--
	case amqp10.TypeMap32:
		require.GreaterOrEqual(t, len(b), 8)
		size, count, b = int(binary.BigEndian.Uint32(b)), int(binary.BigEndian.Uint32(b[4:])), b[8:]
		size -= 4
	default:
		t.Fatalf("not a map constructor: %#x", ctor)
	}
	require.GreaterOrEqual(t, len(b), size)
	body, rest := b[:size], b[size:]
	require.Zero(t, count%2)
	var out []rawEntry
	for range count / 2 {
		r1, err := amqp10.SkipValue(body)
		require.NoError(t, err)
		k := body[:len(body)-len(r1)]
		r2, err := amqp10.SkipValue(r1)
		require.NoError(t, err)
		out = append(out, rawEntry{key: k, value: r1[:len(r1)-len(r2)]})
		body = r2
	}
	require.Empty(t, body, "trailing bytes in map")
	return out, rest
}

// rawAnnotations returns the message-annotations section's entries in wire order.
func rawAnnotations(t *testing.T, m *amqp10.Message) []rawEntry {
	t.Helper()
	require.NotNil(t, m.Annotations(), "no message-annotations section")
	b := m.Annotations()
	require.Equal(t, byte(0x00), b[0])
	switch b[1] {
	case 0x53:
		require.Equal(t, byte(0x72), b[2])
		b = b[3:]
	case 0x80:
		require.Equal(t, uint64(0x72), binary.BigEndian.Uint64(b[2:10]))
		b = b[10:]
	default:
		t.Fatalf("unexpected message-annotations descriptor %x", b[:2])
	}
	entries, rest := rawMapEntries(t, b, 0)
	require.Empty(t, rest)
	return entries
}

func rawAnnotation(t *testing.T, m *amqp10.Message, key string) ([]byte, bool) {
	t.Helper()
	for _, e := range rawAnnotations(t, m) {
		require.Equal(t, amqp10.TypeSym8, e.key[0], "annotation key %x is not a sym8", e.key)
		if e.keyValue(t) == amqp10.Symbol(key) {
			return e.value, true
		}
	}
	return nil, false
}

// rawDeathMaps splits the encoded x-opt-deaths value into its elements'
// entries, checking the array's element constructor is map32 (0xd1).
func rawDeathMaps(t *testing.T, v []byte) [][]rawEntry {
	t.Helper()
	require.NotEmpty(t, v)
	var count int
	var body []byte
	switch v[0] {
	case amqp10.TypeArray8:
		size := int(v[1])
		count, body = int(v[2]), v[3:1+1+size]
		require.Len(t, v, 2+size, "array8 size")
	case amqp10.TypeArray32:
		size := int(binary.BigEndian.Uint32(v[1:]))
		count, body = int(binary.BigEndian.Uint32(v[5:])), v[9:5+size]
		require.Len(t, v, 5+size, "array32 size")
	default:
		t.Fatalf("x-opt-deaths is not an array: constructor %#x", v[0])
	}
	require.Equal(t, amqp10.TypeMap32, body[0], "x-opt-deaths element constructor")
	body = body[1:]
	out := make([][]rawEntry, 0, count)
	for range count {
		var es []rawEntry
		es, body = rawMapEntries(t, body, amqp10.TypeMap32)
		out = append(out, es)
	}
	require.Empty(t, body)
	return out
}

// assertWireDeaths checks the exact layout of x-opt-deaths in a raw message:
// for each death, the key order ttl?, queue, reason, count, first-time,
// last-time, exchange, routing-keys, every key a symbol, and the value
// constructors of RabbitMQ's encoder. hasTTL says which deaths carry ttl.
func assertWireDeaths(t *testing.T, m *amqp10.Message, hasTTL ...bool) {
	t.Helper()
	v, ok := rawAnnotation(t, m, "x-opt-deaths")
	require.True(t, ok, "no x-opt-deaths")
	deaths := rawDeathMaps(t, v)
	require.Len(t, deaths, len(hasTTL))
	for i, es := range deaths {
		want := []string{"queue", "reason", "count", "first-time", "last-time", "exchange", "routing-keys"}
		if hasTTL[i] {
			want = append([]string{"ttl"}, want...)
		}
		var keys []string
		for _, e := range es {
			assert.Contains(t, []byte{amqp10.TypeSym8, amqp10.TypeSym32}, e.key[0], "death key %x is not a symbol", e.key)
			k, _ := e.keyValue(t).(amqp10.Symbol)
			keys = append(keys, string(k))
			c := e.value[0]
			switch k {
			case "ttl":
				assert.Contains(t, []byte{0x43, 0x52, 0x70}, c, "ttl must be a uint")
			case "queue", "exchange":
				assert.Contains(t, []byte{amqp10.TypeStr8, amqp10.TypeStr32}, c, "%s must be a string", k)
			case "reason":
				assert.Equal(t, amqp10.TypeSym8, c, "reason must be a sym8")
			case "count":
				assert.Contains(t, []byte{0x53, 0x80}, c, "count must be a ulong")
			case "first-time", "last-time":
				assert.Equal(t, amqp10.TypeTimestamp, c, "%s must be a timestamp", k)
			case "routing-keys":
				require.Contains(t, []byte{amqp10.TypeArray8, amqp10.TypeArray32}, c, "routing-keys must be an array")
				ec := e.value[3]
				if c == amqp10.TypeArray32 {
					ec = e.value[9]
				}
				assert.Equal(t, amqp10.TypeStr32, ec, "routing-keys element constructor")
			}
		}
		assert.Equal(t, want, keys, "death %d key order", i)
	}
	// The six first/last annotations are utf8 strings, not symbols.
	for _, k := range []string{"x-first-death-queue", "x-first-death-reason", "x-first-death-exchange",
		"x-last-death-queue", "x-last-death-reason", "x-last-death-exchange"} {
		v, ok := rawAnnotation(t, m, k)
		if assert.True(t, ok, "missing %s", k) {
			assert.Contains(t, []byte{amqp10.TypeStr8, amqp10.TypeStr32}, v[0], "%s must be a string", k)
		}
	}
}

// TestWireReferenceBytes checks rawDeathMaps against RabbitMQ's reference
// bytes (golden13 in annotations), so the wire assertions above are known to parse RabbitMQ's encoding.
func TestWireReferenceBytes(t *testing.T) {
	ref := []byte{0xe0, 0x7c, 0x01, 0xd1, 0x00, 0x00, 0x00, 0x76, 0x00, 0x00, 0x00, 0x0e}
	ref = append(ref, 0xa3, 5)
	ref = append(ref, "queue"...)
	ref = append(ref, 0xa1, 2, 'q', '1', 0xa3, 6)
	ref = append(ref, "reason"...)
	ref = append(ref, 0xa3, 7)
	ref = append(ref, "expired"...)
	ref = append(ref, 0xa3, 5)
	ref = append(ref, "count"...)
	ref = append(ref, 0x53, 1, 0xa3, 10)
	ref = append(ref, "first-time"...)
	ref = append(ref, 0x83, 0, 0, 1, 0x8b, 0xcf, 0xe5, 0x68, 0, 0xa3, 9)
	ref = append(ref, "last-time"...)
	ref = append(ref, 0x83, 0, 0, 1, 0x8b, 0xcf, 0xe5, 0x68, 0, 0xa3, 8)
	ref = append(ref, "exchange"...)
	ref = append(ref, 0xa1, 0, 0xa3, 12)
	ref = append(ref, "routing-keys"...)
	ref = append(ref, 0xe0, 0x08, 0x01, 0xb1, 0, 0, 0, 2, 'q', '1')
	require.Len(t, ref, 0x7c+2)
	ds := rawDeathMaps(t, ref)
	require.Len(t, ds, 1)
	require.Len(t, ds[0], 7)
	assert.Equal(t, amqp10.Symbol("queue"), ds[0][0].keyValue(t))
	assert.True(t, bytes.Equal([]byte{0xa3, 7, 'e', 'x', 'p', 'i', 'r', 'e', 'd'}, ds[0][1].value))
}
