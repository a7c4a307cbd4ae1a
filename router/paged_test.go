package router

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp091"
	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/value"
)

// withWindow sets the queue window of a durable test broker.
func withWindow(n int64) func(*Options) { return func(o *Options) { o.QueueWindowBytes = n } }

// publishDurableN publishes durable messages prefix1..prefixN to queue q
// and waits until each is accepted (durable).
func publishDurableN(t *testing.T, d *durableEnv, q, prefix string, n int, mod func(i int, m *Message)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		m := durableMsg(t, fmt.Sprintf("%s%d", prefix, i), q)
		if mod != nil {
			mod(i, m)
		}
		wg.Add(1)
		res, err := d.v.Publish(Publish{Msg: m, Confirm: func(o Outcome) {
			assert.Equal(t, Accepted, o.Kind)
			wg.Done()
		}})
		require.NoError(t, err)
		if !res.Pending {
			require.Equal(t, Accepted, res.Outcome.Kind)
			wg.Done()
		}
	}
	wg.Wait()
}

func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func deadBodies(t *testing.T, f *fakeDL) []string {
	var out []string
	for _, d := range f.all() {
		out = append(out, bodyOf(t, &d.Msg)+":"+string(d.Reason))
	}
	return out
}

// pinned counts the paged messages whose entries are still in memory.
func pinned(q *Queue) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, p := range q.paged.pages[q.paged.first:] {
		n += p.npinned
	}
	return n
}

// A durable queue deeper than its window keeps a window of entries and,
// for the rest, index slots only; its consumer gets every message in order,
// before and after a restart.
func TestPagedQueueKeepsIndexOnlyAndDeliversInOrder(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			dir := t.TempDir()
			d := openDurable(t, dir, withWindow(2000))
			q := d.queue(t, "q", typ)
			publishDurableN(t, d, "q", "m", 3000, nil)
			require.Equal(t, 3000, q.Len()) // Len also pages out what became durable
			one := durableMsg(t, "m3000", "q").size()
			q.mu.Lock()
			window, paged := q.main.n, q.paged.n
			windowBytes := q.readyBytes - q.paged.bytes
			q.mu.Unlock()
			assert.LessOrEqual(t, windowBytes, int64(2000+one), "window bytes")
			assert.Equal(t, 3000, window+paged)
			assert.Zero(t, pinned(q), "paged messages still held in memory")

			// Half now, with credit smaller than a refill.
			s, c := subscribe(t, q, 7)
			settled := 0
			for settled < 1500 {
				ds := c.all()
				require.Len(t, ds, settled+7)
				for _, dl := range ds[settled:] {
					require.NoError(t, s.Settle(dl.Tag, Settlement{Kind: SettleAccept}))
				}
				settled = len(ds)
				s.Flow(uint32(settled), 7, false)
			}
			got := bodiesOf(t, c.all())
			require.Equal(t, names("m", 1, len(got)), got)
			s.Cancel(CancelDetach)
			left := 3000 - settled // the unsettled ones went back with the cancel
			d.close(t)

			d2 := openDurable(t, dir, withWindow(2000))
			q2, ok := d2.v.Queue("q")
			require.True(t, ok)
			require.Equal(t, left, q2.Len())
			q2.mu.Lock()
			windowBytes = q2.readyBytes - q2.paged.bytes
			q2.mu.Unlock()
			assert.LessOrEqual(t, windowBytes, int64(2000+one), "window bytes after a restart")
			assert.Zero(t, pinned(q2))
			_, c2 := subscribe(t, q2, 5000)
			assert.Equal(t, names("m", settled+1, 3000), bodiesOf(t, c2.all()))
			d2.close(t)
		})
	}
}

// A paged message expires at its deadline wherever it is, without its
// body being read to find it, and is dead-lettered with its body.
func TestPagedTTLExpiresInAnyPosition(t *testing.T) {
	clock := newClock()
	d := openDurable(t, t.TempDir(), withWindow(1), withClock(clock))
	q := d.queue(t, "q", Classic)
	publishDurableN(t, d, "q", "m", 300, func(i int, m *Message) {
		if i%3 == 0 {
			m.Header.TTL, m.Header.HasTTL = 100, true
		}
	})
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
	assert.Equal(t, want, deadBodies(t, d.dl))
	_, c := subscribe(t, q, 1000)
	assert.Equal(t, keep, bodiesOf(t, c.all()))
}

