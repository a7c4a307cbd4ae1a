package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/internal/testhooks"
	"github.com/epitaph-mq/epitaph/router"
)

// Resource alarms (disk and memory): below the free-disk
// limit or above the memory watermark, publishers are flow-blocked (session
// incoming-window 0: a go-amqp Send waits, it gets no error outcome) while
// consumers, on the same session too, keep receiving; publishing resumes on
// its own once the condition clears. The in-process tests drive the
// readings through internal/testhooks.SetAlarms; the binary tests
// set the limits beyond reach (the blocked half only).

// pendingSend publishes m in the background and returns the channel of its
// outcome (an error when the send failed).
func pendingSend(snd *amqp.Sender, m *amqp.Message) <-chan any {
	ch := make(chan any, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := snd.SendWithReceipt(ctx, m, nil)
		if err != nil {
			ch <- err
			return
		}
		st, err := r.Wait(ctx)
		if err != nil {
			ch <- err
			return
		}
		ch <- st
	}()
	return ch
}

// blockedSend sends until one send is not taken for `within` (the
// publisher is blocked). When the alarm fires the session's window stops
// growing rather than dropping to 0 (a peer with transfers in flight
// would see a negative window, which go-amqp wraps around), so up to one
// session window of publishes may still go through: they are sent without
// waiting for each outcome, and each must be accepted. It returns the
// pending outcome channel and the bodies that went through.
func blockedSend(t *testing.T, snd *amqp.Sender, prefix string, within time.Duration) (<-chan any, []string) {
	t.Helper()
	var through []string
	var outcomes []chan any
	for i := range 2048 + 20 {
		b := fmt.Sprintf("%s-%d", prefix, i)
		sent := make(chan struct{})
		out := make(chan any, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := snd.SendWithReceipt(ctx, durableMsg(b), nil)
			if err != nil {
				out <- err
				return
			}
			close(sent)
			st, err := r.Wait(ctx)
			if err != nil {
				out <- err
				return
			}
			out <- st
		}()
		select {
		case <-sent:
			outcomes = append(outcomes, out)
			through = append(through, b)
		case v := <-out:
			if err, failed := v.(error); failed {
				t.Fatalf("%s: %v", b, err)
			}
			// The outcome came as fast as the send: both cases were ready and
			// select took this one. The publish went through.
			settled := make(chan any, 1)
			settled <- v
			outcomes = append(outcomes, settled)
			through = append(through, b)
		case <-time.After(within): // an absence check: not taken while blocked
			for i, ch := range outcomes {
				require.IsType(t, &amqp.StateAccepted{}, <-ch, "%s went through the closing window", through[i])
			}
			return out, through
		}
	}
	t.Fatal("publishing was never blocked")
	return nil, nil
}

// alarmScenario runs the block / drain / resume sequence on queue q of b;
// set turns the alarm condition on or off, active reports the alarm.
func alarmScenario(t *testing.T, b *epitaph.Broker, set func(bool), active func() bool) {
	c := dial(t, b, nil)
	s := session(t, c)
	snd := sender(t, s, "/queues/q", nil)
	var bodies []string
	for i := range 5 {
		bodies = append(bodies, fmt.Sprintf("pre-%d", i))
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, durableMsg(bodies[i])))
	}

	set(true)
	eventually(t, "the alarm", active)
	// A new session begins with incoming-window 0.
	raw := rawDial(t, b)
	raw.open()
	raw.write(0, &amqp10.Begin{NextOutgoingID: 0, IncomingWindow: 1000, OutgoingWindow: 1000, HandleMax: 10})
	bg, _ := expectFrame[*amqp10.Begin](raw)
	assert.Zero(t, bg.IncomingWindow, "a session begun during the alarm has incoming-window 0")

	pending, through := blockedSend(t, snd, "during", 500*time.Millisecond)
	bodies = append(bodies, through...)
	// A second publisher on another connection is blocked as well.
	other := sender(t, session(t, dial(t, b, nil)), "/queues/q", nil)
	pending2 := pendingSend(other, durableMsg("other"))

	// The consumer on the same session drains while publishers are blocked.
	r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 50})
	for _, want := range bodies {
		m := recv(t, r)
		assert.Equal(t, want, body(m))
		accept(t, r, m)
	}
	for _, ch := range []<-chan any{pending, pending2} {
		select {
		case out := <-ch:
			t.Fatalf("a publish completed during the alarm: %v", out)
		default:
		}
	}
	assert.True(t, active(), "still blocked")

	// The condition clears: publishing resumes by itself, with accepted.
	set(false)
	for i, ch := range []<-chan any{pending, pending2} {
		select {
		case out := <-ch:
			assert.IsType(t, &amqp.StateAccepted{}, out, "blocked publish %d", i)
		case <-time.After(15 * time.Second):
			t.Fatalf("blocked publish %d did not resume", i)
		}
	}
	assert.False(t, active())
	f, _ := expectFrame[*amqp10.Flow](raw)
	assert.Positive(t, f.IncomingWindow, "the window reopens")
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, durableMsg("after")))
	got := map[string]bool{}
	for range 3 {
		m := recv(t, r)
		got[body(m)] = true
		accept(t, r, m)
	}
	assert.Len(t, got, 3, "the blocked publishes and the later one are delivered: %v", got)
	assert.True(t, got["other"] && got["after"], "%v", got)
}

