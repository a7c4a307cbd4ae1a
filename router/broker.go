package router

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/epitaph-mq/epitaph/alarm"
	"github.com/epitaph-mq/epitaph/router/ratelog"
	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/router/store/segment"
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

	// Store keeps durable queues' durable messages and the broker's
	// metadata. Nil means no persistence at all (store.NewMemory semantics:
	// today's in-memory behaviour, nothing is encoded). See persist.go.
	Store store.Store
	// DeadLetterRetryInterval is how often retained at-least-once dead
	// messages are retried (RabbitMQ's
	// dead_letter_worker_publisher_confirm_timeout); 0 means 180 s.
	DeadLetterRetryInterval time.Duration

	// Resource alarms (package alarm, Broker.Alarms). DiskFreeLimit:
	// publishers are blocked while the free space of DataDir's filesystem
	// is below it (0: no disk alarm). MemoryHighWatermark: blocked while the
	// process's memory is above it in bytes (0: no memory alarm).
	// AlarmInterval: how often both are checked (0 means 1 s). DiskFree and
	// MemoryUsed replace the readers (tests).
	DataDir             string
	DiskFreeLimit       uint64
	MemoryHighWatermark uint64
	AlarmInterval       time.Duration
	DiskFree            func(dir string) (uint64, error)
	MemoryUsed          func() uint64

	// QueueWindowBytes bounds the ready messages a persisting queue keeps
	// in memory with their bodies (its head window); the others are paged:
	// an index slot in memory, the body in the store (paged.go). 0 means
	// DefaultQueueWindowBytes; negative keeps every message in memory.
	QueueWindowBytes int64
	// SpillDir is where queues write the transient messages that fall
	// behind their window (spill.go): one segment log per queue level,
	// without fsync, emptied by New. "" keeps them in memory (in-memory
	// brokers). Paging needs a window (QueueWindowBytes not negative).
	SpillDir string

	spillFS  segment.FS                // tests: the spill logs' file system (fault injection)
	loadHook func(q *Queue, done bool) // tests: Broker.loadHook
}

// DefaultQueueWindowBytes is the default of Options.QueueWindowBytes.
const DefaultQueueWindowBytes = 4 << 20

// DeadLetterer takes messages that died in src, in the order they died. It
// is called without any queue lock held. dead is valid only during the
// call: the queue reuses its storage.
type DeadLetterer interface {
	DeadLetter(src *Queue, dead []Dead)
}

// Dead is one message leaving a queue to be dead-lettered.
//
// With a durable store a dead message may still be stored in its source
// queue (Durable): the DeadLetterer should then hand the copy to
// src.ForwardDead, which enqueues it into the targets and removes the
// source's stored copy in one atomic store batch. If it does not, the router
// removes the stored copy itself once DeadLetter returns (at most once).
//
// Retained dead messages (at-least-once, quorum queues) stay in the source
// queue until src.ForwardDead reports that at least one target took the copy;
// until then the router hands them over again on every topology or policy
// change and every Options.DeadLetterRetryInterval.
type Dead struct {
	Msg    Message // a copy carrying the queue's delivery count and merged annotations
	Reason Reason
	// Error is the consumer's rejected error, if any; it becomes the
	// x-last-death-error-* annotations.
	Error *Error
	// Retained: at-least-once; the message stays in the source queue until
	// ForwardDead moves it.
	Retained bool
	// Time is when a retained message first died, kept across retries and
	// restarts; zero for the others (the DeadLetterer reads the clock once
	// per call for those).
	Time time.Time

	e *entry // the source entry when stored or retained
}

// Durable reports whether the dead message still has a stored copy in its
// source queue (or is retained): use Queue.ForwardDead.
func (d *Dead) Durable() bool { return d.e != nil }

