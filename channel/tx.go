package channel

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// A transactional channel (tx.select) holds its publishes and its
// settlements until tx.commit, as RabbitMQ 4.3's channel does: at commit
// the publishes are routed and delivered in order (basic.return for an
// unroutable mandatory one), then the settlements are applied in order,
// and tx.commit-ok is sent once every durable message of the transaction
// is synced. A transaction is not atomic (nor is RabbitMQ's): a queue
// refusing a message (overflow reject-publish) fails the commit with 406
// "partial tx completion", the rest having taken effect. tx.rollback drops
// the publishes and gives the settled deliveries back to the channel's
// unacknowledged ones. Routing happens at commit, where RabbitMQ routes at
// the publish; the two differ only if bindings change in between.

// txState is a transaction in progress.
type txState struct {
	publishes []txPublish
	settles   []txSettle
}

// take returns what the transaction holds and starts the next one.
func (t *txState) take() txState {
	taken := *t
	*t = txState{}
	return taken
}

// txPublish is a publish held for the commit.
type txPublish struct {
	exchange, routingKey string
	mandatory            bool
	msg                  *router.Message
	routeKeys            []string // BCC: the keys routed with but not kept
	props, body          []byte   // for basic.return
}

// txSettle is an ack, reject or nack held for the commit.
type txSettle struct {
	take []unacked
	o    router.Settlement
}

func (ch *channel) txSelect() error {
	ch.mu.Lock()
	confirm := ch.confirm
	ch.mu.Unlock()
	if confirm {
		return ch.err(amqp091.PreconditionFailed, 90, 10, "cannot switch from confirm to tx mode")
	}
	if ch.tx == nil {
		ch.mu.Lock() // the HTTP API's channel list reads it
		ch.tx = &txState{}
		ch.mu.Unlock()
	}
	return ch.send(&amqp091.TxSelectOk{})
}

func (ch *channel) txRollback() error {
	if ch.tx == nil {
		return ch.err(amqp091.PreconditionFailed, 90, 30, "channel is not transactional")
	}
	tx := ch.tx.take()
	ch.mu.Lock()
	if !ch.ended {
		for _, s := range tx.settles {
			for _, u := range s.take {
				if u.cons != nil {
					u.cons.out++
				}
			}
			ch.unacked = append(ch.unacked, s.take...)
		}
		slices.SortFunc(ch.unacked, func(a, b unacked) int { return cmp.Compare(a.tag, b.tag) })
	}
	ch.mu.Unlock()
	return ch.send(&amqp091.TxRollbackOk{})
}

func (ch *channel) txCommit() error {
	if ch.tx == nil {
		return ch.err(amqp091.PreconditionFailed, 90, 20, "channel is not transactional")
	}
	tx := ch.tx.take()
	c := ch.c
	vh := c.vhost
	var synced sync.WaitGroup
	var refused atomic.Bool
	for i := range tx.publishes {
		tp := &tx.publishes[i]
		var span trace.Span
		if tr := c.srv.opts.Tracer; tr != nil {
			span = tr.StartPublish(vh.Name(), tp.exchange, tp.routingKey, tp.msg.Container)
			tp.msg.Anns = telemetry.Inject(tp.msg.Anns, span.SpanContext())
		}
		done := func(o router.Outcome, queues []*router.Queue) {
			if span != nil {
				telemetry.EndPublish(span, queues, o)
			}
			if o.Kind == router.Rejected {
				refused.Store(true)
			}
		}
		p := router.Publish{Exchange: tp.exchange, Msg: tp.msg, RouteKeys: tp.routeKeys}
		if tp.msg.Header.Durable {
			synced.Add(1)
			p.Confirm = func(o router.Outcome) { done(o, nil); synced.Done() }
		}
		res, err := vh.Publish(p)
		if err != nil {
			if !errors.Is(err, router.ErrNotFound) {
				return ch.routerErr(err, 90, 20)
			}
			// The exchange was deleted since the publish: unroutable.
			res = router.PublishResult{Outcome: router.Outcome{Kind: router.Released}}
		}
		if ctr := c.srv.opts.Counters; ctr != nil {
			ctr.Published(res.Queues, res.Outcome.Kind, false, tp.mandatory)
		}
		if res.Outcome.Kind == router.Released && tp.mandatory {
			ret := &amqp091.BasicReturn{ReplyCode: amqp091.NoRoute, ReplyText: "NO_ROUTE", Exchange: tp.exchange, RoutingKey: tp.routingKey}
			if err := c.sendContent(ch.id, ret, tp.props, tp.body); err != nil {
				return err
			}
		}
		if !res.Pending {
			done(res.Outcome, res.Queues)
			if p.Confirm != nil {
				synced.Done()
			}
		}
	}
	for _, s := range tx.settles {
		ch.apply(s.take, s.o)
	}
	all := make(chan struct{})
	go func() { synced.Wait(); close(all) }()
	select {
	case <-all:
	case <-c.h.Force:
		return nil // the reader closes the connection next
	}
	if refused.Load() {
		return ch.err(amqp091.PreconditionFailed, 90, 20, "partial tx completion")
	}
	return ch.send(&amqp091.TxCommitOk{})
}
