package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// Connection is one open AMQP connection as the API shows it.
type Connection struct {
	// Name is RabbitMQ's connection name ("PEER:PORT -> LOCAL:PORT"), the
	// key of /api/connections/{name}.
	Name, User, VHost, ContainerID, AuthMechanism string
	ClientProperties                              amqp10.Map
	Peer, Local                                   netip.AddrPort
	TLS                                           bool
	ChannelMax                                    uint16
	FrameMax                                      uint32
	IdleTimeout                                   time.Duration
	ConnectedAt                                   time.Time
	Sessions                                      int
	RecvOctets, SendOctets, RecvCount, SendCount  uint64
	// Protocol is RabbitMQ's name of the connection's protocol: "AMQP 1-0"
	// (also when empty) or "AMQP 0-9-1".
	Protocol string
	// Channels are an AMQP 0-9-1 connection's open channels.
	Channels []Channel
}

// Channel is an open AMQP 0-9-1 channel.
type Channel struct {
	Number                                 uint16
	Consumers, Unacknowledged, Unconfirmed int
	Prefetch                               uint16
	Confirm, Transactional                 bool
}

// Connections is the broker's registry of open AMQP connections, as this
// API needs it (the AMQP front end implements it). Both methods are safe for
// concurrent use.
type Connections interface {
	// List returns the open connections.
	List() []Connection
	// Close closes the open connection named name, with reason as the
	// operator's text, and reports whether there was one.
	Close(name, reason string) bool
	// Sessions returns the sessions of the open connection named name;
	// false when there is none (or ctx ended first).
	Sessions(ctx context.Context, name string) ([]Session, bool)
}

// Session is one AMQP session of a connection.
type Session struct {
	Channel                              uint16
	HandleMax                            uint32
	NextIncomingID, IncomingWindow       uint32
	NextOutgoingID, RemoteIncomingWindow uint32
	OutgoingUnsettled                    int
	IncomingLinks, OutgoingLinks         []SessionLink
}

// SessionLink is one link of a session: incoming (a publisher, or the
// /management request link) or outgoing (a consumer, or the response link).
type SessionLink struct {
	Handle                uint32
	Name                  string
	DeliveryCount, Credit uint32
	Management            bool
	SndSettleMode         string // incoming links
	Unconfirmed           uint32 // incoming links
	Queue                 string // outgoing links
	SendSettled           bool   // outgoing links
	// Filters are an outgoing link's filters in force, as the attach
	// gave them (filter-set entries whose values are described).
	Filters value.Map
}

// defaultCloseReason is RabbitMQ's reason when DELETE has no X-Reason header.
const defaultCloseReason = "Closed via management plugin"

// rateInterval is the least time between two samples a rate is computed
// from; RabbitMQ samples connection statistics every 5 s.
const rateInterval = time.Second

// rateSampler turns the connections' octet counters into the per-second
// rates RabbitMQ shows (recv_oct_details.rate), from the counters seen by
// an earlier request: the first request about a connection shows 0.
type rateSampler struct {
	mu      sync.Mutex
	samples map[rateKey]*rateSample
}

type rateKey struct {
	name string
	at   time.Time // ConnectedAt: a later connection with the same name starts afresh
}

type rateSample struct {
	at                 time.Time
	recv, send         uint64
	recvRate, sendRate float64
}

// rates returns the receive and send rates of every connection in conns,
// and forgets connections that are gone.
func (rs *rateSampler) rates(conns []Connection, now time.Time) map[rateKey][2]float64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.samples == nil {
		rs.samples = make(map[rateKey]*rateSample)
	}
	out := make(map[rateKey][2]float64, len(conns))
	for _, c := range conns {
		k := rateKey{c.Name, c.ConnectedAt}
		s := rs.samples[k]
		switch {
		case s == nil:
			s = &rateSample{at: now, recv: c.RecvOctets, send: c.SendOctets}
			rs.samples[k] = s
		case now.Sub(s.at) >= rateInterval:
			secs := now.Sub(s.at).Seconds()
			s.recvRate = float64(c.RecvOctets-s.recv) / secs
			s.sendRate = float64(c.SendOctets-s.send) / secs
			s.at, s.recv, s.send = now, c.RecvOctets, c.SendOctets
		}
		out[k] = [2]float64{s.recvRate, s.sendRate}
	}
	for k := range rs.samples {
		if _, ok := out[k]; !ok {
			delete(rs.samples, k)
		}
	}
	return out
}

