package link

import (
	"testing"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// The frames RabbitMQ 4 sends when a link's queue is deleted: a detach per
// link (publishers and consumers) with closed set, resource-deleted and no
// description; other links stay.
func TestDeletedQueueDetachFrames(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		lc := p.begin(0, 2048)
		p.attachPublisher(0, 0, "/queues/qq")
		p.attachPublisher(0, 1, "/queues/q")
		p.attachConsumer(0, 2, "/queues/qq", false)
		p.attachPublisher(0, 3, "/exchanges/amq.direct/qq")
		vh, _ := p.rb.VHost(router.DefaultVHost)
		if _, err := vh.DeleteQueue("qq"); err != nil {
			t.Fatal(err)
		}
		detached := map[uint32]bool{}
		for range 2 {
			d := expect[*amqp10.Detach](p, lc)
			if !d.Closed || d.Error == nil || d.Error.Condition != amqp10.ErrCondResourceDeleted || d.Error.Description != "" {
				t.Fatalf("detach of handle %d: closed %v, error %+v; want closed, resource-deleted, no description", d.Handle, d.Closed, d.Error)
			}
			detached[d.Handle] = true
		}
		if !detached[0] || !detached[2] {
			t.Fatalf("detached handles %v, want 0 and 2", detached)
		}
		p.quiet() // the links to q and to an exchange stay
		p.send(0, &amqp10.Detach{Handle: 0, Closed: true})
		p.send(0, &amqp10.Detach{Handle: 2, Closed: true})
		p.quiet() // answers to our detaches are not answered
		p.transfer(0, 1, 0, false, "still here")
		if disp := expect[*amqp10.Disposition](p, lc); disp.State.Kind != amqp10.StateAccepted {
			t.Fatalf("publish on the remaining link: %+v", disp.State)
		}
	})
}

// A publisher whose exchange was deleted: its next message is released,
// then the link is detached with not-found (RabbitMQ 4 looks the exchange
// up per message; no detach before one is published).
func TestDeletedExchangeReleaseThenDetach(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		vh, _ := p.rb.VHost(router.DefaultVHost)
		if _, err := vh.DeclareExchange(router.ExchangeSpec{Name: "x", Type: router.ExchangeDirect}); err != nil {
			t.Fatal(err)
		}
		lc := p.begin(0, 2048)
		p.attachPublisher(0, 0, "/exchanges/x/k")
		if err := vh.DeleteExchange("x"); err != nil {
			t.Fatal(err)
		}
		p.quiet()
		p.transfer(0, 0, 0, false, "m")
		disp := expect[*amqp10.Disposition](p, lc)
		if disp.First != 0 || !disp.Settled || disp.State.Kind != amqp10.StateReleased {
			t.Fatalf("disposition %+v, want delivery 0 settled released", disp)
		}
		d := expect[*amqp10.Detach](p, lc)
		if !d.Closed || d.Error == nil || d.Error.Condition != amqp10.ErrCondNotFound || d.Error.Description != "no exchange 'x' in vhost '/'" {
			t.Fatalf("detach: closed %v, error %+v", d.Closed, d.Error)
		}
	})
}
