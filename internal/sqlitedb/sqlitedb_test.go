package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/sqlitedb/sqlitetest"
)

// TestOpen: a new database opens in WAL mode, its files 0600, Init run
// on the writer, the readers query-only; a path with URI characters is
// that file; a symbolic link at the database or a companion, or Init's
// error, fails Open with the path named.
func TestOpen(t *testing.T) {
	t.Parallel()
	create := func(ctx context.Context, w *sql.Conn) error {
		_, err := w.ExecContext(ctx, "CREATE TABLE t (a INTEGER CHECK (a > 0))")
		return err
	}
	tests := []struct {
		name   string
		file   string
		link   string // a symbolic link planted at this name first
		init   func(context.Context, *sql.Conn) error
		checks bool
		want   string // Open's error
	}{
		{"new", "mq.db", "", create, false, ""},
		{"checks", "mq.db", "", create, true, ""},
		{"uri characters", "a#b?c%d.db", "", create, false, ""},
		{"link", "mq.db", "mq.db", create, false, "mq.db is a symbolic link"},
		{"link wal", "mq.db", "mq.db-wal", create, false, "mq.db-wal is a symbolic link"},
		{"link journal", "mq.db", "mq.db-journal", create, false, "mq.db-journal is a symbolic link"},
		{"init fails", "mq.db", "", func(context.Context, *sql.Conn) error { return errors.New("too new") }, false, "too new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			path := filepath.Join(dir, tt.file)
			if tt.link != "" {
				victim := filepath.Join(dir, "victim")
				os.WriteFile(victim, []byte("precious"), 0o600)
				if err := os.Symlink(victim, filepath.Join(dir, tt.link)); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if b, _ := os.ReadFile(victim); string(b) != "precious" {
						t.Errorf("the victim file is now %q", b)
					}
				}()
			}
			w, wdb, rdb, err := Open(ctx, Config{Path: path, Synchronous: "normal", Checks: tt.checks, Readers: 2, Init: tt.init})
			if tt.want != "" {
				if err == nil {
					w.Close()
					wdb.Close()
					rdb.Close()
				}
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Open = %v, want an error naming %s with %q", err, path, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer wdb.Close()
			defer rdb.Close()
			defer w.Close()
			var mode string
			if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal_mode %q, %v", mode, err)
			}
			_, err = w.ExecContext(ctx, "INSERT INTO t VALUES (-1)")
			if tt.checks != (err != nil) {
				t.Errorf("checks %v: insert breaking a CHECK: %v", tt.checks, err)
			}
			if _, err := rdb.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err == nil {
				t.Error("a reader wrote")
			}
			var n int
			if err := rdb.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
				t.Errorf("a reader cannot read: %v", err)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				fi, err := os.Stat(path + suffix)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s%s is mode %v; want 0600", tt.file, suffix, fi.Mode().Perm())
				}
			}
		})
	}
}

