package cls

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/sqlitedb/sqlitetest"
)

// TestNoteLocked: one line, only while another process holds the
// database's write lock.
func TestNoteLocked(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mq.db")
	shell := sqlitetest.Shell(t, path)
	if _, err := shell.ExecContext(ctx, "CREATE TABLE t(x)"); err != nil {
		t.Fatal(err)
	}
	var free strings.Builder
	noteLocked(ctx, path, &free)
	if free.Len() != 0 {
		t.Errorf("lock free: %q, want nothing", free.String())
	}
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var held strings.Builder
	noteLocked(ctx, path, &held)
	if got := held.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "another process holds the write lock of "+path) {
		t.Errorf("lock held: %q, want one line naming it", got)
	}
}

// TestNewLockedNewDatabase: cls serve on a database (in WAL mode) whose
// schema is still to be made or migrated while another process holds its write lock stops at once, in one line
// that names the lock, not after the busy timeout.
func TestNewLockedNewDatabase(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "h")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	shell := sqlitetest.Shell(t, filepath.Join(home, "mq.db"))
	for _, q := range []string{"PRAGMA journal_mode = wal", "BEGIN IMMEDIATE"} { // as an older CLS left it
		if _, err := shell.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	c, err := New(ctx, Config{Home: home, Notes: io.Discard})
	if err == nil {
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "another process holds its write lock") || strings.Contains(err.Error(), "\n") {
		t.Errorf("New under the lock: %v, want one line naming the lock", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("New under the lock stopped after %v, want at once", d)
	}
}
