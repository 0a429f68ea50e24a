package metaqueue

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/internal/sqlfile"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Every write of a job's state, in its row and in the graph, is one of the
// transitions in this file, so the whole lifecycle reads in one place:
//
//	submitted        new job -> Waiting, Queued or Blocked (or Held, submitted so)
//	hold             Waiting or Queued -> Held (mqalter: held and released around its change)
//	release          Held -> Waiting, Queued or Blocked
//	claim, claimRows Queued -> Executing, for one placeholder's request
//	leaveExecuting   Executing -> what an ended attempt's outcome gives, one of:
//	finish           Executing -> Done or Failed, the attempt over
//	requeue          Executing -> Queued, the attempt kept (killed over its memory: not counted)
//	unclaim          Executing -> Queued, returned unstarted (listed, not counted)
//	deleteJob        Waiting, Queued, Held, Executing or Blocked -> Deleted
//	rerun            Done, Failed or Deleted -> Waiting, Queued or Blocked
//	failUnstageable  Queued -> Failed, an input no transfer could bring
//	applyChanges     the jobs that depend on a moved one follow it
//	reconcile        stored pending states fixed to the graph's at load
//
// Callers do a feature's own bookkeeping first (the ledger's charge,
// copies stopped, the run forgotten); a transition writes the row, moves
// the job in the graph and lets applyChanges carry the consequences to
// counters, ready heaps, dependents and waiters.

// The statements that write jobs.state, from jobs.sql (prepared in
// stmts); no other Go file names them.
var (
	insJobSQL   = jobsSQL.Get("InsertJob")
	setStateSQL = jobsSQL.Get("SetState")
	finishSQL   = jobsSQL.Get("Finish")
	requeueSQL  = jobsSQL.Get("Requeue")
	unclaimSQL  = jobsSQL.Get("Unclaim")
	rerunSQL    = jobsSQL.Get("Rerun")
	deleteSQL   = jobsSQL.Get("Delete")
	// insJobsSQL inserts bulkRows new jobs in one statement.
	insJobsSQL = sqlfile.MultiRow(insJobSQL, bulkRows)
)

// claimSQL marks n jobs Executing for one placeholder (?1) from ?2 on and
// returns what their assignments need. Jobs handed out ahead of the
// placeholder's free slots are marked prefetched (P): all (claimAll), or
// those ?3 lists (",7,9,": claimSome), so one statement claims them all,
// as without prefetch (a second one cost the CLS about 15% more CPU per
// `true` job).
func claimSQL(n, kind int) string {
	mark := [...]string{claimNone: "NULL", claimAll: "1", claimSome: "CASE WHEN instr(?3, ',' || id || ',') > 0 THEN 1 END"}[kind]
	return strings.Replace(sqlfile.InList(jobsSQL.Get("Claim"), "ids", n), "prefetched = NULL", "prefetched = "+mark, 1)
}

// Claims by how many of their jobs are ahead (dispatchN).
const (
	claimNone = iota
	claimAll
	claimSome
)

// submitted enters new job id, its row buffered in in, into the graph
// and the estimates that rank it.
func (s *Store) submitted(id int64, n dag.Node, q *queue, est float64, in *inserter) error {
	ch := s.g.AddJob(id, n)
	q.est.Note(est)
	if s.bl.On() {
		s.bl.Note(n.Target, n.Est)
	}
	return s.applyChanges(ch, -1, in)
}

// patch reports whether job id is still in the buffer, and patches its
// state.
func (in *inserter) patch(id int64, st job.State) bool {
	if in == nil || id < in.bufStart || id >= in.bufStart+int64(len(in.rows)) {
		return false
	}
	in.rows[id-in.bufStart].state = st
	return true
}

// flushJobs inserts the buffered job rows. Rows, prerequisite pairs and
// targets are flushed independently (the schema has no foreign keys), so
// each fills its own multi-row statement.
func (in *inserter) flushJobs() error {
	if len(in.rows) == 0 {
		return nil
	}
	in.args = in.args[:0]
	for i, r := range in.rows {
		var est any
		if r.est > 0 {
			est = r.est
		}
		// int64s: database/sql converts other integers by reflection.
		in.args = append(in.args, in.bufStart+int64(i), int64(r.queue), int64(r.target), string(r.state), r.command, r.cwd, est, in.now)
	}
	var err error
	if len(in.rows) == bulkRows {
		_, err = in.s.stmts.insJobs.Exec(in.args...)
	} else {
		for i := 0; i < len(in.args) && err == nil; i += 8 {
			_, err = in.s.stmts.insJob.Exec(in.args[i : i+8]...)
		}
	}
	if err != nil {
		return fatalError{err}
	}
	in.bufStart += int64(len(in.rows))
	clear(in.rows)
	in.rows = in.rows[:0]
	return nil
}

