package metaqueue

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/schema"
	"github.com/mq-hpc/mq/job"
)

// TestMigrations: a new store's database runs every step and records the
// build's version, opening it again changes nothing, and a database of a
// newer version than the build is refused. (The steps' numbering is
// schema's TestMigrationsNumbered.)
func TestMigrations(t *testing.T) {
	t.Parallel()
	n := schema.Version()
	e := newEnv(t)
	id := e.submit1("t", "true")
	e.s.Close()
	e.s = nil
	db := openRaw(t, e.opt.Path)
	var v string
	if err := db.QueryRow("SELECT value FROM meta WHERE key = 'schema'").Scan(&v); err != nil || v != strconv.Itoa(n) {
		t.Fatalf("schema %q, %v; want %d", v, err, n)
	}
	db.Close()
	e.open() // again: nothing to do
	e.mustBe(id, job.Queued)
	e.s.Close()
	e.s = nil

	db = openRaw(t, e.opt.Path)
	mustExec(t, db, "UPDATE meta SET value = ? WHERE key = 'schema'", strconv.Itoa(n+1))
	db.Close()
	s, err := Open(context.Background(), e.opt)
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("a newer schema opened: %v", err)
	}
}

// TestTargetNamesMigration: version 6 rebuilds targets without the UNIQUE
// index on names, keeping every id; the store still shows a waiting job's
// prerequisite, and a database holding a name twice is refused on open.
func TestTargetNamesMigration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.submit1("a", "true")
	b := e.submit1("b", "true", "a")
	e.downgrade(
		"CREATE TABLE targets_old (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
		"INSERT INTO targets_old SELECT id, name FROM targets",
		"DROP TABLE targets",
		"ALTER TABLE targets_old RENAME TO targets",
		"UPDATE meta SET value = '5' WHERE key = 'schema'",
	)
	e.mustBe(a, job.Queued)
	e.mustBe(b, job.Waiting)
	if d := e.job(b); d.Target != "b" || len(d.WaitingOn) != 1 || d.WaitingOn[0].Target != "a" || d.WaitingOn[0].Counts["Q"] != 1 {
		t.Fatalf("job %d: %+v", b, d)
	}
	var n int
	if err := e.s.rdb.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'targets' AND name <> 'targets_purged'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d indexes on targets, %v", n, err)
	}
	e.check()

	e.s.Close()
	e.s = nil
	db := openRaw(t, e.opt.Path)
	mustExec(t, db, "INSERT INTO targets (id, name) VALUES (100, 'a')")
	db.Close()
	s, err := Open(context.Background(), e.opt)
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), `target "a" is stored twice`) {
		t.Fatalf("a duplicate target name opened: %v", err)
	}
}
