package stage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/internal/otheruser"
)

// TestDirHostOtherUsersLink: a file staged to the CLS host's own path
// (Dir{Root: "/"}: outputs, cls files get) through a link another user
// made, in /tmp or in a directory of theirs, neither replaces nor
// removes our file of that name where the link points; a path of ours
// in the same directories is staged.
func TestDirHostOtherUsersLink(t *testing.T) {
	_, uid, gid := otheruser.Need(t)
	ctx := context.Background()
	shared := otheruser.SharedDir(t, "mq-hostlink-")
	theirs := filepath.Join(shared, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := t.TempDir()
	victim := filepath.Join(mine, "res.dat")
	links := []string{filepath.Join(shared, "results"), filepath.Join(theirs, "results")}
	for _, l := range links {
		otheruser.Symlink(t, mine, l, uid, gid)
	}
	if err := os.Chown(theirs, uid, gid); err != nil {
		t.Fatal(err)
	}
	d := Dir{Root: "/"}
	for _, l := range links {
		p := filepath.Join(l, "res.dat")
		os.WriteFile(victim, []byte("precious\n"), 0o600)
		if tmp, err := d.Create(ctx, p); err == nil {
			tmp.Write([]byte("staged\n"))
			tmp.Commit(ctx)
			t.Errorf("Create %s: made, want refused", p)
		}
		if err := d.Remove(ctx, p); err == nil {
			t.Errorf("Remove %s: removed, want refused", p)
		}
		if b, err := os.ReadFile(victim); string(b) != "precious\n" {
			t.Errorf("through %s: our file holds %q (%v)", l, b, err)
		}
	}
	for _, p := range []string{filepath.Join(shared, "mine", "res.dat"), filepath.Join(theirs, "fresh.dat")} {
		tmp, err := d.Create(ctx, p)
		if err != nil {
			t.Fatalf("Create %s: %v", p, err)
		}
		tmp.Write([]byte("staged\n"))
		if err := tmp.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != "staged\n" {
			t.Errorf("%s holds %q", p, b)
		}
		if err := d.Remove(ctx, p); err != nil {
			t.Errorf("Remove %s: %v", p, err)
		}
	}
}
