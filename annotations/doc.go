// Package annotations reads and writes the dead-letter history RabbitMQ 4.3
// writes into a message's annotations: the x-opt-deaths array (one map per
// {queue, reason}, most recent first) and the six x-first-death-* /
// x-last-death-* strings, plus epitaph's x-last-death-error-* additions, and
// maps the history to AMQP 0.9.1's x-death header.
//
// Everything here is a pure function over the value model's values (package
// value; the x-opt-deaths array is encoded with amqp10): no I/O, no shared
// state. A message carries its history in the neutral form (neutral.go:
// a *History among its broker annotations); the AMQP 1.0 form is written
// from it on delivery and into the store.
// The reference is RabbitMQ 4.3's behaviour (mc_amqp, rabbit_dead_letter and
// their test suites), pinned here by golden bytes.
package annotations
