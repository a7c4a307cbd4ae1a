package link

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/dlevents"
)

// The dead-letter events source, frame by frame: nothing is sent without
// credit; each credit takes one event, pre-settled; what does not fit the
// subscription's buffer meanwhile is one gap marker; drain uses up the
// credit left; a detach ends the subscription.
func TestEventsLinkCreditGapDrainDetach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rb, opts := fuzzServer(t)
		hub := dlevents.New(dlevents.Options{Buffer: 3})
		opts.Events = hub
		p := startPeer(t, rb, opts, pipeClient(), true)
		lc := p.begin(0, 2048)
		p.attachConsumer(0, 1, "/events/dead-letters/q", true)
		if hub.Subscribers() != 1 {
			t.Fatalf("%d subscribers after the attach, want 1", hub.Subscribers())
		}
		publish := func(n int) {
			for range n {
				hub.Publish(&dlevents.Event{VHost: "/", Queue: "q", Reason: "expired", Time: time.Now()})
				hub.Publish(&dlevents.Event{VHost: "/", Queue: "other", Reason: "expired", Time: time.Now()})
			}
		}
		publish(5) // no credit: 3 events held, then the gap marker of 2
		p.quiet()

		subjects := func(n int) []string {
			var out []string
			for range n {
				f := p.next()
				tr, ok := f.perf.(*amqp10.Transfer)
				if !ok || f.ch != lc || tr.Handle != 1 || !tr.Settled {
					t.Fatalf("the broker sent %v, want a settled transfer on handle 1", f)
				}
				m, err := amqp10.ParseMessage(f.payload)
				if err != nil {
					t.Fatal(err)
				}
				props, err := m.Properties()
				if err != nil || props == nil || props.Subject == nil {
					t.Fatalf("properties %+v, %v", props, err)
				}
				out = append(out, *props.Subject)
			}
			return out
		}
		p.send(0, linkFlow(1, 0, 2048, 0, 1))
		if got := subjects(1); got[0] != dlevents.TypeDeadLetter {
			t.Fatalf("first item %v", got)
		}
		p.quiet()
		p.send(0, linkFlow(1, 1, 2048, 1, 10))
		if got := subjects(3); got[0] != dlevents.TypeDeadLetter || got[1] != dlevents.TypeDeadLetter || got[2] != dlevents.TypeGap {
			t.Fatalf("items %v, want the held events and the gap marker", got)
		}
		p.quiet()
		if hub.Lost() != 2 {
			t.Fatalf("lost %d, want 2", hub.Lost())
		}
		publish(1) // credit left: sent at once
		if got := subjects(1); got[0] != dlevents.TypeDeadLetter {
			t.Fatalf("item %v", got)
		}
		drain := linkFlow(1, 5, 2048, 5, 8)
		drain.Drain = true
		p.send(0, drain)
		f := expect[*amqp10.Flow](p, lc)
		if f.DeliveryCount != 13 || f.LinkCredit != 0 || !f.Drain {
			t.Fatalf("drain answered with %+v, want delivery-count 13, credit 0", f)
		}
		publish(1) // no credit after the drain
		p.quiet()
		p.send(0, &amqp10.Detach{Handle: 1, Closed: true})
		expect[*amqp10.Detach](p, lc)
		if hub.Subscribers() != 0 {
			t.Fatalf("%d subscribers after the detach, want 0", hub.Subscribers())
		}
		p.closeConn()
	})
}

// A queue name that no declaration could create is a bad address; an
// unsettled attach is refused; and without a hub the source is not found.
func TestEventsLinkRefusals(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.begin(0, 2048)
		p.send(0, &amqp10.Attach{Name: "ev", Handle: 1, Role: amqp10.RoleReceiver,
			Source: &amqp10.Source{Address: "/events/dead-letters", HasAddress: true}, Target: &amqp10.Target{}})
		expect[*amqp10.Attach](p, lc)
		d := expect[*amqp10.Detach](p, lc)
		if d.Error == nil || d.Error.Condition != amqp10.ErrCondNotFound {
			t.Fatalf("detach %+v, want not-found (no event stream on this server)", d.Error)
		}
		p.closeConn()
	})
	synctest.Test(t, func(t *testing.T) {
		rb, opts := fuzzServer(t)
		opts.Events = dlevents.New(dlevents.Options{})
		p := startPeer(t, rb, opts, pipeClient(), true)
		lc := p.begin(0, 2048)
		for i, c := range []struct {
			address string
			mode    amqp10.SndSettleMode
			want    amqp10.ErrCond
		}{
			{"/events/dead-letters/", 1, amqp10.ErrCondInvalidField},
			{"/events/dead-letters/a%2Fb%00", 1, amqp10.ErrCondInvalidField},
			{"/events/dead-letters", 0, amqp10.ErrCondNotImplemented},
		} {
			p.send(0, &amqp10.Attach{Name: "ev", Handle: uint32(i), Role: amqp10.RoleReceiver, SndSettleMode: c.mode, HasSndSettleMode: true,
				Source: &amqp10.Source{Address: c.address, HasAddress: true}, Target: &amqp10.Target{}})
			expect[*amqp10.Attach](p, lc)
			d := expect[*amqp10.Detach](p, lc)
			if d.Error == nil || d.Error.Condition != c.want {
				t.Fatalf("%s: detach %+v, want %s", c.address, d.Error, c.want)
			}
			p.send(0, &amqp10.Detach{Handle: uint32(i), Closed: true})
		}
		p.quiet()
		p.closeConn()
	})
}
