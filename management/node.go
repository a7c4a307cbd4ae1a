package management

import (
	"os"
	"strings"
	"sync"
)

// NodeName is this broker's node name, as both management APIs report it
// (a queue's leader and replicas, /api/overview, alarms, connections):
// "epitaph@" and the short host name (up to its first dot), as RabbitMQ
// names its node "rabbit@" and `hostname -s`. It is the one definition, so the AMQP management node and
// the HTTP API always agree.
func NodeName() string { return nodeName() }

var nodeName = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host, _, _ = strings.Cut(host, ".")
	return "epitaph@" + host
})
