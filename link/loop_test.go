package link

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// The connection loop's frame-level behaviour, over net.Pipe in fake time
// (pipe_test.go): what each frame is answered with, and when the
// connection ends.

// A session begun on any channel is answered on the first free local
// channel with our windows; end is answered with end and frees the
// channel; close is answered with close and ends the output.
func TestLoopBeginEndClose(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.send(3, &amqp10.Begin{NextOutgoingID: 7, IncomingWindow: 10, OutgoingWindow: 10, HandleMax: 255})
		b := expect[*amqp10.Begin](p, 0)
		if !b.HasRemoteChannel || b.RemoteChannel != 3 || b.NextOutgoingID != 0 ||
			b.IncomingWindow != sessionWindow || b.OutgoingWindow != maxOutgoingWindow {
			t.Fatalf("begin answered with %+v", b)
		}
		p.send(5, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		if b := expect[*amqp10.Begin](p, 1); b.RemoteChannel != 5 {
			t.Fatalf("second begin answered with %+v", b)
		}
		p.send(3, &amqp10.End{})
		expect[*amqp10.End](p, 0)
		// Local channel 0 is free again.
		p.send(4, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		if b := expect[*amqp10.Begin](p, 0); b.RemoteChannel != 4 {
			t.Fatalf("third begin answered with %+v", b)
		}
		p.quiet()
		p.closeConn()
	})
}

// Connection-level errors close the connection with their condition; after
// our close only the peer's close is heeded, and it ends the output.
func TestLoopConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame func(p *pipePeer)
		cond  amqp10.ErrCond
		// atOnce: the broker ends its output after its close, without
		// waiting for the peer's (an error found by the reader).
		atOnce bool
	}{
		{"frame on a channel without a session", func(p *pipePeer) {
			p.send(2, &amqp10.Flow{IncomingWindow: 1, OutgoingWindow: 1})
		}, amqp10.ErrCondIllegalState, false},
		{"begin on a channel in use", func(p *pipePeer) {
			p.begin(1, 100)
			p.send(1, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		}, amqp10.ErrCondIllegalState, false},
		{"begin with a remote channel", func(p *pipePeer) {
			p.send(1, &amqp10.Begin{RemoteChannel: 0, HasRemoteChannel: true, IncomingWindow: 10, OutgoingWindow: 10})
		}, amqp10.ErrCondIllegalState, false},
		{"channel above channel-max", func(p *pipePeer) {
			p.send(300, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		}, amqp10.ErrCondFramingError, false},
		{"second open", func(p *pipePeer) {
			p.send(0, &amqp10.Open{ContainerID: "again"})
		}, amqp10.ErrCondIllegalState, false},
		{"undecodable flow", func(p *pipePeer) {
			p.begin(0, 100)
			fb, start := amqp10.BeginFrame(nil, amqp10.FrameTypeAMQP, 0)
			fb = append(amqp10.AppendDescriptor(fb, amqp10.DescFlow), 0xa1, 0x01, 'x') // a string, not a list
			p.write(amqp10.EndFrame(fb, start))
		}, amqp10.ErrCondInvalidField, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pipeTest(t, func(t *testing.T, p *pipePeer) {
				tc.frame(p)
				c := expect[*amqp10.Close](p, 0)
				if c.Error == nil || c.Error.Condition != tc.cond {
					t.Fatalf("closed with %+v, want %s", c.Error, tc.cond)
				}
				if tc.atOnce {
					p.expectEOF()
					return
				}
				p.send(0, &amqp10.Begin{IncomingWindow: 10, OutgoingWindow: 10}) // ignored: we closed
				p.quiet()
				p.send(0, &amqp10.Close{})
				p.expectEOF()
			})
		})
	}
}

// A peer that sends nothing, not even heartbeats, for the idle timeout is
// closed with resource-limit-exceeded; a heartbeat resets the clock.
func TestLoopIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := startPipePeer(t)
		idle := p.srv.opts.IdleTimeout // the default: fake time makes a minute cost nothing
		start := time.Now()
		time.Sleep(idle - time.Millisecond)
		select {
		case f := <-p.in:
			t.Fatalf("got %v", f)
		default:
		}
		p.write(amqp10.AppendHeartbeat(nil))
		time.Sleep(idle - time.Millisecond)
		p.quiet()
		f := p.await()
		c, ok := f.perf.(*amqp10.Close)
		if !ok {
			t.Fatalf("the broker sent %v, want close", f)
		}
		if c.Error == nil || c.Error.Condition != amqp10.ErrCondResourceLimitExceeded {
			t.Fatalf("closed with %+v, want resource-limit-exceeded", c.Error)
		}
		if d := time.Since(start); d < 2*idle-2*time.Millisecond || d > 2*idle {
			t.Fatalf("closed after %v, want 2 × %v after the heartbeat", d, idle)
		}
		p.expectEOF() // at once: the broker does not wait for a silent peer's close
	})
}
