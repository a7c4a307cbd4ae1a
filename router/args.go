package router

import (
	"fmt"
	"strings"

	"github.com/epitaph-mq/epitaph/value"
)

// Overflow behaviours (x-overflow).
const (
	OverflowDropHead         = "drop-head"
	OverflowRejectPublish    = "reject-publish"
	OverflowRejectPublishDLX = "reject-publish-dlx"
)

// Dead-letter strategies (x-dead-letter-strategy, quorum queues only).
const (
	StrategyAtMostOnce  = "at-most-once"
	StrategyAtLeastOnce = "at-least-once"
)

// DefaultDeliveryLimit is a quorum queue's x-delivery-limit when unset (RabbitMQ 4.0+).
const DefaultDeliveryLimit = 20

// maxExpiryTimer bounds x-message-ttl and x-expires (RabbitMQ's ?MAX_EXPIRY_TIMER).
const maxExpiryTimer = 1<<32 - 1

// queueConfig is a queue's effective configuration: its x-arguments
// combined with its effective policy (effective.go). parseQueueArgs returns
// the arguments-only form.
type queueConfig struct {
	messageTTL    int64 // ms; -1 none
	expires       int64 // ms; 0 none
	maxLen        int64 // -1 none
	maxBytes      int64 // -1 none
	overflow      string
	deliveryLimit int64 // quorum; negative = unlimited
	dlx           string
	hasDLX        bool
	dlrk          string
	hasDLRK       bool
	dlStrategy    string // effective: at-least-once only when all its conditions hold
	policy        string // the applied policy's name; "" when none
	retry         delayedRetry
}

// streamType names RabbitMQ's stream queue type, which epitaph does not
// have: its arguments are refused on classic and quorum queues as RabbitMQ
// refuses them there.
const streamType QueueType = "stream"

// typeOnlyArgs lists declare arguments valid for one queue type only.
var typeOnlyArgs = map[string]QueueType{
	"x-delivery-limit":                Quorum,
	"x-dead-letter-strategy":          Quorum,
	"x-quorum-initial-group-size":     Quorum,
	"x-quorum-target-group-size":      Quorum,
	"x-max-in-memory-length":          Quorum,
	"x-max-in-memory-bytes":           Quorum,
	"x-member-placement-tag":          Quorum,
	"x-consumer-timeout":              Quorum,
	"x-consumer-disconnected-timeout": Quorum,
	"x-delayed-retry-type":            Quorum,
	"x-delayed-retry-min":             Quorum,
	"x-delayed-retry-max":             Quorum,
	"x-queue-mode":                    Classic,
	"x-queue-version":                 Classic,
	"x-queue-master-locator":          Classic,
	"x-max-priority":                  Classic,
	"x-max-age":                       streamType,
	"x-stream-max-segment-size-bytes": streamType,
	"x-stream-filter-size-bytes":      streamType,
	"x-initial-cluster-size":          streamType,
}

// unsupportedArgs are RabbitMQ 4.3 arguments of classic or quorum queues
// that epitaph does not implement. They are refused rather than accepted
// without their effect: a client relying on one must learn that it does
// not hold here. A queue stored by an earlier epitaph, which accepted
// them, is recovered with a warning instead (see DeclareQueue).
var unsupportedArgs = map[string]string{
	"x-consumer-timeout": "consumer timeouts are not supported",
}

// unsupportedArg returns the first argument of args that epitaph does not
// implement, with the reason, as an error wrapping ErrPreconditionFailed
// (RabbitMQ's condition for an argument it will not take).
// The first in name order is named, whatever the order of args.
func unsupportedArg(queue string, args value.Map) error {
	first := ""
	for _, kv := range args {
		k, _ := keyString(kv.Key)
		if _, ok := unsupportedArgs[k]; ok && (first == "" || k < first) {
			first = k
		}
	}
	if first == "" {
		return nil
	}
	return argErr(queue, first, "%s by epitaph", unsupportedArgs[first])
}

