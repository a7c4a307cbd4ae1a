package router

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router/store/segment"
	"github.com/epitaph-mq/epitaph/value"
)

// withSpill makes the test broker page transient messages into dir.
func withSpill(dir string) func(*Options) { return func(o *Options) { o.SpillDir = dir } }

// transientMsg is durableMsg without the durable flag.
func transientMsg(t *testing.T, body string, keys ...string) *Message {
	t.Helper()
	return transientMsgPrio(t, body, 4, keys...)
}

func transientMsgPrio(t *testing.T, body string, prio uint8, keys ...string) *Message {
	t.Helper()
	b, err := amqp10.AppendAMQPValue(nil, body)
	require.NoError(t, err)
	w, err := amqp10.ParseMessage(append(amqp10.AppendHeader(nil, &amqp10.Header{Priority: prio}), b...))
	require.NoError(t, err)
	m := NewAMQP10Message(w)
	m.RoutingKeys = keys
	return m
}

// transientQueue declares a non-durable classic queue.
func (e *env) transientQueue(t *testing.T, name string, args ...any) *Queue {
	t.Helper()
	var m value.Map
	for i := 0; i+1 < len(args); i += 2 {
		m = append(m, value.KV{Key: args[i], Value: args[i+1]})
	}
	q, _, err := e.v.DeclareQueue(QueueSpec{Name: name, Type: Classic, Arguments: m})
	require.NoError(t, err)
	return q
}

// publishTransientN publishes transient messages prefix1..prefixN to q.
func publishTransientN(t *testing.T, e *env, q, prefix string, n int, mod func(i int, m *Message)) {
	t.Helper()
	for i := 1; i <= n; i++ {
		m := transientMsg(t, fmt.Sprintf("%s%d", prefix, i), q)
		if mod != nil {
			mod(i, m)
		}
		require.Equal(t, Accepted, e.publish(t, "", m))
	}
}

// held reports what q keeps in memory of its ready messages: the bytes
// held with their bodies (window, pinned paged entries) and the paged
// messages whose bodies are on disk only.
func held(q *Queue) (bodyBytes int64, pinnedN, spilledN int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	bodyBytes = q.readyBytes - q.pagedBytesLocked()
	q.eachLevel(func(l *level) bool {
		for _, pl := range []*pagedList{&l.paged, &l.fresh} {
			spilledN += pl.nspilled
			pl.each(func(p *indexPage, i int) bool {
				if p.pinned != nil && p.pinned[i] != nil {
					pinnedN++
					bodyBytes += p.pinned[i].size()
				}
				return true
			})
		}
		return true
	})
	return bodyBytes, pinnedN, spilledN
}

// spillFiles lists the files under dir.
func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return out
}

// drainInSteps consumes q with a small credit, settling as it goes, and
// returns the bodies in delivery order.
func drainInSteps(t *testing.T, q *Queue, total int, credit uint32) []string {
	t.Helper()
	s, c := subscribe(t, q, credit)
	settled := 0
	for settled < total {
		ds := c.all()
		require.Greater(t, len(ds), settled, "no progress after %d", settled)
		for _, dl := range ds[settled:] {
			require.NoError(t, s.Settle(dl.Tag, Settlement{Kind: SettleAccept}))
		}
		settled = len(ds)
		if settled >= total {
			break
		}
		s.Flow(uint32(settled), credit, false)
	}
	got := bodiesOf(t, c.all()[:settled])
	s.Cancel(CancelDetach)
	return got
}

// A non-durable queue filled far beyond its window keeps only the window
// (and a write batch no larger) with bodies; the rest is on disk, read
// back in order, none lost; drained, its spill files are gone.
func TestSpillTransientQueueHoldsOnlyTheWindow(t *testing.T) {
	dir := t.TempDir()
	const window = 4096
	e := newEnv(t, withWindow(window), withSpill(dir))
	q := e.transientQueue(t, "q")
	publishTransientN(t, e, "q", "m", 5000, nil)
	require.Equal(t, 5000, q.Len())
	one := int64(transientMsg(t, "m1", "q").size()) // the smallest
	body, pinnedN, spilledN := held(q)
	assert.LessOrEqual(t, body, int64(2*window)+2*one, "bytes held with bodies: the window and at most one write batch")
	assert.GreaterOrEqual(t, spilledN, 5000-int(2*window/one)-2, "messages whose bodies are on disk only")
	assert.LessOrEqual(t, pinnedN, int(window/one)+1, "waiting for their write: at most one batch")
	require.NotEmpty(t, spillFiles(t, dir))

	got := drainInSteps(t, q, 5000, 7)
	require.Equal(t, names("m", 1, 5000), got)
	require.Zero(t, q.Len())
	assert.Empty(t, spillFiles(t, dir), "drained: the spill files are removed")
	assert.Zero(t, e.b.UnreadableMessages())
}

