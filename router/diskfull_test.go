package router

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/router/store"
	"github.com/epitaph-mq/epitaph/router/store/storetest"
)

// With the disk full, a durable publish is answered rejected with
// amqp:resource-limit-exceeded (the disk is full) instead of never being
// answered; the failures are logged a bounded number of times; once space
// is freed publishing resumes, and every accepted message is in the store.
func TestDiskFullPublishRejectedWithResourceLimit(t *testing.T) { diskFullPublish(t, 0) }

// TestDiskFullPublishRejectedWithResourceLimitPaged is the same with a
// one-byte queue window: the accepted messages are paged out, the refused
// ones withdrawn from the paged index, and every accepted one is read back
// from the store for the consumer afterwards.
func TestDiskFullPublishRejectedWithResourceLimitPaged(t *testing.T) { diskFullPublish(t, 1) }

func diskFullPublish(t *testing.T, window int64) {
	fs, full, lines := storetest.FullDisk()
	st, err := store.OpenPebble("db", store.PebbleOptions{FS: fs, MemTableSize: 256 << 10, Logger: slog.New(lines)})
	require.NoError(t, err)
	e := newEnv(t, func(o *Options) { o.Store = st; o.Logger = slog.New(lines); o.QueueWindowBytes = window })
	q := e.queue(t, "q", Quorum)
	body := strings.Repeat("x", 4<<10)
	accepted := 0
	publish := func() Outcome {
		got := make(chan Outcome, 1)
		res, err := e.v.Publish(Publish{Exchange: "", Msg: durableMsg(t, body, "q"), Confirm: func(s Outcome) { got <- s }})
		s, pending := res.Outcome, res.Pending
		require.NoError(t, err)
		if pending {
			select {
			case s = <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("a durable publish got no outcome within 20s with the disk full")
			}
		}
		if s.Kind == Accepted {
			accepted++
		}
		return s
	}
	for range 50 {
		require.Equal(t, Accepted, publish().Kind)
	}

	full.On.Store(true)
	before, start := lines.N.Load(), time.Now()
	var rejected Outcome
	for i := 0; i < 10000 && rejected.Kind != Rejected; i++ {
		rejected = publish()
	}
	require.Equal(t, Rejected, rejected.Kind, "10000 publishes of 4 KiB accepted with every flush failing")
	require.Equal(t, CondResourceLimitExceeded, rejected.Error.Condition)
	require.Contains(t, rejected.Error.Description, "disk full")
	for range 50 {
		s := publish()
		require.Equal(t, Rejected, s.Kind)
		require.Equal(t, CondResourceLimitExceeded, s.Error.Condition)
	}
	n, d := lines.N.Load()-before, time.Since(start)
	t.Logf("disk full for %v: %d log lines", d, n)
	require.LessOrEqual(t, float64(n)/d.Seconds(), 10.0, "log lines per second while the disk is full")

	full.On.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for publish().Kind != Accepted {
		require.True(t, time.Now().Before(deadline), "publishes still refused 20s after space was freed")
	}
	for range 20 {
		require.Equal(t, Accepted, publish().Kind)
	}
	eventually(t, func() bool { return q.Len() == accepted }, 5*time.Second, "the queue holds exactly the accepted messages")
	stored := 0
	require.NoError(t, st.Iterate(q.id, func(uint64, []byte, []byte) error { stored++; return nil }))
	require.Equal(t, accepted, stored, "the store holds exactly the accepted messages")
	_, c := subscribe(t, q, uint32(accepted+10))
	require.Equal(t, accepted, c.n(), "every accepted message is delivered")
	require.Zero(t, e.b.UnreadableMessages())
	e.b.Close()
	require.NoError(t, st.Close())
}
