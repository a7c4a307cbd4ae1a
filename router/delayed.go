package router

import (
	"container/heap"
	"fmt"
	"math"
	"time"

	"github.com/epitaph-mq/epitaph/value"
)

// Delayed retry (RabbitMQ 4.3 quorum queues): a message returned to a
// quorum queue may wait before it is ready again, either because the
// queue's delayed-retry configuration says so for this kind of return, or
// because the consumer's modified outcome named an absolute
// x-opt-delivery-time. A delayed message is neither ready (not delivered,
// not counted in the ready count) nor unacknowledged; it counts toward the
// queue's length limits. Delayed messages sit in one min-heap per queue by
// due time, and the queue's single timer (armTimerLocked) wakes up for the
// earliest, so a million delayed messages cost one timer and no work per
// tick.

// Delayed retry types (x-delayed-retry-type, policy key delayed-retry-type).
const (
	RetryDisabled = "disabled"
	RetryAll      = "all"
	RetryFailed   = "failed"
	RetryReturned = "returned"
)

// deliveryTimeKey is the modified outcome's annotation that delays one
// return until an absolute time (ms since the Unix epoch).
const deliveryTimeKey = value.Symbol("x-opt-delivery-time")

// delayedRetry is a queue's effective delayed-retry configuration: kind ""
// is disabled; otherwise min and max are milliseconds (max may be below
// min: RabbitMQ does not correct it, every delay is then max).
type delayedRetry struct {
	kind     string
	min, max int64
}

// String is the management API's delayed_retry field.
func (r delayedRetry) String() string {
	if r.kind == "" {
		return RetryDisabled
	}
	return fmt.Sprintf("%s (min: %dms, max: %dms)", r.kind, r.min, r.max)
}

// applies reports whether a return (failed: it counted a failed delivery)
// is delayed by the configuration.
func (r delayedRetry) applies(failed bool) bool {
	switch r.kind {
	case RetryAll:
		return true
	case RetryFailed:
		return failed
	case RetryReturned:
		return !failed
	}
	return false
}

// delay is rabbit_fifo's calculate_ready_at: min(Min × max(1, dc), Max) ms.
func (r delayedRetry) delay(dc uint32) time.Duration {
	factor := max(int64(dc), 1)
	ms := r.max
	if r.min <= r.max/factor {
		ms = min(r.min*factor, r.max)
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		ms = math.MaxInt64 / int64(time.Millisecond)
	}
	return time.Duration(ms) * time.Millisecond
}

// resolveDelayedRetry combines the argument and policy settings as
// rabbit_quorum_queue:get_delayed_retry_config/1 does: the policy's type
// wins, min and max are the minimum of both; a type other than all,
// failed or returned, or a min that is missing or not positive, disables
// it (silently, as RabbitMQ); a max that is missing or not positive is min.
func resolveDelayedRetry(a, p knobs) delayedRetry {
	kind := a.retryType
	if p.retryType.ok {
		kind = p.retryType
	}
	switch kind.v {
	case RetryAll, RetryFailed, RetryReturned:
	default:
		return delayedRetry{}
	}
	lo := minOpt(a.retryMin, p.retryMin)
	if !lo.ok || lo.v <= 0 {
		return delayedRetry{}
	}
	hi := minOpt(a.retryMax, p.retryMax)
	if !hi.ok || hi.v <= 0 {
		hi = lo
	}
	return delayedRetry{kind: kind.v, min: lo.v, max: hi.v}
}

func minOpt(x, y opt[int64]) opt[int64] {
	switch {
	case x.ok && y.ok:
		return some(min(x.v, y.v))
	case x.ok:
		return x
	}
	return y
}

// policyDelayedRetry validates a policy's delayed-retry keys with RabbitMQ
// 4.3's texts (rabbit_quorum_queue:validate_policy0/2 and
// validate_delayed_retry_constraints/1).
func policyDelayedRetry(k *knobs, key string, v any) error {
	switch key {
	case "delayed-retry-type":
		s, ok := toString(v)
		switch {
		case !ok:
		case s == RetryDisabled, s == RetryAll, s == RetryFailed, s == RetryReturned:
			k.retryType = some(s)
			return nil
		}
		return fmt.Errorf("%v is not a valid delayed retry type. Must be one of: all, failed, returned, disabled", v)
	case "delayed-retry-min", "delayed-retry-max":
		n, ok := toInt64(v)
		if ok && n > 0 {
			if key == "delayed-retry-min" {
				k.retryMin = some(n)
			} else {
				k.retryMax = some(n)
			}
			return nil
		}
		which := "minimum"
		if key == "delayed-retry-max" {
			which = "maximum"
		}
		return fmt.Errorf("%v is not a valid delayed retry %s delay. Must be a positive integer", v, which)
	}
	return nil
}

// delayConstraints checks the keys of one policy definition together.
func delayConstraints(k knobs) error {
	if k.retryType.ok && k.retryType.v != RetryDisabled && !k.retryMin.ok {
		return fmt.Errorf("delayed-retry-min is required when delayed-retry-type is %s", k.retryType.v)
	}
	if k.retryMin.ok && k.retryMax.ok && k.retryMax.v < k.retryMin.v {
		return fmt.Errorf("delayed-retry-max (%d) must not be smaller than delayed-retry-min (%d)", k.retryMax.v, k.retryMin.v)
	}
	return nil
}

// ---- the delayed set ----

