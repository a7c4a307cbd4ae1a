package perf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// The idle scenario opens many connections that each begin one session and
// then stay silent, and reports how much the broker's resident memory grew
// per connection.
const (
	// DefaultIdleConnections is the idle scenario's default -connections.
	DefaultIdleConnections = 10000
	// idleParallel bounds the connections being opened (or checked, or
	// closed) at once.
	idleParallel = 64
	// idleFDMargin is what the process needs besides one file descriptor
	// per connection: stdio, the epoll descriptor, the final check.
	idleFDMargin = 32
	// idleReadBuf is an idle connection's read buffer: it only ever reads
	// the handshake, heartbeats and a close.
	idleReadBuf = 512
	// idleHandshakeTimeout bounds one connection's TCP connect, SASL, open
	// and begin.
	idleHandshakeTimeout = 30 * time.Second
	// idleCheckWait is how long the liveness check waits for input on a
	// connection the broker has not closed.
	idleCheckWait = 10 * time.Millisecond
	// idleMaxFailures stops opening connections after this many failed.
	idleMaxFailures = 100
)

// ErrFileLimit is wrapped by the error of an idle run that asks for more
// connections than the process may open file descriptors.
var ErrFileLimit = errors.New("file descriptor limit too low")

// RaiseFileLimit raises this process's RLIMIT_NOFILE soft limit to its
// hard limit and returns both. Go 1.19 and later already do this at
// start-up on Linux; calling it keeps the idle scenario's need explicit.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0, 0, fmt.Errorf("setrlimit(RLIMIT_NOFILE, %d): %w", rl.Max, err)
		}
	}
	return rl.Cur, rl.Max, nil
}

// idleConn is one open, silent connection.
type idleConn struct {
	nc net.Conn
	fr *FrameReader // small: only the handshake and the liveness check read
}

// idleSet holds the open connections and keeps them alive: one goroutine
// writes an empty frame on every connection at half the broker's advertised
// idle-time-out (2.4.5), so the broker does not close them as idle.
type idleSet struct {
	mu    sync.Mutex
	conns []*idleConn

	once     sync.Once
	known    chan struct{} // closed once interval is set
	interval time.Duration // 0: the broker needs no keepalive

	frames     atomic.Uint64 // keepalive frames written
	writeFails atomic.Uint64
}

func (s *idleSet) add(c *idleConn, remoteIdle uint32) {
	s.once.Do(func() {
		s.interval = time.Duration(remoteIdle) * time.Millisecond / 2
		close(s.known)
	})
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
}

func (s *idleSet) snapshot() []*idleConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[:len(s.conns):len(s.conns)]
}

// keepalive runs until stop is closed.
func (s *idleSet) keepalive(stop <-chan struct{}) {
	select {
	case <-s.known:
	case <-stop:
		return
	}
	if s.interval <= 0 {
		return
	}
	t := time.NewTicker(s.interval)
	defer t.Stop()
	hb := amqp10.AppendHeartbeat(nil)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, c := range s.snapshot() {
			select {
			case <-stop:
				return
			default:
			}
			err := c.nc.SetWriteDeadline(time.Now().Add(time.Second))
			if err == nil {
				_, err = c.nc.Write(hb)
			}
			if err != nil {
				s.writeFails.Add(1)
				continue
			}
			s.frames.Add(1)
		}
	}
}

// dialIdle connects, authenticates, opens (advertising no idle-time-out,
// so the broker heartbeats at its own pace and we need not read) and
// begins one session. It returns the broker's advertised idle-time-out.
func dialIdle(ctx context.Context, u *url.URL, sasl string) (*idleConn, uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, idleHandshakeTimeout)
	defer cancel()
	nc, err := dialTCP(ctx, u)
	if err != nil {
		return nil, 0, err
	}
	dl, _ := ctx.Deadline()
	if err := nc.SetDeadline(dl); err != nil {
		nc.Close()
		return nil, 0, err
	}
	fc := &fastConn{nc: nc, fr: &FrameReader{R: bufio.NewReaderSize(nc, idleReadBuf)}}
	if err := fc.handshake(u, sasl, 0); err != nil {
		nc.Close()
		return nil, 0, err
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		nc.Close()
		return nil, 0, err
	}
	return &idleConn{nc: nc, fr: fc.fr}, fc.remoteIdle, nil
}

