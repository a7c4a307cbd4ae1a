package link

import (
	"errors"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/seqwin"
)

const (
	// sessionWindow is the incoming window (in transfer frames) we grant; it
	// is refreshed when half of it is used.
	sessionWindow = 2048
	// maxOutgoingWindow is the outgoing-window we advertise.
	maxOutgoingWindow = 1<<31 - 1
)

// endpoint is a link attached on a session: a *receiverLink or *senderLink.
type endpoint interface {
	handleFlow(f *amqp10.Flow) error
	release(reason router.CancelReason)
}

// outDelivery is an unsettled delivery the broker sent.
type outDelivery struct {
	l   *senderLink
	tag uint64
	// span is the delivery span's context, for the settle span (tracing on).
	span *trace.SpanContext
}

// pendingItem is outgoing work held back by the peer's incoming window, or
// behind such work; or by the connection's output bound (outHighWater).
type pendingItem struct {
	l        *senderLink
	d        router.Delivery
	drained  bool
	count    uint32
	activity uint8 // activeState or waitingState: report it (senderLink.reportActivity)
}

// session is one AMQP session. Owned by the connection loop.
type session struct {
	c             *conn
	remote, local uint16

	// Incoming (peer -> broker) flow control, section 2.5.6.
	nextIncomingID uint32
	inWindow       uint32 // the incoming window we advertise: always inLimit - nextIncomingID
	// inLimit is one past the highest transfer-id any of our flows has
	// allowed (next-incoming-id + incoming-window). Only a transfer at
	// inLimit is a window violation; during a resource alarm it stays
	// where it is, so the window runs down to 0 and is not renewed.
	inLimit uint32

	// Outgoing (broker -> peer).
	nextOutgoingID       uint32
	remoteIncomingWindow uint32
	peerWindowMax        uint32 // the largest incoming-window the peer advertised
	nextDeliveryID       uint32 // delivery-ids are contiguous per session (rhea requires it)

	// The delivery-id the peer's next delivery must carry (the sender
	// allocates a transfer's delivery-id, 2.7.5, in sequence per session);
	// set by its first delivery.
	nextInDeliveryID uint32
	hasInDeliveryID  bool

	links     map[uint32]endpoint
	detaching map[uint32]bool // links we detached with an error, awaiting the peer's detach

	unsettledOut seqwin.Window[uint32, outDelivery] // by delivery-id
	unsettledIn  map[uint32]*receiverLink           // rcv-settle-mode second: awaiting the peer's settlement
	pending      []pendingItem
	ending       bool     // we sent end with an error and await the peer's end
	mgmtWaiting  [][]byte // management responses waiting for the response link to attach
	mgmtHeld     int      // bytes of management responses not yet sent (waiting or pending)
}

func newSession(c *conn, remote, local uint16, b *amqp10.Begin) *session {
	return &session{
		c:                    c,
		remote:               remote,
		local:                local,
		nextIncomingID:       b.NextOutgoingID,
		inWindow:             sessionWindow,
		inLimit:              b.NextOutgoingID + sessionWindow,
		remoteIncomingWindow: b.IncomingWindow,
		peerWindowMax:        b.IncomingWindow,
		links:                make(map[uint32]endpoint),
		detaching:            make(map[uint32]bool),
		unsettledIn:          make(map[uint32]*receiverLink),
	}
}

func sessErr(cond amqp10.ErrCond, format string, args ...any) error {
	return &amqp10.ProtocolError{Scope: amqp10.ScopeSession, Err: amqp10.Errorf(cond, format, args...)}
}

