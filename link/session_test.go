package link

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// Session flow control (AMQP 1.0 section 2.5.6) and link credit, drain and
// disposition ranges (2.6.7, 2.7.4, 2.7.6), frame by frame over net.Pipe in
// fake time (pipe_test.go).

// Our incoming window counts transfer frames, not deliveries, and is
// renewed to sessionWindow with a session flow once half of it is used.
func TestSessionIncomingWindowRenewedAtHalf(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.begin(0, 2048)
		p.attachPublisher(0, 0, "/queues/q")
		// One delivery of sessionWindow/2 + 1 frames: the last frame carries the rest.
		msg := amqp10.AppendData(nil, bytes.Repeat([]byte("x"), sessionWindow))
		first := &amqp10.Transfer{Handle: 0, DeliveryID: 0, HasDeliveryID: true, DeliveryTag: []byte("t"),
			HasMessageFormat: true, Settled: true, HasSettled: true, More: true}
		p.sendPayload(0, first, msg[:1])
		for i := 1; i < sessionWindow/2-1; i++ {
			p.sendPayload(0, &amqp10.Transfer{Handle: 0, More: true}, msg[i:i+1])
		}
		p.quiet() // sessionWindow/2 - 1 frames used: no flow yet
		p.sendPayload(0, &amqp10.Transfer{Handle: 0, More: true}, msg[sessionWindow/2-1:sessionWindow/2])
		f := expect[*amqp10.Flow](p, lc)
		if f.HasHandle || !f.HasNextIncomingID || f.NextIncomingID != sessionWindow/2 || f.IncomingWindow != sessionWindow {
			t.Fatalf("after %d frames the broker sent %+v, want a session flow renewing the window", sessionWindow/2, f)
		}
		p.sendPayload(0, &amqp10.Transfer{Handle: 0}, msg[sessionWindow/2:])
		p.quiet()
		p.expectQueue("q", 1, 0)
		p.closeConn()
	})
}

// A flow whose next-incoming-id is ahead of the transfers we sent is a
// window violation: the session ends with session:window-violation, frames
// on it are ignored until the peer's end, and the channel is free again.
func TestSessionFlowAheadIsWindowViolation(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.begin(0, 2048)
		p.send(0, &amqp10.Flow{NextIncomingID: 1, HasNextIncomingID: true, IncomingWindow: 10, OutgoingWindow: 10})
		e := expect[*amqp10.End](p, lc)
		if e.Error == nil || e.Error.Condition != amqp10.ErrCondWindowViolation {
			t.Fatalf("the session ended with %+v, want window-violation", e.Error)
		}
		p.send(0, &amqp10.Attach{Name: "late", Handle: 0, Role: amqp10.RoleReceiver,
			Source: &amqp10.Source{Address: "/queues/q", HasAddress: true}, Target: &amqp10.Target{}})
		p.quiet() // crossing our end: ignored
		p.send(0, &amqp10.End{})
		p.quiet() // the answer to our end is not answered
		p.begin(0, 2048)
		p.closeConn()
	})
}

// consume begins a session (incoming window window) with an unsettled
// consumer of queue on handle 1 and returns the session's local channel.
func (p *pipePeer) consume(ch uint16, window uint32, queue string, settled bool) uint16 {
	p.t.Helper()
	lc := p.begin(ch, window)
	p.attachConsumer(ch, 1, "/queues/"+queue, settled)
	return lc
}

// expectDeliveries reads n transfers on channel lc: handle 1, delivery-ids
// from first on, the messages "m<first>."... in order.
func (p *pipePeer) expectDeliveries(lc uint16, first uint32, n int, settled bool) {
	p.t.Helper()
	for i := range n {
		f := p.next()
		tr, ok := f.perf.(*amqp10.Transfer)
		if !ok || f.ch != lc {
			p.t.Fatalf("delivery %d: the broker sent %v, want a transfer on channel %d", i, f, lc)
		}
		id := first + uint32(i)
		if tr.Handle != 1 || !tr.HasDeliveryID || tr.DeliveryID != id || tr.Settled != settled || tr.More ||
			!bytes.Contains(f.payload, []byte(fmt.Sprintf("m%d.", id))) {
			p.t.Fatalf("delivery %d: %+v with payload %.40q, want delivery-id %d of m%d., settled %v", i, tr, f.payload, id, id, settled)
		}
	}
}

// consumeN fills queue with n messages, and a consumer on channel 0
// (handle 1, credit n) takes them all; it returns the session's local channel.
func (p *pipePeer) consumeN(queue string, n int, settled bool) uint16 {
	p.t.Helper()
	p.fill(queue, n)
	lc := p.consume(0, 2048, queue, settled)
	p.send(0, linkFlow(1, 0, 2048, 0, uint32(n)))
	p.expectDeliveries(lc, 0, n, settled)
	return lc
}

