package e2e

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AMQP 0-9-1 transactions as RabbitMQ 4.3's channel has them: publishes
// and settlements wait for tx.commit; tx.rollback drops the publishes and
// leaves the settled deliveries unacknowledged.

func TestAMQP091TxPublishesAtCommitOnly(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "txq", "quorum", nil)
	ch := channel091(t, dial091(t, b))
	require.NoError(t, ch.Tx())
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	for _, body := range []string{"a", "b"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "txq", false, false,
			amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte(body)}))
	}
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "nowhere", true, false, amqp091.Publishing{Body: []byte("lost")}))
	// A synchronous call on the channel: the publishes before it were read.
	_, err := ch.QueueDeclarePassive("txq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	assert.Equal(t, 0, queueLen(t, b, "txq"), "nothing is delivered before the commit")
	select {
	case r := <-returns:
		t.Fatalf("returned before the commit: %v", r)
	default:
	}

	require.NoError(t, ch.TxCommit())
	assert.Equal(t, 2, queueLen(t, b, "txq"))
	select {
	case r := <-returns:
		assert.Equal(t, uint16(amqp091.NoRoute), r.ReplyCode)
		assert.Equal(t, "lost", string(r.Body))
	case <-time.After(10 * time.Second):
		t.Fatal("the unroutable mandatory publish was not returned at the commit")
	}

	// Rolled back: gone.
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", "txq", false, false, amqp091.Publishing{Body: []byte("c")}))
	require.NoError(t, ch.TxRollback())
	require.NoError(t, ch.TxCommit())
	assert.Equal(t, 2, queueLen(t, b, "txq"))
}

func TestAMQP091TxAcksAtCommitAndRollbackKeepsThemUnacked(t *testing.T) {
	b := startBroker(t, "")
	declareQueue(t, b, "txacks", "classic", nil)
	pub := channel091(t, dial091(t, b))
	for _, body := range []string{"one", "two"} {
		require.NoError(t, pub.PublishWithContext(ctxT(t), "", "txacks", false, false, amqp091.Publishing{Body: []byte(body)}))
	}
	eventually(t, "both queued", func() bool { return queueLen(t, b, "txacks") == 2 })

	ch := channel091(t, dial091(t, b))
	require.NoError(t, ch.Tx())
	ds, err := ch.Consume("txacks", "", false, false, false, false, nil)
	require.NoError(t, err)
	one, two := recv091(t, ds), recv091(t, ds)
	require.NoError(t, one.Ack(false))
	require.NoError(t, ch.TxRollback())
	// The rolled-back ack: "one" is still unacknowledged, and can be
	// acked again (no unknown-tag error) in the next transaction.
	require.NoError(t, one.Ack(false))
	require.NoError(t, two.Reject(false))
	_, err = ch.QueueDeclarePassive("txacks", false, false, false, false, nil)
	require.NoError(t, err)
	info := queueInfo(t, b, "txacks")
	assert.Equal(t, 2, info.MessagesUnacknowledged, "settled in the transaction only: %+v", info)
	require.NoError(t, ch.TxCommit())
	eventually(t, "both settled", func() bool {
		info := queueInfo(t, b, "txacks")
		return info.Messages == 0 && info.MessagesUnacknowledged == 0
	})
}

// A queue that refuses a message (overflow reject-publish) fails the commit
// with 406 "partial tx completion", as RabbitMQ does; what else the
// transaction did has taken effect.
func TestAMQP091TxPartialCompletion(t *testing.T) {
	b := startBroker(t, "")
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("small", true, false, false, false, amqp091.Table{"x-max-length": int64(1), "x-overflow": "reject-publish"})
	require.NoError(t, err)
	require.NoError(t, ch.Tx())
	for _, body := range []string{"fits", "refused"} {
		require.NoError(t, ch.PublishWithContext(ctxT(t), "", "small", false, false, amqp091.Publishing{Body: []byte(body)}))
	}
	err = ch.TxCommit()
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, amqp091.PreconditionFailed, ae.Code)
	assert.Equal(t, "PRECONDITION_FAILED - partial tx completion", ae.Reason)
	assert.Equal(t, 1, queueLen(t, b, "small"))
}
