// Package config defines the broker's settings, once: Config, its
// defaults (Default) and its validation, and turns command-line flags,
// EPITAPH_* environment variables and an optional YAML file into a
// validated Config for cmd/epitaph.
//
// Precedence, highest first: flags, environment, file, defaults. Every key
// has a flag of the same name (--max-frame-size), an environment variable
// (EPITAPH_MAX_FRAME_SIZE) and a YAML key (max-frame-size).
//
// config imports only the standard library, viper and pflag. epitaph.Options
// embeds Config and link.Options embeds its AMQP group, so nothing maps a
// setting from one struct to another; see Config for what a zero value
// means.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// ErrInvalid is wrapped by every error that reports a bad flag, environment
// variable or file value. Test for it with errors.Is.
var ErrInvalid = errors.New("config: invalid value")

// ErrHelp is returned (wrapped) by Load when --help or -h is given. The
// caller should print Usage and exit successfully.
var ErrHelp = errors.New("config: help requested")

// EnvPrefix is the prefix of the environment variables Load reads:
// max-frame-size is EPITAPH_MAX_FRAME_SIZE.
const EnvPrefix = "EPITAPH"

// Keys, as used in the YAML file and as flag names.
const (
	KeyListen           = "listen"
	KeyHTTPListen       = "http-listen"
	KeyDefinitions      = "definitions"
	KeyInMemory         = "in-memory"
	KeyAutoCreateQueues = "auto-create-queues"
	// KeyPermitTransientNonExclQueues lets AMQP 0-9-1 clients declare
	// non-durable, non-exclusive queues.
	KeyPermitTransientNonExclQueues = "permit-transient-nonexcl-queues"
	KeyStrictParity                 = "strict-parity"
	KeyDataDir                      = "data-dir"
	KeyStoreRecovery                = "store-recovery"
	KeyDiskFreeLimit                = "disk-free-limit"
	KeyMemoryHigh                   = "memory-high-watermark"
	KeyQueueWindowBytes             = "queue-window-bytes"
	KeyDLRetryInterval              = "dead-letter-retry-interval"
	KeyAnonymous                    = "anonymous"
	KeyMaxFrameSize                 = "max-frame-size"
	KeyChannelMax                   = "channel-max"
	KeyAMQP091ChannelMax            = "amqp091-channel-max"
	KeyHandleMax                    = "handle-max"
	KeyIdleTimeout                  = "idle-timeout"
	KeyMaxMessageSize               = "max-message-size"
	KeyHandshakeTimeout             = "handshake-timeout"
	KeyMaxConnections               = "max-connections"
	KeyGCHeapFloor                  = "gc-heap-floor"
	KeyLogLevel                     = "log-level"
	KeyLogFormat                    = "log-format"
	KeyTracing                      = "tracing"
	KeyOTLPEndpoint                 = "otlp-endpoint"
	KeyOTLPProtocol                 = "otlp-protocol"
	KeyMetrics                      = "metrics"
	KeyOTLPMetrics                  = "otlp-metrics"
	KeyWriteTimeout                 = "write-timeout"

	KeyAuthFailureDelay   = "auth-failure-delay"
	KeyAuthFailureSources = "auth-failure-sources"

	KeyHTTPGetMaxCount        = "http-get-max-count"
	KeyPeekMaxScan            = "peek-max-scan"
	KeyRedriveTaskRetention   = "redrive-task-retention"
	KeyHTTPGetMaxBytes        = "http-get-max-bytes"
	KeyManagementPendingBytes = "management-pending-bytes"

	KeyDLEventsBuffer         = "dead-letter-events-buffer"
	KeyDLEventsMaxSubscribers = "dead-letter-events-max-subscribers"
	KeyDLEventsHeartbeat      = "dead-letter-events-heartbeat"
	KeyWebConsole             = "web-console"
	KeyInitialFrameMax        = "initial-frame-max"
	KeyMaxLinksPerConnection  = "max-links-per-connection"
	KeyMaxUnfinishedBytes     = "max-unfinished-bytes"
	KeyMaxUnsettledIncoming   = "max-unsettled-incoming"
	KeyTLSListen              = "tls-listen"
	KeyTLSCertFile            = "tls-cert-file"
	KeyTLSKeyFile             = "tls-key-file"
	KeyTLSCAFile              = "tls-ca-file"
	KeyTLSVerifyPeer          = "tls-verify-peer"
	KeyTLSFailIfNoPeerCert    = "tls-fail-if-no-peer-cert"
	KeyTLSHandshakeTimeout    = "tls-handshake-timeout"
	KeySSLCertLoginFrom       = "ssl-cert-login-from"
	KeySSLCertLoginSANType    = "ssl-cert-login-san-type"
	KeySSLCertLoginSANIndex   = "ssl-cert-login-san-index"
	KeyHTTPTLS                = "http-tls"
	KeyPlainWithoutTLS        = "plain-without-tls"

	KeyFilterSQLMaxLength = "filter-sql-max-length"
	KeyFilterSQLMaxTokens = "filter-sql-max-tokens"
	KeyFilterSQLMaxDepth  = "filter-sql-max-depth"
	KeyFilterMaxFields    = "filter-max-fields"

	KeyOAuthResourceServerID = "oauth-resource-server-id"
	KeyOAuthJWKSFile         = "oauth-jwks-file"
	KeyOAuthJWKSURL          = "oauth-jwks-url"
	KeyOAuthSigningKey       = "oauth-signing-key"
	KeyOAuthExtraScopesField = "oauth-extra-scopes-field"
	KeyOAuthVerifyAud        = "oauth-verify-aud"
	KeyOAuthLeeway           = "oauth-leeway"
	KeyOAuthMaxScopes        = "oauth-max-scopes"
)

// Values of ssl-cert-login-from, as RabbitMQ's ssl_cert_login_from.
const (
	CertLoginDistinguishedName = "distinguished_name"
	CertLoginCommonName        = "common_name"
	CertLoginSAN               = "subject_alternative_name"
)

// Values of ssl-cert-login-san-type, as RabbitMQ's ssl_cert_login_san_type.
const (
	SANTypeDNS   = "dns"
	SANTypeIP    = "ip"
	SANTypeEmail = "email"
	SANTypeURI   = "uri"
)

// Values of plain-without-tls.
const (
	PlainWithoutTLSLoopback = "loopback"
	PlainWithoutTLSAll      = "all"
)

// Tracing modes accepted by the tracing key.
const (
	TracingAuto = "auto"
	TracingOn   = "on"
	TracingOff  = "off"
)

// OTLP protocols accepted by the otlp-protocol key ("" follows OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	OTLPGRPC = "grpc"
	OTLPHTTP = "http/protobuf"
)

// DefaultTLSListen is the amqps listen address when tls-cert-file is set
// and tls-listen is not; any other tls-listen needs tls-cert-file.
const DefaultTLSListen = ":5671"

// keyConfig is the flag naming the YAML file; it is not a Config field.
const keyConfig = "config"

