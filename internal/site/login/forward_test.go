package login

import (
	"io"
	"net"

	"golang.org/x/crypto/ssh"
)

// forward is the login host's side of sc's reverse forward
// (tcpip-forward), as sshd serves it: a listener on the loopback, until
// the connection ends, each connection made there carried to the client
// in a forwarded-tcpip channel. It returns the port, and whether it
// listens.
func forward(sc *ssh.ServerConn) (uint32, bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, false
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	go func() {
		sc.Wait()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forwardConn(sc, c, port)
		}
	}()
	return port, true
}

func forwardConn(sc *ssh.ServerConn, c net.Conn, port uint32) {
	defer c.Close()
	origin := c.RemoteAddr().(*net.TCPAddr)
	ch, reqs, err := sc.OpenChannel("forwarded-tcpip", ssh.Marshal(struct {
		Addr       string
		Port       uint32
		OriginAddr string
		OriginPort uint32
	}{"127.0.0.1", port, origin.IP.String(), uint32(origin.Port)}))
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	go func() {
		io.Copy(ch, c)
		ch.CloseWrite()
	}()
	io.Copy(c, ch)
}