// A durable queue receiving durable and transient messages keeps their
// order; the transient ones are paged to the spill log, not held; after a
// restart only the durable ones come back, and the spill files are gone.
func TestSpillMixedDurableQueueKeepsOrder(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			dir, spill := t.TempDir(), t.TempDir()
			d := openDurable(t, dir, withWindow(2000), withSpill(spill))
			q := d.queue(t, "q", typ)
			var all, durable []string
			for i := 1; i <= 3000; i++ {
				body := fmt.Sprintf("m%d", i)
				all = append(all, body)
				if i%2 == 0 {
					publishDurableN(t, d, "q", body+"-", 1, nil) // body "m<i>-1"
					all[len(all)-1] = body + "-1"
					durable = append(durable, body+"-1")
					continue
				}
				require.Equal(t, Accepted, d.publish(t, "", transientMsg(t, body, "q")))
			}
			require.Equal(t, 3000, q.Len())
			one := int64(transientMsg(t, "m3000", "q").size())
			body, pinnedN, spilledN := held(q)
			assert.LessOrEqual(t, int64(pinnedN), 2000/one+1, "paged messages held in memory: at most one write batch")
			assert.GreaterOrEqual(t, int64(spilledN), 1500-2*2000/one-2)
			assert.LessOrEqual(t, body, 2*2000+2*one)

			// A peek crosses both kinds behind the window.
			ps := q.Peek(3000)
			require.Len(t, ps, 3000)
			for i, p := range ps {
				require.Equal(t, all[i], bodyOf(t, p.Msg), i)
			}
			got := drainInSteps(t, q, 1000, 9)
			require.Equal(t, all[:len(got)], got)
			d.close(t)
			require.NotEmpty(t, all)

			// Restart: the transient messages are gone, the spill
			// directory emptied; the durable ones are all back.
			require.NoError(t, os.MkdirAll(filepath.Join(spill, "9-4"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(spill, "9-4", "00000000000000000001.seg"), make([]byte, 100), 0o644))
			d2 := openDurable(t, dir, withWindow(2000), withSpill(spill))
			assert.Empty(t, spillFiles(t, spill), "files of the previous run discarded")
			q2, ok := d2.v.Queue("q")
			require.True(t, ok)
			var want []string
			for _, b := range durable {
				if !slices.Contains(got, b) {
					want = append(want, b)
				}
			}
			require.Equal(t, len(want), q2.Len())
			_, c := subscribe(t, q2, 5000)
			assert.Equal(t, want, bodiesOf(t, c.all()))
			d2.close(t)
		})
	}
}

// A transient paged message expires at its deadline in any position and is
// dead-lettered with its body, read once; its copy is transient (no
// stored source copy to move).
func TestSpillTTL(t *testing.T) {
	clock := newClock()
	e := newEnv(t, withWindow(1), withSpill(t.TempDir()), withClock(clock))
	q := e.transientQueue(t, "q")
	publishTransientN(t, e, "q", "m", 300, func(i int, m *Message) {
		if i%3 == 0 {
			m.Header.TTL, m.Header.HasTTL = 100, true
		}
	})
	_, _, spilledN := held(q)
	require.Greater(t, spilledN, 290)
	clock.Advance(99 * time.Millisecond)
	require.Equal(t, 300, q.Len())
	clock.Advance(time.Millisecond)
	require.Equal(t, 200, q.Len())
	var want, keep []string
	for i := 1; i <= 300; i++ {
		if i%3 == 0 {
			want = append(want, fmt.Sprintf("m%d:expired", i))
		} else {
			keep = append(keep, fmt.Sprintf("m%d", i))
		}
	}
	assert.Equal(t, want, deadBodies(t, e.dl))
	for _, dd := range e.dl.all() {
		assert.False(t, dd.Durable(), "a transient message has no stored copy")
		assert.False(t, dd.Msg.Header.Durable)
	}
	_, c := subscribe(t, q, 1000)
	assert.Equal(t, keep, bodiesOf(t, c.all()))
}

