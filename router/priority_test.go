package router

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/amqp10"
)

// prioMsg is msg with a header carrying priority p.
func prioMsg(body string, p uint8, keys ...string) *Message {
	m := msg(body, keys...)
	m.Container = AMQP10{Wire: amqp10.NewMessage(&amqp10.Header{Priority: p, HasPriority: true}, nil, []byte(body), nil)}
	m.Header.Priority = p
	return m
}

// durablePrioMsg is durableMsg with priority p (when set).
func durablePrioMsg(t *testing.T, body string, p int, keys ...string) *Message {
	t.Helper()
	b, err := amqp10.AppendAMQPValue(nil, body)
	require.NoError(t, err)
	h := amqp10.Header{Durable: true, Priority: 4}
	if p >= 0 {
		h.Priority, h.HasPriority = uint8(p), true
	}
	w, err := amqp10.ParseMessage(append(amqp10.AppendHeader(nil, &h), b...))
	require.NoError(t, err)
	m := NewAMQP10Message(w)
	m.RoutingKeys = keys
	return m
}

func publishPrio(t *testing.T, e *env, queue string, ps map[string]int, order ...string) {
	t.Helper()
	for _, b := range order {
		m := msg(b, queue)
		if p, ok := ps[b]; ok {
			m = prioMsg(b, uint8(p), queue)
		}
		require.Equal(t, Accepted, e.publish(t, "", m))
	}
}

// x-max-priority is checked as RabbitMQ checks it, and sets the levels:
// 0 means 1 (rabbit_priority_queue:priorities/1), a quorum queue always has
// 0..31.
func TestPriorityLevels(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		arg  any
		want int
	}{{int64(0), 1}, {int64(1), 1}, {int32(10), 10}, {uint8(255), 255}} {
		q := e.queue(t, fmt.Sprint("c", tc.arg), Classic, "x-max-priority", tc.arg)
		assert.Equal(t, tc.want, q.MaxPriority(), "x-max-priority %v", tc.arg)
	}
	assert.Equal(t, 0, e.queue(t, "plain", Classic).MaxPriority())
	assert.Equal(t, 31, e.queue(t, "qq", Quorum).MaxPriority())
	_, _, err := e.v.DeclareQueue(QueueSpec{Name: "c10", Type: Classic, Durable: true})
	require.ErrorIs(t, err, ErrPreconditionFailed, "x-max-priority takes part in equivalence")
	assert.Contains(t, err.Error(), "x-max-priority")
}

// A classic priority queue delivers the highest level first, in order
// within a level; a priority above the maximum counts as the maximum, and a
// message whose publisher set no priority is at level 0 (an explicit 4 is
// 4).
func TestPriorityClassicDeliveryOrder(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-priority", int64(5))
	publishPrio(t, e, "q", map[string]int{"p1": 1, "p5": 5, "p9": 9, "p4": 4, "p0": 0, "p5b": 5, "p200": 200},
		"none1", "p1", "p5", "p9", "p4", "none2", "p0", "p5b", "p200")
	require.Equal(t, 9, q.Len())
	_, c := subscribe(t, q, 100)
	assert.Equal(t, []string{"p5", "p9", "p5b", "p200", "p4", "p1", "none1", "none2", "p0"}, c.bodies())
}

