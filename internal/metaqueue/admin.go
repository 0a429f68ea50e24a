package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/metaqueue/waits"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Wait blocks until every job in ids has ended (Done, Failed, Deleted) or is
// Blocked, or until timeout (0 = no limit), and reports how each ended.
func (s *Store) Wait(ctx context.Context, ids []int64, timeout time.Duration) (protocol.WaitReply, error) {
	return s.WaitFor(ctx, protocol.Wait{IDs: ids, TimeoutMS: int(timeout / time.Millisecond)})
}

// WaitFor is Wait with the request's options: with Any it returns once at
// least one job has ended, listing the others as pending.
func (s *Store) WaitFor(ctx context.Context, req protocol.Wait) (protocol.WaitReply, error) {
	var reply protocol.WaitReply
	ids, timeout := req.IDs, time.Duration(req.TimeoutMS)*time.Millisecond
	if len(ids) == 0 {
		return reply, protocol.Errorf(protocol.CodeBadRequest, "no jobs to wait for")
	}
	if err := protocol.CheckMillis("timeout_ms", int64(req.TimeoutMS)); err != nil {
		return reply, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	c := &call{ctx: ctx, done: make(chan struct{})}
	c.fn = func() (err error) {
		wr := waits.Request{IDs: ids, Any: req.Any}
		if timeout > 0 {
			wr.Deadline = s.now().Add(timeout)
		}
		c.parked, err = s.waits.Start(ctx, c, wr, &reply, s.waiting, s.jobEnd)
		return err
	}
	select {
	case s.calls <- c:
	case <-s.stop:
		return reply, ErrClosed
	case <-ctx.Done():
		return reply, ctx.Err()
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		// The core drops the waiter on its next tick. Until then it may
		// still write to reply: do not read it.
		return protocol.WaitReply{}, ctx.Err()
	case <-s.stopped:
		select {
		case <-c.done:
		default:
			return reply, ErrClosed
		}
	}
	return reply, c.err
}

func (s *Store) jobEnd(id int64) (protocol.JobEnd, error) {
	end := protocol.JobEnd{ID: id}
	var st string
	var exit, started, finished sql.NullInt64
	var reason sql.NullString
	var u inspect.Usage
	err := s.stmts.jobEnd.QueryRow(id).Scan(&st, &exit, &reason, &end.Attempt, &end.Site, &end.Host, &started, &finished, &u.User, &u.Sys, &u.RSS)
	if errors.Is(err, sql.ErrNoRows) {
		return end, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
	}
	if err != nil {
		return end, fatalError{err}
	}
	end.State, end.Reason = st, reason.String
	end.Started, end.Finished = inspect.Micros(started), inspect.Micros(finished)
	if a := u.Accounting(started, finished); a.Measured() {
		end.Usage = &a.Usage
	}
	if exit.Valid {
		e := int(exit.Int64)
		end.Exit = &e
	}
	return end, nil
}

// waiting reports whether a wait on job id waits on: it is live and not
// Blocked.
func (s *Store) waiting(id int64) bool {
	j, ok := s.g.Node(id)
	return ok && j.State != job.Blocked
}

// notifyWaiters answers waits whose jobs ended in the batch just committed,
// and, on the core's tick, those whose callers left.
func (s *Store) notifyWaiters(ticked bool) {
	answerWaits(s.waits.Ended(s.ended, s.jobEnd))
	if ticked {
		answerWaits(s.waits.Sweep())
	}
}

// answerWaits answers the calls of the waits the module finished.
func answerWaits(done []*waits.Wait[*call]) {
	for _, w := range done {
		w.Call.err = w.Err()
		w.Call.finish()
	}
}

// selectIDs resolves a selection to job ids: the given ids, or the jobs
// selected by target, queue, id range and states among those in the
// states the action applies to.
func (s *Store) selectIDs(sel protocol.Select, states string) ([]int64, error) {
	bySelector := sel.Target != "" || sel.States != "" || sel.First != 0 || sel.All || (sel.Queue != "" && len(sel.IDs) == 0)
	if !bySelector {
		if len(sel.IDs) == 0 {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "no jobs named: give job ids or a target")
		}
		return sel.IDs, nil
	}
	if len(sel.IDs) > 0 {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "give job ids or a selection (target, states, range, all), not both")
	}
	if sel.States != "" {
		want, err := job.ParseStates(sel.States)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		var both []byte
		for _, st := range want {
			if strings.IndexByte(states, byte(st)) >= 0 {
				both = append(both, byte(st))
			}
		}
		if len(both) == 0 {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "no job in states %s can be acted on (only %s)", sel.States, states)
		}
		states = string(both)
	}
	q := jobsSQL.Base("SelectIDs")
	args := []any{states}
	if sel.Target != "" {
		t, ok := s.g.Lookup(sel.Target)
		if !ok {
			return nil, protocol.Errorf(protocol.CodeNotFound, "target %s does not exist", sel.Target)
		}
		q += " AND target_id = ?"
		args = append(args, int32(t))
	}
	if sel.Queue != "" {
		qu := s.queues[sel.Queue]
		if qu == nil {
			return nil, protocol.Errorf(protocol.CodeNotFound, "queue %s does not exist", sel.Queue)
		}
		q += " AND queue_id = ?"
		args = append(args, qu.id)
	}
	if sel.First != 0 || sel.Last != 0 {
		if sel.First <= 0 || sel.Last < sel.First {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "bad id range %d..%d", sel.First, sel.Last)
		}
		q += " AND id BETWEEN ? AND ?"
		args = append(args, sel.First, sel.Last)
	}
	rows, err := s.w.QueryContext(context.Background(), q+" ORDER BY id", args...)
	if err != nil {
		return nil, fatalError{err}
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fatalError{err}
		}
		ids = append(ids, id)
	}
	if err := closeRows(rows); err != nil {
		return nil, fatalError{err}
	}
	return ids, nil
}

