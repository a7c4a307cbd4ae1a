package router

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"

	"github.com/epitaph-mq/epitaph/value"
)

// Policy apply-to values.
const (
	ApplyToQueues        = "queues"
	ApplyToExchanges     = "exchanges"
	ApplyToAll           = "all"
	ApplyToClassicQueues = "classic_queues"
	ApplyToQuorumQueues  = "quorum_queues"
	ApplyToStreams       = "streams"
)

// Policy is a RabbitMQ policy: Definition keys (dead-letter-exchange,
// message-ttl, max-length, overflow, delivery-limit, ...) apply to the
// queues or exchanges whose names match Pattern (a regular expression,
// unanchored as in RabbitMQ). The matching policy with the highest Priority
// applies to a queue; its effect combines with the queue's arguments
// (effective.go); alternate-exchange applies to exchanges without the
// argument. Keys that have no effect on one node's classic and quorum
// queues in RabbitMQ either (queue-mode, queue-leader-locator, max-age, ...)
// are accepted; keys epitaph does not implement (consumer-timeout) and keys
// RabbitMQ 4.3 does not recognise (ha-mode, ...) are refused.
type Policy struct {
	VHost      string
	Name       string
	Pattern    string
	ApplyTo    string // "" means all
	Priority   int
	Definition value.Map

	re    *regexp.Regexp
	knobs *knobs   // the validated keys epitaph applies
	other []string // the keys that have no effect
}

// Matches reports whether the policy applies to a resource: an exchange
// (isExchange) or a queue of type typ.
func (p Policy) Matches(name string, isExchange bool, typ QueueType) bool {
	switch p.ApplyTo {
	case ApplyToExchanges:
		if !isExchange {
			return false
		}
	case ApplyToQueues:
		if isExchange {
			return false
		}
	case ApplyToClassicQueues:
		if isExchange || typ != Classic {
			return false
		}
	case ApplyToQuorumQueues:
		if isExchange || typ != Quorum {
			return false
		}
	case ApplyToStreams:
		return false
	}
	re := p.re
	if re == nil {
		var err error
		if re, err = regexp.Compile(p.Pattern); err != nil {
			return false
		}
	}
	return re.MatchString(name)
}

func (p *Policy) validate(lenient bool) error {
	if p.Name == "" {
		return fmt.Errorf("%w: policy name is empty", ErrInvalidArgument)
	}
	switch p.ApplyTo {
	case "":
		p.ApplyTo = ApplyToAll
	case ApplyToQueues, ApplyToExchanges, ApplyToAll, ApplyToClassicQueues, ApplyToQuorumQueues, ApplyToStreams:
	default:
		return fmt.Errorf("%w: policy '%s': invalid apply-to '%s'", ErrInvalidArgument, p.Name, p.ApplyTo)
	}
	if len(p.Pattern) > maxPolicyPattern {
		return fmt.Errorf("%w: policy '%s': pattern longer than %d characters", ErrInvalidArgument, p.Name, maxPolicyPattern)
	}
	re, err := regexp.Compile(p.Pattern)
	if err != nil {
		return fmt.Errorf("%w: policy '%s': invalid pattern: %w", ErrInvalidArgument, p.Name, err)
	}
	p.re = re
	if len(p.Definition) == 0 {
		return fmt.Errorf("%w: policy '%s': empty definition", ErrInvalidArgument, p.Name)
	}
	p.Definition = stringKeys(p.Definition)
	k, other, err := parsePolicyDefinition(p.Name, p.Definition, lenient)
	if err != nil {
		return err
	}
	p.knobs, p.other = &k, other
	return nil
}

// PutPolicy adds or replaces a policy (p.VHost is set to this vhost) and
// applies it at once: every queue of the vhost gets its effective
// configuration recomputed (see Queue.EffectivePolicy). A lowered
// max-length with drop-head drops from the head right away; a new
// message-ttl applies to messages enqueued afterwards (already expired
// messages go); a new dead-letter exchange or routing key to messages
// dead-lettered afterwards; a new delivery-limit at the next return.
//
// Errors wrap ErrInvalidArgument: empty name, bad apply-to, a pattern that
// does not compile or is longer than 1000 characters, an empty definition,
// or a bad value for a key epitaph applies (dead-letter-exchange,
// dead-letter-routing-key, dead-letter-strategy, message-ttl, expires,
// max-length, max-length-bytes, overflow, delivery-limit,
// alternate-exchange, delayed-retry-type, -min, -max, with the delayed-retry
// constraints of one definition), a key epitaph does not implement
// (consumer-timeout), a key RabbitMQ 4.3 does not recognise, or a bad value
// for a key accepted without effect (noEffectPolicyKeys).
func (v *VHost) PutPolicy(p Policy) error { return v.putPolicy(p, false) }

