// Package router is epitaph's data model: virtual hosts, exchanges
// (direct, fanout, topic, headers, x-local-random, x-modulus-hash),
// bindings, queues (classic and quorum) with their consumers, TTL expiry and
// overflow, and policies. Users and permissions are package auth's (reached
// through Accounts), the resource alarms package alarm's (Broker.Alarms).
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
