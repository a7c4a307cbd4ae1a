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
// copy into the table after every message.
type Manager struct {
	b    *router.Broker
	auth *auth.Registry
	log  *slog.Logger
	lim  filter.Limits
	scan int
	tr   Tracer

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
		ctx: ctx, stop: stop, tasks: map[string]*taskState{}, tr: opts.Tracer}
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
	return nil
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
	// messages; a move in progress finishes first).
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
	// may caches the write-permission answers of one batch of messages
	// (a batch's messages mostly share their target).
	may map[string]error
}

// mayWrite is op's write permission on a queue (kind "q") or an exchange
// ("x"), asked once per batch.
func (r *run) mayWrite(kind, name string) error {
	key := kind + name
	if err, ok := r.may[key]; ok {
		return err
	}
	var err error
	if kind == "q" {
		err = r.op.MayWriteQueue(name)
	} else {
		err = r.op.MayWriteExchange(name)
	}
	if r.may == nil {
		r.may = map[string]error{}
	}
	r.may[key] = err
	return err
}

// publishEvery is how many moves an unlimited task makes between copies
// of its progress into the table (a rate-limited one copies every move;
// every other change is copied at once, and so is the end).
const publishEvery = 16

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
}

func (r *run) matcher() router.MessageFilter {
	mt, err := r.task.Filter.Compile(r.m.lim)
	if err != nil || mt == nil {
		return nil
	}
	return mt
}

