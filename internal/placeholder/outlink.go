package placeholder

import (
	"context"

	"github.com/mq-hpc/mq/internal/placeholder/outlink"
	"github.com/mq-hpc/mq/protocol"
)

// resolveOutputLink replaces the output p, if it is a symbolic link below
// the data root, by a copy of its target (outlink.Resolve); it says why
// it cannot ("" when p is no link, or was replaced, or a.fsWait passed
// without one of its filesystem calls returning).
func (a *Agent) resolveOutputLink(ctx context.Context, asg protocol.Assignment, p string) string {
	if a.cfg.DataRoot == "" {
		return ""
	}
	job := func() (work, scratch string) {
		work, err := a.workDir(asg.Cwd)
		if err != nil {
			return "", ""
		}
		if asg.Scratch && work != "" {
			scratch = scratchPath(work, asg)
		}
		return work, scratch
	}
	return outlink.Resolve(ctx, a.cfg.DataRoot, p, job, a.fsWait, reasonOutput, a.where())
}
