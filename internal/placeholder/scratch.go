package placeholder

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mq-hpc/mq/internal/placeholder/scratch"
	"github.com/mq-hpc/mq/internal/stage"
	"github.com/mq-hpc/mq/protocol"
)

// A job that may run as several attempts at once (Assignment.Scratch: job
// replication) runs each in a scratch directory of its own (package
// scratch); after exit 0 the agent claims the win, and only a winner
// moves what it made into place (Agent.keepWithin).

// scratchPath is the attempt's scratch directory under work.
func scratchPath(work string, asg protocol.Assignment) string {
	return scratch.Path(work, asg.ID, asg.Attempt)
}

// newScratch makes the attempt's scratch directory under work.
func (a *Agent) newScratch(work string, asg protocol.Assignment) (*scratch.Dir, error) {
	// The outputs, relative to the working directory.
	var outs []string
	for _, f := range asg.Outputs {
		p := f.Path
		if a.cfg.DataRoot != "" {
			if r, err := stage.Rooted(a.cfg.DataRoot, f.Path); err == nil {
				p = r
			}
		}
		rel, err := filepath.Rel(work, p)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("output %s is outside the working directory: it cannot be kept apart from other attempts", f.Path)
		}
		outs = append(outs, rel)
	}
	return scratch.Make(work, scratchPath(work, asg), outs)
}

// claim asks the CLS whether this attempt won the race with the job's
// other attempts: only a winner keeps its outputs and reports Done.
func (a *Agent) claim(ctx context.Context, asg protocol.Assignment) (bool, error) {
	ref := protocol.JobRef{ID: asg.ID, Attempt: asg.Attempt}
	var reply protocol.HeartbeatReply
	err := call(ctx, a, protocol.OpHeartbeat, func(id int64) protocol.Heartbeat {
		return protocol.Heartbeat{Placeholder: id, Running: []protocol.JobRef{ref}, Claim: []protocol.JobRef{ref}}
	}, &reply)
	if err != nil {
		return false, err
	}
	return slices.Contains(reply.Won, ref), nil
}