// Broker is the root of the data model. Call Close to stop its timers.
type Broker struct {
	opts Options
	log  *slog.Logger
	// storeLog writes store failures, which repeat per message while the
	// store is failing: one line per cause per interval.
	storeLog *ratelog.Limiter
	now      func() time.Time
	dl       atomic.Pointer[dlHolder]

	closed atomic.Bool

	// Persistence: st is nil without a store.
	st      store.Store
	loading atomic.Bool // Recover: metadata is being read back, not written
	nextQID atomic.Uint64
	qidMu   sync.Mutex
	qidRes  uint64 // next queue id reserved in the metadata

	// At-least-once retry timer.
	retained   atomic.Int64 // retained messages, all queues
	retryMu    sync.Mutex
	retryTimer *time.Timer
	retryEvery time.Duration

	// Paging: the window of each persisting queue, and the paged messages
	// the store could not give back (UnreadableMessages).
	windowBytes int64
	unreadable  atomic.Int64
	// Transient paging (spill.go): spillDir is "" when it is off;
	// spillFailed counts messages kept in memory for want of disk.
	spillDir    string
	spillFS     segment.FS
	spillFailed atomic.Int64
	// Deep queues are read back after Recover returns, by one loader
	// goroutine (recover.go); Close waits for it. loadHook, when set (tests),
	// runs after each chunk a queue reads back, without locks.
	loaderWG sync.WaitGroup
	loadHook func(q *Queue, done bool)

	alarms alarm.Monitor // by value: the publish path counts its bytes without a pointer chase

	accounts atomic.Pointer[accountsHolder]

	mu     sync.RWMutex
	vhosts map[string]*VHost
}

type dlHolder struct{ d DeadLetterer }

type accountsHolder struct{ a Accounts }

// Accounts is the owner of users and permissions (package auth), which sits
// above the router: the router keeps no users, but vhost deletion and
// definitions documents reach their permissions and users through it. It is
// never called with a router lock held.
type Accounts interface {
	// VHostDeleted drops the vhost's permissions and adds the deletion of
	// their records to mb, the batch that deletes the vhost.
	VHostDeleted(vhost string, mb *store.Batch)
	// LoadDefinitions parses a definitions document's users and
	// permissions sections (JSON, nil when absent) and returns what applies
	// them, in that order. The router parses the whole document before it
	// applies anything, and calls apply after the vhosts and before the
	// policies.
	LoadDefinitions(users, permissions json.RawMessage) (apply func() error, err error)
	// ExportDefinitions returns the users and permissions sections.
	ExportDefinitions() (users, permissions json.RawMessage, err error)
}

// SetAccounts sets the owner of users and permissions (auth.New calls it).
func (b *Broker) SetAccounts(a Accounts) {
	if a == nil {
		b.accounts.Store(nil)
		return
	}
	b.accounts.Store(&accountsHolder{a})
}

func (b *Broker) getAccounts() Accounts {
	if h := b.accounts.Load(); h != nil {
		return h.a
	}
	return nil
}

// CommitMeta submits mb, metadata records of a package that keeps them in
// the broker's store (package auth), without waiting for the sync; a
// failure is logged as the router's own. Without a store it does nothing.
func (b *Broker) CommitMeta(mb *store.Batch) {
	if b.metaOn() {
		b.st.Commit(mb, b.logStoreErr)
	}
}

// UnreadableMessages is the number of paged messages whose bodies the store
// could not give back (damaged or missing), each logged with its queue and
// seq when found.
func (b *Broker) UnreadableMessages() int64 { return b.unreadable.Load() }

// DefaultVHost is the vhost every broker starts with.
const DefaultVHost = "/"

