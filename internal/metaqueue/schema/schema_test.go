package schema

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// conn opens a new database file and returns its one connection, as the
// core's writer is.
func conn(t *testing.T) *sql.Conn {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mq.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); db.Close() })
	return c
}

func exec(t *testing.T, c *sql.Conn, q string, args ...any) {
	t.Helper()
	if _, err := c.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func version(t *testing.T, c *sql.Conn) string {
	t.Helper()
	var v string
	if err := c.QueryRowContext(context.Background(), "SELECT value FROM meta WHERE key = 'schema'").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMigrationsNumbered: the steps are numbered 1..n without a gap, each
// has SQL, and the build's version is the last.
func TestMigrationsNumbered(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 5 || Version() != len(ms) {
		t.Fatalf("%d migrations, version %d", len(ms), Version())
	}
	for i, m := range ms {
		if m.version != i+1 || strings.TrimSpace(m.sql) == "" {
			t.Fatalf("migration %d is %+v", i+1, m)
		}
	}
}

// TestMigrate: a new database runs every step and records the build's
// version, migrating it again changes nothing, and a database of a newer
// version or of no version number is refused.
func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := conn(t)
	if err := Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(Version())
	if v := version(t, c); v != want {
		t.Fatalf("version %s, want %s", v, want)
	}
	if err := Migrate(ctx, c); err != nil || version(t, c) != want {
		t.Fatalf("again: %v, version %s", err, version(t, c))
	}
	for _, tc := range []struct{ set, err string }{
		{strconv.Itoa(Version() + 1), "newer than this build"},
		{"x", "not a version number"},
		{"0", "not a version number"},
	} {
		exec(t, c, "UPDATE meta SET value = ? WHERE key = 'schema'", tc.set)
		if err := Migrate(ctx, c); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("version %q: %v, want %q", tc.set, err, tc.err)
		}
	}
}

// TestMigrateFailedStep: a step that fails leaves the database at the
// version it had, its transaction rolled back.
func TestMigrateFailedStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := conn(t)
	if err := Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	// Version 21 rebuilds jobs from its definition: one it does not
	// know makes the step fail.
	exec(t, c, "DROP TABLE jobs")
	exec(t, c, "CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT)")
	exec(t, c, "UPDATE meta SET value = '20' WHERE key = 'schema'")
	err := Migrate(ctx, c)
	if err == nil || !strings.Contains(err.Error(), "021_hold_priority") || !strings.Contains(err.Error(), "unexpected state check") {
		t.Fatalf("got %v", err)
	}
	if v := version(t, c); v != "20" {
		t.Errorf("version %s after a failed step, want 20", v)
	}
	var n int
	if err := c.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE name = 'jobs_rebuilt'").Scan(&n); err != nil || n != 0 {
		t.Errorf("jobs_rebuilt left behind: %d, %v", n, err)
	}
}

