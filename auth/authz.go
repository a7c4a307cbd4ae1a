package auth

import (
	"fmt"
	"regexp"
	"sync"

	"github.com/epitaph-mq/epitaph/router"
)

// Access is a RabbitMQ permission kind.
type Access uint8

// Access kinds (RabbitMQ's configure/write/read).
const (
	Configure Access = iota
	Write
	Read
)

func (a Access) String() string {
	switch a {
	case Configure:
		return "configure"
	case Write:
		return "write"
	case Read:
		return "read"
	}
	return "unknown"
}

// Resource kinds for Authorize.
const (
	ResourceQueue    = "queue"
	ResourceExchange = "exchange"
)

// permRegexps caches compiled permission patterns.
var permRegexps sync.Map // string -> *regexp.Regexp (nil for an invalid pattern)

func permMatch(pattern, name string) bool {
	if pattern == "" {
		return false // RabbitMQ: the empty pattern grants nothing
	}
	if pattern == ".*" {
		// The default permission, checked on every AMQP 0-9-1 publish:
		// ^(?:.*) matches the empty prefix of any name, so no regexp runs.
		return true
	}
	v, ok := permRegexps.Load(pattern)
	if !ok {
		re, err := regexp.Compile("^(?:" + pattern + ")")
		if err != nil {
			re = nil
		}
		v, _ = permRegexps.LoadOrStore(pattern, re)
	}
	re, _ := v.(*regexp.Regexp)
	return re != nil && re.MatchString(name)
}

// Authorize checks that user may access (configure, write or read) the
// named queue or exchange in vhost, as RabbitMQ's permission regexps do. The
// default exchange "" is checked under the name "amq.default". A user
// without a permission entry for vhost may do nothing there, also when no
// permission is defined at all. A refusal wraps router.ErrAccessRefused.
func (r *Registry) Authorize(user, vhost, kind, name string, a Access) error {
	if kind == ResourceExchange && name == "" {
		name = "amq.default"
	}
	r.mu.RLock()
	p, has := r.perms[user][vhost]
	r.mu.RUnlock()
	if has && r.vhostExists(vhost) {
		var pattern string
		switch a {
		case Configure:
			pattern = p.Configure
		case Write:
			pattern = p.Write
		case Read:
			pattern = p.Read
		}
		if permMatch(pattern, name) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s access to %s '%s' in vhost '%s' refused for user '%s'",
		router.ErrAccessRefused, a, kind, name, vhost, user)
}

// GrantsRead reports whether user's read permission in vhost can match
// any name: a permission entry with a non-empty read pattern (the empty
// pattern grants nothing). Streams that show only what the user may read
// (the vhost's dead-letter events) are refused when it cannot.
func (r *Registry) GrantsRead(user, vhost string) bool {
	r.mu.RLock()
	p, ok := r.perms[user][vhost]
	r.mu.RUnlock()
	return ok && p.Read != "" && r.vhostExists(vhost)
}

// CanAccessVHost reports whether user may use vhost: the user has a
// permission entry for it. No entry grants nothing, even when the
// permission table is empty (the first-start default is a real entry:
// SeedDefaults).
func (r *Registry) CanAccessVHost(user, vhost string) bool {
	r.mu.RLock()
	_, ok := r.perms[user][vhost]
	r.mu.RUnlock()
	return ok && r.vhostExists(vhost)
}
