package filter

import "unsafe"

// unsafeBytes returns the bytes of s without copying them. Evaluation only
// reads values (compares, searches), never writes them, so sharing the
// string's memory is safe, and it keeps a message's annotations from being
// copied for every test.
func unsafeBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
