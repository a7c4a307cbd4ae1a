package link

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// publisherCredit is the link credit granted to publishers, topped up when
// half of it is used.
const publisherCredit = 1000

// receiverLink is a link on which the peer publishes to the broker. Owned by
// the connection loop.
type receiverLink struct {
	s      *session
	handle uint32
	name   string

	anonymous bool // the anonymous terminus: route on properties.to
	exchange  string
	key       string
	mgmt      bool // requests to the /management node
	second    bool // rcv-settle-mode second
	sndMode   amqp10.SndSettleMode

	// queue is the queue a /queues/{q} target names: when it is deleted
	// the link is detached with resource-deleted, as RabbitMQ 4 does.
	queue *router.Queue

	deliveryCount uint32
	credit        uint32
	window        uint32
	unconfirmed   uint32 // publishes waiting for the store's sync

	// The delivery being assembled from several transfer frames.
	inProgress bool
	id         uint32
	settled    bool
	partial    []byte
}

// grant refills the publisher's credit. On a rcv-settle-mode second link
// credit also stops at the session's bound on unsettled publishes.
func (l *receiverLink) grant() {
	if l.second {
		l.grantWithin(l.s.secondSlack())
		return
	}
	l.credit = l.window
	l.sendCredit()
}

// grantWithin tops up a rcv-settle-mode second link's credit within
// slack, the session's room for more unsettled publishes (secondSlack),
// and returns the slack left.
func (l *receiverLink) grantWithin(slack int) int {
	room := slack + int(l.credit) // its own credit is counted in slack
	if l.inProgress {
		room++
	}
	// Never less than before: transfers may be in flight on it.
	credit := max(l.credit, min(l.window, uint32(max(room, 0))))
	if credit == l.credit {
		return slack
	}
	slack -= int(credit - l.credit)
	l.credit = credit
	l.sendCredit()
	return slack
}

// sendCredit sends the link's flow state.
func (l *receiverLink) sendCredit() {
	l.s.sendFlow(func(f *amqp10.Flow) {
		f.Handle, f.HasHandle = l.handle, true
		f.DeliveryCount, f.HasDeliveryCount = l.deliveryCount, true
		f.LinkCredit, f.HasLinkCredit = l.credit, true
	})
}

func (l *receiverLink) handleFlow(f *amqp10.Flow) error {
	if f.Echo {
		l.s.sendFlow(func(f *amqp10.Flow) {
			f.Handle, f.HasHandle = l.handle, true
			f.DeliveryCount, f.HasDeliveryCount = l.deliveryCount, true
			f.LinkCredit, f.HasLinkCredit = l.credit, true
		})
	}
	return nil
}

func (l *receiverLink) release(router.CancelReason) {
	l.dropPartial()
	l.inProgress = false
}

// dropPartial forgets the incomplete delivery's bytes.
func (l *receiverLink) dropPartial() {
	l.s.c.unfinished -= int64(len(l.partial))
	l.partial = nil
}

func (l *receiverLink) fail(cond amqp10.ErrCond, format string, args ...any) {
	l.s.detachWithError(l.handle, amqp10.Errorf(cond, format, args...))
}

