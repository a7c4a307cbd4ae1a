package annotations

import "strconv"

// XDeath is one table of AMQP 0.9.1's x-death header (as RabbitMQ 4.3 maps x-opt-deaths to it).
// Field types on the 0.9.1 wire: Count long, Reason/Queue/Exchange longstr,
// Time timestamp (seconds), RoutingKeys array of longstr,
// OriginalExpiration longstr (only when the death had a ttl).
type XDeath struct {
	OriginalExpiration    string
	HasOriginalExpiration bool
	Count                 int64
	Reason                string
	Queue                 string
	Time                  int64 // seconds: first-time div 1000; last-time is not mapped
	Exchange              string
	RoutingKeys           []string
}

// ToXDeath maps a history to the x-death header, most recent first, in
// RabbitMQ's field order ([original-expiration,] count, reason, queue, time,
// exchange, routing-keys). The six x-*-death-* annotations map to longstr
// headers of the same names (see History.First and History.Last).
func ToXDeath(h History) []XDeath {
	out := make([]XDeath, len(h.Deaths))
	for i, d := range h.Deaths {
		out[i] = XDeath{
			Count:       int64(d.Count),
			Reason:      d.Reason,
			Queue:       d.Queue,
			Time:        int64(d.FirstTime) / 1000,
			Exchange:    d.Exchange,
			RoutingKeys: append([]string(nil), d.RoutingKeys...),
		}
		if d.HasTTL {
			out[i].OriginalExpiration = strconv.FormatUint(uint64(d.TTL), 10)
			out[i].HasOriginalExpiration = true
		}
	}
	return out
}