// MinMaxFrameSize is the smallest max-frame-size AMQP 1.0 allows
// (MIN-MAX-FRAME-SIZE, §2.7.1).
const MinMaxFrameSize = 512

// Anonymous policies accepted by the anonymous key.
const (
	AnonymousLoopback = "loopback"
	AnonymousAll      = "all"
	AnonymousNone     = "none"
)

// Store recovery modes accepted by the store-recovery key.
const (
	StoreRecoveryStrict  = "strict"
	StoreRecoverySalvage = "salvage"
)

// Log formats accepted by the log-format key.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Config is the broker's whole configuration, and the one definition of
// each setting: epitaph.Options embeds it and link takes its AMQP group,
// so a setting has the same name, type and meaning in the YAML file, the
// flag, the environment variable and the Go field. The mapstructure tags
// are the YAML keys and flag names; the groups are squashed, so every key
// stays flat (max-frame-size, not amqp.max-frame-size).
//
// Zero values: a zero never means "the default". Defaults come from
// Default, and a zero means none (no limit, no alarm, no wait, no listener,
// no file) where that makes sense, and is refused by Validate where it does
// not (a zero max-frame-size or idle-timeout). The exceptions are the
// settings whose empty value names a place derived from the environment at
// start: DataDir, OTLPEndpoint and OTLPProtocol (documented on each).
type Config struct {
	// Listen is the AMQP listen address (host:port; port 0 picks a free
	// one); empty turns the plain listener off, which needs TLSCertFile.
	Listen string `mapstructure:"listen"`
	// HTTPListen is the management HTTP address; empty turns it off.
	HTTPListen string `mapstructure:"http-listen"`
	// DefinitionsFile is the path of a RabbitMQ definitions JSON file
	// applied at start; empty means none.
	DefinitionsFile string `mapstructure:"definitions"`
	// InMemory keeps messages and topology in memory only (nothing survives
	// a restart); otherwise they are stored in DataDir.
	InMemory bool `mapstructure:"in-memory"`
	// StrictParity turns off epitaph's additions to RabbitMQ 4.3's
	// dead-letter annotations (x-last-death-error-condition/-description).
	StrictParity bool `mapstructure:"strict-parity"`
	// DataDir is the durable store's directory, created when missing; ""
	// means DefaultDataDir(): $XDG_DATA_HOME/epitaph, ~/.local/share/epitaph
	// or ./data.
	DataDir string `mapstructure:"data-dir"`
	// StoreRecovery is what start-up does with a damaged store: "strict"
	// refuses to start (saying which file is damaged where), "salvage"
	// starts with what is readable, after keeping copies of the damaged
	// files in a salvaged-<time> directory inside DataDir, and logs what it
	// dropped.
	StoreRecovery string `mapstructure:"store-recovery"`
	// DiskFreeLimit blocks publishers while the data directory's file
	// system has less free space, in bytes; 0 turns the disk alarm off. Not
	// checked in memory mode.
	DiskFreeLimit uint64 `mapstructure:"disk-free-limit"`
	// MemoryHighWatermark blocks publishers while the process uses more
	// memory, in bytes; 0 turns the memory alarm off.
	MemoryHighWatermark uint64 `mapstructure:"memory-high-watermark"`
	// QueueWindowBytes bounds the ready messages each queue keeps in
	// memory with their bodies; the others stay on disk (durable ones in
	// the store, transient ones in the data directory's transient spill
	// logs), with a small index entry in memory, and are read back ahead of
	// consumers. 0 keeps every message in memory. Not used in memory mode.
	QueueWindowBytes uint64 `mapstructure:"queue-window-bytes"`
	// DeadLetterRetryInterval is how often retained at-least-once dead
	// letters are retried (RabbitMQ's default is 180s); positive.
	DeadLetterRetryInterval time.Duration `mapstructure:"dead-letter-retry-interval"`
	// AuthFailureDelay is the wait before a failed authentication (AMQP
	// SASL, HTTP basic auth) is answered, multiplied by the recent failures
	// from the same address (at most ten times); 0 means no wait.
	AuthFailureDelay time.Duration `mapstructure:"auth-failure-delay"`
	// AuthFailureSources bounds the addresses whose failures are remembered.
	AuthFailureSources int `mapstructure:"auth-failure-sources"`
	// HTTPGetMaxCount bounds the count of one HTTP get of messages (above
	// it: 400); HTTPGetMaxBytes the payload bytes of its answer (fewer
	// messages, and the X-Epitaph-Get-Truncated header).
	HTTPGetMaxCount int `mapstructure:"http-get-max-count"`
	HTTPGetMaxBytes int `mapstructure:"http-get-max-bytes"`
	// PeekMaxScan bounds the messages one peek tests for its filters
	// before it answers with what it found and where to continue; at
	// least 1.
	PeekMaxScan int `mapstructure:"peek-max-scan"`
	// RedriveTaskRetention is how many ended redrive tasks are kept (in
	// memory and in the store); beyond it the oldest ended ones are
	// removed. 0 means no limit.
	RedriveTaskRetention int `mapstructure:"redrive-task-retention"`
	// DeadLetterEventsBuffer is how many dead-letter events (and gap
	// markers) one subscriber's buffer holds before it loses events; at
	// least 1. DeadLetterEventsMaxSubscribers bounds the subscribers (AMQP
	// links and HTTP streams) open at once; 0 means no bound.
	// DeadLetterEventsHeartbeat is how often an idle Server-Sent Events
	// stream gets a comment line; positive.
	DeadLetterEventsBuffer         int           `mapstructure:"dead-letter-events-buffer"`
	DeadLetterEventsMaxSubscribers int           `mapstructure:"dead-letter-events-max-subscribers"`
	DeadLetterEventsHeartbeat      time.Duration `mapstructure:"dead-letter-events-heartbeat"`
	// WebConsole serves the web console on the HTTP listener (under
	// /console/; / redirects there), behind the API's authentication.
	WebConsole bool `mapstructure:"web-console"`

	// AMQP is what the AMQP 1.0 front end (package link) needs.
	AMQP `mapstructure:",squash"`
	// TLS is the amqps listener and client certificate settings.
	TLS `mapstructure:",squash"`
	// OAuth 2 tokens as PLAIN passwords; off unless a resource server id
	// is set.
	OAuth `mapstructure:",squash"`
	// Telemetry is tracing and metrics.
	Telemetry `mapstructure:",squash"`
	// Process is what only cmd/epitaph applies, because it changes
	// process-wide state; epitaph.Start ignores it.
	Process `mapstructure:",squash"`
}

