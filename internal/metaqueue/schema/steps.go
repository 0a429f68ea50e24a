package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// column is a column a step adds, unless the table already has it: the
// first databases of some versions were made before the column was, and a
// database that ran the step before must not fail on it again.
type column struct{ table, def string }

// addedColumns are the columns each version's Go part adds, in order.
func addedColumns(version int) []column {
	switch version {
	case 2: // version 1 databases made before placeholders recorded it
		return []column{{"placeholders", "identity TEXT NOT NULL DEFAULT ''"}}
	case 7:
		return []column{{"job_files", "rel INTEGER NOT NULL DEFAULT 0"}}
	case 10: // accounting; earlier builds added these at 9, so a
		// database they left at 9 may have them already
		return []column{
			{"jobs", "cpu_user REAL"}, {"jobs", "cpu_sys REAL"}, {"jobs", "max_rss INTEGER"},
			{"attempts", "cpu_user REAL"}, {"attempts", "cpu_sys REAL"}, {"attempts", "max_rss INTEGER"},
		}
	case 14: // job replication
		return []column{
			{"jobs", "row_attempt INTEGER"},
			{"queues", "max_copies INTEGER NOT NULL DEFAULT 0 CHECK (max_copies >= 0)"},
			{"attempts", "killed_copy INTEGER NOT NULL DEFAULT 0"},
		}
	case 16:
		return []column{{"transfers", "via TEXT NOT NULL DEFAULT ''"}}
	case 17: // the plan timeline
		return []column{
			{"job_plans", "plan_id INTEGER"},
			{"job_plans", "start_s REAL"},
			{"job_plans", "end_s REAL"},
			{"job_plans", "ready_s REAL"},
			{"job_plans", "slot INTEGER"},
		}
	case 23:
		return []column{{"attempts", "command TEXT"}}
	case 24:
		return []column{{"job_prereqs", "kind INTEGER NOT NULL DEFAULT 0 CHECK (kind IN (0, 1))"}}
	case 25:
		return []column{{"targets", "purged_done INTEGER NOT NULL DEFAULT 0"}, {"targets", "purged_bad INTEGER NOT NULL DEFAULT 0"}}
	case 27:
		return []column{{"queues", "max_output INTEGER NOT NULL DEFAULT 0 CHECK (max_output >= 0)"}}
	case 29: // prefetched jobs (mqstat's P), attempts handed back unstarted
		return []column{
			{"jobs", "prefetched INTEGER CHECK (prefetched = 1)"},
			{"attempts", "unstarted INTEGER NOT NULL DEFAULT 0 CHECK (unstarted IN (0, 1))"},
		}
	case 31:
		return []column{{"queues", "output TEXT NOT NULL DEFAULT '' CHECK (output IN ('', 'files'))"}}
	case 32: // queue times that survive a restart
		return []column{{"jobs", "ready INTEGER"}, {"queues", "choosing_since INTEGER"}}
	}
	return nil
}

// before is version's Go part, run ahead of its SQL; nil: none.
func before(version int) func(context.Context, *sql.Conn) error {
	if version == 21 {
		return allowHeld
	}
	cols := addedColumns(version)
	if cols == nil {
		return nil
	}
	return func(ctx context.Context, w *sql.Conn) error { return addColumns(ctx, w, cols) }
}

// addColumns adds each column its table lacks.
func addColumns(ctx context.Context, w *sql.Conn, cols []column) error {
	for _, c := range cols {
		name := strings.Fields(c.def)[0]
		var has int
		if err := w.QueryRowContext(ctx, queries.Get("HasColumn"), c.table, name).Scan(&has); err != nil {
			return err
		}
		if has > 0 {
			continue
		}
		if _, err := w.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD COLUMN "+c.def); err != nil {
			return err
		}
	}
	return nil
}

// allowHeld makes the table that widens jobs.state's CHECK to the held
// state 'H' (version 21): SQLite cannot alter a constraint, so the step
// rebuilds jobs (SQLite's documented way). This half creates jobs_rebuilt
// from jobs' own stored definition, so columns earlier steps added come
// along; the step's SQL copies the rows into it, drops jobs and renames
// it. A database whose check already allows 'H' is copied all the same.
func allowHeld(ctx context.Context, w *sql.Conn) error {
	const (
		old  = "CHECK (state IN ('W','Q','E','D','F','B','X'))"
		wide = "CHECK (state IN ('W','Q','H','E','D','F','B','X'))"
	)
	var def string
	if err := w.QueryRowContext(ctx, queries.Get("TableSQL"), "jobs").Scan(&def); err != nil {
		return fmt.Errorf("read the jobs table's definition: %w", err)
	}
	if !strings.Contains(def, old) && !strings.Contains(def, wide) {
		return fmt.Errorf("the jobs table has an unexpected state check: %.200s", def)
	}
	// The stored name may be quoted ("jobs" after an earlier rebuild).
	i := strings.IndexByte(def, '(')
	if i < 0 || !strings.HasPrefix(def, "CREATE TABLE ") {
		return fmt.Errorf("the jobs table has an unexpected definition: %.60s", def)
	}
	_, err := w.ExecContext(ctx, "CREATE TABLE jobs_rebuilt "+strings.Replace(def[i:], old, wide, 1))
	return err
}

// renumbered are steps that builds of an earlier numbering recorded under
// another step's version: builds that numbered the job resources step 021
// (it is 022, after the held state's 021) and the sparse indexes 027 (they
// are 028, after the queue output cap's 027). A database such a build left
// at that version, or any later one, lacks the step now numbered there,
// and its next build would skip it. Each entry is the step and what a
// database that ran it has.
var renumbered = []struct {
	version int
	table   string // the step made this table
	column  column // or added this column
}{
	{version: 21, table: "job_priority"},
	{version: 27, column: column{"queues", "max_output"}},
}

// redo returns the version from which Migrate must run for the database on
// w, recorded at have: before the first renumbered step the database lacks.
// The steps from there on find what they make already there and keep it.
func redo(ctx context.Context, w *sql.Conn, have int) (int, error) {
	for _, r := range renumbered {
		if have < r.version {
			break
		}
		var n int
		var err error
		if r.table != "" {
			err = w.QueryRowContext(ctx, queries.Get("HasTable"), r.table).Scan(&n)
		} else {
			err = w.QueryRowContext(ctx, queries.Get("HasColumn"), r.column.table, r.column.def).Scan(&n)
		}
		if err != nil {
			return 0, fmt.Errorf("check schema step %d: %w", r.version, err)
		}
		if n == 0 {
			return r.version - 1, nil
		}
	}
	return have, nil
}
