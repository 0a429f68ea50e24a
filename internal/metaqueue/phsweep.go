package metaqueue

import (
	"context"
	"time"
)

// Placeholder rows are kept for what mqstat shows of the jobs they ran
// (site and host of every attempt). A placeholder that never ran anything
// needs no row once it is gone for good, and a key that registers in a loop
// would otherwise add rows forever (20,000 registrations on one connection
// added 20,000 rows, 90 MB). Gone for good means: registered on no open
// connection for longer than a lease (a reconnect within a lease reclaims
// its id), with no job, attempt or copy naming it, and no poll parked.
// They are swept on the core's tick, at most once a lease; rows of earlier
// runs that ran nothing count as disconnected when the store opens.
type phSweep struct {
	conns map[int64]int       // placeholders registered on open connections: how many
	fresh map[int64]time.Time // registered in this run and never handed work: when last seen on a connection (zero: on one now)
	swept time.Time
}

// registered notes a registration on a connection; isNew is a new row.
func (s *Store) phRegistered(id int64, isNew bool) {
	if s.sweep.conns == nil {
		s.sweep.conns, s.sweep.fresh = map[int64]int{}, map[int64]time.Time{}
	}
	s.sweep.conns[id]++
	if _, old := s.sweep.fresh[id]; isNew || old {
		s.sweep.fresh[id] = time.Time{}
	}
}

// phWorked notes that a placeholder was handed a job: its row stays.
func (s *Store) phWorked(id int64) { delete(s.sweep.fresh, id) }

// PlaceholderDisconnected tells the store that a connection a placeholder
// registered on has closed (the server calls it for each).
func (s *Store) PlaceholderDisconnected(ctx context.Context, id int64) error {
	return s.do(ctx, func() error {
		if n := s.sweep.conns[id] - 1; n > 0 {
			s.sweep.conns[id] = n
			return nil
		}
		delete(s.sweep.conns, id)
		if _, ok := s.sweep.fresh[id]; ok {
			s.sweep.fresh[id] = s.now()
		}
		return nil
	})
}

// sweepPlaceholders deletes the rows of this run's placeholders gone for
// good.
func (s *Store) sweepPlaceholders(now time.Time) error {
	if len(s.sweep.fresh) == 0 || now.Sub(s.sweep.swept) < s.opt.Lease {
		return nil
	}
	s.sweep.swept = now
	parked := map[int64]bool{}
	for _, p := range s.parked {
		parked[p.req.Placeholder] = true
	}
	var gone []int64
	for id, left := range s.sweep.fresh {
		if left.IsZero() || s.sweep.conns[id] > 0 || parked[id] || now.Sub(left) < s.opt.Lease {
			continue
		}
		gone = append(gone, id)
	}
	if len(gone) == 0 {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	for _, id := range gone {
		if _, err := s.w.ExecContext(context.Background(), placeholdersSQL.Get("DeletePlaceholder"), id); err != nil {
			return fatalError{err}
		}
		delete(s.sweep.fresh, id)
		delete(s.phs, id)
		if s.data.PlaceholderGone(id) {
			s.dataChanged()
		}
	}
	s.log.Info("deleted the rows of placeholders gone for good", "placeholders", len(gone))
	return nil
}

// sweepOldPlaceholders notes, when the store opens, the rows of earlier
// runs' placeholders that ran nothing: unless one registers again within a
// lease (a placeholder connected when the CLS stopped), the tick deletes
// them.
func (s *Store) sweepOldPlaceholders(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, placeholdersSQL.Get("Unreferenced"))
	if err != nil {
		return err
	}
	defer rows.Close()
	now := s.now()
	s.sweep.conns, s.sweep.fresh = map[int64]int{}, map[int64]time.Time{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		s.sweep.fresh[id] = now
	}
	return rows.Err()
}
