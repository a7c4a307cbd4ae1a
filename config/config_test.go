package config

import (
	"fmt"
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
	require.Equal(t, "", c.DefinitionsFile)
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
	require.Equal(t, 30*time.Second, c.WriteTimeout)
	require.Equal(t, uint64(32<<20), c.GCHeapFloor)
	require.Equal(t, uint32(8192), c.InitialFrameMax)
	require.Equal(t, 4096, c.MaxLinksPerConnection)
	require.Equal(t, int64(64<<20), c.MaxUnfinishedBytes)
	require.Equal(t, 8192, c.MaxUnsettledIncoming)
	require.Equal(t, "info", c.LogLevel)
	require.Equal(t, "text", c.LogFormat)
	require.NoError(t, c.Validate())
}

// sample is a value other than the default for each of a set of keys, as
// a file and the environment both spell it; sampleConfig is what loading
// them gives.
var sample = []struct{ key, value string }{
	{"listen", "127.0.0.1:5673"},
	{"http-listen", ""}, // set but empty: turns HTTP off
	{"definitions", "/etc/epitaph/definitions.json"},
	{"in-memory", "true"},
	{"auto-create-queues", "true"},
	{"store-recovery", "salvage"},
	{"anonymous", "all"},
	{"max-frame-size", "65536"},
	{"channel-max", "31"},
	{"handle-max", "63"},
	{"idle-timeout", "30s"},
	{"max-message-size", "1048576"},
	{"handshake-timeout", "2s"},
	{"max-connections", "0"},
	{"gc-heap-floor", "16777216"},
	{"initial-frame-max", "4096"},
	{"max-links-per-connection", "100"},
	{"max-unfinished-bytes", "2097152"},
	{"max-unsettled-incoming", "50"},
	{"log-level", "debug"},
	{"log-format", "json"},
}

func sampleConfig() *Config {
	// The defaults, and field by field what sample sets (the fields live
	// in squashed groups: AMQP, TLS, ...).
	want := Default()
	want.Listen = "127.0.0.1:5673"
	want.HTTPListen = ""
	want.DefinitionsFile = "/etc/epitaph/definitions.json"
	want.InMemory = true
	want.AutoCreateQueues = true
	want.StoreRecovery = "salvage"
	want.Anonymous = "all"
	want.MaxFrameSize = 65536
	want.ChannelMax = 31
	want.HandleMax = 63
	want.IdleTimeout = 30 * time.Second
	want.MaxMessageSize = 1 << 20
	want.HandshakeTimeout = 2 * time.Second
	want.MaxConnections = 0
	want.GCHeapFloor = 16 << 20
	want.InitialFrameMax = 4096
	want.MaxLinksPerConnection = 100
	want.MaxUnfinishedBytes = 2 << 20
	want.MaxUnsettledIncoming = 50
	want.LogLevel = "debug"
	want.LogFormat = "json"
	return &want
}

// envName is the environment variable of a key.
func envName(key string) string {
	return "EPITAPH_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

func TestFile(t *testing.T) {
	clearEnv(t)
	var yaml strings.Builder
	for _, kv := range sample {
		v := kv.value
		if v == "" {
			v = `""`
		}
		fmt.Fprintf(&yaml, "%s: %s\n", kv.key, v)
	}
	c, err := Load([]string{"--config", writeFile(t, yaml.String())})
	require.NoError(t, err)
	require.Equal(t, sampleConfig(), c)
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
	for _, kv := range sample {
		t.Setenv(envName(kv.key), kv.value)
	}
	c, err := Load(nil)
	require.NoError(t, err)
	require.Equal(t, sampleConfig(), c)

	// Spellings the environment allows: 1 for true, any case for a choice.
	t.Setenv(envName("in-memory"), "1")
	t.Setenv(envName("store-recovery"), "Salvage")
	t.Setenv(envName("log-level"), "WARN")
	c, err = Load(nil)
	require.NoError(t, err)
	require.True(t, c.InMemory)
	require.Equal(t, "salvage", c.StoreRecovery)
	require.Equal(t, "warn", c.LogLevel)
}

// write-timeout comes from the file, the environment or a flag.
func TestWriteTimeout(t *testing.T) {
	clearEnv(t)
	c, err := Load([]string{"--config", writeFile(t, "write-timeout: 5s\n")})
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, c.WriteTimeout)

	t.Setenv("EPITAPH_WRITE_TIMEOUT", "2m")
	c, err = Load(nil)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, c.WriteTimeout)

	c, err = Load([]string{"--write-timeout", "750ms"})
	require.NoError(t, err)
	require.Equal(t, 750*time.Millisecond, c.WriteTimeout, "the flag wins over the environment")
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
		{name: "write timeout zero", args: []string{"--write-timeout", "0s"}},
		{name: "write timeout env", env: map[string]string{"EPITAPH_WRITE_TIMEOUT": "never"}},
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
		KeyAnonymous, KeyMaxFrameSize, KeyChannelMax, KeyAMQP091ChannelMax, KeyHandleMax, KeyIdleTimeout, KeyMaxMessageSize,
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

