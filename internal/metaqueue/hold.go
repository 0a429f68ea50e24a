package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mq-hpc/mq/protocol"
)

// Hold keeps jobs from running until Release: Waiting and Queued ones
// become Held. Their targets stay incomplete, so dependents wait.
func (s *Store) Hold(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	check := func(id int64) (string, error) {
		return s.checkLive(id, sel.Queue, "WQ", "only waiting or queued jobs can be held")
	}
	apply := func(id int64) error {
		if err := s.begin(); err != nil {
			return err
		}
		return s.hold(id)
	}
	return s.actOnSelected(ctx, sel, "WQ", check, apply)
}

// Release lets held jobs run: each becomes Queued, Waiting or Blocked as
// its prerequisites say.
func (s *Store) Release(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	check := func(id int64) (string, error) {
		return s.checkLive(id, sel.Queue, "H", "only held jobs can be released")
	}
	apply := func(id int64) error {
		if err := s.begin(); err != nil {
			return err
		}
		return s.release(id)
	}
	return s.actOnSelected(ctx, sel, "H", check, apply)
}

// checkLive says why job id cannot take an action that applies to jobs
// in states (why, when it is in another), or "" when it can.
func (s *Store) checkLive(id int64, queue, states, why string) (string, error) {
	j, live := s.g.Node(id)
	if !live {
		sj, err := s.storedJob(id)
		if err != nil {
			if protocol.IsCode(err, protocol.CodeNotFound) {
				return err.Error(), nil
			}
			return "", err
		}
		return fmt.Sprintf("job %d has already ended (%s)", id, sj.state.Name()), nil
	}
	if queue != "" && s.queueIDs[j.Queue].Name != queue {
		return fmt.Sprintf("job %d is not in queue %s", id, queue), nil
	}
	for i := 0; i < len(states); i++ {
		if byte(j.State) == states[i] {
			return "", nil
		}
	}
	return fmt.Sprintf("job %d is %s; %s", id, j.State.Name(), why), nil
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