// isMonitor is RabbitMQ's is_monitor: these users see every connection.
func (req *request) isMonitor() bool {
	return req.admin || slices.Contains(req.tags, "monitoring")
}

// visibleConnections lists the connections req's user may see (RabbitMQ's
// filter_conn_ch_list): all for administrator and monitoring users, else
// the user's own; only vhost's when vhost is not "".
func (s *server) visibleConnections(req *request, vhost string) []Connection {
	if s.conns == nil {
		return nil
	}
	var out []Connection
	for _, c := range s.conns.List() {
		if (vhost == "" || c.VHost == vhost) && (req.isMonitor() || c.User == req.user) {
			out = append(out, c)
		}
	}
	// RabbitMQ's reply_list default sort: vhost, then name.
	slices.SortFunc(out, func(a, b Connection) int {
		return cmp.Or(strings.Compare(a.VHost, b.VHost), strings.Compare(a.Name, b.Name))
	})
	return out
}

// listConnections: GET /api/connections and /api/vhosts/{vhost}/connections.
func (s *server) listConnections(req *request) error {
	vhost := ""
	if len(req.args) > 0 {
		if _, err := s.vhost(req, req.args[0]); err != nil {
			return err
		}
		vhost = req.args[0]
	}
	conns := s.visibleConnections(req, vhost)
	rates := s.rates.rates(conns, time.Now())
	out := make([]map[string]any, 0, len(conns))
	for _, c := range conns {
		out = append(out, s.connectionJSON(c, rates[rateKey{c.Name, c.ConnectedAt}]))
	}
	return req.ok(out)
}

// connection finds the connection named in the path and checks that req's
// user may see it (GET: monitoring, or its own) or close it (DELETE:
// administrator, or its own), as RabbitMQ's is_authorized_user.
func (s *server) connection(req *request) (Connection, error) {
	var found *Connection
	if s.conns != nil {
		for _, c := range s.conns.List() {
			if c.Name == req.args[0] {
				found = &c
				break
			}
		}
	}
	allowed := req.isMonitor()
	if req.r.Method == http.MethodDelete {
		allowed = req.admin
	}
	if found != nil && found.User == req.user {
		allowed = true
	}
	if !allowed {
		return Connection{}, errorf(http.StatusUnauthorized, "User not authorised to access object")
	}
	if found == nil {
		return Connection{}, errorf(http.StatusNotFound, "Object Not Found")
	}
	return *found, nil
}

// getConnection: GET /api/connections/{name}.
func (s *server) getConnection(req *request) error {
	c, err := s.connection(req)
	if err != nil {
		return err
	}
	rates := s.rates.rates([]Connection{c}, time.Now())
	return req.ok(s.connectionJSON(c, rates[rateKey{c.Name, c.ConnectedAt}]))
}

// closeConnection: DELETE /api/connections/{name} closes it, with the
// X-Reason header's text as the reason (RabbitMQ's force_close_connection).
func (s *server) closeConnection(req *request) error {
	c, err := s.connection(req)
	if err != nil {
		return err
	}
	reason := req.r.Header.Get("X-Reason")
	if reason == "" {
		reason = defaultCloseReason
	}
	if !s.conns.Close(c.Name, reason) {
		return errorf(http.StatusNotFound, "Object Not Found")
	}
	return req.noContent()
}

