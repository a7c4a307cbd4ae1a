package router

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// VHost is a virtual host: exchanges, queues, bindings and policies.
type VHost struct {
	b    *Broker
	name string

	// routers recycles the scratch state of routing (its slices).
	routers sync.Pool

	mu        sync.RWMutex
	exchanges map[string]*exchange
	queues    map[string]*Queue
	policies  map[string]Policy
	deleted   bool

	// meta collects metadata writes made under mu; unlockMeta submits them
	// (in order) and waits for them after unlocking. topoChanged asks
	// unlockMeta to retry retained dead messages.
	meta        store.Batch
	topoChanged bool

	// deletionWatchers are told of each queue deleted in the
	// vhost (OnQueueDeleted). Guarded by watchMu, not mu: they are called
	// after the deletion, with no vhost or queue lock held.
	watchMu          sync.Mutex
	deletionWatchers map[*queueDeletionWatcher]struct{}

	// volatile are the direct reply-to queues (volatile.go).
	volatile volatileQueues
}

// queueDeletionWatcher is one OnQueueDeleted registration.
type queueDeletionWatcher struct{ fn func(q *Queue) }

// OnQueueDeleted calls fn with every queue deleted in the vhost
// from now on, by whatever path (a delete request, auto-delete, expiry,
// an exclusive owner's end, a definitions import, the vhost's deletion),
// until stop is called. fn is called with no lock held, on the deleting
// goroutine: it must not block (a connection posts to its loop's mailbox).
// Publishers use it to detach their links when their target queue goes,
// as consumers learn it from their subscription (QueueDeletedNotifier).
func (v *VHost) OnQueueDeleted(fn func(q *Queue)) (stop func()) {
	w := &queueDeletionWatcher{fn: fn}
	v.watchMu.Lock()
	if v.deletionWatchers == nil {
		v.deletionWatchers = map[*queueDeletionWatcher]struct{}{}
	}
	v.deletionWatchers[w] = struct{}{}
	v.watchMu.Unlock()
	return func() {
		v.watchMu.Lock()
		delete(v.deletionWatchers, w)
		v.watchMu.Unlock()
	}
}

// queueDeleted tells the deletion watchers that q is gone. They get the
// queue, not its name: a link that attached to a queue declared again
// under the same name meanwhile stays.
func (v *VHost) queueDeleted(q *Queue) {
	v.watchMu.Lock()
	fns := make([]func(*Queue), 0, len(v.deletionWatchers))
	for w := range v.deletionWatchers {
		fns = append(fns, w.fn)
	}
	v.watchMu.Unlock()
	for _, fn := range fns {
		fn(q)
	}
}

func newVHost(b *Broker, name string) *VHost {
	v := &VHost{
		b: b, name: name,
		exchanges: map[string]*exchange{},
		queues:    map[string]*Queue{},
		policies:  map[string]Policy{},
	}
	v.exchanges[""] = &exchange{spec: ExchangeSpec{Name: "", Type: ExchangeDirect, Durable: true}}
	for _, s := range standardExchanges {
		x, _ := newExchange(s)
		v.exchanges[s.Name] = x
	}
	return v
}

// Name returns the vhost name.
func (v *VHost) Name() string { return v.name }

// ---- queues ----