func TestLimitValidation(t *testing.T) {
	clearEnv(t)
	for _, args := range [][]string{
		{"--initial-frame-max", "511"},
		{"--max-links-per-connection", "0"},
		{"--max-unfinished-bytes", "1000", "--max-message-size", "1001"},
		{"--max-unsettled-incoming", "0"},
	} {
		_, err := Load(args)
		require.ErrorIs(t, err, ErrInvalid, "%v", args)
	}
}

// The TLS keys: defaults as RabbitMQ's (distinguished_name, 5 s handshake),
// the amqps listener only with a certificate, the plain listener may be
// turned off only when there is a TLS one, and inconsistent combinations
// are refused.
func TestTLSKeys(t *testing.T) {
	clearEnv(t)
	c, err := Load(nil)
	require.NoError(t, err)
	require.Equal(t, "", c.TLSCertFile)
	require.Equal(t, 5*time.Second, c.TLSHandshakeTimeout)
	require.Equal(t, CertLoginDistinguishedName, c.SSLCertLoginFrom)
	require.Equal(t, PlainWithoutTLSLoopback, c.PlainWithoutTLS)

	t.Setenv("EPITAPH_TLS_CERT_FILE", "c.pem")
	t.Setenv("EPITAPH_TLS_KEY_FILE", "k.pem")
	t.Setenv("EPITAPH_SSL_CERT_LOGIN_FROM", "Common_Name")
	c, err = Load([]string{"--listen", "", "--tls-listen", "127.0.0.1:5999", "--tls-verify-peer",
		"--tls-ca-file", "ca.pem", "--tls-fail-if-no-peer-cert", "--tls-handshake-timeout", "250ms",
		"--http-tls", "--plain-without-tls", "all", "--ssl-cert-login-san-type", "email", "--ssl-cert-login-san-index", "2"})
	require.NoError(t, err)
	require.Equal(t, "", c.Listen)
	require.Equal(t, "127.0.0.1:5999", c.TLSListen)
	require.Equal(t, "c.pem", c.TLSCertFile)
	require.Equal(t, "k.pem", c.TLSKeyFile)
	require.Equal(t, "ca.pem", c.TLSCAFile)
	require.True(t, c.TLSVerifyPeer)
	require.True(t, c.TLSFailIfNoPeerCert)
	require.True(t, c.HTTPTLS)
	require.Equal(t, 250*time.Millisecond, c.TLSHandshakeTimeout)
	require.Equal(t, CertLoginCommonName, c.SSLCertLoginFrom)
	require.Equal(t, "email", c.SSLCertLoginSANType)
	require.Equal(t, 2, c.SSLCertLoginSANIndex)
	require.Equal(t, PlainWithoutTLSAll, c.PlainWithoutTLS)

	clearEnv(t)
	for name, args := range map[string][]string{
		"no listener at all":         {"--listen", ""},
		"cert without key":           {"--tls-cert-file", "c.pem"},
		"https without cert":         {"--http-tls"},
		"verify without CA":          {"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--tls-verify-peer"},
		"fail-if-no-cert w/o verify": {"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--tls-fail-if-no-peer-cert"},
		"zero handshake time-out":    {"--tls-handshake-timeout", "0s"},
		"unknown login source":       {"--ssl-cert-login-from", "serial"},
		"unknown SAN type":           {"--ssl-cert-login-san-type", "other_name"},
		"negative SAN index":         {"--ssl-cert-login-san-index", "-1"},
		"unknown plain-without-tls":  {"--plain-without-tls", "none"},
		"bad tls-listen with a cert": {"--tls-cert-file", "c.pem", "--tls-key-file", "k.pem", "--tls-listen", "5671"},
	} {
		_, err := Load(args)
		require.ErrorIs(t, err, ErrInvalid, name)
	}
}