// transfer handles one transfer frame (section 2.7.5), assembling
// multi-frame deliveries.
func (l *receiverLink) transfer(t *amqp10.Transfer, payload []byte) error {
	opts := &l.s.c.srv.opts
	maxSize := opts.MaxMessageSize
	if !l.inProgress {
		if !t.HasDeliveryID {
			l.fail(amqp10.ErrCondInvalidField, "first transfer of a delivery without delivery-id")
			return nil
		}
		if err := l.s.checkDeliveryID(t.DeliveryID); err != nil {
			return err
		}
		if l.credit == 0 {
			l.fail(amqp10.ErrCondTransferLimitExceeded, "transfer without link credit")
			return nil
		}
		if l.second && len(l.s.unsettledIn) >= opts.MaxUnsettledIncoming {
			// Credit stops at the bound (grant); a peer past it ignored that.
			l.fail(amqp10.ErrCondResourceLimitExceeded,
				"unsettled publishes limit (%d per session) reached: settle the outcomes received", opts.MaxUnsettledIncoming)
			return nil
		}
		l.credit--
		l.deliveryCount++
		l.inProgress, l.id, l.settled = true, t.DeliveryID, t.Settled
	} else if t.HasDeliveryID && t.DeliveryID != l.id {
		l.fail(amqp10.ErrCondInvalidField, "continuation transfer with delivery-id %d, expected %d", t.DeliveryID, l.id)
		return nil
	}
	if t.HasSettled && t.Settled {
		l.settled = true
	}
	// 2.7.5: with snd-settle-mode unsettled the settled flag is false on
	// every frame of a delivery; with settled, true on at least one. (An
	// aborted delivery is gone either way.)
	if !t.Aborted && (l.settled && l.sndMode == amqp10.SndUnsettled || !l.settled && !t.More && l.sndMode == amqp10.SndSettled) {
		l.fail(amqp10.ErrCondInvalidField, "snd-settle-mode is %s but the delivery's settled flag is %v",
			sndModeName(l.sndMode), l.settled)
		return nil
	}
	if t.Aborted {
		l.dropPartial()
		l.inProgress = false
		return nil
	}
	if uint64(len(l.partial))+uint64(len(payload)) > maxSize {
		l.fail(amqp10.ErrCondMessageSizeExceeded, "message size %d exceeds max-message-size %d",
			len(l.partial)+len(payload), maxSize)
		return nil
	}
	if t.More {
		c := l.s.c
		if c.unfinished+int64(len(payload)) > opts.MaxUnfinishedBytes {
			// Each link's message is bounded by max-message-size, but a
			// connection has many links: their incomplete messages together
			// are bounded here.
			l.fail(amqp10.ErrCondResourceLimitExceeded,
				"incomplete multi-frame messages on this connection exceed %d bytes", opts.MaxUnfinishedBytes)
			return nil
		}
		l.partial = append(l.partial, payload...)
		c.unfinished += int64(len(payload))
		return nil
	}
	body := payload
	if l.partial != nil {
		body = append(l.partial, payload...)
		l.dropPartial()
	}
	l.inProgress = false
	if l.mgmt {
		l.handleMgmtRequest(body)
	} else {
		l.publish(body)
	}
	l.maybeGrant()
	return nil
}

func sndModeName(m amqp10.SndSettleMode) string {
	switch m {
	case amqp10.SndUnsettled:
		return "unsettled"
	case amqp10.SndSettled:
		return "settled"
	}
	return "mixed"
}

