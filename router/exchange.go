package router

import (
	"fmt"
	"slices"

	"github.com/epitaph-mq/epitaph/value"
)

// Exchange types.
const (
	ExchangeDirect  = "direct"
	ExchangeFanout  = "fanout"
	ExchangeTopic   = "topic"
	ExchangeHeaders = "headers"
)

// ExchangeSpec declares an exchange.
type ExchangeSpec struct {
	Name       string
	Type       string // direct, fanout, topic, headers
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
	bindings  []*binding
}

type binding struct {
	Binding
	topic   []string
	headers *headersSpec
}

func newExchange(s ExchangeSpec) (*exchange, error) {
	switch s.Type {
	case ExchangeDirect, ExchangeFanout, ExchangeTopic, ExchangeHeaders:
	default:
		return nil, fmt.Errorf("%w: invalid exchange type '%s' for exchange '%s'", ErrInvalidArgument, s.Type, s.Name)
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

// match returns the bindings of x that the message matches.
func (x *exchange) match(c *routeCtx, out []*binding) []*binding {
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
