package link

import (
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/router"
)

// attach handles the peer's attach (section 2.7.3).
func (s *session) attach(a *amqp10.Attach) error {
	if a.Handle > s.c.srv.opts.HandleMax {
		return connErr(amqp10.ErrCondFramingError, "link handle %d exceeds handle-max %d", a.Handle, s.c.srv.opts.HandleMax)
	}
	if s.links[a.Handle] != nil {
		return sessErr(amqp10.ErrCondHandleInUse, "handle %d is already in use", a.Handle)
	}
	delete(s.detaching, a.Handle)
	if limit := s.c.srv.opts.MaxLinksPerConnection; limit > 0 && s.c.links >= limit {
		// handle-max bounds links per session and channel-max sessions per
		// connection; their product (65,536 by default) is far more than a
		// connection needs, so the connection has its own bound.
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondResourceLimitExceeded,
			"link limit (%d per connection) reached", limit))
	}
	if a.Role == amqp10.RoleSender {
		return s.attachReceiver(a)
	}
	return s.attachSender(a)
}

// reply builds our attach reply: same name and handle, the other role, the
// settle modes echoed exactly as requested (go-amqp fails the attach when
// a mode it set comes back different), and, where we send, the source with
// only the filters in force.
func (s *session) reply(a *amqp10.Attach) *amqp10.Attach {
	src := a.Source
	if a.Role == amqp10.RoleReceiver {
		src = withFiltersInForce(src)
	}
	return &amqp10.Attach{
		Name:             a.Name,
		Handle:           a.Handle,
		Role:             !a.Role,
		SndSettleMode:    a.SndSettleMode,
		HasSndSettleMode: a.HasSndSettleMode,
		RcvSettleMode:    a.RcvSettleMode,
		HasRcvSettleMode: a.HasRcvSettleMode,
		Source:           src,
		Target:           a.Target,
		MaxMessageSize:   s.c.srv.opts.MaxMessageSize,
	}
}

// refuse answers an attach we cannot accept: an attach with a null
// terminus on our side, then a closing detach with the error.
func (s *session) refuse(a *amqp10.Attach, e *amqp10.Error) error {
	r := s.reply(a)
	if a.Role == amqp10.RoleSender {
		r.Target = nil
	} else {
		r.Source = nil
	}
	s.c.write(s.local, r, nil)
	s.c.write(s.local, &amqp10.Detach{Handle: a.Handle, Closed: true, Error: e}, nil)
	s.detaching[a.Handle] = true
	s.c.log.Debug("attach refused", "link", a.Name, "condition", string(e.Condition), "description", e.Description)
	return nil
}

// lookupQueue resolves a queue address, declaring bare names when configured.
func (s *session) lookupQueue(ad address) (*router.Queue, *amqp10.Error) {
	vh := s.c.vhost
	if q, ok := vh.Queue(ad.queue); ok {
		return q, nil
	}
	if ad.bare && s.c.srv.opts.AutoCreateQueues {
		if err := s.authorize(auth.ResourceQueue, ad.queue, auth.Configure); err != nil {
			return nil, routerError(err)
		}
		q, _, err := vh.DeclareQueue(router.QueueSpec{Name: ad.queue, Type: router.Classic, Durable: true})
		if err == nil {
			return q, nil
		}
		return nil, routerError(err)
	}
	return nil, amqp10.Errorf(amqp10.ErrCondNotFound, "no queue '%s' in vhost '%s'", ad.queue, vh.Name())
}

// authorize checks the connection's user may access a resource.
func (s *session) authorize(kind, name string, a auth.Access) error {
	if t := s.c.token; t != nil {
		return t.Authorize(s.c.vhost.Name(), kind, name, a)
	}
	return s.c.srv.opts.Auth.Authorize(s.c.user, s.c.vhost.Name(), kind, name, a)
}

// routerError maps a router error to an AMQP error (the boundary between
// the router's errors and the wire's conditions).
func routerError(err error) *amqp10.Error {
	switch {
	case errors.Is(err, router.ErrNotFound):
		return amqp10.Errorf(amqp10.ErrCondNotFound, "%v", err)
	case errors.Is(err, router.ErrResourceLocked):
		return amqp10.Errorf(amqp10.ErrCondResourceLocked, "%v", err)
	case errors.Is(err, router.ErrAccessRefused):
		return amqp10.Errorf(amqp10.ErrCondUnauthorizedAccess, "%v", err)
	case errors.Is(err, router.ErrPreconditionFailed):
		return amqp10.Errorf(amqp10.ErrCondPreconditionFailed, "%v", err)
	case errors.Is(err, router.ErrInvalidArgument), errors.Is(err, router.ErrInvalidXCC):
		return amqp10.Errorf(amqp10.ErrCondInvalidField, "%v", err)
	}
	return amqp10.Errorf(amqp10.ErrCondInternalError, "internal error")
}