// listChannels: GET /api/channels, /api/vhosts/{vhost}/channels and
// /api/connections/{name}/channels. RabbitMQ 4 lists AMQP 0-9-1 channels
// there; AMQP 1.0 sessions are not channels, so with only AMQP 1.0
// connections the list is empty, as RabbitMQ answers. A connection's
// session count is its "channels" field.
func (s *server) listChannels(req *request) error {
	var conns []Connection
	switch {
	case len(req.args) > 0 && strings.HasPrefix(req.r.URL.EscapedPath(), "/api/vhosts/"):
		if _, err := s.vhost(req, req.args[0]); err != nil {
			return err
		}
		conns = s.visibleConnections(req, req.args[0])
	case len(req.args) > 0:
		c, err := s.connection(req)
		if err != nil {
			return err
		}
		conns = []Connection{c}
	default:
		conns = s.visibleConnections(req, "")
	}
	out := []map[string]any{}
	for _, c := range conns {
		for _, ch := range c.Channels {
			out = append(out, s.channelJSON(c, ch))
		}
	}
	return req.ok(out)
}

// channelJSON renders an AMQP 0-9-1 channel as RabbitMQ 4.3's management
// API does (rabbit_channel's infos); Erlang process statistics are left
// out, and a transaction's uncommitted counts are not kept (0).
func (s *server) channelJSON(c Connection, ch Channel) map[string]any {
	details := map[string]any{"name": c.Name, "peer_host": nil, "peer_port": nil}
	if c.Peer.IsValid() {
		details["peer_host"], details["peer_port"] = c.Peer.Addr().String(), c.Peer.Port()
	}
	return map[string]any{
		"name":                      fmt.Sprintf("%s (%d)", c.Name, ch.Number),
		"number":                    ch.Number,
		"node":                      s.node,
		"user":                      c.User,
		"user_who_performed_action": c.User,
		"vhost":                     c.VHost,
		"connection_details":        details,
		"state":                     "running",
		"consumer_count":            ch.Consumers,
		"messages_unacknowledged":   ch.Unacknowledged,
		"messages_unconfirmed":      ch.Unconfirmed,
		"messages_uncommitted":      0,
		"acks_uncommitted":          0,
		"prefetch_count":            ch.Prefetch,
		"global_prefetch_count":     0,
		"confirm":                   ch.Confirm,
		"transactional":             ch.Transactional,
	}
}

// connectionJSON renders a connection as RabbitMQ 4.3's management API
// renders an AMQP 1.0 connection (rabbit_amqp_reader's infos as
// rabbit_mgmt_format shapes them). Erlang process statistics (reductions,
// garbage_collection) have no counterpart and are left out.
func (s *server) connectionJSON(c Connection, rates [2]float64) map[string]any {
	props := mapJSON(c.ClientProperties)
	var host, peerHost any
	var port, peerPort any
	if c.Local.IsValid() {
		host, port = c.Local.Addr().String(), c.Local.Port()
	}
	if c.Peer.IsValid() {
		peerHost, peerPort = c.Peer.Addr().String(), c.Peer.Port()
	}
	return map[string]any{
		"name":                      c.Name,
		"node":                      s.node,
		"type":                      "network",
		"protocol":                  cmp.Or(c.Protocol, "AMQP 1-0"),
		"state":                     "running",
		"user":                      c.User,
		"user_who_performed_action": c.User,
		"vhost":                     c.VHost,
		"container_id":              c.ContainerID,
		"auth_mechanism":            c.AuthMechanism,
		"client_properties":         props,
		"host":                      host,
		"port":                      port,
		"peer_host":                 peerHost,
		"peer_port":                 peerPort,
		"ssl":                       c.TLS,
		"ssl_protocol":              nil,
		"ssl_key_exchange":          nil,
		"ssl_cipher":                nil,
		"ssl_hash":                  nil,
		"peer_cert_subject":         nil,
		"peer_cert_issuer":          nil,
		"peer_cert_validity":        nil,
		"channels":                  c.Sessions,
		"channel_max":               c.ChannelMax,
		"frame_max":                 c.FrameMax,
		"timeout":                   int64(c.IdleTimeout / time.Second), // the broker's idle-timeout
		"connected_at":              c.ConnectedAt.UnixMilli(),
		"recv_oct":                  c.RecvOctets,
		"recv_oct_details":          map[string]float64{"rate": rates[0]},
		"recv_cnt":                  c.RecvCount,
		"send_oct":                  c.SendOctets,
		"send_oct_details":          map[string]float64{"rate": rates[1]},
		"send_cnt":                  c.SendCount,
		"send_pend":                 0,
	}
}

