package e2e

import (
	"net/http"
	"net/url"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The HTTP API lists an AMQP 0-9-1 connection's channels as RabbitMQ 4.3
// does (GET /api/channels, per vhost and per connection): number,
// consumers, unacknowledged deliveries, prefetch, confirm and tx modes.
func TestHTTPListsAMQP091Channels(t *testing.T) {
	b := startBroker(t, redriveTopology, withHTTP)
	base := apiServer(t, b)
	c := dial091(t, b)
	confirming := channel091(t, c)
	require.NoError(t, confirming.Confirm(false))
	consuming := channel091(t, c)
	require.NoError(t, consuming.Tx())
	require.NoError(t, consuming.Qos(10, 0, false))
	require.NoError(t, confirming.PublishWithContext(ctxT(t), "", "dlq", false, false, amqp091.Publishing{Body: []byte("x")}))
	ds, err := consuming.Consume("dlq", "", false, false, false, false, nil)
	require.NoError(t, err)
	recv091(t, ds)

	var chans []map[string]any
	eventually(t, "two channels, one with an unacknowledged delivery", func() bool {
		chans = apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/channels", nil, http.StatusOK))
		return len(chans) == 2 && chans[1]["messages_unacknowledged"] == float64(1)
	})
	conn := chans[0]["connection_details"].(map[string]any)["name"].(string)
	assert.Equal(t, conn+" (1)", chans[0]["name"])
	assert.Equal(t, float64(1), chans[0]["number"])
	assert.Equal(t, true, chans[0]["confirm"])
	assert.Equal(t, false, chans[0]["transactional"])
	assert.Equal(t, float64(0), chans[0]["consumer_count"])
	assert.Equal(t, float64(2), chans[1]["number"])
	assert.Equal(t, true, chans[1]["transactional"])
	assert.Equal(t, float64(1), chans[1]["consumer_count"])
	assert.Equal(t, float64(10), chans[1]["prefetch_count"])
	assert.Equal(t, "guest", chans[1]["user"])
	assert.Equal(t, "/", chans[1]["vhost"])

	perConn := apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/connections/"+url.PathEscape(conn)+"/channels", nil, http.StatusOK))
	assert.Len(t, perConn, 2)
	perVHost := apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/vhosts/%2f/channels", nil, http.StatusOK))
	assert.Len(t, perVHost, 2)

	require.NoError(t, confirming.Close())
	eventually(t, "the closed channel gone from the list", func() bool {
		chans = apiJSON[[]map[string]any](t, api(t, base, "GET", "/api/channels", nil, http.StatusOK))
		return len(chans) == 1 && chans[0]["number"] == float64(2)
	})
}