// claim marks ready job id Executing in memory at once, so a duplicate
// heap entry of the same job cannot be picked again by the same request;
// claimRows writes the request's rows afterwards. It returns the job as it
// was.
func (s *Store) claim(id int64) (dag.Node, error) {
	j, _ := s.g.Node(id)
	if err := s.set(id, job.Executing); err != nil {
		return j, err
	}
	s.runStarted(id)
	return j, nil
}

// claimRows marks the claimed jobs ids Executing for placeholder ph from
// now on in one UPDATE, those ahead of its free slots prefetched (P), and
// returns what each job's assignment needs.
func (s *Store) claimRows(ph int64, now time.Time, ids []int64, ahead []bool) (map[int64]assignRow, error) {
	kind, list, n := claimNone, []byte{','}, 0
	for i, a := range ahead {
		if a {
			list = strconv.AppendInt(list, ids[i], 10)
			list = append(list, ',')
			n++
		}
	}
	switch {
	case n == len(ids):
		kind = claimAll
	case n > 0:
		kind = claimSome
	}
	stmt, err := s.stmts.dispatchN(context.Background(), s.w, len(ids), kind)
	if err != nil {
		return nil, fatalError{err}
	}
	args := make([]any, 0, 3+len(ids))
	args = append(args, ph, micros(now))
	if kind == claimSome {
		args = append(args, string(list))
	}
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := stmt.Query(args...)
	if err != nil {
		return nil, fatalError{err}
	}
	got := make(map[int64]assignRow, len(ids))
	for rows.Next() {
		var id int64
		var r assignRow
		if err := rows.Scan(&id, &r.attempt, &r.base, &r.command, &r.cwd, &r.submitted, &r.env, &r.shared); err != nil {
			rows.Close()
			return nil, fatalError{err}
		}
		got[id] = r
	}
	if err := closeRows(rows); err != nil {
		return nil, fatalError{err}
	}
	return got, nil
}

// usageArgs is e's usage as the statements store it: NULLs when not
// measured.
func usageArgs(e runs.End) (cpuUser, cpuSys, maxRSS any) {
	if !e.Usage.Measured() {
		return nil, nil, nil
	}
	return e.Usage.CPUUser, e.Usage.CPUSys, e.Usage.MaxRSS
}

// leaveExecuting writes what follows attempt e of executing job id (j as
// the graph has it), which ended as out: next, Done or Failed, or Queued
// again, returned unstarted or not (retry, not counted: killed over its
// memory, it runs again with more; runs.Uncounted: a full disk, the CLS).
func (s *Store) leaveExecuting(id int64, j dag.Node, next job.State, out runs.Outcome, retry bool, e runs.End) error {
	switch {
	case next == job.Queued && out == runs.Returned: // a retry's out is Failed
		return s.unclaim(id, e)
	case next == job.Queued:
		return s.requeue(id, e, retry || out == runs.Uncounted)
	}
	return s.finish(id, j, next, e)
}

// finish ends executing job id (j as the graph has it) Done or Failed
// after attempt e (a Done job's outputs are in the catalog already:
// jobDone).
func (s *Store) finish(id int64, j dag.Node, next job.State, e runs.End) error {
	var reason any
	if e.Reason != "" {
		reason = e.Reason
	}
	cpuUser, cpuSys, maxRSS := usageArgs(e)
	if _, err := s.stmts.finish.Exec(string(next), e.Exit, micros(e.Started), micros(e.Finished), reason, cpuUser, cpuSys, maxRSS, id); err != nil {
		return fatalError{err}
	}
	return s.set(id, next)
}

// set moves live job id to state to, an end state or Executing, in the
// graph (its row is the caller's to write) and applies what follows.
func (s *Store) set(id int64, to job.State) error {
	ch, err := s.g.Set(id, to)
	if err != nil {
		return err
	}
	return s.applyChanges(ch, id, nil)
}

// requeue puts executing job id back after attempt e, whose record goes
// to the history first. The attempt counts unless retry: killed over its
// memory, it runs again with more (packing.KilledForMemory), or stopped
// for a disk others filled or by the CLS (runs.Uncounted). Then, as unclaim's, its base
// moves past it (attempt_base + 1): a job on its last attempt still runs
// again, and one with attempts left keeps them all.
func (s *Store) requeue(id int64, e runs.End, retry bool) error {
	cpuUser, cpuSys, maxRSS := usageArgs(e)
	if _, err := s.stmts.history.Exec(id, e.Attempt, e.Placeholder, micros(e.Started), micros(e.Finished), e.Exit, e.Reason,
		cpuUser, cpuSys, maxRSS); err != nil {
		return fatalError{err}
	}
	if err := s.learnFloor(id, e.Floor); err != nil {
		return err
	}
	if retry {
		return s.backToQueue(id, s.stmts.unclaim)
	}
	return s.backToQueue(id, s.stmts.requeue)
}

