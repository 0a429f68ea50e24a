package metaqueue

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/job"
)

// TestMigrations: the steps are numbered 1..n without a gap, a new
// database runs them all and records n, opening it again changes nothing,
// and a database of a newer version than the build is refused.
func TestMigrations(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 5 || schemaVersion() != len(ms) {
		t.Fatalf("%d migrations, version %d", len(ms), schemaVersion())
	}
	for i, m := range ms {
		if m.version != i+1 || strings.TrimSpace(m.sql) == "" {
			t.Fatalf("migration %d is %+v", i+1, m)
		}
	}
	e := newEnv(t)
	id := e.submit1("t", "true")
	e.s.Close()
	e.s = nil
	db := openRaw(t, e.opt.Path)
	var v string
	if err := db.QueryRow("SELECT value FROM meta WHERE key = 'schema'").Scan(&v); err != nil || v != strconv.Itoa(len(ms)) {
		t.Fatalf("schema %q, %v; want %d", v, err, len(ms))
	}
	db.Close()
	e.open() // again: nothing to do
	e.mustBe(id, job.Queued)
	e.s.Close()
	e.s = nil

	db = openRaw(t, e.opt.Path)
	mustExec(t, db, "UPDATE meta SET value = ? WHERE key = 'schema'", strconv.Itoa(len(ms)+1))
	db.Close()
	_, err = Open(context.Background(), e.opt)
	if err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("a newer schema opened: %v", err)
	}
}
