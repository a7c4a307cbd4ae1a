package link

import (
	"cmp"
	"context"
	"slices"

	"github.com/epitaph-mq/epitaph/value"
)

// SessionInfo is a point-in-time view of one session, as RabbitMQ 4.3
// shows an AMQP 1.0 session (rabbit_amqp_session's infos).
type SessionInfo struct {
	// Channel is the client's channel number of the session.
	Channel                              uint16
	HandleMax                            uint32
	NextIncomingID, IncomingWindow       uint32
	NextOutgoingID, RemoteIncomingWindow uint32
	OutgoingUnsettled                    int
	IncomingLinks, OutgoingLinks         []LinkInfo
}

// LinkInfo is one link of a session. Incoming links are the client's
// publishers (and the /management request link), outgoing links its
// consumers (and the /management response link).
type LinkInfo struct {
	Handle        uint32
	Name          string
	DeliveryCount uint32
	Credit        uint32
	// Management: a half of the /management link pair.
	Management bool
	// Incoming links: whether the client sends settled (SndSettleMode),
	// and publishes awaiting the store's sync.
	SndSettleMode string // "settled", "unsettled" or "mixed"
	Unconfirmed   uint32
	// Outgoing links: the queue consumed (empty for management), and
	// whether deliveries go out settled.
	Queue       string
	SendSettled bool
	// Filters are an outgoing link's filters in force: its attach's
	// filter-set entries the broker applies (nil when none).
	Filters value.Map
}

// Sessions returns the sessions of the open connection named name, asked
// of the connection's loop (which owns them); false when there is no such
// connection, it ended meanwhile, or ctx ended first.
func (s *Server) Sessions(ctx context.Context, name string) ([]SessionInfo, bool) {
	c := s.byName(name)
	if c == nil {
		return nil, false
	}
	if c.is091.Load() {
		return nil, true // AMQP 0-9-1 channels are not AMQP 1.0 sessions
	}
	reply := make(chan []SessionInfo, 1) // the loop never waits for the asker
	select {
	case c.infoReq <- reply:
	case <-c.done:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
	select {
	case infos := <-reply:
		return infos, true
	case <-ctx.Done():
		return nil, false
	}
}

// byName is the open connection named name (the first accepted of any
// that share it), or nil.
func (s *Server) byName(name string) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var target *conn
	for c := range s.conns {
		if id := c.stats.identity.Load(); id != nil && id.name == name && (target == nil || c.id < target.id) {
			target = c
		}
	}
	return target
}

// sessionInfos describes the connection's sessions; only the loop calls
// it.
func (c *conn) sessionInfos() []SessionInfo {
	if ownerChecks != nil {
		ownerChecks.inLoop(c, "session infos")
	}
	out := make([]SessionInfo, 0, len(c.sessions))
	for _, s := range c.sessions {
		si := SessionInfo{Channel: s.remote, HandleMax: c.srv.opts.HandleMax,
			NextIncomingID: s.nextIncomingID, IncomingWindow: s.inWindow,
			NextOutgoingID: s.nextOutgoingID, RemoteIncomingWindow: s.remoteIncomingWindow,
			OutgoingUnsettled: s.unsettledOut.Len(),
			IncomingLinks:     []LinkInfo{}, OutgoingLinks: []LinkInfo{}}
		for _, e := range s.links {
			switch l := e.(type) {
			case *receiverLink:
				si.IncomingLinks = append(si.IncomingLinks, LinkInfo{Handle: l.handle, Name: l.name,
					DeliveryCount: l.deliveryCount, Credit: l.credit, Management: l.mgmt,
					SndSettleMode: sndModeName(l.sndMode), Unconfirmed: l.unconfirmed})
			case *senderLink:
				li := LinkInfo{Handle: l.handle, Name: l.name, DeliveryCount: l.deliveryCount,
					Credit: creditLeft(l.limit, l.deliveryCount), SendSettled: l.preSettled, Filters: l.filters}
				li.Queue = l.queueName()
				si.OutgoingLinks = append(si.OutgoingLinks, li)
			case *browseLink:
				si.OutgoingLinks = append(si.OutgoingLinks, LinkInfo{Handle: l.handle, Name: l.name, DeliveryCount: l.deliveryCount,
					Credit: creditLeft(l.limit, l.deliveryCount), SendSettled: true, Queue: l.q.Name()})
			case *eventsLink:
				si.OutgoingLinks = append(si.OutgoingLinks, LinkInfo{Handle: l.handle, Name: l.name, DeliveryCount: l.deliveryCount,
					Credit: creditLeft(l.limit, l.deliveryCount), SendSettled: true})
			case *mgmtLink:
				li := LinkInfo{Handle: l.handle, Name: l.name, DeliveryCount: l.deliveryCount,
					Credit: creditLeft(l.limit, l.deliveryCount), Management: true, SendSettled: true}
				si.OutgoingLinks = append(si.OutgoingLinks, li)
			}
		}
		byHandle := func(a, b LinkInfo) int { return cmp.Compare(a.Handle, b.Handle) }
		slices.SortFunc(si.IncomingLinks, byHandle)
		slices.SortFunc(si.OutgoingLinks, byHandle)
		out = append(out, si)
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return cmp.Compare(a.Channel, b.Channel) })
	return out
}

// creditLeft is the credit of a sending link: the receiver's limit
// (delivery-count + link-credit) less what was sent, in serial-number
// arithmetic, 0 once passed.
func creditLeft(limit, sent uint32) uint32 {
	if d := int32(limit - sent); d > 0 {
		return uint32(d)
	}
	return 0
}