// An AMQP 0.9.1 message's priority property counts; without one it is at
// level 0 of a classic queue and 4 of a quorum queue.
func TestPriorityAMQP091Property(t *testing.T) {
	msg091 := func(body string, p int) *Message {
		var props amqp091.Properties
		if p >= 0 {
			props.Flags |= amqp091.FlagPriority
			props.Priority = uint8(p)
		}
		c, err := NewAMQP091(props, nil, []byte(body))
		require.NoError(t, err)
		m := NewMessage(c)
		m.RoutingKeys = []string{"q"}
		return m
	}
	for _, tc := range []struct {
		typ  QueueType
		args []any
		want []string
	}{
		{Classic, []any{"x-max-priority", int64(5)}, []string{"p5", "p4", "p1", "none"}},
		{Quorum, nil, []string{"p5", "none", "p4", "p1"}},
	} {
		t.Run(string(tc.typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", tc.typ, tc.args...)
			for _, m := range []*Message{msg091("none", -1), msg091("p1", 1), msg091("p5", 5), msg091("p4", 4)} {
				require.Equal(t, Accepted, e.publish(t, "", m))
			}
			_, c := subscribe(t, q, 100)
			var got []string
			for _, d := range c.all() {
				b, err := d.Msg.Container.Body()
				require.NoError(t, err)
				got = append(got, string(b))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A quorum queue has 32 levels without an argument (RabbitMQ 4.3's
// rabbit_fifo_pq): a message without a priority is at 4, above 31 counts
// as 31, and returned messages come before every level.
func TestPriorityQuorumLevels(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum)
	publishPrio(t, e, "q", map[string]int{"p3": 3, "p5": 5, "p31": 31, "p200": 200, "p4": 4, "p0": 0},
		"none1", "p3", "p5", "p31", "p200", "p4", "none2", "p0")
	s, c := subscribe(t, q, 2)
	require.Equal(t, []string{"p31", "p200"}, c.bodies())
	// Released: back in the returns, ahead of the levels.
	ds := c.all()
	require.NoError(t, s.Settle(ds[1].Tag, Settlement{Kind: SettleRelease}))
	s.Flow(2, 100, false)
	assert.Equal(t, []string{"p31", "p200", "p200", "p5", "none1", "p4", "none2", "p3", "p0"}, c.bodies())
}

// A classic requeue puts a message back at its place in its own level.
func TestPriorityClassicRequeueKeepsPlace(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-priority", int64(9))
	publishPrio(t, e, "q", map[string]int{"a1": 1, "a2": 1, "a3": 1, "b1": 2, "b2": 2},
		"a1", "a2", "b1", "a3", "b2")
	s, c := subscribe(t, q, 3)
	require.Equal(t, []string{"b1", "b2", "a1"}, c.bodies())
	ds := c.all()
	require.NoError(t, s.Settle(ds[2].Tag, Settlement{Kind: SettleRelease})) // a1
	require.NoError(t, s.Settle(ds[0].Tag, Settlement{Kind: SettleRelease})) // b1
	s.Flow(3, 100, false)
	assert.Equal(t, []string{"b1", "b2", "a1", "b1", "a1", "a2", "a3"}, c.bodies())
}

// Message TTL (per message and per queue) expires a message at its
// deadline in any level and any position.
func TestPriorityTTL(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withClock(clock))
	q := e.queue(t, "q", Classic, "x-max-priority", int64(9), "x-message-ttl", int64(10_000))
	for _, m := range []*Message{prioMsg("hi", 9, "q"), ttlMsg("low-short", 1000, "q"), prioMsg("mid", 5, "q")} {
		require.Equal(t, Accepted, e.publish(t, "", m))
	}
	m := prioMsg("mid-short", 5, "q")
	m.Header.TTL, m.Header.HasTTL = 500, true
	require.Equal(t, Accepted, e.publish(t, "", m))
	clock.Advance(600 * time.Millisecond)
	assert.Equal(t, 3, q.Len())
	clock.Advance(500 * time.Millisecond)
	assert.Equal(t, 2, q.Len())
	assert.Equal(t, []string{"mid-short:expired", "low-short:expired"}, e.dl.bodies())
	clock.Advance(10 * time.Second)
	assert.Equal(t, 0, q.Len())
	assert.Equal(t, []string{"mid-short:expired", "low-short:expired", "hi:expired", "mid:expired"}, e.dl.bodies())
}

// max-length drop-head drops the message that would be delivered next:
// the head of the highest level (rabbit_priority_queue:drop/2 and
// rabbit_fifo's drop_head take the next message); reject-publish refuses
// the new message whatever its priority.
func TestPriorityMaxLength(t *testing.T) {
	t.Run("drop-head", func(t *testing.T) {
		for _, typ := range []QueueType{Classic, Quorum} {
			t.Run(string(typ), func(t *testing.T) {
				e := newEnv(t)
				args := []any{"x-max-length", int64(3)}
				if typ == Classic {
					args = append(args, "x-max-priority", int64(9))
				}
				q := e.queue(t, "q", typ, args...)
				publishPrio(t, e, "q", map[string]int{"lo1": 1, "lo2": 1, "hi1": 8, "hi2": 8, "mid": 6},
					"lo1", "hi1", "lo2", "hi2", "mid")
				assert.Equal(t, []string{"hi1:maxlen", "hi2:maxlen"}, e.dl.bodies())
				_, c := subscribe(t, q, 10)
				assert.Equal(t, []string{"mid", "lo1", "lo2"}, c.bodies())
			})
		}
	})
	t.Run("reject-publish", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Classic, "x-max-priority", int64(9), "x-max-length", int64(2), "x-overflow", "reject-publish")
		publishPrio(t, e, "q", map[string]int{"a": 1, "b": 1}, "a", "b")
		res, err := e.v.Publish(Publish{Msg: prioMsg("hi", 9, "q")})
		require.NoError(t, err)
		assert.Equal(t, Rejected, res.Outcome.Kind)
		assert.Equal(t, 2, q.Len())
	})
	t.Run("max-length-bytes", func(t *testing.T) {
		e := newEnv(t)
		q := e.queue(t, "q", Classic, "x-max-priority", int64(9), "x-max-length-bytes", int64(4))
		publishPrio(t, e, "q", map[string]int{"lo": 1, "hi": 7}, "lo", "hi", "xx")
		assert.Equal(t, []string{"hi:maxlen"}, e.dl.bodies())
		assert.Equal(t, 2, q.Len())
	})
}

// A rejected message is dead-lettered; a quorum queue's delivery limit
// counts per message whatever its level.
func TestPriorityDeadLetteringAndDeliveryLimit(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(1))
	publishPrio(t, e, "q", map[string]int{"hi": 9}, "lo", "hi")
	s, c := subscribe(t, q, 1)
	require.Equal(t, []string{"hi"}, c.bodies())
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleModify, DeliveryFailed: true}))
	s.Flow(1, 1, false)
	require.Equal(t, []string{"hi", "hi"}, c.bodies(), "returned: before the other level")
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleModify, DeliveryFailed: true}))
	assert.Equal(t, []string{"hi:delivery_limit"}, e.dl.bodies())
	s.Flow(2, 1, false)
	require.Equal(t, []string{"hi", "hi", "lo"}, c.bodies())
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleReject}))
	assert.Equal(t, []string{"hi:delivery_limit", "lo:rejected"}, e.dl.bodies())
}

