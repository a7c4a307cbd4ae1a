package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/router/store"
)

// flipNewestWAL flips one byte in the middle of the newest WAL of the store
// in dataDir and returns the file's name.
func flipNewestWAL(t *testing.T, dataDir string) string {
	t.Helper()
	ents, err := os.ReadDir(dataDir)
	require.NoError(t, err)
	var wals []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			wals = append(wals, e.Name())
		}
	}
	require.NotEmpty(t, wals, "no WAL in %s", dataDir)
	slices.Sort(wals)
	name := wals[len(wals)-1]
	path := filepath.Join(dataDir, name)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 10000, "the newest WAL holds the messages")
	b[len(b)/2] ^= 0x20
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return name
}

// publishDurable sends n durable messages to queue "plain", each accepted.
func publishDurable(t *testing.T, addr string, n int) {
	t.Helper()
	conn, err := amqp.Dial(ctxT(t), "amqp://"+addr, nil)
	require.NoError(t, err)
	defer conn.Close()
	snd := sender(t, session(t, conn), "/queues/plain", nil)
	for i := range n {
		st := send(t, snd, durableMsg(fmt.Sprintf("m-%05d", i)))
		require.IsType(t, &amqp.StateAccepted{}, st, "message %d", i)
	}
}

// A broker whose newest WAL has a flipped bit in its middle does not start
// silently short: the command exits with an error naming the file, the
// offset and the salvage option; with --store-recovery salvage it starts and
// serves the messages written before the damage, in order.
func TestCmdRefusesCorruptStoreAndSalvages(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	const n = 400
	p := startDurable(t, dir)
	publishDurable(t, p.addr, n)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t))
	wal := flipNewestWAL(t, data)

	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, epitaphBin, "--listen", "127.0.0.1:0", "--http-listen", "",
		"--data-dir", data, "--definitions", filepath.Join(dir, "defs.json")).CombinedOutput()
	require.Error(t, err, "epitaph started on a store with a corrupt WAL:\n%s", out)
	require.NoError(t, ctx.Err(), "epitaph did not exit on a corrupt store:\n%s", out)
	for _, want := range []string{"corrupt", wal, "offset", "--store-recovery salvage"} {
		require.Contains(t, string(out), want)
	}
	require.NotContains(t, string(out), "amqp listening")

	p = startDurable(t, dir, "--store-recovery", "salvage")
	require.Contains(t, p.stderr.String(), "store salvage")
	conn, err := amqp.Dial(ctxT(t), "amqp://"+p.addr, nil)
	require.NoError(t, err)
	defer conn.Close()
	rcv := receiver(t, session(t, conn), "/queues/plain", &amqp.ReceiverOptions{Credit: 100})
	got := 0
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		m, err := rcv.Receive(ctx, nil)
		cancel()
		if err != nil {
			break
		}
		require.Equal(t, fmt.Sprintf("m-%05d", got), body(m), "salvage serves the messages before the damage, in order")
		require.NoError(t, rcv.AcceptMessage(ctxT(t), m))
		got++
	}
	require.Greater(t, got, 0)
	require.Less(t, got, n)
	t.Logf("salvage kept %d of %d messages", got, n)
}

// Start reports the damage with an error that wraps store.ErrCorrupt;
// StoreSalvage starts.
func TestStartRefusesCorruptStore(t *testing.T) {
	data := t.TempDir()
	opts := testOptions()
	opts.InMemory, opts.DataDir, opts.DiskFreeLimit = false, data, 0
	opts.Definitions = []byte(durableDefs)
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	publishDurable(t, b.Addr().String(), 300)
	require.NoError(t, b.Close())
	flipNewestWAL(t, data)

	_, err = epitaph.Start(opts)
	require.ErrorIs(t, err, store.ErrCorrupt)

	opts.StoreRecovery = epitaph.StoreSalvage
	b, err = epitaph.Start(opts)
	require.NoError(t, err)
	defer b.Close()
	kept := queueLen(t, b, "plain")
	require.Greater(t, kept, 0)
	require.Less(t, kept, 300)
}