// TestAddColumns: a step adds each column its table lacks and leaves
// alone one it has, so a database that ran the step before migrates.
func TestAddColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		create string
		cols   []column
		want   []string
	}{
		{"lacks both", "CREATE TABLE t (id INTEGER)", []column{{"t", "a TEXT"}, {"t", "b INTEGER NOT NULL DEFAULT 0"}}, []string{"id", "a", "b"}},
		{"has one", "CREATE TABLE t (id INTEGER, b INTEGER)", []column{{"t", "a TEXT"}, {"t", "b INTEGER NOT NULL DEFAULT 0"}}, []string{"id", "b", "a"}},
		{"has all", "CREATE TABLE t (id INTEGER, a TEXT)", []column{{"t", "a TEXT"}}, []string{"id", "a"}},
		{"none", "CREATE TABLE t (id INTEGER)", nil, []string{"id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := conn(t)
			exec(t, c, tc.create)
			if err := addColumns(ctx, c, tc.cols); err != nil {
				t.Fatal(err)
			}
			rows, err := c.QueryContext(ctx, "SELECT name FROM pragma_table_info('t')")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				got = append(got, s)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("columns %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAllowHeld: the rebuilt jobs table takes jobs' definition with the
// state check widened to 'H', whether or not it was already, and a jobs
// table of another shape is refused.
func TestAllowHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name, create, err string
	}{
		{"old check", `CREATE TABLE jobs (id INTEGER, state TEXT CHECK (state IN ('W','Q','E','D','F','B','X')))`, ""},
		{"wide check", `CREATE TABLE "jobs" (id INTEGER, state TEXT CHECK (state IN ('W','Q','H','E','D','F','B','X')))`, ""},
		{"other check", `CREATE TABLE jobs (id INTEGER, state TEXT CHECK (state IN ('Q')))`, "unexpected state check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := conn(t)
			exec(t, c, tc.create)
			err := allowHeld(ctx, c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			exec(t, c, "INSERT INTO jobs_rebuilt (id, state) VALUES (1, 'H')")
		})
	}
}

// TestBefore: the versions with a Go part are the ones that add columns
// or rebuild jobs, and every such version is a migration of the build.
func TestBefore(t *testing.T) {
	t.Parallel()
	var with []int
	for v := 1; v <= Version()+5; v++ {
		if before(v) != nil {
			with = append(with, v)
		}
	}
	if want := []int{2, 7, 10, 14, 16, 17, 21, 23, 24, 25, 27, 29, 31, 32}; !slices.Equal(with, want) || with[len(with)-1] > Version() {
		t.Fatalf("versions with a Go part %v, want %v (version %d)", with, want, Version())
	}
}

// TestQueries prepares every query of schema.sql against a migrated
// database and checks the code names each and only those.
func TestQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := conn(t)
	if err := Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range []string{"schema.go", "steps.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`queries\.Get\("(\w+)"\)`).FindAllStringSubmatch(string(src), -1) {
			used[m[1]] = true
		}
	}
	for _, name := range queries.Names() {
		if !used[name] {
			t.Errorf("query %s of schema.sql is not used", name)
		}
		delete(used, name)
		st, err := c.PrepareContext(ctx, queries.Get(name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		st.Close()
	}
	for name := range used {
		t.Errorf("query %s is used but not in schema.sql", name)
	}
}

// migrateTo runs the first k steps on c as a build of version k did,
// without the Go part of any version in skip.
func migrateTo(t *testing.T, c *sql.Conn, k int, skip ...int) {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:k] {
		if slices.Contains(skip, m.version) {
			m.before = nil
		}
		if err := apply(context.Background(), c, m); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
}

// columns lists every table's columns, sorted: what a database of a
// version holds, whatever order its steps added them in.
func columns(t *testing.T, c *sql.Conn) []string {
	t.Helper()
	rows, err := c.QueryContext(context.Background(),
		"SELECT m.name || '.' || p.name FROM sqlite_schema m, pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrateFromEveryVersion: a database of any earlier version, as that
// version's build left it, migrates to the columns a new database has.
// A version-9 database made before accounting (version 10) had a Go part
// at 9 is one of them.
func TestMigrateFromEveryVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fresh := conn(t)
	if err := Migrate(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	want := columns(t, fresh)
	for _, tc := range []struct {
		from int
		skip []int // versions whose Go part that build did not have
	}{
		{1, nil}, {5, nil}, {6, nil}, {8, nil}, {9, nil}, {9, []int{9}}, {10, nil},
		{13, nil}, {16, nil}, {17, nil}, {20, nil}, {21, nil}, {Version() - 1, nil},
	} {
		c := conn(t)
		migrateTo(t, c, tc.from, tc.skip...)
		if err := Migrate(ctx, c); err != nil {
			t.Errorf("from %d (skip %v): %v", tc.from, tc.skip, err)
			continue
		}
		if got := columns(t, c); !slices.Equal(got, want) {
			var miss []string
			for _, col := range want {
				if !slices.Contains(got, col) {
					miss = append(miss, col)
				}
			}
			t.Errorf("from %d (skip %v): lacks %v; has %d columns, a new database %d", tc.from, tc.skip, miss, len(got), len(want))
		}
	}
}

// TestStepsRerun: the steps from 021 on run again over what they made
// (Migrate reruns them for a database whose build numbered two of them
// otherwise), so each must find what it makes already there and keep it.
// A new step that cannot fails here.
func TestStepsRerun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := conn(t)
	if err := Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	want := columns(t, c)
	exec(t, c, "INSERT INTO job_priority (job_id, priority) VALUES (1, 5)")
	exec(t, c, "UPDATE meta SET value = '20' WHERE key = 'schema'")
	if err := Migrate(ctx, c); err != nil {
		t.Fatalf("steps 021 on, again: %v", err)
	}
	if got := columns(t, c); !slices.Equal(got, want) || version(t, c) != strconv.Itoa(Version()) {
		t.Fatalf("after the rerun: version %s, columns %v, want %v", version(t, c), got, want)
	}
	var n int
	if err := c.QueryRowContext(ctx, "SELECT count(*) FROM job_priority").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d priorities after the rerun, %v", n, err)
	}
}

// TestRedo: a database at or past a renumbered step that lacks what the
// step makes migrates again from that step.
func TestRedo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		drop string
		want int
	}{
		{"", Version()},
		{"DROP TABLE job_priority", 20},
		{"ALTER TABLE queues DROP COLUMN max_output", 26},
	} {
		c := conn(t)
		if err := Migrate(ctx, c); err != nil {
			t.Fatal(err)
		}
		if tc.drop != "" {
			exec(t, c, tc.drop)
		}
		if got, err := redo(ctx, c, Version()); err != nil || got != tc.want {
			t.Errorf("%q: redo from %d, %v; want %d", tc.drop, got, err, tc.want)
		}
		if got, err := redo(ctx, c, 19); err != nil || got != 19 {
			t.Errorf("%q at 19: redo from %d, %v", tc.drop, got, err)
		}
	}
}