// A filtered consumer gets its highest-priority match, scanning every
// level; what it passes over stays for the others in priority order, and
// a released message it matches comes back to it at its level.
func TestPriorityFilteredConsumer(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			var args []any
			if typ == Classic {
				args = []any{"x-max-priority", int64(9)}
			}
			q := e.queue(t, "q", typ, args...)
			publishPrio(t, e, "q", map[string]int{"a-lo": 1, "b-lo": 1, "a-hi": 8, "b-hi": 8, "b-mid": 6},
				"b-lo", "a-lo", "b-hi", "a-hi", "b-mid")
			f := &bodyFilter{prefix: "b"}
			fs, fc := subscribeFiltered(t, q, f, 1)
			require.Equal(t, []string{"b-hi"}, fc.bodies())
			fs.Flow(1, 1, false)
			require.Equal(t, []string{"b-hi", "b-mid"}, fc.bodies())
			// Released: it comes back to the filtered consumer before b-lo.
			require.NoError(t, fs.Settle(fc.last(t).Tag, Settlement{Kind: SettleRelease}))
			fs.Flow(2, 2, false)
			require.Equal(t, []string{"b-hi", "b-mid", "b-mid", "b-lo"}, fc.bodies())
			publishPrio(t, e, "q", map[string]int{"b-top": 9}, "b-top")
			fs.Flow(4, 1, false)
			require.Equal(t, []string{"b-hi", "b-mid", "b-mid", "b-lo", "b-top"}, fc.bodies())
			_, c := subscribe(t, q, 10)
			assert.Equal(t, []string{"a-hi", "a-lo"}, c.bodies())
		})
	}
}

// A single active consumer gets the messages in priority order too.
func TestPrioritySingleActiveConsumer(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-priority", int64(3), "x-single-active-consumer", true)
	publishPrio(t, e, "q", map[string]int{"hi": 3}, "lo", "hi")
	s1, c1 := subscribe(t, q, 1)
	_, c2 := subscribe(t, q, 10)
	require.Equal(t, []string{"hi"}, c1.bodies())
	assert.Empty(t, c2.bodies())
	s1.Cancel(CancelDetach)
	assert.Equal(t, []string{"hi", "lo"}, c2.bodies())
}

