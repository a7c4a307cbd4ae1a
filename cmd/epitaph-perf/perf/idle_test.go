package perf_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/cmd/epitaph-perf/perf"
)

// startEpitaph starts an in-process broker (so -broker-pid is this test
// process) on a free loopback port.
func startEpitaph(t *testing.T, mod func(*epitaph.Options)) string {
	t.Helper()
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "", true
	mod(&opts)
	b, err := epitaph.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return "amqp://" + b.Addr().String()
}

// The idle scenario against an embedded broker whose idle timeout (300 ms)
// is shorter than the settle time, so the connections survive only if the
// keepalive frames work.
func TestSmokeIdle(t *testing.T) {
	url := startEpitaph(t, func(o *epitaph.Options) { o.IdleTimeout = 300 * time.Millisecond })
	res, err := perf.Run(context.Background(), perf.Config{Scenario: "idle", Engine: "fast", URL: url, Connections: 50,
		BrokerPID: os.Getpid(), Settle: 700 * time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.Connections != 50 || res.ConnOpened != 50 || res.ConnFailed != 0 || res.ConnClosedByBroker != 0 {
		t.Errorf("%+v", res)
	}
	if res.KeepaliveFrames < 50 {
		t.Errorf("keepalive frames %d: want at least one per connection", res.KeepaliveFrames)
	}
	if res.BrokerRSSBefore <= 0 || res.BrokerRSSAfter <= 0 || res.BrokerRSSPerConnKiB != res.BrokerRSSPerConn/1024 {
		t.Errorf("RSS fields: before %d after %d per conn %.0f B %.3f KiB", res.BrokerRSSBefore, res.BrokerRSSAfter,
			res.BrokerRSSPerConn, res.BrokerRSSPerConnKiB)
	}
	if !res.BrokerServesAfter {
		t.Errorf("the broker did not serve a connection after the idle ones closed: %v", res.Errors)
	}
}

// Connections beyond the broker's connection limit are counted as failed
// and make the run fail; the broker still serves afterwards.
func TestSmokeIdleBeyondConnectionLimit(t *testing.T) {
	url := startEpitaph(t, func(o *epitaph.Options) { o.MaxConnections = 10 })
	res, err := perf.Run(context.Background(), perf.Config{Scenario: "idle", URL: url, Connections: 15,
		BrokerPID: os.Getpid(), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed() || res.ConnOpened != 10 || res.ConnFailed != 5 {
		t.Errorf("opened %d failed %d, errors %v", res.ConnOpened, res.ConnFailed, res.Errors)
	}
	if len(res.Errors) == 0 || !strings.Contains(res.Errors[0], "amqp:resource-limit-exceeded") {
		t.Errorf("errors %v: want the broker's resource-limit-exceeded", res.Errors)
	}
	if !res.BrokerServesAfter {
		t.Errorf("the broker did not serve a connection after the idle ones closed: %v", res.Errors)
	}
}

func TestIdleNeedsEnoughFileDescriptors(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	_, err := perf.Run(context.Background(), perf.Config{Scenario: "idle", URL: "amqp://127.0.0.1:1",
		Connections: int(min(rl.Cur, 1<<30)) + 1, BrokerPID: os.Getpid()})
	if !errors.Is(err, perf.ErrFileLimit) {
		t.Errorf("err = %v, want ErrFileLimit", err)
	}
	_, err = perf.Run(context.Background(), perf.Config{Scenario: "idle", URL: "amqp://127.0.0.1:1", Connections: 1})
	if err == nil || !strings.Contains(err.Error(), "-broker-pid") {
		t.Errorf("err = %v, want -broker-pid required", err)
	}
}
