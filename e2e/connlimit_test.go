package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/link"
	"github.com/epitaph-mq/epitaph/router"
)

// connectSession dials and begins a session. A connection refused by the
// broker's connection limit is answered with open then close: go-amqp's
// Dial returns once the open arrives, so the refusal may surface only when
// the session is begun. Either way the error returned is the connection's.
func connectSession(ctx context.Context, addr string) (*amqp.Conn, *amqp.Session, error) {
	c, err := amqp.Dial(ctx, addr, nil)
	if err != nil {
		return nil, nil, err
	}
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		if cerr := c.Close(); cerr != nil {
			err = cerr // carries the broker's close
		}
		return nil, nil, err
	}
	return c, s, nil
}

// requireLimitRefusal checks err is the close the connection limit sends.
func requireLimitRefusal(t *testing.T, err error, limit string) {
	t.Helper()
	require.Error(t, err, "a connection beyond the limit was accepted")
	var ce *amqp.ConnError
	require.True(t, errors.As(err, &ce), "want *amqp.ConnError, got %T: %v", err, err)
	require.NotNil(t, ce.RemoteErr, "want the broker's close error, got %v", err)
	assert.Equal(t, amqp.ErrCond("amqp:resource-limit-exceeded"), ce.RemoteErr.Condition)
	assert.Equal(t, "connection limit ("+limit+") reached", ce.RemoteErr.Description)
}

// roundTrip sends body to queue q on s and receives it back.
func roundTrip(t *testing.T, s *amqp.Session, body string) {
	t.Helper()
	snd := sender(t, s, "/queues/q", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, msg(body)))
	r := receiver(t, s, "/queues/q", nil)
	m := recv(t, r)
	require.Equal(t, body, string(m.GetData()))
	require.NoError(t, r.AcceptMessage(ctxT(t), m))
	require.NoError(t, r.Close(ctxT(t)))
}

// With max connections 3, a 4th connection is closed with
// resource-limit-exceeded after open while the 3 keep working; once one of
// them closes, a new connection is accepted.
func TestConnLimit(t *testing.T) {
	b := startBroker(t, oneQueue, func(o *epitaph.Options) { o.MaxConnections = 3 })
	addr := "amqp://" + b.Addr().String()

	var sessions []*amqp.Session
	var conns []*amqp.Conn
	for range 3 {
		c, s, err := connectSession(ctxT(t), addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		conns, sessions = append(conns, c), append(sessions, s)
	}

	for range 3 { // refusals do not use up the limit
		_, _, err := connectSession(ctxT(t), addr)
		requireLimitRefusal(t, err, "3")
	}
	for i, s := range sessions {
		roundTrip(t, s, "still served "+string(rune('a'+i)))
	}

	require.NoError(t, conns[0].Close())
	// The slot frees once the broker has finished with the closed
	// connection's goroutines; poll for it.
	var c *amqp.Conn
	var s *amqp.Session
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		c, s, err = connectSession(ctxT(t), addr)
		if err == nil {
			break
		}
		requireLimitRefusal(t, err, "3")
		if time.Now().After(deadline) {
			t.Fatal("no connection accepted within 10s of closing one of the 3")
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	t.Cleanup(func() { _ = c.Close() })
	roundTrip(t, s, "after a slot freed")

	// Full again.
	_, _, err := connectSession(ctxT(t), addr)
	requireLimitRefusal(t, err, "3")
}

// The binary maps --max-connections through to the server.
func TestConnLimitCmdFlag(t *testing.T) {
	p := startEpitaph(t, "--listen", "127.0.0.1:0", "--in-memory", "--http-listen", "", "--max-connections", "1")
	addr := "amqp://" + p.addr
	c, _, err := connectSession(ctxT(t), addr)
	require.NoError(t, err)
	defer c.Close()
	_, _, err = connectSession(ctxT(t), addr)
	requireLimitRefusal(t, err, "1")
}

// emfileListener fails its first Accepts as a process out of file
// descriptors does.
type emfileListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *emfileListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// Running out of file descriptors does not stop the accept loop: it backs
// off and accepts again once descriptors are free.
func TestConnLimitAcceptBacksOffOnEMFILE(t *testing.T) {
	rt := router.New(router.Options{})
	defer rt.Close()
	users := auth.New(rt)
	users.SeedDefaults() // guest on "/", as epitaph.Start does
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &emfileListener{Listener: ln}
	fl.fails.Store(3)
	srv := link.NewServer(link.Options{Router: rt, Auth: users})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(fl) }() // exits when ln is closed below

	c, err := amqp.Dial(ctxT(t), "amqp://"+ln.Addr().String(), nil)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	require.NoError(t, ln.Close())
	require.NoError(t, srv.Shutdown(ctxT(t)))
	select {
	case err := <-served:
		require.ErrorIs(t, err, link.ErrServerClosed)
	case <-ctxT(t).Done():
		t.Fatal("Serve did not return after the listener closed")
	}
}
