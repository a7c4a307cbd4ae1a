package httpapi

import (
	"sync"
	"time"

	"github.com/epitaph-mq/epitaph/router"
)

// queueRates turns the queues' message counters into RabbitMQ's
// message_stats: each count with its rate per second, measured over at
// least rateInterval between two readings (a reading sooner shows the last
// rate). Readings happen when a queue is shown; a queue not shown for
// queueRateForget is forgotten (its next rate starts again from 0).
type queueRates struct {
	mu        sync.Mutex
	samples   map[*router.Queue]*queueSample
	lastPrune time.Time
}

const queueRateForget = 10 * time.Minute

type queueSample struct {
	at, seen time.Time
	stats    router.QueueStats
	rates    [5]float64 // publish, deliver_get, deliver_no_ack, redeliver, ack
}

// messageStats returns q's message_stats object for stats read now.
func (qr *queueRates) messageStats(q *router.Queue, stats router.QueueStats, now time.Time) map[string]any {
	qr.mu.Lock()
	if qr.samples == nil {
		qr.samples = make(map[*router.Queue]*queueSample)
	}
	s := qr.samples[q]
	switch {
	case s == nil:
		s = &queueSample{at: now, stats: stats}
		qr.samples[q] = s
	case now.Sub(s.at) >= rateInterval:
		secs := now.Sub(s.at).Seconds()
		old, cur := counts(s.stats), counts(stats)
		for i := range cur {
			s.rates[i] = float64(cur[i]-old[i]) / secs
		}
		s.at, s.stats = now, stats
	}
	s.seen = now
	rates := s.rates
	if now.Sub(qr.lastPrune) >= queueRateForget {
		for k, x := range qr.samples {
			if now.Sub(x.seen) >= queueRateForget {
				delete(qr.samples, k)
			}
		}
		qr.lastPrune = now
	}
	qr.mu.Unlock()
	c := counts(stats)
	detail := func(r float64) map[string]float64 { return map[string]float64{"rate": r} }
	return map[string]any{
		"publish": c[0], "publish_details": detail(rates[0]),
		"deliver_get": c[1], "deliver_get_details": detail(rates[1]),
		"deliver": c[1] - c[2], "deliver_details": detail(rates[1] - rates[2]),
		"deliver_no_ack": c[2], "deliver_no_ack_details": detail(rates[2]),
		"redeliver": c[3], "redeliver_details": detail(rates[3]),
		"ack": c[4], "ack_details": detail(rates[4]),
	}
}

func counts(s router.QueueStats) [5]uint64 {
	return [5]uint64{s.Published, s.Delivered, s.DeliveredNoAck, s.Redelivered, s.Acknowledged}
}
