package link

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
)

type outFrame struct {
	ch uint16
	p  amqp10.Performative
}

// frames parses the frames the writer would send.
func frames(t *testing.T, b []byte) []outFrame {
	t.Helper()
	var out []outFrame
	for len(b) > 0 {
		fh, err := amqp10.ParseFrameHeader(b)
		require.NoError(t, err)
		body := b[int(fh.DataOffset)*4 : fh.Size]
		p, _, err := amqp10.ParsePerformative(body)
		require.NoError(t, err)
		out = append(out, outFrame{fh.Channel, p})
		b = b[fh.Size:]
	}
	return out
}

func acceptedRange(first, last uint32, settled bool) *amqp10.Disposition {
	d := &amqp10.Disposition{Role: amqp10.RoleReceiver, First: first, Settled: settled,
		State: amqp10.DeliveryState{Kind: amqp10.StateAccepted}}
	if last != first {
		d.Last, d.HasLast = last, true
	}
	return d
}

// Publish outcomes for consecutive delivery-ids go out as one disposition
// per run; a gap, another channel, another settled flag or any other frame
// ends the run, and frames keep the order in which they were written.
func TestAcceptedOutcomesCoalesce(t *testing.T) {
	c := &conn{out: outbuf{wake: make(chan struct{}, 1)}}
	for id := uint32(1); id <= 3; id++ {
		c.accepted(0, id, true)
	}
	c.accepted(0, 5, true)  // gap
	c.accepted(1, 6, true)  // another session
	c.accepted(1, 7, false) // rcv-settle-mode second: not settled
	c.accepted(1, 8, false)
	rej := &amqp10.Disposition{Role: amqp10.RoleReceiver, First: 9, Settled: true,
		State: amqp10.DeliveryState{Kind: amqp10.StateRejected, Error: amqp10.Errorf(amqp10.ErrCondResourceLimitExceeded, "full")}}
	c.write(1, rej, nil)
	c.accepted(1, 10, true)
	c.accepted(1, 11, true)
	require.Empty(t, c.out.buf, "nothing reaches the writer before a flush")

	n := c.flushOut()
	require.Equal(t, len(c.out.buf), n)
	select {
	case <-c.out.wake:
	default:
		t.Fatal("flushOut did not wake the writer")
	}
	require.Equal(t, []outFrame{
		{0, acceptedRange(1, 3, true)},
		{0, acceptedRange(5, 5, true)},
		{1, acceptedRange(6, 6, true)},
		{1, acceptedRange(7, 8, false)},
		{1, rej},
		{1, acceptedRange(10, 11, true)},
	}, frames(t, c.out.buf))

	// A second flush appends after what the writer has not taken yet, and
	// the delivery-id wraps around in serial-number arithmetic.
	c.accepted(0, 1<<32-1, true)
	c.accepted(0, 0, true)
	c.flushOut()
	got := frames(t, c.out.buf)
	require.Len(t, got, 7)
	require.Equal(t, outFrame{0, acceptedRange(1<<32-1, 0, true)}, got[6])
	require.Empty(t, c.wbuf)
	require.False(t, c.hasPend)
}
