package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// startPagingBroker starts a broker with a data directory and a small
// queue window, so that transient messages are paged to disk.
func startPagingBroker(t *testing.T, dir string, window uint64) *epitaph.Broker {
	t.Helper()
	return startBroker(t, "", func(o *epitaph.Options) { o.InMemory, o.DataDir, o.QueueWindowBytes = false, dir, window })
}

func spillDirFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(dir, "transient"), func(path string, d os.DirEntry, err error) error {
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

// A non-durable queue filled over the wire far beyond its window writes
// the transient messages behind it to the data directory and delivers
// every one, in order, to an AMQP 1.0 consumer; drained, the files are
// gone.
func TestTransientMessagesPagedToDisk(t *testing.T) {
	dir := t.TempDir()
	b := startPagingBroker(t, dir, 4096)
	vh := rootVHost(t, b)
	_, _, err := vh.DeclareQueue(router.QueueSpec{Name: "tq", Type: router.Classic})
	require.NoError(t, err)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/tq", nil)
	pad := strings.Repeat("x", 1000)
	const n = 2000
	for i := range n {
		m := msg(fmt.Sprintf("m%d-%s", i, pad)) // not durable: go-amqp's default header
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, m))
	}
	require.Equal(t, n, queueLen(t, b, "tq"))
	require.NotEmpty(t, spillDirFiles(t, dir), "transient messages behind the window are on disk")

	r := receiver(t, s, "/queues/tq", &amqp.ReceiverOptions{Credit: 50})
	for i := range n {
		m := recv(t, r)
		require.Equal(t, fmt.Sprintf("m%d-%s", i, pad), body(m))
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	eventually(t, "queue drained", func() bool { return queueLen(t, b, "tq") == 0 })
	eventually(t, "spill files removed", func() bool { return len(spillDirFiles(t, dir)) == 0 })
}

// Transient messages paged behind the window of a durable queue do not
// come back after a restart (the durable one between them does), and
// files left in the spill directory are discarded at start.
func TestTransientPagedMessagesDiscardedAtRestart(t *testing.T) {
	dir := t.TempDir()
	b := startPagingBroker(t, dir, 1)
	declareQueue(t, b, "dq", router.Classic, nil)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/dq", nil)
	for i := range 300 {
		m := msg(fmt.Sprint("t", i))
		if i == 150 {
			m = msg("durable")
			m.Header = &amqp.MessageHeader{Durable: true}
		}
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, m))
	}
	require.Equal(t, 300, queueLen(t, b, "dq"))
	require.NotEmpty(t, spillDirFiles(t, dir))
	require.NoError(t, b.Close())

	// What a killed broker would leave behind.
	left := filepath.Join(dir, "transient", "7-0")
	require.NoError(t, os.MkdirAll(left, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(left, "00000000000000000001.seg"), make([]byte, 4096), 0o644))

	b = startPagingBroker(t, dir, 1)
	assert.Empty(t, spillDirFiles(t, dir), "the previous run's spill files are discarded")
	require.Equal(t, 1, queueLen(t, b, "dq"))
	r := receiver(t, session(t, dial(t, b, nil)), "/queues/dq", &amqp.ReceiverOptions{Credit: 10})
	assert.Equal(t, "durable", body(recv(t, r)))
}

// A transient message paged behind the window expires at its deadline and
// is dead-lettered, with its body and history, into a durable queue as the
// transient message it was.
func TestTransientPagedMessageExpiresIntoDeadLetterQueue(t *testing.T) {
	dir := t.TempDir()
	b := startPagingBroker(t, dir, 1)
	declareQueue(t, b, "dlq", router.Classic, nil)
	vh := rootVHost(t, b)
	_, _, err := vh.DeclareQueue(router.QueueSpec{Name: "src", Type: router.Classic, Arguments: amqp10.Map{
		{Key: "x-dead-letter-exchange", Value: ""}, {Key: "x-dead-letter-routing-key", Value: "dlq"}}})
	require.NoError(t, err)
	s := session(t, dial(t, b, nil))
	snd := sender(t, s, "/queues/src", nil)
	for i := range 100 {
		m := msg(fmt.Sprint("m", i))
		if i%10 == 9 {
			m.Header = &amqp.MessageHeader{TTL: 200 * time.Millisecond}
		}
		require.IsType(t, &amqp.StateAccepted{}, send(t, snd, m))
	}
	eventually(t, "expired messages dead-lettered", func() bool { return queueLen(t, b, "dlq") == 10 })
	require.Equal(t, 90, queueLen(t, b, "src"))
	r := receiver(t, s, "/queues/dlq", &amqp.ReceiverOptions{Credit: 20})
	for i := range 10 {
		m := recv(t, r)
		assert.Equal(t, fmt.Sprint("m", i*10+9), body(m))
		assert.False(t, m.Header != nil && m.Header.Durable, "still transient")
		assert.Equal(t, "expired", m.Annotations["x-first-death-reason"])
		assert.Equal(t, "src", m.Annotations["x-first-death-queue"])
		require.NotNil(t, m.Annotations["x-opt-deaths"])
		require.NoError(t, r.AcceptMessage(ctxT(t), m))
	}
	rs := receiver(t, s, "/queues/src", &amqp.ReceiverOptions{Credit: 100})
	for i := range 100 {
		if i%10 == 9 {
			continue
		}
		assert.Equal(t, fmt.Sprint("m", i), body(recv(t, rs)))
	}
}
