//go:build !linux

package client

import "net"

// peerUID is unknown here: the home's checks stand alone.
func peerUID(net.Conn) (uid int, known bool, err error) { return 0, false, nil }