// handle processes a frame for this session. Session-scoped errors end the
// session here; connection-scoped errors are returned.
func (s *session) handle(p amqp10.Performative, payload []byte) error {
	if s.ending {
		if _, ok := p.(*amqp10.End); ok {
			s.c.removeSession(s)
		}
		return nil // frames crossing our end are ignored
	}
	var err error
	switch p := p.(type) {
	case *amqp10.Attach:
		err = s.attach(p)
	case *amqp10.Flow:
		err = s.flow(p)
	case *amqp10.Transfer:
		err = s.transfer(p, payload)
	case *amqp10.Disposition:
		err = s.disposition(p)
	case *amqp10.Detach:
		err = s.detach(p)
	case *amqp10.End:
		s.end(p)
		return nil
	default:
		return connErr(amqp10.ErrCondIllegalState, "unexpected %T", p)
	}
	if err == nil {
		return nil
	}
	var pe *amqp10.ProtocolError
	if errors.As(err, &pe) && pe.Scope == amqp10.ScopeSession {
		s.c.log.Info("ending session with error", "channel", s.remote, "condition", string(pe.Err.Condition),
			"description", pe.Err.Description)
		s.releaseLinks(router.CancelConnectionLost)
		s.c.write(s.local, &amqp10.End{Error: pe.Err}, nil)
		// The peer answers with end; until then frames on this channel are
		// answered by nothing (we keep the channel reserved).
		s.links = nil
		s.ending = true
		return nil
	}
	return err
}

// end answers the peer's end (or completes ours).
func (s *session) end(e *amqp10.End) {
	if !s.ending {
		if e.Error != nil {
			s.c.log.Info("peer ended session with error", "condition", string(e.Error.Condition),
				"description", e.Error.Description)
		}
		// The session's consumers are gone with it: their unsettled
		// messages count a failed delivery, as RabbitMQ 4.3 counts them.
		s.releaseLinks(router.CancelConnectionLost)
		s.c.write(s.local, &amqp10.End{}, nil)
	}
	s.c.removeSession(s)
}

// releaseLinks detaches every link locally (no frames).
func (s *session) releaseLinks(reason router.CancelReason) {
	for h, l := range s.links {
		l.release(reason)
		delete(s.links, h)
		s.c.links--
		if ctr := s.c.srv.opts.Counters; ctr != nil {
			ctr.linkAdded(l, -1)
		}
	}
	s.unsettledOut.Clear()
	clear(s.unsettledIn)
	s.pending = nil
}

// setBlocked stops extending (resource alarm) or reopens the session's
// incoming window, so publishers stop while consumers keep draining.
// Blocking advertises what is left of the window already granted, not 0:
// the peer may have that many transfers in flight, and a window of 0
// below its next-outgoing-id makes remote-incoming-window negative, which
// go-amqp computes in uint32 and wraps to about 4 billion, so it would never
// stop. The window then shrinks with each transfer that arrives and is
// not renewed: the publisher stops within one window of the alarm.
func (s *session) setBlocked(blocked bool) {
	if s.ending {
		return
	}
	if !blocked {
		s.grantWindow()
	}
	s.sendFlow(nil)
}

// grantWindow opens the incoming window to sessionWindow transfers from
// next-incoming-id.
func (s *session) grantWindow() {
	s.inWindow = sessionWindow
	if limit := s.nextIncomingID + sessionWindow; int32(limit-s.inLimit) > 0 {
		s.inLimit = limit
	}
}

// flow handles session and link flow (section 2.7.4).
func (s *session) flow(f *amqp10.Flow) error {
	// 2.5.6: remote-incoming-window = next-incoming-id(flow) + incoming-window(flow) - next-outgoing-id(endpoint)
	nextIn := f.NextIncomingID
	if !f.HasNextIncomingID {
		nextIn = 0 // our initial next-outgoing-id
	} else if int32(nextIn-s.nextOutgoingID) > 0 {
		// The peer cannot expect a transfer we have not sent.
		return sessErr(amqp10.ErrCondWindowViolation,
			"flow next-incoming-id %d is ahead of next-outgoing-id %d", nextIn, s.nextOutgoingID)
	}
	s.remoteIncomingWindow = nextIn + f.IncomingWindow - s.nextOutgoingID
	s.peerWindowMax = max(s.peerWindowMax, f.IncomingWindow)
	if f.HasHandle {
		l, err := s.link(f.Handle, "flow")
		if l == nil {
			return err
		}
		if err := l.handleFlow(f); err != nil {
			return err
		}
	} else if f.Echo {
		s.sendFlow(nil)
	}
	s.flushPending()
	return nil
}

// link finds the endpoint for a handle; a nil endpoint and nil error mean
// the frame is for a link we are detaching and is ignored.
func (s *session) link(h uint32, what string) (endpoint, error) {
	if l := s.links[h]; l != nil {
		return l, nil
	}
	if s.detaching[h] {
		return nil, nil
	}
	return nil, sessErr(amqp10.ErrCondUnattachedHandle, "%s on unattached handle %d", what, h)
}