// AMQP is the AMQP 1.0 front end's settings: what link.Server needs.
type AMQP struct {
	// Anonymous is from where ANONYMOUS and no-SASL connections are
	// accepted (as the guest user): "loopback", "all" or "none".
	Anonymous string `mapstructure:"anonymous"`
	// PlainWithoutTLS is from where SASL PLAIN is accepted on a connection
	// without TLS: "loopback" or "all". Over TLS it always is.
	PlainWithoutTLS string `mapstructure:"plain-without-tls"`
	// AutoCreateQueues declares a classic queue when a link attaches to a
	// bare address that names no existing node.
	AutoCreateQueues bool `mapstructure:"auto-create-queues"`
	// PermitTransientNonExclQueues lets AMQP 0-9-1 clients declare
	// non-durable, non-exclusive queues, which RabbitMQ 4.3 refuses with
	// 541 (its deprecated feature transient_nonexcl_queues) unless permitted.
	PermitTransientNonExclQueues bool `mapstructure:"permit-transient-nonexcl-queues"`
	// MaxFrameSize is advertised in open and enforced; at least 512.
	MaxFrameSize uint32 `mapstructure:"max-frame-size"`
	// ChannelMax is advertised in open (highest channel number); at least 1.
	ChannelMax uint16 `mapstructure:"channel-max"`
	// AMQP091ChannelMax is AMQP 0-9-1's channel-max, offered in
	// connection.tune (RabbitMQ's channel_max, 2047); at least 1.
	AMQP091ChannelMax uint16 `mapstructure:"amqp091-channel-max"`
	// HandleMax is advertised in begin (highest link handle); at least 1.
	HandleMax uint32 `mapstructure:"handle-max"`
	// IdleTimeout closes a connection that sends nothing for this long.
	// Heartbeats are sent at half the peer's idle-time-out, and at least
	// every 15s.
	IdleTimeout time.Duration `mapstructure:"idle-timeout"`
	// MaxMessageSize is advertised on attach and enforced, in bytes.
	MaxMessageSize uint64 `mapstructure:"max-message-size"`
	// HandshakeTimeout bounds the protocol header, SASL and open exchange.
	HandshakeTimeout time.Duration `mapstructure:"handshake-timeout"`
	// WriteTimeout closes a connection whose peer takes no output for this
	// long (it stopped reading), as a lost connection; a peer that reads
	// slowly is never cut: every write that moves bytes starts it afresh.
	WriteTimeout time.Duration `mapstructure:"write-timeout"`
	// MaxConnections is the node's connection limit: a connection beyond
	// it is answered with open then close(amqp:resource-limit-exceeded).
	// Every accepted socket counts until its goroutines have finished,
	// handshakes included. 0 means unlimited.
	MaxConnections int `mapstructure:"max-connections"`
	// InitialFrameMax is the largest frame accepted before open (SASL and
	// open frames), in bytes; at least 512. RabbitMQ's is the same 8192
	// (INITIAL_MAX_FRAME_SIZE in deps/rabbit/include/rabbit_amqp_reader.hrl).
	InitialFrameMax uint32 `mapstructure:"initial-frame-max"`
	// MaxLinksPerConnection bounds the links of one connection, over all
	// its sessions; an attach beyond it is refused with
	// amqp:resource-limit-exceeded.
	MaxLinksPerConnection int `mapstructure:"max-links-per-connection"`
	// MaxUnfinishedBytes bounds the bytes of incomplete multi-frame
	// messages one connection holds, over all its links; at least
	// MaxMessageSize.
	MaxUnfinishedBytes int64 `mapstructure:"max-unfinished-bytes"`
	// MaxUnsettledIncoming bounds, per session, the rcv-settle-mode second
	// publishes whose outcome the peer has not settled.
	MaxUnsettledIncoming int `mapstructure:"max-unsettled-incoming"`
	// ManagementPendingBytes bounds the /management responses a session
	// holds for a client that does not take them; beyond it the request
	// link is detached with amqp:resource-limit-exceeded.
	ManagementPendingBytes int `mapstructure:"management-pending-bytes"`

	// Limits on the filter expressions a consumer attaches with (an attach
	// beyond one is refused with amqp:invalid-field): the characters, the
	// tokens and the nesting depth of an SQL expression, and the fields of
	// a property filter. The defaults are RabbitMQ's (its depth is bounded
	// by its token limit only).
	FilterSQLMaxLength int `mapstructure:"filter-sql-max-length"`
	FilterSQLMaxTokens int `mapstructure:"filter-sql-max-tokens"`
	FilterSQLMaxDepth  int `mapstructure:"filter-sql-max-depth"`
	FilterMaxFields    int `mapstructure:"filter-max-fields"`
}

// TLS is the amqps listener's and the HTTPS API's settings, with the
// semantics of RabbitMQ's ssl_options and rabbitmq_auth_mechanism_ssl.
// link.NewTLSCerts takes it.
type OAuth struct {
	// OAuthResourceServerID turns OAuth 2 tokens on: the audience a token
	// must name and, followed by ".", the prefix of its scopes ("" = off).
	OAuthResourceServerID string `mapstructure:"oauth-resource-server-id"`
	// OAuthJWKSFile is a JSON Web Key Set file of signing keys.
	OAuthJWKSFile string `mapstructure:"oauth-jwks-file"`
	// OAuthJWKSURL is a JSON Web Key Set URL, fetched at start and when a
	// token names an unknown key (at most every 30 s).
	OAuthJWKSURL string `mapstructure:"oauth-jwks-url"`
	// OAuthSigningKey is a file holding an HS256 secret, base64 as a
	// JWK's "k"; it verifies tokens without a kid.
	OAuthSigningKey string `mapstructure:"oauth-signing-key"`
	// OAuthExtraScopesField names further claims holding scopes
	// (space-separated dot paths; RabbitMQ's extra_scopes_source).
	OAuthExtraScopesField string `mapstructure:"oauth-extra-scopes-field"`
	// OAuthVerifyAud requires the token's aud to name the resource server.
	OAuthVerifyAud bool `mapstructure:"oauth-verify-aud"`
	// OAuthLeeway is the clock skew allowed on a token's exp and nbf; a
	// connection is closed at exp plus it (0: none, as RabbitMQ).
	OAuthLeeway time.Duration `mapstructure:"oauth-leeway"`
	// OAuthMaxScopes refuses tokens with more scopes (RabbitMQ: 2048;
	// 0: no limit).
	OAuthMaxScopes int `mapstructure:"oauth-max-scopes"`
}

// Validate checks the OAuth keys: with a resource server id, at least one
// source of signing keys.
func (o OAuth) Validate() error {
	if o.OAuthResourceServerID == "" {
		return nil
	}
	if o.OAuthJWKSFile == "" && o.OAuthJWKSURL == "" && o.OAuthSigningKey == "" {
		return invalid(KeyOAuthResourceServerID, o.OAuthResourceServerID, "needs oauth-jwks-file, oauth-jwks-url or oauth-signing-key")
	}
	if o.OAuthJWKSURL != "" {
		if u, err := url.Parse(o.OAuthJWKSURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return invalid(KeyOAuthJWKSURL, o.OAuthJWKSURL, "want an http(s) URL")
		}
	}
	if o.OAuthLeeway < 0 {
		return invalid(KeyOAuthLeeway, o.OAuthLeeway, "want 0 (none) or a positive duration")
	}
	if o.OAuthMaxScopes < 0 {
		return invalid(KeyOAuthMaxScopes, o.OAuthMaxScopes, "want 0 (no limit) or more")
	}
	return nil
}