// attachReceiver attaches a link on which the peer publishes.
func (s *session) attachReceiver(a *amqp10.Attach) error {
	l := &receiverLink{s: s, handle: a.Handle, name: a.Name, window: publisherCredit,
		second: a.HasRcvSettleMode && a.RcvSettleMode == amqp10.RcvSecond, sndMode: amqp10.SndMixed}
	if a.HasSndSettleMode {
		l.sndMode = a.SndSettleMode
	}
	switch {
	case a.Target == nil || !a.Target.HasAddress:
		if a.Target != nil && a.Target.Coordinator {
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotImplemented, "transactions are not supported"))
		}
		if a.Target != nil && a.Target.Dynamic {
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotImplemented, "dynamic targets are not supported"))
		}
		l.anonymous = true
	default:
		ad, err := parseAddress(a.Target.Address)
		if err != nil {
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondInvalidField, "%v", err))
		}
		switch ad.kind {
		case addrManagement:
			if s.c.srv.opts.Management == nil {
				return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotFound, "no /management node"))
			}
			l.mgmt = true
		case addrQueue:
			if s.c.vhost.HasVolatile(ad.queue) {
				// A direct reply-to address: the default exchange routes
				// there while its consumer lives (then the publishes are
				// released, as to any missing queue).
				if err := s.authorize(auth.ResourceExchange, "", auth.Write); err != nil {
					return s.refuse(a, routerError(err))
				}
				l.exchange, l.key = "", ad.queue
				break
			}
			q, e := s.lookupQueue(ad)
			if e != nil {
				return s.refuse(a, e)
			}
			if err := s.authorize(auth.ResourceExchange, "", auth.Write); err != nil {
				return s.refuse(a, routerError(err))
			}
			l.exchange, l.key, l.queue = "", ad.queue, q
			s.c.watchQueueDeletions()
		case addrExchange:
			if !s.c.vhost.HasExchange(ad.exchange) {
				return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotFound, "no exchange '%s' in vhost '%s'", ad.exchange, s.c.vhost.Name()))
			}
			if err := s.authorize(auth.ResourceExchange, ad.exchange, auth.Write); err != nil {
				return s.refuse(a, routerError(err))
			}
			l.exchange, l.key = ad.exchange, ad.key
		case addrEvents:
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondInvalidField,
				"cannot publish to %q: the dead-letter event stream is a source", a.Target.Address))
		}
	}
	l.deliveryCount = a.InitialDeliveryCount
	s.addLink(a.Handle, l)
	s.c.write(s.local, s.reply(a), nil)
	l.grant()
	return nil
}

// consumerProperties reads a consumer's attach properties: RabbitMQ's
// rabbitmq:priority (the consumer priority; RabbitMQ 4.3 takes only an
// int and silently ignores other types, epitaph takes any integer and
// refuses the rest) and rabbitmq:consumer-timeout, which epitaph does not
// implement and refuses rather than ignore. Other properties carry no
// meaning for the broker.
func consumerProperties(props amqp10.Map) (router.ConsumerOptions, *amqp10.Error) {
	var o router.ConsumerOptions
	for _, kv := range props {
		k, _ := kv.Key.(amqp10.Symbol)
		switch k {
		case "rabbitmq:priority":
			p, err := router.ConsumerPriority(string(k), kv.Value)
			if err != nil {
				return o, routerError(err)
			}
			o.Priority = p
		case "rabbitmq:consumer-timeout":
			return o, amqp10.Errorf(amqp10.ErrCondPreconditionFailed,
				"link property 'rabbitmq:consumer-timeout': consumer timeouts are not supported by epitaph")
		}
	}
	return o, nil
}

