package filter

import (
	"testing"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// FuzzParseSQL parses arbitrary expressions: none may panic or take
// unbounded time, every refusal is an error, and what parses evaluates
// against a message with properties, application properties and a
// dead-letter history without panicking.
func FuzzParseSQL(f *testing.F) {
	for _, s := range []string{
		"country = 'UK' AND weight = 5",
		"NOT (absent IN ('v1', 'v2') OR premium)",
		"description LIKE 'T_i% a %e_%e_sa%' ESCAPE '!'",
		"weight + weight * quantity - -temperature / 2 = 502.5",
		"0x48656C6C6F = data AND [with    four    spaces] IS NOT NULL",
		"m.[x-last-death-reason] = 'rejected' AND x-opt-deaths.count >= 2",
		"p.subject LIKE 'order.%' AND h.priority > 4 AND UTC() > p.creation_time",
		"\"UK\"\"s\" = 'UK''s' OR 1.5E-3 < price % 3",
	} {
		f.Add(s)
	}
	m, anns, _ := benchInput(f)
	f.Fuzz(func(t *testing.T, src string) {
		e, err := ParseSQL(src)
		if err != nil {
			if e != nil {
				t.Fatalf("%q: an expression and an error", src)
			}
			return
		}
		e.Match(m, anns)
		e.Match(m, nil)
	})
}

// FuzzParseFilterSet decodes arbitrary bytes as an attach source's filter
// set (as the link does) and parses it: no panic, and what is in force is
// a subset of what was asked.
func FuzzParseFilterSet(f *testing.F) {
	_, _, set := benchInput(f)
	b, err := amqp10.AppendValue(nil, set)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	m, anns, _ := benchInput(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := amqp10.ReadValue(b)
		if err != nil {
			return
		}
		set, ok := v.(value.Map)
		if !ok {
			return
		}
		inForce, s, err := Parse(set, DefaultLimits())
		if err != nil {
			return
		}
		if len(inForce) > len(set) || (s == nil) != (len(inForce) == 0) {
			t.Fatalf("in force %v of %v", inForce, set)
		}
		if s != nil {
			s.Match(m, anns)
		}
	})
}