type TLS struct {
	// TLSListen is the amqps listen address, used when TLSCertFile is set;
	// without it, anything but DefaultTLSListen is refused.
	TLSListen string `mapstructure:"tls-listen"`
	// TLSCertFile and TLSKeyFile are the server's PEM certificate chain and
	// key; setting them turns the amqps listener on, empty means no TLS.
	TLSCertFile string `mapstructure:"tls-cert-file"`
	TLSKeyFile  string `mapstructure:"tls-key-file"`
	// TLSCAFile holds the PEM certificates client certificates are
	// verified against; required by TLSVerifyPeer.
	TLSCAFile string `mapstructure:"tls-ca-file"`
	// TLSVerifyPeer asks clients for a certificate and verifies any they
	// send (ssl_options.verify = verify_peer). Without it no client
	// certificate is requested and SASL EXTERNAL is never offered.
	TLSVerifyPeer bool `mapstructure:"tls-verify-peer"`
	// TLSFailIfNoPeerCert refuses the handshake of a client that sends no
	// certificate (ssl_options.fail_if_no_peer_cert); needs TLSVerifyPeer.
	TLSFailIfNoPeerCert bool `mapstructure:"tls-fail-if-no-peer-cert"`
	// TLSHandshakeTimeout bounds the TLS handshake (RabbitMQ's
	// ssl_handshake_timeout, 5s); positive.
	TLSHandshakeTimeout time.Duration `mapstructure:"tls-handshake-timeout"`
	// SSLCertLoginFrom names the user of a SASL EXTERNAL login:
	// distinguished_name, common_name or subject_alternative_name.
	SSLCertLoginFrom string `mapstructure:"ssl-cert-login-from"`
	// SSLCertLoginSANType (dns, ip, email or uri) and SSLCertLoginSANIndex
	// (0 is the first name of that type) pick the subject alternative name
	// for subject_alternative_name.
	SSLCertLoginSANType  string `mapstructure:"ssl-cert-login-san-type"`
	SSLCertLoginSANIndex int    `mapstructure:"ssl-cert-login-san-index"`
	// HTTPTLS serves the management API over HTTPS with the TLS certificate.
	HTTPTLS bool `mapstructure:"http-tls"`
}

// Telemetry is the tracing and metrics settings (the README's "Tracing and
// metrics" section).
type Telemetry struct {
	// Tracing is "auto" (on when OTEL_TRACES_EXPORTER=otlp), "on" or "off".
	Tracing string `mapstructure:"tracing"`
	// OTLPEndpoint is the OTLP collector's base URL; empty follows
	// OTEL_EXPORTER_OTLP_ENDPOINT and the exporters' defaults.
	OTLPEndpoint string `mapstructure:"otlp-endpoint"`
	// OTLPProtocol is "grpc" or "http/protobuf"; empty follows
	// OTEL_EXPORTER_OTLP_PROTOCOL (default http/protobuf).
	OTLPProtocol string `mapstructure:"otlp-protocol"`
	// Metrics serves Prometheus metrics on the HTTP listener's /metrics.
	Metrics bool `mapstructure:"metrics"`
	// OTLPMetrics also pushes metrics over OTLP.
	OTLPMetrics bool `mapstructure:"otlp-metrics"`
}

// Process is the settings cmd/epitaph applies to its own process: the
// logger and the garbage collector. An embedding program has its own.
type Process struct {
	// GCHeapFloor is the smallest heap goal the garbage collector is given
	// (cmd/epitaph raises GOGC while the live heap is small), in bytes; 0
	// leaves the collector alone. A memory high watermark caps it at half
	// the watermark.
	GCHeapFloor uint64 `mapstructure:"gc-heap-floor"`
	// LogLevel is "debug", "info", "warn" or "error".
	LogLevel string `mapstructure:"log-level"`
	// LogFormat is "text" or "json".
	LogFormat string `mapstructure:"log-format"`
}

// DefaultDataDir is where the store lives when DataDir is empty:
// $XDG_DATA_HOME/epitaph, else ~/.local/share/epitaph, else ./data.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "epitaph")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "share", "epitaph")
	}
	return "data"
}

// Default returns the configuration used when nothing is set: the defaults
// of the README's configuration table.
func Default() Config {
	return Config{
		Listen:                  ":5672",
		HTTPListen:              "127.0.0.1:15672",
		StoreRecovery:           StoreRecoveryStrict,
		DiskFreeLimit:           100 << 20,
		QueueWindowBytes:        4 << 20,
		DeadLetterRetryInterval: 180 * time.Second,
		AuthFailureDelay:        3 * time.Second,
		AuthFailureSources:      10000,
		HTTPGetMaxCount:         10000,
		PeekMaxScan:             10000,
		RedriveTaskRetention:    1000,
		HTTPGetMaxBytes:         16 << 20,

		DeadLetterEventsBuffer:         1024,
		DeadLetterEventsMaxSubscribers: 100,
		DeadLetterEventsHeartbeat:      15 * time.Second,
		WebConsole:                     true,
		AMQP: AMQP{
			Anonymous:                    AnonymousLoopback,
			PermitTransientNonExclQueues: true,
			PlainWithoutTLS:              PlainWithoutTLSLoopback,
			MaxFrameSize:                 131072,
			ChannelMax:                   255,
			AMQP091ChannelMax:            2047,
			HandleMax:                    255,
			IdleTimeout:                  60 * time.Second,
			MaxMessageSize:               16 << 20,
			HandshakeTimeout:             10 * time.Second,
			WriteTimeout:                 30 * time.Second,
			MaxConnections:               10000,
			InitialFrameMax:              8192,
			MaxLinksPerConnection:        4096,
			MaxUnfinishedBytes:           64 << 20,
			MaxUnsettledIncoming:         8192,
			ManagementPendingBytes:       1 << 20,

			FilterSQLMaxLength: 4096,
			FilterSQLMaxTokens: 200,
			FilterSQLMaxDepth:  64,
			FilterMaxFields:    16,
		},
		OAuth: OAuth{
			OAuthVerifyAud: true,
			OAuthMaxScopes: 2048,
		},
		TLS: TLS{
			TLSListen:           DefaultTLSListen,
			TLSHandshakeTimeout: 5 * time.Second,
			SSLCertLoginFrom:    CertLoginDistinguishedName,
			SSLCertLoginSANType: SANTypeDNS,
		},
		Telemetry: Telemetry{Tracing: TracingAuto, Metrics: true},
		Process:   Process{GCHeapFloor: 32 << 20, LogLevel: "info", LogFormat: LogFormatText},
	}
}

