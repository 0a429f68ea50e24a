package login

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/otheruser"
)

func newHostKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// TestKnownHostsTrust: known_hosts vouches for a login host, which is
// then sent the site's placeholder key, the agent and its jobs. One of
// ours vouches for the key it holds, and a changed key is named by the
// file's own name; one others can write, one of another user's, one
// reached through another user's link in /tmp, and a FIFO (which held
// the dial for ever) are refused in one line naming the file.
func TestKnownHostsTrust(t *testing.T) {
	const addr = "127.0.0.1:2222"
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	good, bad := newHostKey(t), newHostKey(t)
	dir := t.TempDir()
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte("[127.0.0.1]:2222 "+string(ssh.MarshalAuthorizedKey(good))), 0o644); err != nil {
		t.Fatal(err)
	}
	check, _, err := hostKeyCheck(kh, addr, "login host")
	if err != nil {
		t.Fatalf("our own known_hosts: %v", err)
	}
	if err := check(addr, remote, good); err != nil {
		t.Errorf("the known key: %v", err)
	}
	if err := check(addr, remote, bad); !errors.Is(err, ErrHostKeyChanged) || !strings.Contains(err.Error(), kh+" line 1") {
		t.Errorf("another key: %v; want ErrHostKeyChanged naming %s line 1", err, kh)
	}

	refused := func(what, path string, want ...string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, _, err := hostKeyCheck(path, addr, "login host"); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: still reading after a minute", what)
		}
		if err == nil {
			t.Errorf("%s: accepted", what)
			return
		}
		for _, w := range append(want, path) {
			if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v; want one line saying %q", what, err, w)
			}
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	refused("a FIFO", fifo, "not a regular file")
	if err := os.Chmod(kh, 0o666); err != nil {
		t.Fatal(err)
	}
	refused("a known_hosts others can write", kh, "(mode 0666)", "chmod go-w")
	if err := os.Chmod(kh, 0o644); err != nil {
		t.Fatal(err)
	}

	_, uid, gid := otheruser.Need(t)
	shared := otheruser.SharedDir(t, "mq-knownhosts-")
	planted := filepath.Join(shared, "known_hosts")
	otheruser.Symlink(t, kh, planted, uid, gid)
	refused("a known_hosts through another user's link in /tmp", planted, "link of uid")
	if err := os.Chown(kh, uid, gid); err != nil {
		t.Fatal(err)
	}
	refused("another user's known_hosts", kh, "is owned by uid", "or root")
}
