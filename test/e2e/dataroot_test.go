//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// localUser is the second local user scripts/setup.sh makes; the test
// skips when it is missing or the suite cannot act as it.
func localUser(t *testing.T, name string) (uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a directory as " + name + " (runuser); this test runs as uid " + strconv.Itoa(os.Geteuid()))
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skip("runuser is not installed")
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no user %s (scripts/setup.sh makes it): %v", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	return uid
}

// TestDataRootOtherUser: a data root another local user owns and anyone
// can write (the attack: they swapped a staged input for bytes of the
// same size) is refused before the placeholder connects, naming the
// directory, its owner and the fix; so is one they own closed to others,
// an --out of theirs, and a world-writable data root of our own.
func TestDataRootOtherUser(t *testing.T) {
	uid := localUser(t, "mquser")
	h := newHarness(t)
	h.startCLS("--local", "0")
	shared := filepath.Join(filepath.Dir(h.home), fmt.Sprintf("mqe2e-shared-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.RemoveAll(shared) })
	if out, err := exec.Command("runuser", "-u", "mquser", "--", "sh", "-c", "umask 0 && mkdir -m 777 "+shared).CombinedOutput(); err != nil {
		t.Fatalf("mquser's mkdir: %v: %s", err, out)
	}
	refused := func(flag, dir string, want ...string) {
		t.Helper()
		r := h.run("cls", "agent", "--site", "nl", "--idle", "5s", flag, dir)
		if r.code == 0 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("cls agent %s %s: %s; want a non-zero exit and one line", flag, dir, r)
		}
		for _, w := range append(want, flag+" "+dir) {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("cls agent %s %s: stderr %q; want %q", flag, dir, r.stderr, w)
			}
		}
	}
	refused("--data-root", shared, "(mode 0777) is owned by uid "+strconv.Itoa(uid), "use a directory of your own")
	refused("--out", shared, "is owned by uid "+strconv.Itoa(uid))
	if out, err := exec.Command("runuser", "-u", "mquser", "--", "chmod", "755", shared).CombinedOutput(); err != nil {
		t.Fatalf("mquser's chmod: %v: %s", err, out)
	}
	refused("--data-root", shared, "(mode 0755) is owned by uid "+strconv.Itoa(uid))

	own := filepath.Join(h.dir, "open")
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(own, 0o777)
	refused("--data-root", own, "is writable by others (mode 0777)", "chmod 700 "+own)
}

// TestControlCharPathRefused: an input path with a newline and an escape
// sequence is refused at submit, from the command line and from a job
// file, with one printable line; nothing is queued.
func TestControlCharPathRefused(t *testing.T) {
	h := newHarness(t)
	h.startCLS("--local", "0")
	r := h.run("mqsub", "--in", "a\nb\x1b[31m", "t", "true")
	oneLineErr(t, "mqsub", r)
	if !strings.Contains(r.stderr, `"a\nb\x1b[31m"`) || !strings.Contains(r.stderr, "control character") {
		t.Errorf("mqsub -i: stderr %q; want the path quoted and the reason", r.stderr)
	}
	jf := filepath.Join(h.dir, "jobs.json")
	if err := os.WriteFile(jf, []byte(`{"target":"t","command":"true","inputs":[{"path":"a\nb\u001b[31m"}]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = h.run("mqsub", "-f", jf)
	oneLineErr(t, "mqsub", r)
	if !strings.Contains(r.stderr, "control character") {
		t.Errorf("mqsub -f: stderr %q; want the reason", r.stderr)
	}
	if jobs := h.jobs(); len(jobs) != 0 {
		t.Errorf("queued: %v", jobs)
	}
}
