package cls

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// listenLoopback listens on addr, a loopback address, and on the same
// port of the other loopback, ::1 for 127.0.0.1 and 127.0.0.1 for ::1:
// "localhost" names both, and a client asking for localhost:PORT (a
// jupyter-server-proxy's /proxy/PORT/, a bookmark) tries ::1 first where
// /etc/hosts says so. Left free, that twin could be taken by any user of
// the machine, whose server would then be sent the owner's ?token= and
// session cookie. A twin this machine has no address for (no IPv6) is no
// one's; one already taken refuses the start, as the port itself would.
func listenLoopback(addr string) (net.Listener, error) {
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		twin := twinAddr(ln.Addr())
		if twin == "" {
			return ln, nil
		}
		t, err := net.Listen("tcp", twin)
		switch {
		case err == nil:
			return joinListeners(ln, t), nil
		case errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT):
			return ln, nil
		}
		ln.Close()
		if _, port, _ := net.SplitHostPort(addr); port == "0" && try < 8 {
			continue // a port of our choosing: choose another
		}
		return nil, fmt.Errorf("%s is taken: whoever listens there would be sent the dashboard's token by a browser or proxy that asks for localhost; stop it, or choose another port: %w", twin, err)
	}
}

// twinAddr is the address of the other loopback on a's port: "" unless a
// is 127.0.0.1 or ::1, the two localhost names.
func twinAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	switch {
	case !ok:
		return ""
	case ta.IP.Equal(net.IPv4(127, 0, 0, 1)):
		return fmt.Sprintf("[::1]:%d", ta.Port)
	case ta.IP.Equal(net.IPv6loopback):
		return fmt.Sprintf("127.0.0.1:%d", ta.Port)
	}
	return ""
}

// joinListeners accepts on every one of lns as one listener, whose
// address is the first's.
func joinListeners(lns ...net.Listener) net.Listener {
	j := &joined{lns: lns, acc: make(chan accepted), done: make(chan struct{})}
	for _, ln := range lns {
		go j.loop(ln)
	}
	return j
}

type joined struct {
	lns  []net.Listener
	acc  chan accepted
	done chan struct{}
	once sync.Once
}

type accepted struct {
	c   net.Conn
	err error
}

func (j *joined) loop(ln net.Listener) {
	for {
		c, err := ln.Accept()
		select {
		case j.acc <- accepted{c, err}:
		case <-j.done:
			if c != nil {
				c.Close()
			}
			return
		}
		var te interface{ Temporary() bool }
		if err != nil && !(errors.As(err, &te) && te.Temporary()) {
			return // closed: the server stops at this error
		}
	}
}

func (j *joined) Accept() (net.Conn, error) {
	select {
	case a := <-j.acc:
		return a.c, a.err
	case <-j.done:
		return nil, net.ErrClosed
	}
}

func (j *joined) Close() error {
	j.once.Do(func() { close(j.done) })
	var err error
	for _, ln := range j.lns {
		if e := ln.Close(); err == nil {
			err = e
		}
	}
	return err
}

func (j *joined) Addr() net.Addr { return j.lns[0].Addr() }