// Without a dead-letterer an expired paged message is only settled in the
// store: nothing is read back.
func TestPagedTTLWithoutDeadLettererSettles(t *testing.T) {
	clock := newClock()
	d := openDurable(t, t.TempDir(), withWindow(1), withClock(clock), func(o *Options) { o.DeadLetterer = nil })
	q := d.queue(t, "q", Quorum, "x-message-ttl", int64(50))
	publishDurableN(t, d, "q", "m", 100, nil)
	clock.Advance(50 * time.Millisecond)
	require.Zero(t, q.Len())
	eventually(t, func() bool {
		n := 0
		require.NoError(t, d.st.Iterate(q.id, func(uint64, []byte, []byte) error { n++; return nil }))
		return n == 0
	}, 5*time.Second, "expired messages settled in the store")
}

func TestPagedOverflow(t *testing.T) {
	t.Run("drop-head", func(t *testing.T) {
		d := openDurable(t, t.TempDir(), withWindow(1))
		q := d.queue(t, "q", Classic, "x-max-length", int64(50))
		publishDurableN(t, d, "q", "m", 200, nil)
		require.Equal(t, 50, q.Len())
		var want []string
		for _, n := range names("m", 1, 150) {
			want = append(want, n+":maxlen")
		}
		assert.Equal(t, want, deadBodies(t, d.dl))
		_, c := subscribe(t, q, 100)
		assert.Equal(t, names("m", 151, 200), bodiesOf(t, c.all()))
	})
	t.Run("max-length-bytes", func(t *testing.T) {
		d := openDurable(t, t.TempDir(), withWindow(1))
		one := int64(durableMsg(t, "m100", "q").size())
		q := d.queue(t, "q", Quorum, "x-max-length-bytes", 20*one)
		publishDurableN(t, d, "q", "m", 139, nil)
		assert.LessOrEqual(t, q.Info().MessageBytes, 20*one)
		_, c := subscribe(t, q, 100)
		got := bodiesOf(t, c.all())
		require.NotEmpty(t, got)
		assert.Equal(t, names("m", 140-len(got), 139), got, "the newest messages within the limit")
		assert.GreaterOrEqual(t, len(got), 19)
		assert.Len(t, d.dl.all(), 139-len(got))
	})
	for _, ov := range []string{"reject-publish", "reject-publish-dlx"} {
		t.Run(ov, func(t *testing.T) {
			d := openDurable(t, t.TempDir(), withWindow(1))
			q := d.queue(t, "q", Classic, "x-max-length", int64(100), "x-overflow", ov)
			publishDurableN(t, d, "q", "m", 100, nil)
			res, err := d.v.Publish(Publish{Msg: durableMsg(t, "over", "q"), Confirm: func(Outcome) {}})
			require.NoError(t, err)
			require.Equal(t, Rejected, res.Outcome.Kind)
			if ov == "reject-publish-dlx" {
				assert.Equal(t, []string{"over:maxlen"}, deadBodies(t, d.dl))
			}
			_, c := subscribe(t, q, 200)
			assert.Equal(t, names("m", 1, 100), bodiesOf(t, c.all()))
		})
	}
}

// Peek reads paged messages at their positions and changes nothing.
func TestPagedPeek(t *testing.T) {
	d := openDurable(t, t.TempDir(), withWindow(1))
	q := d.queue(t, "q", Quorum)
	publishDurableN(t, d, "q", "m", 100, nil)
	require.Equal(t, 100, q.Len())
	ps := q.Peek(60)
	require.Len(t, ps, 60)
	for i, p := range ps {
		assert.Equal(t, fmt.Sprintf("m%d", i+1), bodyOf(t, p.Msg), i)
		assert.Equal(t, 100-i-1, p.Remaining)
	}
	assert.Equal(t, 100, q.Len())
	_, c := subscribe(t, q, 200)
	assert.Equal(t, names("m", 1, 100), bodiesOf(t, c.all()))
}

// Purge removes the paged messages from the store at once.
func TestPagedPurgeFreesStore(t *testing.T) {
	d := openDurable(t, t.TempDir(), withWindow(1))
	q := d.queue(t, "q", Classic)
	publishDurableN(t, d, "q", "m", 500, nil)
	require.Equal(t, 500, q.Purge())
	require.Zero(t, q.Len())
	eventually(t, func() bool {
		n := 0
		require.NoError(t, d.st.Iterate(q.id, func(uint64, []byte, []byte) error { n++; return nil }))
		return n == 0
	}, 5*time.Second, "purged messages still stored")
	publishDurableN(t, d, "q", "n", 3, nil)
	_, c := subscribe(t, q, 10)
	assert.Equal(t, names("n", 1, 3), bodiesOf(t, c.all()))
}

