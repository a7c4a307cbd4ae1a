package dlevents

import (
	"encoding/json"
	"time"
)

// The JSON form of events is the one body both front ends send (the SSE
// data lines, the AMQP 1.0 message body), and what the README documents:
// every key is always present, absent values are null and lists are
// never null, so that a reader (the web console) needs no case for a
// missing key. Keys are only ever added.

// Item types: the "type" key.
const (
	TypeDeadLetter = "dead_letter"
	TypeGap        = "gap"
)

// ErrorInfo is the consumer's rejection error of an event.
type ErrorInfo struct {
	Condition   string `json:"condition"`
	Description string `json:"description"`
}

type jsonEvent struct {
	Type          string     `json:"type"`
	Seq           uint64     `json:"seq"`
	Time          string     `json:"time"`
	VHost         string     `json:"vhost"`
	Queue         string     `json:"queue"`
	QueueType     string     `json:"queue_type"`
	Reason        string     `json:"reason"`
	Count         uint64     `json:"count"`
	Strategy      string     `json:"strategy"`
	Outcome       string     `json:"outcome"`
	Exchange      *string    `json:"exchange"`
	RoutingKeys   []string   `json:"routing_keys"`
	TargetQueues  []string   `json:"target_queues"`
	RefusedQueues []string   `json:"refused_queues"`
	CycleQueues   []string   `json:"cycle_queues"`
	DropCause     *string    `json:"drop_cause"`
	MessageID     *string    `json:"message_id"`
	Error         *ErrorInfo `json:"error"`
}

type jsonGap struct {
	Type string `json:"type"`
	Lost uint64 `json:"lost"`
}

// TimeFormat is the events' time format: RFC 3339 in UTC with
// milliseconds, the precision of x-opt-deaths times.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// JSON encodes an item: an event, or a gap marker.
func (it Item) JSON() ([]byte, error) {
	var v any
	if e := it.Event; e != nil {
		j := jsonEvent{Type: TypeDeadLetter, Seq: e.Seq, Time: e.Time.UTC().Format(TimeFormat),
			VHost: e.VHost, Queue: e.Queue, QueueType: e.QueueType, Reason: e.Reason, Count: e.Count,
			Strategy: e.Strategy, Outcome: e.Outcome, RoutingKeys: orEmpty(e.RoutingKeys),
			TargetQueues: orEmpty(e.TargetQueues), RefusedQueues: orEmpty(e.RefusedQueues),
			CycleQueues: orEmpty(e.CycleQueues)}
		if e.HasExchange {
			j.Exchange = &e.Exchange
		}
		if e.DropCause != "" {
			j.DropCause = &e.DropCause
		}
		if e.HasMessageID {
			j.MessageID = &e.MessageID
		}
		if e.ErrorCondition != "" {
			j.Error = &ErrorInfo{Condition: e.ErrorCondition, Description: e.ErrorDescription}
		}
		v = j
	} else {
		v = jsonGap{Type: TypeGap, Lost: it.Lost}
	}
	return json.Marshal(v)
}

// Parsed is an item decoded from its JSON form (ParseJSON): for clients
// of the stream written in Go (epitaphctl, tests).
type Parsed struct {
	Type          string     `json:"type"`
	Lost          uint64     `json:"lost"`
	Seq           uint64     `json:"seq"`
	Time          string     `json:"time"`
	VHost         string     `json:"vhost"`
	Queue         string     `json:"queue"`
	QueueType     string     `json:"queue_type"`
	Reason        string     `json:"reason"`
	Count         uint64     `json:"count"`
	Strategy      string     `json:"strategy"`
	Outcome       string     `json:"outcome"`
	Exchange      *string    `json:"exchange"`
	RoutingKeys   []string   `json:"routing_keys"`
	TargetQueues  []string   `json:"target_queues"`
	RefusedQueues []string   `json:"refused_queues"`
	CycleQueues   []string   `json:"cycle_queues"`
	DropCause     *string    `json:"drop_cause"`
	MessageID     *string    `json:"message_id"`
	Error         *ErrorInfo `json:"error"`
}

// ParseJSON decodes an item's JSON form.
func ParseJSON(b []byte) (Parsed, error) {
	var p Parsed
	err := json.Unmarshal(b, &p)
	return p, err
}

// ParsedTime is p.Time as a time.
func (p Parsed) ParsedTime() (time.Time, error) { return time.Parse(TimeFormat, p.Time) }
