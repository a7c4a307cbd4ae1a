package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestOneLinePerKeyPerInterval(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	written := 0
	for i := range 1000 {
		if l.Error("disk", "disk full", "i", i) {
			written++
		}
		if i%100 == 0 {
			l.Error("other", "another cause")
		}
	}
	if written != 1 {
		t.Fatalf("%d lines for one key within the interval, want 1", written)
	}
	now = now.Add(time.Second)
	if !l.Error("disk", "disk full") {
		t.Fatal("no line after the interval")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines:\n%s", buf.String())
	}
	if !strings.Contains(lines[2], "suppressed=999") {
		t.Fatalf("the line after the interval does not count the suppressed ones: %s", lines[2])
	}
	if !strings.Contains(lines[1], "another cause") || strings.Contains(lines[1], "suppressed") {
		t.Fatalf("keys are independent: %s", lines[1])
	}
}
