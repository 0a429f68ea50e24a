package placeholder

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// Bundles: the CLS hands a bundle's jobs together, in order (same Bundle,
// consecutive in the assignment list). They share one slot and run one
// after another; each is reported as it ends, with its own exit status,
// output files and times. Jobs of a bundle waiting for their turn are held
// (heartbeats renew their leases; a deleted one is skipped).

// units splits assignments into what takes one slot each: a job, or all the
// jobs of one bundle.
func units(jobs []protocol.Assignment) [][]protocol.Assignment {
	var out [][]protocol.Assignment
	for i := 0; i < len(jobs); {
		j := i + 1
		if jobs[i].Bundle != 0 {
			for j < len(jobs) && jobs[j].Bundle == jobs[i].Bundle {
				j++
			}
		}
		out = append(out, jobs[i:j:j])
		i = j
	}
	return out
}

func isBundle(u []protocol.Assignment) bool { return u[0].Bundle != 0 }

// holdAll holds every job of a bundle until its turn.
func (a *Agent) holdAll(u []protocol.Assignment) {
	for _, asg := range u {
		a.hold(asg)
	}
}

// runBundle runs a bundle's jobs in order, sending each report to progress
// as the job ends. A job the CLS took back while it waited is skipped; once
// ctx ends, the jobs not started are handed back (requeued, attempt not
// counted), and so are they once the agent's walltime is over or its node
// broken (markBroken). stuck: a job's processes did not end after SIGKILL
// and still hold g (unkillable.go).
func (a *Agent) runBundle(ctx context.Context, u []protocol.Assignment, g resource.Grant, progress chan<- protocol.Report, quit <-chan struct{}) (stuck bool) {
	for _, asg := range u {
		if !a.unhold(asg.ID) {
			continue
		}
		var r protocol.Report
		if ctx.Err() != nil || a.pastWalltime() || a.broken.Load() != nil {
			now := time.Now()
			r = protocol.Report{ID: asg.ID, Attempt: asg.Attempt, Started: now, Finished: now, Reason: protocol.ReasonReturned}
		} else {
			var s bool
			r, s = a.runGranted(ctx, asg, &g)
			stuck = stuck || s
		}
		select {
		case progress <- r:
		case <-quit:
			return stuck
		}
	}
	return stuck
}
