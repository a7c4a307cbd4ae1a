package router

import (
	"fmt"
	"strings"

	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/value"
)

// ---- topic ----

// splitTopic splits a routing key or binding key into dot-separated words;
// the empty key has no words (as RabbitMQ's split_topic_key).
func splitTopic(key string) []string {
	if key == "" {
		return nil
	}
	return strings.Split(key, ".")
}

// compileTopic splits a binding key and collapses runs of "#" (which match
// the same as one "#"), so matching cost is bounded by words × tokens.
func compileTopic(key string) []string {
	words := splitTopic(key)
	out := words[:0:0]
	for _, w := range words {
		if w == "#" && len(out) > 0 && out[len(out)-1] == "#" {
			continue
		}
		out = append(out, w)
	}
	return out
}

// topicMatch reports whether the compiled pattern matches the routing key
// words: "*" matches exactly one word, "#" zero or more. It runs in
// O(len(pattern) × len(words)) time whatever the wildcards.
func topicMatch(pattern, words []string) bool {
	n := len(words)
	var buf [2][33]bool
	var prev, cur []bool
	if n+1 <= len(buf[0]) {
		prev, cur = buf[0][:n+1], buf[1][:n+1]
	} else {
		prev, cur = make([]bool, n+1), make([]bool, n+1)
	}
	// prev[j]: the pattern tokens so far match words[:j].
	prev[0] = true
	for _, t := range pattern {
		alive := false
		switch t {
		case "#":
			seen := false
			for j := 0; j <= n; j++ {
				seen = seen || prev[j]
				cur[j] = seen
				alive = alive || seen
			}
		case "*":
			cur[0] = false
			for j := 1; j <= n; j++ {
				cur[j] = prev[j-1]
				alive = alive || cur[j]
			}
		default:
			cur[0] = false
			for j := 1; j <= n; j++ {
				cur[j] = prev[j-1] && words[j-1] == t
				alive = alive || cur[j]
			}
		}
		if !alive {
			return false
		}
		prev, cur = cur, prev
	}
	return prev[n]
}

// ---- headers ----

// matchMode is a headers binding's x-match.
type matchMode uint8

const (
	matchAll matchMode = iota
	matchAny
	matchAllWithX
	matchAnyWithX
)

func (m matchMode) withX() bool { return m == matchAllWithX || m == matchAnyWithX }

type headerPair struct {
	key   string
	value any
	void  bool // a null pattern value matches on presence
}

// headersSpec is a compiled headers-exchange binding.
type headersSpec struct {
	mode  matchMode
	pairs []headerPair
}

// compileHeaders parses a headers binding's arguments. Keys that start
// with "x-" are ignored unless x-match is all-with-x or any-with-x;
// x-match itself is always ignored.
func compileHeaders(args value.Map) (*headersSpec, error) {
	h := &headersSpec{mode: matchAll}
	if v, ok := lookupKey(args, "x-match"); ok {
		s, ok := toString(v)
		if !ok {
			return nil, fmt.Errorf("%w: invalid x-match field type %T; expected string", ErrPreconditionFailed, v)
		}
		switch s {
		case "all":
			h.mode = matchAll
		case "any":
			h.mode = matchAny
		case "all-with-x":
			h.mode = matchAllWithX
		case "any-with-x":
			h.mode = matchAnyWithX
		default:
			return nil, fmt.Errorf("%w: invalid x-match field value %q; expected all, any, all-with-x, or any-with-x", ErrPreconditionFailed, s)
		}
	}
	for _, kv := range args {
		k, ok := keyString(kv.Key)
		if !ok || k == "x-match" {
			continue
		}
		if strings.HasPrefix(k, "x-") && !h.mode.withX() {
			continue
		}
		h.pairs = append(h.pairs, headerPair{key: k, value: kv.Value, void: kv.Value == nil})
	}
	return h, nil
}

// match evaluates the binding against the message's headers.
func (h *headersSpec) match(lookup func(key string) (any, bool)) bool {
	all := h.mode == matchAll || h.mode == matchAllWithX
	for _, p := range h.pairs {
		v, ok := lookup(p.key)
		hit := ok && (p.void || valuesEqual(p.value, v))
		if all && !hit {
			return false
		}
		if !all && hit {
			return true
		}
	}
	return all
}

// headerData is the lazily decoded routing view of one message.
type headerData struct {
	m *Message

	appDone bool
	app     map[string]any

	xDone bool
	x     map[string]any // simple x- annotations: publisher's, then the broker's
}

func (d *headerData) appProps() map[string]any {
	if d.appDone {
		return d.app
	}
	d.appDone = true
	if d.m.Container == nil {
		return nil
	}
	props, err := d.m.Container.RoutingHeaders()
	if err != nil {
		return nil
	}
	d.app = make(map[string]any, len(props))
	for _, kv := range props {
		if k, ok := keyString(kv.Key); ok {
			d.app[k] = kv.Value
		}
	}
	return d.app
}

func (d *headerData) xAnns() map[string]any {
	if d.xDone {
		return d.x
	}
	d.xDone = true
	d.x = map[string]any{}
	add := func(m value.Map) {
		for _, kv := range m {
			k, ok := keyString(kv.Key)
			if ok && strings.HasPrefix(k, "x-") && isSimple(kv.Value) {
				d.x[k] = kv.Value
			}
		}
	}
	if d.m.Container != nil {
		if anns, err := d.m.Container.XHeaders(); err == nil {
			add(anns)
		}
	}
	if _, ok := annotations.HistoryOf(d.m.Anns); ok {
		// The history's x-*-death-* strings are matched as the annotations
		// they are written as.
		add(annotations.ExpandAMQP10(nil, d.m.Anns))
	} else {
		add(d.m.Anns)
	}
	return d.x
}

func (d *headerData) lookup(withX bool) func(string) (any, bool) {
	return func(k string) (any, bool) {
		if withX {
			if v, ok := d.xAnns()[k]; ok {
				return v, true
			}
		}
		v, ok := d.appProps()[k]
		return v, ok
	}
}
