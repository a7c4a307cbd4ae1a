package dlops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// Redrive targets: where each message goes.
const (
	TargetFirstDeathQueue  = "first_death_queue" // its x-first-death-queue
	TargetLastDeathQueue   = "last_death_queue"  // its x-last-death-queue
	TargetOriginalExchange = "original_exchange" // the exchange and routing keys of its first death
	TargetQueue            = "queue"             // the named TargetQueue
)

// Task states.
const (
	StateRunning   = "running"
	StateCompleted = "completed"
	StateCancelled = "cancelled"
	StateFailed    = "failed"
	StateDryRun    = "dry_run"
)

// Causes of a message not moved (the report's skipped and failed keys).
const (
	CauseNoHistory      = "no_history"      // skipped: no death history to find its origin in
	CauseNotReady       = "not_ready"       // skipped: consumed, expired or purged while the task ran
	CauseTargetMissing  = "target_missing"  // failed: the target queue or exchange does not exist
	CauseUnroutable     = "unroutable"      // failed: the original exchange routes it nowhere
	CauseAccessRefused  = "access_refused"  // failed: the user may not write to the target
	CauseLoop           = "loop"            // failed: the target is the source queue itself
	CauseTargetRejected = "target_rejected" // failed: every target refused it (x-overflow reject-publish, deleted)
	CauseStoreError     = "store_error"     // failed: the durable store refused the move
)

// RedriveCountAnnotation counts a message's redrives (a message annotation
// on AMQP 1.0).
const RedriveCountAnnotation = value.Symbol("x-opt-redrive-count")

// MaxRate is the highest rate a task may ask for, in messages per second.
const MaxRate = 1e6

// Spec is what a redrive is asked to do.
type Spec struct {
	VHost       string  `json:"vhost"`
	SourceQueue string  `json:"source_queue"`
	Target      string  `json:"target"`
	TargetQueue string  `json:"target_queue,omitempty"`
	Filter      Filter  `json:"filter"`
	Rate        float64 `json:"rate"`
	Max         int64   `json:"max"`
	DryRun      bool    `json:"dry_run"`
}

// Task is a redrive task and its report.
type Task struct {
	ID          string           `json:"id"`
	VHost       string           `json:"vhost"`
	SourceQueue string           `json:"source_queue"`
	Target      string           `json:"target"`
	TargetQueue string           `json:"target_queue,omitempty"`
	State       string           `json:"state"`
	Moved       int64            `json:"moved"`
	Skipped     map[string]int64 `json:"skipped"`
	Failed      map[string]int64 `json:"failed"`
	WouldMove   map[string]int64 `json:"would_move"`
	WouldSkip   map[string]int64 `json:"would_skip"`
	Started     time.Time        `json:"started"`
	Finished    *time.Time       `json:"finished"`
	Rate        float64          `json:"rate"`
	Max         int64            `json:"max"`
	Filter      Filter           `json:"filter"`
	DryRun      bool             `json:"dry_run"`
	User        string           `json:"user"`
	// Scanned is how many messages of the source the task has looked at;
	// Cursor the source position (message seq) it has passed.
	Scanned int64  `json:"scanned"`
	Cursor  uint64 `json:"cursor"`
	Error   string `json:"error,omitempty"`
}

func (t *Task) clone() Task {
	c := *t
	c.Skipped, c.Failed = maps(t.Skipped), maps(t.Failed)
	c.WouldMove, c.WouldSkip = maps(t.WouldMove), maps(t.WouldSkip)
	if t.Finished != nil {
		f := *t.Finished
		c.Finished = &f
	}
	return c
}