// newFlagSet declares one flag per key, with the defaults as flag defaults,
// plus --config.
func newFlagSet(name string) *pflag.FlagSet {
	d := Default()
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String(keyConfig, "", "YAML configuration `file` (env "+EnvPrefix+"_CONFIG)")
	fs.String(KeyListen, d.Listen, "AMQP listen `address` (port 0 picks a free port)")
	fs.String(KeyHTTPListen, d.HTTPListen, "management HTTP API `address`; empty turns it off")
	fs.String(KeyDefinitions, d.DefinitionsFile, "RabbitMQ definitions JSON `file` applied at start")
	fs.Bool(KeyInMemory, d.InMemory, "keep messages and topology in memory only (nothing survives a restart)")
	fs.String(KeyDataDir, d.DataDir, "durable store `directory` (default $XDG_DATA_HOME/epitaph, ~/.local/share/epitaph or ./data)")
	fs.String(KeyStoreRecovery, d.StoreRecovery, "a damaged store: strict refuses to start, salvage starts with what is readable (logged, damaged files kept)")
	fs.Uint64(KeyDiskFreeLimit, d.DiskFreeLimit, "block publishers below this much free disk, in `bytes` (0: no disk alarm)")
	fs.Uint64(KeyMemoryHigh, d.MemoryHighWatermark, "block publishers above this much memory, in `bytes` (0: no memory alarm)")
	fs.Uint64(KeyQueueWindowBytes, d.QueueWindowBytes, "ready message `bytes` each queue keeps in memory; the rest is paged to disk, transient messages included (0: all in memory)")
	fs.Duration(KeyDLRetryInterval, d.DeadLetterRetryInterval, "retry interval for retained at-least-once dead letters")
	fs.Bool(KeyAutoCreateQueues, d.AutoCreateQueues, "declare a classic queue when a link attaches to an unknown bare address")
	fs.Bool(KeyPermitTransientNonExclQueues, d.PermitTransientNonExclQueues, "AMQP 0-9-1 clients may declare non-durable, non-exclusive queues (false: refused with 541, as RabbitMQ 4.3)")
	fs.Bool(KeyStrictParity, d.StrictParity, "write only RabbitMQ 4.3's dead-letter annotations (no x-last-death-error-*)")
	fs.String(KeyAnonymous, d.Anonymous, "accept ANONYMOUS and no-SASL connections from: loopback, all or none")
	fs.Uint32(KeyMaxFrameSize, d.MaxFrameSize, "max-frame-size advertised in open, in `bytes` (at least 512)")
	fs.Uint16(KeyChannelMax, d.ChannelMax, "channel-max advertised in open")
	fs.Uint16(KeyAMQP091ChannelMax, d.AMQP091ChannelMax, "AMQP 0-9-1 channel-max offered in connection.tune")
	fs.Uint32(KeyHandleMax, d.HandleMax, "handle-max advertised in begin")
	fs.Duration(KeyIdleTimeout, d.IdleTimeout, "close connections idle for this `duration`")
	fs.Uint64(KeyMaxMessageSize, d.MaxMessageSize, "max-message-size advertised on attach, in `bytes`")
	fs.Duration(KeyHandshakeTimeout, d.HandshakeTimeout, "time allowed for the protocol header, SASL and open")
	fs.Int(KeyMaxConnections, d.MaxConnections, "most concurrent AMQP connections on this node; beyond it open is answered with close(amqp:resource-limit-exceeded) (0: unlimited)")
	fs.Duration(KeyAuthFailureDelay, d.AuthFailureDelay, "wait this `duration` before answering a failed authentication, times the recent failures from the same address up to 10 (0: no wait)")
	fs.Int(KeyAuthFailureSources, d.AuthFailureSources, "most client addresses whose failed authentications are remembered")
	fs.Int(KeyHTTPGetMaxCount, d.HTTPGetMaxCount, "most messages one HTTP get may ask for (above: 400)")
	fs.Int(KeyPeekMaxScan, d.PeekMaxScan, "most messages one peek tests for its filters before it answers with where to continue")
	fs.Int(KeyRedriveTaskRetention, d.RedriveTaskRetention, "most ended redrive tasks kept; beyond it the oldest ended are removed (0: no limit)")
	fs.Int(KeyHTTPGetMaxBytes, d.HTTPGetMaxBytes, "most payload `bytes` one HTTP get answers with (fewer messages beyond)")
	fs.Int(KeyDLEventsBuffer, d.DeadLetterEventsBuffer, "dead-letter events one subscriber's buffer holds before it loses events (a gap marker)")
	fs.Int(KeyDLEventsMaxSubscribers, d.DeadLetterEventsMaxSubscribers, "most dead-letter event subscribers (AMQP links and HTTP streams) at once (0: no limit)")
	fs.Duration(KeyDLEventsHeartbeat, d.DeadLetterEventsHeartbeat, "how often an idle dead-letter event stream over HTTP gets a heartbeat comment")
	fs.Bool(KeyWebConsole, d.WebConsole, "serve the web console at /console/ on the HTTP listener")
	fs.Int(KeyManagementPendingBytes, d.ManagementPendingBytes, "most `bytes` of /management responses a session holds for a client that does not take them")
	fs.Int(KeyFilterSQLMaxLength, d.FilterSQLMaxLength, "most characters of an SQL filter expression on attach")
	fs.Int(KeyFilterSQLMaxTokens, d.FilterSQLMaxTokens, "most tokens of an SQL filter expression on attach")
	fs.Int(KeyFilterSQLMaxDepth, d.FilterSQLMaxDepth, "deepest nesting (parentheses, NOT, signs) of an SQL filter expression on attach")
	fs.Int(KeyFilterMaxFields, d.FilterMaxFields, "most fields of a properties or application-properties filter on attach")
	fs.Uint64(KeyGCHeapFloor, d.GCHeapFloor, "let garbage build up to this many `bytes` between collections while the live heap is small (0: Go's default GOGC pacing)")
	fs.String(KeyLogLevel, d.LogLevel, "log `level`: debug, info, warn or error")
	fs.String(KeyLogFormat, d.LogFormat, "log `format`: text or json")
	fs.String(KeyTracing, d.Tracing, "OpenTelemetry tracing: auto (on when OTEL_TRACES_EXPORTER=otlp), on or off")
	fs.String(KeyOTLPEndpoint, d.OTLPEndpoint, "OTLP collector base `URL` (default: OTEL_EXPORTER_OTLP_ENDPOINT, else localhost)")
	fs.String(KeyOTLPProtocol, d.OTLPProtocol, "OTLP `protocol`: grpc or http/protobuf (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)")
	fs.Bool(KeyMetrics, d.Metrics, "serve Prometheus metrics at /metrics on the HTTP listener")
	fs.Bool(KeyOTLPMetrics, d.OTLPMetrics, "also export metrics over OTLP")
	fs.Duration(KeyWriteTimeout, d.WriteTimeout, "close a connection whose peer takes no output for this `duration` (it stopped reading)")
	fs.Uint32(KeyInitialFrameMax, d.InitialFrameMax, "largest frame accepted before open (SASL and open), in `bytes` (at least 512)")
	fs.Int(KeyMaxLinksPerConnection, d.MaxLinksPerConnection, "most links attached on one connection, over all its sessions")
	fs.Int64(KeyMaxUnfinishedBytes, d.MaxUnfinishedBytes, "most `bytes` of incomplete multi-frame messages one connection may hold (at least max-message-size)")
	fs.Int(KeyMaxUnsettledIncoming, d.MaxUnsettledIncoming, "most rcv-settle-mode second publishes per session awaiting the client's settlement")
	fs.String(KeyTLSListen, d.TLSListen, "amqps listen `address`, used when tls-cert-file is set (another address without it is refused)")
	fs.String(KeyTLSCertFile, d.TLSCertFile, "PEM certificate (chain) `file`; turns the amqps listener on (reloaded on SIGHUP)")
	fs.String(KeyTLSKeyFile, d.TLSKeyFile, "PEM private key `file` of tls-cert-file")
	fs.String(KeyTLSCAFile, d.TLSCAFile, "PEM CA `file` client certificates are verified against")
	fs.Bool(KeyTLSVerifyPeer, d.TLSVerifyPeer, "request and verify client certificates (enables SASL EXTERNAL)")
	fs.Bool(KeyTLSFailIfNoPeerCert, d.TLSFailIfNoPeerCert, "refuse TLS clients that send no certificate (needs tls-verify-peer)")
	fs.Duration(KeyTLSHandshakeTimeout, d.TLSHandshakeTimeout, "time allowed for the TLS handshake")
	fs.String(KeySSLCertLoginFrom, d.SSLCertLoginFrom, "SASL EXTERNAL user name from: distinguished_name, common_name or subject_alternative_name")
	fs.String(KeySSLCertLoginSANType, d.SSLCertLoginSANType, "subject alternative name type for subject_alternative_name: dns, ip, email or uri")
	fs.Int(KeySSLCertLoginSANIndex, d.SSLCertLoginSANIndex, "which subject alternative name of that type (0 is the first)")
	fs.Bool(KeyHTTPTLS, d.HTTPTLS, "serve the management HTTP API over HTTPS with tls-cert-file")
	fs.String(KeyPlainWithoutTLS, d.PlainWithoutTLS, "accept SASL PLAIN without TLS from: loopback or all")
	fs.String(KeyOAuthResourceServerID, d.OAuthResourceServerID, "OAuth 2 resource server `id`: turns JWT passwords on; the audience and scope prefix")
	fs.String(KeyOAuthJWKSFile, d.OAuthJWKSFile, "JSON Web Key Set `file` of token signing keys")
	fs.String(KeyOAuthJWKSURL, d.OAuthJWKSURL, "JSON Web Key Set `URL` of token signing keys")
	fs.String(KeyOAuthSigningKey, d.OAuthSigningKey, "`file` with a base64 HS256 secret for tokens without a kid")
	fs.String(KeyOAuthExtraScopesField, d.OAuthExtraScopesField, "further token `claims` holding scopes (space-separated dot paths)")
	fs.Bool(KeyOAuthVerifyAud, d.OAuthVerifyAud, "require a token's aud to name the resource server")
	fs.Duration(KeyOAuthLeeway, d.OAuthLeeway, "clock skew `duration` allowed on a token's exp and nbf")
	fs.Int(KeyOAuthMaxScopes, d.OAuthMaxScopes, "most scopes a token may have")
	return fs
}

