package management

import (
	"strconv"
	"unicode/utf8"
)

// logValueMax is how many bytes of a client-supplied value (a path, a
// reason) a log record keeps: a client can send paths as long as a message.
const logValueMax = 256

// Clip shortens a client-supplied string for a log record, on a rune
// boundary, saying how long it was.
func Clip(s string) string {
	if len(s) <= logValueMax {
		return s
	}
	cut := logValueMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}
