//go:build !linux

package web

import "net"

// unread cannot tell without a peek: a connection counts as silent until
// the server reads from it.
func unread(net.Conn) bool { return false }
