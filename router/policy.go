package router

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/epitaph-mq/epitaph/amqp10"
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
// queues or exchanges whose names match Pattern. Policies are stored; the
// queues do not apply them yet.
type Policy struct {
	VHost      string
	Name       string
	Pattern    string
	ApplyTo    string // "" means all
	Priority   int
	Definition amqp10.Map

	re *regexp.Regexp
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

func (p *Policy) validate() error {
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
	re, err := regexp.Compile(p.Pattern)
	if err != nil {
		return fmt.Errorf("%w: policy '%s': invalid pattern: %w", ErrInvalidArgument, p.Name, err)
	}
	p.re = re
	if len(p.Definition) == 0 {
		return fmt.Errorf("%w: policy '%s': empty definition", ErrInvalidArgument, p.Name)
	}
	p.Definition = stringKeys(p.Definition)
	return nil
}

// PutPolicy adds or replaces a policy (p.VHost is set to this vhost).
func (v *VHost) PutPolicy(p Policy) error {
	p.VHost = v.name
	if err := p.validate(); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.policies[p.Name] = p
	return nil
}

// DeletePolicy removes a policy.
func (v *VHost) DeletePolicy(name string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.policies[name]; !ok {
		return fmt.Errorf("%w: no policy '%s' in vhost '%s'", ErrNotFound, name, v.name)
	}
	delete(v.policies, name)
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
	var best *Policy
	for _, p := range v.policies {
		if !p.Matches(name, isExchange, typ) {
			continue
		}
		if best == nil || p.Priority > best.Priority || (p.Priority == best.Priority && cmp.Compare(p.Name, best.Name) > 0) {
			c := p
			best = &c
		}
	}
	if best == nil {
		return Policy{}, false
	}
	best.Definition = cloneMap(best.Definition)
	return *best, true
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