// publish routes one complete message and settles it.
func (l *receiverLink) publish(body []byte) {
	// One allocation for the parsed wire message, the router's message and
	// its routing key.
	in := &inbound{}
	wm := &in.wire
	if err := wm.Parse(body); err != nil {
		l.fail(amqp10.ErrCondDecodeError, "%v", err)
		return
	}
	if uid, err := wm.UserID(); err != nil {
		l.fail(amqp10.ErrCondDecodeError, "properties: %v", err)
		return
	} else if uid != nil && string(uid) != l.s.c.user && !l.s.c.impersonator() {
		// RabbitMQ's check_user_id: a claimed identity must be the
		// authenticated one (unless the user has the impersonator tag);
		// the link is detached with unauthorized-access.
		l.fail(amqp10.ErrCondUnauthorizedAccess, "user_id property set to '%s' but authenticated user was '%s'",
			uid, l.s.c.user)
		return
	}
	vh := l.s.c.vhost
	exch, key := l.exchange, l.key
	if l.anonymous {
		props, err := wm.Properties()
		if err != nil {
			l.fail(amqp10.ErrCondDecodeError, "properties: %v", err)
			return
		}
		if props == nil || props.To == nil {
			l.settle(rejected(amqp10.ErrCondPreconditionFailed, "anonymous terminus requires 'to' address to be set"))
			return
		}
		// RabbitMQ 4 reads 'to' only in the v2 forms, /queues/{q} being
		// the default exchange with the queue's name as routing key: a
		// missing queue is then unroutable (released), while a missing
		// exchange is refused (rejected, not-found).
		ad, ok := anonymousTo(*props.To)
		if !ok {
			l.settle(rejected(amqp10.ErrCondPreconditionFailed, "bad 'to' address string: %s", *props.To))
			return
		}
		switch ad.kind {
		case addrQueue:
			exch, key = "", ad.queue
		case addrExchange:
			if !vh.HasExchange(ad.exchange) {
				l.settle(rejected(amqp10.ErrCondNotFound, "no exchange '%s' in vhost '%s'", ad.exchange, vh.Name()))
				return
			}
			exch, key = ad.exchange, ad.key
		}
	}
	if l.anonymous {
		if err := l.s.authorize(auth.ResourceExchange, exch, auth.Write); err != nil {
			l.settle(amqp10.DeliveryState{Kind: amqp10.StateRejected, Error: routerError(err)})
			return
		}
	}
	cc, err := xcc(wm)
	if err != nil {
		if l.anonymous {
			l.settle(rejected(amqp10.ErrCondInvalidField, "%v", err))
			return
		}
		l.settle(amqp10.DeliveryState{Kind: amqp10.StateReleased})
		l.fail(amqp10.ErrCondInvalidField, "%v", err)
		return
	}
	m := &in.msg
	*m = *router.NewAMQP10Message(wm)
	m.Exchange = exch
	if len(cc) == 0 {
		in.key[0] = key
		m.RoutingKeys = in.key[:1:1]
	} else {
		m.RoutingKeys = append(make([]string, 0, 1+len(cc)), key)
		m.RoutingKeys = append(m.RoutingKeys, cc...)
	}
	opts := &l.s.c.srv.opts
	var span trace.Span
	if opts.Tracer != nil {
		span = opts.Tracer.StartPublish(vh.Name(), exch, key, m.Container)
		// The message carries the publish span's context as its hop context
		// (broker annotations override the publisher's on delivery).
		m.Anns = telemetry.Inject(m.Anns, span.SpanContext())
	}
	// The router calls confirm only for a durable message it stores (then
	// pending is true); otherwise the outcome is final at once and pc
	// stays on the stack.
	confirm := noConfirm // pre-settled or not durable: nobody waits for a sync
	pc := pendingConfirm{l: l, id: l.id, span: span}
	var heapPC *pendingConfirm
	if !l.settled && m.Header.Durable {
		heapPC = &pendingConfirm{l: l, id: l.id, span: span}
		mbox := &l.s.c.mbox
		confirm = func(o router.Outcome) { mbox.push(mailItem{confirm: heapPC, outcome: o}) }
	}
	c := l.s.c
	res, err := vh.Publish(router.Publish{Exchange: exch, Msg: m, Confirm: confirm, Queues: c.routeBuf})
	c.routeBuf = res.Queues
	if err != nil && !l.anonymous && errors.Is(err, router.ErrNotFound) {
		// The link's exchange was deleted since the attach: RabbitMQ 4
		// releases the message and detaches the link with not-found.
		pc.queues = res.Queues
		l.confirmed(&pc, router.Outcome{Kind: router.Released})
		l.fail(amqp10.ErrCondNotFound, "no exchange '%s' in vhost '%s'", exch, vh.Name())
		return
	}
	if err != nil {
		// The router refused the publish itself (no such exchange, an
		// internal one): the error maps onto an AMQP condition here.
		pc.queues = res.Queues
		l.confirmed(&pc, router.Outcome{Kind: router.Rejected, Error: fromAMQPError(routerError(err))})
		return
	}
	if res.Pending && heapPC != nil {
		// A durable message: accepted only once the store has synced it. The
		// confirmation reaches this goroutine through the mailbox, after this.
		heapPC.queues = slices.Clone(res.Queues)
		heapPC.volatile = res.Volatile
		l.unconfirmed++
		return
	}
	pc.queues, pc.volatile = res.Queues, res.Volatile
	l.confirmed(&pc, res.Outcome)
}

func noConfirm(router.Outcome) {}

// impersonator reports whether the connection's user has RabbitMQ's
// impersonator tag (may publish with another user-id); looked up only when
// a message claims another identity. A token user's tags are its token's
// tag scopes, never those of a stored user who happens to share its name.
func (c *conn) impersonator() bool {
	if c.token != nil {
		return c.token.HasTag("impersonator")
	}
	u, ok := c.srv.opts.Auth.User(c.user)
	return ok && slices.Contains(u.Tags, "impersonator")
}

// inbound is a published message's per-message state, allocated at once.
type inbound struct {
	msg  router.Message
	wire amqp10.Message
	key  [1]string
}

// pendingConfirm is a publish waiting for the store's sync.
type pendingConfirm struct {
	l      *receiverLink
	id     uint32
	span   trace.Span
	queues []*router.Queue
	// volatile counts the direct reply-to queues routed to (not in queues).
	volatile int
}

// confirmed settles a publish with the router's final outcome and records it.
func (l *receiverLink) confirmed(pc *pendingConfirm, o router.Outcome) {
	if ctr := l.s.c.srv.opts.Counters; ctr != nil {
		l.count(ctr, pc.queues, pc.volatile, o.Kind)
	}
	if pc.span != nil {
		telemetry.EndPublish(pc.span, pc.queues, o)
	}
	l.settleID(pc.id, l.s.c.deliveryState(o))
}

