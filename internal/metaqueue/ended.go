package metaqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/internal/metaqueue/ledger"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The end of an attempt, in one place: a placeholder's report (Report),
// a lease lapsed (leases.go) or a placeholder gone (PlaceholderGone)
// ends an attempt through attemptEnded, which calls copies, the ledger,
// packing and arrays once each, in order, and then writes the job's next
// state (lifecycle.go).

// Report records finished job attempts without asking for work.
func (s *Store) Report(ctx context.Context, placeholder int64, reports []protocol.Report) error {
	return s.do(ctx, func() error { return s.report(placeholder, reports) })
}

func (s *Store) report(ph int64, reports []protocol.Report) error {
	for _, r := range reports {
		ru := s.runOf(r.ID, r.Attempt, ph)
		if ru == nil {
			// Late, duplicate, or not this placeholder's: changes nothing,
			// but a killed copy's CPU figures are kept.
			if err := s.lateReport(ph, r); err != nil {
				return err
			}
			continue
		}
		j, ok := s.g.Node(r.ID)
		if !ok || j.State != job.Executing {
			continue
		}
		if r.OutputLost != "" && r.Reason != protocol.ReasonReturned {
			if err := s.saveOutputLost(r.ID, r.Attempt, r.OutputLost); err != nil {
				return err
			}
		}
		if len(r.Streamed) > 0 && r.Reason != protocol.ReasonReturned {
			if err := s.saveStreamed(ph, r); err != nil {
				return err
			}
		}
		if protocol.CheckUsage(r.Usage) != nil {
			r.Usage = protocol.Usage{} // the server checks; a figure no process has is not kept
		}
		out := outcomeOf(r)
		if out == failed && len(r.Missing) > 0 {
			// Inputs deleted or damaged at the placeholder's place behind
			// the CLS's back: staged again, the job waits for them.
			stale, err := s.dropStale(r.ID, ph, r.Missing)
			if err != nil {
				return err
			}
			if stale {
				out = returned
			}
		}
		if err := s.attemptEnded(r.ID, j, ru, out, r); err != nil {
			return err
		}
	}
	return nil
}

// outcome classifies how an attempt ended.
type outcome int

const (
	succeeded   outcome = iota
	failed              // non-zero exit or could not start: the job's fault
	overCeiling         // killed for running past its queue's ceiling: the job's fault
	lost                // lease expired: the placeholder vanished, not the job's fault
	returned            // handed back unstarted by a placeholder that fetched it ahead
)

func outcomeOf(r protocol.Report) outcome {
	switch {
	case r.Reason == protocol.ReasonCeiling:
		return overCeiling
	case r.Reason == protocol.ReasonInterrupted:
		return lost
	case r.Reason == protocol.ReasonReturned:
		return returned
	case r.Exit == 0 && r.Reason == "":
		return succeeded
	}
	return failed
}

// nextState is the one place that decides what follows an attempt: Done,
// Failed, or Queued again (requeue) while attempts remain.
func nextState(q *queue, used int, out outcome) job.State {
	switch out {
	case succeeded:
		return job.Done
	case returned:
		return job.Queued
	case lost:
		if used < q.MaxAttempts {
			return job.Queued
		}
	case failed:
		if q.RetryFailed && used < q.MaxAttempts {
			return job.Queued
		}
	}
	return job.Failed
}

// attemptEnded is the end of attempt ru of job id (j as the graph has
// it), which ended as out (r says how), in one place: each module that
// keeps something of the attempt is called once, in this order, with the
// facts the ones before it returned, and the job's next state is then
// written (lifecycle.go), whose graph changes reach dc, plans, bundles
// and progress (applyChanges).
func (s *Store) attemptEnded(id int64, j dag.Node, ru *run, out outcome, r protocol.Report) error {
	// copies: the first attempt to succeed wins (unless another's agent
	// claimed first) and the others are killed; one that ends while
	// another runs on ends alone.
	moves, err := s.copiesEvent(id, ru, copies.Change{Event: copies.Ended, Succeeded: out == succeeded, Returned: out == returned, Report: r})
	if err != nil || !moves {
		return err
	}
	if err := s.begin(); err != nil {
		return err
	}
	q := s.queueIDs[j.Queue]
	e := s.endOf(q, ru, out, r)
	// ledger: charged for what it ran, its reservation released.
	if err := ledgerErr(s.ledger.Ended(context.Background(), s.w, ledgerCore{s}, ledger.End{
		Ref: protocol.JobRef{ID: id, Attempt: ru.attempt}, Queue: q.account(), Placeholder: ru.placeholder,
		Started: e.started, Finished: e.finished, OK: out == succeeded, Returned: out == returned})); err != nil {
		return err
	}
	// packing: its grant given back (or to its bundle's heir), its usage
	// learned; retry says a memory kill runs once more with more.
	retry, err := s.pack.Ended(context.Background(), s.w, s.packEnd(id, j, q, ru, out, e))
	if err != nil {
		return fatalError{err}
	}
	if retry {
		s.log.Info("job killed over its memory runs again with more", "job", id, "attempt", ru.attempt, "reason", e.reason)
	}
	// copies' index and arrays: it no longer runs.
	s.runGone(id)
	next := nextState(q, ru.used, out)
	if retry {
		next = job.Queued
	}
	if o := s.opt.Observer; o != nil {
		o.Ended(next)
	}
	switch {
	case retry:
		return s.retryForMemory(id, e)
	case next == job.Queued && out == returned:
		return s.unclaim(id)
	case next == job.Queued:
		return s.requeue(id, e)
	case next == job.Failed && e.reason == "":
		e.reason = fmt.Sprintf("exit status %d", r.Exit)
		if ru.used > 1 {
			e.reason += fmt.Sprintf(" (after %d attempts)", ru.used)
		}
	}
	return s.finish(id, j, next, e)
}

