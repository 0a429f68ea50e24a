package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/loadscan"
	"github.com/mq-hpc/mq/internal/metaqueue/alter"
	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/metaqueue/selector"
	"github.com/mq-hpc/mq/internal/metaqueue/waits"
	"github.com/mq-hpc/mq/internal/sqlscan"
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
	if err := waits.Check(req); err != nil {
		return reply, err
	}
	c := &call{ctx: ctx, done: make(chan struct{}), leaves: true}
	c.fn = func() (err error) {
		wr := waits.Request{IDs: ids, Any: req.Any}
		if timeout > 0 {
			wr.Deadline = s.now().Add(timeout)
		}
		c.parked, err = s.waits.Start(ctx, c, wr, &reply, s.waiting, s.jobEnd)
		return err
	}
	err := s.doCall(ctx, c)
	if err != nil && err == ctx.Err() {
		// The core drops the waiter on its next tick. Until then it may
		// still write to reply: do not read it.
		return protocol.WaitReply{}, err
	}
	return reply, err
}

// jobEnd is how job id ended, as committed (inspect.JobEnd).
func (s *Store) jobEnd(id int64) (protocol.JobEnd, error) {
	end, err := inspect.JobEnd(s.stmts.jobEnd.QueryRow(id), id)
	if errors.Is(err, sql.ErrNoRows) {
		return end, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
	}
	return end, storeErr(err)
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

// selectIDs resolves a selection for action a to job ids (module
// selector), reading them on the writer (query) when it names no ids.
func (s *Store) selectIDs(sel protocol.Select, a selector.Action) (ids []int64, query bool, err error) {
	q, err := selector.Build(sel, a.States(), selectNames{s})
	if err != nil || q.SQL == "" {
		return q.IDs, false, err
	}
	ids, err = sqlscan.Int64s(s.w.QueryContext(context.Background(), q.SQL, q.Args...))
	if err != nil {
		return nil, true, fatalError{err}
	}
	return ids, true, nil
}

// selectNames answers selector.Names: targets from the graph, queues
// by name.
type selectNames struct{ s *Store }

func (n selectNames) Lookup(name string) (dag.TargetID, bool) { return n.s.g.Lookup(name) }

func (n selectNames) Queue(name string) (int64, bool) {
	id, ok := n.s.queueID(name)
	return int64(id), ok
}

// selectFacts is what the selector's checks know of job id: its node
// when live, else its row.
func (s *Store) selectFacts(id int64) (selector.Job, error) {
	if j, live := s.g.Node(id); live {
		ru := s.running[id]
		return selector.Job{ID: id, Found: true, Live: true, State: j.State, Prefetched: ru != nil && ru.Unstarted,
			Queue: s.queueIDs[j.Queue].Name}, nil
	}
	sj, err := s.storedJob(id)
	if protocol.IsCode(err, protocol.CodeNotFound) {
		return selector.Job{ID: id}, nil
	}
	if err != nil {
		return selector.Job{}, err
	}
	return selector.Job{ID: id, Found: true, State: sj.State, Queue: s.queueIDs[sj.Queue].Name}, nil
}

// storedJob is job id's row (loadscan.JobRow), live or ended.
func (s *Store) storedJob(id int64) (loadscan.Job, error) {
	sj, err := loadscan.JobRow(s.stmts.jobRow.QueryRow(id), id)
	if errors.Is(err, sql.ErrNoRows) {
		return sj, protocol.Errorf(protocol.CodeNotFound, "job %d does not exist", id)
	}
	if err != nil {
		return sj, fatalError{err}
	}
	return sj, nil
}

// Delete removes jobs from the metaqueue. An executing job is killed by its
// placeholder at its next heartbeat. Jobs that wait on a deleted job's
// target become Blocked.
func (s *Store) Delete(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.actRun(ctx, sel, selector.Delete, func(id int64) error {
		j, _ := s.g.Node(id)
		reason := "deleted by user"
		unstarted := false
		if j.State == job.Executing {
			reason = "deleted by user while executing"
			if err := s.stopCopies(id, reason); err != nil {
				return err
			}
			ru := s.running[id]
			if unstarted = ru != nil && ru.Unstarted; unstarted {
				// Prefetched (P): its placeholder held it for a slot
				// and never ran it, so nothing was spent.
				reason = "deleted by user before it started (prefetched)"
			} else if ru != nil {
				// Its attempt ran until now: that is spent too.
				if err := s.charge(id, s.queueIDs[j.Queue], ru, ru.Started, s.now(), false); err != nil {
					return err
				}
			}
			s.stopRun(id)
		}
		return s.deleteJob(id, reason, unstarted)
	}).Act()
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
	command, err := req.NewCommand()
	if err != nil {
		return protocol.ActionReply{}, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	return s.actRun(ctx, req.Select, selector.Rerun, func(id int64) error {
		sj, err := s.storedJob(id)
		if err != nil {
			return err
		}
		prereqs, afterAny, err := loadscan.JobPrereqs(s.stmts.jobPrereqs.Query(id))
		if err != nil {
			return fatalError{err}
		}
		return s.rerun(id, dag.Node{Target: dag.TargetID(sj.Target), Queue: sj.Queue, Est: float32(sj.Est), Prereqs: prereqs, AfterAny: afterAny}, sj.State, command)
	}).Act()
}

// Hold keeps jobs from running until Release: Waiting and Queued ones
// become Held. Their targets stay incomplete, so dependents wait.
func (s *Store) Hold(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.actRun(ctx, sel, selector.Hold, s.hold).Act()
}

// Release lets held jobs run: each becomes Queued, Waiting or Blocked as
// its prerequisites say.
func (s *Store) Release(ctx context.Context, sel protocol.Select) (protocol.ActionReply, error) {
	return s.actRun(ctx, sel, selector.Release, s.release).Act()
}

// Alter changes jobs not started (mqalter; module alter). Every error is
// fatal: its batch is rolled back, never kept with a job held for it.
func (s *Store) Alter(ctx context.Context, req protocol.Alter) (protocol.ActionReply, error) {
	if err := req.Check(); err != nil {
		return protocol.ActionReply{}, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	bg := context.Background() // the core's own writes: never a caller's
	refill := map[int32]bool{} // queues holding an entry at an estimate now unknown (0), which Current cannot tell
	k := alter.Core{X: s.w, Graph: s.g, Hold: s.hold, Release: s.release,
		SetEst: func(id int64, est float32) error {
			s.bl.Alter(s.g, s.data.Expect(), id, est)
			if j, _ := s.g.Node(id); est == 0 && j.Est != 0 {
				refill[j.Queue] = true
			}
			return s.g.SetEst(id, est)
		},
		Priority: func(id int64, p int) error { return s.prio.Set(bg, s.w, id, p) },
		Request: func(id int64, r protocol.Resources, d []string) error {
			return s.pack.Alter(bg, s.w, id, r, d, packJobs{s})
		}}
	run := s.actRun(ctx, req.Select, selector.Alter, func(id int64) error { return storeErr(k.Apply(id, req)) })
	run.Finish = func() error { s.reranked(refill); clear(refill); return nil }
	run.Facts = func(id int64) (j selector.Job, err error) {
		if j, err = s.selectFacts(id); err == nil && j.Live {
			j.Refused, err = packing.AlterRefusal(bg, s.w, id, req.Resources, req.Drop)
			if b, in := s.bundles.Of(id); in && j.Refused == "" && (req.Resources.Asks() || len(req.Drop) > 0) {
				j.Refused = fmt.Sprintf("job %d runs in bundle %d's one grant, which each of its jobs asks for: its request is not changed alone", id, b)
			}
		}
		return j, storeErr(err)
	}
	return run.Act()
}

// actRun is the walk mqdel, mqsub --rerun, mqhold, mqrls and mqalter
// share: the jobs sel names, each checked and, in the writer's
// transaction, acted on (apply), in batches of the core's as selector.Run
// gives them.
func (s *Store) actRun(ctx context.Context, sel protocol.Select, a selector.Action, apply func(id int64) error) selector.Run {
	return selector.Run{
		Action: a, Sel: sel, Size: s.actionBatch, Between: s.betweenBatches,
		Select: func() ([]int64, bool, error) { return s.selectIDs(sel, a) },
		Facts:  s.selectFacts,
		Apply: func(id int64) error {
			if err := s.begin(); err != nil {
				return err
			}
			return apply(id)
		},
		Do: func(batch func() error) error { return s.doSlowRetried(ctx, batch) },
	}
}

// doSlowRetried is doSlow tried once more if the disk was full and
// OnFull freed its reserve meanwhile: an action on jobs must go through
// on a full disk (a batch that failed was rolled back whole, so trying
// again does nothing twice).
func (s *Store) doSlowRetried(ctx context.Context, fn func() error) error {
	released := s.released.Load()
	err := s.doSlow(ctx, fn)
	if err != nil && s.released.Load() != released {
		err = s.doSlow(ctx, fn)
	}
	return err
}
