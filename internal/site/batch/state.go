package batch

import "time"

// State is where a placeholder's batch job is in its batch system. It is
// not a metaqueue job state (job.State): batch.Queued is a batch job
// waiting for a node, job.Queued a job waiting for a placeholder.
type State int

const (
	Queued  State = iota + 1 // waiting in the batch queue (held ones too)
	Running                  // started (or exiting)
	Exited                   // ended, or being deleted
	Error                    // the batch system cannot run it (SGE's E state): cancel it
	// Suspended: started, then stopped by the batch system (an admin, a
	// load threshold, preemption by suspension). It holds its allocation
	// but takes no work until resumed.
	Suspended
)

func (s State) String() string {
	switch s {
	case Queued:
		return "queued"
	case Running:
		return "running"
	case Exited:
		return "exited"
	case Error:
		return "error"
	case Suspended:
		return "suspended"
	}
	return "unknown"
}

// Placeholder is one placeholder as its batch system lists it (for a
// local site, a process).
type Placeholder struct {
	ID    string // the batch job id ("4711", "4711.server"), or a pid for local
	State State
	// Submitted and Started are what the batch system says (zero when it
	// does not say); the Manager prefers its own clock for queue waits.
	Submitted time.Time
	Started   time.Time
	// Why is why a queued one waits, as the batch system says (Slurm's
	// reason, "held", PBS's comment); "" when it does not say.
	Why string
}
