package perf

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/Azure/go-amqp"
)

// The go-amqp engine: what applications use. One connection and session
// per link. Beyond-credit deliveries are invisible to it (go-amqp hides
// flow control), so it reports them as zero.

func dialGoAMQP(ctx context.Context, o ConnOptions) (*amqp.Conn, *amqp.Session, error) {
	co := &amqp.ConnOptions{MaxFrameSize: 1 << 20}
	switch o.SASL {
	case "", "auto", "anonymous":
		co.SASLType = amqp.SASLTypeAnonymous() // PLAIN is used automatically when the URL has user info
	case "none":
	case "plain":
	default:
		return nil, nil, fmt.Errorf("unknown -sasl %q", o.SASL)
	}
	conn, err := amqp.Dial(ctx, o.URL, co)
	if err != nil {
		return nil, nil, err
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, sess, nil
}

type goSender struct {
	o       ConnOptions
	confirm Histogram
	conn    *amqp.Conn
	s       *amqp.Sender
	slots   chan struct{}
	recs    chan goReceipt
	wg      sync.WaitGroup
	mu      sync.Mutex
	stats   SendStats
	err     error
	ctx     context.Context
	stop    context.CancelFunc
}

type goReceipt struct {
	r    amqp.SendReceipt
	seq  uint64
	sent int64 // unix ns
}

func newGoSender(ctx context.Context, o ConnOptions, addr string) (*goSender, error) {
	conn, sess, err := dialGoAMQP(ctx, o)
	if err != nil {
		return nil, err
	}
	mode := amqp.SenderSettleModeUnsettled
	s, err := sess.NewSender(ctx, addr, &amqp.SenderOptions{SettlementMode: &mode})
	if err != nil {
		conn.Close()
		return nil, err
	}
	w := max(o.Window, 1)
	gs := &goSender{o: o, conn: conn, s: s, slots: make(chan struct{}, w), recs: make(chan goReceipt, w)}
	gs.ctx, gs.stop = context.WithCancel(context.Background())
	gs.wg.Add(1)
	go gs.settle()
	return gs, nil
}

// settle waits for the receipts in order, freeing window slots.
func (g *goSender) settle() {
	defer g.wg.Done()
	for rc := range g.recs {
		st, err := rc.r.Wait(g.ctx)
		now := time.Now().UnixNano()
		g.mu.Lock()
		switch {
		case err != nil:
			if g.err == nil {
				g.err = err
			}
			g.stats.Other++
		default:
			switch st.(type) {
			case *amqp.StateAccepted:
				g.stats.Accepted++
				if g.o.recordable(rc.sent) {
					g.confirm.Record(now - rc.sent)
				}
			case *amqp.StateRejected:
				g.stats.Rejected++
			case *amqp.StateReleased, *amqp.StateModified:
				g.stats.Released++
			default:
				g.stats.Other++
			}
		}
		g.mu.Unlock()
		<-g.slots
	}
}

func (g *goSender) Send(seq uint64, body []byte) error {
	g.slots <- struct{}{}
	msg := amqp.NewMessage(append([]byte(nil), body...))
	if g.o.Durable {
		msg.Header = &amqp.MessageHeader{Durable: true}
	}
	sent := g.o.sendTime(body)
	r, err := g.s.SendWithReceipt(g.ctx, msg, nil)
	if err != nil {
		<-g.slots
		return err
	}
	g.mu.Lock()
	g.stats.Sent++
	g.mu.Unlock()
	g.recs <- goReceipt{r: r, seq: seq, sent: sent}
	return nil
}

func (g *goSender) Wait(ctx context.Context) error {
	for i := 0; i < cap(g.slots); i++ {
		select {
		case g.slots <- struct{}{}:
		case <-ctx.Done():
			for ; i > 0; i-- {
				<-g.slots
			}
			return ctx.Err()
		}
	}
	for i := 0; i < cap(g.slots); i++ {
		<-g.slots
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *goSender) Stats() SendStats { g.mu.Lock(); defer g.mu.Unlock(); return g.stats }

// Confirms is a copy of the publish-confirm latency histogram.
func (g *goSender) Confirms() *Histogram {
	return lockedCopy(&g.mu, &g.confirm)
}

func (g *goSender) Close() error {
	close(g.recs)
	g.stop()
	g.wg.Wait()
	return g.conn.Close()
}

type goReceiver struct {
	conn     *amqp.Conn
	r        *amqp.Receiver
	done     chan struct{}
	stop     context.CancelFunc
	mu       sync.Mutex
	stats    RecvStats
	err      error
	received atomic.Uint64
}

func newGoReceiver(ctx context.Context, o ConnOptions, addr string, size int, onMsg func([]byte) bool) (*goReceiver, error) {
	conn, sess, err := dialGoAMQP(ctx, o)
	if err != nil {
		return nil, err
	}
	credit := int32(o.Credit)
	if credit == 0 {
		credit = 1000
	}
	exhausted := o.CreditMode == "exhausted"
	ropts := &amqp.ReceiverOptions{Credit: credit}
	if exhausted {
		ropts.Credit = -1 // manual: grant C again only when all C are used
	}
	r, err := sess.NewReceiver(ctx, addr, ropts)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if exhausted {
		if err := r.IssueCredit(uint32(credit)); err != nil {
			conn.Close()
			return nil, err
		}
	}
	g := &goReceiver{conn: conn, r: r, done: make(chan struct{})}
	rctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	go func() {
		defer close(g.done)
		var used int32
		for {
			m, err := r.Receive(rctx, nil)
			if err != nil {
				if rctx.Err() == nil {
					g.mu.Lock()
					g.err = err
					g.mu.Unlock()
				}
				return
			}
			body := m.GetData()
			accept := true
			ok := len(body) == size
			if ok {
				accept = onMsg(body)
			}
			if accept {
				err = r.AcceptMessage(rctx, m)
			} else {
				err = r.RejectMessage(rctx, m, nil)
			}
			g.mu.Lock()
			g.stats.Delivered++
			g.stats.countOutcome(ok, accept)
			g.mu.Unlock()
			g.received.Add(1)
			if err != nil && rctx.Err() == nil {
				g.mu.Lock()
				g.err = err
				g.mu.Unlock()
				return
			}
			if exhausted {
				if used++; used == credit {
					used = 0
					if err := r.IssueCredit(uint32(credit)); err != nil {
						return
					}
				}
			}
		}
	}()
	return g, nil
}

func (g *goReceiver) Stats() RecvStats { g.mu.Lock(); defer g.mu.Unlock(); return g.stats }

func (g *goReceiver) Close() error {
	g.stop()
	<-g.done
	err := g.conn.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	_ = err
	return nil
}
