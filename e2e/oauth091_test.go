package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OAuth 2 tokens over AMQP 0-9-1, as RabbitMQ's OAuth 2 backend takes
// them: the token is the password (the user name is ignored), its scopes
// are the permissions, the connection is closed with 320 "credential
// expired" at its exp, and connection.update-secret replaces it.

// dial091Token connects amqp091-go with token as the password.
func dial091Token(t *testing.T, b *oauthBroker, token string) (*amqp091.Connection, error) {
	t.Helper()
	u := url.URL{Scheme: "amqp", User: url.UserPassword("ignored", token), Host: b.Addr().String(), Path: "/"}
	c, err := amqp091.Dial(u.String())
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// awaitClose091 waits for the broker's connection.close.
func awaitClose091(t *testing.T, closed chan *amqp091.Error, within time.Duration) *amqp091.Error {
	t.Helper()
	select {
	case e := <-closed:
		require.NotNil(t, e, "closed without an error")
		return e
	case <-time.After(within):
		t.Fatalf("connection not closed within %v", within)
		return nil
	}
}

func TestOAuth091TokenIsThePasswordAndItsScopesThePermissions(t *testing.T) {
	b := startOAuthBroker(t)
	declareQueue(t, b.Broker, "mine", "classic", nil)
	declareQueue(t, b.Broker, "theirs", "classic", nil)
	c, err := dial091Token(t, b, hsToken(t, "alice", time.Now().Add(time.Hour),
		"rabbitmq.read:*/mine", "rabbitmq.write:*/*"))
	require.NoError(t, err)
	ch := channel091(t, c)
	_, err = ch.Consume("mine", "", true, false, false, false, nil)
	require.NoError(t, err)

	ch2 := channel091(t, c)
	_, err = ch2.Consume("theirs", "", true, false, false, false, nil)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, amqp091.AccessRefused, ae.Code)
	assert.Contains(t, ae.Reason, "read access to queue 'theirs' in vhost '/' refused for user 'alice'")

	// The token's user is the connection's: user_id must name it.
	ch3 := channel091(t, c)
	// Registered before the publishes: a close that came first would
	// reach a later registration as a closed channel (nil).
	closed := ch3.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch3.Publish("", "mine", false, false, amqp091.Publishing{UserId: "alice", Body: []byte("ok")}))
	require.NoError(t, ch3.Publish("", "mine", false, false, amqp091.Publishing{UserId: "bob", Body: []byte("no")}))
	select {
	case e := <-closed:
		require.NotNil(t, e)
		assert.Equal(t, amqp091.PreconditionFailed, e.Code)
	case <-time.After(10 * time.Second):
		t.Fatal("publish with another user_id not refused")
	}

	// A bad token is a refused login, not a crash; a stored user still logs in.
	_, err = dial091Token(t, b, hsToken(t, "alice", time.Now().Add(-time.Minute)))
	require.ErrorIs(t, err, amqp091.ErrCredentials)
	_ = dial091(t, b.Broker)
}

func TestOAuth091ConnectionClosedAtExpiry(t *testing.T) {
	b := startOAuthBroker(t)
	c, err := dial091Token(t, b, hsToken(t, "alice", time.Now().Add(2*time.Second)))
	require.NoError(t, err)
	e := awaitClose091(t, c.NotifyClose(make(chan *amqp091.Error, 1)), 10*time.Second)
	assert.Equal(t, amqp091.ConnectionForced, e.Code)
	assert.Equal(t, "CONNECTION_FORCED - credential expired", e.Reason)
	eventually(t, "the expiry's log", func() bool {
		return strings.Contains(b.logs.String(), "credential has expired")
	})
}

// connection.update-secret with a later token keeps the connection past
// the first token's expiry, and its scopes replace the first's: a consumer
// the new token may not read from is cancelled.
func TestOAuth091UpdateSecretExtendsAndRechecksConsumers(t *testing.T) {
	b := startOAuthBroker(t)
	declareQueue(t, b.Broker, "kept", "classic", nil)
	declareQueue(t, b.Broker, "lost", "classic", nil)
	first := time.Now().Add(2 * time.Second)
	c, err := dial091Token(t, b, hsToken(t, "alice", first))
	require.NoError(t, err)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	ch := channel091(t, c)
	cancelled := ch.NotifyCancel(make(chan string, 2))
	_, err = ch.Consume("kept", "c-kept", true, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.Consume("lost", "c-lost", true, false, false, false, nil)
	require.NoError(t, err)

	require.NoError(t, c.UpdateSecret(hsToken(t, "alice", time.Now().Add(time.Hour),
		"rabbitmq.read:*/kept", "rabbitmq.write:*/*", "rabbitmq.configure:*/*"), "refresh"))
	select {
	case tag := <-cancelled:
		assert.Equal(t, "c-lost", tag)
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer on a queue the new token may not read was not cancelled")
	}

	// Past the first token's expiry (plus its second of rounding), the
	// connection is still open and the kept consumer still gets messages.
	<-time.After(time.Until(first.Add(1500 * time.Millisecond)))
	select {
	case e := <-closed:
		t.Fatalf("closed after update-secret: %v", e)
	case tag := <-cancelled:
		t.Fatalf("consumer %s cancelled too", tag)
	default:
	}
	_, err = ch.QueueDeclare("late", false, false, false, false, nil)
	require.NoError(t, err)
}

func TestOAuth091UpdateSecretWithAnotherUserCloses(t *testing.T) {
	b := startOAuthBroker(t)
	c, err := dial091Token(t, b, hsToken(t, "alice", time.Now().Add(time.Hour)))
	require.NoError(t, err)
	closed := c.NotifyClose(make(chan *amqp091.Error, 1))
	_ = c.UpdateSecret(hsToken(t, "mallory", time.Now().Add(time.Hour)), "refresh")
	e := awaitClose091(t, closed, 10*time.Second)
	assert.Equal(t, amqp091.NotAllowed, e.Code)
	assert.Equal(t, "NOT_ALLOWED - New secret was refused by one of the backends", e.Reason)
	eventually(t, "the refusal's log", func() bool {
		return strings.Contains(b.logs.String(), "secret update refused")
	})
}

// A stored user's credential never expires: RabbitMQ acknowledges its
// update-secret and changes nothing.
func TestOAuth091UpdateSecretOfAStoredUserIsAcknowledged(t *testing.T) {
	b := startOAuthBroker(t)
	c := dial091(t, b.Broker)
	require.NoError(t, c.UpdateSecret("another password", "rotation"))
	ch := channel091(t, c)
	_, err := ch.QueueDeclare("still-open", false, false, false, false, nil)
	require.NoError(t, err)
}