// learnFloor raises job id's estimate to floor, what an attempt stopped
// at its placeholder's walltime ran (runs.Run.WalltimeFloor), unless it
// is as high: placeholders with less time left then pass it by.
func (s *Store) learnFloor(id int64, floor float32) error {
	if j, ok := s.g.Node(id); !ok || floor <= j.Est {
		return nil
	}
	if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("RaiseEst"), float64(floor), id); err != nil {
		return fatalError{err}
	}
	return s.g.SetEst(id, floor)
}

// unclaim puts back executing job id that its placeholder returned
// unstarted (or could not start for inputs gone, staged again): the
// attempt does not count, and is kept apart from the history as one that
// never ran (mqstat -j lists both). Its number stays taken rather than
// given to the next attempt: a late message naming it must not match
// another run of the job.
func (s *Store) unclaim(id int64, e runs.End) error {
	reason := ReasonHandedBack
	if e.Reason != protocol.ReasonReturned {
		reason = "not run: " + e.Reason
	}
	if _, err := s.stmts.insUnstarted.Exec(id, e.Attempt, e.Placeholder, micros(e.Finished), reason); err != nil {
		return fatalError{err}
	}
	return s.backToQueue(id, s.stmts.unclaim)
}

// ReasonHandedBack is the history's reason for an attempt its
// placeholder handed back before starting it (mqstat -j).
const ReasonHandedBack = "handed back unstarted"

// backToQueue lets the graph re-derive job id's pending state (Waiting if
// a prerequisite was rerun meanwhile) and writes it with stmt.
func (s *Store) backToQueue(id int64, stmt *sql.Stmt) error {
	ch, err := s.g.Requeue(id)
	if err != nil {
		return err
	}
	st := job.Queued
	if j, ok := s.g.Node(id); ok {
		st = j.State
	}
	if _, err := stmt.Exec(string(st), id); err != nil {
		return fatalError{err}
	}
	return s.applyChanges(ch, id, nil)
}

// hold keeps Waiting or Queued job id from running: Held. A ready heap's
// entry of it goes stale (dispatch skips a job that is not Queued); its
// dependents keep waiting, its target being incomplete.
func (s *Store) hold(id int64) error { return s.follow(s.g.Hold(id)) }

// release returns held job id to the state its prerequisites give it; a
// Queued one enters its ready heap again.
func (s *Store) release(id int64) error { return s.follow(s.g.Release(id)) }

// follow applies the graph's changes ch, rows included, unless err.
func (s *Store) follow(ch []dag.Change, err error) error {
	if err != nil {
		return err
	}
	return s.applyChanges(ch, -1, nil)
}

// deleteJob ends live job id Deleted for reason; unstarted says its
// attempt was prefetched and never started.
func (s *Store) deleteJob(id int64, reason string, unstarted bool) error {
	if _, err := s.stmts.del.Exec(micros(s.now()), reason, unstarted, id); err != nil {
		return fatalError{err}
	}
	return s.set(id, job.Deleted)
}

// rerun brings ended job id back into the graph as n (it was in state
// was) with a fresh attempt budget; the attempt it replaces goes to the
// history first, and its files are loaded again before it can be ready.
// A command other than "" replaces the job's (mending it in place: same
// id, target and dependents); the old one stays with the attempt it ran.
func (s *Store) rerun(id int64, n dag.Node, was job.State, command string) error {
	if _, err := s.stmts.keepAttempt.Exec(id); err != nil {
		return fatalError{err}
	}
	if command != "" {
		if _, err := s.stmts.keepCommand.Exec(id); err != nil {
			return fatalError{err}
		}
		if _, err := s.stmts.setCommand.Exec(command, id); err != nil {
			return fatalError{err}
		}
	}
	if err := s.prio.Revive(context.Background(), s.w, id); err != nil {
		return fatalError{err}
	}
	ch, err := s.g.Revive(id, n, was)
	if err != nil {
		return err
	}
	j, _ := s.g.Node(id)
	if _, err := s.stmts.rerun.Exec(string(j.State), id, micros(s.now())); err != nil {
		return fatalError{err}
	}
	if err := s.loadFiles(context.Background(), id); err != nil {
		return fatalError{err}
	}
	if err := s.pack.LoadJob(context.Background(), s.w, id, packJobs{s}); err != nil { // its stored request
		return fatalError{err}
	}
	return s.applyChanges(ch, id, nil)
}

