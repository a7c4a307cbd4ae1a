package amqpnode

import (
	"strconv"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/router"
)

// Peek on the management node (epitaph's own path, as /redrives):
// GET /queues/{q}/peek?position=P&count=N&FILTERS answers the HTTP API's
// peek page (read permission on the queue; the same filters, limits and
// statuses) as an AMQP map: queue, vhost, depth, delayed, messages and
// next_position. A message has the HTTP API's keys with AMQP values:
// properties, application properties and annotations as the message holds
// them, times as timestamps, and the body as its sections hold it (data
// sections as one binary, an amqp-value as its value, sequences as a
// list), so nothing is turned into text.
func (n *Node) peekQueue(r *request, name string) (string, any, error) {
	if err := forbidden(r.MayReadQueue(name)); err != nil {
		return "", nil, err
	}
	q, ok := r.VHost.Queue(name)
	if !ok {
		return "", nil, fail(statusNotFound, "queue '%s' in vhost '%s' not found", name, r.VHost.Name())
	}
	pr := dlops.PeekRequest{Count: dlops.DefaultPeekCount}
	fields := map[string]string{}
	for k, vs := range r.query {
		val := vs[len(vs)-1]
		switch k {
		case "position":
			p, err := strconv.Atoi(val)
			if err != nil || p < 0 {
				return "", nil, fail(statusBadRequest, "position must be a non-negative integer, not %q", val)
			}
			pr.Position = p
		case "count":
			c, err := strconv.Atoi(val)
			if err != nil || c < 1 || c > dlops.MaxPeekCount {
				return "", nil, fail(statusBadRequest, "count must be an integer between 1 and %d, not %q", dlops.MaxPeekCount, val)
			}
			pr.Count = c
		default:
			fields[k] = val
		}
	}
	f, err := dlops.ParseFilter(fields)
	if err != nil {
		return "", nil, redriveError(err)
	}
	pr.Filter = f
	page, err := dlops.Peek(q, pr, n.peekMaxScan, n.filterLimits)
	if err != nil {
		return "", nil, redriveError(err)
	}
	msgs := make([]any, len(page.Messages))
	for i := range page.Messages {
		msgs[i] = peekedValue(&page.Messages[i])
	}
	return statusOK, amqp10.Map{
		{Key: "queue", Value: q.Name()}, {Key: "vhost", Value: r.VHost.Name()},
		{Key: "depth", Value: int64(page.Depth)}, {Key: "delayed", Value: int64(page.Delayed)},
		{Key: "messages", Value: msgs}, {Key: "next_position", Value: int64(page.Next)},
	}, nil
}

// peekedValue is one browsed message as an AMQP map.
func peekedValue(bm *router.BrowsedMessage) amqp10.Map {
	m := bm.Msg
	var w *amqp10.Message
	if c, ok := m.Container.(router.AMQP10); ok {
		w = c.Wire
	}
	props := amqp10.Map{}
	var messageID any
	appProps := amqp10.Map{}
	var body any
	var bodySize int
	if w != nil {
		if p, err := w.Properties(); err == nil && p != nil {
			props = propertiesValue(p)
			messageID = p.MessageID
		}
		if ap, err := w.ApplicationProperties(); err == nil && ap != nil {
			appProps = ap
		}
		body, bodySize = bodyValue(w)
	}
	var deliveryTime any
	if bm.DeliveryTime != 0 {
		deliveryTime = amqp10.Timestamp(bm.DeliveryTime)
	}
	deaths := []any{}
	var first, last, lastErr any
	if h, ok := annotations.HistoryOf(m.Anns); ok {
		for _, d := range h.Deaths {
			var ttl any
			if d.HasTTL {
				ttl = int64(d.TTL)
			}
			keys := make([]any, len(d.RoutingKeys))
			for i, k := range d.RoutingKeys {
				keys[i] = k
			}
			deaths = append(deaths, amqp10.Map{{Key: "queue", Value: d.Queue}, {Key: "reason", Value: d.Reason},
				{Key: "count", Value: d.Count}, {Key: "exchange", Value: d.Exchange}, {Key: "routing_keys", Value: keys},
				{Key: "first_time", Value: d.FirstTime}, {Key: "last_time", Value: d.LastTime}, {Key: "ttl", Value: ttl}})
		}
		place := func(p annotations.Place) amqp10.Map {
			return amqp10.Map{{Key: "queue", Value: p.Queue}, {Key: "reason", Value: p.Reason}, {Key: "exchange", Value: p.Exchange}}
		}
		first, last = place(h.First), place(h.Last)
		if h.LastError != nil {
			lastErr = amqp10.Map{{Key: "condition", Value: h.LastError.Condition}, {Key: "description", Value: h.LastError.Description}}
		}
	}
	keys := make([]any, len(m.RoutingKeys))
	for i, k := range m.RoutingKeys {
		keys[i] = k
	}
	anns := bm.Annotations
	if anns == nil {
		anns = amqp10.Map{}
	}
	return amqp10.Map{
		{Key: "position", Value: int64(bm.Position)},
		{Key: "message_id", Value: messageID},
		{Key: "redelivered", Value: bm.Redelivered},
		{Key: "delivery_count", Value: int64(bm.DeliveryCount)},
		{Key: "properties", Value: props},
		{Key: "application_properties", Value: appProps},
		{Key: "annotations", Value: anns},
		{Key: "deaths", Value: deaths},
		{Key: "first_death", Value: first},
		{Key: "last_death", Value: last},
		{Key: "last_death_error", Value: lastErr},
		{Key: "redrive_count", Value: dlops.RedriveCount(m.Anns)},
		{Key: "exchange", Value: m.Exchange},
		{Key: "routing_keys", Value: keys},
		{Key: "durable", Value: m.Header.Durable},
		{Key: "delivery_time", Value: deliveryTime},
		{Key: "body", Value: body},
		{Key: "body_size", Value: int64(bodySize)},
	}
}

