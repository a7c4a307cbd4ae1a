// Package amqpnode is RabbitMQ 4's AMQP 1.0 management node: "HTTP over
// AMQP" on the /management link pair, modelled on rabbit_amqp_management.erl
// and shaped for github.com/rabbitmq/rabbitmq-amqp-go-client, whose requests
// (declare, inspect, purge and delete queues; declare and delete exchanges;
// bind, unbind and list bindings) it answers with RabbitMQ 4's statuses,
// response types and error texts.
//
// A Node implements link.ManagementNode: the link layer hands it each
// request message with the connection's identity, user and vhost, and
// sends back the encoded response. Decoding the amqp-value bodies, the
// name rules and the mapping of router errors to statuses are this
// package's; the permission rules are management.Operator's. It does not
// import the HTTP API (management/httpapi), nor does that import it.
package amqpnode