// Peek and browse see the messages in delivery order over every level;
// BrowseAfter walks them by seq, each once; MoveReady takes one from its
// level; purge empties every level.
func TestPriorityPeekBrowseMovePurge(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-priority", int64(9))
	dst := e.queue(t, "dst", Classic)
	publishPrio(t, e, "q", map[string]int{"hi1": 9, "hi2": 9, "mid": 5}, "lo1", "hi1", "mid", "lo2", "hi2")
	var got []string
	for _, pm := range q.Peek(10) {
		got = append(got, string(pm.Msg.Container.(AMQP10).Wire.Bare()))
	}
	want := []string{"hi1", "hi2", "mid", "lo1", "lo2"}
	assert.Equal(t, want, got)
	for pos := range want {
		out, next, depth := q.Browse(pos, 1, 10, nil)
		require.Len(t, out, 1)
		assert.Equal(t, want[pos], string(out[0].Msg.Container.(AMQP10).Wire.Bare()), "position %d", pos)
		assert.Equal(t, pos, out[0].Position)
		assert.Equal(t, pos+1, next)
		assert.Equal(t, 5, depth)
	}
	var walked []string
	var seqs []uint64
	last := uint64(0)
	for {
		out, l, done := q.BrowseAfter(last, 2, 2, nil)
		for _, bm := range out {
			walked = append(walked, string(bm.Msg.Container.(AMQP10).Wire.Bare()))
			seqs = append(seqs, bm.Seq)
		}
		last = l
		if done {
			break
		}
	}
	assert.Equal(t, []string{"lo1", "hi1", "mid", "lo2", "hi2"}, walked, "in seq order, each once")

	moved := make(chan MoveResult, 1)
	q.MoveReady(seqs[2], msg("mid", "dst"), []*Queue{dst}, "", nil, func(r MoveResult, err error) {
		assert.NoError(t, err)
		moved <- r
	})
	require.True(t, (<-moved).Moved)
	assert.Equal(t, 1, dst.Len())
	_, c := subscribe(t, q, 1)
	require.Equal(t, []string{"hi1"}, c.bodies())
	assert.Equal(t, 3, q.Purge())
	assert.Equal(t, 0, q.Len())
	publishPrio(t, e, "q", map[string]int{"again": 9}, "later", "again")
	c.deliveries = nil
	q.subs[0].Flow(1, 10, false)
	assert.Equal(t, []string{"again", "later"}, c.bodies())
}

// A durable priority queue keeps its levels across a restart, read back at
// once or in the background, with every message behind a one-byte window
// paged in its own level: each level is delivered in order, the highest
// first, and the paged entries are dropped from memory.
func TestPriorityDurablePagedRecovery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     QueueType
		deep    bool
		amqp091 bool // the messages are 0-9-1 ones (their own stored format)
	}{{"classic", Classic, false, false}, {"quorum", Quorum, false, false},
		{"classic background", Classic, true, false}, {"quorum background", Quorum, true, false},
		{"classic background 0-9-1", Classic, true, true}, {"quorum background 0-9-1", Quorum, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.deep {
				old := syncLoadMax
				syncLoadMax = 10
				t.Cleanup(func() { syncLoadMax = old })
			}
			dir := t.TempDir()
			d := openDurable(t, dir)
			var args []any
			if tc.typ == Classic {
				args = []any{"x-max-priority", int64(3)}
			}
			q := d.queue(t, "q", tc.typ, args...)
			// Levels interleaved: priority i%4 (3 is the top), none for every fifth.
			prio := func(i int) int {
				if i%5 == 0 {
					return -1
				}
				return i % 4
			}
			publishDurableN(t, d, "q", "m", 400, nil)
			require.Equal(t, 400, q.Purge())
			for i := 1; i <= 400; i++ {
				m := durablePrioMsg(t, fmt.Sprintf("m%d", i), prio(i), "q")
				if tc.amqp091 {
					p := amqp091.Properties{Flags: amqp091.FlagDeliveryMode, DeliveryMode: 2}
					if prio(i) >= 0 {
						p.Flags |= amqp091.FlagPriority
						p.Priority = uint8(prio(i))
					}
					m = new091(t, p, fmt.Sprintf("m%d", i))
				}
				res, err := d.v.Publish(Publish{Msg: m, Confirm: func(Outcome) {}})
				require.NoError(t, err)
				_ = res
			}
			eventually(t, func() bool { return q.Len() == 400 && pinned(q) == 0 && pinnedLevels(q) == 0 }, 5*time.Second)
			levelOf := func(i int) int {
				p := prio(i)
				if p < 0 {
					if tc.typ == Quorum {
						return 4
					}
					return 0
				}
				return p
			}
			var want []string
			for _, lv := range []int{4, 3, 2, 1, 0} {
				for i := 1; i <= 400; i++ {
					if levelOf(i) == lv {
						want = append(want, fmt.Sprintf("m%d", i))
					}
				}
			}
			// Some are delivered and settled before the restart.
			s, c := subscribe(t, q, 30)
			require.Equal(t, want[:30], bodiesOf(t, c.all()))
			for _, dl := range c.all() {
				require.NoError(t, s.Settle(dl.Tag, Settlement{Kind: SettleAccept}))
			}
			d.close(t)

			d2 := openDurable(t, dir)
			q2, ok := d2.v.Queue("q")
			require.True(t, ok)
			eventually(t, func() bool { return q2.Len() == 370 }, 5*time.Second)
			_, c2 := subscribe(t, q2, 1000)
			eventually(t, func() bool { return c2.n() == 370 }, 5*time.Second)
			assert.Equal(t, want[30:], bodiesOf(t, c2.all()))
			d2.close(t)
		})
	}
}

