package epitaph

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/epitaph-mq/epitaph/deadletter"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
)

// setupTelemetry builds the providers from opts and returns the tracer (nil:
// off) and the link counters (nil: no metrics). It wraps the logger so that
// records logged with a span's context carry trace_id and span_id.
func (b *Broker) setupTelemetry(opts *Options) error {
	cfg := telemetry.Config{
		Tracing:        opts.Telemetry.Tracing,
		OTLPEndpoint:   opts.Telemetry.OTLPEndpoint,
		OTLPProtocol:   opts.Telemetry.OTLPProtocol,
		Metrics:        opts.Telemetry.Metrics && opts.HTTPListen != "", // /metrics needs the listener
		OTLPMetrics:    opts.Telemetry.OTLPMetrics,
		ServiceVersion: Version,
		Logger:         opts.Logger.With("component", "telemetry"),
	}
	if opts.TracerProvider != nil {
		cfg.Tracing = telemetry.TracingOff // the embedder's provider wins
	}
	p, err := telemetry.Setup(context.Background(), cfg)
	if err != nil {
		return err
	}
	b.providers = p
	tp := opts.TracerProvider
	if tp == nil && p.TracerProvider != nil {
		tp = p.TracerProvider
	}
	b.tracer = telemetry.NewTracer(tp)
	if b.tracer != nil {
		opts.Logger = slog.New(telemetry.NewLogHandler(opts.Logger.Handler()))
	}
	if p.MeterProvider != nil || opts.MeterProvider != nil {
		b.counters = link.NewCounters()
		b.counters091 = link.NewCounters()
	}
	return nil
}

// registerMetrics registers the broker's instruments on every meter
// provider in use.
func (b *Broker) registerMetrics(opts *Options) error {
	if b.providers.MeterProvider != nil {
		if err := registerMetrics(b.providers.MeterProvider.Meter(telemetry.ScopeName), b); err != nil {
			return err
		}
	}
	if opts.MeterProvider != nil {
		return registerMetrics(opts.MeterProvider.Meter(telemetry.ScopeName), b)
	}
	return nil
}

const (
	protocol    = "amqp10"
	protocol091 = "amqp091" // RabbitMQ's label for AMQP 0-9-1
)

// rabbitQueueType is RabbitMQ's queue_type label value.
func rabbitQueueType(t router.QueueType) string {
	if t == router.Quorum {
		return "rabbit_quorum_queue"
	}
	return "rabbit_classic_queue"
}

// deadLetterFamilies are RabbitMQ's global dead-letter counters and the
// {queue_type, dead_letter_strategy} series rabbit_global_counters creates
// for each at boot (so they exist, at zero, before anything dies).
var deadLetterFamilies = []struct {
	reason router.Reason
	name   string
	help   string
	series [][2]string
}{
	{router.ReasonMaxLen, "rabbitmq_global_messages_dead_lettered_maxlen_total",
		"Total number of messages dead-lettered due to overflow drop-head or reject-publish-dlx",
		[][2]string{{"rabbit_classic_queue", "disabled"}, {"rabbit_classic_queue", "at_most_once"},
			{"rabbit_quorum_queue", "disabled"}, {"rabbit_quorum_queue", "at_most_once"}}},
	{router.ReasonExpired, "rabbitmq_global_messages_dead_lettered_expired_total",
		"Total number of messages dead-lettered due to message TTL exceeded",
		[][2]string{{"rabbit_classic_queue", "disabled"}, {"rabbit_classic_queue", "at_most_once"},
			{"rabbit_quorum_queue", "disabled"}, {"rabbit_quorum_queue", "at_most_once"},
			{"rabbit_quorum_queue", "at_least_once"}}},
	{router.ReasonRejected, "rabbitmq_global_messages_dead_lettered_rejected_total",
		"Total number of messages dead-lettered due to basic.reject or basic.nack",
		[][2]string{{"rabbit_classic_queue", "disabled"}, {"rabbit_classic_queue", "at_most_once"},
			{"rabbit_quorum_queue", "disabled"}, {"rabbit_quorum_queue", "at_most_once"},
			{"rabbit_quorum_queue", "at_least_once"}}},
	{router.ReasonDeliveryLimit, "rabbitmq_global_messages_dead_lettered_delivery_limit_total",
		"Total number of messages dead-lettered due to delivery-limit exceeded",
		[][2]string{{"rabbit_quorum_queue", "disabled"}, {"rabbit_quorum_queue", "at_most_once"},
			{"rabbit_quorum_queue", "at_least_once"}}},
}

