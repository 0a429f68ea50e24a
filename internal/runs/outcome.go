package runs

import (
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Outcome classifies how an attempt ended.
type Outcome int

const (
	Succeeded   Outcome = iota
	Failed              // non-zero exit or could not start: the job's fault
	OverCeiling         // killed for running past its queue's ceiling: the job's fault
	Lost                // lease expired: the placeholder vanished, not the job's fault
	Returned            // handed back unstarted by a placeholder that fetched it ahead
)

// OutcomeOf is how the attempt r reports ended.
func OutcomeOf(r protocol.Report) Outcome {
	switch {
	case r.Reason == protocol.ReasonCeiling:
		return OverCeiling
	case r.Reason == protocol.ReasonInterrupted:
		return Lost
	case r.Reason == protocol.ReasonReturned:
		return Returned
	case r.Exit == 0 && r.Reason == "":
		return Succeeded
	}
	return Failed
}

// Next is the one place that decides what follows an attempt that ended
// as out, the used-th of at most maxAttempts: Done, Failed, or Queued
// again while attempts remain (a failure only when retryFailed).
func Next(out Outcome, used, maxAttempts int, retryFailed bool) job.State {
	switch out {
	case Succeeded:
		return job.Done
	case Returned:
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
