// Package schema is the metaqueue database's schema: one ordered list of
// numbered migrations, embedded SQL files named NNN_what.sql, applied in
// one place (Migrate), as river keeps its migrations. The database records
// the last one applied in meta('schema'); a new database runs them all.
// Adding a table or a column is a new file with the next number.
//
// The package knows the database only through the writer connection the
// core opens; it imports no part of the metaqueue.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed schema.sql
var schemaFile string

var queries = sqlfile.MustParse("schema.sql", schemaFile)

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
		out = append(out, migration{
			version: v,
			name:    strings.TrimSuffix(base, ".sql"),
			sql:     string(text),
			before:  before(v),
		})
	}
	return out, nil
}

// Version is the schema version this build writes: its last migration.
func Version() int {
	ms, err := migrations()
	if err != nil {
		panic(err) // the embedded files are the build's own
	}
	return len(ms)
}

// Migrate brings the database on w to the build's schema: every migration
// after the recorded version, each in a transaction of its own with the
// version it reaches, so a crash leaves the database at a version it had.
// A database newer than the build is refused. w is the only writer: a
// step's BEGIN, statements and COMMIT must run on one connection.
func Migrate(ctx context.Context, w *sql.Conn) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	have := 0
	var v string
	switch err := w.QueryRowContext(ctx, queries.Get("SchemaVersion")).Scan(&v); {
	case err == nil:
		if have, err = strconv.Atoi(v); err != nil || have < 1 {
			return fmt.Errorf("metaqueue schema version %q is not a version number", v)
		}
	case strings.Contains(err.Error(), "no such table"), errors.Is(err, sql.ErrNoRows):
		// A new database.
	default:
		return fmt.Errorf("read the schema version: %w", err)
	}
	if have > len(ms) {
		return fmt.Errorf("metaqueue schema version %d is newer than this build's %d: this build cannot use it", have, len(ms))
	}
	if have, err = redo(ctx, w, have); err != nil {
		return err
	}
	for _, m := range ms[have:] {
		if err := apply(ctx, w, m); err != nil {
			return fmt.Errorf("migrate schema to %s: %w", m.name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, w *sql.Conn, m migration) (err error) {
	if _, err := w.ExecContext(ctx, queries.Get("Begin")); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.ExecContext(ctx, queries.Get("Rollback"))
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
	if _, err := w.ExecContext(ctx, queries.Get("SetSchemaVersion"), strconv.Itoa(m.version)); err != nil {
		return err
	}
	_, err = w.ExecContext(ctx, queries.Get("Commit"))
	return err
}
