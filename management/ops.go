package management

import "github.com/epitaph-mq/epitaph/router"

// Operator is one user acting on one virtual host through a management
// front end. Its methods are RabbitMQ's resource-permission rules for each
// management operation (check_resource_access as rabbit_amqp_management and
// the management plugin apply it), so that the two front ends, and the
// operations added later, ask the same question the same way.
//
// Each method returns nil or the router's refusal (wrapping
// router.ErrAccessRefused, or router.ErrNotFound for an unknown user or
// vhost) unchanged: the status and text a client sees are the front end's
// to choose, because they are part of its protocol.
type Operator struct {
	Broker *router.Broker
	User   string
	VHost  *router.VHost
}

// authorize is router.Broker.Authorize for o's user and vhost.
func (o Operator) authorize(kind, name string, a router.Access) error {
	return o.Broker.Authorize(o.User, o.VHost.Name(), kind, name, a)
}

// MayConfigureQueue is needed to declare or delete a queue.
func (o Operator) MayConfigureQueue(queue string) error {
	return o.authorize(router.ResourceQueue, queue, router.Configure)
}

// MayReadQueue is needed to purge a queue or to get messages from it.
func (o Operator) MayReadQueue(queue string) error {
	return o.authorize(router.ResourceQueue, queue, router.Read)
}

// MayDeadLetterTo is needed, on top of configure, to declare queue with
// dlx as its dead-letter exchange: read on the queue and write on the
// exchange, since dead-lettering moves the queue's messages there.
func (o Operator) MayDeadLetterTo(queue, dlx string) error {
	if err := o.MayReadQueue(queue); err != nil {
		return err
	}
	return o.authorize(router.ResourceExchange, dlx, router.Write)
}

// MayConfigureExchange is needed to declare or delete an exchange.
func (o Operator) MayConfigureExchange(exchange string) error {
	return o.authorize(router.ResourceExchange, exchange, router.Configure)
}

// MayUseAlternateExchange is needed, on top of configure, to declare
// exchange with ae as its alternate exchange: read on the exchange and
// write on the alternate, as rabbit_channel checks.
func (o Operator) MayUseAlternateExchange(exchange, ae string) error {
	if err := o.authorize(router.ResourceExchange, exchange, router.Read); err != nil {
		return err
	}
	return o.authorize(router.ResourceExchange, ae, router.Write)
}

// MayBind is needed to add or remove a binding from the exchange src to
// dst (an exchange when toExchange, else a queue): write on the
// destination, then read on the source.
func (o Operator) MayBind(src, dst string, toExchange bool) error {
	if err := o.authorize(destinationKind(toExchange), dst, router.Write); err != nil {
		return err
	}
	return o.authorize(router.ResourceExchange, src, router.Read)
}

// MayListBindings is needed to list the bindings from src to dst: read on
// the source, then on the destination. RabbitMQ's AMQP management node
// checks nothing here, which lets anyone list any bindings.
func (o Operator) MayListBindings(src, dst string, toExchange bool) error {
	if err := o.authorize(router.ResourceExchange, src, router.Read); err != nil {
		return err
	}
	return o.authorize(destinationKind(toExchange), dst, router.Read)
}

// destinationKind is the resource kind of a binding's destination.
func destinationKind(toExchange bool) string {
	if toExchange {
		return router.ResourceExchange
	}
	return router.ResourceQueue
}