// DeclareQueue declares (or checks the equivalence of) a queue. An empty
// name gets a server-generated "amq.gen-" name. Errors wrap
// ErrPreconditionFailed (invalid or inequivalent arguments, type or flags),
// ErrResourceLocked (an exclusive queue of another owner) or
// ErrAccessRefused (a new name starting with "amq.").
func (v *VHost) DeclareQueue(s QueueSpec) (q *Queue, created bool, err error) {
	generated := s.Name == ""
	if generated {
		s.Name = generateName()
	} else if err := ValidateName("queue", s.Name); err != nil {
		return nil, false, err
	}
	typArg, hasTypArg, err := queueTypeArg(s.Name, s.Arguments)
	if err != nil {
		return nil, false, err
	}
	switch {
	case s.Type == "":
		if hasTypArg {
			s.Type = typArg
		}
	case s.Type != Classic && s.Type != Quorum:
		return nil, false, fmt.Errorf("%w: unsupported queue type '%s' for queue '%s'", ErrPreconditionFailed, s.Type, s.Name)
	case hasTypArg && typArg != s.Type:
		return nil, false, fmt.Errorf("%w: queue '%s': x-queue-type '%s' does not match queue type '%s'", ErrPreconditionFailed, s.Name, typArg, s.Type)
	}

	v.mu.Lock()
	defer v.unlockMeta()
	if v.deleted {
		return nil, false, fmt.Errorf("%w: vhost '%s' was deleted", ErrNotFound, v.name)
	}
	if old, ok := v.queues[s.Name]; ok {
		if err := old.equivalent(s); err != nil {
			return nil, false, err
		}
		old.mu.Lock()
		now := old.nowNano()
		old.lastUsed = now // a redeclare counts as use (x-expires)
		old.armTimerLocked(now)
		old.unlock()
		return old, false, nil
	}
	if isReserved(s.Name) && !generated && s.recoverID == 0 {
		return nil, false, fmt.Errorf("%w: queue name '%s' contains reserved prefix 'amq.*'", ErrAccessRefused, s.Name)
	}
	if s.Type == "" {
		s.Type = Classic
	}
	_, args, err := parseQueueArgs(s.Name, s.Type, s.Arguments)
	if err != nil {
		return nil, false, err
	}
	if err := unsupportedArg(s.Name, args); err != nil {
		if s.recoverID == 0 {
			return nil, false, err
		}
		// Stored by an earlier epitaph, which accepted it: the queue and its
		// messages come back, and the argument still has no effect.
		v.b.log.Warn("recover: queue argument not supported; it has no effect", "vhost", v.name, "queue", s.Name, "err", err)
	}
	if s.Type == Quorum {
		switch {
		case s.Exclusive:
			return nil, false, fmt.Errorf("%w: invalid property 'exclusive' for quorum queue '%s'", ErrPreconditionFailed, s.Name)
		case s.AutoDelete:
			return nil, false, fmt.Errorf("%w: invalid property 'auto-delete' for quorum queue '%s'", ErrPreconditionFailed, s.Name)
		case !s.Durable:
			return nil, false, fmt.Errorf("%w: invalid property 'non-durable' for quorum queue '%s'", ErrPreconditionFailed, s.Name)
		}
	}
	q = &Queue{
		vh: v, b: v.b, name: s.Name, typ: s.Type,
		durable: s.Durable, exclusive: s.Exclusive, autoDelete: s.AutoDelete,
		owner: s.Owner, args: args,
		persist: v.b.st != nil && s.Durable && !s.Exclusive,
		spills:  v.b.spillDir != "",
		sel:     selection{singleActive: singleActiveArg(args)},
	}
	q.initPriorities()
	q.id = s.recoverID
	if q.id == 0 {
		q.id = v.b.allocQueueID(&v.meta, q.persist)
	}
	if q.persist && v.b.metaOn() {
		v.meta.PutMeta(joinKey(metaQueue, v.name, q.name), encodeList(value.List{
			int64(q.id), string(q.typ), q.durable, q.exclusive, q.autoDelete, mapOrEmpty(args)}))
	}
	v.topoChanged = true
	cfg, polDef, notes := v.effectiveConfigLocked(s.Name, s.Type, args)
	q.lastUsed = q.nowNano()
	q.mu.Lock()
	q.setConfigLocked(cfg, polDef) // arms the timer
	q.unlock()
	v.queues[s.Name] = q
	q.logNotes(notes)
	return q, true, nil
}

