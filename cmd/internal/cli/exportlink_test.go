package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/internal/otheruser"
)

// TestCreateExportOtherUsersLink: mqstat -O through a link another user
// made in /tmp to a directory of ours does not replace our file of that
// name there; a file of our own in /tmp is written, and an aborted
// export leaves nothing.
func TestCreateExportOtherUsersLink(t *testing.T) {
	_, uid, gid := otheruser.Need(t)
	shared := otheruser.SharedDir(t, "mq-export-")
	mine := t.TempDir()
	victim := filepath.Join(mine, "report.txt")
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	link := filepath.Join(shared, "exports")
	otheruser.Symlink(t, mine, link, uid, gid)
	if f, commit, _, err := createExport(filepath.Join(link, "report.txt")); err == nil {
		f.WriteString("export\n")
		commit()
		t.Errorf("-O through another user's link: written, want refused")
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("our file holds %q", b)
	}
	for _, done := range []string{"commit", "abort"} {
		p := filepath.Join(shared, done+".txt")
		f, commit, abort, err := createExport(p)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("export\n")
		if done == "commit" {
			err = commit()
		} else {
			err = abort()
		}
		if err != nil {
			t.Fatalf("%s: %v", done, err)
		}
		b, err := os.ReadFile(p)
		if done == "commit" && string(b) != "export\n" || done == "abort" && err == nil {
			t.Errorf("after %s: %s holds %q, %v", done, p, b, err)
		}
	}
	if ents, _ := os.ReadDir(shared); len(ents) != 2 {
		t.Errorf("left in the directory: %v; want the link and commit.txt", ents)
	}
}
