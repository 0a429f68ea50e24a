package metaqueue

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mq-hpc/mq/internal/metaqueue/selector"
	"github.com/mq-hpc/mq/protocol"
)

// Hold keeps jobs from running until Release: Waiting and Queued ones
// become Held. Their targets stay incomplete, so dependents wait.
func (s *Store) Hold(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.actOnSelected(ctx, sel, selector.Hold, s.hold)
}

// Release lets held jobs run: each becomes Queued, Waiting or Blocked as
// its prerequisites say.
func (s *Store) Release(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.actOnSelected(ctx, sel, selector.Release, s.release)
}

// setPriority records a new job's priority (0, the default, is not
// stored) in the submit's transaction.
func (s *Store) setPriority(id int64, p int) error {
	if p == 0 {
		return nil
	}
	if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("InsertPriority"), id, p); err != nil {
		return fatalError{err}
	}
	s.prio[id] = int16(p)
	return nil
}

// loadPriorities reads the live jobs' priorities at load.
func (s *Store) loadPriorities(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, jobsSQL.Get("LivePriorities"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int64
		var p int16
		if err := rows.Scan(&id, &p); err != nil {
			rows.Close()
			return err
		}
		s.prio[id] = p
	}
	return closeRows(rows)
}

// revivePriority reads back the priority of a job brought back by a rerun
// (an ended job's is not kept in memory).
func (s *Store) revivePriority(id int64) error {
	var p int16
	err := s.w.QueryRowContext(context.Background(), jobsSQL.Get("JobPriority"), id).Scan(&p)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fatalError{err}
	}
	s.prio[id] = p
	return nil
}