// equivalent checks a redeclare against the existing queue.
func (q *Queue) equivalent(s QueueSpec) error {
	if q.exclusive && q.owner != s.Owner {
		return fmt.Errorf("%w: cannot obtain exclusive access to locked %s", ErrResourceLocked, q)
	}
	ineq := func(what string, got, cur any) error {
		return fmt.Errorf("%w: inequivalent arg '%s' for %s: received '%v' but current is '%v'", ErrPreconditionFailed, what, q, got, cur)
	}
	if s.Type != "" && s.Type != q.typ {
		return ineq("x-queue-type", s.Type, q.typ)
	}
	_, args, err := parseQueueArgs(s.Name, q.typ, s.Arguments)
	if err != nil {
		return err
	}
	if err := unsupportedArg(s.Name, args); err != nil {
		return err
	}
	switch {
	case s.Durable != q.durable:
		return ineq("durable", s.Durable, q.durable)
	case s.Exclusive != q.exclusive:
		return ineq("exclusive", s.Exclusive, q.exclusive)
	case s.AutoDelete != q.autoDelete:
		return ineq("auto_delete", s.AutoDelete, q.autoDelete)
	}
	if k, ok := argsEquivalent(args, q.args); !ok {
		got, _ := lookupKey(args, k)
		cur, _ := lookupKey(q.args, k)
		return ineq(k, got, cur)
	}
	return nil
}

func generateName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "amq.gen-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Queue looks a queue up.
func (v *VHost) Queue(name string) (*Queue, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	q, ok := v.queues[name]
	return q, ok
}

// Queues returns the vhost's queues sorted by name.
func (v *VHost) Queues() []*Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]*Queue, 0, len(v.queues))
	for _, n := range slices.Sorted(maps.Keys(v.queues)) {
		out = append(out, v.queues[n])
	}
	return out
}

// Resolve returns the named queue. When it does not exist and the broker
// was started with AutoCreateQueues, a durable classic queue is declared;
// otherwise the error wraps ErrNotFound.
func (v *VHost) Resolve(name string) (*Queue, error) {
	if q, ok := v.Queue(name); ok {
		return q, nil
	}
	if !v.b.opts.AutoCreateQueues {
		return nil, fmt.Errorf("%w: no queue '%s' in vhost '%s'", ErrNotFound, name, v.name)
	}
	q, _, err := v.DeclareQueue(QueueSpec{Name: name, Type: Classic, Durable: true})
	return q, err
}

// DeleteQueue deletes a queue and returns how many messages it held.
// Its messages are dropped, never dead-lettered; its consumers' subscriptions end.
func (v *VHost) DeleteQueue(name string) (int, error) {
	v.mu.Lock()
	q, ok := v.queues[name]
	if !ok {
		v.unlockMeta()
		return 0, fmt.Errorf("%w: no queue '%s' in vhost '%s'", ErrNotFound, name, v.name)
	}
	n, subs := v.removeQueueLocked(q)
	v.unlockMeta()
	notifyDeleted(q, subs)
	return n, nil
}

// removeQueueLocked unregisters q, its bindings and its state.
func (v *VHost) removeQueueLocked(q *Queue) (int, []*Subscription) {
	delete(v.queues, q.name)
	if q.persist && v.b.st != nil {
		// One batch with the queue's data, after every operation of the
		// queue (submitted under v.mu, before q.mu is released).
		v.meta.DeleteMeta(joinKey(metaQueue, v.name, q.name)).DeleteMeta(seqKey(q.id)).DeleteQueue(q.id)
	}
	v.removeBindingsLocked(func(b *binding) bool { return !b.DestinationIsExchange && b.Destination == q.name })
	q.mu.Lock()
	defer q.unlock()
	return q.deleteLocked()
}

// DeleteExclusive deletes every exclusive queue owned by owner.
func (v *VHost) DeleteExclusive(owner any) {
	type gone struct {
		q    *Queue
		subs []*Subscription
	}
	var deleted []gone
	v.mu.Lock()
	for _, q := range v.queues {
		if q.exclusive && q.owner == owner {
			_, subs := v.removeQueueLocked(q)
			deleted = append(deleted, gone{q, subs})
		}
	}
	v.unlockMeta()
	for _, g := range deleted {
		notifyDeleted(g.q, g.subs)
	}
}

