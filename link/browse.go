package link

import (
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// browseLink is a consumer attached with distribution-mode copy: it
// browses its queue. Each credit the receiver grants is spent on a copy of
// the next ready message after the last one it was sent (router
// BrowseAfter, in queue order, with the attach's filters): nothing is
// acquired, nothing counts as delivered, and the messages stay for the
// queue's consumers; after the ready messages come the delayed ones
// (quorum delayed retry), in the order they become ready. Copies are sent
// settled, since there is nothing for an outcome to do. A browse reads what is ready when the receiver grants
// credit (at attach and at every flow); it does not wait for messages that
// arrive later: a drain ends at once when the browser has reached the end,
// and a later flow continues from there. Owned by the connection loop.
type browseLink struct {
	s             *session
	handle        uint32
	name          string
	q             *router.Queue
	filter        router.MessageFilter
	cursor        uint64 // the highest seq of the main list already browsed
	delayCursor   router.DelayCursor
	ahead         []router.BrowsedMessage
	deliveryCount uint32
	limit         uint32 // receiver's delivery-count + link-credit
	tags          uint64
	detached      bool
}

// browseBatch is how many messages a browse reads from its queue at a
// time; browseScan how many it tests for its filter per read.
const (
	browseBatch = 64
	browseScan  = 4096
)

func (l *browseLink) handleFlow(f *amqp10.Flow) error {
	dc := f.DeliveryCount
	if !f.HasDeliveryCount {
		dc = 0
	}
	l.limit = dc + f.LinkCredit
	l.flush()
	if f.Drain && int32(l.limit-l.deliveryCount) > 0 && len(l.ahead) == 0 {
		l.deliveryCount = l.limit // the end of the queue: the credit is used up
	}
	if f.Echo || f.Drain {
		l.s.sendLinkFlow(l.handle, l.deliveryCount, l.limit, f.Drain)
	}
	return nil
}

func (l *browseLink) release(router.CancelReason) {
	l.detached = true
	l.ahead = nil
}

// flush sends copies while the link has credit, the session window allows
// and the connection's output has room; it reads the queue again when the
// copies read ahead are sent, and stops at the end of the queue.
func (l *browseLink) flush() {
	c := l.s.c
	for !l.detached && int32(l.limit-l.deliveryCount) > 0 && !c.holdBack() {
		if len(l.ahead) == 0 {
			for {
				msgs, last, done := l.q.BrowseAfter(l.cursor, browseBatch, browseScan, l.filter)
				l.cursor = last
				l.ahead = msgs
				if len(msgs) > 0 || done {
					break
				}
			}
			if len(l.ahead) == 0 {
				// After the ready messages, the delayed ones (quorum
				// delayed retry), in the order they become ready.
				l.ahead, l.delayCursor = l.q.BrowseDelayed(l.delayCursor, browseBatch, l.filter)
			}
			if len(l.ahead) == 0 {
				return
			}
		}
		bm := &l.ahead[0]
		d := bm.Delivery()
		l.tags++
		d.Tag = l.tags
		_, ok, err := l.s.sendDelivery(l.handle, d, nil, true, 0)
		if err != nil {
			c.log.Error("cannot encode a browsed message; skipping it", "queue", l.q.Name(), "err", err)
		} else if !ok {
			return
		} else {
			l.deliveryCount++
		}
		if bm.DeliveryTime == 0 { // a delayed one is not on the ready walk
			l.cursor = max(l.cursor, bm.Seq)
		}
		l.ahead = l.ahead[1:]
	}
}

// attachBrowser attaches a browsing consumer (distribution-mode copy) of
// q; read permission was checked as for any consumer. The reply's source
// keeps distribution-mode copy: the mode is in force.
func (s *session) attachBrowser(a *amqp10.Attach, q *router.Queue, src *amqp10.Source, inForce amqp10.Map, f router.MessageFilter) error {
	if a.HasSndSettleMode && a.SndSettleMode == amqp10.SndUnsettled {
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotImplemented,
			"a browse (distribution-mode copy) sends settled copies: attach with snd-settle-mode settled or mixed"))
	}
	l := &browseLink{s: s, handle: a.Handle, name: a.Name, q: q, filter: f}
	s.addLink(a.Handle, l)
	r := s.reply(a)
	r.Source = withFilters(src, inForce)
	r.InitialDeliveryCount, r.HasInitialDeliveryCount = 0, true
	r.MaxMessageSize = 0
	s.c.write(s.local, r, nil)
	return nil
}