// Usage returns the flag help text printed for --help.
func Usage() string {
	return newFlagSet("epitaph").FlagUsages()
}

// Load parses args (without the program name), the EPITAPH_* environment
// variables and the YAML file named by --config or EPITAPH_CONFIG, applies
// the defaults, and validates the result.
//
// Flags win over the environment, which wins over the file, which wins over
// the defaults. A set-but-empty environment variable counts as set (so
// EPITAPH_HTTP_LISTEN= turns the HTTP listener off). Bad values yield an
// error wrapping ErrInvalid; --help yields one wrapping ErrHelp.
func Load(args []string) (*Config, error) {
	fs := newFlagSet("epitaph")
	fs.Usage = func() {} // the caller prints Usage on ErrHelp
	fs.SetOutput(discard{})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", ErrInvalid, fs.Arg(0))
	}

	v := viper.New() // never the global instance
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AllowEmptyEnv(true)
	v.AutomaticEnv()

	d := Default()
	defaults := map[string]any{
		KeyListen:                       d.Listen,
		KeyHTTPListen:                   d.HTTPListen,
		KeyDefinitions:                  d.DefinitionsFile,
		KeyInMemory:                     d.InMemory,
		KeyAutoCreateQueues:             d.AutoCreateQueues,
		KeyPermitTransientNonExclQueues: d.PermitTransientNonExclQueues,
		KeyStrictParity:                 d.StrictParity,
		KeyDataDir:                      d.DataDir,
		KeyStoreRecovery:                d.StoreRecovery,
		KeyDiskFreeLimit:                d.DiskFreeLimit,
		KeyMemoryHigh:                   d.MemoryHighWatermark,
		KeyQueueWindowBytes:             d.QueueWindowBytes,
		KeyDLRetryInterval:              d.DeadLetterRetryInterval,
		KeyAnonymous:                    d.Anonymous,
		KeyMaxFrameSize:                 d.MaxFrameSize,
		KeyChannelMax:                   d.ChannelMax,
		KeyAMQP091ChannelMax:            d.AMQP091ChannelMax,
		KeyHandleMax:                    d.HandleMax,
		KeyIdleTimeout:                  d.IdleTimeout,
		KeyMaxMessageSize:               d.MaxMessageSize,
		KeyHandshakeTimeout:             d.HandshakeTimeout,
		KeyMaxConnections:               d.MaxConnections,
		KeyGCHeapFloor:                  d.GCHeapFloor,
		KeyLogLevel:                     d.LogLevel,
		KeyLogFormat:                    d.LogFormat,
		KeyTracing:                      d.Tracing,
		KeyOTLPEndpoint:                 d.OTLPEndpoint,
		KeyOTLPProtocol:                 d.OTLPProtocol,
		KeyMetrics:                      d.Metrics,
		KeyOTLPMetrics:                  d.OTLPMetrics,
		KeyWriteTimeout:                 d.WriteTimeout,

		KeyAuthFailureDelay:   d.AuthFailureDelay,
		KeyAuthFailureSources: d.AuthFailureSources,

		KeyHTTPGetMaxCount:        d.HTTPGetMaxCount,
		KeyPeekMaxScan:            d.PeekMaxScan,
		KeyRedriveTaskRetention:   d.RedriveTaskRetention,
		KeyHTTPGetMaxBytes:        d.HTTPGetMaxBytes,
		KeyManagementPendingBytes: d.ManagementPendingBytes,
		KeyFilterSQLMaxLength:     d.FilterSQLMaxLength,
		KeyFilterSQLMaxTokens:     d.FilterSQLMaxTokens,
		KeyFilterSQLMaxDepth:      d.FilterSQLMaxDepth,
		KeyFilterMaxFields:        d.FilterMaxFields,
		KeyDLEventsBuffer:         d.DeadLetterEventsBuffer,
		KeyDLEventsMaxSubscribers: d.DeadLetterEventsMaxSubscribers,
		KeyDLEventsHeartbeat:      d.DeadLetterEventsHeartbeat,
		KeyWebConsole:             d.WebConsole,
		KeyInitialFrameMax:        d.InitialFrameMax,
		KeyMaxLinksPerConnection:  d.MaxLinksPerConnection,
		KeyMaxUnfinishedBytes:     d.MaxUnfinishedBytes,
		KeyMaxUnsettledIncoming:   d.MaxUnsettledIncoming,
		KeyTLSListen:              d.TLSListen,
		KeyTLSCertFile:            d.TLSCertFile,
		KeyTLSKeyFile:             d.TLSKeyFile,
		KeyTLSCAFile:              d.TLSCAFile,
		KeyTLSVerifyPeer:          d.TLSVerifyPeer,
		KeyTLSFailIfNoPeerCert:    d.TLSFailIfNoPeerCert,
		KeyTLSHandshakeTimeout:    d.TLSHandshakeTimeout,
		KeySSLCertLoginFrom:       d.SSLCertLoginFrom,
		KeySSLCertLoginSANType:    d.SSLCertLoginSANType,
		KeySSLCertLoginSANIndex:   d.SSLCertLoginSANIndex,
		KeyHTTPTLS:                d.HTTPTLS,
		KeyPlainWithoutTLS:        d.PlainWithoutTLS,
		KeyOAuthResourceServerID:  d.OAuthResourceServerID,
		KeyOAuthJWKSFile:          d.OAuthJWKSFile,
		KeyOAuthJWKSURL:           d.OAuthJWKSURL,
		KeyOAuthSigningKey:        d.OAuthSigningKey,
		KeyOAuthExtraScopesField:  d.OAuthExtraScopesField,
		KeyOAuthVerifyAud:         d.OAuthVerifyAud,
		KeyOAuthLeeway:            d.OAuthLeeway,
		KeyOAuthMaxScopes:         d.OAuthMaxScopes,
	}
	for key, def := range defaults {
		// Unmarshal only sees environment variables for keys viper
		// already knows, so register every key explicitly.
		v.SetDefault(key, def)
		if err := v.BindEnv(key); err != nil {
			return nil, fmt.Errorf("config: bind env for %s: %w", key, err)
		}
		if err := v.BindPFlag(key, fs.Lookup(key)); err != nil {
			return nil, fmt.Errorf("config: bind flag %s: %w", key, err)
		}
	}

	file, _ := fs.GetString(keyConfig)
	if !fs.Changed(keyConfig) {
		if env, ok := os.LookupEnv(EnvPrefix + "_CONFIG"); ok {
			file = env
		}
	}
	if file != "" {
		v.SetConfigFile(file)
		v.SetConfigType("yaml") // whatever the extension; JSON is YAML too
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("config: read %s: %w", file, err)
		}
	}

	var c Config
	if err := v.UnmarshalExact(&c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c.Anonymous = strings.ToLower(strings.TrimSpace(c.Anonymous))
	c.StoreRecovery = strings.ToLower(strings.TrimSpace(c.StoreRecovery))
	c.LogLevel = strings.ToLower(strings.TrimSpace(c.LogLevel))
	c.LogFormat = strings.ToLower(strings.TrimSpace(c.LogFormat))
	c.Tracing = strings.ToLower(strings.TrimSpace(c.Tracing))
	c.OTLPProtocol = strings.ToLower(strings.TrimSpace(c.OTLPProtocol))
	c.OTLPEndpoint = strings.TrimSpace(c.OTLPEndpoint)
	c.SSLCertLoginFrom = strings.ToLower(strings.TrimSpace(c.SSLCertLoginFrom))
	c.SSLCertLoginSANType = strings.ToLower(strings.TrimSpace(c.SSLCertLoginSANType))
	c.PlainWithoutTLS = strings.ToLower(strings.TrimSpace(c.PlainWithoutTLS))
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate reports the first invalid field, wrapping ErrInvalid.
func (c *Config) Validate() error {
	if c.Listen != "" || c.TLSCertFile == "" {
		// Empty turns the plain listener off, when there is a TLS one.
		if err := validAddr(KeyListen, c.Listen); err != nil {
			return err
		}
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if err := c.OAuth.Validate(); err != nil {
		return err
	}
	if c.HTTPListen != "" {
		if err := validAddr(KeyHTTPListen, c.HTTPListen); err != nil {
			return err
		}
	}
	switch c.StoreRecovery {
	case StoreRecoveryStrict, StoreRecoverySalvage:
	default:
		return invalid(KeyStoreRecovery, c.StoreRecovery, "want strict or salvage")
	}
	switch c.Anonymous {
	case AnonymousLoopback, AnonymousAll, AnonymousNone:
	default:
		return invalid(KeyAnonymous, c.Anonymous, "want loopback, all or none")
	}
	if c.MaxFrameSize < MinMaxFrameSize {
		return invalid(KeyMaxFrameSize, c.MaxFrameSize, fmt.Sprintf("want at least %d", MinMaxFrameSize))
	}
	if c.ChannelMax == 0 {
		return invalid(KeyChannelMax, c.ChannelMax, "want at least 1")
	}
	if c.AMQP091ChannelMax == 0 {
		return invalid(KeyAMQP091ChannelMax, c.AMQP091ChannelMax, "want at least 1")
	}
	if c.HandleMax == 0 {
		return invalid(KeyHandleMax, c.HandleMax, "want at least 1")
	}
	if c.IdleTimeout < time.Millisecond {
		return invalid(KeyIdleTimeout, c.IdleTimeout, "want at least 1ms")
	}
	if ms := c.IdleTimeout.Milliseconds(); ms > 1<<32-1 {
		return invalid(KeyIdleTimeout, c.IdleTimeout, "does not fit the 32-bit idle-time-out in milliseconds")
	}
	if c.MaxMessageSize == 0 {
		return invalid(KeyMaxMessageSize, c.MaxMessageSize, "want at least 1")
	}
	if c.InitialFrameMax < MinMaxFrameSize {
		return invalid(KeyInitialFrameMax, c.InitialFrameMax, fmt.Sprintf("want at least %d", MinMaxFrameSize))
	}
	if c.MaxLinksPerConnection < 1 {
		return invalid(KeyMaxLinksPerConnection, c.MaxLinksPerConnection, "want at least 1")
	}
	if c.MaxUnfinishedBytes < 0 || uint64(c.MaxUnfinishedBytes) < c.MaxMessageSize {
		return invalid(KeyMaxUnfinishedBytes, c.MaxUnfinishedBytes,
			fmt.Sprintf("want at least max-message-size (%d): a multi-frame message of that size must fit", c.MaxMessageSize))
	}
	if c.MaxUnsettledIncoming < 1 {
		return invalid(KeyMaxUnsettledIncoming, c.MaxUnsettledIncoming, "want at least 1")
	}
	if c.DeadLetterRetryInterval <= 0 {
		return invalid(KeyDLRetryInterval, c.DeadLetterRetryInterval, "want a positive duration")
	}
	if c.HandshakeTimeout <= 0 {
		return invalid(KeyHandshakeTimeout, c.HandshakeTimeout, "want a positive duration")
	}
	if c.WriteTimeout <= 0 {
		return invalid(KeyWriteTimeout, c.WriteTimeout, "want a positive duration")
	}
	if c.MaxConnections < 0 {
		return invalid(KeyMaxConnections, c.MaxConnections, "want 0 (unlimited) or more")
	}
	if c.AuthFailureDelay < 0 {
		return invalid(KeyAuthFailureDelay, c.AuthFailureDelay, "want 0 (no wait) or a positive duration")
	}
	if c.AuthFailureSources < 1 {
		return invalid(KeyAuthFailureSources, c.AuthFailureSources, "want 1 or more")
	}
	if c.HTTPGetMaxCount < 1 {
		return invalid(KeyHTTPGetMaxCount, c.HTTPGetMaxCount, "want 1 or more")
	}
	if c.PeekMaxScan < 1 {
		return invalid(KeyPeekMaxScan, c.PeekMaxScan, "want 1 or more")
	}
	if c.RedriveTaskRetention < 0 {
		return invalid(KeyRedriveTaskRetention, c.RedriveTaskRetention, "want 0 (no limit) or more")
	}
	if c.HTTPGetMaxBytes < 1 {
		return invalid(KeyHTTPGetMaxBytes, c.HTTPGetMaxBytes, "want 1 or more")
	}
	if c.DeadLetterEventsBuffer < 1 {
		return invalid(KeyDLEventsBuffer, c.DeadLetterEventsBuffer, "want 1 or more")
	}
	if c.DeadLetterEventsMaxSubscribers < 0 {
		return invalid(KeyDLEventsMaxSubscribers, c.DeadLetterEventsMaxSubscribers, "want 0 (no limit) or more")
	}
	if c.DeadLetterEventsHeartbeat <= 0 {
		return invalid(KeyDLEventsHeartbeat, c.DeadLetterEventsHeartbeat, "want a positive duration")
	}
	if c.ManagementPendingBytes < 1 {
		return invalid(KeyManagementPendingBytes, c.ManagementPendingBytes, "want 1 or more")
	}
	for _, l := range []struct {
		key string
		v   int
	}{{KeyFilterSQLMaxLength, c.FilterSQLMaxLength}, {KeyFilterSQLMaxTokens, c.FilterSQLMaxTokens},
		{KeyFilterSQLMaxDepth, c.FilterSQLMaxDepth}, {KeyFilterMaxFields, c.FilterMaxFields}} {
		if l.v < 1 {
			return invalid(l.key, l.v, "want 1 or more")
		}
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		return err
	}
	switch c.LogFormat {
	case LogFormatText, LogFormatJSON:
	default:
		return invalid(KeyLogFormat, c.LogFormat, "want text or json")
	}
	switch c.Tracing {
	case TracingAuto, TracingOn, TracingOff:
	default:
		return invalid(KeyTracing, c.Tracing, "want auto, on or off")
	}
	switch c.OTLPProtocol {
	case "", OTLPGRPC, OTLPHTTP:
	default:
		return invalid(KeyOTLPProtocol, c.OTLPProtocol, "want grpc or http/protobuf")
	}
	if c.OTLPEndpoint != "" {
		raw := c.OTLPEndpoint
		if !strings.Contains(raw, "://") {
			raw = "http://" + raw
		}
		if u, err := url.Parse(raw); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return invalid(KeyOTLPEndpoint, c.OTLPEndpoint, "want http(s)://host:port or host:port")
		}
	}
	return nil
}

// validateTLS checks the TLS keys and the settings that depend on TLS.
func (c *Config) validateTLS() error {
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if c.HTTPTLS && c.TLSCertFile == "" {
		return invalid(KeyHTTPTLS, c.HTTPTLS, "needs tls-cert-file")
	}
	switch c.PlainWithoutTLS {
	case PlainWithoutTLSLoopback, PlainWithoutTLSAll:
	default:
		return invalid(KeyPlainWithoutTLS, c.PlainWithoutTLS, "want loopback or all")
	}
	return nil
}

// Validate reports the first invalid TLS setting, wrapping ErrInvalid.
func (t *TLS) Validate() error {
	if (t.TLSCertFile == "") != (t.TLSKeyFile == "") {
		return invalid(KeyTLSKeyFile, t.TLSKeyFile, "tls-cert-file and tls-key-file go together")
	}
	if t.TLSCertFile != "" {
		if err := validAddr(KeyTLSListen, t.TLSListen); err != nil {
			return err
		}
	} else if t.TLSListen != DefaultTLSListen {
		// An address of one's own choosing says TLS was meant to be on.
		return invalid(KeyTLSListen, t.TLSListen, "needs tls-cert-file")
	}
	if t.TLSVerifyPeer && t.TLSCAFile == "" {
		return invalid(KeyTLSCAFile, t.TLSCAFile, "tls-verify-peer needs a CA file")
	}
	if t.TLSFailIfNoPeerCert && !t.TLSVerifyPeer {
		// Erlang's ssl refuses the same combination.
		return invalid(KeyTLSFailIfNoPeerCert, t.TLSFailIfNoPeerCert, "needs tls-verify-peer")
	}
	if t.TLSHandshakeTimeout <= 0 {
		return invalid(KeyTLSHandshakeTimeout, t.TLSHandshakeTimeout, "want a positive duration")
	}
	switch t.SSLCertLoginFrom {
	case CertLoginDistinguishedName, CertLoginCommonName, CertLoginSAN:
	default:
		return invalid(KeySSLCertLoginFrom, t.SSLCertLoginFrom, "want distinguished_name, common_name or subject_alternative_name")
	}
	switch t.SSLCertLoginSANType {
	case SANTypeDNS, SANTypeIP, SANTypeEmail, SANTypeURI:
	default:
		return invalid(KeySSLCertLoginSANType, t.SSLCertLoginSANType, "want dns, ip, email or uri")
	}
	if t.SSLCertLoginSANIndex < 0 {
		return invalid(KeySSLCertLoginSANIndex, t.SSLCertLoginSANIndex, "want 0 or more")
	}
	return nil
}

// SlogLevel returns LogLevel as a slog.Level (Info if it is invalid).
func (c *Config) SlogLevel() slog.Level {
	l, err := ParseLogLevel(c.LogLevel)
	if err != nil {
		return slog.LevelInfo
	}
	return l
}

// ParseLogLevel maps "debug", "info", "warn" and "error" to slog levels.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, invalid(KeyLogLevel, s, "want debug, info, warn or error")
}

func validAddr(key, addr string) error {
	if addr == "" {
		return invalid(key, addr, "want host:port")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrInvalid, key, addr, err)
	}
	return nil
}

func invalid(key string, val any, why string) error {
	return fmt.Errorf("%w: %s=%q: %s", ErrInvalid, key, fmt.Sprint(val), why)
}

// discard is an io.Writer that drops pflag's own error and usage output.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
