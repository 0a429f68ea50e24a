package modtest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/schema"

	_ "modernc.org/sqlite" // the driver the metaqueue uses
)

// NewDB is a migrated database in t's temporary directory, on one
// connection (as the core's writer is), closed when t ends.
func NewDB(t testing.TB) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mq.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := schema.Migrate(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}
