package router

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLength is the longest queue, exchange or vhost name, in bytes:
// RabbitMQ's names are AMQP 0-9-1 short strings.
const MaxNameLength = 255

// ValidateName checks a queue, exchange or vhost name (kind says which, for
// the error): at most MaxNameLength bytes of valid UTF-8, without NUL
// (which the store uses as a separator). A refusal wraps
// ErrInvalidArgument and does not quote the name, which may be huge.
func ValidateName(kind, name string) error {
	switch {
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w: %s name is %d bytes long, the limit is %d", ErrInvalidArgument, kind, len(name), MaxNameLength)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s name is not valid UTF-8", ErrInvalidArgument, kind)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s name contains NUL", ErrInvalidArgument, kind)
	}
	return nil
}

// CreateVHost is AddVHost for names from outside (API, definitions): the
// name must be non-empty and pass ValidateName.
func (b *Broker) CreateVHost(name string) (*VHost, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: vhost name is empty", ErrInvalidArgument)
	}
	if err := ValidateName("vhost", name); err != nil {
		return nil, err
	}
	return b.AddVHost(name), nil
}
