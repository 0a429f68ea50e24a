package login

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Forward asks the master connection for a reverse forward from bind on
// the login host to a Unix socket of this user's (in ControlDir), each
// connection to which is joined to dial. It returns the port bound; the
// forward ends with the master, or at Close. It reads the login host's
// key too (HostKey), through the connection ssh checked it on.
func (s *OpenSSH) Forward(bind string, dial func() (net.Conn, error)) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*s.cfg.timeout())
	defer cancel()
	if err := s.readHostKey(ctx); err != nil {
		return 0, err
	}
	name := s.cfg.ForwardName
	if name == "" {
		name = strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	sum := sha256.Sum256([]byte(name))
	sock := filepath.Join(s.cfg.ControlDir, "fwd-"+hex.EncodeToString(sum[:8]))
	os.Remove(sock) // an earlier CLS's
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return 0, fmt.Errorf("reverse forward: %w", err)
	}
	go serveForward(ln, dial)
	spec := bind + ":" + sock
	out, stderr, err := s.ssh(ctx, nil, s.cfg.args(false, "-O", "forward", "-R", spec, "--", s.cfg.Dest)...)
	if err != nil {
		ln.Close()
		return 0, fmt.Errorf("reverse forward on the login host (%s): %s", bind, sshMessage(stderr, err))
	}
	_, p, _ := net.SplitHostPort(bind)
	port, _ := strconv.Atoi(p)
	if port == 0 {
		if port, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil || port <= 0 || port > 65535 {
			ln.Close()
			return 0, fmt.Errorf("reverse forward on the login host (%s): ssh said %q, not the port", bind, protocol.Printable(truncate(string(out), 40)))
		}
		host, _, _ := net.SplitHostPort(bind)
		spec = net.JoinHostPort(host, strconv.Itoa(port)) + ":" + sock
	}
	s.mu.Lock()
	s.forwards = append(s.forwards, spec)
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	return port, nil
}

// serveForward joins each connection the forward brings to one dial makes.
func serveForward(ln net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			d, err := dial()
			if err != nil {
				c.Close()
				return
			}
			join(c, d)
		}()
	}
}

// join copies between a and b until either ends, then closes both.
func join(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}

// hostKeyCommand prints the login host's own public keys, ed25519 first:
// the CLS's ssh checked the host it reached, so the key it reads there
// is the one placeholders pin.
const hostKeyCommand = `for t in ed25519 ecdsa rsa; do f=/etc/ssh/ssh_host_${t}_key.pub; [ -r "$f" ] && { head -n 1 "$f"; exit 0; }; done; exit 1`
