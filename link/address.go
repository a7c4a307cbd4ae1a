package link

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/epitaph-mq/epitaph/router"
)

// addrKind is what an AMQP address names.
type addrKind uint8

const (
	addrQueue      addrKind = iota // a queue, through the default exchange
	addrExchange                   // an exchange, with an optional routing key
	addrManagement                 // the /management node
	addrEvents                     // the dead-letter event stream (queue: "" for the whole vhost)
)

// address is a parsed RabbitMQ address (v2 "/queues/{q}", "/exchanges/{x}[/{key}]",
// the legacy v1 forms, or a bare queue name).
type address struct {
	kind     addrKind
	queue    string
	exchange string
	key      string
	hasKey   bool
	bare     bool // a bare name, not an address form
}

var errBadAddress = errors.New("link: bad address")

// eventsAddress is the source of the dead-letter event stream of the
// connection's vhost; eventsAddress/{queue} (percent-encoded, as in
// /queues/{queue}) is that of one queue.
const eventsAddress = "/events/dead-letters"

// parseAddress parses a terminus or properties.to address. Path segments are
// percent-decoded as RabbitMQ's rabbit_uri:urldecode does.
func parseAddress(s string) (address, error) {
	a, err := parseAddressForm(s)
	if err != nil {
		return a, err
	}
	// Names are checked as every other way in checks them, so that a name
	// no declaration could create is refused as an address, not looked up.
	if a.kind == addrQueue || (a.kind == addrEvents && a.queue != "") {
		err = router.ValidateName("queue", a.queue)
	} else if a.kind == addrExchange {
		err = router.ValidateName("exchange", a.exchange)
	}
	if err != nil {
		return address{}, fmt.Errorf("%w: %w", errBadAddress, err)
	}
	return a, nil
}

func parseAddressForm(s string) (address, error) {
	switch {
	case s == "/management":
		return address{kind: addrManagement}, nil
	case s == eventsAddress:
		return address{kind: addrEvents}, nil
	case strings.HasPrefix(s, eventsAddress+"/"):
		q, err := segment(s[len(eventsAddress)+1:], false)
		if err != nil {
			return address{}, fmt.Errorf("%w %q: %w", errBadAddress, s, err)
		}
		return address{kind: addrEvents, queue: q}, nil
	case strings.HasPrefix(s, "/queues/"):
		q, err := segment(s[len("/queues/"):], false)
		if err != nil {
			return address{}, fmt.Errorf("%w %q: %w", errBadAddress, s, err)
		}
		return address{kind: addrQueue, queue: q}, nil
	case strings.HasPrefix(s, "/exchanges/"):
		rest := s[len("/exchanges/"):]
		xs, ks, hasKey := strings.Cut(rest, "/")
		x, err := segment(xs, true)
		if err != nil {
			return address{}, fmt.Errorf("%w %q: %w", errBadAddress, s, err)
		}
		a := address{kind: addrExchange, exchange: x, hasKey: hasKey}
		if hasKey {
			if a.key, err = segment(ks, true); err != nil {
				return address{}, fmt.Errorf("%w %q: %w", errBadAddress, s, err)
			}
		}
		if x == "amq.default" {
			a.exchange = ""
		}
		return a, nil
	// Legacy (v1) address forms, still accepted by RabbitMQ 4.
	case strings.HasPrefix(s, "/amq/queue/"):
		return address{kind: addrQueue, queue: s[len("/amq/queue/"):]}, nil
	case strings.HasPrefix(s, "/queue/"):
		return address{kind: addrQueue, queue: s[len("/queue/"):]}, nil
	case strings.HasPrefix(s, "/topic/"):
		return address{kind: addrExchange, exchange: "amq.topic", key: s[len("/topic/"):], hasKey: true}, nil
	case strings.HasPrefix(s, "/exchange/"):
		x, k, hasKey := strings.Cut(s[len("/exchange/"):], "/")
		return address{kind: addrExchange, exchange: x, key: k, hasKey: hasKey}, nil
	case s == "" || strings.HasPrefix(s, "/"):
		return address{}, fmt.Errorf("%w %q", errBadAddress, s)
	}
	return address{kind: addrQueue, queue: s, bare: true}, nil
}

// segment percent-decodes one path segment; empty segments are refused
// unless allowEmpty (the default exchange "" and the empty routing key).
func segment(s string, allowEmpty bool) (string, error) {
	if strings.Contains(s, "/") {
		return "", errors.New("unexpected '/'")
	}
	v, err := url.PathUnescape(s)
	if err != nil {
		return "", err
	}
	if v == "" && !allowEmpty {
		return "", errors.New("empty name")
	}
	return v, nil
}