// A paged message the store cannot give back is reported (log, counter)
// and the queue goes on with the others.
func TestPagedUnreadableMessageReported(t *testing.T) {
	d := openDurable(t, t.TempDir(), withWindow(1))
	q := d.queue(t, "q", Classic)
	publishDurableN(t, d, "q", "m", 10, nil)
	require.Equal(t, 10, q.Len())
	done := make(chan error, 1)
	d.st.Settle(q.id, []uint64{5}, func(err error) { done <- err }) // lost behind the queue's back
	require.NoError(t, <-done)
	_, c := subscribe(t, q, 20)
	assert.Equal(t, []string{"m1", "m2", "m3", "m4", "m6", "m7", "m8", "m9", "m10"}, bodiesOf(t, c.all()))
	assert.Equal(t, int64(1), d.b.UnreadableMessages())
	assert.Zero(t, q.Len())
	assert.Zero(t, q.Info().MessageBytes)
}

// A classic requeue of a message read back from the store returns it to
// its position, ahead of the paged messages.
func TestPagedClassicRequeueKeepsOrder(t *testing.T) {
	d := openDurable(t, t.TempDir(), withWindow(1))
	q := d.queue(t, "q", Classic)
	publishDurableN(t, d, "q", "m", 300, nil)
	s, c := subscribe(t, q, 3)
	ds := c.all()
	require.Equal(t, []string{"m1", "m2", "m3"}, bodiesOf(t, ds))
	require.NoError(t, s.Settle(ds[1].Tag, Settlement{Kind: SettleRelease}))
	require.NoError(t, s.Settle(ds[0].Tag, Settlement{Kind: SettleAccept}))
	require.NoError(t, s.Settle(ds[2].Tag, Settlement{Kind: SettleAccept}))
	_, c2 := subscribe(t, q, 1000)
	assert.Equal(t, append([]string{"m2"}, names("m", 4, 300)...), bodiesOf(t, c2.all()))
}

// The index of a paged message costs at most 40 bytes of heap (with a TTL,
// the worst case), measured over a million of them.
func TestPagedIndexHeapPerMessage(t *testing.T) {
	const n = 1_000_000
	var l pagedList
	m := &Message{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range uint64(n) {
		e := &entry{msg: m, seq: i + 1, deadline: int64(i) + 1e18, heapIdx: -1, stored: true}
		l.push(e)
		if i%pageSlots == pageSlots-1 {
			l.pageOut(i+1, func(uint64) bool { return false })
		}
	}
	l.pageOut(n, func(uint64) bool { return false })
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMsg := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.1f bytes of heap per paged message", perMsg)
	assert.LessOrEqual(t, perMsg, 40.0)
	require.Equal(t, n, l.n)
	runtime.KeepAlive(&l)
}

var _ store.Store = (*store.Pebble)(nil)

// A deep queue is read back after Recover returns: its first messages are
// delivered while the rest is still being read, messages published
// meanwhile come after every recovered one, and nothing is lost or doubled.
func TestDeepQueueReadBackInBackground(t *testing.T) {
	old := syncLoadMax
	syncLoadMax = 100
	t.Cleanup(func() { syncLoadMax = old })
	dir := t.TempDir()
	d := openDurable(t, dir, withWindow(512))
	d.queue(t, "q", Classic)
	publishDurableN(t, d, "q", "m", 3000, nil)
	d.close(t)

	firstChunk, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d2 := openDurable(t, dir, withWindow(512), func(o *Options) {
		o.loadHook = func(q *Queue, done bool) {
			once.Do(func() {
				close(firstChunk)
				<-release
			})
		}
	})
	<-firstChunk // Recover has returned; the loader holds after its first chunk
	q, ok := d2.v.Queue("q")
	require.True(t, ok)
	require.Equal(t, loadChunk, q.Len(), "read back so far")
	s, c := subscribe(t, q, 10)
	assert.Equal(t, names("m", 1, 10), bodiesOf(t, c.all()))
	publishDurableN(t, d2, "q", "n", 5, nil)
	close(release)
	s.Flow(10, 5000, false)
	eventually(t, func() bool { return c.n() == 3005 }, 20*time.Second, "all delivered")
	assert.Equal(t, append(names("m", 1, 3000), names("n", 1, 5)...), bodiesOf(t, c.all()))
	assert.Zero(t, q.Len())
	d2.close(t)
}

// A consumer waiting on a deep queue while it is read back gets what the
// loader reads, decoded once, instead of index slots that a refill reads
// again; order holds across the fed messages and the indexed ones, in a
// queue with priority levels too.
func TestDeepQueueLoaderFeedsWaitingConsumers(t *testing.T) {
	old := syncLoadMax
	syncLoadMax = 100
	t.Cleanup(func() { syncLoadMax = old })
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			dir := t.TempDir()
			d := openDurable(t, dir, withWindow(64<<10))
			d.queue(t, "q", typ)
			publishDurableN(t, d, "q", "m", 5000, nil)
			d.close(t)

			firstChunk, release := make(chan struct{}), make(chan struct{})
			loaded := make(chan struct{})
			var once sync.Once
			d2 := openDurable(t, dir, withWindow(64<<10), func(o *Options) {
				o.loadHook = func(q *Queue, done bool) {
					once.Do(func() {
						close(firstChunk)
						<-release
					})
					if done {
						close(loaded)
					}
				}
			})
			<-firstChunk
			q, ok := d2.v.Queue("q")
			require.True(t, ok)
			s, c := subscribe(t, q, 10000)
			close(release)
			eventually(t, func() bool { return c.n() == 5000 }, 20*time.Second, "all delivered")
			<-loaded
			assert.Equal(t, names("m", 1, 5000), bodiesOf(t, c.all()))
			q.mu.Lock()
			fed := q.loadFed
			q.mu.Unlock()
			assert.Positive(t, fed, "the loader fed the waiting consumer")
			for _, dl := range c.all() {
				require.NoError(t, s.Settle(dl.Tag, Settlement{Kind: SettleAccept}))
			}
			assert.Zero(t, q.Len())
			d2.close(t)
		})
	}
}

