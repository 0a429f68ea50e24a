package metaqueue

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/internal/metaqueue/dc"
	"github.com/mq-hpc/mq/internal/metaqueue/extents"
	"github.com/mq-hpc/mq/internal/metaqueue/ledger"
	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The end of an attempt, in one place: attemptEnded calls each module
// that keeps something of it once, in the order docs/design/core.md
// gives, and the adapters it uses are beside it in this file.

// Report records finished job attempts without asking for work.
func (s *Store) Report(ctx context.Context, placeholder int64, reports []protocol.Report) error {
	return s.ReportBatch(ctx, protocol.ReportBatch{Placeholder: placeholder, Reports: reports})
}

// ReportBatch records the attempts b says started, then those that
// ended, in one commit.
func (s *Store) ReportBatch(ctx context.Context, b protocol.ReportBatch) error {
	if err := protocol.CheckStarted(b.Started); err != nil {
		return protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	return s.doNeedingRoom(ctx, call{}, func() error {
		if err := s.markStarted(b.Placeholder, b.Started); err != nil {
			return err
		}
		return s.report(b.Placeholder, b.Reports)
	})
}

// ReportSpooled records the reports placeholder ph's agent spooled when
// it lost its CLS (package spool) as its ReportBatch would, durably (the
// spool file goes once it returns): a forbidden error unless site says
// ph is of the sites that spool serves. site runs on the core: it must
// not wait for anything that may wait for the store.
func (s *Store) ReportSpooled(ctx context.Context, ph int64, reports []protocol.Report, site func(string) bool) error {
	return s.doNeedingRoom(ctx, call{durable: true}, func() error {
		if name, err := s.siteName(ph); err != nil || !site(name) {
			return cmp.Or[error](err, protocol.Errorf(protocol.CodeForbidden, "placeholder %d is of site %q, not one this spool serves", ph, name))
		}
		return s.report(ph, reports)
	})
}

func (s *Store) report(ph int64, reports []protocol.Report) error {
	for _, r := range reports {
		r = r.Kept() // the server checks; a figure no process has is not kept
		ru, out := runs.Find(s.running[r.ID], s.copyRuns[r.ID], r.Attempt, ph), runs.OutcomeOf(r)
		if ru == nil {
			// Late, duplicate, or not this placeholder's: changes nothing,
			// but a killed copy's CPU figures are kept, and a deleted job's output.
			if err := s.lateReport(ph, r); err != nil {
				return err
			}
			continue
		}
		j, ok := s.g.Node(r.ID)
		if !ok || j.State != job.Executing {
			continue
		}
		if err := s.saveOutputs(ph, r, extents.Save); err != nil {
			return err
		}
		if out == runs.Failed && len(r.Missing) > 0 {
			// Inputs deleted or damaged at the placeholder's place behind
			// the CLS's back: staged again, the job waits for them.
			stale, err := s.dropStale(r.ID, ph, r.Missing)
			if err != nil {
				return err
			}
			if stale {
				out = runs.Returned
			}
		}
		if err := s.attemptEnded(r.ID, j, ru, out, r); err != nil {
			return err
		}
	}
	return nil
}

// attemptEnded is the end of attempt ru of job id (j as the graph has
// it), which ended as out (r says how), as a pipeline: the decision from
// the facts alone (runs), then each module that keeps something of the
// attempt, once, in the order above, with the facts the ones before it
// returned, and then the job's next state is written.
func (s *Store) attemptEnded(id int64, j dag.Node, ru *run, out runs.Outcome, r protocol.Report) error {
	out = ru.Bounded(out) // a job handed back for ever does not grow its history for ever
	q := s.queueIDs[j.Queue]
	e, next := ru.Ending(out, r, s.now(), j.Est, runs.Limits{MaxAttempts: q.MaxAttempts, RetryFailed: q.RetryFailed, Ceiling: q.Ceiling}, s.pack.Outgrown)
	// copies: the first attempt to succeed wins (unless another's agent
	// claimed first) and the others are killed; one that ends while
	// another runs on ends alone (it begins the batch's transaction).
	moves, err := s.copiesEvent(id, j, true, ru, copies.Change{Event: copies.Ended, Succeeded: out == runs.Succeeded, Returned: out == runs.Returned, Report: r})
	if err != nil || !moves {
		return err
	}
	// ledger: charged for what it ran, its reservation released.
	if err := storeErr(s.ledger.Ended(context.Background(), s.w, ledgerCore{s}, ledger.End{
		Ref: protocol.JobRef{ID: id, Attempt: ru.Attempt}, Queue: q.account(), Placeholder: ru.Placeholder,
		Started: e.Started, Finished: e.Finished, OK: out == runs.Succeeded, Returned: out == runs.Returned})); err != nil {
		return err
	}
	// packing: its grant given back (or to its bundle's heir), its usage
	// learned; retry says a memory kill runs once more with more.
	retry, err := s.pack.Ended(context.Background(), s.w, s.packEnd(id, j, q, ru, out, e))
	if err != nil {
		return fatalError{err}
	}
	if retry {
		s.log.Info("job killed over its memory runs again with more", "job", id, "attempt", ru.Attempt, "reason", e.Reason)
		next = job.Queued
	}
	if o := s.opt.Observer; o != nil {
		o.Ended(next)
	}
	// copies' index and arrays: it no longer runs.
	s.runGone(id)
	if next == job.Done {
		// Its outputs enter the catalog before its dependents are released.
		if err := s.jobDone(id, j.Queue, s.g.Name(j.Target), e); err != nil {
			return err
		}
	}
	return s.leaveExecuting(id, j, next, out, retry, e)
}

// packEnd is how attempt ru of job id (j, of q) ended, as packing needs it.
func (s *Store) packEnd(id int64, j dag.Node, q *queue, ru *run, out runs.Outcome, e runs.End) packing.End {
	var elapsed time.Duration // 0: the attempt did not run
	if !e.Started.IsZero() {
		elapsed = e.Finished.Sub(e.Started)
	}
	return packing.End{Run: packing.Run{Job: id, Attempt: ru.Attempt}, Category: resource.Category{Queue: q.Name, Target: s.g.Name(j.Target)},
		Succeeded: out == runs.Succeeded, Failed: out == runs.Failed, Reason: e.Reason, Usage: e.Usage, Elapsed: elapsed, Heir: s.bundleHeir(id, ru)}
}

// bundleHeir is the attempt that takes the grant of job id's attempt ru
// when it holds its bundle's (bundles.Heir); nil when none.
func (s *Store) bundleHeir(id int64, ru *run) *packing.Run {
	if m, o := s.bundles.Heir(id, ru.Placeholder, s.running); o != nil {
		return &packing.Run{Job: m, Attempt: o.Attempt}
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
	s.repl.Sync(copies.Job{ID: id, Runs: 1 + len(s.copyRuns[id])})
	s.repl.Changed()
	for _, h := range s.arrays.Leave(id, (*arrayJobs)(s)) {
		j, _ := s.g.Node(h)
		q := s.queueIDs[j.Queue]
		q.ready.Push(s.readyEntry(q, h, j.Est, j.Target))
	}
}

// lateReport keeps the CPU figures of a killed copy's report, which came
// after another attempt won, charges it up to when it stopped and
// releases its reservation; of a job deleted while executing, its output.
func (s *Store) lateReport(ph int64, r protocol.Report) error {
	ref := protocol.JobRef{ID: r.ID, Attempt: r.Attempt}
	if s.repl.Awaits(ref, ph) {
		if err := s.begin(); err != nil {
			return err
		}
		if err := s.repl.Late(context.Background(), s.w, ph, r); err != nil {
			return fatalError{err}
		}
		if err := s.ledger.LateEnd(context.Background(), s.w, ref, r.Finished, s.now(), s.opt.Lease); err != nil {
			return fatalError{err}
		}
		return nil
	}
	return s.saveOutputs(ph, r, extents.SaveDeleted)
}

// copiesEvent applies ch, an event of attempt ru of job id (nil for
// copies.Stopped), n as the graph has it (known: it has it): one call into the module (copies.Event) says whether
// the job moves on with ru, which attempt its row describes and which
// copies run on now, and what ended; the core writes the row, charges
// what ended through the ledger and releases or holds reservations and
// grants.
func (s *Store) copiesEvent(id int64, n dag.Node, known bool, ru *run, ch copies.Change) (bool, error) {
	if err := s.begin(); err != nil {
		return false, err
	}
	if ru != nil {
		ch.Attempt = ru.Attempt
	}
	r, err := s.repl.Event(context.Background(), s.w, id, n.Queue, s.running[id], s.copyRuns[id], ch, s.now)
	if err != nil {
		return false, fatalError{err}
	}
	if r.Alone {
		return r.Won, nil // it ran alone: nothing else changed
	}
	if r.RowMoved {
		s.running[id] = r.Row
		if _, err := s.w.ExecContext(context.Background(), jobsSQL.Get("SetRowAttempt"),
			r.Row.Attempt, r.Row.Placeholder, micros(r.Row.Started), id); err != nil {
			return false, fatalError{err}
		}
	}
	delete(s.copyRuns, id)
	if len(r.Copies) > 0 {
		s.copyRuns[id] = r.Copies
	}
	var q *queue
	if known {
		q = s.queueIDs[n.Queue]
	}
	for i, e := range r.Spent {
		if err := s.copySpent(id, q, r.SpentRuns[i], e); err != nil {
			return false, err
		}
	}
	if r.Won && len(r.Spent) > 0 {
		s.log.Info("an attempt finished first; the other attempts are killed", "job", id, "attempt", ch.Attempt, "killed", len(r.Spent))
	}
	return r.Won, nil
}

// copySpent is the end of attempt ru of job id (queue q, nil if unknown)
// beside others, for the ledger and packing: charged for what it ran,
// its reservation held until its late report (Kept) or a lease from now,
// or released, its grant given back.
func (s *Store) copySpent(id int64, q *queue, ru *run, e copies.Spent) error {
	if e.Charge && q != nil {
		if err := s.charge(id, q, ru, e.Started, e.Finished, false); err != nil {
			return err
		}
	}
	s.packStop(id, ru)
	s.ledger.Spent(protocol.JobRef{ID: id, Attempt: ru.Attempt}, ru.Placeholder, ru.Started, s.now(), s.opt.Lease, e.Kept)
	return nil
}

// charge is the ledger's part of attempt ru's end (ledger.ChargeEnd):
// what it cost from started to finished, in the batch's transaction.
func (s *Store) charge(id int64, q *queue, ru *run, started, finished time.Time, ok bool) error {
	e := ledger.End{Ref: protocol.JobRef{ID: id, Attempt: ru.Attempt}, Queue: q.account(), Placeholder: ru.Placeholder,
		Started: started, Finished: finished, OK: ok}
	return storeErr(s.ledger.ChargeEnd(context.Background(), s.w, ledgerCore{s}, e))
}

// storeErr marks err, a failure to write, a storage failure (once; nil
// stays nil): the batch is rolled back.
func storeErr(err error) error {
	var f fatalError
	if err == nil || errors.As(err, &f) {
		return err
	}
	return fatalError{err}
}

// packStop gives back what attempt ru of job id holds.
func (s *Store) packStop(id int64, ru *run) {
	if h := s.bundleHeir(id, ru); h != nil {
		s.pack.Pass(packing.Run{Job: id, Attempt: ru.Attempt}, *h)
	}
	s.pack.Stop(packing.Run{Job: id, Attempt: ru.Attempt})
}

// stopRun forgets job id's attempt, which stopped without ending
// (attemptEnded): what it holds in the ledger and packing is released.
func (s *Store) stopRun(id int64) {
	ru, ok := s.running[id]
	if !ok {
		return
	}
	s.ledger.Stop(protocol.JobRef{ID: id, Attempt: ru.Attempt})
	s.packStop(id, ru)
	s.runGone(id)
}

// jobDone applies the outputs of job id's Done attempt e, in the batch's
// transaction: DC hears the job ended Done (dc.State.Done), the catalog
// records them, a plan keeps those with a checksum at its site, the
// ledger counts the bytes written and the copy index hears they moved.
func (s *Store) jobDone(id int64, q int32, target string, e runs.End) error {
	made, err := s.data.Done(context.Background(), s.w, dc.Ended{ID: id, Target: target, Placeholder: e.Placeholder,
		Started: e.Started, Finished: e.Finished, Outputs: e.Outputs, Reported: s.opt.Stager != nil || len(e.Outputs) > 0}, dcCatalog{s})
	if err != nil {
		return fatalError{err}
	}
	p := catalog.Place(made.Place)
	for _, o := range made.Outputs {
		// A plan keeps the file at its site (AEH-ETAA): catalog.Made.
		u, err := s.cat.Made(o.Path, p, o.CatalogSize(), o.SHA, id, e.Finished, s.plans.FileSite)
		if err != nil {
			return fatalError{err}
		}
		if u != nil {
			if err := s.failUnstageable(u.Jobs, u.Reason); err != nil {
				return err
			}
		}
	}
	if made.Known {
		s.ledger.Wrote(q, made.Wrote)
	}
	if made.Moved != nil {
		s.dataMoved(made.Moved)
	}
	return nil
}
