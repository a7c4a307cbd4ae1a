package httpapi

import (
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// Routing of a dead-letter flow: how its target queues are known.
const (
	// flowRoutingKey: the queue has a dead-letter routing key, so the
	// broker routed it through the dead-letter exchange to find the
	// targets, as it routes a dead message.
	flowRoutingKey = "routing_key"
	// flowOriginalKeys: no dead-letter routing key, so each message is
	// routed with its own keys and the targets depend on the message.
	flowOriginalKeys = "original_keys"
	// flowMessageDependent: a headers exchange (or one the broker could not
	// route through), whose targets depend on the message's headers.
	flowMessageDependent = "message_dependent"
	// flowNone: no dead-letter exchange; dead messages are dropped.
	flowNone = "none"
)

// deadLetterFlows answers GET /api/dead-letter-flows[/{vhost}]: for every
// queue of the scope that has a dead-letter exchange (by argument or
// policy) or has dead-lettered or dropped anything, where its dead
// messages go: the exchange, the routing key, which of the two configured
// it, the target queues the broker's own routing finds for the routing key,
// and the queue's dead-letter counters. It is what the web console draws
// its flow graph from; it is computed from the effective configuration, so
// a policy's flow shows as an argument's does.
func (s *server) deadLetterFlows(req *request) error {
	return s.listInScope(req, func(v *router.VHost, out []map[string]any) []map[string]any {
		for _, q := range v.Queues() {
			if f := s.flowJSON(v, q); f != nil {
				out = append(out, f)
			}
		}
		return out
	})
}

// flowJSON is one queue's flow, or nil when it has none: no dead-letter
// exchange and nothing counted.
func (s *server) flowJSON(v *router.VHost, q *router.Queue) map[string]any {
	info := q.Info()
	counters := s.deadLetteringJSON(info.VHost, info.Name)
	dlx, hasDLX := q.DeadLetterExchange()
	if !hasDLX && len(counters) == 0 {
		return nil
	}
	out := map[string]any{
		"vhost": info.VHost, "queue": info.Name, "queue_type": string(info.Type),
		"dead_letter_exchange": nil, "dead_letter_routing_key": nil, "configured_by": nil, "policy": nil,
		"strategy": q.DeadLetterStrategy(), "exchange_exists": false, "exchange_type": nil,
		"routing": flowNone, "target_queues": []string{}, "dead_lettering": counters,
		"messages": info.Messages + info.MessagesUnacknowledged + info.MessagesDelayed,
	}
	if !hasDLX {
		return out
	}
	out["dead_letter_exchange"] = dlx
	// A queue argument wins over a policy, as in RabbitMQ.
	if _, byArg := mapJSON(info.Arguments)["x-dead-letter-exchange"]; byArg {
		out["configured_by"] = "argument"
	} else {
		out["configured_by"] = "policy"
		out["policy"] = info.Policy
	}
	x, exists := v.Exchange(dlx)
	out["exchange_exists"] = exists
	if exists {
		out["exchange_type"] = x.Type
	}
	rk, hasKey := q.DeadLetterRoutingKey()
	switch {
	case !hasKey:
		out["routing"] = flowOriginalKeys
	case exists && x.Type == "headers":
		out["dead_letter_routing_key"] = rk
		out["routing"] = flowMessageDependent
	default:
		out["dead_letter_routing_key"] = rk
		out["routing"] = flowRoutingKey
		if exists {
			m := router.NewAMQP10Message(amqp10.NewMessage(nil, nil, nil, nil))
			m.Exchange, m.RoutingKeys = dlx, []string{rk}
			queues, err := v.Route(dlx, m)
			if err != nil {
				out["routing"] = flowMessageDependent
				break
			}
			names := make([]string, 0, len(queues))
			for _, t := range queues {
				names = append(names, t.Name())
			}
			out["target_queues"] = names
		}
	}
	return out
}