// expectQueue fails unless queue holds ready messages and unacked delivered
// and not settled.
func (p *pipePeer) expectQueue(queue string, ready, unacked int) {
	p.t.Helper()
	if q := p.queue(queue); q.Messages != ready || q.MessagesUnacknowledged != unacked {
		p.t.Fatalf("%s: %d ready, %d unacknowledged; want %d and %d", queue, q.Messages, q.MessagesUnacknowledged, ready, unacked)
	}
}

// The peer's incoming window bounds our transfers: with a window of 2 and
// credit for 5, 2 go; a session flow that opens the window lets the rest go.
func TestSessionOutgoingBoundedByPeerWindow(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.fill("q", 5)
		lc := p.consume(0, 2, "q", false)
		p.send(0, linkFlow(1, 0, 2, 0, 5))
		p.expectDeliveries(lc, 0, 2, false)
		p.quiet()
		p.send(0, &amqp10.Flow{NextIncomingID: 2, HasNextIncomingID: true, IncomingWindow: 3, OutgoingWindow: 10})
		p.expectDeliveries(lc, 2, 3, false)
		p.quiet()
		p.closeConn()
	})
}

// Link credit bounds deliveries; an echo is answered with the link's state
// (delivery-count advanced by what was sent, credit left); more credit
// lets more go.
func TestCreditBoundsDeliveriesAndEcho(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.fill("q", 5)
		lc := p.consume(0, 2048, "q", false)
		p.quiet() // no credit, no delivery
		p.send(0, linkFlow(1, 0, 2048, 0, 3))
		p.expectDeliveries(lc, 0, 3, false)
		p.quiet()
		echo := linkFlow(1, 3, 2048, 0, 3)
		echo.Echo = true
		p.send(0, echo)
		f := expect[*amqp10.Flow](p, lc)
		if !f.HasHandle || f.Handle != 1 || f.DeliveryCount != 3 || f.LinkCredit != 0 || f.Drain ||
			f.NextOutgoingID != 3 || f.NextIncomingID != 0 {
			t.Fatalf("echo answered with %+v, want delivery-count 3, credit 0, next-outgoing-id 3", f)
		}
		p.quiet()
		p.send(0, linkFlow(1, 3, 2048, 3, 10))
		p.expectDeliveries(lc, 3, 2, false)
		p.quiet()
		p.expectQueue("q", 0, 5)
		p.closeConn()
	})
}

// A publisher is granted publisherCredit on attach; an echo on its link is
// answered with its delivery-count and credit, and a session flow with
// echo (no handle) with the session's state.
func TestPublisherCreditAndEcho(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.begin(0, 2048)
		f := p.attachPublisher(0, 0, "/queues/q")
		if !f.HasHandle || f.Handle != 0 || f.DeliveryCount != 0 || f.LinkCredit != publisherCredit ||
			f.IncomingWindow != sessionWindow {
			t.Fatalf("attach granted %+v, want credit %d", f, publisherCredit)
		}
		for i := range 3 {
			p.transfer(0, 0, uint32(i), true, fmt.Sprintf("m%d", i))
		}
		echo := &amqp10.Flow{NextIncomingID: 0, HasNextIncomingID: true, IncomingWindow: 2048, NextOutgoingID: 3,
			OutgoingWindow: 10, Handle: 0, HasHandle: true, DeliveryCount: 3, HasDeliveryCount: true,
			LinkCredit: 997, HasLinkCredit: true, Echo: true}
		p.send(0, echo)
		f = expect[*amqp10.Flow](p, lc)
		if !f.HasHandle || f.DeliveryCount != 3 || f.LinkCredit != publisherCredit-3 ||
			f.NextIncomingID != 3 || f.IncomingWindow != sessionWindow-3 {
			t.Fatalf("link echo answered with %+v, want delivery-count 3, credit %d, next-incoming-id 3",
				f, publisherCredit-3)
		}
		echo.HasHandle, echo.HasDeliveryCount, echo.HasLinkCredit = false, false, false
		p.send(0, echo)
		f = expect[*amqp10.Flow](p, lc)
		if f.HasHandle || f.NextIncomingID != 3 || f.IncomingWindow != sessionWindow-3 || f.NextOutgoingID != 0 {
			t.Fatalf("session echo answered with %+v", f)
		}
		p.quiet()
		p.expectQueue("q", 3, 0)
		p.closeConn()
	})
}

// Drain with no message: the credit is used up at once; the broker
// answers with delivery-count advanced by the credit, credit 0, drain set.
func TestDrainWithoutMessages(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.consume(0, 2048, "q", false)
		drain := linkFlow(1, 0, 2048, 0, 5)
		drain.Drain = true
		p.send(0, drain)
		f := expect[*amqp10.Flow](p, lc)
		if !f.HasHandle || f.Handle != 1 || f.DeliveryCount != 5 || f.LinkCredit != 0 || !f.Drain {
			t.Fatalf("drain answered with %+v, want delivery-count 5, credit 0, drain", f)
		}
		p.quiet()
		// The credit is gone: a message published now waits for more.
		p.fill("q", 1)
		p.quiet()
		p.send(0, linkFlow(1, 0, 2048, 5, 1))
		p.expectDeliveries(lc, 0, 1, false)
		p.closeConn()
	})
}

