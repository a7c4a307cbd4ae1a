package management

import (
	"fmt"

	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
)

// Operator is one user acting on one virtual host through a management
// front end. Its methods are RabbitMQ's resource-permission rules for each
// management operation (check_resource_access as rabbit_amqp_management and
// the management plugin apply it), so that the two front ends, and the
// operations added later, ask the same question the same way.
//
// Each method returns nil or the registry's refusal (wrapping
// router.ErrAccessRefused, or router.ErrNotFound for an unknown user or
// vhost) unchanged: the status and text a client sees are the front end's
// to choose, because they are part of its protocol.
type Operator struct {
	Auth  *auth.Registry
	User  string
	VHost *router.VHost
	// Token, when the user authenticated with an OAuth 2 token, holds
	// the user's permissions (its scopes) in place of the registry's.
	Token *auth.Token
}

// authorize is auth.Registry.Authorize for o's user and vhost, or the
// token's scopes for a token user.
func (o Operator) authorize(kind, name string, a auth.Access) error {
	if o.Token != nil {
		return o.Token.Authorize(o.VHost.Name(), kind, name, a)
	}
	return o.Auth.Authorize(o.User, o.VHost.Name(), kind, name, a)
}

// CanAccessVHost reports whether o's user may use vhost (the registry's
// permission entry, or a token scope for it).
func (o Operator) CanAccessVHost(vhost string) bool {
	if o.Token != nil {
		return o.Token.CanAccessVHost(vhost)
	}
	return o.Auth.CanAccessVHost(o.User, vhost)
}

// MayConfigureQueue is needed to declare or delete a queue.
func (o Operator) MayConfigureQueue(queue string) error {
	return o.authorize(auth.ResourceQueue, queue, auth.Configure)
}

// MayReadQueue is needed to purge a queue or to get messages from it.
func (o Operator) MayReadQueue(queue string) error {
	return o.authorize(auth.ResourceQueue, queue, auth.Read)
}

// MayWatchDeadLetters is needed to read the dead-letter events of o's
// whole vhost: a read permission there that can match some queue (the
// stream then carries only the events of the queues MayReadQueue allows;
// one queue's events need MayReadQueue).
func (o Operator) MayWatchDeadLetters() error {
	vhost := o.VHost.Name()
	grants := false
	if o.Token != nil {
		grants = o.Token.GrantsRead(vhost)
	} else {
		grants = o.Auth.GrantsRead(o.User, vhost)
	}
	if !grants {
		return fmt.Errorf("%w: read access to the dead-letter events of vhost '%s' refused for user '%s'",
			router.ErrAccessRefused, vhost, o.User)
	}
	return nil
}

// MayDeadLetterTo is needed, on top of configure, to declare queue with
// dlx as its dead-letter exchange: read on the queue and write on the
// exchange, since dead-lettering moves the queue's messages there.
func (o Operator) MayDeadLetterTo(queue, dlx string) error {
	if err := o.MayReadQueue(queue); err != nil {
		return err
	}
	return o.authorize(auth.ResourceExchange, dlx, auth.Write)
}

// MayConfigureExchange is needed to declare or delete an exchange.
func (o Operator) MayConfigureExchange(exchange string) error {
	return o.authorize(auth.ResourceExchange, exchange, auth.Configure)
}

// MayUseAlternateExchange is needed, on top of configure, to declare
// exchange with ae as its alternate exchange: read on the exchange and
// write on the alternate, as rabbit_channel checks.
func (o Operator) MayUseAlternateExchange(exchange, ae string) error {
	if err := o.authorize(auth.ResourceExchange, exchange, auth.Read); err != nil {
		return err
	}
	return o.authorize(auth.ResourceExchange, ae, auth.Write)
}

// MayBind is needed to add or remove a binding from the exchange src to
// dst (an exchange when toExchange, else a queue): write on the
// destination, then read on the source.
func (o Operator) MayBind(src, dst string, toExchange bool) error {
	if err := o.authorize(destinationKind(toExchange), dst, auth.Write); err != nil {
		return err
	}
	return o.authorize(auth.ResourceExchange, src, auth.Read)
}

// MayListBindings is needed to list the bindings from src to dst: read on
// the source, then on the destination. RabbitMQ's AMQP management node
// checks nothing here, which lets anyone list any bindings.
func (o Operator) MayListBindings(src, dst string, toExchange bool) error {
	if err := o.authorize(auth.ResourceExchange, src, auth.Read); err != nil {
		return err
	}
	return o.authorize(destinationKind(toExchange), dst, auth.Read)
}

// destinationKind is the resource kind of a binding's destination.
func destinationKind(toExchange bool) string {
	if toExchange {
		return auth.ResourceExchange
	}
	return auth.ResourceQueue
}
