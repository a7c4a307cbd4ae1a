package epitaph

import (
	"context"

	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/management/httpapi"
)

// connectionRegistry shows the AMQP server's connections to the HTTP API
// (httpapi.Connections), which does not import link.
type connectionRegistry struct{ srv *link.Server }

func (r connectionRegistry) List() []httpapi.Connection {
	infos := r.srv.Connections()
	out := make([]httpapi.Connection, len(infos))
	for i, c := range infos {
		out[i] = httpapi.Connection{
			Name: c.Name, User: c.User, VHost: c.VHost, ContainerID: c.ContainerID, AuthMechanism: c.AuthMechanism,
			ClientProperties: c.ClientProperties, Peer: c.Peer, Local: c.Local, TLS: c.TLS,
			ChannelMax: c.ChannelMax, FrameMax: c.FrameMax, IdleTimeout: c.IdleTimeout, ConnectedAt: c.ConnectedAt,
			Sessions: c.Sessions, RecvOctets: c.RecvOctets, SendOctets: c.SendOctets,
			RecvCount: c.RecvCount, SendCount: c.SendCount, Protocol: c.Protocol,
		}
		for _, ch := range c.Channels {
			out[i].Channels = append(out[i].Channels, httpapi.Channel{Number: ch.Number, Consumers: ch.Consumers,
				Unacknowledged: ch.Unacknowledged, Unconfirmed: ch.Unconfirmed, Prefetch: ch.Prefetch,
				Confirm: ch.Confirm, Transactional: ch.Transactional})
		}
	}
	return out
}

func (r connectionRegistry) Close(name, reason string) bool {
	return r.srv.CloseConnection(name, reason)
}

func (r connectionRegistry) Sessions(ctx context.Context, name string) ([]httpapi.Session, bool) {
	infos, ok := r.srv.Sessions(ctx, name)
	if !ok {
		return nil, false
	}
	links := func(ls []link.LinkInfo) []httpapi.SessionLink {
		out := make([]httpapi.SessionLink, len(ls))
		for i, l := range ls {
			out[i] = httpapi.SessionLink{Handle: l.Handle, Name: l.Name, DeliveryCount: l.DeliveryCount, Credit: l.Credit,
				Management: l.Management, SndSettleMode: l.SndSettleMode, Unconfirmed: l.Unconfirmed,
				Queue: l.Queue, SendSettled: l.SendSettled, Filters: l.Filters}
		}
		return out
	}
	out := make([]httpapi.Session, len(infos))
	for i, s := range infos {
		out[i] = httpapi.Session{Channel: s.Channel, HandleMax: s.HandleMax,
			NextIncomingID: s.NextIncomingID, IncomingWindow: s.IncomingWindow,
			NextOutgoingID: s.NextOutgoingID, RemoteIncomingWindow: s.RemoteIncomingWindow,
			OutgoingUnsettled: s.OutgoingUnsettled, IncomingLinks: links(s.IncomingLinks), OutgoingLinks: links(s.OutgoingLinks)}
	}
	return out, true
}
