package link

import (
	"strings"
	"testing"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// attachVolatileSource attaches a direct reply-to consumer on handle and
// returns the source of the broker's attach reply.
func (p *pipePeer) attachVolatileSource(ch uint16, handle uint32, settled bool, expiry amqp10.Symbol) *amqp10.Attach {
	p.t.Helper()
	mode := amqp10.SndSettleMode(0)
	if settled {
		mode = amqp10.SndSettled
	}
	p.send(ch, &amqp10.Attach{Name: "reply", Handle: handle, Role: amqp10.RoleReceiver,
		SndSettleMode: mode, HasSndSettleMode: true,
		Source: &amqp10.Source{Dynamic: true, ExpiryPolicy: expiry, Capabilities: []amqp10.Symbol{"rabbitmq:volatile-queue"}},
		Target: &amqp10.Target{}})
	return expect[*amqp10.Attach](p, p.local[ch])
}

// The attach reply of a direct reply-to consumer is RabbitMQ 4.3's: a
// /queues/amq.rabbitmq.reply-to.… address, dynamic, its node properties,
// distribution mode move and the capability; messages come pre-settled,
// one per credit, a drain is answered behind the messages already taken,
// and without credit a message is dropped.
func TestVolatileSourceFrames(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.begin(0, 2048)
		a := p.attachVolatileSource(0, 0, true, "link-detach")
		src := a.Source
		if src == nil || !src.Dynamic || !strings.HasPrefix(src.Address, "/queues/amq.rabbitmq.reply-to.") ||
			src.DistributionMode != "move" || len(src.Capabilities) != 1 || src.Capabilities[0] != "rabbitmq:volatile-queue" ||
			src.ExpiryPolicy != "link-detach" {
			t.Fatalf("attach reply source %+v", src)
		}
		if lp, ok := src.DynamicNodeProperties.Get(amqp10.Symbol("lifetime-policy")); !ok {
			t.Fatalf("no lifetime-policy in %+v", src.DynamicNodeProperties)
		} else if d, ok := lp.(*amqp10.Described); !ok || d.Descriptor != uint64(0x2b) {
			t.Fatalf("lifetime-policy %#v, want delete-on-close", lp)
		}
		if !a.HasInitialDeliveryCount || a.InitialDeliveryCount != 0 {
			t.Fatalf("initial delivery-count %v %d", a.HasInitialDeliveryCount, a.InitialDeliveryCount)
		}
		p.attachPublisher(0, 1, src.Address)

		p.transfer(0, 1, 0, false, "no credit yet")
		if d := expect[*amqp10.Disposition](p, lc); d.State.Kind != amqp10.StateAccepted {
			t.Fatalf("publish without credit: %+v, want accepted (and dropped)", d.State)
		}
		p.quiet()

		p.send(0, linkFlow(0, 0, 2048, 0, 2))
		p.transfer(0, 1, 1, false, "one")
		p.transfer(0, 1, 2, false, "two")
		p.transfer(0, 1, 3, false, "three") // beyond the credit: dropped
		transfers, dispositions := 0, 0
		for transfers < 2 || dispositions < 3 {
			f := p.await()
			switch perf := f.perf.(type) {
			case *amqp10.Transfer:
				if perf.Handle != 0 || !perf.Settled {
					t.Fatalf("delivery %+v, want pre-settled on handle 0", perf)
				}
				transfers++
			case *amqp10.Disposition:
				if perf.State.Kind != amqp10.StateAccepted {
					t.Fatalf("publish: %+v", perf.State)
				}
				dispositions++
				if perf.HasLast {
					dispositions += int(perf.Last - perf.First)
				}
			default:
				t.Fatalf("unexpected %v", f)
			}
		}
		p.quiet()

		// A drain with no message waiting: answered at once, credit used up.
		p.send(0, &amqp10.Flow{NextIncomingID: 2, HasNextIncomingID: true, IncomingWindow: 2048,
			OutgoingWindow: 1 << 16, Handle: 0, HasHandle: true, DeliveryCount: 2, HasDeliveryCount: true,
			LinkCredit: 5, HasLinkCredit: true, Drain: true})
		fl := expect[*amqp10.Flow](p, lc)
		if !fl.Drain || fl.DeliveryCount != 7 || fl.LinkCredit != 0 {
			t.Fatalf("drain answer %+v, want delivery-count 7, credit 0", fl)
		}
		p.transfer(0, 1, 4, false, "after the drain")
		expect[*amqp10.Disposition](p, lc)
		p.quiet()

		// The consumer detached, its address is a missing queue.
		p.send(0, &amqp10.Detach{Handle: 0, Closed: true})
		expect[*amqp10.Detach](p, lc)
		p.transfer(0, 1, 5, false, "nobody")
		if d := expect[*amqp10.Disposition](p, lc); d.State.Kind != amqp10.StateReleased {
			t.Fatalf("publish after the consumer went: %+v, want released", d.State)
		}
	})
}

// A direct reply-to source that is not pre-settled, or whose expiry policy
// is not link-detach, is refused with not-implemented, as by RabbitMQ 4.3.
func TestVolatileSourceRefused(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.begin(0, 2048)
		for h, c := range []struct {
			settled bool
			expiry  amqp10.Symbol
		}{{false, "link-detach"}, {true, ""}, {true, "never"}} {
			if a := p.attachVolatileSource(0, uint32(h), c.settled, c.expiry); a.Source != nil {
				t.Fatalf("%+v: attach reply has a source: %+v", c, a.Source)
			}
			d := expect[*amqp10.Detach](p, lc)
			if !d.Closed || d.Error == nil || d.Error.Condition != amqp10.ErrCondNotImplemented {
				t.Fatalf("%+v: detach %+v", c, d)
			}
		}
	})
}
