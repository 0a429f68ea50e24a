package login

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// jumpHost is an in-process jump host: it logs in the login host's
// user key and serves direct-tcpip channels (ssh -J) by dialing their
// target, and nothing else.
type jumpHost struct {
	addr string
	// refuse rejects every forward, as a jump host whose network does
	// not reach the login host (or AllowTcpForwarding no) does.
	refuse atomic.Bool

	ended chan struct{} // a connection served ended

	mu      sync.Mutex
	targets []string   // the forwards asked for, HOST:PORT
	conns   []net.Conn // the connections served
}

// startJump starts a jump host in front of l that accepts l's key; known
// says whether its host key is added to l's known_hosts.
func startJump(t *testing.T, l *sftpLogin, known bool) *jumpHost {
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(l.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	user, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	j := &jumpHost{addr: ln.Addr().String(), ended: make(chan struct{}, 16)}
	t.Cleanup(func() {
		ln.Close()
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, c := range j.conns {
			c.Close()
		}
	})
	if known {
		f, err := os.OpenFile(l.knownHosts, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("[127.0.0.1]:" + portOf(j.addr) + " " + string(ssh.MarshalAuthorizedKey(hostSigner.PublicKey())))
		f.Close()
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(user.PublicKey().Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			j.mu.Lock()
			j.conns = append(j.conns, nc)
			j.mu.Unlock()
			go j.serve(nc, cfg)
		}
	}()
	return j
}

func (j *jumpHost) serve(nc net.Conn, cfg *ssh.ServerConfig) {
	defer func() { j.ended <- struct{}{} }()
	_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		nc.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		var to struct {
			Host     string
			Port     uint32
			FromHost string
			FromPort uint32
		}
		if nch.ChannelType() != "direct-tcpip" || ssh.Unmarshal(nch.ExtraData(), &to) != nil {
			nch.Reject(ssh.UnknownChannelType, "direct-tcpip only")
			continue
		}
		target := net.JoinHostPort(to.Host, strconv.Itoa(int(to.Port)))
		j.mu.Lock()
		j.targets = append(j.targets, target)
		j.mu.Unlock()
		if j.refuse.Load() {
			nch.Reject(ssh.ConnectionFailed, "connect failed: No route to host")
			continue
		}
		tc, err := net.Dial("tcp", target)
		if err != nil {
			nch.Reject(ssh.ConnectionFailed, err.Error())
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			tc.Close()
			continue
		}
		go ssh.DiscardRequests(creqs)
		go func() { io.Copy(ch, tc); ch.CloseWrite(); ch.Close() }()
		go func() { io.Copy(tc, ch); tc.Close() }()
	}
}

func (j *jumpHost) asked() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.targets...)
}

// A login host behind a jump host is reached through it: the connection
// to the login host is a forward the jump host makes, each host's key is
// checked, and commands and files go through.
func TestDialThroughJumpHost(t *testing.T) {
	l := startSFTPLogin(t)
	l.exec = func(cmd string, _ io.Reader, stdout, _ io.Writer) int {
		io.WriteString(stdout, "ran "+cmd)
		return 0
	}
	j := startJump(t, l, true)
	s := l.dial(t, SSHConfig{JumpUser: "u", JumpAddr: j.addr})
	out, err := s.Run(context.Background(), "hostname")
	if err != nil || !strings.Contains(string(out), "ran ") {
		t.Fatalf("Run through the jump host: %q, %v", out, err)
	}
	if got := j.asked(); len(got) != 1 || got[0] != l.addr {
		t.Errorf("the jump host was asked to forward to %q; want [%s]", got, l.addr)
	}
	f := filepath.Join(t.TempDir(), "f") // the in-process login host writes this process's files
	if _, err := s.Put(context.Background(), f, []byte("data"), 0o600); err != nil {
		t.Errorf("Put through the jump host: %v", err)
	} else if b, err := os.ReadFile(f); err != nil || string(b) != "data" {
		t.Errorf("Put through the jump host wrote %q, %v", b, err)
	}
	// The jump host gone, the login connection it carried ends with it.
	j.mu.Lock()
	for _, c := range j.conns {
		c.Close()
	}
	j.mu.Unlock()
	select {
	case <-s.dead:
	case <-time.After(time.Minute):
		t.Fatal("the login connection outlived its jump host's")
	}
}

// What can go wrong at the jump host says so, and which host it was.
func TestDialJumpHostErrors(t *testing.T) {
	l := startSFTPLogin(t)
	dial := func(cfg SSHConfig) error {
		cfg.User, cfg.Addr, cfg.KeyFile, cfg.KnownHosts = "u", l.addr, l.keyFile, l.knownHosts
		cfg.Timeout = 30 * time.Second
		s, err := DialSSH(context.Background(), cfg)
		if err == nil {
			s.Close()
		}
		return err
	}
	t.Run("unknown key", func(t *testing.T) {
		j := startJump(t, l, false)
		err := dial(SSHConfig{JumpUser: "u", JumpAddr: j.addr})
		if !errors.Is(err, ErrHostUnknown) || !Permanent(err) || !strings.Contains(err.Error(), "the jump host is not in known_hosts: "+j.addr) || strings.Contains(err.Error(), "login host") {
			t.Errorf("a jump host not in known_hosts: %v; want ErrHostUnknown said as the jump host's", err)
		}
		if want := keyscan(j.addr) + " >> "; !strings.Contains(err.Error(), want) || strings.Contains(want, "PORT") {
			t.Errorf("a jump host not in known_hosts: %v; want the command %q", err, want)
		}
		if got := j.asked(); len(got) != 0 {
			t.Errorf("forwards asked of an unverified jump host: %q", got)
		}
	})
	t.Run("forward refused", func(t *testing.T) {
		j := startJump(t, l, true)
		j.refuse.Store(true)
		err := dial(SSHConfig{JumpUser: "u", JumpAddr: j.addr})
		if err == nil || !strings.Contains(err.Error(), "the jump host "+j.addr+" cannot reach the login host "+l.addr) {
			t.Errorf("a jump host that cannot reach the login host: %v", err)
		}
	})
	t.Run("key refused", func(t *testing.T) {
		j := startJump(t, l, true)
		_, priv, _ := ed25519.GenerateKey(rand.Reader)
		block, err := ssh.MarshalPrivateKey(priv, "")
		if err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(t.TempDir(), "other")
		if err := os.WriteFile(other, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := SSHConfig{User: "u", Addr: l.addr, JumpUser: "u", JumpAddr: j.addr, KeyFile: other, KnownHosts: l.knownHosts, Timeout: 30 * time.Second}
		_, err = DialSSH(context.Background(), cfg)
		if !errors.Is(err, errJumpAuth) || !Permanent(err) {
			t.Errorf("a jump host that takes none of our keys: %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		err = dial(SSHConfig{JumpUser: "u", JumpAddr: addr})
		if err == nil || !strings.Contains(err.Error(), "cannot reach the jump host "+addr) {
			t.Errorf("a jump host that refuses connections: %v", err)
		}
	})
}

// Cut ends the jump host's connection too: nothing is left holding it.
func TestCutEndsJumpConnection(t *testing.T) {
	l := startSFTPLogin(t)
	j := startJump(t, l, true)
	s := l.dial(t, SSHConfig{JumpUser: "u", JumpAddr: j.addr})
	s.Cut()
	select {
	case <-j.ended:
	case <-time.After(time.Minute):
		t.Fatal("the jump host's connection did not end with Cut")
	}
}
