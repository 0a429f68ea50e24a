//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asOther runs a shell script as the unprivileged user name and returns
// its combined output and error.
func asOther(name, script string) (string, error) {
	out, err := exec.Command("runuser", "-u", name, "--", "sh", "-c", script).CombinedOutput()
	return string(out), err
}

// TestStdioPlantedByOtherUser: mqagent, another user of the machine,
// plants in a shared sticky directory (as /tmp) a link to a file of the
// CLS's user and a file of its own that everyone may write, where a job
// of ours will write its -o and -e. The job must refuse both (failed,
// the reason naming the path), write nothing through the link, and give
// mqagent none of its output; the same -o to a fresh name works.
// (Linux's fs.protected_symlinks and fs.protected_regular stop this too
// where they are on; they are off in many containers.)
func TestStdioPlantedByOtherUser(t *testing.T) {
	u, _, _ := otherUser(t)
	h := newHarness(t)
	shared, err := os.MkdirTemp("", "mqe2e-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(h.dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link, trap := filepath.Join(shared, "link.out"), filepath.Join(shared, "trap.err")
	if out, err := asOther(u.Username, fmt.Sprintf("ln -s %s %s && umask 0 && : > %s", victim, link, trap)); err != nil {
		t.Fatalf("the attacker's setup failed: %v: %s", err, out)
	}
	h.startCLS("--local", "1")
	viaLink := h.submit("-o", link, "link", "echo SECRET-OUT")
	intoTrap := h.submit("-o", filepath.Join(shared, "fine.out"), "-e", trap, "trap", "echo SECRET-ERR >&2")
	fresh := h.submit("-o", filepath.Join(shared, "fresh.out"), "fresh", "echo mine")
	for id, path := range map[int64]string{viaLink: link, intoTrap: trap} {
		d := h.waitState(id, "DF", time.Minute)
		if d.State != "F" || !strings.Contains(d.Reason, path+": a ") || !strings.Contains(d.Reason, "every user can write") {
			t.Errorf("job %d writing to mqagent's %s: %s %q, want F naming the path", id, path, d.State, d.Reason)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the job wrote through mqagent's link: the victim holds %q", b)
	}
	if out, err := asOther(u.Username, "cat "+trap); err != nil || out != "" {
		t.Errorf("mqagent's file got %q (%v), want nothing of the job's", out, err)
	}
	if d := h.waitState(fresh, "DF", time.Minute); d.State != "D" {
		t.Fatalf("-o to a fresh name in the shared directory: %s %q", d.State, d.Reason)
	}
	fi, err := os.Lstat(filepath.Join(shared, "fresh.out"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) || !fi.Mode().IsRegular() {
		t.Errorf("fresh.out: %v owned by uid %d; want our own regular file", fi.Mode(), st.Uid)
	}
}
