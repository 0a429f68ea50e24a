// Package sqlitetest has what tests of the database's users share.
package sqlitetest

import (
	"context"
	"database/sql"
	"testing"

	_ "modernc.org/sqlite" // the driver the CLS uses
)

// Shell opens the database at path as another process would (a user's
// sqlite3 shell): a connection of its own, closed when t ends. Tests hold
// the write lock with it ("BEGIN IMMEDIATE") to see what the CLS does.
func Shell(t testing.TB, path string) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // before db's: cleanups run last first
	return c
}
