//go:build unix

package link

import "syscall"

// tryWrite makes one non-blocking write of b to the socket and returns how
// many bytes the kernel took: 0 when its send buffer is full or on any
// error, which the writer goroutine then meets (and handles) itself.
func tryWrite(rc syscall.RawConn, b []byte) int {
	n := 0
	err := rc.Write(func(fd uintptr) bool {
		n, _ = syscall.Write(int(fd), b)
		return true // never wait for the socket: that is the writer's job
	})
	if err != nil || n < 0 {
		return 0
	}
	return n
}
