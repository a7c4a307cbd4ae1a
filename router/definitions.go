package router

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/epitaph-mq/epitaph/value"
)

// definitions is the subset of RabbitMQ's definitions JSON epitaph reads.
// Unknown top-level fields (rabbit_version, global_parameters, ...) are ignored.
type definitions struct {
	VHosts      []defVHost      `json:"vhosts"`
	Users       json.RawMessage `json:"users"`       // the Accounts' section
	Permissions json.RawMessage `json:"permissions"` // the Accounts' section
	Policies    []defPolicy     `json:"policies"`
	Exchanges   []defExchange   `json:"exchanges"`
	Queues      []defQueue      `json:"queues"`
	Bindings    []defBinding    `json:"bindings"`
}

type defVHost struct {
	Name string `json:"name"`
}

type defPolicy struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Priority   json.Number    `json:"priority"`
	Definition map[string]any `json:"definition"`
}

type defQueue struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Type       string         `json:"type,omitempty"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

type defExchange struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

type defBinding struct {
	Source          string         `json:"source"`
	VHost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}

// LoadDefinitions applies a RabbitMQ definitions JSON document: vhosts,
// users, permissions, policies, exchanges, queues and bindings, in that
// order. Users and permissions go to the Accounts (SetAccounts); a document
// that has some fails without them. Items that already exist must be
// equivalent. Loading stops at the first error, which names the item;
// what was applied before it stays.
func (b *Broker) LoadDefinitions(data []byte) error {
	var d definitions
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return fmt.Errorf("%w: definitions: %w", ErrInvalidArgument, err)
	}
	applyAccounts := func() error { return nil }
	if a := b.getAccounts(); a != nil {
		apply, err := a.LoadDefinitions(d.Users, d.Permissions)
		if err != nil {
			return fmt.Errorf("%w: definitions: %w", ErrInvalidArgument, err)
		}
		applyAccounts = apply
	} else if !emptyJSONList(d.Users) || !emptyJSONList(d.Permissions) {
		return fmt.Errorf("%w: definitions: users and permissions given, but this broker keeps none", ErrInvalidArgument)
	}
	for _, v := range d.VHosts {
		if _, err := b.CreateVHost(v.Name); err != nil {
			return fmt.Errorf("definitions: %w", err)
		}
	}
	if err := applyAccounts(); err != nil {
		return fmt.Errorf("definitions: %w", err)
	}
	for _, p := range d.Policies {
		prio := int64(0)
		if p.Priority != "" {
			var ok bool
			if prio, ok = toInt64(p.Priority); !ok {
				return fmt.Errorf("%w: definitions: policy '%s' in vhost '%s': priority %s is not an integer", ErrInvalidArgument, p.Name, p.VHost, p.Priority)
			}
		}
		err := b.PutPolicy(Policy{VHost: cmp.Or(p.VHost, DefaultVHost), Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: int(prio), Definition: mapFromJSON(p.Definition)})
		if err != nil {
			return fmt.Errorf("definitions: policy '%s' in vhost '%s': %w", p.Name, p.VHost, err)
		}
	}
	for _, x := range d.Exchanges {
		if err := b.loadExchange(x); err != nil {
			return fmt.Errorf("definitions: exchange '%s' in vhost '%s': %w", x.Name, x.VHost, err)
		}
	}
	for _, q := range d.Queues {
		if err := b.loadQueue(q); err != nil {
			return fmt.Errorf("definitions: queue '%s' in vhost '%s': %w", q.Name, q.VHost, err)
		}
	}
	for _, bd := range d.Bindings {
		if err := b.loadBinding(bd); err != nil {
			return fmt.Errorf("definitions: binding from '%s' to %s '%s' in vhost '%s': %w", bd.Source, bd.DestinationType, bd.Destination, bd.VHost, err)
		}
	}
	return nil
}

// emptyJSONList reports whether raw is absent, null or an empty list.
func emptyJSONList(raw json.RawMessage) bool {
	var l []json.RawMessage
	return len(raw) == 0 || (json.Unmarshal(raw, &l) == nil && len(l) == 0)
}

func (b *Broker) defVHost(name string) (*VHost, error) {
	name = cmp.Or(name, DefaultVHost)
	v, ok := b.VHost(name)
	if !ok {
		return nil, fmt.Errorf("%w: no vhost '%s'", ErrNotFound, name)
	}
	return v, nil
}

func (b *Broker) loadExchange(d defExchange) error {
	v, err := b.defVHost(d.VHost)
	if err != nil {
		return err
	}
	if (d.Name == "" || isReserved(d.Name)) && v.HasExchange(d.Name) {
		return nil // a standard exchange, as some exports list them
	}
	_, err = v.DeclareExchange(ExchangeSpec{
		Name: d.Name, Type: d.Type, Durable: d.Durable, AutoDelete: d.AutoDelete,
		Internal: d.Internal, Arguments: mapFromJSON(d.Arguments),
	})
	return err
}

func (b *Broker) loadQueue(d defQueue) error {
	v, err := b.defVHost(d.VHost)
	if err != nil {
		return err
	}
	typ := QueueType(d.Type)
	if typ != Classic && typ != Quorum {
		typ = "" // streams and unknown types: x-queue-type decides (or fails)
	}
	_, _, err = v.DeclareQueue(QueueSpec{
		Name: d.Name, Type: typ, Durable: d.Durable, AutoDelete: d.AutoDelete,
		Arguments: mapFromJSON(d.Arguments),
	})
	return err
}

func (b *Broker) loadBinding(d defBinding) error {
	v, err := b.defVHost(d.VHost)
	if err != nil {
		return err
	}
	bd := Binding{Source: d.Source, Destination: d.Destination, Key: d.RoutingKey, Arguments: mapFromJSON(d.Arguments)}
	switch d.DestinationType {
	case "queue", "":
	case "exchange":
		bd.DestinationIsExchange = true
	default:
		return fmt.Errorf("%w: destination_type '%s' (queue or exchange)", ErrInvalidArgument, d.DestinationType)
	}
	return v.Bind(bd)
}

// ExportDefinitions returns the broker's topology, users, permissions and
// policies as a RabbitMQ definitions JSON document (standard exchanges and
// exclusive queues left out).
func (b *Broker) ExportDefinitions() ([]byte, error) {
	type export struct {
		RabbitVersion string          `json:"rabbit_version"`
		Users         json.RawMessage `json:"users"`
		VHosts        []defVHost      `json:"vhosts"`
		Permissions   json.RawMessage `json:"permissions"`
		Policies      []defPolicy     `json:"policies"`
		Queues        []defQueue      `json:"queues"`
		Exchanges     []defExchange   `json:"exchanges"`
		Bindings      []defBinding    `json:"bindings"`
	}
	e := export{RabbitVersion: "4.3.0", Users: json.RawMessage("[]"), VHosts: []defVHost{}, Permissions: json.RawMessage("[]"),
		Policies: []defPolicy{}, Queues: []defQueue{}, Exchanges: []defExchange{}, Bindings: []defBinding{}}
	if a := b.getAccounts(); a != nil {
		var err error
		if e.Users, e.Permissions, err = a.ExportDefinitions(); err != nil {
			return nil, fmt.Errorf("definitions: %w", err)
		}
	}
	for _, name := range b.VHosts() {
		e.VHosts = append(e.VHosts, defVHost{Name: name})
		v, ok := b.VHost(name)
		if !ok {
			continue
		}
		for _, p := range v.Policies() {
			e.Policies = append(e.Policies, defPolicy{VHost: name, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo,
				Priority: json.Number(fmt.Sprint(p.Priority)), Definition: mapToJSON(p.Definition)})
		}
		for _, q := range v.Queues() {
			if q.exclusive {
				continue
			}
			args := mapToJSON(q.args)
			if _, ok := args["x-queue-type"]; !ok {
				args["x-queue-type"] = string(q.typ)
			}
			e.Queues = append(e.Queues, defQueue{Name: q.name, VHost: name, Type: string(q.typ), Durable: q.durable,
				AutoDelete: q.autoDelete, Arguments: args})
		}
		for _, x := range v.Exchanges() {
			if x.Name == "" || isReserved(x.Name) {
				continue
			}
			e.Exchanges = append(e.Exchanges, defExchange{Name: x.Name, VHost: name, Type: x.Type, Durable: x.Durable,
				AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: mapToJSON(x.Arguments)})
		}
		for _, bd := range v.Bindings() {
			if bd.Source == "" {
				continue
			}
			dt := "queue"
			if bd.DestinationIsExchange {
				dt = "exchange"
			}
			e.Bindings = append(e.Bindings, defBinding{Source: bd.Source, VHost: name, Destination: bd.Destination,
				DestinationType: dt, RoutingKey: bd.Key, Arguments: mapToJSON(bd.Arguments)})
		}
	}
	return json.MarshalIndent(e, "", "  ")
}

// mapToJSON converts an AMQP map with string keys into JSON-friendly values.
func mapToJSON(m value.Map) map[string]any {
	out := make(map[string]any, len(m))
	for _, kv := range m {
		k, ok := keyString(kv.Key)
		if !ok {
			k = fmt.Sprint(kv.Key)
		}
		out[k] = valueToJSON(kv.Value)
	}
	return out
}

func valueToJSON(v any) any {
	switch x := v.(type) {
	case value.Map:
		return mapToJSON(x)
	case value.List:
		out := make([]any, len(x))
		for i := range x {
			out[i] = valueToJSON(x[i])
		}
		return out
	case value.Symbol:
		return string(x)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case value.Timestamp:
		return int64(x)
	}
	return v
}
