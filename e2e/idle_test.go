package e2e

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
	"github.com/epitaph-mq/epitaph/amqp10"
)

// The broker sends heartbeats at half the peer's idle-time-out.
func TestHeartbeatsSent(t *testing.T) {
	b := startBroker(t, "")
	r := rawDial(t, b)
	o := r.openWith(&amqp10.Open{ContainerID: "raw", MaxFrameSize: 65536, IdleTimeOut: 1000})
	assert.Equal(t, uint32(30000), o.IdleTimeOut, "we advertise half our 60 s threshold")
	require.NoError(t, r.nc.SetReadDeadline(time.Now().Add(2*time.Second)))
	var h [8]byte
	_, err := io.ReadFull(r.nc, h[:])
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 8, 2, 0, 0, 0}, h[:], "an empty frame")
}

// A client that sends nothing within the idle timeout is closed with
// resource-limit-exceeded.
func TestIdleTimeoutEnforced(t *testing.T) {
	b := startBroker(t, "", func(o *epitaph.Options) { o.IdleTimeout = 300 * time.Millisecond })
	r := rawDial(t, b)
	r.open()
	assert.Equal(t, amqp10.ErrCondResourceLimitExceeded, r.expectClose())
}
