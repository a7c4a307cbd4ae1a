package amqpnode

import (
	"errors"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// queueBody is a decoded PUT /queues/{q} body.
type queueBody struct {
	durable, exclusive, autoDelete bool
	args                           amqp10.Map
}

// decodeQueue decodes a queue declaration (decode_queue): boolean
// durable (default true), exclusive and auto_delete, and an arguments map;
// any other property is a 400.
func decodeQueue(body any) (queueBody, error) {
	q := queueBody{durable: true}
	m, err := bodyMap(body, "queue")
	if err != nil {
		return q, err
	}
	for _, kv := range m {
		k, _ := kv.Key.(string)
		switch b, isBool := kv.Value.(bool); {
		case k == "durable" && isBool:
			q.durable = b
		case k == "exclusive" && isBool:
			q.exclusive = b
		case k == "auto_delete" && isBool:
			q.autoDelete = b
		case k == "arguments":
			if q.args, err = arguments(kv.Value); err != nil {
				return q, err
			}
		default:
			return q, fail(statusBadRequest, "bad queue property %v: %v", kv.Key, kv.Value)
		}
	}
	return q, nil
}

// bodyMap requires the body to be a map with utf8 keys.
func bodyMap(body any, what string) (amqp10.Map, error) {
	m, ok := body.(amqp10.Map)
	if !ok {
		return nil, fail(statusBadRequest, "the %s body must be a map, got %s", what, typeName(body))
	}
	for _, kv := range m {
		if _, ok := kv.Key.(string); !ok {
			return nil, fail(statusBadRequest, "bad %s property key %v (%s): keys must be utf8 strings", what, kv.Key, typeName(kv.Key))
		}
	}
	return m, nil
}

// arguments converts an arguments map (utf8 or symbol keys, as
// args_amqp_to_amqpl) to string keys; null is no arguments.
func arguments(v any) (amqp10.Map, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(amqp10.Map)
	if !ok {
		return nil, fail(statusBadRequest, "arguments must be a map, got %s", typeName(v))
	}
	out := make(amqp10.Map, 0, len(m))
	for _, kv := range m {
		var k string
		switch key := kv.Key.(type) {
		case string:
			k = key
		case amqp10.Symbol:
			k = string(key)
		default:
			return nil, fail(statusBadRequest, "unsupported argument %v: keys must be utf8 or symbol", kv.Key)
		}
		out = out.Set(k, kv.Value)
	}
	return out, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case amqp10.Map:
		return "map"
	case amqp10.List:
		return "list"
	case *amqp10.Array:
		return "array"
	case string:
		return "utf8"
	case amqp10.Symbol:
		return "symbol"
	case []byte:
		return "binary"
	case bool:
		return "boolean"
	}
	return "another type"
}

// stringArg returns a string or symbol argument value.
func stringArg(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case amqp10.Symbol:
		return string(s), true
	}
	return "", false
}

// queueMap encodes a queue as RabbitMQ's encode_queue does, key for key
// in its order and with its types (encoding.go): leader, message_count
// (ulong), consumer_count (uint), name, vhost, durable, auto_delete,
// exclusive (tagged booleans), type, arguments (x-queue-type always
// present, as RabbitMQ adds it at declaration, which sorts the table) and
// replicas (an array of utf8).
func (n *Node) queueMap(q *router.Queue) amqp10.Map {
	info := q.Info()
	args, sorted := info.Arguments, false
	if _, ok := args.Get("x-queue-type"); !ok {
		args = append(amqp10.Map{{Key: "x-queue-type", Value: string(info.Type)}}, args...)
		sorted = true
	}
	return amqp10.Map{
		{Key: "leader", Value: n.node},
		{Key: "message_count", Value: uint64(max(info.Messages, 0))},
		{Key: "consumer_count", Value: uint32(max(info.Consumers, 0))},
		{Key: "name", Value: info.Name},
		{Key: "vhost", Value: info.VHost},
		{Key: "durable", Value: rabbitBool(info.Durable)},
		{Key: "auto_delete", Value: rabbitBool(info.AutoDelete)},
		{Key: "exclusive", Value: rabbitBool(info.Exclusive)},
		{Key: "type", Value: string(info.Type)},
		{Key: "arguments", Value: rabbitArguments(args, sorted)},
		{Key: "replicas", Value: &amqp10.Array{Type: amqp10.TypeStr32, Elems: []any{n.node}}},
	}
}

// countMap is the purge and delete answer {"message_count": ulong}.
func countMap(n int) amqp10.Map {
	return amqp10.Map{{Key: "message_count", Value: uint64(max(n, 0))}}
}