// failUnstageable ends Failed those of jobs ids still Queued: an input
// they waited for could not be staged (reason says which and why). They
// never ran: no exit, start or usage.
func (s *Store) failUnstageable(ids []int64, reason string) error {
	for _, id := range ids {
		j, ok := s.g.Node(id)
		if !ok || j.State != job.Queued {
			continue
		}
		if err := s.begin(); err != nil {
			return err
		}
		if _, err := s.stmts.finish.Exec(string(job.Failed), nil, nil, micros(s.now()), reason, nil, nil, nil, id); err != nil {
			return fatalError{err}
		}
		s.log.Warn("job failed: an input could not be staged", "job", id, "reason", reason)
		if err := s.set(id, job.Failed); err != nil {
			return err
		}
	}
	return nil
}

// applyChanges makes storage, counters, ready heaps and waiters follow the
// graph's changes, then the progress watches. The row of self (the job the caller writes itself) is
// not updated here, nor are rows still buffered in in (patched there).
func (s *Store) applyChanges(ch []dag.Change, self int64, in *inserter) error {
	for _, c := range ch {
		s.recount(c)
		if c.ID != self && !in.patch(c.ID, c.To) {
			if _, err := s.stmts.setState.Exec(string(c.To), s.data.Stored(c.To, s.now()), c.ID); err != nil {
				return fatalError{err}
			}
		}
		if c.To == job.Queued {
			if s.plans.Active() {
				s.plans.Ready(c.ID, c.From, s.now())
			}
			// A job that became ready while a submission inserts (in)
			// waits for the submission's settle to enter a cp queue's
			// heap, ranked once with the chains it adds.
			if q := s.queueIDs[c.Queue]; q != nil && !(in != nil && q.needsBLevels() && s.bl.Defer(c.ID)) {
				q.ready.Push(s.readyEntry(q, c.ID, c.Est, c.Target))
				if in == nil && q.ready.Len() > 2*s.countsFor(q.id)[job.Queued]+policy.StaleSlack {
					q.ready.Compact((&asking{s: s}).Current) // entries left by holds and releases
				}
				if q.isDC() {
					s.data.BecameReady(c.ID, c.From, s.now())
				}
			}
		}
		if c.To.Terminal() || c.To == job.Blocked {
			s.ended = append(s.ended, c.ID)
		}
		if c.To.Terminal() {
			s.prio.Forget(c.ID)
			s.bundles.Drop(c.ID)
			s.cat.JobEnded(c.ID)
			s.data.Ended(c.ID)
			s.plans.Ended(c.ID) // its row stays for mqstat -j
			s.pack.Forget(c.ID)
		}
	}
	if len(s.watches) > 0 {
		s.watches.Changes(ch)
	}
	return nil
}

// recount moves job c.ID from state c.From (0: a new job) to c.To in the
// counts by queue and by array.
func (s *Store) recount(c dag.Change) {
	cnt := s.countsFor(c.Queue)
	if c.From != 0 {
		cnt[c.From]--
	}
	cnt[c.To]++
	s.arrays.Count(c.ID, c.From, c.To)
	s.states.Move(c.ID, c.Target, c.Queue, c.From, c.To)
}

// countsFor is queue q's jobs by state, which recount moves.
func (s *Store) countsFor(q int32) *[128]int {
	c := s.counts[q]
	if c == nil {
		c = new([128]int)
		s.counts[q] = c
	}
	return c
}

// readyEntry is how a queue's heap sees a job that became ready. An SJF
// queue orders a job that declared no estimate by its target's learned
// runtime (dc.State.Learned); a cp queue ranks it by its b-level
// (blevel.Levels.Rank).
func (s *Store) readyEntry(q *queue, id int64, est float32, t dag.TargetID) policy.Ready {
	if est == 0 && q.learnsEstimates() {
		est = s.data.Learned(s.g.Name(t), est)
	}
	r := policy.Ready{ID: id, Est: est, Priority: s.prio.Of(id)}
	if s.bl.On() && q.needsBLevels() {
		r.Prio = s.bl.Rank(s.g, s.data.Expect(), t, id, est)
	}
	return r
}

// reconcile makes stored pending states agree with the graph (they should
// already), writing any it fixes, and returns queued with the jobs that
// became Queued added, still in id order.
func (s *Store) reconcile(ctx context.Context, queued []int64) ([]int64, error) {
	ch := s.g.Reconcile()
	if len(ch) == 0 {
		return queued, nil
	}
	s.log.Warn("stored job states disagreed with prerequisites; fixing", "jobs", len(ch))
	if err := s.begin(); err != nil {
		return nil, err
	}
	for _, c := range ch {
		s.recount(c)
		if _, err := s.stmts.setState.Exec(string(c.To), s.data.Stored(c.To, s.now()), c.ID); err != nil {
			return nil, err
		}
		if c.To == job.Queued {
			queued = append(queued, c.ID)
		}
	}
	slices.Sort(queued)
	if _, err := s.w.ExecContext(ctx, connSQL.Get("Commit")); err != nil {
		return nil, err
	}
	s.inTx = false
	return queued, nil
}