// auth-failure-delay and auth-failure-sources: defaults, environment,
// flags, and the values refused.
func TestAuthFailureKeys(t *testing.T) {
	clearEnv(t)
	c, err := Load(nil)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, c.AuthFailureDelay)
	require.Equal(t, 10000, c.AuthFailureSources)

	t.Setenv("EPITAPH_AUTH_FAILURE_DELAY", "0")
	t.Setenv("EPITAPH_AUTH_FAILURE_SOURCES", "5")
	c, err = Load(nil)
	require.NoError(t, err)
	require.Zero(t, c.AuthFailureDelay, "0 means no wait and is valid")
	require.Equal(t, 5, c.AuthFailureSources)

	c, err = Load([]string{"--auth-failure-delay", "250ms"})
	require.NoError(t, err)
	require.Equal(t, 250*time.Millisecond, c.AuthFailureDelay)

	_, err = Load([]string{"--auth-failure-delay", "-1s"})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Load([]string{"--auth-failure-sources", "0"})
	require.ErrorIs(t, err, ErrInvalid)
}

// The response bounds: defaults, and the environment.
func TestResponseBoundKeys(t *testing.T) {
	clearEnv(t)
	c, err := Load(nil)
	require.NoError(t, err)
	require.Equal(t, 10000, c.HTTPGetMaxCount)
	require.Equal(t, 16<<20, c.HTTPGetMaxBytes)
	require.Equal(t, 1<<20, c.ManagementPendingBytes)
	t.Setenv("EPITAPH_HTTP_GET_MAX_COUNT", "7")
	t.Setenv("EPITAPH_HTTP_GET_MAX_BYTES", "4096")
	t.Setenv("EPITAPH_MANAGEMENT_PENDING_BYTES", "512")
	c, err = Load(nil)
	require.NoError(t, err)
	require.Equal(t, 7, c.HTTPGetMaxCount)
	require.Equal(t, 4096, c.HTTPGetMaxBytes)
	require.Equal(t, 512, c.ManagementPendingBytes)
	_, err = Load([]string{"--http-get-max-count", "0"})
	require.ErrorIs(t, err, ErrInvalid)
}

// The OAuth 2 keys: off by default, each from its flag or environment
// variable, and a resource server id without a key source refused.
func TestOAuthKeys(t *testing.T) {
	clearEnv(t)
	c, err := Load(nil)
	require.NoError(t, err)
	require.Empty(t, c.OAuthResourceServerID, "OAuth is off unless configured")
	require.True(t, c.OAuthVerifyAud)
	require.Equal(t, 2048, c.OAuthMaxScopes)
	require.Zero(t, c.OAuthLeeway)

	t.Setenv("EPITAPH_OAUTH_RESOURCE_SERVER_ID", "rabbitmq")
	t.Setenv("EPITAPH_OAUTH_JWKS_FILE", "/etc/jwks.json")
	t.Setenv("EPITAPH_OAUTH_JWKS_URL", "https://idp.example/jwks")
	t.Setenv("EPITAPH_OAUTH_SIGNING_KEY", "/etc/hs256.key")
	t.Setenv("EPITAPH_OAUTH_EXTRA_SCOPES_FIELD", "roles realm_access.roles")
	t.Setenv("EPITAPH_OAUTH_VERIFY_AUD", "false")
	t.Setenv("EPITAPH_OAUTH_LEEWAY", "2s")
	t.Setenv("EPITAPH_OAUTH_MAX_SCOPES", "10")
	c, err = Load(nil)
	require.NoError(t, err)
	require.Equal(t, OAuth{
		OAuthResourceServerID: "rabbitmq",
		OAuthJWKSFile:         "/etc/jwks.json",
		OAuthJWKSURL:          "https://idp.example/jwks",
		OAuthSigningKey:       "/etc/hs256.key",
		OAuthExtraScopesField: "roles realm_access.roles",
		OAuthVerifyAud:        false,
		OAuthLeeway:           2 * time.Second,
		OAuthMaxScopes:        10,
	}, c.OAuth)

	clearEnv(t)
	c, err = Load([]string{"--oauth-resource-server-id", "rs", "--oauth-signing-key", "k", "--oauth-max-scopes", "0"})
	require.NoError(t, err)
	require.Equal(t, "k", c.OAuthSigningKey)
	require.Zero(t, c.OAuthMaxScopes, "0: no limit")
	_, err = Load([]string{"--oauth-resource-server-id", "rs"})
	require.ErrorIs(t, err, ErrInvalid, "no key source")
	_, err = Load([]string{"--oauth-resource-server-id", "rs", "--oauth-jwks-url", "ftp://x/jwks"})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Load([]string{"--oauth-resource-server-id", "rs", "--oauth-signing-key", "k", "--oauth-leeway", "-1s"})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Load([]string{"--oauth-resource-server-id", "rs", "--oauth-signing-key", "k", "--oauth-max-scopes", "-1"})
	require.ErrorIs(t, err, ErrInvalid)
}