// locked refuses (400) an exclusive queue of another connection.
func locked(r *request, q *router.Queue) error {
	if q.Exclusive() && (r.owner == nil || q.Owner() != r.owner) {
		return fail(statusBadRequest, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'", q.Name(), r.VHost.Name())
	}
	return nil
}

// getQueue: GET /queues/{q} → 200 + queue map, or 404. Any user with
// access to the vhost may read it (RabbitMQ checks no resource permission).
func (n *Node) getQueue(r *request, name string) (string, any, error) {
	if !r.CanAccessVHost(r.VHost.Name()) {
		return "", nil, fail(statusForbidden, "access to vhost '%s' refused for user '%s'", r.VHost.Name(), r.User)
	}
	q, ok := r.VHost.Queue(name)
	if !ok {
		return "", nil, fail(statusNotFound, "queue '%s' in vhost '%s' not found", name, r.VHost.Name())
	}
	return statusOK, n.queueMap(q), nil
}

// declareQueue: PUT /queues/{q} → 201 (new) or 200 (existing, equivalent)
// with the queue map; 409 when not equivalent or on a precondition failure
// of the arguments; 400 for an empty name, CR/LF or a malformed body; 403
// for the amq. prefix or a missing permission: configure on the queue and,
// for a new queue with x-dead-letter-exchange, read on the queue and write
// on the dead-letter exchange.
func (n *Node) declareQueue(r *request, name string) (string, any, error) {
	body, err := decodeQueue(r.body)
	if err != nil {
		return "", nil, err
	}
	vhost := r.VHost.Name()
	if name == "" {
		return "", nil, fail(statusBadRequest, "declare queue with empty name not allowed")
	}
	if err := checkName(name); err != nil {
		return "", nil, err
	}
	if err := checkReserved("queue", name, vhost); err != nil {
		return "", nil, err
	}
	if err := forbidden(r.MayConfigureQueue(name)); err != nil {
		return "", nil, err
	}
	if body.exclusive && r.owner == nil {
		return "", nil, fail(statusBadRequest, "exclusive queue '%s' cannot be declared: this management link has no connection to own it", name)
	}
	if _, exists := r.VHost.Queue(name); !exists {
		if err := n.checkDeadLetterExchange(r, name, body.args); err != nil {
			return "", nil, err
		}
	}
	var owner any
	if body.exclusive {
		owner = r.owner
	}
	q, created, err := r.VHost.DeclareQueue(router.QueueSpec{
		Name: name, Durable: body.durable, Exclusive: body.exclusive,
		AutoDelete: body.autoDelete, Owner: owner, Arguments: body.args,
	})
	if err != nil {
		return "", nil, routerError(err)
	}
	status := statusOK
	if created {
		status = statusCreated
	}
	return status, n.queueMap(q), nil
}

// checkDeadLetterExchange is check_dead_letter_exchange: with an
// x-dead-letter-exchange argument, read on the queue and write on the DLX.
func (n *Node) checkDeadLetterExchange(r *request, queue string, args amqp10.Map) error {
	v, ok := args.Get("x-dead-letter-exchange")
	if !ok {
		return nil
	}
	dlx, ok := stringArg(v)
	if !ok {
		return fail(statusBadRequest, "invalid type '%s' for arg 'x-dead-letter-exchange'", typeName(v))
	}
	return forbidden(r.MayDeadLetterTo(queue, dlx))
}

// deleteQueue: DELETE /queues/{q} → 200 + {"message_count": ulong}; a
// missing queue counts 0 (queue deletion is idempotent in RabbitMQ).
func (n *Node) deleteQueue(r *request, name string) (string, any, error) {
	if err := checkName(name); err != nil {
		return "", nil, err
	}
	if err := forbidden(r.MayConfigureQueue(name)); err != nil {
		return "", nil, err
	}
	if q, ok := r.VHost.Queue(name); ok {
		if err := locked(r, q); err != nil {
			return "", nil, err
		}
	}
	count, err := r.VHost.DeleteQueue(name)
	if err != nil && !errors.Is(err, router.ErrNotFound) {
		return "", nil, routerError(err)
	}
	return statusOK, countMap(count), nil
}

// purgeQueue: DELETE /queues/{q}/messages → 200 + {"message_count":
// ulong}; read permission; a missing queue is a 400, as in RabbitMQ.
func (n *Node) purgeQueue(r *request, name string) (string, any, error) {
	if err := forbidden(r.MayReadQueue(name)); err != nil {
		return "", nil, err
	}
	q, ok := r.VHost.Queue(name)
	if !ok {
		return "", nil, fail(statusBadRequest, "no queue '%s' in vhost '%s'", name, r.VHost.Name())
	}
	if err := locked(r, q); err != nil {
		return "", nil, err
	}
	return statusOK, countMap(q.Purge()), nil
}
