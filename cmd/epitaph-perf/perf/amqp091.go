package perf

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
)

// The amqp091 engine: AMQP 0-9-1 with github.com/rabbitmq/amqp091-go, what
// most RabbitMQ applications speak. One connection and channel per
// publisher or consumer. Publishers use publisher confirms with Window
// publishes in flight; consumers set basic.qos to Credit (per consumer)
// and ack or reject each delivery. The addresses are the AMQP 1.0 ones
// (/queues/Q, /exchanges/X/KEY, RabbitMQ's legacy forms, a bare name),
// mapped to an exchange and routing key, or a queue. Deliveries beyond the
// prefetch are invisible to the client library, so they are reported as 0.

// target091 maps an AMQP 1.0 target address to the exchange and routing key
// a 0-9-1 publish uses.
func target091(addr string) (exchange, key string, err error) {
	seg, err := addressSegments(addr)
	if err != nil {
		return "", "", err
	}
	switch {
	case len(seg) == 2 && seg[0] == "queues", len(seg) == 3 && seg[0] == "amq" && seg[1] == "queue", len(seg) == 2 && seg[0] == "queue":
		return "", seg[len(seg)-1], nil
	case (len(seg) == 2 || len(seg) == 3) && (seg[0] == "exchanges" || seg[0] == "exchange"):
		if len(seg) == 3 {
			key = seg[2]
		}
		return seg[1], key, nil
	case len(seg) == 1 && !strings.HasPrefix(addr, "/"):
		return "", seg[0], nil
	}
	return "", "", fmt.Errorf("amqp091 engine: cannot publish to address %q (use /queues/Q or /exchanges/X[/KEY])", addr)
}

// source091 maps an AMQP 1.0 source address to the queue a 0-9-1 consumer
// consumes from.
func source091(addr string) (string, error) {
	seg, err := addressSegments(addr)
	if err != nil {
		return "", err
	}
	switch {
	case len(seg) == 2 && (seg[0] == "queues" || seg[0] == "queue"), len(seg) == 3 && seg[0] == "amq" && seg[1] == "queue":
		return seg[len(seg)-1], nil
	case len(seg) == 1 && !strings.HasPrefix(addr, "/"):
		return seg[0], nil
	}
	return "", fmt.Errorf("amqp091 engine: cannot consume from address %q (use /queues/Q)", addr)
}

// addressSegments splits an address on "/" and percent-decodes each part.
func addressSegments(addr string) ([]string, error) {
	if addr == "" {
		return nil, errors.New("empty address")
	}
	parts := strings.Split(strings.TrimPrefix(addr, "/"), "/")
	for i, p := range parts {
		d, err := url.PathUnescape(p)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", addr, err)
		}
		parts[i] = d
	}
	return parts, nil
}

func dialAMQP091(o ConnOptions) (*amqp091.Connection, *amqp091.Channel, error) {
	conn, err := amqp091.DialConfig(o.URL, amqp091.Config{Heartbeat: 30 * time.Second, Locale: "en_US"})
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, ch, nil
}

type amqp091Sender struct {
	o             ConnOptions
	conn          *amqp091.Connection
	ch            *amqp091.Channel
	exchange, key string
	slots         chan struct{}
	recs          chan amqp091Receipt
	returned      atomic.Uint64
	wg            sync.WaitGroup
	mu            sync.Mutex
	confirm       Histogram
	stats         SendStats
	err           error
	ctx           context.Context
	stop          context.CancelFunc
}

type amqp091Receipt struct {
	dc   *amqp091.DeferredConfirmation
	sent int64 // unix ns
}

func newAMQP091Sender(_ context.Context, o ConnOptions, addr string) (*amqp091Sender, error) {
	exchange, key, err := target091(addr)
	if err != nil {
		return nil, err
	}
	conn, ch, err := dialAMQP091(o)
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("confirm.select: %w", err)
	}
	w := max(o.Window, 1)
	s := &amqp091Sender{o: o, conn: conn, ch: ch, exchange: exchange, key: key,
		slots: make(chan struct{}, w), recs: make(chan amqp091Receipt, w)}
	s.ctx, s.stop = context.WithCancel(context.Background())
	// Publishes are mandatory: an unroutable one comes back as basic.return
	// (then confirmed), counted as released, as AMQP 1.0 settles it.
	returns := ch.NotifyReturn(make(chan amqp091.Return, w))
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for range returns {
			s.returned.Add(1)
		}
	}()
	go s.settle()
	return s, nil
}

