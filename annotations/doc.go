// Package annotations reads and writes the dead-letter history RabbitMQ 4.3
// writes into a message's annotations: the x-opt-deaths array (one map per
// {queue, reason}, most recent first) and the six x-first-death-* /
// x-last-death-* strings, plus epitaph's x-last-death-error-* additions, and
// maps the history to AMQP 0.9.1's x-death header.
//
// Everything here is a pure function over amqp10 values: no I/O, no state.
// The reference is RabbitMQ 4.3's behaviour (mc_amqp, rabbit_dead_letter and
// their test suites), pinned here by golden bytes.
package annotations
