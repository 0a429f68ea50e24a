//go:build e2e

package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// attackerKeyLine is an authorized_keys line giving a fresh key the user
// role: what an attacker plants in a MQ_HOME they can write.
func attackerKeyLine(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return `role="user" ` + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk))) + " attacker\n"
}

// serveRefused runs `cls serve` on home and checks that it exits non-zero
// at once with one line naming what is wrong, writes nothing through the
// planted cls.log link (victim keeps its content) and creates nothing.
func (h *harness) serveRefused(home, victim string, want ...string) {
	h.t.Helper()
	h.home = home
	r := h.runIn(h.dir, nil, "cls", "serve", "--local", "0")
	if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "cls: ") {
		h.t.Errorf("cls serve on %s: %s; want a non-zero exit and one line", home, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			h.t.Errorf("cls serve on %s: stderr %q; want %q", home, r.stderr, w)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		h.t.Errorf("the CLS wrote through the cls.log link: the victim file is now %q", b)
	}
	for _, name := range []string{"mq.db", "cls.sock", "cls.lock", "output"} {
		if _, err := os.Lstat(filepath.Join(home, name)); err == nil {
			h.t.Errorf("cls serve created %s in a home it refused", name)
		}
	}
}

// plant fills dir as an attacker would: an authorized_keys naming their
// key and a cls.log link to a file of the CLS's user.
func plant(t *testing.T, dir, victim string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(attackerKeyLine(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "cls.log")); err != nil {
		t.Fatal(err)
	}
}

// TestHomeAttackOtherUser reproduces the attack with a real second user:
// mqagent makes a world-writable directory with an authorized_keys naming
// its key and a cls.log link to a file of the CLS's user (root here).
// `cls serve` must refuse it, naming the path and mode, and write nothing
// through the link; so must `cls key` and a home merely owned by mqagent.
func TestHomeAttackOtherUser(t *testing.T) {
	u, uid, gid := otherUser(t)
	h := newHarness(t)
	victim := filepath.Join(h.dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	attack := filepath.Join(filepath.Dir(h.home), fmt.Sprintf("mqe2e-attack-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.RemoveAll(attack) })
	script := fmt.Sprintf("umask 0 && mkdir -m 777 %[1]s && printf '%%s' '%[2]s' > %[1]s/authorized_keys && ln -s %[3]s %[1]s/cls.log",
		attack, strings.TrimSpace(attackerKeyLine(t)), victim)
	if out, err := exec.Command("runuser", "-u", u.Username, "--", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("the attacker's setup failed: %v: %s", err, out)
	}
	h.serveRefused(attack, victim, "MQ_HOME "+attack+" (mode 0777) is owned by uid "+fmt.Sprint(uid))

	// Even closed to others (0755), a home another user owns is theirs.
	os.Chmod(attack, 0o755)
	h.serveRefused(attack, victim, "is owned by uid "+fmt.Sprint(uid), "not by you (uid 0)")
	if r := h.run("cls", "key", "list"); r.code != 1 || !strings.Contains(r.stderr, "is owned by uid") {
		t.Errorf("cls key list in mqagent's home: %s; want refused", r)
	}

	// Our own home, with mqagent's authorized_keys in it.
	own := filepath.Join(h.dir, "own")
	os.Mkdir(own, 0o700)
	keys := filepath.Join(own, "authorized_keys")
	os.WriteFile(keys, []byte(attackerKeyLine(t)), 0o600)
	os.Chown(keys, uid, gid)
	h.serveRefused(own, victim, keys+" is owned by uid "+fmt.Sprint(uid))
}

// TestHomeStrictModes: the same checks by mode, for any user (emulated
// with chmod): a world-writable home, a cls.log link in an otherwise good
// home, a key file others can write are refused; a home others can only
// read starts with a warning, and everything the CLS makes is private.
func TestHomeStrictModes(t *testing.T) {
	h := newHarness(t)
	victim := filepath.Join(h.dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	top := h.home

	open := filepath.Join(top, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	plant(t, open, victim)
	h.serveRefused(open, victim, "MQ_HOME "+open+" is writable by others (mode 0777)", "chmod 700")

	linked := filepath.Join(top, "linked")
	os.Mkdir(linked, 0o700)
	plant(t, linked, victim)
	os.Chmod(filepath.Join(linked, "authorized_keys"), 0o600)
	h.serveRefused(linked, victim, filepath.Join(linked, "cls.log")+" is a symbolic link")

	loose := filepath.Join(top, "loose")
	os.Mkdir(loose, 0o700)
	os.WriteFile(filepath.Join(loose, "authorized_keys"), []byte(attackerKeyLine(t)), 0o600)
	os.Chmod(filepath.Join(loose, "authorized_keys"), 0o666)
	h.serveRefused(loose, victim, filepath.Join(loose, "authorized_keys")+" is writable by others (mode 0666)")

	// Readable by others: served, with a warning on stderr and in the log.
	readable := filepath.Join(top, "readable")
	os.Mkdir(readable, 0o700)
	os.Chmod(readable, 0o755)
	h.home = readable
	c := h.startCLS("--local", "1")
	id := h.submit("t", "echo out")
	h.waitState(id, "D", 30*time.Second)
	want := "MQ_HOME " + readable + " is mode 0755: other users can read the jobs and their output; chmod 700 " + readable
	if !strings.Contains(c.stderr.String(), "cls: warning: "+want) {
		t.Errorf("cls serve stderr %q; want the warning %q", c.stderr.String(), want)
	}
	if log := readFile(t, filepath.Join(readable, "cls.log")); !strings.Contains(log, want) {
		t.Errorf("cls.log has no warning %q", want)
	}
	err := filepath.Walk(readable, func(path string, fi os.FileInfo, err error) error {
		if err != nil || path == readable {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is mode %v; the CLS makes everything its user's alone", path, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mq.db", "mq.db-wal", "cls.log", "cls.sock", "output"} {
		if _, err := os.Lstat(filepath.Join(readable, name)); err != nil {
			t.Errorf("%v", err)
		}
	}
	h.stopCLS(15, 30*time.Second)
}