// settle waits for the confirms in publish order, freeing window slots.
func (s *amqp091Sender) settle() {
	defer s.wg.Done()
	for rc := range s.recs {
		acked, err := rc.dc.WaitContext(s.ctx)
		now := time.Now().UnixNano()
		s.mu.Lock()
		switch {
		case err != nil:
			if s.err == nil {
				s.err = err
			}
			s.stats.Other++
		case acked:
			s.stats.Accepted++
			if s.o.recordable(rc.sent) {
				s.confirm.Record(now - rc.sent)
			}
		default: // basic.nack from the broker
			s.stats.Rejected++
		}
		s.mu.Unlock()
		<-s.slots
	}
}

func (s *amqp091Sender) Send(_ uint64, body []byte) error {
	s.slots <- struct{}{}
	p := amqp091.Publishing{Body: append([]byte(nil), body...)}
	if s.o.Durable {
		p.DeliveryMode = amqp091.Persistent
	}
	sent := s.o.sendTime(body)
	dc, err := s.ch.PublishWithDeferredConfirmWithContext(s.ctx, s.exchange, s.key, true, false, p)
	if err != nil {
		<-s.slots
		return err
	}
	s.mu.Lock()
	s.stats.Sent++
	s.mu.Unlock()
	s.recs <- amqp091Receipt{dc: dc, sent: sent}
	return nil
}

func (s *amqp091Sender) Wait(ctx context.Context) error {
	for i := 0; i < cap(s.slots); i++ {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			for ; i > 0; i-- {
				<-s.slots
			}
			return ctx.Err()
		}
	}
	for i := 0; i < cap(s.slots); i++ {
		<-s.slots
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Stats counts a returned (unroutable) publish as released, not accepted.
func (s *amqp091Sender) Stats() SendStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	r := s.returned.Load()
	st.Released += r
	st.Accepted -= min(r, st.Accepted)
	return st
}

func (s *amqp091Sender) Confirms() *Histogram {
	return lockedCopy(&s.mu, &s.confirm)
}

func (s *amqp091Sender) Close() error {
	close(s.recs)
	s.stop()
	err := s.conn.Close() // closes the return channel too
	s.wg.Wait()
	if errors.Is(err, amqp091.ErrClosed) {
		err = nil
	}
	return err
}

type amqp091Receiver struct {
	conn  *amqp091.Connection
	done  chan struct{}
	mu    sync.Mutex
	stats RecvStats
	err   error
	stop  atomic.Bool
}

func newAMQP091Receiver(_ context.Context, o ConnOptions, addr string, size int, onMsg func([]byte) bool) (*amqp091Receiver, error) {
	queue, err := source091(addr)
	if err != nil {
		return nil, err
	}
	conn, ch, err := dialAMQP091(o)
	if err != nil {
		return nil, err
	}
	prefetch := int(o.Credit)
	if prefetch == 0 {
		prefetch = 1000
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("basic.qos: %w", err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("basic.consume %s: %w", queue, err)
	}
	r := &amqp091Receiver{conn: conn, done: make(chan struct{})}
	go func() { // ends when the connection closes (Close) and the deliveries channel with it
		defer close(r.done)
		for d := range deliveries {
			ok := len(d.Body) == size
			accept := true
			if ok {
				accept = onMsg(d.Body)
			}
			var err error
			if accept {
				err = d.Ack(false)
			} else {
				err = d.Reject(false)
			}
			r.mu.Lock()
			r.stats.Delivered++
			r.stats.countOutcome(ok, accept)
			if err != nil && !r.stop.Load() && r.err == nil {
				r.err = err
			}
			r.mu.Unlock()
		}
	}()
	return r, nil
}

func (r *amqp091Receiver) Stats() RecvStats { r.mu.Lock(); defer r.mu.Unlock(); return r.stats }

func (r *amqp091Receiver) Close() error {
	r.stop.Store(true)
	_ = r.conn.Close()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
