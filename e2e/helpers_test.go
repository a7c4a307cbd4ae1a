package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// startBroker starts an in-process broker on a free loopback port, in
// memory, with no HTTP listener and metrics off unless mod says otherwise.
func startBroker(t *testing.T, defs string, mod ...func(*epitaph.Options)) *epitaph.Broker {
	t.Helper()
	opts := testOptions()
	opts.Definitions = []byte(defs)
	for _, m := range mod {
		m(&opts)
	}
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// testOptions are the defaults with what every in-process test broker
// changes: a free loopback port, no HTTP listener (so that parallel brokers
// do not compete for 15672), metrics off, and memory only.
func testOptions() epitaph.Options {
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "", true
	opts.Metrics = false
	return opts
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dial connects without SASL.
func dial(t *testing.T, b *epitaph.Broker, opts *amqp.ConnOptions) *amqp.Conn {
	t.Helper()
	c, err := amqp.Dial(ctxT(t), "amqp://"+b.Addr().String(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func session(t *testing.T, c *amqp.Conn) *amqp.Session {
	t.Helper()
	s, err := c.NewSession(ctxT(t), nil)
	require.NoError(t, err)
	return s
}

func sender(t *testing.T, s *amqp.Session, target string, opts *amqp.SenderOptions) *amqp.Sender {
	t.Helper()
	snd, err := s.NewSender(ctxT(t), target, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = snd.Close(context.Background()) })
	return snd
}

func receiver(t *testing.T, s *amqp.Session, source string, opts *amqp.ReceiverOptions) *amqp.Receiver {
	t.Helper()
	r, err := s.NewReceiver(ctxT(t), source, opts)
	require.NoError(t, err)
	return r
}

// send publishes body and returns the broker's outcome.
func send(t *testing.T, snd *amqp.Sender, m *amqp.Message) amqp.DeliveryState {
	t.Helper()
	rcpt, err := snd.SendWithReceipt(ctxT(t), m, nil)
	require.NoError(t, err)
	st, err := rcpt.Wait(ctxT(t))
	require.NoError(t, err)
	return st
}

func msg(body string) *amqp.Message { return amqp.NewMessage([]byte(body)) }

func body(m *amqp.Message) string { return string(m.GetData()) }

// recv receives one message within the test's deadline.
func recv(t *testing.T, r *amqp.Receiver) *amqp.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m, err := r.Receive(ctx, nil)
	require.NoError(t, err)
	return m
}

// requireNoMessage asserts nothing arrives within d (used only where the
// absence of a message is the behaviour under test).
func requireNoMessage(t *testing.T, r *amqp.Receiver, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	m, err := r.Receive(ctx, nil)
	if err == nil {
		t.Fatalf("unexpected message %q", body(m))
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// queueLen reads a queue's ready count through the embedding API.
func queueLen(t *testing.T, b *epitaph.Broker, name string) int {
	t.Helper()
	vh, ok := b.Router().VHost("/")
	require.True(t, ok)
	q, ok := vh.Queue(name)
	require.True(t, ok, "queue %q", name)
	return q.Len()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func declareQueue(t *testing.T, b *epitaph.Broker, name string, typ router.QueueType, args amqp10.Map) {
	t.Helper()
	vh, _ := b.Router().VHost("/")
	_, _, err := vh.DeclareQueue(router.QueueSpec{Name: name, Type: typ, Durable: true, Arguments: args})
	require.NoError(t, err)
}

func amqpErr(t *testing.T, err error) *amqp.Error {
	t.Helper()
	var e *amqp.Error
	require.True(t, errors.As(err, &e), "want *amqp.Error, got %T: %v", err, err)
	return e
}

// rootVHost returns the broker's default vhost "/".
func rootVHost(t *testing.T, b *epitaph.Broker) *router.VHost {
	t.Helper()
	vh, ok := b.Router().VHost("/")
	require.True(t, ok)
	return vh
}
