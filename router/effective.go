package router

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/epitaph-mq/epitaph/value"
)

// A queue's effective configuration combines its declare arguments with the
// highest-priority policy that matches it, with RabbitMQ's precedence
// (rabbit_queue_type_util:args_policy_lookup/3 and the per-key resolvers):
//
//	dead-letter-exchange, -routing-key, -strategy  argument wins
//	message-ttl, max-length, max-length-bytes      minimum
//	expires                                        minimum
//	overflow                                       classic: argument wins; quorum: policy wins
//	delivery-limit (quorum)                        min, or max if either is negative; default 20
//	delayed-retry-type (quorum)                    policy wins
//	delayed-retry-min, -max (quorum)               minimum (delayed.go)

// opt is an optional setting from one source (an argument or a policy).
type opt[T any] struct {
	v  T
	ok bool
}

func some[T any](v T) opt[T] { return opt[T]{v: v, ok: true} }

// knobs are the policy-controllable queue settings from one source.
type knobs struct {
	dlx, dlrk, strategy, overflow                        opt[string]
	alternateExchange                                    opt[string] // exchanges
	messageTTL, expires, maxLen, maxBytes, deliveryLimit opt[int64]
	retryType                                            opt[string]
	retryMin, retryMax                                   opt[int64]
}

// argKnobs reads the settings from normalised, validated x-arguments.
func argKnobs(args value.Map) knobs {
	str := func(k string) opt[string] {
		if v, ok := lookupKey(args, k); ok {
			if s, ok := toString(v); ok {
				return some(s)
			}
		}
		return opt[string]{}
	}
	num := func(k string) opt[int64] {
		if v, ok := lookupKey(args, k); ok {
			if n, ok := toInt64(v); ok {
				return some(n)
			}
		}
		return opt[int64]{}
	}
	return knobs{
		dlx: str("x-dead-letter-exchange"), dlrk: str("x-dead-letter-routing-key"),
		strategy: str("x-dead-letter-strategy"), overflow: str("x-overflow"),
		messageTTL: num("x-message-ttl"), expires: num("x-expires"),
		maxLen: num("x-max-length"), maxBytes: num("x-max-length-bytes"),
		deliveryLimit: num("x-delivery-limit"),
		// Not validated at declare, as in RabbitMQ: a value of the wrong
		// type counts as absent (resolveDelayedRetry then disables).
		retryType: str("x-delayed-retry-type"),
		retryMin:  num("x-delayed-retry-min"), retryMax: num("x-delayed-retry-max"),
	}
}

// maxPolicyPattern bounds a policy's pattern length.
const maxPolicyPattern = 1000

// noEffectPolicyKeys are RabbitMQ 4.3 policy keys that have no effect on
// a single node's classic and quorum queues, in RabbitMQ as here: cluster
// placement, settings RabbitMQ 4 no longer uses, and stream settings
// (epitaph has no streams, and on other queues RabbitMQ ignores them).
// They are validated and accepted, so that definitions exported from
// RabbitMQ load. The value is the check (nil: any value).
var noEffectPolicyKeys = map[string]func(v any) bool{
	"queue-mode":    func(v any) bool { s, ok := toString(v); return ok && (s == "default" || s == "lazy") },
	"queue-version": func(v any) bool { n, ok := toInt64(v); return ok && (n == 1 || n == 2) },
	"queue-leader-locator": func(v any) bool { // rabbit_policies: random and least-leaders are deprecated, still valid
		s, ok := toString(v)
		return ok && (s == "client-local" || s == "balanced" || s == "random" || s == "least-leaders")
	},
	"queue-master-locator":          func(v any) bool { _, ok := toString(v); return ok },
	"max-in-memory-length":          nonNegative,
	"max-in-memory-bytes":           nonNegative,
	"consumer-disconnected-timeout": nonNegative,
	"initial-cluster-size":          positive,
	"target-group-size":             positive,
	"member-placement-tag":          nil,
	"max-age":                       func(v any) bool { _, ok := toString(v); return ok },
	"stream-max-segment-size-bytes": nonNegative,
	"stream-filter-size-bytes":      func(v any) bool { n, ok := toInt64(v); return ok && n >= 16 && n <= 255 },
}

func nonNegative(v any) bool { n, ok := toInt64(v); return ok && n >= 0 }
func positive(v any) bool    { n, ok := toInt64(v); return ok && n > 0 }

