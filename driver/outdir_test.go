package driver

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalOutDirOfOtherUser: in a shared sticky directory (as /tmp),
// another local user (mqagent, as root makes it) made the OutDir a
// program names before it ran, or left open a directory above it: Start
// refuses, since they could swap the run directory for a link to theirs
// and read or forge every job's output. A directory of our own there
// is fine.
func TestLocalOutDirOfOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user (runuser)")
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skip("runuser is not installed")
	}
	if _, err := user.Lookup("mqagent"); err != nil {
		if out, err := exec.Command("useradd", "-m", "-s", "/bin/sh", "mqagent").CombinedOutput(); err != nil {
			if _, lerr := user.Lookup("mqagent"); lerr != nil {
				t.Skipf("useradd mqagent: %v: %s", err, out)
			}
		}
	}
	shared, err := os.MkdirTemp("", "mqdriver-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	theirs, open := filepath.Join(shared, "theirs"), filepath.Join(shared, "open")
	if out, err := exec.Command("runuser", "-u", "mqagent", "--", "sh", "-c", "umask 0 && mkdir "+theirs+" "+open).CombinedOutput(); err != nil {
		t.Fatalf("mqagent's mkdir: %v: %s", err, out)
	}
	start := func(out string) error {
		d, err := New(Config{Local: true, OutDir: out})
		if err != nil {
			return err
		}
		err = d.Start(context.Background())
		if err == nil {
			d.Stop(context.Background())
		}
		return err
	}
	for out, want := range map[string]string{
		theirs:                        "owned by uid",
		filepath.Join(open, "mine"):   "writable by every user and not sticky",
		filepath.Join(shared, "mine"): "",
	} {
		err := start(out)
		switch {
		case want == "" && err != nil:
			t.Errorf("OutDir %s: %v", out, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("OutDir %s: %v, want refused (%s)", out, err, want)
		}
	}
	if ents, _ := os.ReadDir(theirs); len(ents) != 0 {
		t.Errorf("a run directory was made in mqagent's %s: %v", theirs, ents)
	}
}
