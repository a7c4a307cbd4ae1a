// Package httpapi is the RabbitMQ-compatible management HTTP API, following
// the paths, JSON shapes and statuses of RabbitMQ 4.3's management plugin so
// that existing tools (and epitaphctl) work unchanged: overview, vhosts,
// users, permissions, policies, queues (declare, delete, purge, get
// messages with a readable dead-letter history), exchanges, bindings,
// definitions export and import, the open AMQP connections and their
// sessions (listed and closed through Options.Connections, which the AMQP front end
// implements), the health checks, and /metrics when given a handler.
//
// Requests authenticate with HTTP basic auth against the broker's users and
// need a management tag. Routing, JSON decoding and the mapping of router
// errors to RabbitMQ's {"error","reason"} bodies are this package's; the
// permission rules are management.Operator's. It does not import the AMQP
// management node (management/amqpnode), nor does that import it.
package httpapi
