// Package management is epitaph's management plane, RabbitMQ-compatible so
// existing tools work unchanged:
//
//   - the AMQP 1.0 management node (RabbitMQ 4's HTTP-over-AMQP on the
//     /management link pair), used by the official RabbitMQ AMQP clients
//     to declare queues, exchanges and bindings (amqp*.go);
//   - the HTTP API on its own listener, following RabbitMQ's paths and JSON
//     shapes, which epitaphctl talks to (http*.go).
//
// Both check RabbitMQ's configure/write/read permissions through
// auth.Registry.Authorize. It sits beside link as a front end of the data
// model: it imports router (and router/ratelog), auth, deadletter,
// annotations and amqp10, and link reaches it only through
// link.ManagementNode.
package management