// delayHeap orders delayed entries by due time (the earlier of their
// ready-at time and their TTL deadline), then by the order they were
// delayed in (RabbitMQ's {ReadyAt, RaftIndex}).
type delayHeap []*entry

func dueOf(e *entry) int64 {
	if e.deadline != 0 && e.deadline < e.ext.readyAt {
		return e.deadline
	}
	return e.ext.readyAt
}

func (h delayHeap) Len() int { return len(h) }
func (h delayHeap) Less(i, j int) bool {
	a, b := dueOf(h[i]), dueOf(h[j])
	if a != b {
		return a < b
	}
	return h[i].ext.delayOrd < h[j].ext.delayOrd
}
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].ext.delayIdx = i
	h[j].ext.delayIdx = j
}
func (h *delayHeap) Push(x any) {
	e := x.(*entry)
	e.ext.delayIdx = len(*h)
	*h = append(*h, e)
}
func (h *delayHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.ext.delayIdx = -1
	return e
}

// isDelayed reports whether e waits in its queue's delayed set.
func (e *entry) isDelayed() bool { return e.ext != nil && e.ext.delayed }

// retryAtLocked decides whether a return of e is delayed, and until when
// (unix ns), after e's counters were updated and its delivery limit
// checked: an x-opt-delivery-time in this settle's annotations later than
// now delays it whatever the configuration; otherwise the queue's
// delayed-retry type decides (failed: the return counted a failed delivery).
func (q *Queue) retryAtLocked(e *entry, failed bool, anns value.Map) (int64, bool) {
	if q.typ != Quorum {
		return 0, false
	}
	now := q.nowNano()
	if v, ok := lookupKey(anns, string(deliveryTimeKey)); ok {
		if ms, ok := v.(int64); ok && ms > now/int64(time.Millisecond) {
			if ms > math.MaxInt64/int64(time.Millisecond) {
				return math.MaxInt64, true
			}
			return ms * int64(time.Millisecond), true
		}
	}
	r := q.cfg.retry
	if !r.applies(failed) {
		return 0, false
	}
	return now + int64(r.delay(e.dc)), true
}

// returnLocked gives a message a consumer had back to the queue: into the
// delayed set when retryAtLocked says so, otherwise ready again
// (requeueLocked, the one way back into the ready lists). It reports
// whether e is ready.
func (q *Queue) returnLocked(e *entry, failed bool, anns value.Map) bool {
	if at, ok := q.retryAtLocked(e, failed, anns); ok {
		q.delayLocked(e, at)
		return false
	}
	q.requeueLocked(e)
	return true
}

// delayLocked puts e into the delayed set until readyAt and stores that.
func (q *Queue) delayLocked(e *entry, readyAt int64) {
	e.delivered = false
	q.pushDelayedLocked(e, readyAt)
	q.updateStoredLocked(e)
}

// pushDelayedLocked adds e to the delayed set (also for a recovered entry).
func (q *Queue) pushDelayedLocked(e *entry, readyAt int64) {
	x := e.extension()
	x.delayed, x.readyAt = true, readyAt
	q.delayOrd++
	x.delayOrd = q.delayOrd
	heap.Push(&q.delayed, e)
	q.delayedBytes += e.size()
}

// promoteDelayedLocked moves every delayed message that is due to the
// tail of the returns, in due order, and dead-letters as expired the
// ones whose TTL passed while they waited (epitaph expires them at their
// deadline; RabbitMQ only when they are promoted). It reports whether any
// became ready.
func (q *Queue) promoteDelayedLocked(now int64) bool {
	ready := false
	for len(q.delayed) > 0 && dueOf(q.delayed[0]) <= now {
		e := heap.Pop(&q.delayed).(*entry)
		e.ext.delayed = false
		q.delayedBytes -= e.size()
		if e.deadline != 0 && e.deadline <= now {
			q.deadLocked(e, ReasonExpired, nil)
			continue
		}
		q.requeueLocked(e)
		ready = true
	}
	return ready
}

// nextDelayedLocked is the earliest due time in the delayed set, or 0.
func (q *Queue) nextDelayedLocked() int64 {
	if len(q.delayed) == 0 {
		return 0
	}
	return dueOf(q.delayed[0])
}

// clearDelayedLocked empties the delayed set; settle: their stored copies
// are settled (purge), otherwise left to the queue's deletion.
func (q *Queue) clearDelayedLocked(settle bool) {
	for _, e := range q.delayed {
		e.ext.delayed, e.ext.delayIdx = false, -1
		if settle {
			q.settleStoredLocked(e)
		}
	}
	clear(q.delayed)
	q.delayed = q.delayed[:0]
	q.delayedBytes = 0
}

// delayedSpanLocked returns the smallest and largest ready-at times of the
// delayed messages, in ms since the epoch (RabbitMQ's next_delayed_at and
// last_delayed_at); it reads every delayed entry, for the management API.
func (q *Queue) delayedSpanLocked() (first, last int64) {
	for i, e := range q.delayed {
		at := e.ext.readyAt / int64(time.Millisecond)
		if i == 0 || at < first {
			first = at
		}
		if i == 0 || at > last {
			last = at
		}
	}
	return first, last
}

// undelayLocked takes e out of the delayed set (a redrive moved it).
func (q *Queue) undelayLocked(e *entry) {
	heap.Remove(&q.delayed, e.ext.delayIdx)
	e.ext.delayed = false
	q.delayedBytes -= e.size()
}

// DelayedLen is the number of messages in the delayed set.
func (q *Queue) DelayedLen() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.delayed)
}