// A queue read back after a restart keeps only index slots for the
// messages behind its window, whichever way it was read (before Recover
// returned, or in the background).
func TestRecoveredMessagesPagedOut(t *testing.T) {
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", deep), func(t *testing.T) {
			if deep {
				old := syncLoadMax
				syncLoadMax = 100
				t.Cleanup(func() { syncLoadMax = old })
			}
			dir := t.TempDir()
			d := openDurable(t, dir, withWindow(512))
			d.queue(t, "q", Quorum)
			publishDurableN(t, d, "q", "m", 3000, nil)
			d.close(t)
			loaded := make(chan struct{})
			d2 := openDurable(t, dir, withWindow(512), func(o *Options) {
				o.loadHook = func(_ *Queue, done bool) {
					if done {
						close(loaded)
					}
				}
			})
			if deep {
				<-loaded
			}
			q, _ := d2.v.Queue("q")
			require.Equal(t, 3000, q.Len())
			assert.Zero(t, pinned(q), "recovered messages still held in memory")
			_, c := subscribe(t, q, 5000)
			assert.Equal(t, names("m", 1, 3000), bodiesOf(t, c.all()))
			d2.close(t)
		})
	}
}

// A bit flip in a table of the store (bodies kept in Pebble) or in a
// segment of a queue log, found when a deep queue is read back: the
// messages of the damaged block or frame are reported (log, counter) and
// every other message of that queue, and the other queue, is served.
func TestDamagedTableReportedOtherMessagesServed(t *testing.T) {
	t.Run("table", func(t *testing.T) { testDamagedStoreFile(t, false) })
	t.Run("queue-log", func(t *testing.T) { testDamagedStoreFile(t, true) })
}

