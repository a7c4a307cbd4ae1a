package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// Resource alarms (issue 5; reliability.md F6, F10): below the free-disk
// limit or above the memory watermark, publishers are flow-blocked (session
// incoming-window 0: a go-amqp Send waits, it gets no error outcome) while
// consumers, on the same session too, keep receiving; publishing resumes on
// its own once the condition clears. The in-process tests drive the
// readings through Options.DiskFree / Options.MemoryUsed; the binary tests
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

// blockedSend sends until one publish stays without an outcome for
// `within` (the publisher is blocked); publishes that went through before
// the client saw the window close must be accepted. It returns the pending
// outcome channel and the bodies that went through.
func blockedSend(t *testing.T, snd *amqp.Sender, prefix string, within time.Duration) (<-chan any, []string) {
	t.Helper()
	var through []string
	// Up to 20: under load the client may send a few more before it reads
	// the flow that closes the window (it failed once at 5).
	for i := range 20 {
		b := fmt.Sprintf("%s-%d", prefix, i)
		ch := pendingSend(snd, durableMsg(b))
		select {
		case out := <-ch:
			require.IsType(t, &amqp.StateAccepted{}, out, "%s went through the closing window", b)
			through = append(through, b)
		case <-time.After(within): // an absence check: no outcome while blocked
			return ch, through
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
		o.DiskFree = func(string) (uint64, error) { return free.Load(), nil }
	})
	declareQueue(t, b, "q", router.Classic, nil)
	alarmScenario(t, b, func(on bool) {
		if on {
			free.Store(1 << 20)
		} else {
			free.Store(1 << 40)
		}
	}, func() bool { return b.Router().Alarms().Disk })
}

func TestAlarmMemoryBlocksPublishersUntilMemoryFalls(t *testing.T) {
	var used atomic.Uint64
	used.Store(1 << 20)
	b := startBroker(t, "", func(o *epitaph.Options) {
		o.InMemory = false
		o.DataDir = t.TempDir()
		o.MemoryHighWatermark = 1 << 30
		o.MemoryUsed = used.Load
	})
	declareQueue(t, b, "q", router.Quorum, nil)
	alarmScenario(t, b, func(on bool) {
		if on {
			used.Store(1 << 31)
		} else {
			used.Store(1 << 20)
		}
	}, func() bool { return b.Router().Alarms().Memory })
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
