package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clearEnv unsets every EPITAPH_* variable for the duration of the test, so
// the caller's environment cannot leak in.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix+"_") {
			t.Setenv(name, "") // restores the old value at cleanup
			require.NoError(t, os.Unsetenv(name))
		}
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "epitaph.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestDefaults(t *testing.T) {
	clearEnv(t)
	c, err := Load(nil)
	require.NoError(t, err)
	want := Default()
	require.Equal(t, &want, c)
	require.Equal(t, ":5672", c.Listen)
	require.Equal(t, "127.0.0.1:15672", c.HTTPListen)
	require.Equal(t, "", c.Definitions)
	require.False(t, c.InMemory)
	require.False(t, c.AutoCreateQueues)
	require.Equal(t, "loopback", c.Anonymous)
	require.Equal(t, "strict", c.StoreRecovery)
	require.Equal(t, uint32(131072), c.MaxFrameSize)
	require.Equal(t, uint16(255), c.ChannelMax)
	require.Equal(t, uint32(255), c.HandleMax)
	require.Equal(t, 60*time.Second, c.IdleTimeout)
	require.Equal(t, uint64(16777216), c.MaxMessageSize)
	require.Equal(t, 10*time.Second, c.HandshakeTimeout)
	require.Equal(t, 10000, c.MaxConnections)
	require.Equal(t, uint64(32<<20), c.GCHeapFloor)
	require.Equal(t, "info", c.LogLevel)
	require.Equal(t, "text", c.LogFormat)
	require.NoError(t, c.Validate())
}

func TestFile(t *testing.T) {
	clearEnv(t)
	p := writeFile(t, `
listen: 127.0.0.1:5673
http-listen: ""
definitions: /etc/epitaph/definitions.json
in-memory: true
auto-create-queues: true
store-recovery: salvage
anonymous: all
max-frame-size: 65536
channel-max: 31
handle-max: 63
idle-timeout: 30s
max-message-size: 1048576
handshake-timeout: 2s
max-connections: 0
gc-heap-floor: 0
log-level: debug
log-format: json
`)
	c, err := Load([]string{"--config", p})
	require.NoError(t, err)
	require.Equal(t, &Config{
		Listen:                  "127.0.0.1:5673",
		HTTPListen:              "",
		Definitions:             "/etc/epitaph/definitions.json",
		InMemory:                true,
		AutoCreateQueues:        true,
		StoreRecovery:           "salvage",
		Anonymous:               "all",
		MaxFrameSize:            65536,
		ChannelMax:              31,
		HandleMax:               63,
		IdleTimeout:             30 * time.Second,
		MaxMessageSize:          1 << 20,
		HandshakeTimeout:        2 * time.Second,
		MaxConnections:          0,
		GCHeapFloor:             0,
		DiskFreeLimit:           100 << 20,
		DeadLetterRetryInterval: 180 * time.Second,
		LogLevel:                "debug",
		LogFormat:               "json",
		Tracing:                 TracingAuto,
		Metrics:                 true,
	}, c)
}

func TestFileFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("EPITAPH_CONFIG", writeFile(t, "channel-max: 7\n"))
	c, err := Load(nil)
	require.NoError(t, err)
	require.Equal(t, uint16(7), c.ChannelMax)
}