// Without a dead-letterer an expired spilled message is dropped unread,
// and the spill files go with the last one.
func TestSpillTTLWithoutDeadLetterer(t *testing.T) {
	clock := newClock()
	dir := t.TempDir()
	e := newEnv(t, withWindow(1), withSpill(dir), withClock(clock), func(o *Options) { o.DeadLetterer = nil })
	q := e.transientQueue(t, "q", "x-message-ttl", int64(50))
	publishTransientN(t, e, "q", "m", 200, nil)
	require.NotEmpty(t, spillFiles(t, dir))
	clock.Advance(50 * time.Millisecond)
	require.Zero(t, q.Len())
	assert.Empty(t, spillFiles(t, dir))
}

func TestSpillOverflow(t *testing.T) {
	t.Run("drop-head", func(t *testing.T) {
		e := newEnv(t, withWindow(1), withSpill(t.TempDir()))
		q := e.transientQueue(t, "q", "x-max-length", int64(50))
		publishTransientN(t, e, "q", "m", 200, nil)
		require.Equal(t, 50, q.Len())
		var want []string
		for _, n := range names("m", 1, 150) {
			want = append(want, n+":maxlen")
		}
		assert.Equal(t, want, deadBodies(t, e.dl))
		_, _, spilledN := held(q)
		require.GreaterOrEqual(t, spilledN, 49, "all but the window's one on disk")
		_, c := subscribe(t, q, 100)
		assert.Equal(t, names("m", 151, 200), bodiesOf(t, c.all()))
	})
	t.Run("max-length-bytes", func(t *testing.T) {
		e := newEnv(t, withWindow(1), withSpill(t.TempDir()))
		one := int64(transientMsg(t, "m100", "q").size())
		q := e.transientQueue(t, "q", "x-max-length-bytes", 20*one)
		publishTransientN(t, e, "q", "m", 139, nil)
		assert.LessOrEqual(t, q.Info().MessageBytes, 20*one)
		_, _, spilledN := held(q)
		require.Positive(t, spilledN)
		_, c := subscribe(t, q, 100)
		got := bodiesOf(t, c.all())
		require.GreaterOrEqual(t, len(got), 19)
		assert.Equal(t, names("m", 140-len(got), 139), got, "the newest messages within the limit")
		assert.Len(t, e.dl.all(), 139-len(got))
	})
	for _, ov := range []string{"reject-publish", "reject-publish-dlx"} {
		t.Run(ov, func(t *testing.T) {
			e := newEnv(t, withWindow(1), withSpill(t.TempDir()))
			q := e.transientQueue(t, "q", "x-max-length", int64(100), "x-overflow", ov)
			publishTransientN(t, e, "q", "m", 100, nil)
			require.Equal(t, Rejected, e.publish(t, "", transientMsg(t, "over", "q")))
			if ov == "reject-publish-dlx" {
				assert.Equal(t, []string{"over:maxlen"}, deadBodies(t, e.dl))
			}
			_, _, spilledN := held(q)
			require.Equal(t, 99, spilledN)
			_, c := subscribe(t, q, 200)
			assert.Equal(t, names("m", 1, 100), bodiesOf(t, c.all()))
		})
	}
}

// Priorities: each level pages into its own spill log; delivery is by
// level, in order within each.
func TestSpillPriorities(t *testing.T) {
	e := newEnv(t, withWindow(1), withSpill(t.TempDir()))
	q := e.transientQueue(t, "q", "x-max-priority", int64(3))
	var byLevel [4][]string
	for i := 1; i <= 800; i++ {
		p := uint8(i % 4)
		body := fmt.Sprintf("p%d-%d", p, i)
		byLevel[p] = append(byLevel[p], body)
		require.Equal(t, Accepted, e.publish(t, "", transientMsgPrio(t, body, p, "q")))
	}
	_, pinnedN, spilledN := held(q)
	assert.Zero(t, pinnedN)
	assert.Greater(t, spilledN, 780)
	var want []string
	for p := 3; p >= 0; p-- {
		want = append(want, byLevel[p]...)
	}
	assert.Equal(t, want, drainInSteps(t, q, 800, 13))
}

