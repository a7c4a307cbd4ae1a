package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// setting is one leaf field of Config, its key, and a pointer to it.
type setting struct {
	key   string
	field reflect.Value
}

// settings walks c's fields, into the squashed groups.
func settings(t *testing.T, c *Config) []setting {
	t.Helper()
	var out []setting
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			tag := f.Tag.Get("mapstructure")
			if f.Anonymous {
				require.Equal(t, ",squash", tag, "group %s must be squashed so that its keys stay flat", f.Name)
				walk(v.Field(i))
				continue
			}
			require.NotEmpty(t, tag, "field %s has no key", f.Name)
			out = append(out, setting{key: tag, field: v.Field(i)})
		}
	}
	walk(reflect.ValueOf(c).Elem())
	return out
}

// Every field of Config is a key with a flag of its name (and so an
// EPITAPH_* variable and a YAML key), and a row in the README's
// configuration table; every flag but --config is a field.
func TestEverySettingIsAKeyWithFlagAndReadmeRow(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	fs := newFlagSet("test")
	d := Default()
	var keys []string
	for _, s := range settings(t, &d) {
		keys = append(keys, s.key)
		require.NotNil(t, fs.Lookup(s.key), "no flag --%s", s.key)
		require.Contains(t, string(readme), "| `"+s.key+"` | `--"+s.key+"` | `"+EnvPrefix+"_"+
			strings.ToUpper(strings.ReplaceAll(s.key, "-", "_"))+"` |", "no README row for %s", s.key)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != keyConfig {
			require.True(t, slices.Contains(keys, f.Name), "flag --%s is no Config field", f.Name)
		}
	})
}

// The one rule for zeros: a zero never means "the default". For each key
// the table says what its zero means; "refused" ones fail Validate, the
// others pass it and mean what the table says. A new setting must be added
// here with its meaning.
func TestZeroOfEverySetting(t *testing.T) {
	meaning := map[string]string{
		KeyListen:                       "refused", // without a TLS listener: there must be one
		KeyHTTPListen:                   "no HTTP listener",
		KeyDefinitions:                  "no definitions file",
		KeyInMemory:                     "durable store",
		KeyAutoCreateQueues:             "off",
		KeyPermitTransientNonExclQueues: "refused (541)",
		KeyStrictParity:                 "off",
		KeyDataDir:                      "DefaultDataDir(), from the environment",
		KeyStoreRecovery:                "refused",
		KeyDiskFreeLimit:                "no disk alarm",
		KeyMemoryHigh:                   "no memory alarm",
		KeyQueueWindowBytes:             "no paging: every message in memory",
		KeyDLRetryInterval:              "refused",
		KeyAuthFailureDelay:             "no wait",
		KeyAuthFailureSources:           "refused",
		KeyHTTPGetMaxCount:              "refused",
		KeyHTTPGetMaxBytes:              "refused",
		KeyAnonymous:                    "refused",
		KeyPlainWithoutTLS:              "refused",
		KeyMaxFrameSize:                 "refused",
		KeyChannelMax:                   "refused",
		KeyAMQP091ChannelMax:            "refused",
		KeyHandleMax:                    "refused",
		KeyIdleTimeout:                  "refused",
		KeyMaxMessageSize:               "refused",
		KeyHandshakeTimeout:             "refused",
		KeyWriteTimeout:                 "refused",
		KeyMaxConnections:               "unlimited",
		KeyInitialFrameMax:              "refused",
		KeyMaxLinksPerConnection:        "refused",
		KeyMaxUnfinishedBytes:           "refused",
		KeyMaxUnsettledIncoming:         "refused",
		KeyManagementPendingBytes:       "refused",
		KeyFilterSQLMaxLength:           "refused",
		KeyFilterSQLMaxTokens:           "refused",
		KeyFilterSQLMaxDepth:            "refused",
		KeyFilterMaxFields:              "refused",
		KeyDLEventsBuffer:               "refused",
		KeyDLEventsMaxSubscribers:       "no limit",
		KeyDLEventsHeartbeat:            "refused",
		KeyTLSListen:                    "refused", // without a certificate: only the default is accepted
		KeyTLSCertFile:                  "no TLS",
		KeyTLSKeyFile:                   "no TLS",
		KeyTLSCAFile:                    "no CA",
		KeyTLSVerifyPeer:                "off",
		KeyTLSFailIfNoPeerCert:          "off",
		KeyTLSHandshakeTimeout:          "refused",
		KeySSLCertLoginFrom:             "refused",
		KeySSLCertLoginSANType:          "refused",
		KeySSLCertLoginSANIndex:         "the first name",
		KeyHTTPTLS:                      "off",
		KeyTracing:                      "refused",
		KeyOTLPEndpoint:                 "OTEL_EXPORTER_OTLP_ENDPOINT, from the environment",
		KeyOTLPProtocol:                 "OTEL_EXPORTER_OTLP_PROTOCOL, from the environment",
		KeyMetrics:                      "off",
		KeyOTLPMetrics:                  "off",
		KeyGCHeapFloor:                  "the runtime's own pacing",
		KeyLogLevel:                     "refused",
		KeyLogFormat:                    "refused",
		KeyOAuthResourceServerID:        "OAuth off",
		KeyOAuthJWKSFile:                "no JWKS file",
		KeyOAuthJWKSURL:                 "no JWKS URL",
		KeyOAuthSigningKey:              "no HS256 key",
		KeyOAuthExtraScopesField:        "only the scope claim",
		KeyOAuthVerifyAud:               "off",
		KeyOAuthLeeway:                  "no leeway",
		KeyOAuthMaxScopes:               "no limit",
		KeyPeekMaxScan:                  "refused",
		KeyRedriveTaskRetention:         "no limit",
		KeyWebConsole:                   "off",
	}
	d := Default()
	n := len(settings(t, &d))
	require.Len(t, meaning, n, "every setting, and only settings, in the table")
	for i := range n {
		c := Default()
		s := settings(t, &c)[i]
		want, ok := meaning[s.key]
		require.True(t, ok, "%s: zero's meaning not in the table", s.key)
		s.field.SetZero()
		err := c.Validate()
		if want == "refused" {
			require.ErrorIs(t, err, ErrInvalid, "zero %s", s.key)
			require.ErrorContains(t, err, s.key)
		} else {
			require.NoError(t, err, "zero %s means %s", s.key, want)
		}
	}
}

// A tls-listen of one's own choosing without a certificate is refused (TLS
// was meant to be on); the default address alone is not.
func TestTLSListenWithoutCertificate(t *testing.T) {
	clearEnv(t)
	_, err := Load([]string{"--tls-listen", "127.0.0.1:5999"})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, KeyTLSListen)
	_, err = Load([]string{"--tls-listen", DefaultTLSListen})
	require.NoError(t, err)
}