// expireQueue deletes q if its x-expires deadline has passed.
func (v *VHost) expireQueue(q *Queue) {
	v.deleteIf(q, func() bool {
		at, ok := q.expiresAtLocked()
		return ok && at <= q.nowNano()
	})
}

// autoDeleteQueue deletes an auto-delete q whose last consumer went away.
func (v *VHost) autoDeleteQueue(q *Queue) {
	v.deleteIf(q, func() bool { return q.hadConsumer && q.consumersLocked() == 0 })
}

func (v *VHost) deleteIf(q *Queue, cond func() bool) {
	v.mu.Lock()
	if v.queues[q.name] != q {
		v.unlockMeta()
		return
	}
	q.mu.Lock()
	ok := !q.deleted && cond()
	if !ok {
		q.armTimerLocked(q.nowNano())
	}
	q.unlock()
	var subs []*Subscription
	if ok {
		_, subs = v.removeQueueLocked(q)
	}
	v.unlockMeta()
	if ok {
		v.b.log.Debug("queue deleted", "queue", q.name, "vhost", v.name)
		notifyDeleted(q, subs)
	}
}

// ---- exchanges ----

// DeclareExchange declares (or checks) an exchange. The default exchange
// and names starting with "amq." are refused (ErrAccessRefused); a
// redeclare with another type, flags or arguments fails with
// ErrPreconditionFailed; an unknown type with ErrInvalidArgument.
func (v *VHost) DeclareExchange(s ExchangeSpec) (created bool, err error) {
	if err := ValidateName("exchange", s.Name); err != nil {
		return false, err
	}
	if s.Name == "" || isReserved(s.Name) {
		return false, fmt.Errorf("%w: exchange name '%s' is reserved", ErrAccessRefused, s.Name)
	}
	v.mu.Lock()
	defer v.unlockMeta()
	if v.deleted {
		return false, fmt.Errorf("%w: vhost '%s' was deleted", ErrNotFound, v.name)
	}
	if x, ok := v.exchanges[s.Name]; ok {
		return false, x.equivalent(s)
	}
	x, err := newExchange(s)
	if err != nil {
		return false, err
	}
	v.applyExchangePolicyLocked(x)
	v.exchanges[s.Name] = x
	if s.Durable && v.b.metaOn() {
		v.meta.PutMeta(joinKey(metaExchange, v.name, s.Name), encodeList(value.List{
			s.Type, s.Durable, s.AutoDelete, s.Internal, mapOrEmpty(s.Arguments)}))
	}
	v.topoChanged = true
	return true, nil
}

// DeleteExchange deletes an exchange and its bindings (as source and as
// destination).
func (v *VHost) DeleteExchange(name string) error {
	if name == "" || isReserved(name) {
		return fmt.Errorf("%w: exchange '%s' cannot be deleted", ErrAccessRefused, name)
	}
	v.mu.Lock()
	defer v.unlockMeta()
	if _, ok := v.exchanges[name]; !ok {
		return fmt.Errorf("%w: no exchange '%s' in vhost '%s'", ErrNotFound, name, v.name)
	}
	v.deleteExchangeLocked(name)
	return nil
}

func (v *VHost) deleteExchangeLocked(name string) {
	if x, ok := v.exchanges[name]; ok && x.spec.Durable && v.b.metaOn() {
		v.meta.DeleteMeta(joinKey(metaExchange, v.name, name))
	}
	delete(v.exchanges, name)
	v.removeBindingsLocked(func(b *binding) bool {
		return b.Source == name || (b.DestinationIsExchange && b.Destination == name)
	})
}

// HasExchange reports whether the exchange exists ("" is the default exchange).
func (v *VHost) HasExchange(name string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	_, ok := v.exchanges[name]
	return ok
}