// TestPlaceholderLast: a database of the previous version starts its
// highest placeholder id given from the highest it still names (a row, a
// job's, an attempt's), inserts raise it and deleting rows does not lower
// it; the step run again keeps it.
func TestPlaceholderLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := conn(t)
	migrateTo(t, c, 32)
	exec(t, c, "INSERT INTO placeholders (id, site, host, pid, out_dir, slots, started, last_seen) VALUES (3, 's', 'h', 1, '', 1, 0, 0)")
	exec(t, c, "INSERT INTO attempts (job_id, attempt, placeholder_id, reason) VALUES (1, 1, 9, 'lost')")
	if err := Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	last := func() int64 {
		t.Helper()
		var n int64
		if err := c.QueryRowContext(ctx, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'placeholder_last'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := last(); n != 9 {
		t.Fatalf("after the migration placeholder_last is %d, want 9 (the attempt's)", n)
	}
	exec(t, c, "INSERT INTO placeholders (id, site, host, pid, out_dir, slots, started, last_seen) VALUES (12, 's', 'h', 1, '', 1, 0, 0)")
	exec(t, c, "DELETE FROM placeholders")
	exec(t, c, "INSERT INTO placeholders (id, site, host, pid, out_dir, slots, started, last_seen) VALUES (5, 's', 'h', 1, '', 1, 0, 0)")
	if n := last(); n != 12 {
		t.Fatalf("after inserts and a delete placeholder_last is %d, want 12", n)
	}
	exec(t, c, "UPDATE meta SET value = '32' WHERE key = 'schema'")
	if err := Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	if n := last(); n != 12 {
		t.Fatalf("after the step again placeholder_last is %d, want 12", n)
	}
}
