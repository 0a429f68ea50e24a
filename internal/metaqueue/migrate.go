package metaqueue

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// The schema is one ordered list of numbered migrations, embedded SQL files
// named NNN_what.sql, applied in one place (migrate). The database records
// the last one applied in meta('schema'); a new database runs them all.
// Adding a table or a column is a new file with the next number.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one step of the schema.
type migration struct {
	version int
	name    string
	sql     string
	// before runs in the step's transaction ahead of its SQL, for what SQL
	// alone cannot say (a column only some old databases lack).
	before func(ctx context.Context, w *sql.Conn) error
}

// migrations returns every step, in order; the versions are 1..n.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []migration
	for i, name := range names {
		base := path.Base(name)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want number %03d", base, i+1)
		}
		text, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		m := migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(text)}
		switch v {
		case 2:
			m.before = addPlaceholderIdentity
		case 7:
			m.before = addFileRel
		case 9:
			m.before = addAccounting
		case 14:
			m.before = addReplication
		case 16:
			m.before = addTransferVia
		case 17:
			m.before = addPlanTimeline
		case 21:
			m.before = allowHeld
		case 23:
			m.before = addAttemptCommand
		case 24:
			m.before = addPrereqKind
		}
		out = append(out, m)
	}
	return out, nil
}

// schemaVersion is the version this build writes: its last migration.
func schemaVersion() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // the embedded files are the build's own
	}
	return len(ms)
}

// migrate brings the database to the build's schema: every migration after
// the recorded version, each in a transaction of its own with the version
// it reaches, so a crash leaves the database at a version it had.
func migrate(ctx context.Context, w *sql.Conn) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	have := 0
	var v string
	switch err := w.QueryRowContext(ctx, metaSQL.Get("SchemaVersion")).Scan(&v); {
	case err == nil:
		if have, err = strconv.Atoi(v); err != nil || have < 1 {
			return fmt.Errorf("metaqueue schema version %q is not a version number", v)
		}
	case strings.Contains(err.Error(), "no such table"), err == sql.ErrNoRows:
		// A new database.
	default:
		return fmt.Errorf("read the schema version: %w", err)
	}
	if have > len(ms) {
		return fmt.Errorf("metaqueue schema version %d is newer than this build's %d: this build cannot use it", have, len(ms))
	}
	for _, m := range ms[have:] {
		if err := apply(ctx, w, m); err != nil {
			return fmt.Errorf("migrate schema to %s: %w", m.name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, w *sql.Conn, m migration) (err error) {
	if _, err := w.ExecContext(ctx, connSQL.Get("Begin")); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.ExecContext(ctx, connSQL.Get("Rollback"))
		}
	}()
	if m.before != nil {
		if err := m.before(ctx, w); err != nil {
			return err
		}
	}
	if _, err := w.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	if _, err := w.ExecContext(ctx, metaSQL.Get("SetSchemaVersion"), strconv.Itoa(m.version)); err != nil {
		return err
	}
	_, err = w.ExecContext(ctx, connSQL.Get("Commit"))
	return err
}

// addPlaceholderIdentity adds placeholders.identity to the version 1
// databases made before placeholders recorded it.
func addPlaceholderIdentity(ctx context.Context, w *sql.Conn) error {
	var has int
	if err := w.QueryRowContext(ctx, metaSQL.Get("HasColumn"), "placeholders", "identity").Scan(&has); err != nil {
		return err
	}
	if has > 0 {
		return nil
	}
	_, err := w.ExecContext(ctx, "ALTER TABLE placeholders ADD COLUMN identity TEXT NOT NULL DEFAULT ''")
	return err
}

// addFileRel adds job_files.rel (version 7), unless a database that ran
// the step before has it.
func addFileRel(ctx context.Context, w *sql.Conn) error {
	var has int
	if err := w.QueryRowContext(ctx, metaSQL.Get("HasColumn"), "job_files", "rel").Scan(&has); err != nil {
		return err
	}
	if has > 0 {
		return nil
	}
	_, err := w.ExecContext(ctx, "ALTER TABLE job_files ADD COLUMN rel INTEGER NOT NULL DEFAULT 0")
	return err
}

// addTransferVia adds transfers.via (version 16), unless a database that
// ran the step before has it.
func addTransferVia(ctx context.Context, w *sql.Conn) error {
	return addColumns(ctx, w, [][2]string{{"transfers", "via TEXT NOT NULL DEFAULT ''"}})
}

// addPlanTimeline adds the plan timeline columns (version 17) to
// job_plans, each unless a database that ran the step before has it.
func addPlanTimeline(ctx context.Context, w *sql.Conn) error {
	return addColumns(ctx, w, [][2]string{
		{"job_plans", "plan_id INTEGER"},
		{"job_plans", "start_s REAL"},
		{"job_plans", "end_s REAL"},
		{"job_plans", "ready_s REAL"},
		{"job_plans", "slot INTEGER"},
	})
}

// addAttemptCommand adds attempts.command (version 23), unless a
// database that ran the step before has it.
func addAttemptCommand(ctx context.Context, w *sql.Conn) error {
	return addColumns(ctx, w, [][2]string{{"attempts", "command TEXT"}})
}

// addPrereqKind adds job_prereqs.kind (version 24), unless a database
// that ran the step before has it.
func addPrereqKind(ctx context.Context, w *sql.Conn) error {
	return addColumns(ctx, w, [][2]string{{"job_prereqs", "kind INTEGER NOT NULL DEFAULT 0 CHECK (kind IN (0, 1))"}})
}

// addReplication adds the job replication columns (version 14), each
// unless a database that ran the step before has it.
func addReplication(ctx context.Context, w *sql.Conn) error {
	return addColumns(ctx, w, [][2]string{
		{"jobs", "row_attempt INTEGER"},
		{"queues", "max_copies INTEGER NOT NULL DEFAULT 0 CHECK (max_copies >= 0)"},
		{"attempts", "killed_copy INTEGER NOT NULL DEFAULT 0"},
	})
}

// allowHeld makes the table that widens jobs.state's CHECK to the held
// state 'H' (version 20): SQLite cannot alter a constraint, so the step
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
	if err := w.QueryRowContext(ctx, metaSQL.Get("TableSQL"), "jobs").Scan(&def); err != nil {
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

// addColumns adds each (table, column definition) the table lacks.
func addColumns(ctx context.Context, w *sql.Conn, cols [][2]string) error {
	for _, c := range cols {
		name := strings.Fields(c[1])[0]
		var has int
		if err := w.QueryRowContext(ctx, metaSQL.Get("HasColumn"), c[0], name).Scan(&has); err != nil {
			return err
		}
		if has > 0 {
			continue
		}
		if _, err := w.ExecContext(ctx, "ALTER TABLE "+c[0]+" ADD COLUMN "+c[1]); err != nil {
			return err
		}
	}
	return nil
}

// addAccounting adds the accounting columns (version 9) to jobs and
// attempts, each unless a database that ran the step before has it.
func addAccounting(ctx context.Context, w *sql.Conn) error {
	for _, table := range []string{"jobs", "attempts"} {
		for _, col := range []string{"cpu_user REAL", "cpu_sys REAL", "max_rss INTEGER"} {
			name := strings.Fields(col)[0]
			var has int
			if err := w.QueryRowContext(ctx, metaSQL.Get("HasColumn"), table, name).Scan(&has); err != nil {
				return err
			}
			if has > 0 {
				continue
			}
			if _, err := w.ExecContext(ctx, "ALTER TABLE "+table+" ADD COLUMN "+col); err != nil {
				return err
			}
		}
	}
	return nil
}