// New returns a broker with the default vhost "/" and its standard exchanges.
func New(opts Options) *Broker {
	b := &Broker{
		opts:   opts,
		log:    opts.Logger,
		now:    opts.Now,
		vhosts: map[string]*VHost{},
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.storeLog = ratelog.New(b.log, 0)
	if b.now == nil {
		b.now = time.Now
	}
	if opts.DeadLetterer != nil {
		b.dl.Store(&dlHolder{opts.DeadLetterer})
	}
	b.st = opts.Store
	b.retryEvery = opts.DeadLetterRetryInterval
	if b.retryEvery <= 0 {
		b.retryEvery = 180 * time.Second
	}
	b.windowBytes = opts.QueueWindowBytes
	b.loadHook = opts.loadHook
	if b.windowBytes == 0 {
		b.windowBytes = DefaultQueueWindowBytes
	}
	if opts.SpillDir != "" && b.windowBytes > 0 {
		b.spillDir, b.spillFS = opts.SpillDir, opts.spillFS
		wipeSpillDir(b.spillDir, b.log)
	}
	b.vhosts[DefaultVHost] = newVHost(b, DefaultVHost)
	b.alarms.Start(alarm.Options{Logger: b.log, DataDir: opts.DataDir, DiskFreeLimit: opts.DiskFreeLimit,
		MemoryHighWatermark: opts.MemoryHighWatermark, Interval: opts.AlarmInterval,
		DiskFree: opts.DiskFree, MemoryUsed: opts.MemoryUsed})
	return b
}

// Store returns the broker's store (nil without persistence).
func (b *Broker) Store() store.Store { return b.st }

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

// Alarms returns the broker's resource alarms, which every publish feeds.
func (b *Broker) Alarms() *alarm.Monitor { return &b.alarms }

// Logger returns the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

// Close stops timers; further calls are no-ops. Queues keep their messages
// but no longer expire them on their own.
func (b *Broker) Close() {
	if b.closed.Swap(true) {
		return
	}
	b.retryMu.Lock()
	if b.retryTimer != nil {
		b.retryTimer.Stop()
	}
	b.retryMu.Unlock()
	b.alarms.Stop()
	b.loaderWG.Wait() // it stops at its next chunk
	b.mu.RLock()
	vhosts := slices.Collect(maps.Values(b.vhosts))
	b.mu.RUnlock()
	for _, v := range vhosts {
		for _, q := range v.Queues() {
			q.mu.Lock()
			q.stopTimerLocked()
			q.unlock()
		}
	}
	b.closeSpill(vhosts)
}

// closeSpill closes the queues' spill logs and removes the spill
// directory: the transient messages in it end with the broker. Queues
// closed after it keep their other messages; a refill of a spilled one
// reports it unreadable.
func (b *Broker) closeSpill(vhosts []*VHost) {
	if b.spillDir == "" {
		return
	}
	for _, v := range vhosts {
		for _, q := range v.Queues() {
			q.mu.Lock()
			q.clearSpillLocked()
			q.unlock()
		}
	}
	if err := os.RemoveAll(b.spillDir); err != nil {
		b.log.Warn("cannot remove the transient spill directory", "dir", b.spillDir, "err", err)
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
	b.putMeta(metaVHost+name, nil)
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
	b.mu.Unlock()
	mb := new(store.Batch)
	if a := b.getAccounts(); a != nil {
		a.VHostDeleted(name, mb)
	}
	mb.DeleteMeta(metaVHost + name)

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
		q.unlock()
		deleted = append(deleted, gone{q, subs})
		if q.persist {
			mb.DeleteMeta(joinKey(metaQueue, v.name, q.name)).DeleteMeta(seqKey(q.id)).DeleteQueue(q.id)
		}
	}
	for n, x := range v.exchanges {
		if x.spec.Durable && n != "" && !isReserved(n) {
			mb.DeleteMeta(joinKey(metaExchange, v.name, n))
		}
		for _, bd := range x.bindings {
			mb.DeleteMeta(bindingKey(v.name, bd.Binding))
		}
	}
	for n := range v.policies {
		mb.DeleteMeta(joinKey(metaPolicy, v.name, n))
	}
	clear(v.queues)
	clear(v.exchanges)
	clear(v.policies)
	wait := b.commitMeta(mb)
	v.mu.Unlock()
	wait()
	for _, g := range deleted {
		notifyDeleted(g.q, g.subs)
	}
	return nil
}
