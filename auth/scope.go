package auth

import (
	"net/url"
	"strings"
)

// scopeGrant is one permission scope of a token, after the resource
// server's prefix is taken off: "read:<vhost>/<name>[/<routing-key>]" (or
// write, configure). Each pattern is RabbitMQ's wildcard syntax.
type scopeGrant struct {
	access  Access
	vhost   string
	name    string
	routing string // "" when the scope has no routing-key part
}

// parseScope reads one unprefixed scope as RabbitMQ's
// rabbit_oauth2_scope:parse_permission_pattern does: a permission, a
// colon, then two or three patterns split on "/". Anything else (tags,
// scopes of other services, a wrong number of parts) grants nothing.
func parseScope(s string) (scopeGrant, bool) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		return scopeGrant{}, false
	}
	var g scopeGrant
	switch kind {
	case "read":
		g.access = Read
	case "write":
		g.access = Write
	case "configure":
		g.access = Configure
	default:
		return scopeGrant{}, false
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 2:
		g.vhost, g.name = parts[0], parts[1]
	case 3:
		g.vhost, g.name, g.routing = parts[0], parts[1], parts[2]
	default:
		return scopeGrant{}, false
	}
	return g, true
}

// wildcardMatch is RabbitMQ's scope pattern match (its wildcard module):
// the pattern is split on "*", each part is URL-decoded (so "%2F" stands
// for "/" and "+" for a space; a malformed escape matches nothing), the
// first part must start the subject, and each later part is looked for at
// its leftmost place after the one before. That leftmost search is
// RabbitMQ's, not a full glob: "a*b" does not match "abab", because the
// first "b" found leaves "ab" over.
func wildcardMatch(subject, pattern string) bool {
	raw := strings.Split(pattern, "*")
	parts := make([]string, len(raw))
	for i, p := range raw {
		d, err := url.QueryUnescape(p)
		if err != nil {
			return false
		}
		parts[i] = d
	}
	if !strings.HasPrefix(subject, parts[0]) {
		return false
	}
	pos := len(parts[0])
	rest := parts[1:]
	for {
		switch {
		case len(rest) == 1 && rest[0] == "":
			return true // the pattern ends with a wildcard
		case len(rest) == 0:
			return pos == len(subject)
		case pos == len(subject):
			return false
		case rest[0] == "":
			rest = rest[1:] // consecutive wildcards
			continue
		}
		i := strings.Index(subject[pos:], rest[0])
		if i < 0 {
			return false
		}
		pos += i + len(rest[0])
		rest = rest[1:]
	}
}

// splitScopes splits a space-separated scope string, dropping empty parts
// (RabbitMQ's binary:split with trim_all).
func splitScopes(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, " ") {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