type storedJob struct {
	state          job.State
	queue, target  int32
	est            float64
	attempts, base int
}

func (s *Store) storedJob(id int64) (storedJob, error) {
	var sj storedJob
	var st string
	var est sql.NullFloat64
	err := s.stmts.jobRow.QueryRow(id).Scan(&st, &sj.queue, &sj.target, &est, &sj.attempts, &sj.base)
	if errors.Is(err, sql.ErrNoRows) {
		return sj, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
	}
	if err != nil {
		return sj, fatalError{err}
	}
	sj.state, sj.est = job.State(st[0]), est.Float64
	return sj, nil
}

// Delete removes jobs from the metaqueue. An executing job is killed by its
// placeholder at its next heartbeat. Jobs that wait on a deleted job's
// target become Blocked.
func (s *Store) Delete(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	check := func(id int64) (string, error) {
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
		if sel.Queue != "" && s.queueIDs[j.Queue].Name != sel.Queue {
			return fmt.Sprintf("job %d is not in queue %s", id, sel.Queue), nil
		}
		return "", nil
	}
	apply := func(id int64) error {
		j, _ := s.g.Node(id)
		if err := s.begin(); err != nil {
			return err
		}
		reason := "deleted by user"
		if j.State == job.Executing {
			reason = "deleted by user while executing"
			if err := s.stopCopies(id, reason); err != nil {
				return err
			}
			// Its attempt ran until now: that is spent too.
			if ru := s.running[id]; ru != nil {
				if err := s.charge(id, s.queueIDs[j.Queue], ru, ru.started, s.now(), false); err != nil {
					return err
				}
			}
			s.stopRun(id)
		}
		return s.deleteJob(id, reason)
	}
	return s.actOnSelected(ctx, sel, "WQHEB", check, apply)
}

// Rerun brings ended jobs (Done, Failed, Deleted) back: they run again once
// their prerequisites allow, with a fresh attempt budget. Jobs Blocked by
// them follow by themselves.
func (s *Store) Rerun(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.RerunWith(ctx, protocol.Rerun{Select: sel})
}

