// Package e2e holds black-box tests of the epitaph binary and the module's
// architecture test. TestMain builds ./cmd/epitaph once; each test runs it
// on 127.0.0.1:0 and learns the port from its "amqp listening on" line.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"
)

// listeningPrefix starts the single line cmd/epitaph prints on stdout.
const listeningPrefix = "amqp listening on "

// startTimeout bounds how long a test waits for the listening line, for the
// process to exit, and for a connection to notice the close.
const startTimeout = 30 * time.Second

// epitaphBin is the path of the epitaph executable built by TestMain.
var epitaphBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

// buildAndRun builds ./cmd/epitaph into a temporary directory (with -race
// when this test binary was built with it), runs the tests and cleans up.
func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "epitaph-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	epitaphBin = filepath.Join(dir, "epitaph")
	args := []string{"build", "-o", epitaphBin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/epitaph")
	build := exec.Command("go", args...)
	build.Dir = ".." // the module root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n", strings.Join(args, " "), err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if leaked := brokerGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "e2e: broker goroutines outlived every broker's Close:\n%s\n", leaked)
			code = 1
		}
	}
	return code
}

// brokerGoroutines waits for the in-process brokers' goroutines (every test
// closes its broker) and returns the stacks of any still running.
func brokerGoroutines(within time.Duration) string {
	deadline := time.Now().Add(within)
	for {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "github.com/epitaph-mq/epitaph/") && !strings.Contains(g, "brokerGoroutines") &&
				!strings.Contains(g, "epitaph/e2e.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
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

// proc is a running epitaph process.
type proc struct {
	cmd    *exec.Cmd
	addr   string        // from the listening line
	http   string        // the HTTP API address, when the test asked for it
	stderr *syncBuffer   // logs
	lines  chan string   // stdout lines after the listening line; closed at EOF
	exited chan struct{} // closed once Wait has returned
	err    error         // Wait's result, valid after exited is closed
}

// startEpitaph runs the binary with args and waits, up to startTimeout, for
// the listening line. The process is killed at the end of the test if it is
// still running.
func startEpitaph(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{
		cmd:    exec.Command(epitaphBin, args...),
		stderr: &syncBuffer{},
		lines:  make(chan string, 16),
		exited: make(chan struct{}),
	}
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())

	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		// Wait only after stdout is drained, as os/exec requires.
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("epitaph stderr:\n%s", p.stderr.String())
		}
	})

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	select {
	case line, ok := <-p.lines:
		require.True(t, ok, "epitaph exited before listening; stderr:\n%s", p.stderr.String())
		addr, found := strings.CutPrefix(line, listeningPrefix)
		require.True(t, found, "first stdout line %q does not start with %q", line, listeningPrefix)
		p.addr = addr
	case <-deadline.C:
		t.Fatalf("no %q line within %v; stderr:\n%s", listeningPrefix, startTimeout, p.stderr.String())
	}
	return p
}

// wait waits up to startTimeout for the process to exit and returns its exit
// code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	select {
	case <-p.exited:
	case <-deadline.C:
		t.Fatalf("epitaph did not exit within %v; stderr:\n%s", startTimeout, p.stderr.String())
	}
	var exitErr *exec.ExitError
	if errors.As(p.err, &exitErr) {
		return exitErr.ExitCode()
	}
	require.NoError(t, p.err)
	return p.cmd.ProcessState.ExitCode()
}

func TestCmdServesAndStopsOnSIGTERM(t *testing.T) {
	p := startEpitaph(t, "--listen", "127.0.0.1:0", "--in-memory", "--http-listen", "")
	require.True(t, strings.HasPrefix(p.addr, "127.0.0.1:"), "address %q", p.addr)
	require.NotEqual(t, "127.0.0.1:0", p.addr, "the listening line must show the bound port")

	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	conn, err := amqp.Dial(ctx, "amqp://"+p.addr, nil)
	require.NoError(t, err)
	defer conn.Close()

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t), "exit code after SIGTERM; stderr:\n%s", p.stderr.String())

	// stdout carried nothing but the listening line.
	var rest []string
	for line := range p.lines {
		rest = append(rest, line)
	}
	require.Empty(t, rest, "stdout after the listening line")

	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatal("the client connection was not closed by the broker's shutdown")
	}
	err = conn.Err()
	require.Error(t, err, "the broker should close connections with an error, not silently")
	var connErr *amqp.ConnError
	require.ErrorAs(t, err, &connErr)
	require.NotNil(t, connErr.RemoteErr, "expected a close frame carrying an error, got %v", err)
	require.Equal(t, amqp.ErrCondConnectionForced, connErr.RemoteErr.Condition)
	require.Contains(t, err.Error(), "amqp:connection:forced")
}

func TestCmdSIGINT(t *testing.T) {
	p := startEpitaph(t, "--listen", "127.0.0.1:0", "--in-memory", "--http-listen", "")
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	require.Equal(t, 0, p.wait(t), "exit code after SIGINT")
}

func TestCmdInvalidConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
	}{
		{name: "frame size too small", args: []string{"--max-frame-size", "100"}},
		{name: "frame size not a number", args: []string{"--max-frame-size", "big"}},
		{name: "anonymous", args: []string{"--anonymous", "everyone"}},
		{name: "log level", args: []string{"--log-level", "loud"}},
		{name: "unknown flag", args: []string{"--no-such-flag"}},
		{name: "env", env: []string{"EPITAPH_MAX_FRAME_SIZE=1"}},
		{name: "missing config file", args: []string{"--config", filepath.Join(t.TempDir(), "none.yaml")}},
		{name: "missing definitions", args: []string{"--definitions", filepath.Join(t.TempDir(), "none.json")}},
		{name: "missing TLS certificate", args: []string{"--tls-listen", "127.0.0.1:0",
			"--tls-cert-file", filepath.Join(t.TempDir(), "none.pem"), "--tls-key-file", filepath.Join(t.TempDir(), "none.key")}},
		{name: "no listener at all", args: []string{"--listen", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
			defer cancel()
			args := append([]string{"--listen", "127.0.0.1:0", "--http-listen", ""}, tc.args...)
			cmd := exec.CommandContext(ctx, epitaphBin, args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			require.NoError(t, ctx.Err(), "epitaph did not exit on a bad configuration")
			var exitErr *exec.ExitError
			require.ErrorAs(t, err, &exitErr, "expected a non-zero exit; stderr:\n%s", stderr.String())
			require.NotEqual(t, 0, exitErr.ExitCode())
			require.NotContains(t, stdout.String(), listeningPrefix)
			require.NotEmpty(t, stderr.String(), "the error should be logged")
		})
	}
}

func TestCmdHelp(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, epitaphBin, "--help").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "--max-frame-size")
	require.Contains(t, string(out), "EPITAPH_")
}