func testDamagedStoreFile(t *testing.T, logs bool) {
	old := syncLoadMax
	syncLoadMax = 100
	t.Cleanup(func() { syncLoadMax = old })
	dir := t.TempDir()
	opts := store.PebbleOptions{MemTableSize: 256 << 10}
	if logs {
		opts.BodyDir = filepath.Join(dir, "queues")
	}
	open := func() *durableEnv {
		st, err := store.OpenPebble(dir, opts)
		require.NoError(t, err)
		e := newEnv(t, func(o *Options) { o.Store, o.QueueWindowBytes = st, 4096 })
		require.NoError(t, e.b.Recover())
		t.Cleanup(func() { _ = st.Close() })
		return &durableEnv{env: e, dir: dir, st: st}
	}
	d := open()
	d.queue(t, "a", Classic)
	d.queue(t, "b", Classic)
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(int) string { // incompressible, so that a block holds few messages
		b := make([]byte, 1024)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	for _, q := range []string{"a", "b"} {
		for i := 1; i <= 1000; i++ {
			m := durableMsg(t, fmt.Sprintf("%s%d:%s", q, i, noise(i)), q)
			require.Equal(t, Accepted, d.publish(t, "", m))
		}
	}
	d.close(t)
	// Flip a bit in the middle of the largest table (a data block of
	// messages: the metadata sorts first, the index blocks last), or of
	// the largest queue log segment.
	pattern := filepath.Join(dir, "*.sst")
	if logs {
		pattern = filepath.Join(opts.BodyDir, "*", "*.seg")
	}
	ssts, err := filepath.Glob(pattern)
	require.NoError(t, err)
	require.NotEmpty(t, ssts)
	var largest string
	var size int64
	for _, f := range ssts {
		if fi, err := os.Stat(f); err == nil && fi.Size() > size {
			largest, size = f, fi.Size()
		}
	}
	raw, err := os.ReadFile(largest)
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0x10
	require.NoError(t, os.WriteFile(largest, raw, 0o600))

	loaded := make(chan struct{}, 2)
	d2 := func() *durableEnv {
		st, err := store.OpenPebble(dir, opts)
		require.NoError(t, err)
		e := newEnv(t, func(o *Options) {
			o.Store, o.QueueWindowBytes = st, 4096
			o.loadHook = func(_ *Queue, done bool) {
				if done {
					loaded <- struct{}{}
				}
			}
		})
		require.NoError(t, e.b.Recover(), "a damaged block of a deep queue does not stop the start")
		t.Cleanup(func() { e.b.Close(); _ = st.Close() })
		return &durableEnv{env: e, dir: dir, st: st}
	}()
	<-loaded
	<-loaded
	lost := d2.b.UnreadableMessages()
	require.Positive(t, lost, "the damaged block was not reported")
	missing, whole := 0, 0
	for _, name := range []string{"a", "b"} {
		q, _ := d2.v.Queue(name)
		_, c := subscribe(t, q, 2000)
		var got []string
		for _, b := range bodiesOf(t, c.all()) {
			got = append(got, b[:strings.IndexByte(b, ':')])
		}
		missing += 1000 - len(got)
		if len(got) == 1000 {
			whole++
		}
		assert.True(t, slices.IsSortedFunc(got, func(x, y string) int {
			nx, _ := strconv.Atoi(x[1:])
			ny, _ := strconv.Atoi(y[1:])
			return nx - ny
		}), "%s in order", name)
		assert.Zero(t, q.Len())
	}
	assert.Equal(t, int(lost), missing, "each message not served was reported")
	assert.Equal(t, 1, whole, "the other queue is served whole")
}

// storedIndex reads what a stored record decodes to (its size, its
// priority and whether its publisher set one) without decoding it, in both
// stored formats.
func TestStoredIndexFieldsMatchDecoded(t *testing.T) {
	ms := []*Message{durableMsg(t, "x", "q"), durableMsg(t, strings.Repeat("y", 5000), "q"), msg("bare only", "q"),
		wireMsg(t, nil, nil, "q"), durablePrioMsg(t, "p7", 7, "q"), durablePrioMsg(t, "p4", 4, "q"),
		prioMsg("p0", 0, "q"),
		new091(t, amqp091.Properties{}, "plain 0-9-1"),
		new091(t, amqp091.Properties{Flags: amqp091.FlagPriority | amqp091.FlagDeliveryMode, Priority: 9, DeliveryMode: 2}, "p9"),
		new091(t, amqp091.Properties{Flags: amqp091.FlagContentType | amqp091.FlagHeaders, ContentType: "text/plain",
			Headers: amqp091.Table{{Key: "k", Value: "v"}}}, strings.Repeat("z", 3000)),
	}
	for i, m := range ms {
		enc, err := encodeMessage(m)
		require.NoError(t, err)
		f, err := storedIndex(enc)
		require.NoError(t, err)
		dec, err := decodeMessage(enc)
		require.NoError(t, err)
		assert.Equal(t, int64(dec.size()), f.size, i)
		assert.Equal(t, int64(m.size()), f.size, i)
		assert.Equal(t, dec.Header.Priority, f.prio, i)
		assert.Equal(t, prioritySet(dec), f.prioSet, i)
	}
	for _, bad := range [][]byte{{msgAMQP10, 0x00}, {msgAMQP091, 1, 4}, {msgAMQP091, 1, 4, 0, 0, 1, 0x80}, {9}, nil} {
		_, err := storedIndex(bad)
		require.ErrorIs(t, err, errCorrupt, "%x", bad)
	}
}

// FuzzDecodeStored: a stored message record, however damaged, decodes or
// fails with errCorrupt, and the fields recovery reads without decoding
// agree with the decoded message.
func FuzzDecodeStored(f *testing.F) {
	for _, m := range []*Message{msg("body", "q"), prioMsg("p", 3, "q")} {
		enc, err := encodeMessage(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	c, err := NewAMQP091(amqp091.Properties{Flags: amqp091.FlagPriority, Priority: 2}, nil, []byte("091"))
	if err != nil {
		f.Fatal(err)
	}
	enc, err := encodeMessage(NewMessage(c))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		f, indexErr := storedIndex(data)
		m, err := decodeMessage(data)
		if err != nil {
			require.ErrorIs(t, err, errCorrupt)
			return
		}
		require.NoError(t, indexErr)
		assert.Equal(t, int64(m.size()), f.size)
		assert.Equal(t, m.Header.Priority, f.prio)
		assert.Equal(t, prioritySet(m), f.prioSet)
	})
}

// suffixFilter matches messages whose encoded bare message ends with
// suffix (the AMQP value body of durableMsg ends with its text).
type suffixFilter struct{ suffix string }

func (f suffixFilter) Match(m *Message, _ value.Map) bool {
	return strings.HasSuffix(string(m.Container.(AMQP10).Wire.Bare()), f.suffix)
}

// A filtered consumer finds a match behind the window: the messages it
// passes over in the window must not keep the paged rest from it.
func TestPagedFilteredConsumerReachesBehindTheWindow(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			d := openDurable(t, t.TempDir(), withWindow(2000))
			q := d.queue(t, "q", typ)
			publishDurableN(t, d, "q", "m", 3000, nil)
			require.Equal(t, 3000, q.Len())
			q.mu.Lock()
			paged := q.paged.n
			q.mu.Unlock()
			require.Greater(t, paged, 2000, "most messages are paged out")

			_, fc := subscribeFiltered(t, q, suffixFilter{"m2999"}, 10)
			eventually(t, func() bool { return len(fc.all()) == 1 }, 10*time.Second, "the match behind the window is delivered")
			require.Equal(t, 2999, q.Len(), "the others stay")

			_, c := subscribe(t, q, 5000)
			eventually(t, func() bool { return len(c.all()) == 2999 }, 10*time.Second)
			got := bodiesOf(t, c.all())
			want := names("m", 1, 3000)
			want = append(want[:2998], want[2999:]...)
			require.Equal(t, want, got, "in order, without the filtered one")
		})
	}
}

