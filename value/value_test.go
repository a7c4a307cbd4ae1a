package value

import "testing"

// Map keeps the order of its entries: Set replaces in place or appends,
// Delete keeps the others' order (byte-exact annotations depend on it).
func TestMapKeepsOrder(t *testing.T) {
	var m Map
	m = m.Set(Symbol("a"), 1).Set(Symbol("b"), 2).Set("a", 3).Set(Symbol("a"), 4)
	want := Map{{Key: Symbol("a"), Value: 4}, {Key: Symbol("b"), Value: 2}, {Key: "a", Value: 3}}
	if len(m) != len(want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	for i := range want {
		if m[i] != want[i] {
			t.Fatalf("entry %d: got %v, want %v", i, m[i], want[i])
		}
	}
	if v, ok := m.Get("a"); !ok || v != 3 {
		t.Errorf(`Get("a") = %v, %v; a string key is not the symbol`, v, ok)
	}
	if _, ok := m.Get(Symbol("c")); ok {
		t.Error("Get of a missing key found it")
	}
	m = m.Delete(Symbol("a"))
	if len(m) != 2 || m[0].Key != Symbol("b") || m[1].Key != "a" {
		t.Errorf("after Delete: %v", m)
	}
	if d := m.Delete(Symbol("missing")); len(d) != 2 {
		t.Errorf("Delete of a missing key changed the map: %v", d)
	}
}