// storeConfirmed handles a store confirmation posted to the mailbox.
func (l *receiverLink) storeConfirmed(pc *pendingConfirm, o router.Outcome) {
	l.unconfirmed--
	if l.s.links[l.handle] != endpoint(l) {
		return // detached meanwhile: nobody to settle with
	}
	l.confirmed(pc, o)
	l.maybeGrant()
}

// deliveryState is the AMQP delivery state of a router outcome. A
// rejection's error is converted into c.dispErr, which lives until the
// disposition is encoded (settleID encodes it at once), so that
// converting allocates nothing.
func (c *conn) deliveryState(o router.Outcome) amqp10.DeliveryState {
	switch o.Kind {
	case router.Accepted:
		return amqp10.DeliveryState{Kind: amqp10.StateAccepted}
	case router.Released:
		return amqp10.DeliveryState{Kind: amqp10.StateReleased}
	}
	st := amqp10.DeliveryState{Kind: amqp10.StateRejected}
	if e := o.Error; e != nil {
		c.dispErr = amqp10.Error{Condition: amqp10.ErrCond(e.Condition), Description: e.Description, Info: e.Info}
		st.Error = &c.dispErr
	}
	return st
}

// maybeGrant refills the publisher's credit when half of it is used and
// not too many publishes wait for the store (credit follows confirms).
func (l *receiverLink) maybeGrant() {
	if l.credit <= l.window/2 && l.unconfirmed < l.window/2 && l.s.links[l.handle] == endpoint(l) {
		l.grant()
	}
}

// count counts one publish as RabbitMQ's global counters do.
func (l *receiverLink) count(ctr *Counters, queues []*router.Queue, volatile int, kind router.OutcomeKind) {
	ctr.received.Add(1)
	if !l.settled {
		ctr.receivedConfirm.Add(1)
		if kind == router.Accepted {
			ctr.confirmed.Add(1)
		}
	}
	switch {
	case len(queues) > 0 || volatile > 0:
		ctr.routed.Add(uint64(len(queues) + volatile))
		for _, q := range queues {
			ctr.queue(q).Routed.Add(1)
		}
	case kind != router.Released:
	case l.settled:
		ctr.unroutableDropped.Add(1)
	default:
		ctr.unroutableRetd.Add(1)
	}
}

func rejected(cond amqp10.ErrCond, format string, args ...any) amqp10.DeliveryState {
	return amqp10.DeliveryState{Kind: amqp10.StateRejected, Error: amqp10.Errorf(cond, format, args...)}
}

// settle sends the outcome for the current delivery unless it was pre-settled.
func (l *receiverLink) settle(st amqp10.DeliveryState) { l.settleID(l.id, st) }

// settleID sends the outcome of delivery id unless it was pre-settled.
func (l *receiverLink) settleID(id uint32, st amqp10.DeliveryState) {
	if l.settled && id == l.id {
		return
	}
	if st.Kind == amqp10.StateAccepted && st.Error == nil && len(st.Annotations) == 0 {
		l.s.c.accepted(l.s.local, id, !l.second)
	} else {
		d := &l.s.c.disp
		*d = amqp10.Disposition{Role: amqp10.RoleReceiver, First: id, Settled: !l.second, State: st}
		l.s.c.write(l.s.local, d, nil)
	}
	if l.second {
		l.s.unsettledIn[id] = l
	}
}

// xcc returns the routing keys of the x-cc message annotation, which must be
// a list of strings (RabbitMQ 4.1+).
func xcc(wm *amqp10.Message) ([]string, error) {
	if wm.Annotations() == nil {
		return nil, nil
	}
	anns, err := wm.AnnotationMap()
	if err != nil {
		return nil, err
	}
	v, ok := anns.Get(amqp10.Symbol("x-cc"))
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.(amqp10.List)
	if !ok {
		return nil, fmt.Errorf("bad value for 'x-cc' message-annotation: %T, want a list of strings", v)
	}
	keys := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("bad value for 'x-cc' message-annotation: element %T, want string", e)
		}
		keys = append(keys, s)
	}
	return keys, nil
}

// anonymousTo parses an anonymous-terminus message's 'to' address. Only
// RabbitMQ's v2 forms are valid there (/queues/{q}, /exchanges/{x} and
// /exchanges/{x}/{key}), and never the default exchange by name.
func anonymousTo(to string) (address, bool) {
	ad, err := parseAddress(to)
	switch {
	case err != nil:
		return address{}, false
	case strings.HasPrefix(to, "/queues/"):
		return ad, true
	case strings.HasPrefix(to, "/exchanges/"):
		// The default exchange by name ("" or amq.default) is refused.
		return ad, ad.exchange != ""
	}
	return address{}, false
}