// unsupportedPolicyKeys are RabbitMQ 4.3 policy keys with an effect epitaph
// does not implement: refused, never accepted without their effect.
var unsupportedPolicyKeys = map[string]string{
	"consumer-timeout": "consumer timeouts are not supported",
}

// parsePolicyDefinition validates the keys epitaph applies (as
// rabbit_policies:validate_policy0/2 does) and returns them with the keys
// it accepts although they have no effect (noEffectPolicyKeys). Keys
// epitaph does not implement are refused, and so are keys RabbitMQ 4.3
// does not know (ha-mode and the other mirroring keys, plugin keys), with
// RabbitMQ's text.
//
// lenient (recovering a policy stored by an earlier epitaph, which took
// any key) lists the refused keys with the others instead: the policy
// comes back, and they still have no effect.
func parsePolicyDefinition(policy string, def value.Map, lenient bool) (knobs, []string, error) {
	var k knobs
	var other, unknown []string
	bad := func(key string, format string, a ...any) error {
		return fmt.Errorf("%w: policy '%s': invalid value for '%s': %s", ErrInvalidArgument, policy, key, fmt.Sprintf(format, a...))
	}
	str := func(key string, v any, allowed ...string) (opt[string], error) {
		s, ok := toString(v)
		if !ok {
			return opt[string]{}, bad(key, "must be a string, got %T", v)
		}
		if len(allowed) > 0 {
			found := false
			for _, a := range allowed {
				found = found || s == a
			}
			if !found {
				return opt[string]{}, bad(key, "%q is not one of %v", s, allowed)
			}
		}
		return some(s), nil
	}
	num := func(key string, v any, minimum, maximum int64) (opt[int64], error) {
		n, ok := toInt64(v)
		if !ok {
			return opt[int64]{}, bad(key, "must be an integer, got %T (%v)", v, v)
		}
		if n < minimum || n > maximum {
			return opt[int64]{}, bad(key, "%d is out of range [%d, %d]", n, minimum, maximum)
		}
		return some(n), nil
	}
	const maxInt = int64(^uint64(0) >> 1)
	const minInt = -maxInt - 1
	for _, kv := range def {
		key, ok := keyString(kv.Key)
		if !ok {
			return k, nil, fmt.Errorf("%w: policy '%s': definition key %v is not a string", ErrInvalidArgument, policy, kv.Key)
		}
		v := kv.Value
		var err error
		switch key {
		case "dead-letter-exchange":
			k.dlx, err = str(key, v)
		case "dead-letter-routing-key":
			k.dlrk, err = str(key, v)
		case "dead-letter-strategy":
			k.strategy, err = str(key, v, StrategyAtMostOnce, StrategyAtLeastOnce)
		case "overflow":
			k.overflow, err = str(key, v, OverflowDropHead, OverflowRejectPublish, OverflowRejectPublishDLX)
		case "message-ttl":
			k.messageTTL, err = num(key, v, 0, maxExpiryTimer)
		case "expires":
			k.expires, err = num(key, v, 1, maxExpiryTimer)
		case "max-length":
			k.maxLen, err = num(key, v, 0, maxInt)
		case "max-length-bytes":
			k.maxBytes, err = num(key, v, 0, maxInt)
		case "delivery-limit":
			k.deliveryLimit, err = num(key, v, minInt, maxInt)
		case "alternate-exchange":
			k.alternateExchange, err = str(key, v)
		case "delayed-retry-type", "delayed-retry-min", "delayed-retry-max":
			if e := policyDelayedRetry(&k, key, v); e != nil && !lenient {
				return k, nil, bad(key, "%v", e)
			}
		default:
			if why, ok := unsupportedPolicyKeys[key]; ok {
				if lenient {
					other = append(other, key)
					continue
				}
				return k, nil, bad(key, "%s by epitaph", why)
			}
			check, ok := noEffectPolicyKeys[key]
			if !ok {
				if lenient {
					other = append(other, key)
				} else {
					unknown = append(unknown, key)
				}
				continue
			}
			if check != nil && !check(v) {
				return k, nil, bad(key, "%v is not a valid value", v)
			}
			other = append(other, key)
		}
		if err != nil {
			return k, nil, err
		}
	}
	if len(unknown) > 0 {
		return k, nil, fmt.Errorf("%w: policy '%s': %q are not recognised policy settings", ErrInvalidArgument, policy, unknown)
	}
	if err := delayConstraints(k); err != nil && !lenient {
		return k, nil, fmt.Errorf("%w: policy '%s': %w", ErrInvalidArgument, policy, err)
	}
	return k, other, nil
}

