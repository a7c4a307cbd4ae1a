package e2e

import (
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// TestAMQP091ErrorCodes: each refusal gets RabbitMQ's reply code at its
// scope: a soft code closes the channel (the connection and its other
// channels go on), a hard code the connection.
func TestAMQP091ErrorCodes(t *testing.T) {
	b := startBroker(t, "")
	owner := dial091(t, b)
	och := channel091(t, owner)
	_, err := och.QueueDeclare("excl", false, false, true, false, nil)
	require.NoError(t, err)
	_, err = och.QueueDeclare("plain", true, false, false, false, amqp091.Table{"x-max-length": int64(5)})
	require.NoError(t, err)

	cases := []struct {
		name string
		op   func(ch *amqp091.Channel) error
		code int
		hard bool
		text string
	}{
		{"passive declare of a missing queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("nope", false, false, false, false, nil)
			return err
		}, 404, false, "NOT_FOUND - no queue 'nope' in vhost '/'"},
		{"publish to a missing exchange", func(ch *amqp091.Channel) error {
			if err := ch.Publish("nox", "k", false, false, amqp091.Publishing{}); err != nil {
				return err
			}
			_, err := ch.QueueDeclare("", false, true, false, false, nil) // the close arrives before its reply
			return err
		}, 404, false, "NOT_FOUND - no exchange 'nox' in vhost '/'"},
		{"another connection's exclusive queue", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("excl", "", false, false, false, false, nil)
			return err
		}, 405, false, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'excl'"},
		{"inequivalent redeclare", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("plain", true, false, false, false, amqp091.Table{"x-max-length": int64(6)})
			return err
		}, 406, false, "PRECONDITION_FAILED - inequivalent arg 'x-max-length'"},
		{"unknown delivery tag", func(ch *amqp091.Channel) error {
			if err := ch.Ack(42, false); err != nil {
				return err
			}
			_, err := ch.QueueDeclare("", false, true, false, false, nil)
			return err
		}, 406, false, "PRECONDITION_FAILED - unknown delivery tag 42"},
		{"invalid expiration", func(ch *amqp091.Channel) error {
			if err := ch.Publish("", "plain", false, false, amqp091.Publishing{Expiration: "-1"}); err != nil {
				return err
			}
			_, err := ch.QueueDeclare("", false, true, false, false, nil)
			return err
		}, 406, false, "PRECONDITION_FAILED - invalid expiration"},
		{"user-id of another user", func(ch *amqp091.Channel) error {
			if err := ch.Publish("", "plain", false, false, amqp091.Publishing{UserId: "bob"}); err != nil {
				return err
			}
			_, err := ch.QueueDeclare("", false, true, false, false, nil)
			return err
		}, 406, false, "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was 'guest'"},
		{"CC that is not an array", func(ch *amqp091.Channel) error {
			if err := ch.Publish("", "plain", false, false, amqp091.Publishing{Headers: amqp091.Table{"CC": "x"}}); err != nil {
				return err
			}
			_, err := ch.QueueDeclare("", false, true, false, false, nil)
			return err
		}, 406, false, "PRECONDITION_FAILED - invalid message: {unacceptable_type_in_header,\"CC\",longstr}"},
		{"declare of an amq. exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("amq.mine", "direct", false, false, false, false, nil)
		}, 403, false, "ACCESS_REFUSED - exchange name 'amq.mine' contains reserved prefix 'amq.*'"},
		{"declare of an amq. queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("amq.q", true, false, false, false, nil)
			return err
		}, 403, false, "ACCESS_REFUSED - queue name 'amq.q' contains reserved prefix 'amq.*'"},
		{"unknown exchange type", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x-unknown", "x-consistent-hash", false, false, false, false, nil)
		}, 406, false, "PRECONDITION_FAILED - unknown exchange type 'x-consistent-hash'"},
		{"passive declare of a missing exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("nox", "direct", false, false, false, false, nil)
		}, 404, false, "NOT_FOUND - no exchange 'nox' in vhost '/'"},
		{"exclusive consume of a consumed queue", func(ch *amqp091.Channel) error {
			if _, err := ch.Consume("plain", "", false, false, false, false, nil); err != nil {
				return err
			}
			_, err := ch.Consume("plain", "", false, true, false, false, nil)
			return err
		}, 403, false, "ACCESS_REFUSED - queue 'plain' in vhost '/' in exclusive use"},
		{"delete of a queue in use with if-unused", func(ch *amqp091.Channel) error {
			if _, err := ch.Consume("plain", "", false, false, false, false, nil); err != nil {
				return err
			}
			_, err := ch.QueueDelete("plain", true, false, false)
			return err
		}, 406, false, "PRECONDITION_FAILED - queue 'plain' in vhost '/' in use"},
		{"invalid queue argument", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("badargs", true, false, false, false, amqp091.Table{"x-max-length": "abc"})
			return err
		}, 406, false, "PRECONDITION_FAILED - "},
		//lint:ignore SA1019 basic.recover is AMQP 0-9-1, which the broker serves
		{"recover without requeue", func(ch *amqp091.Channel) error { return ch.Recover(false) }, 540, true, "NOT_IMPLEMENTED - requeue=false"},
		{"qos with prefetch-size", func(ch *amqp091.Channel) error { return ch.Qos(1, 10, false) }, 540, true, "NOT_IMPLEMENTED - prefetch_size!=0 (10)"},
		{"tx.commit without tx.select", func(ch *amqp091.Channel) error { return ch.TxCommit() }, 406, false, "PRECONDITION_FAILED - channel is not transactional"},
		{"tx.rollback without tx.select", func(ch *amqp091.Channel) error { return ch.TxRollback() }, 406, false, "PRECONDITION_FAILED - channel is not transactional"},
		{"tx.select in confirm mode", func(ch *amqp091.Channel) error {
			if err := ch.Confirm(false); err != nil {
				return err
			}
			return ch.Tx()
		}, 406, false, "PRECONDITION_FAILED - cannot switch from confirm to tx mode"},
		{"confirm.select in tx mode", func(ch *amqp091.Channel) error {
			if err := ch.Tx(); err != nil {
				return err
			}
			return ch.Confirm(false)
		}, 406, false, "PRECONDITION_FAILED - cannot switch from tx to confirm mode"},
		{"flow(false)", func(ch *amqp091.Channel) error { return ch.Flow(false) }, 540, true, "NOT_IMPLEMENTED - active=false"},
		{"reused consumer tag", func(ch *amqp091.Channel) error {
			if _, err := ch.Consume("plain", "t", false, false, false, false, nil); err != nil {
				return err
			}
			_, err := ch.Consume("plain", "t", false, false, false, false, nil)
			return err
		}, 530, true, "NOT_ALLOWED - attempt to reuse consumer tag 't'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial091(t, b)
			other := channel091(t, c)
			ch := channel091(t, c)
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			e := amqp091Error(t, tc.op(ch))
			if e == amqp091.ErrClosed {
				// The broker's close arrived before the operation that was
				// to see it was sent: the close itself has the reason.
				select {
				case e = <-closed:
					require.NotNil(t, e)
				case <-time.After(10 * time.Second):
					t.Fatal("no close after ErrClosed")
				}
			}
			assert.Equal(t, tc.code, e.Code)
			assert.True(t, strings.HasPrefix(e.Reason, tc.text), "reason %q, want prefix %q", e.Reason, tc.text)
			if tc.hard {
				require.Eventually(t, c.IsClosed, 5*time.Second, 10*time.Millisecond, "connection closed")
				return
			}
			// A channel error leaves the connection and its other channels.
			assert.False(t, c.IsClosed())
			_, err := other.QueueDeclarePassive("plain", true, false, false, false, nil)
			require.NoError(t, err)
		})
	}
}

// TestAMQP091TransientNonExclusiveQueues: permitted by default; with
// permit-transient-nonexcl-queues off, refused with 541 (a connection
// close), as RabbitMQ 4.3 refuses them.
func TestAMQP091TransientNonExclusiveQueues(t *testing.T) {
	b := startBroker(t, "")
	ch := channel091(t, dial091(t, b))
	_, err := ch.QueueDeclare("transient", false, false, false, false, nil)
	require.NoError(t, err)

	strict := startBroker(t, "", func(o *epitaph.Options) { o.PermitTransientNonExclQueues = false })
	c := dial091(t, strict)
	ch = channel091(t, c)
	_, err = ch.QueueDeclare("durable", true, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("excl", false, false, true, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("transient", false, false, false, false, nil)
	e := amqp091Error(t, err)
	assert.Equal(t, 541, e.Code)
	assert.Contains(t, e.Reason, "INTERNAL_ERROR - queue 'transient' in vhost '/'")
	require.Eventually(t, c.IsClosed, 5*time.Second, 10*time.Millisecond)
}
