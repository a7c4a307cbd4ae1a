package router

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/epitaph-mq/epitaph/value"
)

// Exchange types.
const (
	ExchangeDirect  = "direct"
	ExchangeFanout  = "fanout"
	ExchangeTopic   = "topic"
	ExchangeHeaders = "headers"
	// ExchangeLocalRandom is RabbitMQ 4's x-local-random: each message goes
	// to one of the bound classic queues, picked at random. Its bindings
	// have an empty key and a classic queue as destination.
	ExchangeLocalRandom = "x-local-random"
	// ExchangeModulusHash is RabbitMQ 4.3's x-modulus-hash: each message
	// goes to one binding's destination, picked by a hash of its routing
	// keys modulo the number of bindings (modulushash.go).
	ExchangeModulusHash = "x-modulus-hash"
)

// ExchangeType describes an exchange type as RabbitMQ's registry does
// (the HTTP API's overview lists them).
type ExchangeType struct {
	Name, Description string
}

// exchangeTypes are the exchange types epitaph has, sorted by name: the
// ones built into RabbitMQ 4.3, with RabbitMQ's descriptions.
var exchangeTypes = []ExchangeType{
	{ExchangeDirect, "AMQP direct exchange, as per the AMQP specification"},
	{ExchangeFanout, "AMQP fanout exchange, as per the AMQP specification"},
	{ExchangeHeaders, "AMQP headers exchange, as per the AMQP specification"},
	{ExchangeTopic, "AMQP topic exchange, as per the AMQP specification"},
	{ExchangeLocalRandom, "Picks one random local binding (queue) to route via (to)."},
	{ExchangeModulusHash, "Modulus Hashing Exchange"},
}

// ExchangeTypes lists the exchange types epitaph has, sorted by name.
func ExchangeTypes() []ExchangeType { return slices.Clone(exchangeTypes) }

// ExchangeSpec declares an exchange.
type ExchangeSpec struct {
	Name       string
	Type       string // direct, fanout, topic, headers, x-local-random, x-modulus-hash
	Durable    bool
	AutoDelete bool
	Internal   bool
	Arguments  value.Map // alternate-exchange
}

// ExchangeInfo describes an exchange.
type ExchangeInfo struct {
	ExchangeSpec
	VHost string
}

// Binding binds Source to a queue or (DestinationIsExchange) an exchange.
type Binding struct {
	Source                string
	Destination           string
	DestinationIsExchange bool
	Key                   string
	Arguments             value.Map
}

func (b Binding) same(o Binding) bool {
	return b.Source == o.Source && b.Destination == o.Destination &&
		b.DestinationIsExchange == o.DestinationIsExchange && b.Key == o.Key &&
		mapsEqual(b.Arguments, o.Arguments)
}

// String describes the binding for error messages.
func (b Binding) String() string {
	kind := "queue"
	if b.DestinationIsExchange {
		kind = "exchange"
	}
	return fmt.Sprintf("binding from exchange '%s' to %s '%s' with key '%s'", b.Source, kind, b.Destination, b.Key)
}

// standardExchanges exist in every vhost.
var standardExchanges = []ExchangeSpec{
	{Name: "amq.direct", Type: ExchangeDirect, Durable: true},
	{Name: "amq.fanout", Type: ExchangeFanout, Durable: true},
	{Name: "amq.topic", Type: ExchangeTopic, Durable: true},
	{Name: "amq.headers", Type: ExchangeHeaders, Durable: true},
	{Name: "amq.match", Type: ExchangeHeaders, Durable: true},
}

type exchange struct {
	spec      ExchangeSpec
	alternate string
	hasAE     bool
	// The alternate-exchange of the exchange's effective policy, used when
	// the argument is absent (the argument wins, as in RabbitMQ). Set under
	// the vhost's write lock (applyExchangePolicyLocked).
	policyAE    string
	hasPolicyAE bool
	bindings    []*binding
}

// alternateExchange returns the exchange's effective alternate exchange.
func (x *exchange) alternateExchange() (string, bool) {
	if x.hasAE {
		return x.alternate, true
	}
	return x.policyAE, x.hasPolicyAE
}

type binding struct {
	Binding
	topic   []string
	headers *headersSpec
}

func newExchange(s ExchangeSpec) (*exchange, error) {
	if !slices.ContainsFunc(exchangeTypes, func(t ExchangeType) bool { return t.Name == s.Type }) {
		// RabbitMQ's text (rabbit_exchange:check_type); the caller names the
		// exchange where the request does not.
		return nil, fmt.Errorf("%w: unknown exchange type '%s'", ErrInvalidArgument, s.Type)
	}
	x := &exchange{spec: s}
	norm := make(value.Map, 0, len(s.Arguments))
	for _, kv := range s.Arguments {
		k, ok := keyString(kv.Key)
		if !ok {
			return nil, fmt.Errorf("%w: exchange '%s': argument key %v is not a string", ErrPreconditionFailed, s.Name, kv.Key)
		}
		v := kv.Value
		if k == "alternate-exchange" {
			ae, ok := toString(v)
			if !ok {
				return nil, fmt.Errorf("%w: exchange '%s': alternate-exchange must be a string, got %T", ErrPreconditionFailed, s.Name, v)
			}
			x.alternate, x.hasAE, v = ae, true, ae
		}
		norm = norm.Set(k, v)
	}
	x.spec.Arguments = norm
	return x, nil
}