// connectionSessions: GET /api/connections/{name}/sessions, RabbitMQ 4's
// view of an AMQP 1.0 connection's sessions and their links
// (rabbit_mgmt_wm_connection_sessions), by channel number. Link addresses
// and max_message_size are left out: the broker keeps the queue a consumer
// reads, not the address it attached with.
func (s *server) connectionSessions(req *request) error {
	c, err := s.connection(req)
	if err != nil {
		return err
	}
	sessions, ok := s.conns.Sessions(req.r.Context(), c.Name)
	if !ok {
		return errorf(http.StatusNotFound, "Object Not Found")
	}
	out := make([]map[string]any, 0, len(sessions))
	for _, ss := range sessions {
		in := make([]map[string]any, 0, len(ss.IncomingLinks))
		for _, l := range ss.IncomingLinks {
			row := map[string]any{"handle": l.Handle, "link_name": l.Name, "snd_settle_mode": l.SndSettleMode,
				"delivery_count": l.DeliveryCount, "credit": l.Credit, "unconfirmed_messages": l.Unconfirmed}
			if l.Management {
				row["target_address"] = "/management"
			}
			in = append(in, row)
		}
		outLinks := make([]map[string]any, 0, len(ss.OutgoingLinks))
		for _, l := range ss.OutgoingLinks {
			row := map[string]any{"handle": l.Handle, "link_name": l.Name, "send_settled": l.SendSettled,
				"delivery_count": l.DeliveryCount, "credit": l.Credit, "filter": filterJSON(l.Filters)}
			if l.Management {
				row["source_address"], row["queue_name"] = "/management", ""
			} else {
				row["queue_name"] = l.Queue
			}
			outLinks = append(outLinks, row)
		}
		out = append(out, map[string]any{
			"channel_number": ss.Channel, "handle_max": ss.HandleMax,
			"next_incoming_id": ss.NextIncomingID, "incoming_window": ss.IncomingWindow,
			"next_outgoing_id": ss.NextOutgoingID, "remote_incoming_window": ss.RemoteIncomingWindow,
			"outgoing_unsettled_deliveries": ss.OutgoingUnsettled,
			"incoming_links":                in, "outgoing_links": outLinks,
		})
	}
	return req.ok(out)
}

// filterJSON shows a link's filters in force as RabbitMQ 4.3 does
// (format_filter): one object per filter with its name, its descriptor
// (symbol or code) and its value, a map value as a list of key and value
// objects (string and symbol keys only).
func filterJSON(filters value.Map) []any {
	out := []any{}
	for _, kv := range filters {
		d, ok := kv.Value.(*value.Described)
		if !ok || d == nil {
			continue
		}
		out = append(out, map[string]any{"name": jsonScalar(kv.Key), "descriptor": jsonScalar(d.Descriptor),
			"value": filterValueJSON(d.Value)})
	}
	return out
}

func filterValueJSON(v any) any {
	switch x := v.(type) {
	case value.List:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = filterValueJSON(e)
		}
		return out
	case value.Map:
		out := []any{}
		for _, kv := range x {
			switch kv.Key.(type) {
			case string, value.Symbol:
				out = append(out, map[string]any{"key": jsonScalar(kv.Key), "value": filterValueJSON(kv.Value)})
			}
		}
		return out
	}
	return jsonScalar(v)
}

// jsonScalar is a simple value as JSON shows it: symbols as strings,
// binaries as strings (RabbitMQ shows Erlang binaries), others as they are.
func jsonScalar(v any) any {
	switch x := v.(type) {
	case value.Symbol:
		return string(x)
	case []byte:
		return string(x)
	case value.Timestamp:
		return int64(x)
	case value.UUID, value.Char, *value.Array, *value.Described, value.Decimal32, value.Decimal64, value.Decimal128:
		return fmt.Sprint(x)
	}
	return v
}