// loop moves messages until the source has no more after the cursor, the
// maximum is reached, or the task is cancelled (or the broker closes: the
// task stays running in the store and resumes).
func (r *run) loop() {
	if r.task.Rate > 0 {
		r.bucket = newTokenBucket(r.task.Rate)
	}
	if r.m.tr != nil {
		r.trace = r.m.tr.StartTask(&r.task)
		defer r.trace.End()
	}
	mf := r.matcher()
	for {
		if r.task.Max > 0 && r.task.Moved >= r.task.Max {
			r.finish(StateCompleted, "")
			return
		}
		msgs, last, done := r.src.BrowseAfter(r.task.Cursor, r.m.scan, r.m.scan, mf)
		clear(r.may) // permissions are asked again for each batch
		for _, bm := range msgs {
			if r.stopped() {
				return
			}
			if r.task.Max > 0 && r.task.Moved >= r.task.Max {
				r.finish(StateCompleted, "")
				return
			}
			r.one(bm)
		}
		if r.stopped() {
			return
		}
		if last > r.task.Cursor {
			r.task.Scanned += int64(len(msgs))
			r.task.Cursor = last
			r.publish()
			r.m.persist(&r.task)
		}
		if done {
			r.finish(StateCompleted, "")
			return
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

// one moves one message, or counts why not.
func (r *run) one(bm router.BrowsedMessage) {
	targets, cp, _, cause := r.resolve(bm)
	if cause == "" && r.bucket != nil {
		if err := r.bucket.wait(r.ctx); err != nil {
			return // cancelled; the caller sees it
		}
	}
	switch cause {
	case "":
	case CauseNoHistory:
		r.task.Skipped[cause]++
		r.task.Cursor = max(r.task.Cursor, bm.Seq)
		r.publish()
		r.m.persist(&r.task)
		return
	default:
		r.task.Failed[cause]++
		r.task.Cursor = max(r.task.Cursor, bm.Seq)
		r.publish()
		r.m.persist(&r.task)
		return
	}
	endMove := func(string) {}
	if r.trace != nil {
		cp.Anns, endMove = r.trace.StartMove(cp, targets)
	}
	// The progress this move makes is stored in the move's own batch.
	var key string
	var enc []byte
	if r.m.b.Store() != nil {
		next := r.task.clone()
		next.Moved++
		next.Cursor = max(next.Cursor, bm.Seq)
		key = metaPrefix + r.task.ID
		enc, _ = json.Marshal(&next)
	}
	type result struct {
		res router.MoveResult
		err error
	}
	ch := make(chan result, 1)
	r.src.MoveReady(bm.Seq, cp, targets, key, enc, func(res router.MoveResult, err error) {
		ch <- result{res, err}
	})
	got := <-ch
	r.task.Cursor = max(r.task.Cursor, bm.Seq)
	switch {
	case errors.Is(got.err, router.ErrNotReady):
		r.task.Skipped[CauseNotReady]++
		endMove(CauseNotReady)
	case got.err != nil:
		r.task.Failed[CauseStoreError]++
		endMove(CauseStoreError)
	case !got.res.Moved:
		r.task.Failed[CauseTargetRejected]++
		endMove(CauseTargetRejected)
	default:
		r.task.Moved++
		endMove("")
		if r.bucket != nil || r.task.Moved%publishEvery == 0 {
			r.publish()
		}
		return // the move's batch stored this progress
	}
	r.publish()
	r.m.persist(&r.task)
}

// resolve finds bm's targets and builds the copy that goes there; label
// names the targets for a dry run's report. cause is set when the message
// does not move.
func (r *run) resolve(bm router.BrowsedMessage) (targets []*router.Queue, cp *router.Message, label, cause string) {
	v := r.op.VHost
	msg := bm.Msg
	h, hasHistory := annotations.HistoryOf(msg.Anns)
	c := *msg
	c.DeliveryCount = 0
	c.Header.DeliveryCount = 0
	c.Anns = withRedriveCount(msg.Anns)
	queueTarget := func(name string) {
		label = name
		if name == r.src.Name() {
			cause = CauseLoop
			return
		}
		q, ok := v.Queue(name)
		if !ok {
			cause = CauseTargetMissing
			return
		}
		if err := r.mayWrite("q", name); err != nil {
			cause = CauseAccessRefused
			return
		}
		c.Exchange, c.RoutingKeys = "", []string{name}
		targets = []*router.Queue{q}
	}
	switch r.task.Target {
	case TargetQueue:
		queueTarget(r.task.TargetQueue)
	case TargetFirstDeathQueue, TargetLastDeathQueue:
		if !hasHistory {
			return nil, nil, "", CauseNoHistory
		}
		name := h.First.Queue
		if r.task.Target == TargetLastDeathQueue {
			name = h.Last.Queue
		}
		queueTarget(name)
	case TargetOriginalExchange:
		if !hasHistory {
			return nil, nil, "", CauseNoHistory
		}
		var first *annotations.Death
		for i := range h.Deaths {
			if h.Deaths[i].Queue == h.First.Queue && h.Deaths[i].Reason == h.First.Reason {
				first = &h.Deaths[i]
			}
		}
		if first == nil {
			return nil, nil, "", CauseNoHistory
		}
		x := first.Exchange
		label = "exchange '" + x + "'"
		if x == "" {
			label = "exchange ''"
		}
		if !v.HasExchange(x) && x != "" {
			return nil, nil, label, CauseTargetMissing
		}
		xname := x
		if xname == "" {
			xname = "amq.default"
		}
		if err := r.mayWrite("x", xname); err != nil {
			return nil, nil, label, CauseAccessRefused
		}
		c.Exchange, c.RoutingKeys = x, slices.Clone(first.RoutingKeys)
		qs, err := v.Route(x, &c)
		switch {
		case err != nil:
			return nil, nil, label, CauseTargetMissing
		case len(qs) == 0:
			return nil, nil, label, CauseUnroutable
		case slices.Contains(qs, r.src):
			return nil, nil, label, CauseLoop
		}
		targets = qs
	}
	if cause != "" {
		return nil, nil, label, cause
	}
	return targets, &c, label, ""
}

// withRedriveCount is anns with the redrive count incremented (a new map:
// annotations are never changed in place).
func withRedriveCount(anns value.Map) value.Map {
	out := make(value.Map, 0, len(anns)+1)
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
		msgs, last, done := r.src.BrowseAfter(cursor, r.m.scan, r.m.scan, mf)
		for _, bm := range msgs {
			if r.task.Max > 0 && would >= r.task.Max {
				return nil
			}
			r.task.Scanned++
			_, _, label, cause := r.resolve(bm)
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
func (b *tokenBucket) wait(ctx context.Context) error {
	now := time.Now()
	if b.next.IsZero() || !now.Before(b.next) {
		// Idle time earns no burst: the next slot is one interval on.
		b.next = now.Add(b.interval)
		return ctx.Err()
	}
	t := time.NewTimer(b.next.Sub(now))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	b.next = b.next.Add(b.interval)
	return nil
}