// RerunWith is Rerun; a request with a new command gives it to the one
// job it names (mqsub --rerun ID --command CMD).
func (s *Store) RerunWith(ctx context.Context, req protocol.Rerun) (protocol.ActionReply, error) {
	sel := req.Select
	command, err := req.NewCommand()
	if err != nil {
		return protocol.ActionReply{}, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	check := func(id int64) (string, error) {
		if j, live := s.g.Node(id); live {
			if j.State == job.Blocked {
				return fmt.Sprintf("job %d is blocked by a failed or deleted prerequisite; rerun that job instead", id), nil
			}
			return fmt.Sprintf("job %d is %s; only ended jobs (done, failed, deleted) can be rerun", id, j.State.Name()), nil
		}
		sj, err := s.storedJob(id)
		if err != nil {
			if protocol.IsCode(err, protocol.CodeNotFound) {
				return err.Error(), nil
			}
			return "", err
		}
		if sel.Queue != "" && s.queueIDs[sj.queue].Name != sel.Queue {
			return fmt.Sprintf("job %d is not in queue %s", id, sel.Queue), nil
		}
		return "", nil
	}
	apply := func(id int64) error {
		sj, err := s.storedJob(id)
		if err != nil {
			return err
		}
		var prereqs, afterAny []dag.TargetID
		rows, err := s.stmts.jobPrereqs.Query(id)
		if err != nil {
			return fatalError{err}
		}
		for rows.Next() {
			var t, kind int32
			if err := rows.Scan(&t, &kind); err != nil {
				rows.Close()
				return fatalError{err}
			}
			if kind == prereqAfterAny {
				afterAny = append(afterAny, dag.TargetID(t))
			} else {
				prereqs = append(prereqs, dag.TargetID(t))
			}
		}
		if err := closeRows(rows); err != nil {
			return fatalError{err}
		}
		if err := s.begin(); err != nil {
			return err
		}
		return s.rerun(id, dag.Node{Target: dag.TargetID(sj.target), Queue: sj.queue, Est: float32(sj.est), Prereqs: prereqs, AfterAny: afterAny}, sj.state, command)
	}
	return s.actOnSelected(ctx, sel, "DFX", check, apply)
}

// actOnSelected is the walk mqdel and mqsub --rerun share: the jobs sel
// names (a selection takes only those in states), each checked (check
// says why the action cannot apply to a job, "" when it can) and acted on
// (apply). Atomic: every job is checked first, and any refusal refuses
// all, naming each culprit; otherwise each refused job is named and the
// others acted on.
func (s *Store) actOnSelected(ctx context.Context, sel protocol.Select, states string,
	check func(id int64) (string, error), apply func(id int64) error) (protocol.ActionReply, error) {
	var reply protocol.ActionReply
	released := s.released.Load()
	fn := func() error {
		reply = protocol.ActionReply{} // afresh if tried again
		ids, err := s.selectIDs(sel, states)
		if err != nil {
			return err
		}
		if sel.Atomic {
			for _, id := range ids {
				msg, err := check(id)
				if err != nil {
					return err
				}
				if msg != "" {
					reply.AddError(msg)
				}
			}
			if reply.Refused() > 0 {
				return nil
			}
		}
		for _, id := range ids {
			msg, err := check(id)
			if err != nil {
				return err
			}
			if msg != "" {
				reply.AddError(msg)
				continue
			}
			if err := apply(id); err != nil {
				return err
			}
			reply.AddID(id)
		}
		return nil
	}
	err := s.doDurable(ctx, fn)
	if err != nil && s.released.Load() != released {
		// The disk was full and the reserve is now free: a delete must
		// go through on a full disk (a batch failed so was rolled back
		// whole, so trying again does nothing twice).
		err = s.doDurable(ctx, fn)
	}
	return reply, err
}

// Queues lists queues and their properties.
func (s *Store) Queues(ctx context.Context) ([]protocol.QueueInfo, error) {
	var out []protocol.QueueInfo
	err := s.do(ctx, func() error {
		for _, q := range s.qlist {
			out = append(out, s.econInfo(q))
		}
		return nil
	})
	return out, err
}

// SetQueue creates a queue or changes its properties.
func (s *Store) SetQueue(ctx context.Context, qs protocol.QueueSet) (protocol.QueueInfo, error) {
	var info protocol.QueueInfo
	pol, err := checkQueueSet(qs)
	if err != nil {
		return info, err
	}
	err = s.doDurable(ctx, func() error {
		q, err := s.queueFor(qs.Name)
		if err != nil {
			return err
		}
		next := q.QueueInfo
		if qs.Ceiling != nil {
			next.Ceiling = *qs.Ceiling
		}
		if qs.MaxAttempts != nil {
			next.MaxAttempts = *qs.MaxAttempts
		}
		if qs.RetryFailed != nil {
			next.RetryFailed = *qs.RetryFailed
		}
		if pol != nil {
			next.Policy = pol.Name
		}
		if qs.Deadline != nil {
			next.Deadline = *qs.Deadline
		}
		if qs.Budget != nil {
			next.Budget = *qs.Budget
		}
		if qs.MaxCopies != nil {
			next.MaxCopies = *qs.MaxCopies
		}
		if qs.MaxOutput != nil {
			next.MaxOutput = *qs.MaxOutput
		}
		if qs.Output != nil {
			next.Output = *qs.Output
		}
		if err := s.begin(); err != nil {
			return err
		}
		if _, err := s.w.ExecContext(context.Background(), queuesSQL.Get("UpdateQueue"),
			next.Ceiling, next.MaxAttempts, next.RetryFailed, next.Policy, next.MaxCopies, next.MaxOutput, next.Output, q.id); err != nil {
			return fatalError{err}
		}
		if qs.Defaults != nil {
			next.Defaults = *qs.Defaults
			if err := s.saveQueueDefaults(q, next.Defaults); err != nil {
				return err
			}
		}
		if qs.Deadline != nil || qs.Budget != nil {
			if _, err := s.w.ExecContext(context.Background(), queuesSQL.Get("SetEconomics"),
				q.id, next.Deadline, next.Budget); err != nil {
				return fatalError{err}
			}
			s.repl.Changed() // copies refused for the budget or deadline may now fit
			s.ledger.Changed()
		}
		if pol != nil && pol.Name != q.pol.Name {
			s.switchPolicy(q, *pol)
		}
		q.QueueInfo = next
		s.countCopying()
		info = next
		return nil
	})
	return info, err
}

// checkQueueSet checks qs's values before anything is written, and
// resolves its policy (nil: unchanged).
func checkQueueSet(qs protocol.QueueSet) (*policy.Info, error) {
	if err := job.ValidName("queue", qs.Name); err != nil {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	var pol *policy.Info
	if qs.Policy != nil {
		p, err := policy.Lookup(*qs.Policy)
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
		if !p.ForQueues() {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "policy %s decides how many placeholders sites hold, not which job a queue runs", p.Name)
		}
		pol = &p
	}
	if qs.Ceiling != nil {
		if err := protocol.CheckSeconds("ceiling", *qs.Ceiling); err != nil {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "%v (0 = none)", err)
		}
	}
	if qs.Deadline != nil {
		if err := protocol.CheckDeadline(*qs.Deadline); err != nil {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	if qs.Budget != nil {
		if err := protocol.CheckBudget(*qs.Budget); err != nil {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	if qs.MaxCopies != nil && (*qs.MaxCopies < 0 || *qs.MaxCopies > 1000) {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "max copies must be 0..1000 (0: the policy's default, 1: never copy)")
	}
	if qs.MaxOutput != nil {
		if err := protocol.CheckQueueOutput(*qs.MaxOutput); err != nil {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	if qs.Output != nil && *qs.Output != "" && *qs.Output != protocol.OutputModeFiles {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "a queue's output must be files (or empty: as the placeholder does), not %q", protocol.ClipText(*qs.Output, 64))
	}
	if qs.MaxAttempts != nil && (*qs.MaxAttempts < 1 || *qs.MaxAttempts > 1000) {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "max attempts must be 1..1000")
	}
	if qs.Defaults != nil {
		if err := protocol.CheckResources(*qs.Defaults); err != nil {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "defaults: %v", err)
		}
	}
	return pol, nil
}

// switchPolicy moves queue q's ready jobs onto a heap ordered by pol.
func (s *Store) switchPolicy(q *queue, pol policy.Info) {
	old := q.ready
	q.pol, q.ready = pol, policy.NewHeap(pol.Order)
	s.countDC() // ranks every job if this is the first cp queue
	toDC := pol.Kind == policy.Choosing
	now := s.now()
	for {
		r, ok := old.Pop()
		if !ok {
			break
		}
		if q.needsBLevels() {
			if j, ok := s.g.Node(r.ID); ok && j.State == job.Queued {
				r = s.readyEntry(q, r.ID, j.Est, j.Target)
			}
		}
		q.ready.Push(r)
		if toDC {
			s.data.BecameReady(r.ID, now) // queue time counts from the switch
		}
	}
	s.data.Bump()
}

// Summary counts jobs per queue and state, from memory: it costs the same
// with a million jobs as with ten.
func (s *Store) Summary(ctx context.Context) ([]protocol.QueueCounts, error) {
	var out []protocol.QueueCounts
	err := s.do(ctx, func() error {
		pre := s.prefetched()
		for _, q := range s.qlist {
			qc := protocol.QueueCounts{Queue: q.Name, Policy: q.Policy, Counts: inspect.Counts(s.countsFor(q.id), pre[q.id])}
			if info := s.econInfo(q); info.Spent > 0 || q.costed() {
				qc.Spent, qc.SpentBySite, qc.Infeasible, qc.OverBudget = info.Spent, info.SpentBySite, info.Infeasible, info.OverBudget
				qc.Budget, qc.Deadline = q.Budget, q.Deadline
			}
			out = append(out, qc)
		}
		return nil
	})
	return out, err
}