// Exchange describes an exchange.
func (v *VHost) Exchange(name string) (ExchangeInfo, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.exchanges[name]
	if !ok {
		return ExchangeInfo{}, false
	}
	return x.info(v.name), true
}

// Exchanges describes the vhost's exchanges sorted by name (the default
// exchange "" first).
func (v *VHost) Exchanges() []ExchangeInfo {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]ExchangeInfo, 0, len(v.exchanges))
	for _, n := range slices.Sorted(maps.Keys(v.exchanges)) {
		out = append(out, v.exchanges[n].info(v.name))
	}
	return out
}

// ---- bindings ----

// Bind adds a binding (idempotent). The default exchange cannot be bound
// (ErrAccessRefused); a missing source or destination gives ErrNotFound; a
// headers binding with a bad x-match, or a binding an x-local-random
// exchange cannot have, gives ErrPreconditionFailed.
func (v *VHost) Bind(b Binding) error {
	if b.Source == "" || (b.DestinationIsExchange && b.Destination == "") {
		return fmt.Errorf("%w: operation not permitted on the default exchange", ErrAccessRefused)
	}
	b.Arguments = stringKeys(b.Arguments)
	v.mu.Lock()
	defer v.unlockMeta()
	x, err := v.checkBindingLocked(b)
	if err != nil {
		return err
	}
	if err := x.validateBinding(b, v.queues); err != nil {
		return err
	}
	if x.hasBinding(b) {
		return nil
	}
	nb := &binding{Binding: b}
	switch x.spec.Type {
	case ExchangeTopic:
		nb.topic = compileTopic(b.Key)
	case ExchangeHeaders:
		if nb.headers, err = compileHeaders(b.Arguments); err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
	}
	x.bindings = append(x.bindings, nb)
	if v.b.metaOn() && x.spec.Durable && v.durableDestLocked(b) {
		v.meta.PutMeta(bindingKey(v.name, b), encodeBinding(b))
	}
	v.topoChanged = true
	return nil
}

func (v *VHost) checkBindingLocked(b Binding) (*exchange, error) {
	x, ok := v.exchanges[b.Source]
	if !ok {
		return nil, fmt.Errorf("%w: no exchange '%s' in vhost '%s'", ErrNotFound, b.Source, v.name)
	}
	if b.DestinationIsExchange {
		if _, ok := v.exchanges[b.Destination]; !ok {
			return nil, fmt.Errorf("%w: no exchange '%s' in vhost '%s'", ErrNotFound, b.Destination, v.name)
		}
	} else if _, ok := v.queues[b.Destination]; !ok {
		return nil, fmt.Errorf("%w: no queue '%s' in vhost '%s'", ErrNotFound, b.Destination, v.name)
	}
	return x, nil
}

// Unbind removes a binding. Removing a binding that does not exist is not
// an error; a missing source or destination is (ErrNotFound). An
// auto-delete exchange is deleted with its last binding.
func (v *VHost) Unbind(b Binding) error {
	if b.Source == "" || (b.DestinationIsExchange && b.Destination == "") {
		return fmt.Errorf("%w: operation not permitted on the default exchange", ErrAccessRefused)
	}
	b.Arguments = stringKeys(b.Arguments)
	v.mu.Lock()
	defer v.unlockMeta()
	if _, err := v.checkBindingLocked(b); err != nil {
		return err
	}
	v.removeBindingsLocked(func(o *binding) bool { return o.same(b) })
	return nil
}

// removeBindingsLocked removes the bindings matching drop, then deletes
// auto-delete exchanges left without bindings.
func (v *VHost) removeBindingsLocked(drop func(*binding) bool) {
	var emptied []string
	for name, x := range v.exchanges {
		n := len(x.bindings)
		if n == 0 {
			continue
		}
		x.bindings = slices.DeleteFunc(x.bindings, func(b *binding) bool {
			if !drop(b) {
				return false
			}
			if v.b.metaOn() {
				v.meta.DeleteMeta(bindingKey(v.name, b.Binding))
			}
			return true
		})
		if len(x.bindings) == 0 && x.spec.AutoDelete {
			emptied = append(emptied, name)
		}
	}
	for _, name := range emptied {
		if _, ok := v.exchanges[name]; ok {
			v.deleteExchangeLocked(name)
		}
	}
}

