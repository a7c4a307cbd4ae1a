package router

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// A store written by an earlier epitaph, which accepted arguments and
// policy keys it now refuses, still recovers: the queue keeps its
// messages, the policy keeps applying what it applies, and a warning says
// what has no effect.
func TestRecoverRefusedArgumentsAndPolicyKeys(t *testing.T) {
	dir := t.TempDir()
	d := openDurable(t, dir)
	// What an earlier epitaph stored: the internal recovery path is the
	// only one that still takes these.
	id := d.b.allocQueueID(&d.v.meta, true)
	_, _, err := d.v.DeclareQueue(QueueSpec{Name: "legacy", Type: Quorum, Durable: true, recoverID: id,
		Arguments: value.Map{{Key: "x-consumer-timeout", Value: int64(60000)}}})
	require.NoError(t, err)
	require.NoError(t, d.v.putPolicy(Policy{Name: "old", Pattern: "^legacy$",
		Definition: def("ha-mode", "all", "delayed-retry-type", "all", "max-length", int64(50))}, true))
	require.Equal(t, Accepted, d.publish(t, "", durableMsg(t, "kept", "legacy")))
	d.close(t)

	logs := &logRecorder{}
	d2 := openDurable(t, dir, withLogger(logs))
	q, ok := d2.v.Queue("legacy")
	require.True(t, ok, "the queue is recovered")
	assert.Equal(t, 1, q.Len(), "with its message")
	assert.Equal(t, int64(50), q.config().maxLen, "the policy still applies what epitaph applies")
	assert.Equal(t, 1, logs.count(slog.LevelWarn, "recover: queue argument not supported; it has no effect"))
	assert.Equal(t, 1, logs.count(slog.LevelWarn, "policy keys accepted without effect"))

	// A new declaration with the argument is refused, also as a redeclare.
	_, _, err = d2.v.DeclareQueue(QueueSpec{Name: "legacy", Type: Quorum, Durable: true,
		Arguments: value.Map{{Key: "x-consumer-timeout", Value: int64(60000)}}})
	require.ErrorIs(t, err, ErrPreconditionFailed)
	d2.close(t)
}

// A definitions document (a RabbitMQ export) with a setting epitaph does not
// implement fails to load, naming the queue or policy, rather than loading
// without it.
func TestLoadDefinitionsRefusesUnimplementedSettings(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"queues": [{"name": "retry", "vhost": "/", "durable": true, "arguments": {"x-queue-type": "quorum", "x-consumer-timeout": 1000}}]}`,
			"invalid arg 'x-consumer-timeout' for queue 'retry'"},
		{`{"policies": [{"vhost": "/", "name": "retry", "pattern": ".*", "definition": {"delayed-retry-type": "all"}}]}`,
			`policy 'retry': delayed-retry-min is required when delayed-retry-type is all`},
		{`{"policies": [{"vhost": "/", "name": "ha", "pattern": ".*", "definition": {"ha-mode": "all"}}]}`,
			`policy 'ha': ["ha-mode"] are not recognised policy settings`},
	} {
		e := newEnv(t)
		err := e.b.LoadDefinitions([]byte(tc.doc))
		require.Error(t, err, tc.doc)
		assert.Contains(t, err.Error(), tc.want)
	}
}
