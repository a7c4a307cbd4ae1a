package annotations

import (
	"testing"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

var benchEvent = Event{Queue: "work", Reason: ReasonRejected, Exchange: "", RoutingKeys: []string{"work"},
	Time: 1700000000000}

// BenchmarkDeathsEncode records a first death and encodes the annotations
// as they go on the wire.
func BenchmarkDeathsEncode(b *testing.B) {
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		h := Record(History{}, benchEvent)
		anns := Apply(nil, h, false)
		var err error
		if buf, err = amqp10.AppendMessageAnnotations(buf[:0], anns); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeathsUpdate decodes a history, records a repeat of its death
// (count+1) and writes it back.
func BenchmarkDeathsUpdate(b *testing.B) {
	anns := Apply(nil, Record(History{}, benchEvent), false)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		h, _, err := Decode(anns)
		if err != nil {
			b.Fatal(err)
		}
		out := Apply(append(value.Map(nil), anns...), Record(h, benchEvent), false)
		if buf, err = amqp10.AppendMessageAnnotations(buf[:0], out); err != nil {
			b.Fatal(err)
		}
	}
}
