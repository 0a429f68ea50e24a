// Package runs keeps the attempts of jobs running now, as the metaqueue's
// core holds them: for each executing job the attempt its row describes
// (Rows) and the copies running beside it (Copies), each with its
// placeholder and lease. It is a leaf below the core and the copies
// module, so an attempt is one value wherever either looks it up, and the
// lookups by job, attempt and placeholder are written once.
package runs

import (
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Run is one attempt of a job running at a placeholder.
type Run struct {
	Attempt     int
	Used        int // attempts since the last rerun, this one included
	Placeholder int64
	Lease       time.Time
	Started     time.Time
	// Unstarted: handed out, and its placeholder has not said it started
	// it (shown P; the row's prefetched mark). Never set on a copy.
	Unstarted bool
}

// Rows are the attempts executing jobs' rows describe, by job.
type Rows map[int64]*Run

// Copies are the attempts running beside a job's row attempt, by job,
// oldest first.
type Copies map[int64][]*Run

// Find is the attempt numbered attempt that placeholder ph runs of a job
// whose row attempt is row (nil: none) and whose copies are cs; nil if
// none (a late or duplicate report, or another placeholder's).
func Find(row *Run, cs []*Run, attempt int, ph int64) *Run {
	if row != nil && row.Attempt == attempt && row.Placeholder == ph {
		return row
	}
	for _, c := range cs {
		if c.Attempt == attempt && c.Placeholder == ph {
			return c
		}
	}
	return nil
}

// On says whether placeholder ph runs one of a job's attempts, row (nil:
// none) or one of cs.
func On(row *Run, cs []*Run, ph int64) bool {
	if row != nil && row.Placeholder == ph {
		return true
	}
	for _, c := range cs {
		if c.Placeholder == ph {
			return true
		}
	}
	return false
}

// Attempt is the number of job id's row attempt, running (0: none).
func (rs Rows) Attempt(id int64) int {
	if ru := rs[id]; ru != nil {
		return ru.Attempt
	}
	return 0
}

// MarkStarted notes that placeholder ph started the attempts refs lists
// and returns the jobs whose row attempt thereby left P (the rows to
// mark). An attempt not (or no longer) ph's, a copy, or one known started
// already changes nothing.
func (rs Rows) MarkStarted(ph int64, refs []protocol.JobRef) []int64 {
	var ids []int64
	for _, r := range refs {
		if ru := rs.unstarted(ph, r); ru != nil {
			ru.Unstarted = false
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// Startable is the refs of refs MarkStarted would mark now: row attempts
// of placeholder ph not started yet. A heartbeat's starts kept while a
// write would fail are these, so no placeholder fills the bound on kept
// starts with jobs it does not hold.
func (rs Rows) Startable(ph int64, refs []protocol.JobRef) []protocol.JobRef {
	var out []protocol.JobRef
	for _, r := range refs {
		if rs.unstarted(ph, r) != nil {
			out = append(out, r)
		}
	}
	return out
}

func (rs Rows) unstarted(ph int64, r protocol.JobRef) *Run {
	ru := rs[r.ID]
	if ru == nil || !ru.Unstarted || ru.Attempt != r.Attempt || ru.Placeholder != ph {
		return nil
	}
	return ru
}

// Prefetched counts the row attempts not started yet (shown P), by queue:
// queueOf says a job's queue and whether it still executes. It costs what
// the placeholders hold, not the metaqueue's size.
func (rs Rows) Prefetched(queueOf func(id int64) (q int32, executing bool)) map[int32]int {
	var n map[int32]int
	for id, ru := range rs {
		if !ru.Unstarted {
			continue
		}
		if q, ok := queueOf(id); ok {
			if n == nil {
				n = map[int32]int{}
			}
			n[q]++
		}
	}
	return n
}

// Unstarted yields the jobs whose row attempt has not started yet (shown
// P) and that, queueOf says, still execute.
func (rs Rows) Unstarted(queueOf func(id int64) (q int32, executing bool)) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		for id, ru := range rs {
			if !ru.Unstarted {
				continue
			}
			if _, ok := queueOf(id); ok && !yield(id) {
				return
			}
		}
	}
}

// Outcome classifies how an attempt ended.
type Outcome int

const (
	Succeeded   Outcome = iota
	Failed              // non-zero exit or could not start: the job's fault
	OverCeiling         // killed for running past its queue's ceiling: the job's fault
	Lost                // lease expired: the placeholder vanished, not the job's fault
	Returned            // handed back unstarted by a placeholder that fetched it ahead
	// Uncounted: stopped for what is neither the job's doing nor a loss
	// (protocol.Uncounted): others filled its placeholder's output disk,
	// or the CLS stopped its local placeholder. Not one to spend its
	// attempts on: requeued, the attempt recorded but not counted.
	Uncounted
)

// OutcomeOf is how the attempt r reports ended.
func OutcomeOf(r protocol.Report) Outcome {
	switch {
	case r.Reason == protocol.ReasonCeiling:
		return OverCeiling
	case protocol.Uncounted(r.Reason):
		return Uncounted
	case protocol.IsInterrupted(r.Reason):
		return Lost
	case r.Reason == protocol.ReasonReturned:
		return Returned
	case r.Exit == 0 && r.Reason == "":
		return Succeeded
	}
	return Failed
}

// MaxUncounted is how many attempts a job may have before a return or an
// uncounted stop counts against its attempts like a lost one.
// Neither counts otherwise, yet each adds a row to the job's history: a
// placeholder (a site's key is as trusted as its least trusted host)
// that takes the same jobs and hands them back for ever grew the
// database by a megabyte a second, without end.
const MaxUncounted = 100

// Bounded is out, an end of attempt ru, except that a return or an
// uncounted stop counts as lost once the job has had MaxUncounted
// attempts.
func (ru *Run) Bounded(out Outcome) Outcome {
	if (out == Returned || out == Uncounted) && ru.Attempt >= MaxUncounted {
		return Lost
	}
	return out
}

// Next is the one place that decides what follows an attempt that ended
// as out, the used-th of at most maxAttempts: Done, Failed, or Queued
// again while attempts remain (a failure only when retryFailed).
func Next(out Outcome, used, maxAttempts int, retryFailed bool) job.State {
	switch out {
	case Succeeded:
		return job.Done
	case Returned, Uncounted:
		return job.Queued
	case Lost:
		if used < maxAttempts {
			return job.Queued
		}
	case Failed:
		if retryFailed && used < maxAttempts {
			return job.Queued
		}
	}
	return job.Failed
}

// Said is what is kept of how an attempt that ended as o says it did: its
// reason, in words where o has its own (past a ceiling of ceiling
// seconds, interrupted), and whether its exit status is kept (not for a
// lost attempt).
func (o Outcome) Said(reason string, ceiling float64) (string, bool) {
	switch o {
	case OverCeiling:
		return fmt.Sprintf("killed after running past the queue's ceiling of %gs", ceiling), true
	case Lost:
		switch reason {
		case protocol.ReasonInterrupted:
			reason = "interrupted: its placeholder was stopped"
		case protocol.ReasonReturned: // Bounded
			reason = fmt.Sprintf("handed back unstarted after %d attempts: counted as lost", MaxUncounted)
		}
		return reason, false
	case Uncounted:
		return reason, false // killed for the disk or the CLS: its status says nothing of the job
	}
	return reason, true
}

// Span is when attempt ru ran as report r says, with its start and now
// in place of what r lacks.
func (ru *Run) Span(r protocol.Report, now time.Time) (started, finished time.Time) {
	started, finished = r.Started, r.Finished
	if started.IsZero() {
		started = ru.Started
	}
	if finished.IsZero() {
		finished = now
	}
	return started, finished
}

// WalltimeFloor is what attempt ru, reported as r, teaches its job's
// estimate when its placeholder's walltime stopped it
// (protocol.WalltimeStopped): the job needs more than it ran. That is the
// report's span (the placeholder's clock), but no more than the CLS saw
// pass since the attempt began (a report cannot claim more), nor than
// nine tenths of that placeholder's walltime, so a fresh placeholder of
// its site still takes the job once. A job whose estimate est was that
// already, and that ran that long again, needs more than a whole
// placeholder of that walltime: its floor is then a second more, so only
// a placeholder or site with a longer one takes it (none known: it fails
// at once, packing.Packing.Outgrown, rather than spend its attempts).
// 0 when r says no such stop.
func (ru *Run) WalltimeFloor(r protocol.Report, now time.Time, est float32) float32 {
	walltime, ok := protocol.WalltimeStopped(r.Reason)
	if !ok || r.Started.IsZero() || r.Finished.IsZero() {
		return 0
	}
	ran, most := r.Finished.Sub(r.Started), walltime*9/10
	if !ru.Started.IsZero() {
		ran = min(ran, now.Sub(ru.Started))
	}
	// Whole seconds, as mqstat -j shows them.
	if most = time.Duration(math.Ceil(most.Seconds())) * time.Second; ran >= most && est >= float32(most.Seconds()) {
		return float32(math.Ceil(walltime.Seconds())) + 1
	}
	return float32(math.Ceil(max(min(ran, most), 0).Seconds()))
}

// ExitReason is why an attempt that exited with status exit, the used-th
// since the last rerun, failed when it gave no reason: its job, or only
// itself when the job is retried (its queue's --retry-failed), which
// mqstat -j then says of the attempt.
func ExitReason(exit, used int, retried bool) string {
	switch {
	case retried:
		return fmt.Sprintf("exit status %d; retried", exit)
	case used > 1:
		return fmt.Sprintf("exit status %d (after %d attempts)", exit, used)
	}
	return fmt.Sprintf("exit status %d", exit)
}
