package metaqueue

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The database and its companions are this user's alone (0600), whatever
// the umask, and an older database others could read is tightened.
func TestDatabaseFilesPrivate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit1("t", "true")
	e.reopen()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		fi, err := os.Stat(e.opt.Path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mq.db%s is mode %v; want 0600", suffix, fi.Mode().Perm())
		}
	}
	e.s.Close()
	e.s = nil
	os.Chmod(e.opt.Path, 0o644)
	e.open()
	if fi, _ := os.Stat(e.opt.Path); fi.Mode().Perm() != 0o600 {
		t.Errorf("a 0644 mq.db stayed %v after opening", fi.Mode().Perm())
	}
}

// SQLite follows symbolic links; Open must not let it.
func TestDatabaseSymlinkRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mq.db", "mq.db-wal", "mq.db-shm", "mq.db-journal"} {
		dir := t.TempDir()
		victim := filepath.Join(dir, "victim")
		os.WriteFile(victim, []byte("precious"), 0o600)
		if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), Options{Path: filepath.Join(dir, "mq.db"), Sync: SyncNormal})
		if err == nil {
			s.Close()
			t.Errorf("%s: Open followed a symbolic link", name)
			continue
		}
		if !strings.Contains(err.Error(), name+" is a symbolic link") {
			t.Errorf("%s: error %q", name, err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "precious" {
			t.Errorf("%s: the victim file is now %q", name, b)
		}
	}
}