// equivalenceArgs are the arguments compared when a queue is redeclared
// (RabbitMQ compares its declare arguments only; others are ignored).
var equivalenceArgs = []string{
	"x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes",
	"x-overflow", "x-delivery-limit", "x-dead-letter-exchange",
	"x-dead-letter-routing-key", "x-dead-letter-strategy",
	"x-max-priority", "x-single-active-consumer",
}

// queueTypeArg returns the x-queue-type argument, if present.
func queueTypeArg(name string, args value.Map) (QueueType, bool, error) {
	v, ok := lookupKey(args, "x-queue-type")
	if !ok {
		return "", false, nil
	}
	s, ok := toString(v)
	if !ok {
		return "", false, argErr(name, "x-queue-type", "must be a string, got %T", v)
	}
	switch QueueType(s) {
	case Classic, Quorum:
		return QueueType(s), true, nil
	}
	return "", false, argErr(name, "x-queue-type", "unsupported queue type %q (classic or quorum)", s)
}

func argErr(queue, arg, format string, a ...any) error {
	return fmt.Errorf("%w: invalid arg '%s' for queue '%s': %s", ErrPreconditionFailed, arg, queue, fmt.Sprintf(format, a...))
}

// parseQueueArgs validates x-arguments for a queue of type typ (RabbitMQ's
// rabbit_amqqueue:declare_args/0 and check_declare_arguments/3) and returns
// the config and the arguments with normalised values (int64 for integers,
// string for strings and symbols, string keys).
func parseQueueArgs(name string, typ QueueType, args value.Map) (queueConfig, value.Map, error) {
	cfg := queueConfig{
		messageTTL:    -1,
		maxLen:        -1,
		maxBytes:      -1,
		overflow:      OverflowDropHead,
		deliveryLimit: DefaultDeliveryLimit,
		dlStrategy:    StrategyAtMostOnce,
	}
	norm := make(value.Map, 0, len(args))
	for _, kv := range args {
		k, ok := keyString(kv.Key)
		if !ok {
			return cfg, nil, fmt.Errorf("%w: queue '%s': argument key %v is not a string", ErrPreconditionFailed, name, kv.Key)
		}
		if only, ok := typeOnlyArgs[k]; ok && only != typ {
			return cfg, nil, fmt.Errorf("%w: invalid arg '%s' for queue '%s' of queue type %s", ErrPreconditionFailed, k, name, typ)
		}
		v := kv.Value
		switch k {
		case "x-message-ttl":
			n, err := intArg(name, k, v, 0)
			if err != nil {
				return cfg, nil, err
			}
			if n > maxExpiryTimer {
				return cfg, nil, argErr(name, k, "%d exceeds the maximum %d", n, int64(maxExpiryTimer))
			}
			cfg.messageTTL, v = n, n
		case "x-expires":
			n, err := intArg(name, k, v, 1)
			if err != nil {
				return cfg, nil, err
			}
			if n > maxExpiryTimer {
				return cfg, nil, argErr(name, k, "%d exceeds the maximum %d", n, int64(maxExpiryTimer))
			}
			cfg.expires, v = n, n
		case "x-max-length":
			n, err := intArg(name, k, v, 0)
			if err != nil {
				return cfg, nil, err
			}
			cfg.maxLen, v = n, n
		case "x-max-length-bytes":
			n, err := intArg(name, k, v, 0)
			if err != nil {
				return cfg, nil, err
			}
			cfg.maxBytes, v = n, n
		case "x-overflow":
			s, ok := toString(v)
			if !ok {
				return cfg, nil, argErr(name, k, "must be a string, got %T", v)
			}
			switch s {
			case OverflowDropHead, OverflowRejectPublish, OverflowRejectPublishDLX:
			default:
				return cfg, nil, argErr(name, k, "%q is not one of drop-head, reject-publish, reject-publish-dlx", s)
			}
			cfg.overflow, v = s, s
		case "x-delivery-limit":
			n, ok := toInt64(v)
			if !ok {
				return cfg, nil, argErr(name, k, "must be an integer, got %T", v)
			}
			cfg.deliveryLimit, v = n, n
		case "x-dead-letter-exchange":
			s, ok := toString(v)
			if !ok {
				return cfg, nil, argErr(name, k, "must be a string, got %T", v)
			}
			cfg.dlx, cfg.hasDLX, v = s, true, s
		case "x-dead-letter-routing-key":
			s, ok := toString(v)
			if !ok {
				return cfg, nil, argErr(name, k, "must be a string, got %T", v)
			}
			cfg.dlrk, cfg.hasDLRK, v = s, true, s
		case "x-dead-letter-strategy":
			s, ok := toString(v)
			if !ok {
				return cfg, nil, argErr(name, k, "must be a string, got %T", v)
			}
			if s != StrategyAtMostOnce && s != StrategyAtLeastOnce {
				return cfg, nil, argErr(name, k, "invalid_dlx_strategy %q (at-most-once or at-least-once)", s)
			}
			cfg.dlStrategy, v = s, s
		case "x-queue-type":
			s, _ := toString(v)
			v = s
		case "x-max-priority":
			n, err := intArg(name, k, v, 0)
			if err != nil {
				return cfg, nil, err
			}
			if n > maxSupportedPriority {
				return cfg, nil, argErr(name, k, "max_value_exceeded: %d exceeds %d", n, maxSupportedPriority)
			}
			v = n
		case "x-single-active-consumer":
			if _, ok := v.(bool); !ok {
				return cfg, nil, argErr(name, k, "must be a boolean, got %T", v)
			}
		case "x-max-in-memory-length", "x-max-in-memory-bytes", "x-consumer-disconnected-timeout":
			n, err := intArg(name, k, v, 0)
			if err != nil {
				return cfg, nil, err
			}
			v = n
		case "x-quorum-initial-group-size":
			n, err := intArg(name, k, v, 1)
			if err != nil {
				return cfg, nil, err
			}
			v = n
		case "x-queue-version":
			n, err := intArg(name, k, v, 0)
			if err != nil {
				return cfg, nil, err
			}
			if n != 2 {
				return cfg, nil, argErr(name, k, "unsupported queue version '%d'", n)
			}
			v = n
		case "x-queue-leader-locator":
			// rabbit_queue_location:queue_leader_locators/0: the deprecated
			// random, least-leaders and min-masters are still accepted (as
			// balanced); the official Go client sends random for balanced.
			s, ok := toString(v)
			switch {
			case !ok:
				return cfg, nil, argErr(name, k, "invalid_queue_locator_arg %v (client-local or balanced)", v)
			case s == "client-local", s == "balanced", s == "random", s == "least-leaders", s == "min-masters":
			default:
				return cfg, nil, argErr(name, k, "invalid_queue_locator_arg %v (client-local or balanced)", v)
			}
			v = s
		default:
			if n, ok := toInt64(v); ok {
				v = n
			} else if s, ok := toString(v); ok {
				v = s
			}
		}
		norm = norm.Set(k, v)
	}
	if cfg.hasDLRK && !cfg.hasDLX {
		return cfg, nil, fmt.Errorf("%w: invalid arg 'x-dead-letter-routing-key' for queue '%s': routing_key_but_no_dlx_defined", ErrPreconditionFailed, name)
	}
	return cfg, norm, nil
}

// intArg validates a non-negative (min 0) or positive (min 1) integer argument.
func intArg(queue, arg string, v any, minimum int64) (int64, error) {
	n, ok := toInt64(v)
	if !ok {
		return 0, argErr(queue, arg, "must be an integer, got %T", v)
	}
	if n < minimum {
		if minimum == 1 {
			return 0, argErr(queue, arg, "must be a positive integer, got %d", n)
		}
		return 0, argErr(queue, arg, "must be a non-negative integer, got %d", n)
	}
	return n, nil
}

// argsEquivalent compares the declare arguments of two normalised maps.
func argsEquivalent(a, b value.Map) (string, bool) {
	for _, k := range equivalenceArgs {
		va, oka := lookupKey(a, k)
		vb, okb := lookupKey(b, k)
		if oka != okb || (oka && !valuesEqual(va, vb)) {
			return k, false
		}
	}
	return "", true
}

// isReserved reports whether name uses the reserved "amq." prefix.
func isReserved(name string) bool { return strings.HasPrefix(name, "amq.") }
