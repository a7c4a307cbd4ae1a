package link

import (
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
)

// alarmServer is a broker with queue q whose disk alarm the test sets and
// clears (free is the free disk space it reads; the limit is 100 bytes;
// check reads it at once), and the server options that serve it.
func alarmServer(t *testing.T, free *atomic.Uint64) (rb *router.Broker, opts Options, check func()) {
	t.Helper()
	rb = router.New(router.Options{Store: store.NewMemory(), DiskFreeLimit: 100,
		DiskFree: func(string) (uint64, error) { return free.Load(), nil }})
	users := auth.New(rb)
	users.SeedDefaults()
	vh, _ := rb.VHost(router.DefaultVHost)
	if _, _, err := vh.DeclareQueue(router.QueueSpec{Name: "q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	return rb, Options{Router: rb, Auth: users}, func() { rb.Alarms().Check() }
}

// During a resource alarm our incoming window is not renewed: the alarm's
// flow advertises what is left of it, it runs down with each transfer
// frame, and a transfer frame beyond it is a window violation that ends
// the session (session:window-violation). When the alarm clears, the
// window is renewed to sessionWindow.
func TestSessionIncomingWindowUnderAlarm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var free atomic.Uint64
		free.Store(1000)
		rb, opts, checkAlarms := alarmServer(t, &free)
		p := startPeer(t, rb, opts, pipeClient(), true)
		lc := p.begin(0, 2048)
		p.attachPublisher(0, 0, "/queues/q")
		for i := range 10 {
			p.transfer(0, 0, uint32(i), true, "m")
		}
		p.quiet()

		free.Store(0)
		checkAlarms()
		f := expect[*amqp10.Flow](p, lc)
		if f.HasHandle || f.NextIncomingID != 10 || f.IncomingWindow != sessionWindow-10 {
			t.Fatalf("the alarm's flow: %+v, want next-incoming-id 10 and the %d left of the window", f, sessionWindow-10)
		}
		free.Store(1000)
		checkAlarms()
		f = expect[*amqp10.Flow](p, lc)
		if f.HasHandle || f.NextIncomingID != 10 || f.IncomingWindow != sessionWindow {
			t.Fatalf("the flow when the alarm cleared: %+v, want the window renewed to %d", f, sessionWindow)
		}

		free.Store(0)
		checkAlarms()
		expect[*amqp10.Flow](p, lc)
		// One delivery in sessionWindow frames uses the whole window, with
		// no renewal; the frame after it is beyond it.
		msg := amqp10.AppendData(nil, make([]byte, sessionWindow))
		p.sendPayload(0, &amqp10.Transfer{Handle: 0, DeliveryID: 10, HasDeliveryID: true, DeliveryTag: []byte("big"),
			HasMessageFormat: true, Settled: true, HasSettled: true, More: true}, msg[:1])
		for i := 1; i < sessionWindow; i++ {
			p.sendPayload(0, &amqp10.Transfer{Handle: 0, More: true}, msg[i:i+1])
		}
		p.quiet()
		p.sendPayload(0, &amqp10.Transfer{Handle: 0}, msg[sessionWindow:])
		e := expect[*amqp10.End](p, lc)
		if e.Error == nil || e.Error.Condition != amqp10.ErrCondWindowViolation {
			t.Fatalf("the session ended with %+v, want window-violation", e.Error)
		}
		p.send(0, &amqp10.End{})
		p.closeConn()
		p.expectQueue("q", 10, 0)
	})
}