// endOf is how attempt ru of q, which ended as out, is recorded: r's
// exit, times, reason, outputs and usage, with what the core knows in
// place of what the report lacks.
func (s *Store) endOf(q *queue, ru *run, out outcome, r protocol.Report) attemptEnd {
	e := attemptEnd{attempt: ru.attempt, placeholder: ru.placeholder, started: r.Started, finished: r.Finished,
		exit: r.Exit, reason: r.Reason, usage: r.Usage, outputs: r.Outputs}
	if e.started.IsZero() {
		e.started = ru.started
	}
	if e.finished.IsZero() {
		e.finished = s.now()
	}
	switch out {
	case overCeiling:
		e.reason = fmt.Sprintf("killed after running past the queue's ceiling of %gs", q.Ceiling)
	case lost:
		if e.reason == protocol.ReasonInterrupted {
			e.reason = "interrupted: its placeholder was stopped"
		}
		e.exit = nil
	}
	return e
}

// packEnd is how attempt ru of job id (j, of q) ended, as packing needs it.
func (s *Store) packEnd(id int64, j dag.Node, q *queue, ru *run, out outcome, e attemptEnd) packing.End {
	var elapsed time.Duration // 0: the attempt did not run
	if !e.started.IsZero() {
		elapsed = e.finished.Sub(e.started)
	}
	return packing.End{Run: packing.Run{Job: id, Attempt: ru.attempt}, Category: resource.Category{Queue: q.Name, Target: s.g.Name(j.Target)},
		Succeeded: out == succeeded, Failed: out == failed, Reason: e.reason, Usage: e.usage, Elapsed: elapsed, Heir: s.bundleHeir(id, ru)}
}

// bundleHeir is the attempt that takes the grant of job id's attempt ru
// when it holds its bundle's: a member of the bundle still running on the
// same placeholder (a bundle runs its jobs in turn in its first job's
// grant, which goes back to the pool only with the last of them); nil
// when none.
func (s *Store) bundleHeir(id int64, ru *run) *packing.Run {
	bid, ok := s.bundles.Of(id)
	if !ok {
		return nil
	}
	for _, m := range s.bundles.Members(bid) {
		if o := s.running[m]; m != id && o != nil && o.placeholder == ru.placeholder {
			return &packing.Run{Job: m, Attempt: o.attempt}
		}
	}
	return nil
}

// runGone forgets job id's attempt, which no longer executes: the copy
// candidates are told, and the members its array held back go to their
// queues. An attempt not running (gone already) changes nothing.
func (s *Store) runGone(id int64) {
	if _, ok := s.running[id]; !ok {
		return
	}
	delete(s.running, id)
	s.syncCopy(id)
	s.repl.Changed()
	for _, h := range s.arrays.Leave(id, (*arrayJobs)(s)) {
		j, _ := s.g.Node(h)
		q := s.queueIDs[j.Queue]
		q.ready.Push(s.readyEntry(q, h, j.Est, j.Target))
	}
}

// lateReport keeps the CPU figures of a killed copy's report, which came
// after another attempt won, charges it up to when it stopped and
// releases its reservation.
func (s *Store) lateReport(ph int64, r protocol.Report) error {
	ref := protocol.JobRef{ID: r.ID, Attempt: r.Attempt}
	if !s.repl.Awaits(ref, ph) {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	if err := s.repl.Late(context.Background(), s.w, ph, r); err != nil {
		return fatalError{err}
	}
	err := s.extendCharge(r.ID, r.Attempt, r.Finished)
	s.econDied(ref)
	return err
}
