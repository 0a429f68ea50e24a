package driver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/otheruser"
)

// TestLocalOutDirOfOtherUser: in a shared sticky directory (as /tmp),
// another local user (mqagent, as root makes it) made the OutDir a
// program names before it ran, or left open (or owns) a directory above
// it, which they could rename: Start
// refuses, since they could swap the run directory for a link to theirs
// and read or forge every job's output. A directory of our own there
// is fine.
func TestLocalOutDirOfOtherUser(t *testing.T) {
	otheruser.Need(t)
	shared := otheruser.SharedDir(t, "mqdriver-shared-")
	theirs, open := filepath.Join(shared, "theirs"), filepath.Join(shared, "open")
	above := filepath.Join(shared, "above")
	if out, err := exec.Command("runuser", "-u", "mqagent", "--", "sh", "-c", "umask 0 && mkdir "+theirs+" "+open+" && mkdir -m 755 "+above).CombinedOutput(); err != nil {
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
		filepath.Join(above, "mine"):  "inside " + above + ", owned by uid",
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
