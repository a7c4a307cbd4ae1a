//go:build !unix

package link

import "syscall"

// tryWrite is the loop's inline write; without it every write goes through
// the writer goroutine.
func tryWrite(syscall.RawConn, []byte) int { return 0 }
