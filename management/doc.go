// Package management is epitaph's management plane: what a user may do to
// the broker at run time, with RabbitMQ's rules, whichever front end asks.
//
// Its two front ends are sub-packages, each one protocol:
//
//   - amqpnode: RabbitMQ 4's AMQP 1.0 management node (HTTP over AMQP on the
//     /management link pair), used by the official RabbitMQ AMQP clients to
//     declare queues, exchanges and bindings; link reaches it only through
//     link.ManagementNode;
//   - httpapi: the HTTP API on its own listener, following RabbitMQ's paths
//     and JSON shapes, which epitaphctl talks to.
//
// This package holds what they share and what does not depend on a wire
// format: Operator, one user acting on one vhost, with the permission each
// operation needs (RabbitMQ's configure/write/read rules, checked through
// auth.Registry.Authorize), and Clip for client-supplied values in log
// records. Each front end decodes its own requests, applies its own name
// rules and turns errors into its own statuses and texts, since those are
// part of its protocol. Declaring, deleting, purging and binding are each
// one router.VHost call, and the checks around that call differ between the
// two RabbitMQ modules mirrored here, in order as well as in text (the HTTP
// API answers 404 for a missing queue before it checks a permission, the
// node checks first; the HTTP API checks the dead-letter exchange rule on
// every declaration, the node only for a new queue), so they stay in each
// front end. Operations with more to them than one router call, which a new
// front end or tool also needs (peeking at and redriving dead letters,
// dead-letter events, a web console), belong here as Operator methods, so
// every front end exposes the same behaviour.
//
// Peeking and redriving live in the sub-package dlops (they need filter,
// annotations and the router's browse and move), which both front ends
// use; the broker gives it a tracer over package telemetry through its
// Tracer interface.
//
// The front ends import this package, dlops, auth, router (and router/ratelog),
// deadletter, annotations and amqp10; this package imports only auth and router, and
// neither front end imports the other.
package management
