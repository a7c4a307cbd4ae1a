package e2e

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/go-amqp"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/config"
	"github.com/epitaph-mq/epitaph/internal/testhooks"
)

// The embedding API's defaults are the configuration table's: one
// definition, so a program and the command start from the same values.
func TestDefaultOptionsAreTheConfigurationDefaults(t *testing.T) {
	require.Equal(t, config.Default(), epitaph.DefaultOptions().Config)
}

// A zero Options is not "all defaults": zero never means the default, so
// Start refuses it, naming the first setting a zero does not fit.
func TestStartRefusesZeroOptions(t *testing.T) {
	_, err := epitaph.Start(epitaph.Options{})
	require.ErrorIs(t, err, epitaph.ErrInvalidOptions)
	require.ErrorIs(t, err, config.ErrInvalid)
	require.ErrorContains(t, err, config.KeyListen)

	noShutdownTimeout := testOptions()
	noShutdownTimeout.ShutdownTimeout = 0
	_, err = epitaph.Start(noShutdownTimeout)
	require.ErrorIs(t, err, epitaph.ErrInvalidOptions)
}

// What only this module's tests may replace (the alarms' readings) is not
// an exported field of Options: no exported field, in Options or in the
// settings it embeds, holds a function.
func TestOptionsExportNoTestHooks(t *testing.T) {
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			require.NotEqual(t, reflect.Func, f.Type.Kind(), "%s%s is a function", path, f.Name)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, path+f.Name+".")
			}
		}
	}
	walk(reflect.TypeFor[epitaph.Options](), "Options.")
}

// disk-free-limit 0 turns the disk alarm off in Options as in the file: a
// file system with no free space at all blocks no publisher. The default
// limit, with the same reading, raises the alarm.
func TestOptionsDiskFreeLimitZeroTurnsTheAlarmOff(t *testing.T) {
	full := testhooks.Alarms{DiskFree: func(string) (uint64, error) { return 0, nil }, Interval: time.Hour}
	withDefault := startBroker(t, oneQueue, func(o *epitaph.Options) {
		o.InMemory, o.DataDir = false, t.TempDir()
		testhooks.SetAlarms(o, full)
	})
	require.True(t, withDefault.Router().Alarms().Check().Disk, "the default limit with no free space")

	off := startBroker(t, oneQueue, func(o *epitaph.Options) {
		o.InMemory, o.DataDir, o.DiskFreeLimit = false, t.TempDir(), 0
		testhooks.SetAlarms(o, full)
	})
	require.False(t, off.Router().Alarms().Check().Disk)
	snd := sender(t, session(t, dial(t, off, nil)), "/queues/q", nil)
	require.IsType(t, &amqp.StateAccepted{}, send(t, snd, amqp.NewMessage([]byte("m"))))
}

// auth-failure-delay 0 answers a failed authentication at once, in
// Options as in the file; the default waits 3s times the failures.
func TestOptionsAuthFailureDelayZeroMeansNoWait(t *testing.T) {
	src := netip.MustParseAddr("192.0.2.7")
	withDefault := startBroker(t, "")
	require.Equal(t, 3*time.Second, withDefault.Auth().LoginFailed(src))

	none := startBroker(t, "", func(o *epitaph.Options) { o.AuthFailureDelay = 0 })
	require.Zero(t, none.Auth().LoginFailed(src))
	require.Zero(t, none.Auth().LoginFailed(src), "nor after a second failure")
}
