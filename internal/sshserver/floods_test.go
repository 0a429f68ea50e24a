package sshserver

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/sshkey"
	"github.com/mq-hpc/mq/protocol"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// keyNamed makes a key pair accepted with role under name.
func (c *cls) keyNamed(role, name string) ssh.Signer {
	c.t.Helper()
	path := filepath.Join(c.t.TempDir(), "key")
	pk, err := sshkey.NewKeyPair(path, name)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.keys.Add(role, pk, name); err != nil {
		c.t.Fatal(err)
	}
	signer, err := sshkey.LoadSigner(path)
	if err != nil {
		c.t.Fatal(err)
	}
	return signer
}

// Keyless logins with long, hostile user names leave a few short lines:
// each refused key once logged the client's whole user name (200 KB), so
// 2,000 logins wrote 381 MiB.
func TestKeylessLoginsLogBounded(t *testing.T) {
	var buf lockedBuf
	c := newCLS(t, func(s *Server) {
		s.Log = slog.New(slog.NewTextHandler(&buf, nil))
		s.LogWindow = time.Hour
	})
	stranger, _ := c.key("")
	name := "\x1b[31m" + strings.Repeat("u", 64<<10)
	const logins = 100
	for range logins {
		_, err := ssh.Dial("tcp", c.addr, &ssh.ClientConfig{User: name, Auth: []ssh.AuthMethod{ssh.PublicKeys(stranger)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
		if err == nil {
			t.Fatal("an unknown key was let in")
		}
	}
	srvFlush(t, c)
	log := buf.String()
	if len(log) > 4096 {
		t.Fatalf("%d keyless logins wrote %d bytes of log, want at most 4096:\n%.1000s", logins, len(log), log)
	}
	if strings.Contains(log, "\x1b") {
		t.Errorf("a control character from the user name reached the log:\n%q", log)
	}
	if !strings.Contains(log, "unknown key refused") || !strings.Contains(log, "more=") {
		t.Errorf("the refusals are not counted in the log:\n%s", log)
	}
}

// srvFlush flushes the SSH server's refusal counts: they are logged once a
// window, and the window here is an hour.
func srvFlush(t *testing.T, c *cls) {
	t.Helper()
	if c.ssh == nil {
		t.Fatal("no ssh server")
	}
	c.ssh.FlushLog()
}

// A user (or admin) key is the owner's deputy, not a placeholder: it may
// not say hello as one, nor register, nor answer files.poll and
// files.pull (which once handed it /etc/shadow through a node-local site).
func TestUserKeyIsNotAPlaceholder(t *testing.T) {
	c := newCLS(t)
	for _, role := range []string{protocol.RoleUser, protocol.RoleAdmin} {
		signer, _ := c.key(role)
		if _, err := c.connect(signer, protocol.RolePlaceholder); code(err) != protocol.CodeForbidden {
			t.Fatalf("%s key saying hello as a placeholder: %v, want forbidden", role, err)
		}
		cl, err := c.connect(signer, role)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Do(t.Context(), cl, protocol.OpRegister, protocol.Register{Site: "s", Host: "h", Slots: 1}); code(err) != protocol.CodeForbidden {
			t.Fatalf("%s key registering: %v, want forbidden", role, err)
		}
		if _, err := client.Do(t.Context(), cl, protocol.OpFilesPoll, protocol.FilePoll{Placeholder: 1}); code(err) != protocol.CodeForbidden {
			t.Fatalf("%s key polling for files: %v, want forbidden", role, err)
		}
		if _, err := client.Do(t.Context(), cl, protocol.OpFilesPull, protocol.FilePull{Placeholder: 1}); code(err) != protocol.CodeForbidden {
			t.Fatalf("%s key pulling a file: %v, want forbidden", role, err)
		}
	}
}

// A site's placeholder key registers only as its site.
func TestSiteKeyBoundToItsSite(t *testing.T) {
	c := newCLS(t)
	grid := c.keyNamed(protocol.RolePlaceholder, SiteKeyPrefix+"grid")
	cl, err := c.connect(grid, protocol.RolePlaceholder)
	if err != nil {
		t.Fatal(err)
	}
	for _, site := range []string{"other", "local"} {
		if _, err := client.Do(t.Context(), cl, protocol.OpRegister, protocol.Register{Site: site, Host: "h", Slots: 1}); code(err) != protocol.CodeForbidden {
			t.Fatalf("grid's key registering as %s: %v, want forbidden", site, err)
		}
	}
	if _, err := client.Do(t.Context(), cl, protocol.OpRegister, protocol.Register{Site: "grid", Host: "h", Slots: 1}); err != nil {
		t.Fatalf("grid's key registering as grid: %v", err)
	}
}

// A key holds a bounded number of connections, all keys together another;
// a connection over a bound is closed after its handshake (the key is not
// refused, so an agent retries), and room comes back when one ends.
func TestConnectionsBoundedPerKey(t *testing.T) {
	c := newCLS(t, func(s *Server) { s.PerKey, s.Conns = 3, 5 })
	a := c.keyNamed(protocol.RolePlaceholder, "a")
	b := c.keyNamed(protocol.RolePlaceholder, "b")
	var held []*client.Client
	for range 3 {
		cl, err := c.connect(a, protocol.RolePlaceholder)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, cl)
	}
	_, err := c.connect(a, protocol.RolePlaceholder)
	if err == nil {
		t.Fatal("a fourth connection of one key was served (bound 3)")
	}
	if errors.Is(err, client.ErrAuthRefused) || client.Permanent(err) {
		t.Fatalf("a connection over the bound: %v; want a passing error, not a refused key", err)
	}
	for range 2 {
		if _, err := c.connect(b, protocol.RolePlaceholder); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.connect(b, protocol.RolePlaceholder); err == nil {
		t.Fatal("a sixth connection was served (total bound 5)")
	}
	held[0].Close()
	waitFor(t, func() error {
		_, err := c.connect(a, protocol.RolePlaceholder)
		return err
	})
}
