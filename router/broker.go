package router

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// Options configure a Broker. Zero values mean defaults.
type Options struct {
	Logger *slog.Logger
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// DeadLetterer receives messages that die; nil drops them.
	DeadLetterer DeadLetterer
	// AutoCreateQueues makes Resolve of a bare address declare a classic queue.
	AutoCreateQueues bool
}

// DeadLetterer takes messages that died in src, in the order they died. It
// is called without any queue lock held.
type DeadLetterer interface {
	DeadLetter(src *Queue, dead []Dead)
}

// Dead is one message leaving a queue to be dead-lettered.
type Dead struct {
	Msg    *Message // a copy carrying the queue's delivery count and merged annotations
	Reason Reason
	// Error is the consumer's rejected error, if any (issue 3's x-last-death-error-*).
	Error *amqp10.Error
}

// Broker is the root of the data model. Call Close to stop its timers.
type Broker struct {
	opts Options
	log  *slog.Logger
	now  func() time.Time
	dl   atomic.Pointer[dlHolder]

	closed atomic.Bool

	mu     sync.RWMutex
	vhosts map[string]*VHost
	users  map[string]*User
	perms  map[string]map[string]Permission // user → vhost → permission
}

type dlHolder struct{ d DeadLetterer }

// DefaultVHost is the vhost every broker starts with.
const DefaultVHost = "/"

// New returns a broker with the default vhost "/" and its standard exchanges.
func New(opts Options) *Broker {
	b := &Broker{
		opts:   opts,
		log:    opts.Logger,
		now:    opts.Now,
		vhosts: map[string]*VHost{},
		users:  map[string]*User{},
		perms:  map[string]map[string]Permission{},
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	if opts.DeadLetterer != nil {
		b.dl.Store(&dlHolder{opts.DeadLetterer})
	}
	b.vhosts[DefaultVHost] = newVHost(b, DefaultVHost)
	return b
}

// SetDeadLetterer replaces the DeadLetterer (nil drops dead messages). It
// lets the dead-letter component, which needs the broker, be wired after New.
func (b *Broker) SetDeadLetterer(d DeadLetterer) {
	if d == nil {
		b.dl.Store(nil)
		return
	}
	b.dl.Store(&dlHolder{d})
}

func (b *Broker) deadLetterer() DeadLetterer {
	if h := b.dl.Load(); h != nil {
		return h.d
	}
	return nil
}

// Logger returns the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

// Close stops timers; further calls are no-ops. Queues keep their messages
// but no longer expire them on their own.
func (b *Broker) Close() {
	if b.closed.Swap(true) {
		return
	}
	b.mu.RLock()
	vhosts := slices.Collect(maps.Values(b.vhosts))
	b.mu.RUnlock()
	for _, v := range vhosts {
		for _, q := range v.Queues() {
			q.mu.Lock()
			q.stopTimerLocked()
			q.mu.Unlock()
		}
	}
}

// VHost returns the named virtual host.
func (b *Broker) VHost(name string) (*VHost, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v, ok := b.vhosts[name]
	return v, ok
}

// AddVHost creates a vhost with the standard exchanges (idempotent).
func (b *Broker) AddVHost(name string) *VHost {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.vhosts[name]; ok {
		return v
	}
	v := newVHost(b, name)
	b.vhosts[name] = v
	return v
}

// VHosts returns the vhost names, sorted.
func (b *Broker) VHosts() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return slices.Sorted(maps.Keys(b.vhosts))
}

// DeleteVHost deletes a vhost with its queues (messages dropped, not
// dead-lettered), exchanges, policies and permissions.
func (b *Broker) DeleteVHost(name string) error {
	b.mu.Lock()
	v, ok := b.vhosts[name]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("%w: no vhost '%s'", ErrNotFound, name)
	}
	delete(b.vhosts, name)
	for _, pv := range b.perms {
		delete(pv, name)
	}
	b.mu.Unlock()

	type gone struct {
		q    *Queue
		subs []*Subscription
	}
	var deleted []gone
	v.mu.Lock()
	v.deleted = true
	for _, q := range v.queues {
		q.mu.Lock()
		_, subs := q.deleteLocked()
		q.mu.Unlock()
		deleted = append(deleted, gone{q, subs})
	}
	clear(v.queues)
	clear(v.exchanges)
	clear(v.policies)
	v.mu.Unlock()
	for _, g := range deleted {
		notifyDeleted(g.q, g.subs)
	}
	return nil
}
