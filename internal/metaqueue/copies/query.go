package copies

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Load reads which row attempts run apart and which jobs opted out, and
// returns the copies running beside executing jobs, by job and attempt.
// The caller resets first and syncs the index after.
func (c *Copies) Load(ctx context.Context, ex Execer) ([]Run, error) {
	var runs []Run
	err := each(ctx, ex, "LoadCopies", func(rows *sql.Rows) error {
		var r Run
		var started int64
		if err := rows.Scan(&r.Job, &r.Attempt, &r.Placeholder, &started); err != nil {
			return err
		}
		r.Started = time.UnixMicro(started)
		runs = append(runs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// A row for an attempt other than the one running is stale: Apart
	// compares attempts.
	err = each(ctx, ex, "LoadApart", func(rows *sql.Rows) error {
		var id int64
		var attempt int
		if err := rows.Scan(&id, &attempt); err != nil {
			return err
		}
		c.apart[id] = attempt
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = each(ctx, ex, "LoadOptedOut", func(rows *sql.Rows) error {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		c.noCopy[id] = true
		return nil
	})
	return runs, err
}

// each runs the named query and calls f for each row.
func each(ctx context.Context, ex Execer, name string, f func(*sql.Rows) error, args ...any) error {
	rows, err := ex.QueryContext(ctx, queries.Get(name), args...)
	if err != nil {
		return fmt.Errorf("copies: %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return fmt.Errorf("copies: %s: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("copies: %s: %w", name, err)
	}
	return rows.Close()
}

// Copy is a copy of a job running now, as mqstat shows it.
type Copy struct {
	Attempt    int
	Site, Host string
	Started    sql.NullInt64 // microseconds since the epoch
	OutDir     string        // its placeholder's output directory, if any
}

// Running lists the copies of job id running now.
func Running(ctx context.Context, ex Execer, id int64) ([]Copy, error) {
	var out []Copy
	err := each(ctx, ex, "RunningCopies", func(rows *sql.Rows) error {
		var c Copy
		if err := rows.Scan(&c.Attempt, &c.Site, &c.Host, &c.Started, &c.OutDir); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	}, id)
	return out, err
}

// Waste totals what killed copies used (nil when none was killed).
func Waste(ctx context.Context, ex Execer) (*protocol.WasteTotals, error) {
	var w protocol.WasteTotals
	err := ex.QueryRowContext(ctx, queries.Get("Waste")).Scan(&w.Killed, &w.CPUSeconds, &w.WallSeconds)
	if err != nil || w.Killed == 0 {
		return nil, err
	}
	// Bytes staged for a job to a site where only a killed copy of it ran.
	err = ex.QueryRowContext(ctx, queries.Get("WasteBytes")).Scan(&w.Bytes)
	return &w, err
}

// Attempted lists the copies of job id running now as mqstat shows them,
// their start in layout.
func Attempted(ctx context.Context, ex Execer, id int64, layout string) ([]protocol.AttemptInfo, error) {
	cs, err := Running(ctx, ex, id)
	if err != nil {
		return nil, err
	}
	var out []protocol.AttemptInfo
	for _, c := range cs {
		a := protocol.AttemptInfo{Attempt: c.Attempt, Site: c.Site, Host: c.Host}
		if c.Started.Valid {
			a.Started = time.UnixMicro(c.Started.Int64).Format(layout)
		}
		if c.OutDir != "" {
			a.Stdout, a.Stderr = job.OutputPaths(c.OutDir, id, c.Attempt)
		}
		out = append(out, a)
	}
	return out, nil
}