// sendFlow sends a session flow, with link state when l is set.
// sendLinkFlow sends the flow of a link the broker sends on (an echo, a
// drain's answer, or a drained link): its delivery-count and the credit
// left to limit.
func (s *session) sendLinkFlow(handle, deliveryCount, limit uint32, drain bool) {
	s.sendFlow(func(f *amqp10.Flow) {
		f.Handle, f.HasHandle = handle, true
		f.DeliveryCount, f.HasDeliveryCount = deliveryCount, true
		f.LinkCredit, f.HasLinkCredit = creditLeft(limit, deliveryCount), true
		f.Drain = drain
	})
}

func (s *session) sendFlow(fill func(f *amqp10.Flow)) {
	f := &s.c.fl
	*f = amqp10.Flow{
		NextIncomingID:    s.nextIncomingID,
		HasNextIncomingID: true,
		IncomingWindow:    s.inWindow,
		NextOutgoingID:    s.nextOutgoingID,
		OutgoingWindow:    maxOutgoingWindow,
	}
	if fill != nil {
		fill(f)
	}
	s.c.write(s.local, f, nil)
}

// transfer accounts the incoming window and passes the frame to its link.
func (s *session) transfer(t *amqp10.Transfer, payload []byte) error {
	// 2.5.6: the peer may send while its remote-incoming-window, computed
	// from our flows, is above 0. During a resource alarm the window is not
	// renewed: it shrinks to 0 with the transfers an earlier flow allowed.
	// It is never advertised as 0 while some are in flight, since a peer
	// that computes its remaining window as next-incoming-id +
	// incoming-window - next-outgoing-id in unsigned arithmetic (go-amqp)
	// would wrap it and never stop.
	if s.nextIncomingID == s.inLimit {
		return sessErr(amqp10.ErrCondWindowViolation,
			"transfer %d beyond the session's incoming window (next-incoming-id %d, incoming-window %d)",
			s.nextIncomingID, s.nextIncomingID, s.inWindow)
	}
	s.nextIncomingID++
	s.inWindow-- // inWindow is inLimit - nextIncomingID, so above 0 here
	if !s.c.blocked && s.inWindow <= sessionWindow/2 {
		s.grantWindow()
		s.sendFlow(nil)
	}
	l, err := s.link(t.Handle, "transfer")
	if l == nil {
		if err == nil && t.HasDeliveryID {
			// A link we are detaching: its deliveries still use up ids.
			s.sawDeliveryID(t.DeliveryID)
		}
		return err
	}
	rl, ok := l.(*receiverLink)
	if !ok {
		return sessErr(amqp10.ErrCondErrantLink, "transfer on handle %d, on which the broker is the sender", t.Handle)
	}
	return rl.transfer(t, payload)
}

// secondSlack is how many more publishes on the session's rcv-settle-mode
// second links may await the peer's settlement within MaxUnsettledIncoming:
// the bound, less those unsettled, less what such links may still add
// (their credit, deliveries being assembled and publishes awaiting the
// store). Credit is granted only within it, so the bound holds for a peer
// that respects credit.
func (s *session) secondSlack() int {
	slack := s.c.srv.opts.MaxUnsettledIncoming - len(s.unsettledIn)
	for _, e := range s.links {
		if m, ok := e.(*receiverLink); ok && m.second {
			slack -= int(m.credit) + int(m.unconfirmed)
			if m.inProgress {
				slack--
			}
		}
	}
	return slack
}

// grantSecond tops up the credit of rcv-settle-mode second links after the
// peer settled some of their publishes.
func (s *session) grantSecond() {
	slack, known := 0, false
	for _, e := range s.links {
		if l, ok := e.(*receiverLink); ok && l.second && l.credit <= l.window/2 && l.unconfirmed < l.window/2 {
			if !known {
				slack, known = s.secondSlack(), true // once: links share it
			}
			slack = l.grantWithin(slack)
		}
	}
}

