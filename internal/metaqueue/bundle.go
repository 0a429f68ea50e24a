package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Bundles. A bundle is the jobs of one submit request with "bundle": true:
// ordinary jobs (own ids, rows, states, attempts and output files) that
// share a bundle id, the id of the first. Dispatch hands a bundle's Queued
// jobs together, in id order, to one placeholder, which runs them one after
// another in one slot. The rule, kept simple:
//
//   - A bundle is held back while any of its live jobs is Waiting.
//   - Otherwise it goes with every job of it that is Queued; jobs still
//     Executing elsewhere (a partial requeue), Blocked or ended stay out.
//     A job requeued later (lost placeholder, rerun) runs with whatever of
//     its bundle is Queued then, possibly alone.
//   - A job of a bundle may not name a target of the same bundle as a
//     prerequisite (it would wait for a job that runs after it).
//
// Only live jobs' bundles are kept in memory.

// maxBundle is the most jobs one bundle may hold (the driver's largest
// buffer).
const maxBundle = 10000

// maxToken is the longest idempotency token.
const maxToken = 128

// bundles tracks live bundles for the core.
type bundles struct {
	members map[int64][]int64 // bundle id -> its live jobs, in order
	of      map[int64]int64   // job id -> bundle id
}

func (b *bundles) reset() { b.members, b.of = map[int64][]int64{}, map[int64]int64{} }

func (b *bundles) add(first int64, n int) {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)
		b.of[ids[i]] = first
	}
	b.members[first] = ids
}

// ended forgets a job that reached a terminal state.
func (b *bundles) ended(id int64) {
	bid, ok := b.of[id]
	if !ok {
		return
	}
	delete(b.of, id)
	m := slices.DeleteFunc(b.members[bid], func(x int64) bool { return x == id })
	if len(m) == 0 {
		delete(b.members, bid)
	} else {
		b.members[bid] = m
	}
}

// checkSubmitOptions validates a submit request's bundle and token.
func checkSubmitOptions(req protocol.Submit) error {
	if len(req.Token) > maxToken {
		return protocol.Errorf(protocol.CodeBadRequest, "token is %d bytes; the limit is %d", len(req.Token), maxToken)
	}
	if !req.Bundle {
		return nil
	}
	if len(req.Jobs) > maxBundle {
		return protocol.Errorf(protocol.CodeBadRequest, "a bundle of %d jobs; the limit is %d", len(req.Jobs), maxBundle)
	}
	targets := map[string]bool{}
	for _, js := range req.Jobs {
		targets[js.Target] = true
	}
	for i, js := range req.Jobs {
		for _, p := range js.Prereqs {
			if targets[p] {
				return protocol.Errorf(protocol.CodeBadRequest,
					"job %d: a job of a bundle cannot wait on target %s of the same bundle (the bundle runs in order anyway)", i+1, p)
			}
		}
	}
	return nil
}

// addBundle records jobs first..first+n-1 as one bundle, in the batch's
// transaction.
func (s *Store) addBundle(first int64, n int) error {
	if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("SetBundle"), first, first+int64(n)-1); err != nil {
		return fatalError{err}
	}
	s.bundles.add(first, n)
	return nil
}

// tokenIDs returns the ids of an earlier submit with this token, or nil.
func (s *Store) tokenIDs(token string) ([]int64, error) {
	if token == "" {
		return nil, nil
	}
	var first int64
	var n int
	err := s.w.QueryRowContext(context.Background(), submitsSQL.Get("ByToken"), token).Scan(&first, &n)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fatalError{err}
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = first + int64(i)
	}
	return ids, nil
}

// saveToken remembers a submit's token with its ids, in its transaction.
func (s *Store) saveToken(token string, first int64, n int) error {
	if token == "" {
		return nil
	}
	if _, err := s.w.ExecContext(context.Background(), submitsSQL.Get("InsertSubmit"),
		token, first, n, micros(s.now())); err != nil {
		return fatalError{err}
	}
	return nil
}

// tokenTTL is how long a submit token is remembered. A client resends a
// submit after reconnecting (the driver tries for minutes), so a day is
// ample, and the table stays small however many requests a driver makes.
const tokenTTL = 24 * time.Hour

// pruneTokens forgets tokens older than tokenTTL, at most once an hour (the
// core calls it on its tick).
func (s *Store) pruneTokens() error {
	now := s.now()
	if now.Sub(s.tokensPruned) < time.Hour {
		return nil
	}
	s.tokensPruned = now
	if err := s.begin(); err != nil {
		return err
	}
	if _, err := s.w.ExecContext(context.Background(), submitsSQL.Get("Expire"), micros(now.Add(-tokenTTL))); err != nil {
		return fatalError{err}
	}
	return nil
}

// loadBundles rebuilds the bundles of live jobs from the database.
func (s *Store) loadBundles(ctx context.Context) error {
	s.bundles.reset()
	rows, err := s.w.QueryContext(ctx, jobsSQL.Get("LiveBundles"))
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, bid int64
		if err := rows.Scan(&id, &bid); err != nil {
			rows.Close()
			return err
		}
		s.bundles.of[id] = bid
		s.bundles.members[bid] = append(s.bundles.members[bid], id)
	}
	return closeRows(rows)
}

// bundlePick expands a job picked for dispatch to what goes with it: the
// job alone if it is in no bundle, every Queued job of its bundle in order,
// or nothing if the bundle is held back (a job of it is Waiting or Held;
// the job is pushed again when its state changes, so nothing is lost by
// dropping this heap entry). A bundle runs its jobs one after another, so with a
// placeholder walltime (> 0) it takes only as many as fit in it together:
// the picked job (which fits alone), then the others in order while they
// fit. Those left out stay Queued and go with a later request.
func (s *Store) bundlePick(id int64, walltime float64) (ids []int64, bundle int64) {
	bid, ok := s.bundles.of[id]
	if !ok {
		return []int64{id}, 0
	}
	members := s.bundles.members[bid]
	for _, m := range members {
		if j, ok := s.g.Node(m); ok && (j.State == job.Waiting || j.State == job.Held) {
			return nil, bid
		}
	}
	budget := walltime - s.jobNeed(id)
	for _, m := range members {
		j, ok := s.g.Node(m)
		if !ok || j.State != job.Queued {
			continue
		}
		if m != id && walltime > 0 {
			n := s.jobNeed(m)
			if n > budget {
				continue
			}
			budget -= n
		}
		ids = append(ids, m)
	}
	return ids, bid
}

// jobNeed is need for job id.
func (s *Store) jobNeed(id int64) float64 {
	j, ok := s.g.Node(id)
	if !ok {
		return 0
	}
	return need(j.Est, s.queueIDs[j.Queue])
}

// slotsUsed counts the slots a list of assignments fills: one per job, one
// per bundle.
func slotsUsed(jobs []protocol.Assignment) int {
	n := 0
	for i, a := range jobs {
		if a.Bundle == 0 || i == 0 || jobs[i-1].Bundle != a.Bundle {
			n++
		}
	}
	return n
}
