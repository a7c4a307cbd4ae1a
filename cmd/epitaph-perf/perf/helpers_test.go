package perf

import (
	"os"

	"github.com/epitaph-mq/epitaph/amqp10"
)

func osGetpid() int { return os.Getpid() }

func dataSection(body []byte) []byte { return amqp10.AppendData(nil, body) }