// checkDeliveryID checks the delivery-id of a new incoming delivery.
func (s *session) checkDeliveryID(id uint32) error {
	if s.hasInDeliveryID && id != s.nextInDeliveryID {
		return sessErr(amqp10.ErrCondInvalidField,
			"delivery-id %d, expected %d: delivery-ids of a session are contiguous", id, s.nextInDeliveryID)
	}
	s.sawDeliveryID(id)
	return nil
}

// sawDeliveryID records id as used.
func (s *session) sawDeliveryID(id uint32) {
	if !s.hasInDeliveryID || int32(id-s.nextInDeliveryID) >= 0 {
		s.nextInDeliveryID, s.hasInDeliveryID = id+1, true
	}
}

// disposition settles deliveries (section 2.7.6).
func (s *session) disposition(d *amqp10.Disposition) error {
	last := d.First
	if d.HasLast {
		last = d.Last
	}
	if d.Role == amqp10.RoleSender {
		// The peer settles deliveries it sent us (rcv-settle-mode second).
		if d.Settled {
			n := len(s.unsettledIn)
			for id := range s.unsettledIn {
				if inRange(id, d.First, last) {
					delete(s.unsettledIn, id)
				}
			}
			if len(s.unsettledIn) < n {
				s.grantSecond()
			}
		}
		return nil
	}
	o, err := settlementOf(d.State, d.Settled)
	if err != nil {
		return err
	}
	// Settle in ascending delivery-id order (RabbitMQ dead-letters a batch of rejections in that order).
	c := s.c
	ids := c.settleIDs[:0]
	if span := last - d.First; int64(span) < int64(s.unsettledOut.Len()) {
		for id := d.First; ; id++ {
			if _, ok := s.unsettledOut.Get(id); ok {
				ids = append(ids, id)
			}
			if id == last {
				break
			}
		}
	} else {
		// All yields the ids in the window's overflow map unordered.
		for id := range s.unsettledOut.All() {
			if inRange(id, d.First, last) {
				ids = append(ids, id)
			}
		}
		slices.SortFunc(ids, func(a, b uint32) int { return int(int32(a - b)) })
	}
	// Settle each run of consecutive deliveries of one link as one batch.
	c.settleIDs = ids
	for rest := ids; len(rest) > 0; {
		first, _ := s.unsettledOut.Get(rest[0])
		l := first.l
		tags, errs := c.settleTags[:0], c.settleErrs[:0]
		for _, id := range rest {
			od, _ := s.unsettledOut.Get(id)
			if od.l != l {
				break
			}
			tags = append(tags, od.tag)
			errs = append(errs, nil)
		}
		run := rest[:len(tags)]
		rest = rest[len(tags):]
		l.sub.SettleBatch(tags, o, errs)
		c.settleTags, c.settleErrs = tags, errs
		var invalid error
		for i, id := range run {
			od, _ := s.unsettledOut.Delete(id)
			err := errs[i]
			errs[i] = nil
			if l.qc != nil && err == nil {
				l.qc.settled(&o)
			}
			if od.span != nil {
				c.srv.opts.Tracer.Settle(*od.span, l.sub.Queue(), od.tag, o, err)
			}
			if err != nil {
				if errors.Is(err, router.ErrInvalidArgument) {
					invalid = err
					continue
				}
				c.log.Warn("settle failed", "err", err)
			}
			if !d.Settled {
				// rcv-settle-mode second: we settle after applying the outcome.
				dp := &c.disp
				*dp = amqp10.Disposition{Role: amqp10.RoleSender, First: id, Settled: true, State: d.State}
				c.write(s.local, dp, nil)
			}
		}
		if invalid != nil {
			return sessErr(amqp10.ErrCondInvalidField, "%v", invalid)
		}
	}
	return nil
}

// inRange reports first <= id <= last in serial-number arithmetic.
func inRange(id, first, last uint32) bool {
	return id-first <= last-first
}

