package loadscan

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// Kinds of job_prereqs.kind: what a job needs of a prerequisite target.
const (
	AfterOK  = 0 // every job Done
	AfterAny = 1 // every job ended, in any state
)

// JobPrereqs reads one job's prerequisite targets, rows of (target, kind)
// as Query returns them, split into the after-ok and the after-any ones
// in the rows' order: what a rerun gives the graph again.
func JobPrereqs(rows *sql.Rows, err error) (prereqs, afterAny []dag.TargetID, _ error) {
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var t, kind int32
		if err := rows.Scan(&t, &kind); err != nil {
			return nil, nil, errors.Join(err, rows.Close())
		}
		if kind == AfterAny {
			afterAny = append(afterAny, dag.TargetID(t))
		} else {
			prereqs = append(prereqs, dag.TargetID(t))
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, nil, err
	}
	return prereqs, afterAny, nil
}

// Row is a row to scan (*sql.Row).
type Row interface{ Scan(dest ...any) error }

// JobRow reads job id's row of (state as text, queue, target, est,
// attempts, attempt base), live or ended: what a rerun and a selection's
// checks read of a job not in memory. With no row it returns
// sql.ErrNoRows.
func JobRow(row Row, id int64) (Job, error) {
	j := Job{ID: id}
	var st string
	var est sql.NullFloat64
	if err := row.Scan(&st, &j.Queue, &j.Target, &est, &j.Attempts, &j.Base); err != nil {
		return j, err
	}
	if len(st) != 1 {
		return j, fmt.Errorf("job %d has no valid state %q", id, st)
	}
	j.State, j.Est = job.State(st[0]), est.Float64
	return j, nil
}