// Drain with fewer messages than credit: they are delivered, then the
// flow reports the rest of the credit used (delivery-count = old count +
// credit, credit 0, drain set).
func TestDrainWithMessages(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.fill("q", 2)
		lc := p.consume(0, 2048, "q", false)
		drain := linkFlow(1, 0, 2048, 0, 5)
		drain.Drain = true
		p.send(0, drain)
		p.expectDeliveries(lc, 0, 2, false)
		f := expect[*amqp10.Flow](p, lc)
		if !f.HasHandle || f.DeliveryCount != 5 || f.LinkCredit != 0 || !f.Drain || f.NextOutgoingID != 2 {
			t.Fatalf("drain answered with %+v, want delivery-count 5, credit 0, drain, next-outgoing-id 2", f)
		}
		p.quiet()
		p.closeConn()
	})
}

// settle sends a disposition from the receiver for first..last.
func (p *pipePeer) settle(ch uint16, first, last uint32, settled bool, st amqp10.DeliveryState) {
	p.t.Helper()
	d := &amqp10.Disposition{Role: amqp10.RoleReceiver, First: first, Settled: settled, State: st}
	if last != first {
		d.Last, d.HasLast = last, true
	}
	p.send(ch, d)
}

// One disposition first..last settles every delivery in the range, with
// its outcome: accepted ones leave the queue, a rejected one goes to the
// dead-letter queue, a released one back to the queue; an id that is not
// an unsettled delivery (already settled, never sent) is ignored.
func TestDispositionRanges(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.consumeN("q", 6, false)
		accepted := amqp10.DeliveryState{Kind: amqp10.StateAccepted}

		p.settle(0, 0, 2, true, accepted)
		p.quiet() // settled by the peer: nothing to answer
		p.expectQueue("q", 0, 3)
		p.settle(0, 1, 1, true, accepted) // already settled
		p.settle(0, 99, 120, true, accepted)
		p.quiet()
		p.settle(0, 3, 3, true, amqp10.DeliveryState{Kind: amqp10.StateRejected})
		p.settle(0, 4, 4, true, amqp10.DeliveryState{Kind: amqp10.StateReleased})
		p.quiet()
		p.expectQueue("q", 1, 1)
		p.expectQueue("dlq", 1, 0)
		// 3..5 spans settled ids and the last unsettled one.
		p.settle(0, 2, 5, true, accepted)
		p.quiet()
		p.expectQueue("q", 1, 0) // the released one is back
		p.closeConn()
	})
}

// A disposition that applies an outcome without settling (rcv-settle-mode
// second) is answered with one settled disposition per delivery, from the
// sender, with the outcome applied; the deliveries are then settled.
func TestDispositionUnsettledIsAnsweredSettled(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.consumeN("q", 3, false)
		accepted := amqp10.DeliveryState{Kind: amqp10.StateAccepted}
		p.settle(0, 0, 2, false, accepted)
		for id := uint32(0); id < 3; id++ {
			d := expect[*amqp10.Disposition](p, lc)
			if d.Role != amqp10.RoleSender || d.First != id || d.HasLast && d.Last != id || !d.Settled ||
				d.State.Kind != amqp10.StateAccepted {
				t.Fatalf("answer %d: %+v, want a settled accepted disposition of %d from the sender", id, d, id)
			}
		}
		p.quiet()
		p.settle(0, 0, 2, false, accepted) // settled now: unknown ids
		p.quiet()
		p.expectQueue("q", 0, 0)
		p.closeConn()
	})
}

// Pre-settled deliveries are not tracked: a disposition naming them is
// ignored, and the queue forgot them when they were sent.
func TestDispositionOfPreSettledIgnored(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.consumeN("q", 2, true)
		p.settle(0, 0, 1, false, amqp10.DeliveryState{Kind: amqp10.StateReleased})
		p.quiet()
		p.expectQueue("q", 0, 0)
		p.closeConn()
	})
}

// A disposition without a state that does not settle is an invalid field:
// the session ends with it.
func TestDispositionWithoutStateOrSettleEndsSession(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.consumeN("q", 1, false)
		p.settle(0, 0, 0, false, amqp10.DeliveryState{})
		e := expect[*amqp10.End](p, lc)
		if e.Error == nil || e.Error.Condition != amqp10.ErrCondInvalidField {
			t.Fatalf("the session ended with %+v, want invalid-field", e.Error)
		}
		p.send(0, &amqp10.End{})
		p.quiet()
		// The session's unsettled delivery went back to the queue.
		p.expectQueue("q", 1, 0)
		p.closeConn()
	})
}
