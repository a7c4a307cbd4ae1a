package management

import (
	"errors"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
)

// amqpQueueBody is a decoded PUT /queues/{q} body.
type amqpQueueBody struct {
	durable, exclusive, autoDelete bool
	args                           amqp10.Map
}

// amqpDecodeQueue decodes a queue declaration (decode_queue): boolean
// durable (default true), exclusive and auto_delete, and an arguments map;
// any other property is a 400.
func amqpDecodeQueue(body any) (amqpQueueBody, error) {
	q := amqpQueueBody{durable: true}
	m, err := amqpBodyMap(body, "queue")
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
			if q.args, err = amqpArguments(kv.Value); err != nil {
				return q, err
			}
		default:
			return q, amqpFail(amqpStatusBadRequest, "bad queue property %v: %v", kv.Key, kv.Value)
		}
	}
	return q, nil
}

// amqpBodyMap requires the body to be a map with utf8 keys.
func amqpBodyMap(body any, what string) (amqp10.Map, error) {
	m, ok := body.(amqp10.Map)
	if !ok {
		return nil, amqpFail(amqpStatusBadRequest, "the %s body must be a map, got %s", what, amqpTypeName(body))
	}
	for _, kv := range m {
		if _, ok := kv.Key.(string); !ok {
			return nil, amqpFail(amqpStatusBadRequest, "bad %s property key %v (%s): keys must be utf8 strings", what, kv.Key, amqpTypeName(kv.Key))
		}
	}
	return m, nil
}

// amqpArguments converts an arguments map (utf8 or symbol keys, as
// args_amqp_to_amqpl) to string keys; null is no arguments.
func amqpArguments(v any) (amqp10.Map, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(amqp10.Map)
	if !ok {
		return nil, amqpFail(amqpStatusBadRequest, "arguments must be a map, got %s", amqpTypeName(v))
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
			return nil, amqpFail(amqpStatusBadRequest, "unsupported argument %v: keys must be utf8 or symbol", kv.Key)
		}
		out = out.Set(k, kv.Value)
	}
	return out, nil
}

func amqpTypeName(v any) string {
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

// amqpStringArg returns a string or symbol argument value.
func amqpStringArg(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case amqp10.Symbol:
		return string(s), true
	}
	return "", false
}

// queueMap encodes a queue as RabbitMQ's encode_queue does, with the types
// the official Go client asserts: name/vhost/type/leader str, durable,
// auto_delete and exclusive bool, arguments a non-empty map with utf8 keys
// (x-queue-type always present), replicas an array of str, consumer_count
// uint and message_count ulong.
func (n *AMQPNode) queueMap(q *router.Queue) amqp10.Map {
	info := q.Info()
	args := info.Arguments
	if _, ok := args.Get("x-queue-type"); !ok {
		args = append(amqp10.Map{{Key: "x-queue-type", Value: string(info.Type)}}, args...)
	}
	return amqp10.Map{
		{Key: "leader", Value: n.node},
		{Key: "replicas", Value: &amqp10.Array{Type: amqp10.TypeStr32, Elems: []any{n.node}}},
		{Key: "message_count", Value: uint64(max(info.Messages, 0))},
		{Key: "consumer_count", Value: uint32(max(info.Consumers, 0))},
		{Key: "name", Value: info.Name},
		{Key: "vhost", Value: info.VHost},
		{Key: "durable", Value: info.Durable},
		{Key: "auto_delete", Value: info.AutoDelete},
		{Key: "exclusive", Value: info.Exclusive},
		{Key: "type", Value: string(info.Type)},
		{Key: "arguments", Value: args},
	}
}

// amqpCountMap is the purge and delete answer {"message_count": ulong}.
func amqpCountMap(n int) amqp10.Map {
	return amqp10.Map{{Key: "message_count", Value: uint64(max(n, 0))}}
}