// Bindings lists the vhost's bindings: the default exchange's implicit
// bindings (one per queue) first, then each exchange's in order.
func (v *VHost) Bindings() []Binding {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []Binding
	for _, n := range slices.Sorted(maps.Keys(v.queues)) {
		out = append(out, Binding{Source: "", Destination: n, Key: n})
	}
	for _, n := range slices.Sorted(maps.Keys(v.exchanges)) {
		for _, b := range v.exchanges[n].bindings {
			c := b.Binding
			c.Arguments = cloneMap(c.Arguments)
			out = append(out, c)
		}
	}
	return out
}

func stringKeys(m value.Map) value.Map {
	if m == nil {
		return nil
	}
	out := make(value.Map, 0, len(m))
	for _, kv := range m {
		if k, ok := kv.Key.(value.Symbol); ok {
			kv.Key = string(k)
		}
		out = append(out, kv)
	}
	return out
}

// ---- publishing ----

// Publish is one message to publish: what VHost.Publish takes.
type Publish struct {
	// Exchange to publish to ("" or "amq.default" is the default exchange).
	Exchange string
	// Msg, with its RoutingKeys set by the caller (x-cc / CC keys included).
	// The enqueued message has Exchange set to the exchange published to.
	Msg *Message
	// Confirm, when not nil, makes a durable publish asynchronous: when Msg
	// must first be made durable (a durable message routed to at least one
	// durable queue, with a store), Publish returns Pending and later calls
	// Confirm exactly once with the final outcome, from the store's
	// goroutine; Confirm must not block. Otherwise Confirm is never called.
	// Without Confirm, such a publish blocks until the message is synced.
	Confirm func(Outcome)
	// RouteKeys, when not nil, are the keys the message is routed with
	// instead of Msg.RoutingKeys, which it keeps: AMQP 0-9-1's BCC keys
	// route but are not part of the message (nor of its death history).
	RouteKeys []string
	// Queues, when not nil, is storage for PublishResult.Queues (written
	// from Queues[:0]): a caller that publishes often passes the previous
	// result to reuse it. Nothing keeps a reference to it.
	Queues []*Queue
}

// PublishResult is what Publish did.
type PublishResult struct {
	// Outcome for the publisher: Accepted, Released when the message routed
	// nowhere, or Rejected with Error for reject-publish overflow (or, after
	// a store failure, amqp:internal-error). Not final while Pending.
	Outcome Outcome
	// Queues the message was routed to (deduplicated, in routing order).
	Queues []*Queue
	// Pending: the outcome comes later, through Publish.Confirm.
	Pending bool
	// Volatile is the number of volatile (direct reply-to) queues the
	// message was routed to, which Queues does not hold.
	Volatile int
}

// Publish routes p.Msg through p.Exchange and enqueues it. It fails with
// ErrNotFound when the exchange is missing and ErrAccessRefused when it is
// internal; a refusal by a queue is an outcome, not an error.
//
// A message routed to several queues is rejected when any of them refuses
// it (the others keep their copy), as RabbitMQ does. A durable message
// routed to durable queues is appended to every durable target in one
// atomic store batch and made visible to consumers at once (they may
// receive it before the sync, as with RabbitMQ); the outcome is then final
// once the store has synced it (see Publish.Confirm). If the store fails,
// the outcome is rejected with amqp:internal-error and the in-memory
// copies are withdrawn where still ready. Without a store nothing is ever
// pending.
func (v *VHost) Publish(p Publish) (PublishResult, error) {
	if p.Confirm != nil {
		return v.publish(p.Queues, p.Exchange, p.Msg, p.RouteKeys, p.Confirm, nil)
	}
	var ch chan Outcome
	res, err := v.publish(p.Queues, p.Exchange, p.Msg, p.RouteKeys, func(o Outcome) { ch <- o }, func() { ch = make(chan Outcome, 1) })
	if res.Pending {
		res.Outcome, res.Pending = <-ch, false
	}
	return res, err
}