// attachSender attaches a link on which the broker sends (a consumer).
func (s *session) attachSender(a *amqp10.Attach) error {
	src := a.Source
	var q *router.Queue
	// Before a dynamic source declares its queue.
	opts, perr := consumerProperties(a.Properties)
	if perr != nil {
		return s.refuse(a, perr)
	}
	switch {
	case src != nil && src.Dynamic && hasCapability(src.Capabilities, capVolatileQueue):
		return s.attachVolatile(a)
	case src != nil && src.Dynamic:
		name := "epitaph.gen-" + randomHex(12)
		if err := s.authorize(auth.ResourceQueue, name, auth.Configure); err != nil {
			return s.refuse(a, routerError(err))
		}
		var err error
		q, _, err = s.c.vhost.DeclareQueue(router.QueueSpec{Name: name, Type: router.Classic,
			Exclusive: true, AutoDelete: true, Owner: s.c})
		if err != nil {
			return s.refuse(a, routerError(err))
		}
		cp := *src
		cp.Address, cp.HasAddress = "/queues/"+name, true
		src = &cp
	case src == nil || !src.HasAddress:
		return s.refuse(a, amqp10.Errorf(amqp10.ErrCondInvalidField, "source address is required"))
	default:
		ad, err := parseAddress(src.Address)
		if err != nil {
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondInvalidField, "%v", err))
		}
		switch ad.kind {
		case addrQueue:
			var e *amqp10.Error
			if q, e = s.lookupQueue(ad); e != nil {
				return s.refuse(a, e)
			}
			if err := s.authorize(auth.ResourceQueue, ad.queue, auth.Read); err != nil {
				return s.refuse(a, routerError(err))
			}
		case addrManagement:
			if s.c.srv.opts.Management == nil {
				return s.refuse(a, amqp10.Errorf(amqp10.ErrCondNotFound, "no /management node"))
			}
			return s.attachMgmtSender(a)
		case addrEvents:
			return s.attachEventsSender(a, ad)
		default:
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondInvalidField,
				"cannot consume from exchange address %q: consume from a queue", src.Address))
		}
	}
	var inForce amqp10.Map
	consumer := opts
	consumer.Owner = s.c
	if src != nil && src.Filter != nil {
		var set *filter.Set
		var err error
		if inForce, set, err = filter.Parse(src.Filter, s.c.srv.filterLimits()); err != nil {
			return s.refuse(a, amqp10.Errorf(amqp10.ErrCondInvalidField, "%v", err))
		}
		if set != nil {
			consumer.Filter = set
		}
	}
	if src != nil && src.DistributionMode == "copy" {
		return s.attachBrowser(a, q, src, inForce, consumer.Filter)
	}
	l := &senderLink{s: s, handle: a.Handle, name: a.Name, filters: inForce,
		preSettled:     a.HasSndSettleMode && a.SndSettleMode == amqp10.SndSettled,
		maxMessageSize: a.MaxMessageSize}
	consumer.PreSettled = l.preSettled
	sub, err := q.Subscribe(l, consumer)
	if err != nil {
		return s.refuse(a, routerError(err))
	}
	l.sub = sub
	if ctr := s.c.srv.opts.Counters; ctr != nil {
		l.qc = ctr.queue(q)
	}
	s.addLink(a.Handle, l)
	r := s.reply(a)
	r.Source = withMoveDistribution(withFilters(src, inForce))
	r.InitialDeliveryCount, r.HasInitialDeliveryCount = 0, true
	// Echoed, as RabbitMQ does: the broker sends nothing larger (send).
	r.MaxMessageSize = a.MaxMessageSize
	s.c.write(s.local, r, nil)
	return nil
}

// withFiltersInForce returns src without its filters, for an attach reply
// before any filter is known to be in force (withFilters).
func withFiltersInForce(src *amqp10.Source) *amqp10.Source { return withFilters(src, nil) }

// withFilters returns the source for a consumer's attach reply: "the
// sending endpoint sets the filter actually in place" (AMQP 1.0 section
// 3.5.3), so the reply carries only the filters the consumer gets, inForce
// (filter.Parse's): the AMQP filter expressions epitaph applies. A JMS
// selector, a stream filter or a filter of unknown name is not applied and
// not echoed. RabbitMQ 4.3 omits the selector and unknown filters on
// classic and quorum queues too; it echoes filter expressions and stream
// filters there although those queues do not apply them. The client sees,
// as the specification has it, which of its filters are in force.
func withFilters(src *amqp10.Source, inForce amqp10.Map) *amqp10.Source {
	if src == nil || src.Filter == nil {
		return src
	}
	cp := *src
	cp.Filter = inForce
	return &cp
}

// withMoveDistribution returns the source for a queue consumer's attach
// reply with the distribution mode in force: classic and quorum queues
// move messages to their consumer, so a consumer that asked for copy
// (browsing) reads move and knows it does not browse. RabbitMQ 4.3 sets
// the mode of these queues, move, in every consumer's reply.
func withMoveDistribution(src *amqp10.Source) *amqp10.Source {
	if src == nil {
		return nil
	}
	cp := *src
	cp.DistributionMode = "move"
	return &cp
}

// addLink registers an attached link.
func (s *session) addLink(h uint32, l endpoint) {
	s.links[h] = l
	s.c.links++
	if ctr := s.c.srv.opts.Counters; ctr != nil {
		ctr.linkAdded(l, 1)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// filterLimits are the limits on a consumer's filter expressions.
func (srv *Server) filterLimits() filter.Limits {
	o := &srv.opts.AMQP
	return filter.Limits{SQLMaxLength: o.FilterSQLMaxLength, SQLMaxTokens: o.FilterSQLMaxTokens,
		SQLMaxDepth: o.FilterSQLMaxDepth, MaxFields: o.FilterMaxFields}
}