// note is a log record produced while resolving a configuration; it is
// logged after the locks are released, and only when the configuration
// changed.
type note struct {
	level slog.Level
	msg   string
	attrs []any
}

func defaultConfig(typ QueueType) queueConfig {
	cfg := queueConfig{
		messageTTL: -1, maxLen: -1, maxBytes: -1,
		overflow:      OverflowDropHead,
		deliveryLimit: -1,
		dlStrategy:    StrategyAtMostOnce,
	}
	if typ == Quorum {
		cfg.deliveryLimit = DefaultDeliveryLimit
	}
	return cfg
}

// resolveConfig computes a queue's effective configuration from its
// argument settings a and the settings p of its effective policy (named
// policy; "" when none applies).
func resolveConfig(typ QueueType, a, p knobs, policy string) (queueConfig, []note) {
	cfg := defaultConfig(typ)
	cfg.policy = policy
	var notes []note
	warn := func(msg string, attrs ...any) { notes = append(notes, note{slog.LevelWarn, msg, attrs}) }
	debug := func(msg string, attrs ...any) { notes = append(notes, note{slog.LevelDebug, msg, attrs}) }

	argWins := func(arg, pol opt[string]) opt[string] {
		if arg.ok {
			return arg
		}
		return pol
	}
	minimum := func(x, y opt[int64]) opt[int64] {
		switch {
		case x.ok && y.ok:
			return some(min(x.v, y.v))
		case x.ok:
			return x
		}
		return y
	}

	if v := minimum(a.messageTTL, p.messageTTL); v.ok {
		cfg.messageTTL = v.v
	}
	if v := minimum(a.maxLen, p.maxLen); v.ok {
		cfg.maxLen = v.v
	}
	if v := minimum(a.maxBytes, p.maxBytes); v.ok {
		cfg.maxBytes = v.v
	}
	if v := minimum(a.expires, p.expires); v.ok {
		cfg.expires = v.v
	}

	overflow := argWins(a.overflow, p.overflow)
	if typ == Quorum {
		overflow = argWins(p.overflow, a.overflow) // policy_has_precedence
	}
	if overflow.ok {
		cfg.overflow = overflow.v
	}
	if typ == Quorum && cfg.overflow == OverflowRejectPublishDLX {
		warn("invalid overflow strategy for quorum queue; using drop-head", "overflow", cfg.overflow)
		cfg.overflow = OverflowDropHead
	}

	if typ == Quorum {
		switch {
		case a.deliveryLimit.ok && p.deliveryLimit.ok:
			pol, arg := p.deliveryLimit.v, a.deliveryLimit.v
			if pol < 0 || arg < 0 {
				cfg.deliveryLimit = max(pol, arg)
			} else {
				cfg.deliveryLimit = min(pol, arg)
			}
		case a.deliveryLimit.ok:
			cfg.deliveryLimit = a.deliveryLimit.v
		case p.deliveryLimit.ok:
			cfg.deliveryLimit = p.deliveryLimit.v
		}
	} else if p.deliveryLimit.ok {
		debug("policy key delivery-limit ignored: classic queues have no delivery limit", "policy", policy)
	}
	if typ == Quorum {
		cfg.retry = resolveDelayedRetry(a, p)
	}

	strategy := opt[string]{}
	if typ == Quorum {
		strategy = argWins(a.strategy, p.strategy)
	} else if p.strategy.ok {
		debug("policy key dead-letter-strategy ignored for a classic queue", "policy", policy)
	}
	dlx := argWins(a.dlx, p.dlx)
	dlrk := argWins(a.dlrk, p.dlrk)
	if !dlx.ok {
		if dlrk.ok {
			warn("dead-lettering disabled despite a configured dead-letter-routing-key because dead-letter-exchange is not configured",
				"dead_letter_routing_key", dlrk.v, "policy", policy)
		}
		if strategy.ok {
			warn("dead-lettering disabled despite a configured dead-letter-strategy because dead-letter-exchange is not configured",
				"dead_letter_strategy", strategy.v, "policy", policy)
		}
		return cfg, notes
	}
	cfg.dlx, cfg.hasDLX = dlx.v, true
	cfg.dlrk, cfg.hasDLRK = dlrk.v, dlrk.ok
	if strategy.ok && strategy.v == StrategyAtLeastOnce {
		if cfg.overflow == OverflowRejectPublish {
			cfg.dlStrategy = StrategyAtLeastOnce
		} else {
			warn("falling back to dead-letter-strategy at-most-once because at-least-once is incompatible with the effective overflow strategy; set overflow to reject-publish",
				"overflow", cfg.overflow, "policy", policy)
		}
	}
	return cfg, notes
}