func TestAlarmDiskBlocksPublishersUntilSpaceReturns(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 40)
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.InMemory = false
		o.DataDir = t.TempDir()
		o.DiskFreeLimit = 1 << 30
		testhooks.SetAlarms(o, testhooks.Alarms{DiskFree: func(string) (uint64, error) { return free.Load(), nil }})
	})
	declareQueue(t, b, "q", router.Classic, nil)
	alarmScenario(t, b, func(on bool) {
		if on {
			free.Store(1 << 20)
		} else {
			free.Store(1 << 40)
		}
	}, func() bool { return b.Router().Alarms().State().Disk })
}

func TestAlarmMemoryBlocksPublishersUntilMemoryFalls(t *testing.T) {
	var used atomic.Uint64
	used.Store(1 << 20)
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.InMemory = false
		o.DataDir = t.TempDir()
		o.MemoryHighWatermark = 1 << 30
		testhooks.SetAlarms(o, testhooks.Alarms{MemoryUsed: used.Load})
	})
	declareQueue(t, b, "q", router.Quorum, nil)
	alarmScenario(t, b, func(on bool) {
		if on {
			used.Store(1 << 31)
		} else {
			used.Store(1 << 20)
		}
	}, func() bool { return b.Router().Alarms().State().Memory })
}

// The built broker with a limit it cannot satisfy (free disk below 2^64-1
// bytes; memory above 1 byte): publishers are blocked from the start while
// a consumer drains what the previous run stored.
func TestAlarmBinaryBlockedHalf(t *testing.T) {
	const defs = `{"queues":[{"name":"q","vhost":"/","durable":true,"arguments":{}}]}`
	for _, tc := range []struct{ name, flag, value string }{
		{"disk", "--disk-free-limit", "18446744073709551615"},
		{"memory", "--memory-high-watermark", "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "defs.json")
			require.NoError(t, os.WriteFile(f, []byte(defs), 0o600))
			args := []string{"--listen", "127.0.0.1:0", "--http-listen", "", "--data-dir", filepath.Join(dir, "data"), "--definitions", f}
			p := startEpitaph(t, args...)
			c, err := amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
			require.NoError(t, err)
			publish(t, session(t, c), "/queues/q", durableMsg("m1"), durableMsg("m2"), durableMsg("m3"))
			_ = c.Close()
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
			require.Equal(t, 0, p.wait(t))

			p = startEpitaph(t, append(args, tc.flag, tc.value)...)
			c, err = amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
			require.NoError(t, err)
			defer c.Close()
			s := session(t, c)
			snd := sender(t, s, "/queues/q", nil)
			ch := pendingSend(snd, durableMsg("blocked"))
			r := receiver(t, s, "/queues/q", &amqp.ReceiverOptions{Credit: 10})
			recvBodies(t, r, "m1", "m2", "m3")
			select {
			case out := <-ch:
				t.Fatalf("a publish completed during the alarm: %v", out)
			case <-time.After(500 * time.Millisecond): // an absence check
			}
			assert.NoError(t, c.Err(), "the connection stays up")
		})
	}
}

