package sshserver

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/protocol"
)

// Connections that never finish the handshake are bounded per source
// address; a finished handshake gives its place up.
func TestUnauthenticatedBoundPerSource(t *testing.T) {
	c := newCLS(t, func(s *Server) { s.Gate = server.Gate{Max: 10, PerSource: 2, Grace: time.Hour} })
	var silent []net.Conn
	for range 2 {
		nc, err := net.Dial("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		silent = append(silent, nc)
	}
	// The server speaks first (its version line): read it, so the
	// connection is surely accepted and counted.
	for _, nc := range silent {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	third, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err := third.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("a third silent connection from one address was kept")
		}
		if err != nil {
			break // closed: refused
		}
	}
	for _, nc := range silent {
		nc.Close()
	}
	// Authenticated connections do not count: three at once are fine.
	signer, _ := c.key("user")
	for range 3 {
		waitFor(t, func() error {
			_, err := c.connect(signer, protocol.RoleUser)
			return err
		})
	}
}

// A connection with no channel open is closed after the idle bound, once
// a session has said what it was for; one serving a protocol session is
// not.
func TestIdleSSHConnectionClosed(t *testing.T) {
	const idle = 50 * time.Millisecond
	c := newCLS(t, func(s *Server) { s.Idle = idle })
	signer, _ := c.key("user")
	sc := c.dial(t, signer)
	closed := make(chan error, 1)
	go func() { closed <- sc.Wait() }()
	sess, err := sc.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestSubsystem(Subsystem); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("an ssh connection with no channel stayed open past the idle bound")
	}

	cl, err := c.connect(signer, protocol.RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * idle)
	if _, err := client.Do(t.Context(), cl, protocol.OpSummary, protocol.Empty{}); err != nil {
		t.Fatalf("a connection with its session open was closed: %v", err)
	}
}

// A connection that opens no session (`ssh -N`) is closed within the
// handshake timeout, not held for Idle.
func TestNoSessionSSHConnectionClosed(t *testing.T) {
	c := newCLS(t, func(s *Server) { s.HandshakeTimeout, s.Idle = 2*time.Second, time.Hour })
	signer, _ := c.key("user")
	sc := c.dial(t, signer)
	closed := make(chan error, 1)
	go func() { closed <- sc.Wait() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("an ssh connection that opened no session stayed open past the handshake timeout")
	}
}

// A session that never says what it is for is closed, and with it (no
// channel left) its connection once idle.
func TestUndecidedSessionClosed(t *testing.T) {
	// The handshake must fit in the timeout too, under -race on a busy
	// machine.
	c := newCLS(t, func(s *Server) { s.HandshakeTimeout = 3 * time.Second })
	signer, _ := c.key("user")
	sc := c.dial(t, signer)
	ch, reqs, err := sc.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, ch)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a session that asked for nothing stayed open")
	}
}

// dial opens an SSH connection as signer, the CLS's host key pinned; the
// test's end closes it.
func (c *cls) dial(t *testing.T, signer ssh.Signer) *ssh.Client {
	t.Helper()
	sc, err := ssh.Dial("tcp", c.addr, &ssh.ClientConfig{User: "u", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: c.sshConfig(signer).HostKey, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc
}

// waitFor retries f until it succeeds or 10 s pass.
func waitFor(t *testing.T, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
