package epitaph

import (
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
			RecvCount: c.RecvCount, SendCount: c.SendCount,
		}
	}
	return out
}

func (r connectionRegistry) Close(name, reason string) bool {
	return r.srv.CloseConnection(name, reason)
}