// propertiesValue is the properties under the HTTP API's snake_case
// names, absent ones null.
func propertiesValue(p *amqp10.Properties) amqp10.Map {
	opt := func(v any, present bool) any {
		if !present {
			return nil
		}
		return v
	}
	str := func(v *string) any {
		if v == nil {
			return nil
		}
		return *v
	}
	sym := func(v *amqp10.Symbol) any {
		if v == nil {
			return nil
		}
		return *v
	}
	ts := func(v *amqp10.Timestamp) any {
		if v == nil {
			return nil
		}
		return *v
	}
	var seq any
	if p.GroupSequence != nil {
		seq = *p.GroupSequence
	}
	return amqp10.Map{
		{Key: "message_id", Value: p.MessageID},
		{Key: "user_id", Value: opt(p.UserID, p.UserID != nil)},
		{Key: "to", Value: str(p.To)},
		{Key: "subject", Value: str(p.Subject)},
		{Key: "reply_to", Value: str(p.ReplyTo)},
		{Key: "correlation_id", Value: p.CorrelationID},
		{Key: "content_type", Value: sym(p.ContentType)},
		{Key: "content_encoding", Value: sym(p.ContentEncoding)},
		{Key: "absolute_expiry_time", Value: ts(p.AbsoluteExpiryTime)},
		{Key: "creation_time", Value: ts(p.CreationTime)},
		{Key: "group_id", Value: str(p.GroupID)},
		{Key: "group_sequence", Value: seq},
		{Key: "reply_to_group_id", Value: str(p.ReplyToGroupID)},
	}
}

// bodyValue is the body as its sections hold it, and its size: data
// sections as one binary (their bytes), an amqp-value as its value, amqp
// sequences as one list (the encoded sections' size), the raw sections
// when they cannot be decoded.
func bodyValue(w *amqp10.Message) (any, int) {
	raw, err := w.Body()
	if err != nil {
		return w.Bare(), len(w.Bare())
	}
	var data []byte
	var seq []any
	for b := raw; len(b) > 0; {
		v, rest, err := amqp10.ReadValue(b)
		if err != nil {
			return raw, len(raw)
		}
		b = rest
		d, ok := v.(*amqp10.Described)
		if !ok {
			return raw, len(raw)
		}
		code, _ := d.Descriptor.(uint64)
		switch code {
		case amqp10.DescData:
			bin, _ := d.Value.([]byte)
			data = append(data, bin...)
		case amqp10.DescAMQPValue:
			return d.Value, len(raw)
		case amqp10.DescAMQPSequence:
			if l, ok := d.Value.([]any); ok {
				seq = append(seq, l...)
			}
		default:
			return raw, len(raw)
		}
	}
	if seq != nil {
		return seq, len(raw)
	}
	if data == nil {
		data = []byte{}
	}
	return data, len(data)
}
