package metaqueue

import (
	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/job"
)

// Bundles are a module (internal/metaqueue/bundles): the jobs of one submit
// dispatched together, in one slot. The core records a bundle at submit,
// tells the module when a job ends, and asks it at dispatch what goes
// with a job picked.

// bundleJobs answers the bundles module's questions about jobs.
type bundleJobs Store

// State is job id's state in the graph.
func (b *bundleJobs) State(id int64) (job.State, bool) {
	j, ok := b.g.Node(id)
	return j.State, ok
}

// Need is how long job id is expected to take (dispatch.Need).
func (b *bundleJobs) Need(id int64) float64 {
	j, ok := b.g.Node(id)
	if q := b.queueIDs[j.Queue]; ok && q != nil {
		return dispatch.Need(j.Est, q.Ceiling)
	}
	return max(float64(j.Est), 0)
}