func TestFileErrors(t *testing.T) {
	clearEnv(t)

	_, err := Load([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")})
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrInvalid)

	_, err = Load([]string{"--config", writeFile(t, "max_frame_size: 4096\n")})
	require.ErrorIs(t, err, ErrInvalid, "an unknown key (typo) must be refused")

	_, err = Load([]string{"--config", writeFile(t, "max-frame-size: lots\n")})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("EPITAPH_LISTEN", "127.0.0.1:0")
	t.Setenv("EPITAPH_HTTP_LISTEN", "") // set but empty: turns HTTP off
	t.Setenv("EPITAPH_IN_MEMORY", "true")
	t.Setenv("EPITAPH_AUTO_CREATE_QUEUES", "1")
	t.Setenv("EPITAPH_ANONYMOUS", "none")
	t.Setenv("EPITAPH_STORE_RECOVERY", "Salvage")
	t.Setenv("EPITAPH_MAX_FRAME_SIZE", "4096")
	t.Setenv("EPITAPH_CHANNEL_MAX", "9")
	t.Setenv("EPITAPH_HANDLE_MAX", "10")
	t.Setenv("EPITAPH_IDLE_TIMEOUT", "90s")
	t.Setenv("EPITAPH_MAX_MESSAGE_SIZE", "2048")
	t.Setenv("EPITAPH_HANDSHAKE_TIMEOUT", "500ms")
	t.Setenv("EPITAPH_MAX_CONNECTIONS", "20000")
	t.Setenv("EPITAPH_GC_HEAP_FLOOR", "16777216")
	t.Setenv("EPITAPH_LOG_LEVEL", "WARN")
	t.Setenv("EPITAPH_LOG_FORMAT", "json")
	t.Setenv("EPITAPH_DEFINITIONS", "defs.json")
	c, err := Load(nil)
	require.NoError(t, err)
	require.Equal(t, &Config{
		Listen:                  "127.0.0.1:0",
		HTTPListen:              "",
		Definitions:             "defs.json",
		InMemory:                true,
		AutoCreateQueues:        true,
		StoreRecovery:           "salvage",
		Anonymous:               "none",
		MaxFrameSize:            4096,
		ChannelMax:              9,
		HandleMax:               10,
		IdleTimeout:             90 * time.Second,
		MaxMessageSize:          2048,
		HandshakeTimeout:        500 * time.Millisecond,
		MaxConnections:          20000,
		GCHeapFloor:             16 << 20,
		DiskFreeLimit:           100 << 20,
		DeadLetterRetryInterval: 180 * time.Second,
		LogLevel:                "warn",
		LogFormat:               "json",
		Tracing:                 TracingAuto,
		Metrics:                 true,
	}, c)
}

// max-connections defaults to the node limit 10,000; 0 (unlimited) and
// other values come from the environment or a flag.
func TestMaxConnections(t *testing.T) {
	clearEnv(t)
	c, err := Load(nil)
	require.NoError(t, err)
	require.Equal(t, 10000, c.MaxConnections)
	require.Contains(t, Usage(), "0: unlimited")

	t.Setenv("EPITAPH_MAX_CONNECTIONS", "3")
	c, err = Load(nil)
	require.NoError(t, err)
	require.Equal(t, 3, c.MaxConnections)

	t.Setenv("EPITAPH_MAX_CONNECTIONS", "0")
	c, err = Load(nil)
	require.NoError(t, err)
	require.Equal(t, 0, c.MaxConnections, "0 means unlimited and is valid")

	c, err = Load([]string{"--max-connections", "50000"})
	require.NoError(t, err)
	require.Equal(t, 50000, c.MaxConnections, "the flag wins over the environment")
}

func TestPrecedence(t *testing.T) {
	clearEnv(t)
	file := writeFile(t, "listen: 127.0.0.1:1001\nchannel-max: 1\nhandle-max: 1\nlog-level: error\n")

	// file over defaults
	c, err := Load([]string{"--config", file})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:1001", c.Listen)
	require.Equal(t, uint16(1), c.ChannelMax)
	require.Equal(t, "error", c.LogLevel)
	require.Equal(t, uint32(131072), c.MaxFrameSize, "untouched keys keep their defaults")

	// env over file
	t.Setenv("EPITAPH_LISTEN", "127.0.0.1:1002")
	t.Setenv("EPITAPH_CHANNEL_MAX", "2")
	c, err = Load([]string{"--config", file})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:1002", c.Listen)
	require.Equal(t, uint16(2), c.ChannelMax)
	require.Equal(t, uint32(1), c.HandleMax, "file still applies where env is unset")

	// flags over env and file
	c, err = Load([]string{"--config", file, "--listen", "127.0.0.1:1003", "--log-level=debug", "--http-listen", ""})
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:1003", c.Listen)
	require.Equal(t, "debug", c.LogLevel)
	require.Equal(t, "", c.HTTPListen, `--http-listen "" turns HTTP off`)
	require.Equal(t, uint16(2), c.ChannelMax, "env still applies where no flag is given")
	require.Equal(t, uint32(1), c.HandleMax)

	// a flag set to its default value still wins
	c, err = Load([]string{"--config", file, "--channel-max", "255"})
	require.NoError(t, err)
	require.Equal(t, uint16(255), c.ChannelMax)
}

func TestInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "small frame flag", args: []string{"--max-frame-size", "511"}},
		{name: "frame not a number", args: []string{"--max-frame-size", "big"}},
		{name: "negative frame", args: []string{"--max-frame-size=-1"}},
		{name: "small frame env", env: map[string]string{"EPITAPH_MAX_FRAME_SIZE": "100"}},
		{name: "frame env not a number", env: map[string]string{"EPITAPH_MAX_FRAME_SIZE": "big"}},
		{name: "anonymous flag", args: []string{"--anonymous", "everyone"}},
		{name: "anonymous env", env: map[string]string{"EPITAPH_ANONYMOUS": "sometimes"}},
		{name: "log level", args: []string{"--log-level", "trace"}},
		{name: "store recovery flag", args: []string{"--store-recovery", "repair"}},
		{name: "store recovery env", env: map[string]string{"EPITAPH_STORE_RECOVERY": "ignore"}},
		{name: "log format", args: []string{"--log-format", "xml"}},
		{name: "listen empty", args: []string{"--listen", ""}},
		{name: "listen no port", args: []string{"--listen", "localhost"}},
		{name: "http listen no port", args: []string{"--http-listen", "localhost"}},
		{name: "channel max zero", args: []string{"--channel-max", "0"}},
		{name: "channel max overflow", args: []string{"--channel-max", "65536"}},
		{name: "handle max zero", args: []string{"--handle-max", "0"}},
		{name: "idle timeout zero", args: []string{"--idle-timeout", "0s"}},
		{name: "idle timeout env", env: map[string]string{"EPITAPH_IDLE_TIMEOUT": "soon"}},
		{name: "handshake timeout negative", args: []string{"--handshake-timeout", "-1s"}},
		{name: "max message size zero", args: []string{"--max-message-size", "0"}},
		{name: "max connections negative", args: []string{"--max-connections=-1"}},
		{name: "max connections env negative", env: map[string]string{"EPITAPH_MAX_CONNECTIONS": "-5"}},
		{name: "max connections env not a number", env: map[string]string{"EPITAPH_MAX_CONNECTIONS": "many"}},
		{name: "bool flag", args: []string{"--in-memory=maybe"}},
		{name: "unknown flag", args: []string{"--no-such-flag"}},
		{name: "positional argument", args: []string{"serve"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := Load(tc.args)
			require.ErrorIs(t, err, ErrInvalid)
			require.Nil(t, c)
		})
	}
}

