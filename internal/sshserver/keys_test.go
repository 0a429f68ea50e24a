package sshserver

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func newPub(t testing.TB) (ssh.PublicKey, ssh.Signer) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pk, signer
}

func TestKeyFileAddLookupRemove(t *testing.T) {
	kf := NewKeyFile(filepath.Join(t.TempDir(), KeyFileName))
	u, _ := newPub(t)
	p, _ := newPub(t)
	stranger, _ := newPub(t)

	if _, ok, err := kf.Lookup(u); ok || err != nil {
		t.Fatalf("empty key file: lookup = %v, %v", ok, err)
	}
	if _, err := kf.Add("user", u, "alice laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := kf.Add("placeholder", p, "cluster-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := kf.Add("placeholder", u, "again"); err == nil || !strings.Contains(err.Error(), "already added") {
		t.Errorf("adding a key twice: %v", err)
	}
	if _, err := kf.Add("owner", stranger, ""); err == nil {
		t.Error("a role that does not exist was accepted")
	}
	for _, c := range []struct {
		pk   ssh.PublicKey
		ok   bool
		role string
	}{{u, true, "user"}, {p, true, "placeholder"}, {stranger, false, ""}} {
		k, ok, err := kf.Lookup(c.pk)
		if err != nil || ok != c.ok || k.Role != c.role {
			t.Errorf("lookup %s = %+v %v %v, want ok=%v role=%q", ssh.FingerprintSHA256(c.pk), k.Role, ok, err, c.ok, c.role)
		}
	}
	keys, err := kf.List()
	if err != nil || len(keys) != 2 || keys[0].Comment != "alice_laptop" {
		t.Fatalf("list = %+v, %v", keys, err)
	}
	if _, err := kf.Remove("cluster-a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := kf.Lookup(p); ok {
		t.Error("a removed key is still accepted")
	}
	if _, err := kf.Remove(ssh.FingerprintSHA256(u)); err != nil {
		t.Fatal(err)
	}
	if _, err := kf.Remove("nobody"); err == nil {
		t.Error("removing an unknown key succeeded")
	}
	if fi, err := os.Stat(kf.Path); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("key file mode: %v %v", fi.Mode(), err)
	}
}

// Edits by hand (or by another process) are seen at the next lookup, and a
// broken file refuses everyone with an error naming the line, rather than
// silently accepting fewer keys.
func TestKeyFileReloadsAndRejectsBadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), KeyFileName)
	kf := NewKeyFile(path)
	u, _ := newPub(t)
	line := `role="user" ` + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(u))) + " by-hand\n"
	if err := os.WriteFile(path, []byte("# comment\n\n"+line), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, ok, err := kf.Lookup(u); !ok || err != nil || k.Comment != "by-hand" {
		t.Fatalf("hand-written key: %+v %v %v", k, ok, err)
	}
	for _, bad := range []string{
		"ssh-ed25519 AAAA-not-base64",
		strings.TrimSpace(string(ssh.MarshalAuthorizedKey(u))), // no role
		`role="root" ` + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(u))),
		`command="sh" ` + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(u))),
	} {
		if err := os.WriteFile(path, []byte(line+bad+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, ok, err := kf.Lookup(u)
		if ok || err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("line %q: lookup = %v, %v; want an error naming line 2", bad, ok, err)
		}
	}
}

// The key file is checked at every lookup, not only when it is first read
// (as sshd's StrictModes does): a file or directory that another user
// could have written, or a symbolic link, refuses every key.
func TestKeyFileStrictModes(t *testing.T) {
	u, _ := newPub(t)
	line := `role="user" ` + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(u))) + "\n"
	for _, tc := range []struct {
		name  string
		spoil func(dir, path string) error
		want  string
	}{
		{"file writable by others", func(_, path string) error { return os.Chmod(path, 0o666) }, "writable by others (mode 0666)"},
		{"file writable by group", func(_, path string) error { return os.Chmod(path, 0o620) }, "writable by others (mode 0620)"},
		{"directory writable by others", func(dir, _ string) error { return os.Chmod(dir, 0o777) }, "writable by others (mode 0777)"},
		{"symbolic link", func(dir, path string) error {
			other := filepath.Join(dir, "elsewhere")
			if err := os.Rename(path, other); err != nil {
				return err
			}
			return os.Symlink(other, path)
		}, "is a symbolic link"},
		{"another user's file", func(_, path string) error {
			if os.Geteuid() != 0 {
				return errSkip
			}
			return os.Chown(path, 65534, 65534)
		}, "owned by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "home")
			os.Mkdir(dir, 0o700)
			path := filepath.Join(dir, KeyFileName)
			if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
				t.Fatal(err)
			}
			kf := NewKeyFile(path)
			if _, ok, err := kf.Lookup(u); !ok || err != nil {
				t.Fatalf("before: lookup = %v, %v", ok, err)
			}
			if err := tc.spoil(dir, path); err == errSkip {
				t.Skip("needs root to give the file to another user")
			} else if err != nil {
				t.Fatal(err)
			}
			_, ok, err := kf.Lookup(u)
			if ok || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("after: lookup = %v, %v; want refused with %q", ok, err, tc.want)
			}
		})
	}
}

var errSkip = errors.New("skip")

func TestParseKeyLineRoles(t *testing.T) {
	u, _ := newPub(t)
	body := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(u)))
	for _, c := range []struct {
		line, role string
		ok         bool
	}{
		{`role="user" ` + body, "user", true},
		{`role=placeholder ` + body + " x", "placeholder", true},
		{`role="admin" ` + body, "admin", true},
		{`role="" ` + body, "", false},
		{body, "", false},
	} {
		k, err := ParseKeyLine(c.line)
		if (err == nil) != c.ok || (c.ok && k.Role != c.role) {
			t.Errorf("ParseKeyLine(%q) = %+v, %v", c.line, k.Role, err)
		}
	}
}

// FuzzParseKeyLine: a key file line never panics the parser, and a line it
// accepts has a valid role and reparses to the same key.
func FuzzParseKeyLine(f *testing.F) {
	u, _ := newPub(f)
	body := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(u)))
	for _, s := range []string{`role="user" ` + body + " c", "role=placeholder " + body, body, `role="x,y" ` + body, "#", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		k, err := ParseKeyLine(line)
		if err != nil {
			return
		}
		if !ValidRole(k.Role) {
			t.Fatalf("accepted role %q", k.Role)
		}
		again, err := ParseKeyLine(k.Line())
		if err != nil || again.Fingerprint != k.Fingerprint || again.Role != k.Role {
			t.Fatalf("%q -> %q does not reparse: %+v %v", line, k.Line(), again, err)
		}
	})
}
