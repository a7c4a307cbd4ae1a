package channel

import (
	"maps"
	"slices"
	"time"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/auth"
)

// armCredentialTimer starts the timer that ends the connection at its
// token's expiry (Token.ExpiresIn; none for a stored user). Reader-owned.
func (c *conn) armCredentialTimer() {
	c.stopCredentialTimer()
	if c.token == nil {
		return
	}
	expired := make(chan struct{})
	c.credentialExpired = expired
	c.credentialTimer = time.AfterFunc(c.token.ExpiresIn(time.Now()), func() {
		close(expired)
		// Wake the reader, which sets its read deadline before it looks
		// at expired: whichever comes last, it sees the expiry.
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) stopCredentialTimer() {
	if c.credentialTimer != nil {
		c.credentialTimer.Stop()
		c.credentialTimer = nil
	}
	c.credentialExpired = nil
}

// closedForExpiry closes the connection as RabbitMQ does when its
// credential has expired (320 "credential expired") and reports true, if
// it has. Reader-owned.
func (c *conn) closedForExpiry() bool {
	select {
	case <-c.credentialExpired: // nil without a token: never ready
	default:
		return false
	}
	c.log.Warn("closing AMQP 0-9-1 connection: credential has expired", "user", c.user)
	c.closeConnection(&amqp091.Error{Code: amqp091.ConnectionForced, Text: "credential expired"})
	return true
}

// updateSecret answers connection.update-secret as RabbitMQ 4.3 does. A
// stored user's credential never expires, so nothing changes and the
// update is acknowledged. A token user's new secret must be a valid token
// for the same user that still grants the connection's vhost (else 530,
// connection closed); it then replaces the token, its expiry re-arms the
// timer, and every consumer on a queue the new token does not let the
// user read is cancelled (basic.cancel to a client that takes it).
func (c *conn) updateSecret(m *amqp091.ConnectionUpdateSecret) error {
	if c.token == nil {
		c.log.Info("secret updated; a stored user's credential does not change", "user", c.user, "reason", m.Reason)
		return c.sendMethod(0, &amqp091.ConnectionUpdateSecretOk{})
	}
	next, err := c.srv.opts.Auth.AuthenticateToken(m.NewSecret)
	if err == nil {
		err = c.token.SameUser(next)
	}
	if err != nil {
		c.log.Error("secret update refused", "user", c.user, "err", err)
		return connErr(amqp091.NotAllowed, 10, 70, "New secret was refused by one of the backends")
	}
	if !next.CanAccessVHost(c.vhost.Name()) {
		return connErr(amqp091.NotAllowed, 10, 70, "access to vhost '%s' refused for user '%s'", c.vhost.Name(), c.user)
	}
	c.token = next
	c.armCredentialTimer()
	c.recheckConsumers()
	if err := c.sendMethod(0, &amqp091.ConnectionUpdateSecretOk{}); err != nil {
		return err
	}
	c.log.Info("secret updated", "user", c.user, "reason", m.Reason, "expiry", next.Expiry)
	return nil
}

// recheckConsumers cancels the consumers whose queue the connection's
// token no longer lets its user read. Reader-owned.
func (c *conn) recheckConsumers() {
	vhost := c.vhost.Name()
	for _, id := range slices.Sorted(maps.Keys(c.channels)) {
		ch := c.channels[id]
		ch.mu.Lock()
		var refused []string
		for tag, k := range ch.consumers {
			if c.token.Authorize(vhost, auth.ResourceQueue, k.q.Name(), auth.Read) != nil {
				refused = append(refused, tag)
			}
		}
		ch.mu.Unlock()
		slices.Sort(refused)
		for _, tag := range refused {
			c.log.Warn("cancelling consumer: read access refused after credential update", "channel", id, "consumer", tag)
			ch.stopConsumer(tag)
			if c.hasCapability("consumer_cancel_notify") {
				_ = ch.send(&amqp091.BasicCancel{ConsumerTag: tag, NoWait: true})
			}
		}
	}
}