// publish routes and enqueues m. Durable targets of a durable message get
// it in one atomic store batch; then the result is pending and confirm is
// called once with the final outcome from the store's callback (prepare,
// if not nil, runs first, before anything can call confirm).
func (v *VHost) publish(dst []*Queue, exchange string, m *Message, routeKeys []string, confirm func(Outcome), prepare func()) (PublishResult, error) {
	if exchange == "amq.default" {
		exchange = ""
	}
	v.b.alarms.Consumed(m.size())
	rm := m
	if routeKeys != nil {
		c := *m
		c.RoutingKeys = routeKeys
		rm = &c
	}
	queues, err := v.route(dst, exchange, rm)
	if err != nil {
		return PublishResult{}, err
	}
	if m.Exchange != exchange {
		c := *m
		c.Exchange = exchange
		m = &c
	}
	// The default exchange also routes to the volatile queues its keys
	// name; a message they took (or dropped, at most once) is accepted.
	volatile := 0
	if exchange == "" {
		volatile = v.routeVolatile(m)
	}
	if len(queues) == 0 {
		if volatile > 0 {
			return PublishResult{Outcome: Outcome{Kind: Accepted}, Queues: queues, Volatile: volatile}, nil
		}
		return PublishResult{Outcome: Outcome{Kind: Released}, Queues: queues}, nil
	}
	if m.Header.Durable && v.b.st != nil && slices.ContainsFunc(queues, func(q *Queue) bool { return q.persist }) {
		if prepare != nil {
			prepare()
		}
		o, pending := v.b.publishDurable(m, queues, confirm)
		return PublishResult{Outcome: o, Queues: queues, Pending: pending, Volatile: volatile}, nil
	}
	var rejectedBy *Queue
	accepted := volatile > 0
	for _, q := range queues {
		switch q.enqueue(m) {
		case enqueued:
			accepted = true
		case enqueueRejected:
			if rejectedBy == nil {
				rejectedBy = q
			}
		case enqueueGone:
		}
	}
	return PublishResult{Outcome: publishOutcome(rejectedBy, accepted), Queues: queues, Volatile: volatile}, nil
}

func publishOutcome(rejectedBy *Queue, accepted bool) Outcome {
	switch {
	case rejectedBy != nil:
		return Outcome{Kind: Rejected, Error: maxLenError(rejectedBy.name)}
	case accepted:
		return Outcome{Kind: Accepted}
	}
	return Outcome{Kind: Released}
}

// Enqueue puts m on q as if a publish had routed it there; the dead-letter
// path uses it for each routed target queue that is not a cycle. It returns
// Accepted, Rejected with RabbitMQ's maxlen error when q's overflow refuses
// m, or Released when q has been deleted.
func (q *Queue) Enqueue(m *Message) Outcome {
	switch q.enqueue(m) {
	case enqueued:
		return Outcome{Kind: Accepted}
	case enqueueRejected:
		return Outcome{Kind: Rejected, Error: maxLenError(q.name)}
	}
	return Outcome{Kind: Released}
}

// EnqueueBatch is Enqueue of each of msgs, in order, under one acquisition
// of q's lock. Messages q refuses (overflow, or q deleted) are dropped and
// counted in refused, for the caller to report.
func (q *Queue) EnqueueBatch(msgs []*Message) (refused int) {
	var encs [][]byte
	if q.persist {
		for i, m := range msgs {
			if m.Header.Durable {
				if encs == nil {
					encs = make([][]byte, len(msgs))
				}
				encs[i] = q.b.encode(m)
			}
		}
	}
	var recs []store.Record
	q.mu.Lock()
	for i, m := range msgs {
		var enc []byte
		if encs != nil {
			enc = encs[i]
		}
		if r := q.enqueueLocked(m, enc, &recs); r == enqueueRejected || r == enqueueGone {
			refused++
		}
	}
	if len(recs) > 0 {
		q.b.st.Commit(new(store.Batch).Append(recs...), q.b.logStoreErr)
	}
	q.unlock()
	q.flushDead()
	return refused
}

