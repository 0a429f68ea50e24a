package priorities

import (
	"context"
	"database/sql"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"

	_ "modernc.org/sqlite"
)

// TestImports: the module imports the standard library, the public
// job and protocol packages and internal leaf packages only: never the
// metaqueue core nor another of its modules.
func TestImports(t *testing.T) { modtest.Imports(t) }

// TestQueriesUsed: every query of priorities.sql is asked for by name in
// the package, and every name asked for is there.
func TestQueriesUsed(t *testing.T) {
	modtest.QueriesUsed(t, "priorities.sql", queries.Names(), modtest.Asked)
}

// open makes the two tables the module reads (the migrations' own are
// prepared by the core's TestModuleQueriesPrepare).
func open(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL);
		CREATE TABLE job_priority (job_id INTEGER PRIMARY KEY, priority INTEGER NOT NULL CHECK (priority <> 0))`); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestPriorities: a job's priority is stored only when not 0, read back
// at load for live jobs only, and revived for a job a rerun brings back.
func TestPriorities(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	var p Priorities
	if got := p.Of(1); got != 0 {
		t.Fatalf("zero value: Of(1) = %d", got)
	}
	for _, j := range []struct {
		id    int64
		state string
		prio  int
	}{{1, "Q", 5}, {2, "W", 0}, {3, "D", -3}, {4, "H", 1023}, {5, "E", -1024}} {
		if _, err := db.Exec(`INSERT INTO jobs VALUES (?, ?)`, j.id, j.state); err != nil {
			t.Fatal(err)
		}
		if err := p.Add(ctx, db, j.id, j.prio); err != nil {
			t.Fatal(err)
		}
	}
	var stored int
	if err := db.QueryRow(`SELECT count(*) FROM job_priority`).Scan(&stored); err != nil || stored != 4 {
		t.Fatalf("stored %d rows (%v), want 4: a 0 is not stored", stored, err)
	}
	p.Forget(3) // job 3 ended
	check := func(when string, want map[int64]int16) {
		t.Helper()
		for id := int64(1); id <= 6; id++ {
			if got := p.Of(id); got != want[id] {
				t.Errorf("%s: Of(%d) = %d, want %d", when, id, got, want[id])
			}
		}
	}
	live := map[int64]int16{1: 5, 4: 1023, 5: -1024}
	check("after Add", live)
	p.Reset()
	check("after Reset", nil)
	if err := p.Load(ctx, db); err != nil {
		t.Fatal(err)
	}
	check("after Load", live)
	for _, id := range []int64{3, 2, 6} { // a rerun: 3 has one, 2 and 6 none
		if err := p.Revive(ctx, db, id); err != nil {
			t.Fatalf("Revive(%d): %v", id, err)
		}
	}
	check("after Revive", map[int64]int16{1: 5, 3: -3, 4: 1023, 5: -1024})
	if err := p.Add(ctx, db, 1, 7); err == nil {
		t.Error("Add of a job stored already: no error")
	}
	db.Close()
	if err := p.Load(ctx, db); err == nil {
		t.Error("Load on a closed database: no error")
	}
}
