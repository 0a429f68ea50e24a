package loadscan

import (
	"database/sql"
	"errors"

	"github.com/mq-hpc/mq/internal/dag"
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