// TestOpenRefusesOrphanWAL: a database gone or emptied while its WAL holds
// changes is refused, the WAL left as it was (SQLite alone starts an empty
// database and drops the WAL); with the database back, the changes are
// there.
func TestOpenRefusesOrphanWAL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "mq.db")
	w, wdb, rdb, err := Open(ctx, Config{Path: path, Synchronous: "normal", Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	// Copied while open, as a kill -9 leaves them: the changes in the WAL.
	db, _ := os.ReadFile(path)
	wal, _ := os.ReadFile(path + "-wal")
	w.Close()
	wdb.Close()
	rdb.Close()
	if len(wal) == 0 || len(db) == 0 {
		t.Fatalf("database %d bytes, WAL %d bytes", len(db), len(wal))
	}
	for _, tc := range []struct {
		name string
		db   []byte // nil: no file
		want string // "": opens, with the row
	}{
		{"missing", nil, "it is missing or empty, but " + path + "-wal holds"},
		{"empty", []byte{}, "it is missing or empty"},
		{"there", db, ""},
	} {
		os.Remove(path)
		os.Remove(path + "-shm")
		if tc.db != nil {
			os.WriteFile(path, tc.db, 0o600)
		}
		os.WriteFile(path+"-wal", wal, 0o600)
		w, wdb, rdb, err := Open(ctx, Config{Path: path, Synchronous: "normal", Readers: 1})
		if tc.want != "" {
			if err == nil {
				w.Close()
				wdb.Close()
				rdb.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
			if got, _ := os.ReadFile(path + "-wal"); string(got) != string(wal) {
				t.Errorf("%s: the WAL was changed (%d bytes, was %d)", tc.name, len(got), len(wal))
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var a int
		if err := rdb.QueryRow("SELECT a FROM t").Scan(&a); err != nil || a != 42 {
			t.Errorf("%s: row %d, %v", tc.name, a, err)
		}
		w.Close()
		wdb.Close()
		rdb.Close()
	}
}

// TestWriteLockFree: free when no one holds the write lock, SQLITE_BUSY at
// once while another connection does, free again once it is let go; it
// writes nothing.
func TestWriteLockFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mq.db")
	w, wdb, rdb, err := Open(ctx, Config{Path: path, Synchronous: "normal", Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	defer rdb.Close()
	defer w.Close()
	if err := WriteLockFree(ctx, path); err != nil {
		t.Fatalf("nobody holds it: %v", err)
	}
	if _, err := w.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := WriteLockFree(ctx, path); err == nil {
		t.Error("free while another connection holds it")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v: it waited for the lock", d)
	}
	if _, err := w.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := WriteLockFree(ctx, path); err != nil {
		t.Errorf("after the lock went: %v", err)
	}
}

// TestJournalSizeLimit: the writer and the readers cut a WAL that grew
// (checkpoints held back by another process's read transaction) back to
// 64 MiB once a checkpoint finishes.
func TestJournalSizeLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, wdb, rdb, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "mq.db"), Synchronous: "normal", Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer wdb.Close()
	defer rdb.Close()
	defer w.Close()
	for name, q := range map[string]interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}{"writer": w, "reader": rdb} {
		var limit int64
		if err := q.QueryRowContext(ctx, "PRAGMA journal_size_limit").Scan(&limit); err != nil {
			t.Fatal(err)
		}
		if limit != 64<<20 {
			t.Errorf("%s: journal_size_limit %d, want %d", name, limit, 64<<20)
		}
	}
}

// TestOpenLocked: a database another process holds the write lock of
// before it is in WAL mode (an sqlite3 shell made it and is in BEGIN
// IMMEDIATE) is refused at once with an error that says so.
func TestOpenLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mq.db")
	shell := sqlitetest.Shell(t, path)
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := Open(ctx, Config{Path: path, Synchronous: "normal", Readers: 1})
	if err == nil || !strings.Contains(err.Error(), "another process holds its write lock") {
		t.Errorf("Open under the lock: %v, want it to name the lock", err)
	}
}

// TestOpenLockedInit: a database whose schema is to be made or migrated
// while another process holds its write lock stops at once, naming the
// lock, not after the busy timeout.
func TestOpenLockedInit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mq.db")
	w, wdb, rdb, err := Open(ctx, Config{Path: path, Synchronous: "normal", Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	wdb.Close()
	rdb.Close()
	shell := sqlitetest.Shell(t, path)
	if _, err := shell.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, _, err = Open(ctx, Config{Path: path, Synchronous: "normal", Readers: 1, Init: func(ctx context.Context, w *sql.Conn) error {
		_, err := w.ExecContext(ctx, "CREATE TABLE t (x)")
		return err
	}})
	if err == nil || !strings.Contains(err.Error(), "another process holds its write lock") {
		t.Errorf("Open under the lock: %v, want it to name the lock", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Open under the lock stopped after %v, want at once", d)
	}
}