func (x *exchange) equivalent(s ExchangeSpec) error {
	o, err := newExchange(s)
	if err != nil {
		return err
	}
	a, b := x.spec, o.spec
	switch {
	case a.Type != b.Type:
		return fmt.Errorf("%w: inequivalent arg 'type' for exchange '%s': received '%s' but current is '%s'", ErrPreconditionFailed, a.Name, b.Type, a.Type)
	case a.Durable != b.Durable:
		return fmt.Errorf("%w: inequivalent arg 'durable' for exchange '%s': received '%t' but current is '%t'", ErrPreconditionFailed, a.Name, b.Durable, a.Durable)
	case a.AutoDelete != b.AutoDelete:
		return fmt.Errorf("%w: inequivalent arg 'auto_delete' for exchange '%s': received '%t' but current is '%t'", ErrPreconditionFailed, a.Name, b.AutoDelete, a.AutoDelete)
	case a.Internal != b.Internal:
		return fmt.Errorf("%w: inequivalent arg 'internal' for exchange '%s': received '%t' but current is '%t'", ErrPreconditionFailed, a.Name, b.Internal, a.Internal)
	case !mapsEqual(a.Arguments, b.Arguments):
		return fmt.Errorf("%w: inequivalent arguments for exchange '%s'", ErrPreconditionFailed, a.Name)
	}
	return nil
}

func (x *exchange) info(vhost string) ExchangeInfo {
	s := x.spec
	s.Arguments = cloneMap(s.Arguments)
	return ExchangeInfo{ExchangeSpec: s, VHost: vhost}
}

func (x *exchange) hasBinding(b Binding) bool {
	return slices.ContainsFunc(x.bindings, func(o *binding) bool { return o.same(b) })
}

// routeCtx is one publish's routing state.
type routeCtx struct {
	m       *Message
	words   [][]string // routing keys split for topic matching
	split   bool
	headers headerData
}

func (c *routeCtx) topicWords() [][]string {
	if !c.split {
		c.split = true
		c.words = make([][]string, len(c.m.RoutingKeys))
		for i, k := range c.m.RoutingKeys {
			c.words[i] = splitTopic(k)
		}
	}
	return c.words
}

// validateBinding checks a new binding against the rules of x's type,
// with RabbitMQ's texts (rabbit_exchange_type_local_random:validate_binding):
// an x-local-random exchange binds only classic queues, with an empty key.
// queues is the vhost's, read under its lock.
func (x *exchange) validateBinding(b Binding, queues map[string]*Queue) error {
	if x.spec.Type != ExchangeLocalRandom {
		return nil
	}
	if b.Key != "" {
		return fmt.Errorf("%w: Non empty binding '%s' key not permitted", ErrPreconditionFailed, b.Key)
	}
	q, ok := queues[b.Destination]
	if b.DestinationIsExchange || !ok {
		return fmt.Errorf("%w: Destination not found", ErrPreconditionFailed)
	}
	if q.Type() != Classic {
		return fmt.Errorf("%w: Queue type rabbit_%s_queue not valid for this exchange type", ErrPreconditionFailed, q.Type())
	}
	return nil
}

// match returns the bindings of x that the message matches.
func (x *exchange) match(c *routeCtx, out []*binding) []*binding {
	switch x.spec.Type {
	case ExchangeLocalRandom:
		// Every binding is to a local classic queue (validateBinding), so
		// any one of them will do, whatever the message.
		if n := len(x.bindings); n > 0 {
			out = append(out, x.bindings[rand.IntN(n)])
		}
		return out
	case ExchangeModulusHash:
		return pickModulusHash(x.bindings, c.m.RoutingKeys, out)
	}
	for _, b := range x.bindings {
		if b.matches(x.spec.Type, c) {
			out = append(out, b)
		}
	}
	return out
}

func (b *binding) matches(typ string, c *routeCtx) bool {
	switch typ {
	case ExchangeFanout:
		return true
	case ExchangeDirect:
		return slices.Contains(c.m.RoutingKeys, b.Key)
	case ExchangeTopic:
		for _, w := range c.topicWords() {
			if topicMatch(b.topic, w) {
				return true
			}
		}
		return false
	case ExchangeHeaders:
		return b.headers.match(c.headers.lookup(b.headers.mode.withX()))
	}
	return false
}