// pinnedLevels counts the paged entries still in memory in the levels
// other than the queue's own.
func pinnedLevels(q *Queue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	if q.prio == nil {
		return 0
	}
	for _, l := range q.prio.active {
		if l == &q.level {
			continue
		}
		for _, p := range l.paged.pages[l.paged.first:] {
			n += p.npinned
		}
	}
	return n
}

// A level's paged list is sparse: its seqs interleave with the other
// levels', and a slot still costs a few bytes, not a page's share of seqs
// it does not hold.
func TestPriorityPagedIndexHeapPerMessage(t *testing.T) {
	const n = 1_000_000
	const levels = 10
	ls := make([]pagedList, levels)
	for i := range ls {
		ls[i].sparse = true
	}
	m := &Message{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range uint64(n) {
		e := &entry{msg: m, seq: i + 1, deadline: int64(i) + 1e18, heapIdx: -1, stored: true}
		l := &ls[i%levels]
		l.push(e)
		if i%(pageSlots*levels) == pageSlots*levels-1 {
			for j := range ls {
				ls[j].pageOut(i+1, func(uint64) bool { return false })
			}
		}
	}
	for j := range ls {
		ls[j].pageOut(n, func(uint64) bool { return false })
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMsg := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.1f bytes of heap per paged message over %d interleaved levels", perMsg, levels)
	assert.LessOrEqual(t, perMsg, 40.0)
	total := 0
	for j := range ls {
		total += ls[j].n
		// Every slot is found by its seq, and taken in seq order.
		seq := uint64(j + 1)
		p, i, ok := ls[j].find(seq)
		require.True(t, ok)
		assert.Equal(t, seq, p.seqAt(i))
		s, ok := ls[j].popFront()
		require.True(t, ok)
		assert.Equal(t, seq, s.seq)
		_, _, ok = ls[j].find(seq)
		assert.False(t, ok)
		s, _ = ls[j].popFront()
		assert.Equal(t, seq+levels, s.seq)
	}
	require.Equal(t, n, total)
	runtime.KeepAlive(ls)
}

// A filtered consumer's released match waits in its retest list while a
// higher level's match goes first; it is delivered after, not lost.
func TestPriorityFilteredRetestAndHigherLevel(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-priority", int64(9))
	publishPrio(t, e, "q", map[string]int{"b-lo": 1, "a-lo": 1}, "b-lo", "a-lo")
	fs, fc := subscribeFiltered(t, q, &bodyFilter{prefix: "b"}, 1)
	require.Equal(t, []string{"b-lo"}, fc.bodies())
	require.NoError(t, fs.Settle(fc.last(t).Tag, Settlement{Kind: SettleRelease}))
	publishPrio(t, e, "q", map[string]int{"b-hi": 8}, "b-hi")
	fs.Flow(1, 1, false)
	require.Equal(t, []string{"b-lo", "b-hi"}, fc.bodies())
	fs.Flow(2, 5, false)
	assert.Equal(t, []string{"b-lo", "b-hi", "b-lo"}, fc.bodies())
	assert.Equal(t, 1, q.Len(), "a-lo stays for the others")
}