func maps(m map[string]int64) map[string]int64 {
	c := make(map[string]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// ErrTaskNotFound is returned for an unknown task id.
var ErrTaskNotFound = errors.New("no such redrive task")

// ErrTaskRunning is returned by Delete for a task that has not ended.
var ErrTaskRunning = errors.New("redrive task is running")

// metaPrefix is the metadata-store prefix of redrive tasks (the router and
// auth leave it alone): R/<id> → the task's JSON.
const metaPrefix = "R/"

// Options configure a Manager.
type Options struct {
	Router *router.Broker
	Auth   *auth.Registry
	Logger *slog.Logger
	// FilterLimits bound the SQL filters of tasks (zero: filter's defaults).
	FilterLimits filter.Limits
	// Scan is how many messages a task tests per step (0: 1024).
	Scan int
	// Tracer, when set, traces each task's run and moves.
	Tracer Tracer
	// Retention is how many ended tasks are kept (in memory and in the
	// store); when one more ends the oldest ended ones are removed. 0
	// means no limit.
	Retention int
}

// Tracer traces redrive tasks. The broker implements it over package
// telemetry (which the management plane does not import).
type Tracer interface {
	// StartTask is called when a task starts or resumes running.
	StartTask(t *Task) TaskTrace
}

// TaskTrace is the trace of one task's run.
type TaskTrace interface {
	// StartMove is called before m moves to targets: it returns the
	// annotations the moved copy carries (its trace context) and the end
	// of the move's span, called with the cause when it did not move.
	StartMove(m *router.Message, targets []*router.Queue) (anns value.Map, end func(cause string))
	// End is called when the run stops.
	End()
}

// Manager runs redrive tasks. It owns the task table (one mutex); each
// running task has one goroutine that owns its progress and publishes a
// copy into the table after every batch.
type Manager struct {
	b    *router.Broker
	auth *auth.Registry
	log  *slog.Logger
	lim  filter.Limits
	scan int
	tr   Tracer
	keep int // Options.Retention

	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	tasks  map[string]*taskState
	nextID int
}

type taskState struct {
	task   Task // guarded by Manager.mu
	cancel context.CancelFunc
}

// New returns a Manager; Recover resumes the stored tasks.
func New(opts Options) *Manager {
	ctx, stop := context.WithCancel(context.Background())
	m := &Manager{b: opts.Router, auth: opts.Auth, log: opts.Logger, lim: opts.FilterLimits, scan: opts.Scan,
		ctx: ctx, stop: stop, tasks: map[string]*taskState{}, tr: opts.Tracer, keep: opts.Retention}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.lim == (filter.Limits{}) {
		m.lim = filter.DefaultLimits()
	}
	if m.scan <= 0 {
		m.scan = 1024
	}
	return m
}

// Recover reads the stored tasks and resumes the running ones. Call it
// once, after the router recovered its queues.
func (m *Manager) Recover() error {
	st := m.b.Store()
	if st == nil {
		return nil
	}
	var found []Task
	err := st.Meta(func(k string, v []byte) error {
		if !strings.HasPrefix(k, metaPrefix) {
			return nil
		}
		var t Task
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("%w: redrive task %q: %w", store.ErrCorrupt, k, err)
		}
		found = append(found, t)
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range found {
		m.mu.Lock()
		m.nextID = max(m.nextID, idNumber(t.ID))
		ts := &taskState{task: t}
		m.tasks[t.ID] = ts
		m.mu.Unlock()
		if t.State == StateRunning {
			m.log.Info("redrive task resumed", "task", t.ID, "vhost", t.VHost, "queue", t.SourceQueue, "moved", t.Moved)
			m.launch(ts)
		}
	}
	m.prune() // the retention may have been lowered since
	return nil
}

// Delete removes an ended task and its report, from memory and the store.
// A running task is refused with ErrTaskRunning (cancel it first).
func (m *Manager) Delete(id string) (Task, error) {
	m.mu.Lock()
	ts, ok := m.tasks[id]
	if !ok {
		m.mu.Unlock()
		return Task{}, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	t := ts.task.clone()
	if t.State == StateRunning || ts.cancel != nil {
		m.mu.Unlock()
		return t, fmt.Errorf("%w: %q has not ended; cancel it first", ErrTaskRunning, id)
	}
	delete(m.tasks, id)
	m.mu.Unlock()
	m.forget([]string{id})
	return t, nil
}

// prune removes the oldest ended tasks beyond the retention (by end time,
// then id).
func (m *Manager) prune() {
	if m.keep <= 0 {
		return
	}
	m.mu.Lock()
	var ended []Task
	for _, ts := range m.tasks {
		if ts.task.State != StateRunning && ts.cancel == nil {
			ended = append(ended, ts.task)
		}
	}
	if len(ended) <= m.keep {
		m.mu.Unlock()
		return
	}
	endOf := func(t Task) time.Time {
		if t.Finished != nil {
			return *t.Finished
		}
		return t.Started
	}
	slices.SortFunc(ended, func(a, b Task) int {
		if c := endOf(a).Compare(endOf(b)); c != 0 {
			return c
		}
		return idNumber(a.ID) - idNumber(b.ID)
	})
	var ids []string
	for _, t := range ended[:len(ended)-m.keep] {
		delete(m.tasks, t.ID)
		ids = append(ids, t.ID)
	}
	m.mu.Unlock()
	m.forget(ids)
	m.log.Info("redrive tasks removed by the retention", "tasks", len(ids), "retention", m.keep)
}

// forget deletes the stored records of tasks.
func (m *Manager) forget(ids []string) {
	if m.b.Store() == nil || len(ids) == 0 {
		return
	}
	b := new(store.Batch)
	for _, id := range ids {
		b.DeleteMeta(metaPrefix + id)
	}
	m.b.CommitMeta(b)
}

func idNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "r-"))
	return n
}

// Close cancels nothing durable: running tasks stop where they are and
// resume at the next Recover. It waits for their goroutines.
func (m *Manager) Close() {
	m.stop()
	m.wg.Wait()
}

// Start validates spec for op's user and starts the task, or for a dry run
// scans the source and returns the report at once. Input errors wrap
// ErrBadRequest; a missing vhost or queue router.ErrNotFound; a refused
// read on the source router.ErrAccessRefused.
func (m *Manager) Start(op management.Operator, spec Spec) (Task, error) {
	src, err := m.validate(op, spec)
	if err != nil {
		return Task{}, err
	}
	t := Task{VHost: spec.VHost, SourceQueue: spec.SourceQueue, Target: spec.Target, TargetQueue: spec.TargetQueue,
		State: StateRunning, Skipped: map[string]int64{}, Failed: map[string]int64{}, WouldMove: map[string]int64{},
		WouldSkip: map[string]int64{}, Started: time.Now().UTC(), Rate: spec.Rate, Max: spec.Max, Filter: spec.Filter,
		DryRun: spec.DryRun, User: op.User}
	if spec.DryRun {
		t.State = StateDryRun
		r := &run{m: m, op: op, src: src, task: t}
		if err := r.dryRun(); err != nil {
			return Task{}, err
		}
		now := time.Now().UTC()
		r.task.Finished = &now
		return r.task, nil
	}
	m.mu.Lock()
	m.nextID++
	t.ID = "r-" + strconv.Itoa(m.nextID)
	ts := &taskState{task: t}
	m.tasks[t.ID] = ts
	m.mu.Unlock()
	m.persist(&t)
	m.launch(ts)
	return t, nil
}

// validate checks spec; it returns the source queue.
func (m *Manager) validate(op management.Operator, spec Spec) (*router.Queue, error) {
	switch spec.Target {
	case TargetFirstDeathQueue, TargetLastDeathQueue, TargetOriginalExchange:
		if spec.TargetQueue != "" {
			return nil, badRequest("target_queue is only allowed with target \"queue\"")
		}
	case TargetQueue:
		if spec.TargetQueue == "" {
			return nil, badRequest("target \"queue\" needs target_queue")
		}
	case "":
		return nil, badRequest("target is required: first_death_queue, last_death_queue, original_exchange or queue")
	default:
		return nil, badRequest("target must be first_death_queue, last_death_queue, original_exchange or queue, not %q", spec.Target)
	}
	if math.IsNaN(spec.Rate) || spec.Rate < 0 || spec.Rate > MaxRate {
		return nil, badRequest("rate must be between 0 (unlimited) and %g messages per second", float64(MaxRate))
	}
	if spec.Max < 0 {
		return nil, badRequest("max must be a non-negative integer (0: no maximum)")
	}
	if _, err := spec.Filter.Compile(m.lim); err != nil {
		return nil, err
	}
	if spec.SourceQueue == "" {
		return nil, badRequest("source_queue is required")
	}
	v := op.VHost
	if v == nil {
		return nil, fmt.Errorf("%w: no vhost '%s'", router.ErrNotFound, spec.VHost)
	}
	src, ok := v.Queue(spec.SourceQueue)
	if !ok {
		return nil, fmt.Errorf("%w: no queue '%s' in vhost '%s'", router.ErrNotFound, spec.SourceQueue, spec.VHost)
	}
	if err := op.MayReadQueue(spec.SourceQueue); err != nil {
		return nil, err
	}
	if spec.Target == TargetQueue {
		if spec.TargetQueue == spec.SourceQueue {
			return nil, badRequest("the redrive would loop: target_queue is the source queue '%s'", spec.SourceQueue)
		}
		if t, ok := v.Queue(spec.TargetQueue); ok && expiresInto(v, t, src) {
			return nil, badRequest("the redrive would loop: queue '%s' has a message TTL and dead-letters into '%s'", spec.TargetQueue, spec.SourceQueue)
		}
	}
	return src, nil
}

// expiresInto reports whether t expires its messages (a message TTL) into
// src through its dead-letter exchange: what a redrive puts into t would
// come back to src by itself, with no consumer involved.
func expiresInto(v *router.VHost, t, src *router.Queue) bool {
	info := t.Info()
	hasTTL := hasKey(info.Arguments, "x-message-ttl") || hasKey(info.EffectivePolicyDefinition, "message-ttl")
	dlx, ok := t.DeadLetterExchange()
	if !hasTTL || !ok {
		return false
	}
	key := t.Name()
	if k, ok := t.DeadLetterRoutingKey(); ok {
		key = k
	}
	qs, err := v.Route(dlx, &router.Message{RoutingKeys: []string{key}})
	return err == nil && slices.Contains(qs, src)
}

// hasKey reports whether m has key, as a string or a symbol.
func hasKey(m value.Map, key string) bool {
	_, s := m.Get(key)
	_, y := m.Get(value.Symbol(key))
	return s || y
}

// List returns the tasks whose vhost op's user may access (all of them
// for an administrator), oldest first.
func (m *Manager) List(visible func(vhost string) bool) []Task {
	m.mu.Lock()
	out := make([]Task, 0, len(m.tasks))
	for _, ts := range m.tasks {
		if visible == nil || visible(ts.task.VHost) {
			out = append(out, ts.task.clone())
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Task) int { return idNumber(a.ID) - idNumber(b.ID) })
	return out
}

// Get returns one task.
func (m *Manager) Get(id string) (Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ts, ok := m.tasks[id]
	if !ok {
		return Task{}, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	return ts.task.clone(), nil
}

// Cancel stops a running task; the messages it moved stay moved. It
// returns the task as it ended (a task that already ended is returned as
// it is).
func (m *Manager) Cancel(id string) (Task, error) {
	m.mu.Lock()
	ts, ok := m.tasks[id]
	if !ok {
		m.mu.Unlock()
		return Task{}, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	cancel := ts.cancel
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	// Wait until the runner has recorded the end (it checks between
	// batches and while it waits for a batch's tokens; a batch's move in
	// progress finishes first).
	for {
		m.mu.Lock()
		st := ts.task.State
		done := st != StateRunning || ts.cancel == nil
		t := ts.task.clone()
		m.mu.Unlock()
		if done {
			return t, nil
		}
		select {
		case <-m.ctx.Done():
			return t, nil
		case <-time.After(time.Millisecond):
		}
	}
}

// launch starts ts's goroutine.
func (m *Manager) launch(ts *taskState) {
	ctx, cancel := context.WithCancel(m.ctx)
	m.mu.Lock()
	ts.cancel = cancel
	t := ts.task.clone()
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		v, ok := m.b.VHost(t.VHost)
		var src *router.Queue
		if ok {
			src, ok = v.Queue(t.SourceQueue)
		}
		r := &run{m: m, op: management.Operator{Auth: m.auth, User: t.User, VHost: v}, src: src, task: t, ctx: ctx, ts: ts}
		if !ok {
			r.finish(StateFailed, fmt.Sprintf("source queue '%s' in vhost '%s' no longer exists", t.SourceQueue, t.VHost))
			return
		}
		r.loop()
	}()
}

// persist stores t (without waiting for the sync).
func (m *Manager) persist(t *Task) {
	if m.b.Store() == nil {
		return
	}
	b, err := json.Marshal(t)
	if err != nil {
		m.log.Error("redrive: encoding task", "task", t.ID, "err", err)
		return
	}
	m.b.CommitMeta(new(store.Batch).PutMeta(metaPrefix+t.ID, b))
}

// run is one task's progress, owned by its goroutine.
type run struct {
	m      *Manager
	op     management.Operator
	src    *router.Queue
	task   Task
	ctx    context.Context
	ts     *taskState
	bucket *tokenBucket
	trace  TaskTrace
	// targets caches, for one batch of messages, each target's queue and
	// the write permission on it (a batch's messages mostly share their
	// target, and each is asked once per batch).
	targets map[targetKey]targetInfo
	// The last target looked up (the next message mostly has the same).
	lastTarget targetKey
	lastInfo   targetInfo
	hasLast    bool
	// Reused from batch to batch.
	walked  []router.WalkedMessage
	moves   []router.ReadyMove
	ends    []func(string)
	movedCh chan error
	// The moved copies and their annotations are carved out of small
	// blocks, a few allocations per block instead of two per message (a
	// block is small, so that a copy still queued keeps little else alive).
	msgBlock []router.Message
	annBlock value.Map
}

// copyBlock is how many copies one block holds.
const copyBlock = 64

// newCopy returns room for one moved copy.
func (r *run) newCopy() *router.Message {
	if len(r.msgBlock) == 0 {
		r.msgBlock = make([]router.Message, copyBlock)
	}
	m := &r.msgBlock[0]
	r.msgBlock = r.msgBlock[1:]
	return m
}

// newAnns returns an empty map with room for n annotations.
func (r *run) newAnns(n int) value.Map {
	if cap(r.annBlock)-len(r.annBlock) < n {
		r.annBlock = make(value.Map, 0, max(4*copyBlock, n))
	}
	l := len(r.annBlock)
	r.annBlock = r.annBlock[:l+n]
	return r.annBlock[l : l : l+n]
}

type targetKey struct {
	exchange bool
	name     string
}

type targetInfo struct {
	qs    []*router.Queue // the queue alone; nil for an exchange, or a queue that does not exist
	keys  []string        // its name as the routing keys (never modified: shared by the copies)
	found bool
	err   error // the write permission
}

// forgetTargets empties the targets cache.
func (r *run) forgetTargets() {
	clear(r.targets)
	r.hasLast, r.lastInfo = false, targetInfo{}
}

// target returns the queue (or, for an exchange, whether it exists) and
// the write permission on it, asked once per batch.
func (r *run) target(exchange bool, name string) targetInfo {
	k := targetKey{exchange, name}
	if r.hasLast && r.lastTarget == k {
		return r.lastInfo
	}
	if ti, ok := r.targets[k]; ok {
		r.lastTarget, r.lastInfo, r.hasLast = k, ti, true
		return ti
	}
	var ti targetInfo
	if exchange {
		ti.found = name == "" || r.op.VHost.HasExchange(name)
		xname := name
		if xname == "" {
			xname = "amq.default"
		}
		ti.err = r.op.MayWriteExchange(xname)
	} else {
		var q *router.Queue
		if q, ti.found = r.op.VHost.Queue(name); ti.found {
			ti.qs, ti.keys = []*router.Queue{q}, []string{name}
		}
		ti.err = r.op.MayWriteQueue(name)
	}
	if r.targets == nil {
		r.targets = map[targetKey]targetInfo{}
	}
	r.targets[k] = ti
	r.lastTarget, r.lastInfo, r.hasLast = k, ti, true
	return ti
}

// publish copies the progress into the table.
func (r *run) publish() {
	r.m.mu.Lock()
	r.ts.task = r.task.clone()
	r.m.mu.Unlock()
}

func (r *run) finish(state, errText string) {
	now := time.Now().UTC()
	r.task.State, r.task.Finished, r.task.Error = state, &now, errText
	r.m.persist(&r.task)
	r.m.mu.Lock()
	r.ts.task = r.task.clone()
	r.ts.cancel = nil
	r.m.mu.Unlock()
	r.m.log.Info("redrive task ended", "task", r.task.ID, "state", state, "moved", r.task.Moved,
		"skipped", r.task.Skipped, "failed", r.task.Failed)
	r.m.prune()
}

func (r *run) matcher() router.MessageFilter {
	mt, err := r.task.Filter.Compile(r.m.lim)
	if err != nil || mt == nil {
		return nil
	}
	return mt
}

// maxBatch is the most messages one step of a task moves (one router
// call, one store batch).
const maxBatch = 512

// batchEvery is how often a rate-limited task moves a batch at most: its
// batches hold rate × batchEvery messages, so that a slow rate moves one
// message at a time and a fast one is not held to a batch per token.
const batchEvery = 20 * time.Millisecond

// batchSize is how many matching messages the next step takes: the rate's
// share of batchEvery (at least 1), at most maxBatch and what the maximum
// leaves.
func (r *run) batchSize() int {
	n := min(maxBatch, r.m.scan)
	if r.task.Rate > 0 {
		n = min(n, max(1, int(r.task.Rate*batchEvery.Seconds())))
	}
	if r.task.Max > 0 {
		n = int(min(int64(n), r.task.Max-r.task.Moved))
	}
	return n
}

// loop moves messages, a batch at a time, until the source has no more
// after the cursor, the maximum is reached, or the task is cancelled (or
// the broker closes: the task stays running in the store and resumes).
func (r *run) loop() {
	if r.task.Rate > 0 {
		r.bucket = newTokenBucket(r.task.Rate)
	}
	if r.m.tr != nil {
		r.trace = r.m.tr.StartTask(&r.task)
		defer r.trace.End()
	}
	r.movedCh = make(chan error, 1)
	mf := r.matcher()
	for {
		if r.stopped() {
			return
		}
		if r.task.Max > 0 && r.task.Moved >= r.task.Max {
			r.finish(StateCompleted, "")
			return
		}
		var last uint64
		var done bool
		r.walked, last, done = r.src.WalkAfter(r.walked[:0], r.task.Cursor, r.batchSize(), r.m.scan, mf)
		if !r.step(r.walked, last) {
			return
		}
		if done {
			r.finish(StateCompleted, "")
			return
		}
	}
}

// step moves one batch of browsed messages (the source's matches up to
// seq last): it resolves each one's targets, counts those that cannot
// move, waits for the batch's tokens, and moves the rest with one router
// call whose store batch also holds the task's progress. It reports false
// when the task stopped meanwhile.
func (r *run) step(batch []router.WalkedMessage, last uint64) bool {
	r.forgetTargets() // targets and permissions are looked up again for each batch
	r.moves, r.ends = r.moves[:0], r.ends[:0]
	changed := last > r.task.Cursor
	var cp *router.Message
	for i := range batch {
		if r.task.Max > 0 && int64(len(r.moves)) >= r.task.Max-r.task.Moved {
			// The maximum is reached within the batch (returned or delayed
			// messages may come on top of its size): the rest of it is not
			// looked at, and the cursor stops at the last one that was.
			batch, last = batch[:i], batch[i-1].Seq
			break
		}
		if cp == nil {
			cp = r.newCopy()
		}
		targets, cause := r.resolveInto(&batch[i], cp)
		switch cause {
		case "":
		case CauseNoHistory, CauseNotReady:
			r.task.Skipped[cause]++
			changed = true
			continue
		default:
			r.task.Failed[cause]++
			changed = true
			continue
		}
		r.moves = append(r.moves, router.ReadyMove{Seq: batch[i].Seq, Msg: cp, Targets: targets})
		cp = nil
	}
	if len(r.moves) > 0 && r.bucket != nil {
		if err := r.bucket.waitN(r.ctx, len(r.moves)); err != nil {
			r.stopped()
			return false
		}
	}
	for i := range r.moves {
		end := func(string) {}
		if r.trace != nil {
			mv := &r.moves[i]
			mv.Msg.Anns, end = r.trace.StartMove(mv.Msg, mv.Targets)
		}
		r.ends = append(r.ends, end)
	}
	r.task.Scanned += int64(len(batch))
	r.task.Cursor = max(r.task.Cursor, last)
	if len(r.moves) == 0 {
		if changed {
			r.publish()
			r.m.persist(&r.task)
		}
		return true
	}
	var stored Task
	progress := func(moves []router.ReadyMove) (string, []byte) {
		stored = r.task.clone()
		countMoves(&stored, moves, nil)
		enc, err := json.Marshal(&stored)
		if err != nil {
			return "", nil
		}
		return metaPrefix + r.task.ID, enc
	}
	r.src.MoveBatch(r.moves, progress, func(err error) { r.movedCh <- err })
	err := <-r.movedCh
	countMoves(&r.task, r.moves, err)
	for i := range r.moves {
		r.ends[i](moveCause(r.moves[i].Err, err))
	}
	r.publish()
	if err != nil {
		r.m.persist(&r.task) // the batch and its progress record were not stored
	}
	return true
}

// moveCause is the report's cause of a move that did not happen ("" when
// it did), given the batch's store error.
func moveCause(moveErr, storeErr error) string {
	switch {
	case moveErr == nil && storeErr == nil:
		return ""
	case errors.Is(moveErr, router.ErrNotReady):
		return CauseNotReady
	case moveErr != nil:
		return CauseTargetRejected
	case storeErr != nil:
		return CauseStoreError
	}
	return ""
}

// countMoves adds a batch's moves to t's report.
func countMoves(t *Task, moves []router.ReadyMove, storeErr error) {
	for i := range moves {
		switch c := moveCause(moves[i].Err, storeErr); c {
		case "":
			t.Moved++
		case CauseNotReady:
			t.Skipped[c]++
		default:
			t.Failed[c]++
		}
	}
}

// stopped handles a cancel (the task ends cancelled) or the manager's
// close (the task stays running, to resume).
func (r *run) stopped() bool {
	if r.ctx.Err() == nil {
		return false
	}
	if r.m.ctx.Err() != nil {
		return true
	}
	r.finish(StateCancelled, "")
	return true
}

// resolveInto finds bm's targets and builds, in cp, the copy that goes
// there. cause is set when the message does not move.
func (r *run) resolveInto(bm *router.WalkedMessage, cp *router.Message) (targets []*router.Queue, cause string) {
	targets, _, cause = r.resolveTo(bm, cp, true)
	return targets, cause
}

// resolve finds bm's targets and builds the copy that goes there; label
// names the targets for a dry run's report. cause is set when the message
// does not move.
func (r *run) resolve(bm *router.WalkedMessage) (targets []*router.Queue, label, cause string) {
	var cp router.Message
	return r.resolveTo(bm, &cp, false)
}

// resolveTo is resolve building the copy in c; blocks: its annotations
// are carved out of the run's blocks.
func (r *run) resolveTo(bm *router.WalkedMessage, c *router.Message, blocks bool) (targets []*router.Queue, label, cause string) {
	v := r.op.VHost
	msg := bm.Msg
	h, hasHistory := annotations.HistoryOf(msg.Anns)
	*c = *msg
	c.DeliveryCount = 0
	c.Header.DeliveryCount = 0
	queueTarget := func(name string) {
		label = name
		if name == r.src.Name() {
			cause = CauseLoop
			return
		}
		ti := r.target(false, name)
		switch {
		case !ti.found:
			cause = CauseTargetMissing
			return
		case ti.err != nil:
			cause = CauseAccessRefused
			return
		}
		c.Exchange, c.RoutingKeys = "", ti.keys
		targets = ti.qs
	}
	switch r.task.Target {
	case TargetQueue:
		queueTarget(r.task.TargetQueue)
	case TargetFirstDeathQueue, TargetLastDeathQueue:
		if !hasHistory {
			return nil, "", CauseNoHistory
		}
		name := h.First.Queue
		if r.task.Target == TargetLastDeathQueue {
			name = h.Last.Queue
		}
		queueTarget(name)
	case TargetOriginalExchange:
		if !hasHistory {
			return nil, "", CauseNoHistory
		}
		var first *annotations.Death
		for i := range h.Deaths {
			if h.Deaths[i].Queue == h.First.Queue && h.Deaths[i].Reason == h.First.Reason {
				first = &h.Deaths[i]
			}
		}
		if first == nil {
			return nil, "", CauseNoHistory
		}
		x := first.Exchange
		label = "exchange '" + x + "'"
		ti := r.target(true, x)
		switch {
		case !ti.found:
			return nil, label, CauseTargetMissing
		case ti.err != nil:
			return nil, label, CauseAccessRefused
		}
		c.Exchange, c.RoutingKeys = x, slices.Clone(first.RoutingKeys)
		qs, err := v.Route(x, c)
		switch {
		case err != nil:
			return nil, label, CauseTargetMissing
		case len(qs) == 0:
			return nil, label, CauseUnroutable
		case slices.Contains(qs, r.src):
			return nil, label, CauseLoop
		}
		targets = qs
	}
	if cause != "" {
		return nil, label, cause
	}
	var dst value.Map
	if blocks {
		dst = r.newAnns(len(msg.Anns) + 1)
	}
	c.Anns = withRedriveCountIn(dst, msg.Anns)
	return targets, label, ""
}

// withRedriveCountIn is anns with the redrive count incremented, in dst
// (empty, with room for len(anns)+1; nil: a new map): annotations are never
// changed in place.
func withRedriveCountIn(dst, anns value.Map) value.Map {
	out := dst
	if out == nil {
		out = make(value.Map, 0, len(anns)+1)
	}
	var n int64
	for _, kv := range anns {
		if k, ok := kv.Key.(value.Symbol); ok && k == RedriveCountAnnotation {
			n = RedriveCount(anns)
			continue
		}
		out = append(out, kv)
	}
	return append(out, value.KV{Key: RedriveCountAnnotation, Value: n + 1})
}

// RedriveCount reads a message's redrive count from its annotations.
func RedriveCount(anns value.Map) int64 {
	for _, kv := range anns {
		k, ok := kv.Key.(value.Symbol)
		if !ok {
			if s, isStr := kv.Key.(string); !isStr || s != string(RedriveCountAnnotation) {
				continue
			}
		} else if k != RedriveCountAnnotation {
			continue
		}
		switch n := kv.Value.(type) {
		case int64:
			return n
		case uint64:
			return int64(n)
		case int32:
			return int64(n)
		case uint32:
			return int64(n)
		}
	}
	return 0
}

// dryRun counts what the task would do, moving nothing.
func (r *run) dryRun() error {
	mf := r.matcher()
	var cursor uint64
	var would int64
	for {
		msgs, last, done := r.src.WalkAfter(nil, cursor, r.m.scan, r.m.scan, mf)
		r.forgetTargets()
		for i := range msgs {
			if r.task.Max > 0 && would >= r.task.Max {
				return nil
			}
			r.task.Scanned++
			_, label, cause := r.resolve(&msgs[i])
			if cause != "" {
				r.task.WouldSkip[cause]++
				continue
			}
			r.task.WouldMove[label]++
			would++
		}
		cursor = last
		if done {
			return nil
		}
	}
}

// tokenBucket paces a task at rate messages per second with a burst of
// one, on the time package's clock (which testing/synctest fakes).
type tokenBucket struct {
	interval time.Duration
	next     time.Time
}

func newTokenBucket(rate float64) *tokenBucket {
	return &tokenBucket{interval: time.Duration(float64(time.Second) / rate)}
}

// wait returns when the next message may go, or the context's error.
func (b *tokenBucket) wait(ctx context.Context) error { return b.waitN(ctx, 1) }

// waitN returns when the next n messages may go, or the context's
// error: a batch goes when the last of its messages would have gone one at
// a time, so batches keep the rate as single messages do (n messages after
// an idle pause take (n-1) intervals, the next batch's first slot is one
// interval after that).
func (b *tokenBucket) waitN(ctx context.Context, n int) error {
	now := time.Now()
	if b.next.IsZero() || now.After(b.next) {
		// Idle time earns no burst: the first slot is now.
		b.next = now
	}
	due := b.next.Add(time.Duration(n-1) * b.interval)
	b.next = due.Add(b.interval)
	if !due.After(now) {
		return ctx.Err()
	}
	t := time.NewTimer(due.Sub(now))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return nil
}