// processMemory is the memory alarm's reading (the runtime's memory minus
// what it released to the OS), for the in-process broker and the test.
func processMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// floodUntilBlocked publishes size-byte messages pre-settled, as fast as
// go-amqp goes (it respects the session window), until a send waits or
// limit bytes were sent; it returns the count sent so far, live.
func floodUntilBlocked(t *testing.T, c *amqp.Conn, snd *amqp.Sender, size, limit int, durable bool) *atomic.Int64 {
	var sent atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	// A send waiting for the session window returns when the connection
	// closes (go-amqp does not watch its context then).
	t.Cleanup(func() { cancel(); _ = c.Close(); <-done })
	go func() {
		defer close(done)
		m := amqp.NewMessage(make([]byte, size))
		if durable {
			m.Header = &amqp.MessageHeader{Durable: true}
		}
		for sent.Load()*int64(size) < int64(limit) {
			if snd.Send(ctx, m, nil) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	return &sent
}

// settled waits until n stops changing for a while and returns it (the
// publisher is blocked: an absence check, polled).
func settled(t *testing.T, what string, n func() int64) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, since := n(), time.Now()
	for time.Since(since) < 300*time.Millisecond {
		require.True(t, time.Now().Before(deadline), "%s never settled", what)
		time.Sleep(10 * time.Millisecond) // polling interval
		if cur := n(); cur != last {
			last, since = cur, time.Now()
		}
	}
	return last
}

// The memory alarm is checked as publishes consume memory, not only on its
// timer (set to an hour here, so only those checks can fire): a fast
// go-amqp publisher is blocked with the process's memory at most a bounded
// margin above the watermark. The margin covers the check step (a 64th of
// the watermark), what the publisher may have in flight when the window
// stops growing (up to the session window, 2,048 transfers x 8 KiB), and
// garbage not yet collected.
func TestAlarmMemoryBlocksPublisherPromptly(t *testing.T) {
	const (
		size     = 8 << 10
		headroom = 64 << 20
		margin   = 48 << 20
	)
	// Return the heap earlier tests freed to the OS: the reading is then
	// close to the live heap, and grows with what this test publishes
	// rather than reusing freed memory unseen.
	debug.FreeOSMemory()
	watermark := processMemory() + headroom
	b := startBroker(t, `{"queues":[{"name":"fill","vhost":"/","durable":false,"arguments":{}}]}`,
		func(o *epitaph.Options) {
			o.MemoryHighWatermark = watermark
			testhooks.SetAlarms(o, testhooks.Alarms{Interval: time.Hour})
		})
	c := dial(t, b, nil)
	snd := sender(t, session(t, c), "/queues/fill",
		&amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
	const limit = headroom + 4*margin
	sent := floodUntilBlocked(t, c, snd, size, limit, false)
	n := settled(t, "the publisher", sent.Load)
	require.Less(t, n*size, int64(limit), "the publisher was never blocked")
	require.True(t, b.Router().Alarms().State().Memory, "the memory alarm")
	queued := settled(t, "the queue", func() int64 { return int64(queueLen(t, b, "fill")) })
	used := b.Router().Alarms().Check().MemoryUsed
	t.Logf("watermark %d MiB; blocked after %d MiB published; memory %d MiB", watermark>>20, queued*size>>20, used>>20)
	assert.LessOrEqual(t, used, watermark+margin, "memory overshot the watermark")
	assert.LessOrEqual(t, queued*size, int64(headroom+margin), "bytes taken in past the headroom")
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) uint64 {
	var n uint64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
		return nil
	})
	return n
}

// The disk alarm is checked as publishes consume disk, not only on its
// timer (an hour here): a fast go-amqp publisher of durable messages onto a
// small file system (its free space is what the data directory's files
// leave of a fixed capacity) is blocked within a bounded margin past the
// free-disk limit. The alarm fires within a step (a 32nd of the limit) of
// the bytes reaching disk; the margin covers that step, what is then still
// between the publisher and the disk (one session window of 8 KiB
// transfers, 16 MiB, the sockets' buffers and the store's commit queue:
// pre-settled publishes do not wait for the sync), and the store's own
// overhead (a flushed memtable sits beside its log until the log goes):
// 51-70 MiB past the start were seen, against 288 MiB and no block at all
// with the timer alone.
func TestAlarmDiskBlocksPublisherPromptly(t *testing.T) {
	const (
		size     = 8 << 10
		limit    = 8 << 20
		headroom = 32 << 20
		margin   = 64 << 20
	)
	dir := t.TempDir()
	var capacity atomic.Uint64
	b := startBroker(t, `{"queues":[{"name":"fill","vhost":"/","durable":true,"arguments":{}}]}`,
		func(o *epitaph.Options) {
			o.InMemory = false
			o.DataDir = dir
			o.DiskFreeLimit = limit
			testhooks.SetAlarms(o, testhooks.Alarms{Interval: time.Hour, DiskFree: func(d string) (uint64, error) {
				c := capacity.Load()
				if c == 0 {
					return 1 << 40, nil // not yet sized
				}
				return c - min(c, dirBytes(d)), nil
			}})
		})
	start := dirBytes(dir)
	capacity.Store(start + limit + headroom)
	c := dial(t, b, nil)
	snd := sender(t, session(t, c), "/queues/fill",
		&amqp.SenderOptions{SettlementMode: amqp.SenderSettleModeSettled.Ptr()})
	const most = headroom + 4*margin
	sent := floodUntilBlocked(t, c, snd, size, most, true)
	// Until the publisher has sent nothing for a while with the alarm set,
	// sample the disk used. (The alarm may clear and set again meanwhile:
	// the store's disk use drops when a flushed log is deleted.)
	var peak uint64
	deadline := time.Now().Add(30 * time.Second)
	last, since := sent.Load(), time.Now()
	for time.Since(since) < 300*time.Millisecond || !b.Router().Alarms().State().Disk {
		require.True(t, time.Now().Before(deadline), "the publisher was never blocked")
		peak = max(peak, dirBytes(dir)-start)
		time.Sleep(10 * time.Millisecond) // sampling interval
		if cur := sent.Load(); cur != last {
			last, since = cur, time.Now()
		}
	}
	require.Less(t, last*size, int64(most), "the publisher was never blocked")
	peak = max(peak, dirBytes(dir)-start)
	t.Logf("blocked after %d MiB published; the data directory grew by at most %d MiB (headroom %d MiB)",
		last*size>>20, peak>>20, headroom>>20)
	assert.LessOrEqual(t, peak, uint64(headroom+margin), "disk used past the free-disk limit")
}