// amqpLocked refuses (400) an exclusive queue of another connection.
func amqpLocked(r *amqpRequest, q *router.Queue) error {
	if q.Exclusive() && (r.owner == nil || q.Owner() != r.owner) {
		return amqpFail(amqpStatusBadRequest, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'", q.Name(), r.vh.Name())
	}
	return nil
}

// getQueue: GET /queues/{q} → 200 + queue map, or 404. Any user with
// access to the vhost may read it (RabbitMQ checks no resource permission).
func (n *AMQPNode) getQueue(r *amqpRequest, name string) (string, any, error) {
	if !n.auth.CanAccessVHost(r.user, r.vh.Name()) {
		return "", nil, amqpFail(amqpStatusForbidden, "access to vhost '%s' refused for user '%s'", r.vh.Name(), r.user)
	}
	q, ok := r.vh.Queue(name)
	if !ok {
		return "", nil, amqpFail(amqpStatusNotFound, "queue '%s' in vhost '%s' not found", name, r.vh.Name())
	}
	return amqpStatusOK, n.queueMap(q), nil
}

// declareQueue: PUT /queues/{q} → 201 (new) or 200 (existing, equivalent)
// with the queue map; 409 when not equivalent or on a precondition failure
// of the arguments; 400 for an empty name, CR/LF or a malformed body; 403
// for the amq. prefix or a missing permission: configure on the queue and,
// for a new queue with x-dead-letter-exchange, read on the queue and write
// on the dead-letter exchange.
func (n *AMQPNode) declareQueue(r *amqpRequest, name string) (string, any, error) {
	body, err := amqpDecodeQueue(r.body)
	if err != nil {
		return "", nil, err
	}
	vhost := r.vh.Name()
	if name == "" {
		return "", nil, amqpFail(amqpStatusBadRequest, "declare queue with empty name not allowed")
	}
	if err := amqpCheckName(name); err != nil {
		return "", nil, err
	}
	if err := amqpCheckReserved("queue", name, vhost); err != nil {
		return "", nil, err
	}
	if err := n.authorize(r, auth.ResourceQueue, name, auth.Configure); err != nil {
		return "", nil, err
	}
	if body.exclusive && r.owner == nil {
		return "", nil, amqpFail(amqpStatusBadRequest, "exclusive queue '%s' cannot be declared: this management link has no connection to own it", name)
	}
	if _, exists := r.vh.Queue(name); !exists {
		if err := n.checkDeadLetterExchange(r, name, body.args); err != nil {
			return "", nil, err
		}
	}
	var owner any
	if body.exclusive {
		owner = r.owner
	}
	q, created, err := r.vh.DeclareQueue(router.QueueSpec{
		Name: name, Durable: body.durable, Exclusive: body.exclusive,
		AutoDelete: body.autoDelete, Owner: owner, Arguments: body.args,
	})
	if err != nil {
		return "", nil, amqpRouterError(err)
	}
	status := amqpStatusOK
	if created {
		status = amqpStatusCreated
	}
	return status, n.queueMap(q), nil
}

// checkDeadLetterExchange is check_dead_letter_exchange: with an
// x-dead-letter-exchange argument, read on the queue and write on the DLX.
func (n *AMQPNode) checkDeadLetterExchange(r *amqpRequest, queue string, args amqp10.Map) error {
	v, ok := args.Get("x-dead-letter-exchange")
	if !ok {
		return nil
	}
	dlx, ok := amqpStringArg(v)
	if !ok {
		return amqpFail(amqpStatusBadRequest, "invalid type '%s' for arg 'x-dead-letter-exchange'", amqpTypeName(v))
	}
	if err := n.authorize(r, auth.ResourceQueue, queue, auth.Read); err != nil {
		return err
	}
	return n.authorize(r, auth.ResourceExchange, dlx, auth.Write)
}

// deleteQueue: DELETE /queues/{q} → 200 + {"message_count": ulong}; a
// missing queue counts 0 (queue deletion is idempotent in RabbitMQ).
func (n *AMQPNode) deleteQueue(r *amqpRequest, name string) (string, any, error) {
	if err := amqpCheckName(name); err != nil {
		return "", nil, err
	}
	if err := n.authorize(r, auth.ResourceQueue, name, auth.Configure); err != nil {
		return "", nil, err
	}
	if q, ok := r.vh.Queue(name); ok {
		if err := amqpLocked(r, q); err != nil {
			return "", nil, err
		}
	}
	count, err := r.vh.DeleteQueue(name)
	if err != nil && !errors.Is(err, router.ErrNotFound) {
		return "", nil, amqpRouterError(err)
	}
	return amqpStatusOK, amqpCountMap(count), nil
}

// purgeQueue: DELETE /queues/{q}/messages → 200 + {"message_count":
// ulong}; read permission; a missing queue is a 400, as in RabbitMQ.
func (n *AMQPNode) purgeQueue(r *amqpRequest, name string) (string, any, error) {
	if err := n.authorize(r, auth.ResourceQueue, name, auth.Read); err != nil {
		return "", nil, err
	}
	q, ok := r.vh.Queue(name)
	if !ok {
		return "", nil, amqpFail(amqpStatusBadRequest, "no queue '%s' in vhost '%s'", name, r.vh.Name())
	}
	if err := amqpLocked(r, q); err != nil {
		return "", nil, err
	}
	return amqpStatusOK, amqpCountMap(q.Purge()), nil
}
