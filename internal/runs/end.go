package runs

import (
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// End is how an attempt ended: what its job's row, or its history,
// keeps of it.
type End struct {
	Attempt           int
	Placeholder       int64
	Started, Finished time.Time
	Exit              any // nil: none (the attempt was lost)
	Reason            string
	Usage             protocol.Usage     // not measured: stored as NULLs
	Outputs           []protocol.FileSum // a Done job's outputs
	Floor             float32            // the estimate it teaches (WalltimeFloor)
}

// Limits are what a job's queue sets of its attempts.
type Limits struct {
	MaxAttempts int
	RetryFailed bool
	Ceiling     float64 // seconds
}

// Ending is the decision at the end of attempt ru, from the facts alone:
// how it is recorded, having ended as out (r says how; now is the core's
// clock, est its job's estimate, lim its queue's), and the job's next
// state (Next). What r lacks is what the core knows (Span, Outcome.Said;
// a failed attempt's exit status as its reason, ExitReason). outgrown
// says why a job that needs floor seconds runs on no placeholder known
// ("" when one does): one its walltime stopped then fails rather than
// spend its attempts each stopped as this one was.
func (ru *Run) Ending(out Outcome, r protocol.Report, now time.Time, est float32, lim Limits, outgrown func(floor float64) string) (End, job.State) {
	next := Next(out, ru.Used, lim.MaxAttempts, lim.RetryFailed)
	e := End{Attempt: ru.Attempt, Placeholder: ru.Placeholder, Usage: r.Usage, Outputs: r.Outputs}
	e.Started, e.Finished = ru.Span(r, now)
	e.Floor = ru.WalltimeFloor(r, now, est)
	var kept bool
	if e.Reason, kept = out.Said(r.Reason, lim.Ceiling); kept {
		e.Exit = r.Exit
	}
	if why := outgrown(float64(e.Floor)); why != "" && next == job.Queued {
		next, e.Reason = job.Failed, why
	}
	if out == Failed && e.Reason == "" { // retried, too: its attempt says why
		e.Reason = ExitReason(r.Exit, ru.Used, next == job.Queued)
	}
	return e, next
}
