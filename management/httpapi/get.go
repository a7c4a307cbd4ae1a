package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
)

// Defaults of the bounds of one get request (Options.GetMaxCount and
// GetMaxBytes). RabbitMQ has none; without them one request for 100,000
// large messages built a gigabyte-sized answer.
const (
	DefaultGetMaxCount = 10000
	DefaultGetMaxBytes = 16 << 20
)

// HeaderGetTruncated is set on a get answer that holds fewer messages than
// asked for because their payloads reached the byte bound; its value is
// the bound. The body stays RabbitMQ's plain array.
const HeaderGetTruncated = "X-Epitaph-Get-Truncated"

// getMessages is POST /api/queues/{vhost}/{queue}/get. ack_requeue_true
// is a true peek (nothing about the messages changes); ack_requeue_false
// removes them; reject_requeue_true returns them (redelivered afterwards);
// reject_requeue_false dead-letters them (reason rejected).
func (s *server) getMessages(req *request) error {
	v, q, err := s.queue(req)
	if err != nil {
		return err
	}
	var body struct {
		Count    json.Number `json:"count"`
		AckMode  string      `json:"ackmode"`
		Encoding string      `json:"encoding"`
		Truncate json.Number `json:"truncate"`
		Requeue  *bool       `json:"requeue"` // RabbitMQ 3.6's form
	}
	if err := req.decode(&body); err != nil {
		return err
	}
	count := int64(1)
	if body.Count != "" {
		if count, err = body.Count.Int64(); err != nil || count < 0 {
			return errorf(http.StatusBadRequest, "count must be a non-negative integer")
		}
	}
	if count > int64(s.getMaxCount) {
		// Refused before anything is taken: a silently shorter answer to
		// a destructive ackmode would be easy to misread.
		return errorf(http.StatusBadRequest, "count %d is above the limit of %d messages per get", count, s.getMaxCount)
	}
	truncate := int64(-1)
	if body.Truncate != "" {
		if truncate, err = body.Truncate.Int64(); err != nil || truncate < 0 {
			return errorf(http.StatusBadRequest, "truncate must be a non-negative integer")
		}
	}
	switch body.Encoding {
	case "", "auto", "base64":
	default:
		return errorf(http.StatusBadRequest, "encoding must be auto or base64, not %q", body.Encoding)
	}
	if body.AckMode == "" {
		body.AckMode = "ack_requeue_true"
		if body.Requeue != nil && !*body.Requeue {
			body.AckMode = "ack_requeue_false"
		}
	}
	var get func(int) []router.PeekedMessage
	switch body.AckMode {
	case "ack_requeue_true":
		get = q.Peek
	case "ack_requeue_false":
		get = q.Take
	case "reject_requeue_true":
		get = q.Release
	case "reject_requeue_false":
		get = q.Reject
	default:
		return errorf(http.StatusBadRequest, "ackmode must be ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false, not %q", body.AckMode)
	}
	if err := forbidden(s.operator(req, v).MayReadQueue(q.Name())); err != nil {
		return err
	}
	// How many messages fit the byte bound, seen by a peek (which changes
	// nothing); then the real operation takes that many. Whatever the
	// operation removed is answered, even if the queue changed in between
	// and the bound is overshot: a taken message is never dropped.
	n := int(count)
	var peeked []router.PeekedMessage
	if n > 0 {
		peeked = q.Peek(n)
		fit, total := 0, 0
		for _, p := range peeked {
			size := len(payloadOf(amqp10Wire(p.Msg)))
			if truncate >= 0 {
				size = min(size, int(truncate))
			}
			if fit > 0 && total+size > s.getMaxBytes {
				break
			}
			fit++
			total += size
		}
		if fit < len(peeked) {
			req.w.Header().Set(HeaderGetTruncated, strconv.Itoa(s.getMaxBytes))
			n = fit
		}
	}
	got := peeked[:min(n, len(peeked))]
	if body.AckMode != "ack_requeue_true" {
		got = get(n)
	}
	out := []map[string]any{}
	for _, p := range got {
		out = append(out, messageJSON(p, body.Encoding == "base64", truncate))
	}
	return req.ok(out)
}

