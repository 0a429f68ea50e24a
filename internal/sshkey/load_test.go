package sshkey

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/otheruser"
)

// newKey makes a private key at dir/name and returns its path.
func newKey(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if _, err := NewKeyPair(path, name); err != nil {
		t.Fatal(err)
	}
	return path
}

// oneLine fails t unless err is one line holding every want.
func oneLine(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted; want refused saying %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line saying %q", what, err, want)
			return
		}
	}
}

// within runs f, failing t if it has not returned within a minute (the
// old LoadSigner waited for ever on a FIFO's writer).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: still reading after a minute", what)
		return nil
	}
}

// TestLoadSignerChecksWhatItReads: the key read is the file checked, by
// its descriptor: a FIFO at the key's name (which passed a stat of mode
// 0600, then held the read for ever) is refused at once; a key of
// another user's, or one reached through a link another user made in a
// shared directory, is refused though its mode is 0600; a key through
// the user's own link (~/.ssh/id_ed25519 to a key kept elsewhere) works.
func TestLoadSignerChecksWhatItReads(t *testing.T) {
	dir := t.TempDir()
	key := newKey(t, dir, "key")
	if _, err := LoadSigner(key); err != nil {
		t.Fatalf("our own key: %v", err)
	}
	own := filepath.Join(dir, "own-link")
	if err := os.Symlink(key, own); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigner(own); err != nil {
		t.Errorf("our key through our own link: %v", err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	err := within(t, "LoadSigner(FIFO)", func() error { _, err := LoadSigner(fifo); return err })
	oneLine(t, "a FIFO", err, "private key", "not a regular file")

	loose := newKey(t, dir, "loose")
	if err := os.Chmod(loose, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = LoadSigner(loose)
	oneLine(t, "a key mode 0640", err, loose, "is readable by others (mode 0640)", "chmod 600 "+loose)
	if err := os.Chmod(loose, 0o620); err != nil {
		t.Fatal(err)
	}
	_, err = LoadSigner(loose)
	oneLine(t, "a key mode 0620", err, loose, "is writable by others (mode 0620)", "chmod 600 "+loose)

	// Another user's key: only root can make one here; loadSigner's
	// euid shows the same for any user.
	_, err = loadSigner(key, os.Geteuid()+1)
	oneLine(t, "a key of another uid", err, key, "is owned by uid", "not by you")

	_, uid, gid := otheruser.Need(t)
	theirs := newKey(t, dir, "theirs")
	if err := os.Chown(theirs, uid, gid); err != nil {
		t.Fatal(err)
	}
	_, err = LoadSigner(theirs)
	oneLine(t, "a key of another user", err, theirs, "is owned by uid")

	shared := otheruser.SharedDir(t, "mq-sshkey-")
	planted := filepath.Join(shared, "ph_key")
	otheruser.Symlink(t, key, planted, uid, gid)
	_, err = LoadSigner(planted)
	oneLine(t, "a key through another user's link in /tmp", err, planted, "link of uid")
}

// TestPinFile: a host key file is a key to trust: one that another user
// owns, or that others can write, is refused (they could pin their own
// key); one of ours, mode 0644, pins its key; a FIFO is refused at once.
func TestPinFile(t *testing.T) {
	dir := t.TempDir()
	key := newKey(t, dir, "host")
	pub := key + ".pub"
	signer, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	check, err := Pin(pub)
	if err != nil {
		t.Fatalf("Pin(our 0644 .pub): %v", err)
	}
	if err := check("cls", nil, signer.PublicKey()); err != nil {
		t.Errorf("the pinned key: %v", err)
	}
	if err := os.Chmod(pub, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = Pin(pub)
	oneLine(t, "a .pub others can write", err, pub, "(mode 0666)", "chmod go-w "+pub, "fingerprint")
	if err := os.Chmod(pub, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pub")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	err = within(t, "Pin(FIFO)", func() error { _, err := Pin(fifo); return err })
	oneLine(t, "a FIFO", err, "not a regular file")

	_, uid, gid := otheruser.Need(t)
	if err := os.Chown(pub, uid, gid); err != nil {
		t.Fatal(err)
	}
	_, err = Pin(pub)
	oneLine(t, "another user's .pub", err, pub, "is owned by uid", "or root")
}

// TestTrustRoot: a key to trust may be root's (as the system's
// /etc/ssh/ssh_known_hosts is); a private key may not be another uid's,
// root's included.
func TestTrustRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs a file of root's")
	}
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const user = 12345
	if err := KnownHosts.check(path, fi, user); err != nil {
		t.Errorf("a known_hosts of root's, for uid %d: %v", user, err)
	}
	oneLine(t, "a private key of root's", privateKey.check(path, fi, user), path, "is owned by uid 0, not by you (uid 12345)")
}

// TestLoadCertSigner: a key's certificate, KEY-cert.pub, is read as a
// key to trust (ours or root's, not writable by others, mode 0644 fine:
// it is public) and used only if it is a user certificate of this key
// that has not expired; each refusal is one line naming the file. With
// no certificate file the error is fs.ErrNotExist, which callers pass
// over in silence.
func TestLoadCertSigner(t *testing.T) {
	dir := t.TempDir()
	key := newKey(t, dir, "id")
	signer, err := LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := ssh.NewSignerFromKey(caPriv)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	write := func(c *ssh.Certificate, mode os.FileMode) {
		t.Helper()
		if err := c.SignCert(rand.Reader, ca); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(CertFile(key), ssh.MarshalAuthorizedKey(c), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(CertFile(key), mode); err != nil {
			t.Fatal(err)
		}
	}
	user := func(validBefore uint64) *ssh.Certificate {
		return &ssh.Certificate{Key: signer.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{"u"}, ValidBefore: validBefore}
	}

	if _, err := LoadCertSigner(key, signer, now); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no certificate file: %v; want fs.ErrNotExist", err)
	}
	for _, vb := range []uint64{uint64(now.Unix()) + 1, ssh.CertTimeInfinity} {
		write(user(vb), 0o644)
		cs, err := LoadCertSigner(key, signer, now)
		if err != nil {
			t.Fatalf("a certificate valid before %d: %v", vb, err)
		}
		if c, ok := cs.PublicKey().(*ssh.Certificate); !ok || c.ValidBefore != vb {
			t.Errorf("a certificate valid before %d: the signer offers %s", vb, cs.PublicKey().Type())
		}
	}
	write(user(uint64(now.Unix())), 0o644)
	_, err = LoadCertSigner(key, signer, now)
	oneLine(t, "an expired certificate", err, CertFile(key), "expired at 2026-12-01T12:00:00Z")

	// Another uid's: root makes one; anyone else, as loadSigner's euid.
	write(user(ssh.CertTimeInfinity), 0o644)
	euid := os.Geteuid() + 1
	if os.Geteuid() == 0 {
		euid = 0
		if err := os.Chown(CertFile(key), 12345, 12345); err != nil {
			t.Fatal(err)
		}
	}
	_, err = loadCertSigner(key, signer, now, euid)
	oneLine(t, "a certificate of another uid", err, CertFile(key), "is owned by uid", "or root", "they could put another certificate in it")
}