// registerMetrics creates the observable instruments on m; one callback
// reads the link counters, the dead-letter counters and the queues at each
// collection, so the message paths pay only for atomic increments.
func registerMetrics(m metric.Meter, b *Broker) error {
	var insts []metric.Observable
	var err error
	counter := func(name, help string) metric.Int64ObservableCounter {
		c, e := m.Int64ObservableCounter(name, metric.WithDescription(help))
		if e != nil && err == nil {
			err = e
		}
		insts = append(insts, c)
		return c
	}
	gauge := func(name, help string) metric.Int64ObservableGauge {
		g, e := m.Int64ObservableGauge(name, metric.WithDescription(help))
		if e != nil && err == nil {
			err = e
		}
		insts = append(insts, g)
		return g
	}
	// RabbitMQ's global families (rabbit_global_counters), protocol="amqp10".
	received := counter("rabbitmq_global_messages_received_total", "Total number of messages received from publishers")
	receivedConfirm := counter("rabbitmq_global_messages_received_confirm_total",
		"Total number of messages received from publishers expecting confirmations")
	routed := counter("rabbitmq_global_messages_routed_total", "Total number of messages routed to queues or streams")
	unroutableDropped := counter("rabbitmq_global_messages_unroutable_dropped_total",
		"Total number of messages published as non-mandatory into an exchange and dropped as unroutable")
	unroutableReturned := counter("rabbitmq_global_messages_unroutable_returned_total",
		"Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable")
	confirmed := counter("rabbitmq_global_messages_confirmed_total", "Total number of messages confirmed to publishers")
	publishers := gauge("rabbitmq_global_publishers", "Current number of publishers")
	consumers := gauge("rabbitmq_global_consumers", "Current number of consumers")
	delivered := counter("rabbitmq_global_messages_delivered_total", "Total number of messages delivered to consumers")
	deliveredManual := counter("rabbitmq_global_messages_delivered_consume_manual_ack_total",
		"Total number of messages delivered to consumers using basic.consume with manual acknowledgment")
	deliveredAuto := counter("rabbitmq_global_messages_delivered_consume_auto_ack_total",
		"Total number of messages delivered to consumers using basic.consume with automatic acknowledgment")
	getManual := counter("rabbitmq_global_messages_delivered_get_manual_ack_total",
		"Total number of messages delivered to consumers using basic.get with manual acknowledgment")
	getAuto := counter("rabbitmq_global_messages_delivered_get_auto_ack_total",
		"Total number of messages delivered to consumers using basic.get with automatic acknowledgment")
	getEmpty := counter("rabbitmq_global_messages_get_empty_total",
		"Total number of times basic.get operations fetched no message")
	acknowledged := counter("rabbitmq_global_messages_acknowledged_total",
		"Total number of messages acknowledged by consumers")
	dlFamilies := make([]metric.Int64ObservableCounter, len(deadLetterFamilies))
	for i, f := range deadLetterFamilies {
		dlFamilies[i] = counter(f.name, f.help)
	}
	dlConfirmed := counter("rabbitmq_global_messages_dead_lettered_confirmed_total",
		"Total number of messages dead-lettered and confirmed by target queues")

	// epitaph's own series.
	connections := gauge("epitaph_connections", "Open AMQP connections")
	sessions := gauge("epitaph_sessions", "Open AMQP sessions")
	links := gauge("epitaph_links", "Attached AMQP links (publishers, consumers and management links)")
	authFailures := counter("epitaph_auth_failures_total",
		"Failed authentications (AMQP SASL and HTTP basic auth), each answered after the failure delay")
	qReady := gauge("epitaph_queue_messages_ready", "Messages ready for delivery, per queue")
	qReadyBytes := gauge("epitaph_queue_messages_ready_bytes", "Size of the ready messages (bare message and footer), per queue")
	qUnacked := gauge("epitaph_queue_messages_unacked", "Messages delivered and not yet settled, per queue")
	qRetained := gauge("epitaph_queue_messages_dead_letter_retained",
		"Messages retained by at-least-once dead-lettering until a target takes them, per queue")
	qConsumers := gauge("epitaph_queue_consumers", "Consumers, per queue")
	qRouted := counter("epitaph_queue_messages_routed_total", "Messages routed into the queue by publishes (dead-letter copies excluded)")
	qDelivered := counter("epitaph_queue_messages_delivered_total", "Messages delivered from the queue to consumers")
	qAcked := counter("epitaph_queue_messages_acknowledged_total", "Deliveries settled accepted")
	qRequeued := counter("epitaph_queue_messages_requeued_total",
		"Deliveries settled released, or modified without undeliverable-here (returned to the queue unless over a delivery limit)")
	qRejected := counter("epitaph_queue_messages_rejected_total", "Deliveries settled rejected, or modified with undeliverable-here")
	qDead := counter("epitaph_queue_messages_dead_lettered_total",
		"Messages that died in the queue and reached at least one dead-letter target, by reason")
	qDropped := counter("epitaph_queue_messages_dead_letter_dropped_total",
		"Messages that died in the queue and were dropped, by reason and cause (no_dlx, no_route, cycle)")
	qCopiesRefused := counter("epitaph_queue_dead_letter_copies_refused_total",
		"At-most-once dead-letter copies this queue refused as a target (x-overflow reject-publish, or deleted meanwhile): each is lost")
	storeCorrupt := counter("epitaph_store_corrupt_blocks_total",
		"Blocks of the durable store found failing their checksum (reads and compactions)")
	storeSalvaged := counter("epitaph_store_salvaged_total",
		"Records and table entries dropped by store-recovery salvage at start-up")
	storeDiskFull := counter("epitaph_store_disk_full_total",
		"Store commits refused because the disk is full (publishes rejected with amqp:resource-limit-exceeded)")
	evLost := counter("epitaph_dead_letter_events_lost_total",
		"Dead-letter events lost because a subscriber's buffer was full (each subscriber that lost one counts it)")
	evSubscribers := gauge("epitaph_dead_letter_event_subscribers",
		"Open dead-letter event subscriptions (AMQP links and HTTP streams)")
	unreadable := counter("epitaph_store_unreadable_messages_total",
		"Stored messages a queue could not read back (damaged or missing), each logged with its queue and seq")
	if err != nil {
		return err
	}

	proto := attribute.String("protocol", protocol)
	protoSet := metric.WithAttributes(proto)
	proto091 := attribute.String("protocol", protocol091)
	proto091Set := metric.WithAttributes(proto091)
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var snap, snap091 link.Snapshot
		if b.counters != nil {
			snap = b.counters.Snapshot()
		}
		if b.counters091 != nil {
			snap091 = b.counters091.Snapshot()
		}
		for _, ps := range []struct {
			s   *link.Snapshot
			set metric.MeasurementOption
		}{{&snap, protoSet}, {&snap091, proto091Set}} {
			o.ObserveInt64(received, int64(ps.s.Received), ps.set)
			o.ObserveInt64(receivedConfirm, int64(ps.s.ReceivedConfirm), ps.set)
			o.ObserveInt64(routed, int64(ps.s.Routed), ps.set)
			o.ObserveInt64(unroutableDropped, int64(ps.s.UnroutableDropped), ps.set)
			o.ObserveInt64(unroutableReturned, int64(ps.s.UnroutableReturned), ps.set)
			o.ObserveInt64(confirmed, int64(ps.s.Confirmed), ps.set)
			o.ObserveInt64(publishers, ps.s.Publishers, ps.set)
			o.ObserveInt64(consumers, ps.s.Consumers, ps.set)
		}
		// epitaph's gauges count both protocols (a 0-9-1 channel is a
		// session, a consumer a link).
		o.ObserveInt64(connections, snap.Connections+snap091.Connections)
		o.ObserveInt64(sessions, snap.Sessions+snap091.Sessions)
		o.ObserveInt64(links, snap.Links+snap091.Links)
		o.ObserveInt64(authFailures, int64(b.auth.LoginFailures()))
		if b.store != nil {
			st := b.store.Stats()
			o.ObserveInt64(storeCorrupt, int64(st.Corruptions))
			o.ObserveInt64(storeSalvaged, int64(st.Salvaged))
			o.ObserveInt64(storeDiskFull, int64(st.DiskFull))
			o.ObserveInt64(unreadable, b.router.UnreadableMessages())
		}
		o.ObserveInt64(evLost, int64(b.events.Lost()))
		o.ObserveInt64(evSubscribers, int64(b.events.Subscribers()))

		// Per queue: link counters (including queues since deleted) and
		// the live queues' depths.
		type qstate struct {
			link.QueueSnapshot
			info   *router.QueueInfo
			hasCtr bool
		}
		queues := map[link.QueueKey]*qstate{}
		for _, qs := range snap.Queues {
			queues[qs.QueueKey] = &qstate{QueueSnapshot: qs, hasCtr: true}
		}
		for _, qs := range snap091.Queues {
			st := queues[qs.QueueKey]
			if st == nil {
				queues[qs.QueueKey] = &qstate{QueueSnapshot: qs, hasCtr: true}
				continue
			}
			st.Routed += qs.Routed
			st.Delivered += qs.Delivered
			st.DeliveredAutoAck += qs.DeliveredAutoAck
			st.Acknowledged += qs.Acknowledged
			st.Requeued += qs.Requeued
			st.Rejected += qs.Rejected
		}
		for _, vn := range b.router.VHosts() {
			vh, ok := b.router.VHost(vn)
			if !ok {
				continue
			}
			for _, q := range vh.Queues() {
				info := q.Info()
				k := link.QueueKey{VHost: vn, Queue: q.Name()}
				st := queues[k]
				if st == nil {
					st = &qstate{QueueSnapshot: link.QueueSnapshot{QueueKey: k, Type: q.Type()}}
					queues[k] = st
				}
				st.info = &info
			}
		}
		type typeTotals struct{ delivered, auto, acked int64 }
		for k, st := range queues {
			attrs := metric.WithAttributes(attribute.String("vhost", k.VHost), attribute.String("queue", k.Queue))
			if st.info != nil {
				o.ObserveInt64(qReady, int64(st.info.Messages), attrs)
				o.ObserveInt64(qReadyBytes, st.info.MessageBytes, attrs)
				o.ObserveInt64(qUnacked, int64(st.info.MessagesUnacknowledged), attrs)
				o.ObserveInt64(qRetained, int64(st.info.Retained), attrs)
				o.ObserveInt64(qConsumers, int64(st.info.Consumers), attrs)
			}
			o.ObserveInt64(qRouted, int64(st.Routed), attrs)
			o.ObserveInt64(qDelivered, int64(st.Delivered), attrs)
			o.ObserveInt64(qAcked, int64(st.Acknowledged), attrs)
			o.ObserveInt64(qRequeued, int64(st.Requeued), attrs)
			o.ObserveInt64(qRejected, int64(st.Rejected), attrs)
		}
		for _, ps := range []struct {
			s     *link.Snapshot
			proto attribute.KeyValue
		}{{&snap, proto}, {&snap091, proto091}} {
			byType := map[string]*typeTotals{"rabbit_classic_queue": {}, "rabbit_quorum_queue": {}}
			for _, qs := range ps.s.Queues {
				t := byType[rabbitQueueType(qs.Type)]
				t.delivered += int64(qs.Delivered)
				t.auto += int64(qs.DeliveredAutoAck)
				t.acked += int64(qs.Acknowledged)
			}
			for qt, t := range byType {
				attrs := metric.WithAttributes(ps.proto, attribute.String("queue_type", qt))
				o.ObserveInt64(delivered, t.delivered, attrs)
				// basic.get is counted with basic.consume (by acknowledgement mode).
				o.ObserveInt64(deliveredManual, t.delivered-t.auto, attrs)
				o.ObserveInt64(deliveredAuto, t.auto, attrs)
				o.ObserveInt64(getManual, 0, attrs)
				o.ObserveInt64(getAuto, 0, attrs)
				o.ObserveInt64(getEmpty, 0, attrs)
				o.ObserveInt64(acknowledged, t.acked, attrs)
			}
		}

		for k, c := range b.dl.Stats() {
			base := []attribute.KeyValue{attribute.String("vhost", k.VHost), attribute.String("queue", k.Queue),
				attribute.String("reason", string(k.Reason))}
			o.ObserveInt64(qDead, int64(c.DeadLettered), metric.WithAttributes(base...))
			for _, d := range []struct {
				cause string
				n     uint64
			}{{telemetry.DropNoDLX, c.DroppedNoDLX}, {telemetry.DropNoRoute, c.DroppedNoRoute}, {telemetry.DropCycle, c.DroppedCycle}} {
				o.ObserveInt64(qDropped, int64(d.n), metric.WithAttributes(append(base, attribute.String("cause", d.cause))...))
			}
		}
		for k, n := range b.dl.RefusedCopies() {
			o.ObserveInt64(qCopiesRefused, int64(n), metric.WithAttributes(attribute.String("vhost", k.VHost), attribute.String("queue", k.Queue)))
		}
		global := b.dl.GlobalStats()
		for i, f := range deadLetterFamilies {
			for _, s := range f.series {
				qt := router.Classic
				if s[0] == "rabbit_quorum_queue" {
					qt = router.Quorum
				}
				n := global[deadletter.GlobalKey{QueueType: qt, Strategy: s[1], Reason: f.reason}]
				o.ObserveInt64(dlFamilies[i], int64(n), metric.WithAttributes(
					attribute.String("queue_type", s[0]), attribute.String("dead_letter_strategy", s[1])))
			}
		}
		// At-least-once dead letters move atomically once a target took the
		// copy, so every forwarded one is confirmed.
		var confirmedDL int64
		for k, n := range global {
			if k.Strategy == deadletter.StrategyAtLeastOnce {
				confirmedDL += int64(n)
			}
		}
		o.ObserveInt64(dlConfirmed, confirmedDL, metric.WithAttributes(
			attribute.String("queue_type", "rabbit_quorum_queue"), attribute.String("dead_letter_strategy", "at_least_once")))
		return nil
	}, insts...)
	return err
}
