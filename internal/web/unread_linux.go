package web

import (
	"net"
	"syscall"
)

// unread reports whether c's peer has sent bytes nobody has read yet,
// without reading them or blocking.
func unread(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var n int
	var buf [1]byte
	// Control, not Read: Read would queue behind the server goroutine
	// blocked reading this connection.
	err = rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return err == nil && n > 0
}