// messageJSON renders a message in RabbitMQ's get shape, plus epitaph's
// readable dead-letter history ("deaths", "first_death", "last_death").
func messageJSON(p router.PeekedMessage, forceBase64 bool, truncate int64) map[string]any {
	m := p.Msg
	wire := amqp10Wire(m)
	payload := payloadOf(wire)
	out := map[string]any{
		"payload_bytes":  len(payload),
		"redelivered":    p.Redelivered,
		"exchange":       m.Exchange,
		"routing_key":    "",
		"message_count":  p.Remaining,
		"delivery_count": p.DeliveryCount,
		"acquired_count": p.AcquiredCount,
		"first_acquirer": p.FirstAcquirer,
	}
	if len(m.RoutingKeys) > 0 {
		out["routing_key"] = m.RoutingKeys[0]
	}
	if truncate >= 0 && int64(len(payload)) > truncate {
		payload = payload[:truncate]
	}
	if !forceBase64 && utf8.Valid(payload) {
		out["payload"], out["payload_encoding"] = string(payload), "string"
	} else {
		out["payload"], out["payload_encoding"] = base64.StdEncoding.EncodeToString(payload), "base64"
	}

	props := map[string]any{"priority": m.Header.Priority, "delivery_mode": 1}
	if m.Header.Durable {
		props["delivery_mode"] = 2
	}
	if m.Header.HasTTL {
		props["expiration"] = strconv.FormatUint(uint64(m.Header.TTL), 10)
	}
	headers := map[string]any{}
	if wire != nil {
		if wp, err := wire.Properties(); err == nil && wp != nil {
			addProperties(props, wp)
		}
		if ap, err := wire.ApplicationProperties(); err == nil {
			for k, v := range mapJSON(ap) {
				headers[k] = v
			}
		}
	}
	out["message_annotations"] = mapJSON(p.Annotations)

	if h, ok := annotations.HistoryOf(m.Anns); ok {
		deaths := make([]map[string]any, len(h.Deaths))
		for i, d := range h.Deaths {
			deaths[i] = deathJSON(d)
		}
		out["deaths"] = deaths
		out["first_death"] = placeJSON(h.First)
		out["last_death"] = placeJSON(h.Last)
		if h.LastError != nil {
			out["last_death_error"] = map[string]string{"condition": string(h.LastError.Condition), "description": h.LastError.Description}
		}
		// AMQP 0.9.1's view, as RabbitMQ's management UI shows it.
		xd := annotations.ToXDeath(*h)
		xdeath := make([]map[string]any, len(xd))
		for i, d := range xd {
			e := map[string]any{"count": d.Count, "reason": d.Reason, "queue": d.Queue, "time": d.Time,
				"exchange": d.Exchange, "routing-keys": nonNilStrings(d.RoutingKeys)}
			if d.HasOriginalExpiration {
				e["original-expiration"] = d.OriginalExpiration
			}
			xdeath[i] = e
		}
		headers["x-death"] = xdeath
		headers["x-first-death-queue"], headers["x-first-death-reason"], headers["x-first-death-exchange"] = h.First.Queue, h.First.Reason, h.First.Exchange
		headers["x-last-death-queue"], headers["x-last-death-reason"], headers["x-last-death-exchange"] = h.Last.Queue, h.Last.Reason, h.Last.Exchange
	} else {
		out["deaths"] = []map[string]any{}
	}
	props["headers"] = headers
	out["properties"] = props
	return out
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// timeJSON renders an AMQP timestamp (ms) in RFC 3339 with milliseconds, UTC.
func timeJSON(t amqp10.Timestamp) string {
	return time.UnixMilli(int64(t)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func deathJSON(d annotations.Death) map[string]any {
	out := map[string]any{
		"queue": d.Queue, "reason": d.Reason, "count": d.Count,
		"first_time": timeJSON(d.FirstTime), "last_time": timeJSON(d.LastTime),
		"exchange": d.Exchange, "routing_keys": nonNilStrings(d.RoutingKeys),
	}
	if d.HasTTL {
		out["ttl"] = d.TTL
	}
	return out
}

func placeJSON(p annotations.Place) map[string]string {
	return map[string]string{"queue": p.Queue, "reason": p.Reason, "exchange": p.Exchange}
}

// addProperties maps AMQP 1.0 properties to RabbitMQ's 0.9.1 names.
func addProperties(props map[string]any, p *amqp10.Properties) {
	if p.MessageID != nil {
		props["message_id"] = valueJSON(p.MessageID)
	}
	if p.CorrelationID != nil {
		props["correlation_id"] = valueJSON(p.CorrelationID)
	}
	if p.UserID != nil {
		props["user_id"] = string(p.UserID)
	}
	str := map[string]*string{"to": p.To, "type": p.Subject, "reply_to": p.ReplyTo, "group_id": p.GroupID, "reply_to_group_id": p.ReplyToGroupID}
	for k, v := range str {
		if v != nil {
			props[k] = *v
		}
	}
	if p.ContentType != nil {
		props["content_type"] = string(*p.ContentType)
	}
	if p.ContentEncoding != nil {
		props["content_encoding"] = string(*p.ContentEncoding)
	}
	if p.CreationTime != nil {
		props["timestamp"] = int64(*p.CreationTime) / 1000
	}
	if p.AbsoluteExpiryTime != nil {
		props["absolute_expiry_time"] = timeJSON(*p.AbsoluteExpiryTime)
	}
	if p.GroupSequence != nil {
		props["group_sequence"] = *p.GroupSequence
	}
}

// amqp10Wire is m's AMQP 1.0 message, which the get shows; nil for a
// message another protocol published.
func amqp10Wire(m *router.Message) *amqp10.Message {
	if c, ok := m.Container.(router.AMQP10); ok {
		return c.Wire
	}
	return nil
}

// payloadOf extracts the body: data sections concatenated, an
// amqp-value string or binary as is, other values and sequences as JSON,
// and the raw sections when they cannot be decoded.
func payloadOf(w *amqp10.Message) []byte {
	if w == nil {
		return nil
	}
	raw, err := w.Body()
	if err != nil {
		return w.Bare()
	}
	var data []byte
	var seq []any
	b := raw
	for len(b) > 0 {
		v, rest, err := amqp10.ReadValue(b)
		if err != nil {
			return raw
		}
		b = rest
		d, ok := v.(*amqp10.Described)
		if !ok {
			return raw
		}
		code, _ := d.Descriptor.(uint64)
		switch code {
		case amqp10.DescData:
			bin, _ := d.Value.([]byte)
			data = append(data, bin...)
		case amqp10.DescAMQPValue:
			switch x := d.Value.(type) {
			case string:
				return []byte(x)
			case []byte:
				return x
			}
			enc, err := json.Marshal(valueJSON(d.Value))
			if err != nil {
				return raw
			}
			return enc
		case amqp10.DescAMQPSequence:
			seq = append(seq, valueJSON(d.Value))
		default:
			return raw
		}
	}
	if seq != nil {
		enc, err := json.Marshal(seq)
		if err != nil {
			return raw
		}
		return enc
	}
	return data
}