// putPolicy is PutPolicy; recovering takes back a stored policy whose keys
// an earlier epitaph accepted although they are now refused, with a
// warning (they have no effect, as before).
func (v *VHost) putPolicy(p Policy, recovering bool) error {
	p.VHost = v.name
	if err := p.validate(recovering); err != nil {
		return err
	}
	if len(p.other) > 0 {
		level := slog.LevelDebug
		if recovering {
			level = slog.LevelWarn
		}
		v.b.log.Log(context.Background(), level, "policy keys accepted without effect", "policy", p.Name, "vhost", v.name, "keys", p.other)
	}
	v.mu.Lock()
	v.policies[p.Name] = p
	v.putPolicyMetaLocked(p)
	v.topoChanged = true
	rs := v.reconfigureLocked()
	v.unlockMeta()
	v.finishReconfigure(rs)
	return nil
}

// DeletePolicy removes a policy; the queues it applied to fall back to
// their arguments or the next matching policy at once.
func (v *VHost) DeletePolicy(name string) error {
	v.mu.Lock()
	if _, ok := v.policies[name]; !ok {
		v.unlockMeta()
		return fmt.Errorf("%w: no policy '%s' in vhost '%s'", ErrNotFound, name, v.name)
	}
	delete(v.policies, name)
	if v.b.metaOn() {
		v.meta.DeleteMeta(joinKey(metaPolicy, v.name, name))
	}
	v.topoChanged = true
	rs := v.reconfigureLocked()
	v.unlockMeta()
	v.finishReconfigure(rs)
	return nil
}

// Policy returns a policy by name.
func (v *VHost) Policy(name string) (Policy, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	p, ok := v.policies[name]
	if ok {
		p.Definition = cloneMap(p.Definition)
	}
	return p, ok
}

// Policies lists the vhost's policies sorted by name.
func (v *VHost) Policies() []Policy {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]Policy, 0, len(v.policies))
	for _, n := range slices.Sorted(maps.Keys(v.policies)) {
		p := v.policies[n]
		p.Definition = cloneMap(p.Definition)
		out = append(out, p)
	}
	return out
}

// EffectivePolicy returns the policy that applies to a resource: the
// matching policy with the highest priority (ties: the greater name, as
// RabbitMQ sorts them).
func (v *VHost) EffectivePolicy(name string, isExchange bool, typ QueueType) (Policy, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	best := v.effectivePolicyLocked(name, isExchange, typ)
	if best == nil {
		return Policy{}, false
	}
	c := *best
	c.Definition = cloneMap(c.Definition)
	return c, true
}

// effectivePolicyLocked is EffectivePolicy with v.mu held; the result is a
// copy sharing its Definition with v.policies, which must not be modified.
func (v *VHost) effectivePolicyLocked(name string, isExchange bool, typ QueueType) *Policy {
	var best *Policy
	for n := range v.policies {
		p := v.policies[n]
		if !p.Matches(name, isExchange, typ) {
			continue
		}
		if best == nil || p.Priority > best.Priority || (p.Priority == best.Priority && cmp.Compare(p.Name, best.Name) > 0) {
			best = &p
		}
	}
	return best
}

// PutPolicy adds or replaces a policy in p.VHost ("" means "/").
func (b *Broker) PutPolicy(p Policy) error {
	vh := cmp.Or(p.VHost, DefaultVHost)
	v, ok := b.VHost(vh)
	if !ok {
		return fmt.Errorf("%w: policy '%s': no vhost '%s'", ErrNotFound, p.Name, vh)
	}
	return v.PutPolicy(p)
}

// DeletePolicy removes a policy from a vhost.
func (b *Broker) DeletePolicy(vhost, name string) error {
	v, ok := b.VHost(vhost)
	if !ok {
		return fmt.Errorf("%w: no vhost '%s'", ErrNotFound, vhost)
	}
	return v.DeletePolicy(name)
}

// Policies lists every vhost's policies (by vhost, then name).
func (b *Broker) Policies() []Policy {
	var out []Policy
	for _, n := range b.VHosts() {
		if v, ok := b.VHost(n); ok {
			out = append(out, v.Policies()...)
		}
	}
	return out
}