// check reports whether the broker closed c: it reads what arrived since
// the handshake, waiting at most idleCheckWait for more. Heartbeats are
// fine; a close frame or the end of the stream is not.
func (c *idleConn) check() error {
	if err := c.nc.SetReadDeadline(time.Now().Add(idleCheckWait)); err != nil {
		return err
	}
	for {
		_, body, err := c.fr.ReadFrame()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil // still open, nothing more to read
		}
		if err != nil {
			return err
		}
		if len(body) == 0 {
			continue // heartbeat
		}
		if code, err := amqp10.PeekDescriptor(body); err == nil && code == amqp10.DescClose {
			var cl amqp10.Close
			_, _ = cl.Unmarshal(body)
			return fmt.Errorf("%w: %v", ErrBrokerClosed, cl.Error)
		}
	}
}

// close sends close and closes the socket without waiting for the reply.
func (c *idleConn) close() {
	if c.nc.SetWriteDeadline(time.Now().Add(time.Second)) == nil {
		_, _ = c.nc.Write(amqp10.AppendFrame(nil, amqp10.FrameTypeAMQP, 0, &amqp10.Close{}, nil))
	}
	c.nc.Close()
}

// parallel calls f(i) for i in [0, n) on at most p goroutines, stopping
// early when stop returns true.
func parallel(n, p int, stop func() bool, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(p, n) {
		wg.Go(func() { // exits when the indices run out or stop says so
			for !stop() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// runIdle is the idle scenario (see Config.Connections).
func runIdle(ctx context.Context, cfg Config) (*Result, error) {
	n := cfg.Connections
	if n < 0 {
		return nil, fmt.Errorf("idle: -connections %d: want at least 1", n)
	}
	if n == 0 {
		n = DefaultIdleConnections
	}
	if cfg.BrokerPID <= 0 {
		return nil, errors.New("idle needs -broker-pid: it measures the broker's resident memory")
	}
	if cfg.Engine != "" && cfg.Engine != "fast" {
		return nil, fmt.Errorf("idle opens connections with the fast engine's raw frames; -engine %s is not supported", cfg.Engine)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return nil, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if need := uint64(n) + idleFDMargin; rl.Cur < need {
		return nil, fmt.Errorf("%w: %d connections need about %d file descriptors, but RLIMIT_NOFILE is %d (hard limit %d); raise the hard limit (ulimit -Hn, prlimit, LimitNOFILE=) or ask for fewer -connections",
			ErrFileLimit, n, need, rl.Cur, rl.Max)
	}
	before, err := SampleProc(cfg.BrokerPID)
	if err != nil {
		return nil, fmt.Errorf("broker pid: %w", err)
	}
	selfBefore, _ := SampleProc(os.Getpid())
	res := &Result{Engine: "fast", Scenario: "idle", URL: cfg.URL, Connections: n}

	set := &idleSet{known: make(chan struct{})}
	stopKeepalive := make(chan struct{})
	kaDone := make(chan struct{})
	go func() { // exits when stopKeepalive is closed
		defer close(kaDone)
		set.keepalive(stopKeepalive)
	}()
	var kaOnce sync.Once
	endKeepalive := func() { kaOnce.Do(func() { close(stopKeepalive); <-kaDone }) }
	defer func() { // on every path out: no socket is left open
		endKeepalive()
		parallel(len(set.conns), idleParallel, func() bool { return false }, func(i int) { set.conns[i].close() })
		set.conns = nil
	}()

	var failed atomic.Int64
	var errMu sync.Mutex
	var firstErrs []string
	var opened atomic.Int64
	start := time.Now()
	stopProgress := progress(cfg.Progress, func() string {
		return fmt.Sprintf("[idle] %5.1fs opened %d/%d, failed %d", time.Since(start).Seconds(), opened.Load(), n, failed.Load())
	})
	parallel(n, idleParallel, func() bool { return ctx.Err() != nil || failed.Load() >= idleMaxFailures }, func(int) {
		c, remoteIdle, err := dialIdle(ctx, u, cfg.SASL)
		if err != nil {
			if failed.Add(1) <= 3 {
				errMu.Lock()
				firstErrs = append(firstErrs, err.Error())
				errMu.Unlock()
			}
			return
		}
		set.add(c, remoteIdle)
		opened.Add(1)
	})
	openEnd := time.Now()
	stopProgress()
	res.ConnOpened = len(set.snapshot())
	res.ConnFailed = int(failed.Load())
	res.Elapsed = openEnd.Sub(start).Seconds()
	if res.Elapsed > 0 {
		res.ConnRate = float64(res.ConnOpened) / res.Elapsed
	}
	if res.ConnFailed > 0 {
		res.Errors = append(res.Errors, fmt.Sprintf("%d of %d connections failed to open (stopping after %d); first errors: %v",
			res.ConnFailed, n, idleMaxFailures, firstErrs))
	}
	if err := ctx.Err(); err != nil {
		res.Errors = append(res.Errors, "open: "+err.Error())
		return res, nil
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "[idle] %d connections open in %.1fs; settling for %v\n", res.ConnOpened, res.Elapsed, cfg.Settle)
	}

	if cfg.Settle > 0 {
		t := time.NewTimer(cfg.Settle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			res.Errors = append(res.Errors, "settle: "+ctx.Err().Error())
			return res, nil
		}
	}
	after, err := SampleProc(cfg.BrokerPID)
	if err != nil {
		res.Errors = append(res.Errors, "broker pid: "+err.Error())
	} else {
		res.BrokerRSSBefore, res.BrokerRSSAfter = before.RSS, after.RSS
		res.BrokerCPUSeconds = (after.CPU - before.CPU).Seconds()
		if res.ConnOpened > 0 {
			res.BrokerRSSPerConn = float64(after.RSS-before.RSS) / float64(res.ConnOpened)
			res.BrokerRSSPerConnKiB = res.BrokerRSSPerConn / 1024
		}
	}
	if selfAfter, err := SampleProc(os.Getpid()); err == nil && selfBefore.Valid {
		res.ClientCPUSeconds = (selfAfter.CPU - selfBefore.CPU).Seconds()
	}

	// Were they all still open when the memory was sampled?
	endKeepalive()
	conns := set.snapshot()
	var closed atomic.Int64
	var closedErr atomic.Value
	parallel(len(conns), 4*idleParallel, func() bool { return false }, func(i int) {
		if err := conns[i].check(); err != nil {
			closed.Add(1)
			closedErr.CompareAndSwap(nil, err.Error())
		}
	})
	res.KeepaliveFrames = set.frames.Load()
	res.ConnClosedByBroker = int(closed.Load())
	if res.ConnClosedByBroker > 0 {
		res.Errors = append(res.Errors, fmt.Sprintf("%d connections were closed by the broker during the run; first: %v",
			res.ConnClosedByBroker, closedErr.Load()))
	}
	if f := set.writeFails.Load(); f > 0 {
		res.Errors = append(res.Errors, fmt.Sprintf("%d keepalive writes failed", f))
	}

	// Close them all, then check the broker still serves.
	parallel(len(conns), idleParallel, func() bool { return false }, func(i int) { conns[i].close() })
	set.conns = nil
	if err := serves(ctx, u, cfg.SASL); err != nil {
		res.Errors = append(res.Errors, "the broker does not serve a new connection after the idle ones closed: "+err.Error())
		return res, nil
	}
	res.BrokerServesAfter = true
	return res, nil
}

// serves opens and closes one more connection. The broker may still be
// tearing down the connections just closed, and count them against its
// connection limit, so a refusal (close after open) is retried for a while.
func serves(ctx context.Context, u *url.URL, sasl string) error {
	deadline := time.Now().Add(idleHandshakeTimeout)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		c, _, err := dialIdle(ctx, u, sasl)
		if err == nil {
			c.close()
			return nil
		}
		if !errors.Is(err, ErrBrokerClosed) || time.Now().After(deadline) {
			return err
		}
		t.Reset(20 * time.Millisecond) // polling interval
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		}
	}
}
