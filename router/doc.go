// Package router is epitaph's data model: virtual hosts, exchanges
// (direct, fanout, topic, headers), bindings, queues (classic and quorum) with
// their consumers, TTL expiry and overflow, users, and policies.
//
// Each Queue owns its state behind its own mutex. Lock order: VHost.mu
// (topology) before Queue.mu; a queue lock is never held while calling into
// another queue, the DeadLetterer, or anything that blocks. Consumer.Deliver
// and Consumer.Drained are called with the queue lock held and must only
// hand the delivery off (for example to a connection's mailbox).
//
// router never imports deadletter: dead messages leave a queue through the
// DeadLetterer interface declared here.
package router