// Route returns the queues a message published to exchange would reach
// (deduplicated, in routing order), without enqueueing it.
func (v *VHost) Route(exchange string, m *Message) ([]*Queue, error) {
	return v.RouteAppend(nil, exchange, m)
}

// RouteAppend is Route appending the queues to dst[:0]: a caller that
// routes often passes the previous result to reuse its storage.
func (v *VHost) RouteAppend(dst []*Queue, exchange string, m *Message) ([]*Queue, error) {
	if exchange == "amq.default" {
		exchange = ""
	}
	return v.route(dst, exchange, m)
}

func (v *VHost) route(dst []*Queue, xname string, m *Message) ([]*Queue, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	x, ok := v.exchanges[xname]
	if !ok {
		return nil, fmt.Errorf("%w: no exchange '%s' in vhost '%s'", ErrNotFound, xname, v.name)
	}
	if x.spec.Internal {
		return nil, fmt.Errorf("%w: cannot publish to internal exchange '%s' in vhost '%s'", ErrAccessRefused, xname, v.name)
	}
	r, _ := v.routers.Get().(*router)
	if r == nil {
		r = new(router)
	}
	r.v = v
	r.ctx = routeCtx{m: m, headers: headerData{m: m}}
	r.c = &r.ctx
	r.queues = dst[:0]
	r.routeLocked(x)
	queues := r.queues
	clear(r.seenX)
	clear(r.matched)
	*r = router{seenX: r.seenX[:0], matched: r.matched[:0]}
	v.routers.Put(r)
	return queues, nil
}

// router collects one publish's destinations.
type router struct {
	v       *VHost
	c       *routeCtx
	ctx     routeCtx // what c points at
	seenX   []*exchange
	queues  []*Queue
	seenQ   map[*Queue]struct{}
	matched []*binding
}

func (r *router) addQueue(q *Queue) {
	if r.seenQ == nil {
		if len(r.queues) < 8 {
			if slices.Contains(r.queues, q) {
				return
			}
			r.queues = append(r.queues, q)
			return
		}
		r.seenQ = make(map[*Queue]struct{}, 2*len(r.queues))
		for _, o := range r.queues {
			r.seenQ[o] = struct{}{}
		}
	}
	if _, ok := r.seenQ[q]; ok {
		return
	}
	r.seenQ[q] = struct{}{}
	r.queues = append(r.queues, q)
}

func (r *router) routeLocked(x *exchange) {
	if slices.Contains(r.seenX, x) {
		return // exchange-to-exchange or alternate-exchange loop
	}
	r.seenX = append(r.seenX, x)
	if x.spec.Name == "" {
		for _, k := range r.c.m.RoutingKeys {
			if q, ok := r.v.queues[k]; ok {
				r.addQueue(q)
			}
		}
		return
	}
	start := len(r.matched)
	r.matched = x.match(r.c, r.matched)
	matched := r.matched[start:]
	for _, b := range matched {
		if b.DestinationIsExchange {
			if dx, ok := r.v.exchanges[b.Destination]; ok {
				r.routeLocked(dx)
			}
		} else if q, ok := r.v.queues[b.Destination]; ok {
			r.addQueue(q)
		}
	}
	if len(matched) == 0 {
		if ae, ok := x.alternateExchange(); ok {
			if ax, ok := r.v.exchanges[ae]; ok {
				r.routeLocked(ax)
			}
		}
	}
}

// String returns "vhost '<name>'".
func (v *VHost) String() string { return "vhost '" + strings.ReplaceAll(v.name, "'", "\\'") + "'" }
