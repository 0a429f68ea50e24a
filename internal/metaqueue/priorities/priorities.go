// Package priorities keeps jobs' priorities (mqsub --priority, higher first
// within a queue): stored in job_priority only when not 0, so a
// metaqueue that never uses them stores and loads nothing more, and
// kept in memory for the live jobs, where the ready heaps read them.
//
// The metaqueue's core calls Add in a submit's transaction, Load after
// open, Revive when a rerun brings a job back and Forget when a job
// ends; it reads and writes through the core's writer (Execer).
package priorities

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

//go:embed priorities.sql
var prioritiesSQL string

var queries = sqlfile.MustParse("priorities.sql", prioritiesSQL)

// Execer is the connection the module reads and writes through: the
// core's writer (*sql.Conn, *sql.Tx).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Priorities are the live jobs' priorities that are not 0. The zero
// value keeps none; it is owned by the core's goroutine.
type Priorities struct {
	m map[int64]int16
}

// Of returns job id's priority: 0 unless one was given.
func (p *Priorities) Of(id int64) int16 { return p.m[id] }

// Forget drops the priority of a job that ended.
func (p *Priorities) Forget(id int64) { delete(p.m, id) }

// Reset forgets every job's, as before a load.
func (p *Priorities) Reset() { p.m = map[int64]int16{} }

// Add records new job id's priority prio in the submit's transaction
// (0, the default, is not stored).
func (p *Priorities) Add(ctx context.Context, ex Execer, id int64, prio int) error {
	if prio == 0 {
		return nil
	}
	if _, err := ex.ExecContext(ctx, queries.Get("InsertPriority"), id, prio); err != nil {
		return err
	}
	p.set(id, int16(prio))
	return nil
}

// Set changes live job id's priority to prio in the core's transaction
// (mqalter): 0, the default, drops its row.
func (p *Priorities) Set(ctx context.Context, ex Execer, id int64, prio int) error {
	if _, err := ex.ExecContext(ctx, queries.Get("DeletePriority"), id); err != nil {
		return err
	}
	delete(p.m, id)
	return p.Add(ctx, ex, id, prio)
}

// Load reads the live jobs' priorities, as the core loads after open.
func (p *Priorities) Load(ctx context.Context, ex Execer) error {
	rows, err := ex.QueryContext(ctx, queries.Get("LivePriorities"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var prio int16
		if err := rows.Scan(&id, &prio); err != nil {
			rows.Close()
			return err
		}
		p.set(id, prio)
	}
	return errors.Join(rows.Err(), rows.Close())
}

// Revive reads back the priority of job id, brought back by a rerun (an
// ended job's is not kept in memory).
func (p *Priorities) Revive(ctx context.Context, ex Execer, id int64) error {
	var prio int16
	err := ex.QueryRowContext(ctx, queries.Get("JobPriority"), id).Scan(&prio)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	p.set(id, prio)
	return nil
}

func (p *Priorities) set(id int64, prio int16) {
	if p.m == nil {
		p.m = map[int64]int16{}
	}
	p.m[id] = prio
}