// effectiveConfigLocked resolves q's configuration against the vhost's
// policies (v.mu held, read or write).
func (v *VHost) effectiveConfigLocked(name string, typ QueueType, args value.Map) (queueConfig, value.Map, []note) {
	var p knobs
	var polName string
	var polDef value.Map
	if pol := v.effectivePolicyLocked(name, false, typ); pol != nil {
		polName, polDef = pol.Name, pol.Definition
		if pol.knobs != nil {
			p = *pol.knobs
		}
	}
	cfg, notes := resolveConfig(typ, argKnobs(args), p, polName)
	return cfg, polDef, notes
}

// reconfigureLocked recomputes every queue's configuration after a policy
// change (v.mu write-locked). It returns the queues whose configuration
// changed, with their notes; the caller flushes their dead messages and logs
// after releasing v.mu.
func (v *VHost) reconfigureLocked() []reconfigured {
	for _, x := range v.exchanges {
		v.applyExchangePolicyLocked(x)
	}
	var out []reconfigured
	for _, q := range v.queues {
		cfg, def, notes := v.effectiveConfigLocked(q.name, q.typ, q.args)
		q.mu.Lock()
		changed := q.setConfigLocked(cfg, def)
		q.unlock()
		if changed {
			out = append(out, reconfigured{q, notes})
		}
	}
	return out
}

// applyExchangePolicyLocked sets x's policy settings from its effective
// policy (v.mu write-locked): the alternate-exchange key.
func (v *VHost) applyExchangePolicyLocked(x *exchange) {
	x.policyAE, x.hasPolicyAE = "", false
	if x.spec.Name == "" {
		return // the default exchange takes no policy
	}
	if p := v.effectivePolicyLocked(x.spec.Name, true, ""); p != nil && p.knobs != nil && p.knobs.alternateExchange.ok {
		x.policyAE, x.hasPolicyAE = p.knobs.alternateExchange.v, true
	}
}

type reconfigured struct {
	q     *Queue
	notes []note
}

// finishReconfigure runs after v.mu is released: it hands the messages
// dropped by lowered limits to the DeadLetterer and logs the notes.
func (v *VHost) finishReconfigure(rs []reconfigured) {
	for _, r := range rs {
		r.q.flushDead()
		v.b.log.Debug("queue configuration changed", "queue", r.q.name, "vhost", v.name, "policy", r.q.config().policy)
		r.q.logNotes(r.notes)
	}
}

func (q *Queue) logNotes(notes []note) {
	for _, n := range notes {
		attrs := append([]any{"queue", q.name, "vhost", q.vh.name}, n.attrs...)
		q.b.log.Log(context.Background(), n.level, n.msg, attrs...)
	}
}

// setConfigLocked installs an effective configuration and applies it to the
// messages already held: expired messages go, a lowered max-length with
// drop-head drops from the head (dead-lettered via the outbox), the
// reject-publish block is re-evaluated and the timer re-armed (a changed
// x-expires counts from now, as RabbitMQ restarts its expiry timer). It
// reports whether the configuration changed.
func (q *Queue) setConfigLocked(cfg queueConfig, policyDef value.Map) bool {
	q.policyDef = policyDef
	old := q.cfg
	if q.eff.Load() != nil && old == cfg {
		return false
	}
	q.cfg = cfg
	c := cfg
	q.eff.Store(&c)
	if q.deleted {
		return true
	}
	if old.dlStrategy == StrategyAtLeastOnce && cfg.dlStrategy != StrategyAtLeastOnce {
		// rabbit_fifo_dlx: switching away from at-least-once deletes the
		// retained messages.
		q.dropRetainedLocked()
	}
	now := q.nowNano()
	if old.expires != cfg.expires && len(q.subs) == 0 {
		q.lastUsed = now
	}
	q.expireLocked(now)
	if q.dropsHead() {
		q.dropHeadLocked()
	}
	switch {
	case q.typ != Quorum || cfg.overflow != OverflowRejectPublish || !q.hasLimit():
		q.blocked = false
	case q.overLocked():
		q.blocked = true
	case q.blocked && q.belowSoftLimitLocked():
		q.blocked = false
	}
	q.armTimerLocked(now)
	return true
}
