package link

import (
	"errors"
	"fmt"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
)

// errCredential is a refused credential update (PUT /auth/tokens).
var errCredential = errors.New("link: credential update refused")

// credentialExpired is RabbitMQ's close when a connection's token expires
// (rabbit_amqp_reader's credential_expired).
func credentialExpired() *amqp10.Error {
	return &amqp10.Error{Condition: amqp10.ErrCondUnauthorizedAccess, Description: "credential expired"}
}

// armCredentialTimer closes the connection when its token expires; a
// connection without a token never expires. Loop-owned.
//
// The timer runs for Token.ExpiresIn, as RabbitMQ 4.3's reader arms it
// (exp is in seconds, so a client that asks for a token one second ahead
// gets its second).
func (c *conn) armCredentialTimer() {
	c.stopCredentialTimer()
	if c.token == nil {
		return
	}
	c.credentialTimer = time.AfterFunc(c.token.ExpiresIn(time.Now()), func() {
		c.log.Info("closing connection: credential expired", "user", c.user)
		c.forceCloseWith(credentialExpired())
	})
}

func (c *conn) stopCredentialTimer() {
	if c.credentialTimer != nil {
		c.credentialTimer.Stop()
		c.credentialTimer = nil
	}
}

// AuthToken is the connection's OAuth 2 token, nil for a stored user. The
// management node asks it on the connection's loop, for the permissions
// of a request.
func (c *conn) AuthToken() *auth.Token { return c.token }

// RefreshToken replaces the connection's token with raw (RabbitMQ's
// set_credential), on the loop: the new token must be valid, name the same
// user and grant access to the connection's vhost; then its scopes are the
// connection's permissions and its expiry the connection's. Otherwise the
// connection is closed with amqp:unauthorized-access, as RabbitMQ does,
// without saying which check failed; the reason is logged and returned.
func (c *conn) RefreshToken(raw string) error {
	err := c.refreshToken(raw)
	if err != nil {
		c.log.Warn("credential update refused; closing the connection", "user", c.user, "err", err)
		c.forceCloseWith(&amqp10.Error{Condition: amqp10.ErrCondUnauthorizedAccess, Description: "credential update failed"})
		return err
	}
	c.log.Info("credential updated", "user", c.user, "expiry", c.token.Expiry)
	return nil
}

func (c *conn) refreshToken(raw string) error {
	if c.token == nil {
		return fmt.Errorf("%w: the connection did not authenticate with a token", errCredential)
	}
	next, err := c.srv.opts.Auth.AuthenticateToken(raw)
	if err != nil {
		return fmt.Errorf("%w: %w", errCredential, err)
	}
	if err := c.token.SameUser(next); err != nil {
		return fmt.Errorf("%w: %w", errCredential, err)
	}
	if !next.CanAccessVHost(c.vhost.Name()) {
		return fmt.Errorf("%w: new token grants no access to vhost '%s'", errCredential, c.vhost.Name())
	}
	c.token = next
	c.armCredentialTimer()
	return nil
}

// mayUseVHost reports whether the connection's user may open vhost: by
// its token's scopes, or the registry's permissions.
func (c *conn) mayUseVHost(vhost string) bool {
	if c.token != nil {
		return c.token.CanAccessVHost(vhost)
	}
	return c.srv.opts.Auth.CanAccessVHost(c.user, vhost)
}

// tokenLogin authenticates a PLAIN password as an OAuth 2 token when the
// broker accepts tokens and the password has a token's shape. It returns
// nil, nil when the password is not to be taken as a token, and nil and
// the reason (for the log only) when the token is refused.
func (c *conn) tokenLogin(pass string) (tok *auth.Token, err error) {
	reg := c.srv.opts.Auth
	if !reg.OAuthEnabled() || !auth.LooksLikeJWT(pass) {
		return nil, nil
	}
	return reg.AuthenticateToken(pass)
}
