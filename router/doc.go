// Package router is epitaph's data model: virtual hosts, exchanges
// (direct, fanout, topic, headers, x-local-random, x-modulus-hash),
// bindings, queues (classic and quorum) with their consumers, TTL expiry and
// overflow, and policies. Users and permissions are package auth's (reached
// through Accounts), the resource alarms package alarm's (Broker.Alarms).
//
// The router speaks no protocol. A message is a Message (message.go): the
// bytes its publisher's protocol encoded, behind the Container interface
// (container.go), plus a protocol-neutral Header, exchange, routing keys,
// delivery count and broker annotations (values of package value). Outcomes
// are router types too (outcome.go): Outcome for a publish, Settlement for
// a consumer's settlement, Error for a refusal. Each front end converts at
// its edge: link (AMQP 1.0) builds an AMQP10 container from a transfer and
// writes the AMQP 1.0 form on delivery. The AMQP 1.0 container
// (amqp10.go) and the store's AMQP-typed encodings (amqp10_store.go) are
// the only files of this package that import amqp10. The dead-letter
// history travels in the broker annotations in its neutral form (package
// annotations: HistoryKey); the AMQP 1.0 delivery writer (amqp10.go:
// AppendAMQP10Delivery) and the store write its AMQP 1.0 form.
//
// One call publishes: VHost.Publish(Publish{...}) routes a message, enqueues
// it and returns a PublishResult; with a store, a durable message is
// confirmed asynchronously through Publish.Confirm, or the call blocks until
// it is synced.
//
// Each Queue owns its state behind its own mutex. Lock order: VHost.mu
// (topology) before Queue.mu; a queue lock is never held while calling into
// another queue, the DeadLetterer, or anything that blocks. Consumer.Deliver
// and Consumer.Drained are called with the queue lock held and must only
// hand the delivery off (for example to a connection's mailbox).
//
// router never imports deadletter: dead messages leave a queue through the
// DeadLetterer interface declared here. A DeadLetterer may publish back into
// the broker (even into the source queue): dead messages are collected under
// the queue lock and handed over, in the order they died, after it is released.
//
// A queue's effective configuration (dead-letter exchange and routing key,
// strategy, TTL, length limits, overflow, delivery limit, x-expires) is its
// declare arguments combined with the highest-priority matching policy, with
// RabbitMQ's per-key precedence (effective.go). PutPolicy, DeletePolicy and
// DeclareQueue recompute it under VHost.mu then each Queue.mu; messages a
// lowered limit drops are handed to the DeadLetterer after both are released.
// The accessors read it lock-free.
//
// Each queue has one time.Timer, re-armed to its earliest deadline: the first
// ready message's expiry (a deadline min-heap) or, for an unused queue with
// x-expires, the queue's own expiry. Broker.Close stops them.
package router