// Peek, browse and redrive's moves reach the paged messages behind the
// window, not only the window.
func TestPagedBrowseAndMoveReachBehindTheWindow(t *testing.T) {
	d := openDurable(t, t.TempDir(), withWindow(2000))
	q := d.queue(t, "q", Classic)
	target := d.queue(t, "target", Classic)
	publishDurableN(t, d, "q", "m", 3000, nil)
	require.Equal(t, 3000, q.Len())
	q.mu.Lock()
	paged := q.paged.n
	q.mu.Unlock()
	require.Greater(t, paged, 2000, "most messages are paged out")

	page, next, depth := q.Browse(2900, 5, 1000, nil)
	require.Equal(t, 3000, depth)
	require.Equal(t, 2905, next)
	require.Len(t, page, 5)
	for k, bm := range page {
		require.Equal(t, 2900+k, bm.Position)
		require.Equal(t, uint64(2901+k), bm.Seq)
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
	require.Len(t, seqs, 3000, "a walk by seq sees every message once")
	require.True(t, slices.IsSorted(seqs))

	moved := make(chan error, 1)
	q.MoveReady(2999, page[0].Msg, []*Queue{target}, "", nil, func(res MoveResult, err error) {
		if err == nil && !res.Moved {
			err = ErrNotReady
		}
		moved <- err
	})
	require.NoError(t, <-moved)
	require.Equal(t, 2999, q.Len())
	require.Equal(t, 1, target.Len())
}
