package e2e

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// An at-most-once dead-letter copy that its target refuses (x-overflow
// reject-publish) is lost, as in RabbitMQ; epitaph does not lose it
// silently: each refused copy is counted per target queue and logged.
// Transient messages go through the batched enqueue, durable ones through
// the atomic store move: both are counted.
func TestDeadLetterCopyRefusedByTargetIsCountedAndLogged(t *testing.T) {
	logs := &syncBuffer{}
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.HTTPListen = "127.0.0.1:0"
		o.Telemetry.Metrics = true
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	declareQueue(t, b, "r.work", router.Classic, dlArgs("", ptr("r.full")))
	declareQueue(t, b, "r.full", router.Classic, amqp10.Map{kv("x-max-length", int64(1)), kv("x-overflow", "reject-publish")})
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/r.work", nil)
	for i, durable := range []bool{false, false, true, true} {
		m := msg([]string{"t1", "t2", "d1", "d2"}[i])
		m.Header = &amqp.MessageHeader{Durable: durable}
		require.Equal(t, &amqp.StateAccepted{}, send(t, snd, m))
	}
	r := receiver(t, s, "/queues/r.work", nil)
	for range 4 {
		reject(t, r, recv(t, r))
	}
	eventually(t, "three copies refused", func() bool {
		return strings.Contains(scrape(t, b), `epitaph_queue_dead_letter_copies_refused_total{queue="r.full",vhost="/"} 3`)
	})
	assert.Equal(t, 1, queueLen(t, b, "r.full"))
	assert.Contains(t, logs.String(), "dead-letter copies refused by their target queue")
	assert.Contains(t, logs.String(), "target_queue=r.full")
}