// Browse, a seq walk, a filtered consumer and a move reach the spilled
// messages.
func TestSpillBrowseFilterMove(t *testing.T) {
	e := newEnv(t, withWindow(2000), withSpill(t.TempDir()))
	q := e.transientQueue(t, "q")
	target := e.transientQueue(t, "target")
	publishTransientN(t, e, "q", "m", 3000, nil)
	_, _, spilledN := held(q)
	require.Greater(t, spilledN, 2000)

	page, next, depth := q.Browse(2900, 5, 1000, nil)
	require.Equal(t, 3000, depth)
	require.Equal(t, 2905, next)
	require.Len(t, page, 5)
	for k, bm := range page {
		require.Equal(t, fmt.Sprintf("m%d", 2901+k), bodyOf(t, bm.Msg))
	}
	var seqs []uint64
	last, done := uint64(0), false
	for !done {
		var out []BrowsedMessage
		out, last, done = q.BrowseAfter(last, 700, 700, nil)
		for _, bm := range out {
			seqs = append(seqs, bm.Seq)
		}
	}
	require.Len(t, seqs, 3000)

	moved := make(chan error, 1)
	q.MoveReady(page[0].Seq, page[0].Msg, []*Queue{target}, "", nil, func(res MoveResult, err error) {
		if err == nil && !res.Moved {
			err = ErrNotReady
		}
		moved <- err
	})
	require.NoError(t, <-moved)
	require.Equal(t, 1, target.Len())

	_, fc := subscribeFiltered(t, q, suffixFilter{"m2999"}, 10)
	eventually(t, func() bool { return len(fc.all()) == 1 }, 10*time.Second)
	require.Equal(t, 2998, q.Len())
	want := names("m", 1, 3000)
	want = slices.DeleteFunc(want, func(s string) bool { return s == "m2901" || s == "m2999" })
	_, c := subscribe(t, q, 5000)
	assert.Equal(t, want, bodiesOf(t, c.all()))
}

// Purge and delete remove the spill files at once.
func TestSpillPurgeAndDeleteFreeDisk(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, withWindow(1), withSpill(dir))
	q := e.transientQueue(t, "q")
	publishTransientN(t, e, "q", "m", 500, nil)
	require.NotEmpty(t, spillFiles(t, dir))
	require.Equal(t, 500, q.Purge())
	assert.Empty(t, spillFiles(t, dir), "purged: files removed")
	publishTransientN(t, e, "q", "n", 300, nil)
	require.NotEmpty(t, spillFiles(t, dir))
	_, c := subscribe(t, q, 10)
	require.Len(t, c.all(), 10)
	assert.Equal(t, names("n", 1, 10), bodiesOf(t, c.all()))

	_, err := e.v.DeleteQueue("q")
	require.NoError(t, err)
	assert.Empty(t, spillFiles(t, dir), "deleted: files removed")
}

// faultFS fails every write with ENOSPC while full is set.
type faultFS struct {
	segment.OSFS
	full *atomic.Bool
}

type faultFile struct {
	segment.File
	full *atomic.Bool
}

