package perf

import "testing"

func TestTarget091MapsAMQP10Addresses(t *testing.T) {
	for addr, want := range map[string][2]string{
		"/queues/plain":          {"", "plain"},
		"/queues/a%2Fb":          {"", "a/b"},
		"/amq/queue/plain":       {"", "plain"},
		"/queue/plain":           {"", "plain"},
		"/exchanges/dlx":         {"dlx", ""},
		"/exchanges/dlx/rk":      {"dlx", "rk"},
		"/exchange/amq.topic/rk": {"amq.topic", "rk"},
		"plain":                  {"", "plain"},
	} {
		x, k, err := target091(addr)
		if err != nil || x != want[0] || k != want[1] {
			t.Errorf("target091(%q) = %q, %q, %v; want %q, %q", addr, x, k, err, want[0], want[1])
		}
	}
	for _, bad := range []string{"", "/topic/rk", "/queues/%zz", "/queues/a/b"} {
		if x, k, err := target091(bad); err == nil {
			t.Errorf("target091(%q) = %q, %q; want an error", bad, x, k)
		}
	}
}

func TestSource091MapsAMQP10Addresses(t *testing.T) {
	for addr, want := range map[string]string{
		"/queues/dlq": "dlq", "/queues/a%20b": "a b", "/amq/queue/dlq": "dlq", "/queue/dlq": "dlq", "dlq": "dlq",
	} {
		if q, err := source091(addr); err != nil || q != want {
			t.Errorf("source091(%q) = %q, %v; want %q", addr, q, err, want)
		}
	}
	for _, bad := range []string{"", "/exchanges/x", "/queues/%zz"} {
		if q, err := source091(bad); err == nil {
			t.Errorf("source091(%q) = %q; want an error", bad, q)
		}
	}
}