func TestValidate(t *testing.T) {
	c := Default()
	require.NoError(t, c.Validate())
	c.MaxFrameSize = MinMaxFrameSize
	require.NoError(t, c.Validate(), "512 is the minimum and is allowed")
	c.MaxFrameSize = MinMaxFrameSize - 1
	require.ErrorIs(t, c.Validate(), ErrInvalid)
}

func TestHelp(t *testing.T) {
	clearEnv(t)
	_, err := Load([]string{"--help"})
	require.ErrorIs(t, err, ErrHelp)
	require.NotErrorIs(t, err, ErrInvalid)
	for _, key := range []string{KeyListen, KeyHTTPListen, KeyDefinitions, KeyInMemory, KeyAutoCreateQueues,
		KeyAnonymous, KeyMaxFrameSize, KeyChannelMax, KeyHandleMax, KeyIdleTimeout, KeyMaxMessageSize,
		KeyHandshakeTimeout, KeyMaxConnections, KeyGCHeapFloor, KeyLogLevel, KeyLogFormat, KeyStoreRecovery, keyConfig} {
		require.Contains(t, Usage(), "--"+key)
	}
}

func TestParseLogLevel(t *testing.T) {
	c := Default()
	c.LogLevel = "debug"
	require.Equal(t, "DEBUG", c.SlogLevel().String())
	_, err := ParseLogLevel("loud")
	require.ErrorIs(t, err, ErrInvalid)
}