func (f faultFS) OpenFile(name string, flag int, perm os.FileMode) (segment.File, error) {
	if f.full.Load() && flag&os.O_CREATE != 0 {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	fl, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{fl, f.full}, nil
}

func (f faultFile) Write(p []byte) (int, error) {
	if f.full.Load() {
		return 0, &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

// A full disk while spilling: the messages stay in memory (counted,
// logged), none is lost, and spilling resumes once there is room.
func TestSpillDiskFullKeepsMessagesInMemory(t *testing.T) {
	var full atomic.Bool
	clock := newClock()
	e := newEnv(t, withWindow(1), withSpill(t.TempDir()), withClock(clock),
		func(o *Options) { o.spillFS = faultFS{full: &full} })
	q := e.transientQueue(t, "q")
	publishTransientN(t, e, "q", "a", 100, nil)
	full.Store(true)
	publishTransientN(t, e, "q", "b", 100, nil)
	require.Positive(t, e.b.SpilledMessagesKeptInMemory())
	_, pinnedN, _ := held(q)
	assert.Equal(t, 100, pinnedN, "the messages that could not be written stay in memory")
	full.Store(false)
	clock.Advance(spillRetryAfter)
	publishTransientN(t, e, "q", "c", 100, nil)
	_, pinnedN, spilledN := held(q)
	assert.Equal(t, 100, pinnedN)
	assert.Equal(t, 199, spilledN, "written again once there is room (all but the window's one)")
	want := append(append(names("a", 1, 100), names("b", 1, 100)...), names("c", 1, 100)...)
	assert.Equal(t, want, drainInSteps(t, q, 300, 50))
	assert.Zero(t, e.b.UnreadableMessages())
}

// A damaged spill file is reported per message; the others are served.
func TestSpillDamageReported(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, withWindow(1), withSpill(dir))
	q := e.transientQueue(t, "q")
	publishTransientN(t, e, "q", "m", 50, nil)
	segs := spillFiles(t, dir)
	var seg string
	for _, f := range segs {
		if filepath.Ext(f) == ".seg" {
			seg = f
		}
	}
	require.NotEmpty(t, seg)
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff // somewhere in the middle frames
	require.NoError(t, os.WriteFile(seg, data, 0o644))
	_, c := subscribe(t, q, 100)
	got := bodiesOf(t, c.all())
	assert.Positive(t, e.b.UnreadableMessages())
	assert.Equal(t, 50, len(got)+int(e.b.UnreadableMessages()))
	assert.True(t, slices.IsSorted(slices.Collect(func(yield func(int) bool) {
		for _, b := range got {
			var n int
			fmt.Sscanf(b, "m%d", &n)
			if !yield(n) {
				return
			}
		}
	})))
	assert.Zero(t, q.Len())
}

// A broker without a spill directory keeps transient messages in memory
// (in-memory brokers, as before).
func TestNoSpillDirKeepsTransientInMemory(t *testing.T) {
	e := newEnv(t, withWindow(1))
	q := e.transientQueue(t, "q")
	publishTransientN(t, e, "q", "m", 100, nil)
	_, pinnedN, spilledN := held(q)
	assert.Zero(t, spilledN)
	assert.Zero(t, pinnedN, "nothing paged at all")
	q.mu.Lock()
	assert.Equal(t, 100, q.main.n)
	q.mu.Unlock()
}

func FuzzDecodeSpilled(f *testing.F) {
	m := msg("body", "q")
	e := &entry{msg: m, seq: 7, deadline: 12345, dc: 2, heapIdx: -1}
	p, err := encodeSpilled(e)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(p)
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 0, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeSpilled(1, 0, data)
		if err != nil {
			require.ErrorIs(t, err, errCorrupt)
			return
		}
		require.NotNil(t, e.msg)
	})
}

func TestSpilledPayloadRoundTrip(t *testing.T) {
	m := transientMsg(t, "hello", "q")
	e := &entry{msg: m, seq: 7, deadline: 12345, dc: 2, acquired: 1, heapIdx: -1}
	p, err := encodeSpilled(e)
	require.NoError(t, err)
	got, err := decodeSpilled(7, 3, p)
	require.NoError(t, err)
	assert.Equal(t, "hello", bodyOf(t, got.msg))
	assert.Equal(t, int64(12345), got.deadline)
	assert.Equal(t, uint32(2), got.dc)
	assert.Equal(t, uint32(1), got.acquired)
	assert.Equal(t, uint8(3), got.prio)
	_, err = decodeSpilled(7, 3, p[:len(p)-3])
	assert.Error(t, err)
}

// A queue whose consumer keeps up never pages, so it writes nothing.
func TestSpillShallowQueueWritesNothing(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, withWindow(4096), withSpill(dir))
	q := e.transientQueue(t, "q")
	s, c := subscribe(t, q, 100)
	for i := 1; i <= 5000; i++ {
		require.Equal(t, Accepted, e.publish(t, "", transientMsg(t, fmt.Sprint("m", i), "q")))
		ds := c.all()
		require.Len(t, ds, i)
		require.NoError(t, s.Settle(ds[i-1].Tag, Settlement{Kind: SettleAccept}))
		s.Flow(uint32(i), 100, false)
	}
	assert.Empty(t, spillFiles(t, dir))
	_, _, spilledN := held(q)
	assert.Zero(t, spilledN)
}

// Delivery limits apply to messages read back from the spill log: each
// one returned as failed past the limit is dead-lettered, with its body.
func TestSpillDeliveryLimit(t *testing.T) {
	e := newEnv(t, withWindow(1), withSpill(t.TempDir()))
	q := e.queue(t, "q", Quorum, "x-delivery-limit", int64(1)) // durable, but the broker has no store
	publishTransientN(t, e, "q", "m", 100, nil)
	_, _, spilledN := held(q)
	require.Greater(t, spilledN, 90)
	s, c := subscribe(t, q, 10)
	done := 0
	for range 1000 {
		ds := c.all()
		if done == len(ds) {
			break
		}
		for _, dl := range ds[done:] {
			require.NoError(t, s.Settle(dl.Tag, Settlement{Kind: SettleModify, DeliveryFailed: true}))
		}
		done = len(ds)
		s.Flow(uint32(done), 10, false)
	}
	assert.Equal(t, 200, done, "each delivered twice")
	var want []string
	for _, n := range names("m", 1, 100) {
		want = append(want, n+":delivery_limit")
	}
	assert.ElementsMatch(t, want, deadBodies(t, e.dl))
	assert.Zero(t, q.Len())
}

