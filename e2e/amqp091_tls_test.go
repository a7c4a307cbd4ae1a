package e2e

import (
	"crypto/x509/pkix"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// TestAMQP091OverTLS: the amqps listener serves AMQP 0-9-1 too; a verified
// client certificate logs in with EXTERNAL as the user it names.
func TestAMQP091OverTLS(t *testing.T) {
	f := newTLSFixture(t)
	defs := `{"vhosts":[{"name":"/"}],"users":[{"name":"app","tags":[]}],
		"permissions":[{"user":"app","vhost":"/","configure":".*","write":".*","read":".*"}]}`
	b := startBroker(t, defs, f.options, func(o *epitaph.Options) { o.SSLCertLoginFrom = "common_name" })
	_, _, client := f.ca.issue(t, leafSpec{subject: pkix.Name{CommonName: "app"}, client: true})
	cfg := f.clientConfig(client)
	c, err := amqp091.DialConfig("amqps://"+b.TLSAddr().String()+"/", amqp091.Config{
		TLSClientConfig: cfg, SASL: []amqp091.Authentication{&amqp091.ExternalAuth{}}})
	require.NoError(t, err)
	defer c.Close()
	ch, err := c.Channel()
	require.NoError(t, err)
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(ctxT(t), "", q.Name, false, false, amqp091.Publishing{Body: []byte("secure")}))
	d := get091(t, ch, q.Name, true)
	assert.Equal(t, "secure", string(d.Body))
}
