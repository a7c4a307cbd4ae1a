package perf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// The tcp engine of the tcp-latency scenario: raw TCP through a relay
// (epitaph-null -tcp-relay), no AMQP. Each connection sends one role byte
// first, 'P' for the sender and 'C' for the receiver; the relay pairs them
// and copies the sender's bytes to the receiver. Records are the bodies
// the latency scenario publishes (-size bytes, sequence number and
// intended send time first), written back to back.

const (
	tcpRoleProducer = 'P'
	tcpRoleConsumer = 'C'
)

// tcpHost is the host:port of a tcp://host:port or host:port URL.
func tcpHost(raw string) (string, error) {
	if !strings.Contains(raw, "://") {
		raw = "tcp://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "tcp" || u.Hostname() == "" || u.Port() == "" {
		return "", fmt.Errorf("url %q: tcp-latency needs tcp://host:port or host:port", raw)
	}
	return u.Host, nil
}

// dialRelay connects to the relay and sends the role byte.
func dialRelay(ctx context.Context, rawURL string, role byte) (net.Conn, error) {
	host, err := tcpHost(rawURL)
	if err != nil {
		return nil, err
	}
	nc, err := dialTCP(ctx, &url.URL{Host: host})
	if err != nil {
		return nil, fmt.Errorf("tcp relay: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if _, err := nc.Write([]byte{role}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tcp relay: role byte: %w", err)
	}
	return nc, nil
}

// tcpSender writes each record to its connection. There is nothing to
// settle: Wait returns at once and Confirms is empty.
type tcpSender struct {
	nc   net.Conn
	sent atomic.Uint64
}

func newTCPSender(ctx context.Context, rawURL string) (*tcpSender, error) {
	nc, err := dialRelay(ctx, rawURL, tcpRoleProducer)
	if err != nil {
		return nil, err
	}
	return &tcpSender{nc: nc}, nil
}

func (s *tcpSender) Send(_ uint64, body []byte) error {
	if _, err := s.nc.Write(body); err != nil {
		return fmt.Errorf("tcp relay: %w", err)
	}
	s.sent.Add(1)
	return nil
}

func (s *tcpSender) Wait(context.Context) error { return nil }
func (s *tcpSender) Stats() SendStats           { return SendStats{Sent: s.sent.Load()} }
func (s *tcpSender) Confirms() *Histogram       { return &Histogram{} }
func (s *tcpSender) Close() error               { return s.nc.Close() }

// tcpReceiver reads records of a fixed size from its connection and hands
// each to onMsg.
type tcpReceiver struct {
	nc      net.Conn
	done    chan struct{}
	closing atomic.Bool
	err     error // set by the reader before done is closed

	mu    sync.Mutex
	stats RecvStats
}

func newTCPReceiver(ctx context.Context, rawURL string, size int, onMsg func([]byte) bool) (*tcpReceiver, error) {
	nc, err := dialRelay(ctx, rawURL, tcpRoleConsumer)
	if err != nil {
		return nil, err
	}
	r := &tcpReceiver{nc: nc, done: make(chan struct{})}
	go r.read(size, onMsg) // ends when the connection closes (Close, the relay or the deadline)
	return r, nil
}

func (r *tcpReceiver) read(size int, onMsg func([]byte) bool) {
	defer close(r.done)
	br := bufio.NewReaderSize(r.nc, 64<<10)
	rec := make([]byte, size)
	for {
		if _, err := io.ReadFull(br, rec); err != nil {
			// The relay closes the consumer once the sender has closed: EOF
			// at a record boundary is the end of the run (loss shows in the
			// sequence numbers).
			if !errors.Is(err, io.EOF) && !r.closing.Load() {
				r.err = fmt.Errorf("tcp relay: %w", err)
			}
			return
		}
		onMsg(rec)
		r.mu.Lock()
		r.stats.Delivered++
		r.stats.Accepted++
		r.mu.Unlock()
	}
}

func (r *tcpReceiver) Stats() RecvStats { r.mu.Lock(); defer r.mu.Unlock(); return r.stats }

// Close closes the connection and reports a read error other than the
// end of the stream.
func (r *tcpReceiver) Close() error {
	r.closing.Store(true)
	_ = r.nc.Close()
	<-r.done
	return r.err
}