// At start the spill directory is emptied, and what was discarded logged.
func TestSpillDirEmptiedAtStartAndLogged(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, "12-0")
	require.NoError(t, os.MkdirAll(left, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(left, "00000000000000000001.seg"), make([]byte, 1000), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(left, "state"), make([]byte, 24), 0o644))
	var buf syncBuffer
	newEnv(t, withWindow(1), withSpill(dir), func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	})
	assert.Empty(t, spillFiles(t, dir))
	out := buf.String()
	assert.Contains(t, out, "discarded transient messages spilled by the previous run")
	assert.Contains(t, out, "files=2")
	assert.Contains(t, out, "bytes=1024")
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Transient messages published while a deep queue is read back in the
// background are spilled behind every recovered one and delivered after
// them, in order.
func TestSpillWhileDeepQueueReadBack(t *testing.T) {
	old := syncLoadMax
	syncLoadMax = 100
	t.Cleanup(func() { syncLoadMax = old })
	dir, spill := t.TempDir(), t.TempDir()
	d := openDurable(t, dir, withWindow(512), withSpill(spill))
	d.queue(t, "q", Classic)
	publishDurableN(t, d, "q", "m", 3000, nil)
	d.close(t)

	firstChunk, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d2 := openDurable(t, dir, withWindow(512), withSpill(spill), func(o *Options) {
		o.loadHook = func(q *Queue, done bool) {
			once.Do(func() {
				close(firstChunk)
				<-release
			})
		}
	})
	<-firstChunk
	q, ok := d2.v.Queue("q")
	require.True(t, ok)
	publishTransientN(t, d2.env, "q", "t", 500, nil)
	_, _, spilledN := held(q)
	require.Greater(t, spilledN, 400, "transient messages published meanwhile are on disk")
	close(release)
	eventually(t, func() bool { return q.Len() == 3500 }, 20*time.Second, "read back")
	_, _, spilledN = held(q)
	require.Greater(t, spilledN, 400)
	got := drainInSteps(t, q, 3500, 97)
	assert.Equal(t, append(names("m", 1, 3000), names("t", 1, 500)...), got)
	assert.Zero(t, d2.b.UnreadableMessages())
	assert.Empty(t, spillFiles(t, spill))
	d2.close(t)
}

// Spilled messages that expire in the middle of a queue free their
// segments at once; the others are still read back, in order.
func TestSpillExpiryInTheMiddleFreesSegments(t *testing.T) {
	old := spillSegmentSize
	spillSegmentSize = 16 << 10
	t.Cleanup(func() { spillSegmentSize = old })
	clock := newClock()
	dir := t.TempDir()
	e := newEnv(t, withWindow(1), withSpill(dir), withClock(clock), func(o *Options) { o.DeadLetterer = nil })
	q := e.transientQueue(t, "q")
	pad := strings.Repeat("x", 500)
	publishTransientN(t, e, "q", "m", 1500, func(i int, m *Message) {
		*m = *transientMsg(t, fmt.Sprintf("m%d-%s", i, pad), "q")
		if i > 500 && i <= 1000 {
			m.Header.TTL, m.Header.HasTTL = 100, true
		}
	})
	before := len(spillFiles(t, dir))
	require.Greater(t, before, 30)
	clock.Advance(100 * time.Millisecond)
	require.Equal(t, 1000, q.Len())
	eventually(t, func() bool { return len(spillFiles(t, dir)) <= before-10 }, 5*time.Second,
		"segments of the expired messages deleted")
	var want []string
	for i := 1; i <= 1500; i++ {
		if i <= 500 || i > 1000 {
			want = append(want, fmt.Sprintf("m%d-%s", i, pad))
		}
	}
	assert.Equal(t, want, drainInSteps(t, q, 1000, 33))
	assert.Zero(t, e.b.UnreadableMessages())
	assert.Empty(t, spillFiles(t, dir))
}
