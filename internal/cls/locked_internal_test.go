package cls

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

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