// settlementOf maps a consumer's delivery state to the router's settlement.
func settlementOf(st amqp10.DeliveryState, settled bool) (router.Settlement, error) {
	switch st.Kind {
	case amqp10.StateAccepted:
		return router.Settlement{Kind: router.SettleAccept}, nil
	case amqp10.StateRejected:
		return router.Settlement{Kind: router.SettleReject, Error: fromAMQPError(st.Error)}, nil
	case amqp10.StateReleased:
		return router.Settlement{Kind: router.SettleRelease}, nil
	case amqp10.StateModified:
		return router.Settlement{Kind: router.SettleModify, DeliveryFailed: st.DeliveryFailed,
			UndeliverableHere: st.UndeliverableHere, Annotations: st.Annotations}, nil
	case amqp10.StateNone:
		if settled {
			// Settled without an outcome: the receiver is done with it.
			return router.Settlement{Kind: router.SettleAccept}, nil
		}
		return router.Settlement{}, sessErr(amqp10.ErrCondInvalidField, "disposition without a state or settlement")
	}
	return router.Settlement{}, sessErr(amqp10.ErrCondInvalidField, "Unrecognised state")
}

// fromAMQPError is a consumer's rejected error as the router records it.
func fromAMQPError(e *amqp10.Error) *router.Error {
	if e == nil {
		return nil
	}
	return &router.Error{Condition: string(e.Condition), Description: e.Description, Info: e.Info}
}

// detach answers the peer's detach.
func (s *session) detach(d *amqp10.Detach) error {
	if s.detaching[d.Handle] {
		delete(s.detaching, d.Handle) // the answer to our detach
		return nil
	}
	l := s.links[d.Handle]
	if l == nil {
		return sessErr(amqp10.ErrCondUnattachedHandle, "detach on unattached handle %d", d.Handle)
	}
	if d.Error != nil {
		s.c.log.Info("peer detached link with error", "handle", d.Handle, "condition", string(d.Error.Condition),
			"description", d.Error.Description)
	}
	s.removeLink(d.Handle, l, router.CancelDetach)
	s.c.write(s.local, &amqp10.Detach{Handle: d.Handle, Closed: d.Closed}, nil)
	return nil
}

// removeLink releases a link and forgets its unsettled deliveries.
func (s *session) removeLink(h uint32, l endpoint, reason router.CancelReason) {
	l.release(reason)
	delete(s.links, h)
	s.c.links--
	if ctr := s.c.srv.opts.Counters; ctr != nil {
		ctr.linkAdded(l, -1)
	}
	if sl, ok := l.(*senderLink); ok {
		s.unsettledOut.DeleteFunc(func(_ uint32, od outDelivery) bool { return od.l == sl })
		s.pending = slices.DeleteFunc(s.pending, func(p pendingItem) bool { return p.l == sl })
	} else {
		for id, rl := range s.unsettledIn {
			if rl == l {
				delete(s.unsettledIn, id)
			}
		}
	}
}

// detachWithError closes a link from our side (closed=true, error).
func (s *session) detachWithError(h uint32, e *amqp10.Error) {
	l := s.links[h]
	if l == nil {
		return
	}
	s.c.log.Info("detaching link with error", "handle", h, "condition", string(e.Condition), "description", e.Description)
	s.removeLink(h, l, router.CancelDetach)
	s.detaching[h] = true
	s.c.write(s.local, &amqp10.Detach{Handle: h, Closed: true, Error: e}, nil)
}

// sendItem sends a delivery or drain flow, or queues it behind the window.
func (s *session) sendItem(it pendingItem) {
	if s.ending {
		return
	}
	if len(s.pending) > 0 || !s.sendNow(&it) {
		s.pending = append(s.pending, it)
	}
}

func (s *session) flushPending() {
	for _, l := range s.links {
		switch l := l.(type) {
		case *mgmtLink:
			if len(l.pending) > 0 {
				l.flush()
			}
		case *eventsLink:
			l.flush()
		case *browseLink:
			l.flush()
		}
	}
	n := 0
	for n < len(s.pending) && !s.c.holdBack() && s.sendNow(&s.pending[n]) {
		s.pending[n] = pendingItem{}
		n++
	}
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending = nil
	}
}

// sendNow sends it if the peer's incoming window allows; false means wait.
func (s *session) sendNow(it *pendingItem) bool {
	if it.l.detached {
		return true // dropped
	}
	if it.drained {
		it.l.drained(it.count)
		return true
	}
	if it.activity != 0 {
		it.l.reportActivity(it.activity)
		return true
	}
	return it.l.send(&it.d)
}
