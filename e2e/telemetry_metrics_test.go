package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

func scrape(t *testing.T, b *epitaph.Broker) string {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTPAddr().String() + "/metrics") // no credentials: /metrics is open
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain; version=0.0.4")
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(text)
}

// TestMetricsScrape runs a scripted flow and asserts exact counter values
// per queue and reason, and RabbitMQ's global families.
func TestMetricsScrape(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.HTTPListen = "127.0.0.1:0"
		o.Telemetry.Metrics = true
	})
	declareQueue(t, b, "m.work", router.Classic, dlArgs("", ptr("m.dlq"), kv("x-max-length", int64(2))))
	declareQueue(t, b, "m.dlq", router.Classic, nil)
	declareQueue(t, b, "m.nodlx", router.Quorum, amqp10.Map{kv("x-message-ttl", int64(0))})
	s := session(t, dial(t, b, nil))

	// 3 into a queue of length 2: m1 dies (maxlen) into m.dlq.
	publishBodies(t, s, "/queues/m.work", "m1", "m2", "m3")
	// One rejected (dead-lettered), one accepted.
	r := receiver(t, s, "/queues/m.work", nil)
	reject(t, r, recv(t, r))
	accept(t, r, recv(t, r))
	// Unroutable, unsettled: released (returned).
	st := send(t, sender(t, s, "/exchanges/amq.direct/nowhere", nil), msg("lost"))
	require.IsType(t, &amqp.StateReleased{}, st)
	// TTL 0 and no consumer: expired at once, no DLX: dropped.
	publishBodies(t, s, "/queues/m.nodlx", "x1", "x2")
	// The DLQ consumer takes both dead letters.
	d := receiver(t, s, "/queues/m.dlq", nil)
	accept(t, d, recv(t, d))
	accept(t, d, recv(t, d))

	want := []string{
		`epitaph_queue_messages_dead_lettered_total{queue="m.work",reason="maxlen",vhost="/"} 1`,
		`epitaph_queue_messages_dead_lettered_total{queue="m.work",reason="rejected",vhost="/"} 1`,
		`epitaph_queue_messages_dead_letter_dropped_total{cause="no_dlx",queue="m.nodlx",reason="expired",vhost="/"} 2`,
		`epitaph_queue_messages_dead_letter_dropped_total{cause="no_route",queue="m.work",reason="maxlen",vhost="/"} 0`,
		`epitaph_queue_messages_dead_lettered_total{queue="m.nodlx",reason="expired",vhost="/"} 0`,
		`epitaph_queue_messages_routed_total{queue="m.work",vhost="/"} 3`,
		`epitaph_queue_messages_routed_total{queue="m.nodlx",vhost="/"} 2`,
		`epitaph_queue_messages_delivered_total{queue="m.work",vhost="/"} 2`,
		`epitaph_queue_messages_acknowledged_total{queue="m.work",vhost="/"} 1`,
		`epitaph_queue_messages_rejected_total{queue="m.work",vhost="/"} 1`,
		`epitaph_queue_messages_requeued_total{queue="m.work",vhost="/"} 0`,
		`epitaph_queue_messages_delivered_total{queue="m.dlq",vhost="/"} 2`,
		`epitaph_queue_messages_acknowledged_total{queue="m.dlq",vhost="/"} 2`,
		`epitaph_queue_messages_ready{queue="m.work",vhost="/"} 0`,
		`epitaph_queue_messages_unacked{queue="m.dlq",vhost="/"} 0`,
		`epitaph_queue_consumers{queue="m.dlq",vhost="/"} 1`,
		`epitaph_connections 1`,
		`epitaph_sessions 1`,
		`rabbitmq_global_messages_received_total{protocol="amqp10"} 6`,
		`rabbitmq_global_messages_received_confirm_total{protocol="amqp10"} 6`,
		`rabbitmq_global_messages_routed_total{protocol="amqp10"} 5`,
		`rabbitmq_global_messages_unroutable_returned_total{protocol="amqp10"} 1`,
		`rabbitmq_global_messages_unroutable_dropped_total{protocol="amqp10"} 0`,
		`rabbitmq_global_messages_confirmed_total{protocol="amqp10"} 5`,
		`rabbitmq_global_messages_delivered_total{protocol="amqp10",queue_type="rabbit_classic_queue"} 4`,
		`rabbitmq_global_messages_delivered_consume_manual_ack_total{protocol="amqp10",queue_type="rabbit_classic_queue"} 4`,
		`rabbitmq_global_messages_acknowledged_total{protocol="amqp10",queue_type="rabbit_classic_queue"} 3`,
		`rabbitmq_global_messages_delivered_total{protocol="amqp10",queue_type="rabbit_quorum_queue"} 0`,
		`rabbitmq_global_messages_dead_lettered_maxlen_total{dead_letter_strategy="at_most_once",queue_type="rabbit_classic_queue"} 1`,
		`rabbitmq_global_messages_dead_lettered_rejected_total{dead_letter_strategy="at_most_once",queue_type="rabbit_classic_queue"} 1`,
		`rabbitmq_global_messages_dead_lettered_expired_total{dead_letter_strategy="disabled",queue_type="rabbit_quorum_queue"} 2`,
		`rabbitmq_global_messages_dead_lettered_expired_total{dead_letter_strategy="at_most_once",queue_type="rabbit_classic_queue"} 0`,
		`rabbitmq_global_messages_dead_lettered_delivery_limit_total{dead_letter_strategy="at_least_once",queue_type="rabbit_quorum_queue"} 0`,
		`rabbitmq_global_messages_dead_lettered_confirmed_total{dead_letter_strategy="at_least_once",queue_type="rabbit_quorum_queue"} 0`,
		`# TYPE rabbitmq_global_messages_dead_lettered_rejected_total counter`,
		`# TYPE epitaph_queue_messages_ready gauge`,
	}
	var text string
	missing := func() []string {
		text = scrape(t, b)
		lines := map[string]bool{}
		for l := range strings.SplitSeq(text, "\n") {
			lines[l] = true
		}
		var out []string
		for _, w := range want {
			if !lines[w] {
				out = append(out, w)
			}
		}
		return out
	}
	eventually(t, "the expected series", func() bool { return len(missing()) == 0 })
	require.Empty(t, missing(), text)
}

// TestMetricsOff: without Telemetry.Metrics there is no /metrics.
func TestMetricsOff(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.HTTPListen = "127.0.0.1:0" })
	resp, err := http.Get("http://" + b.HTTPAddr().String() + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
