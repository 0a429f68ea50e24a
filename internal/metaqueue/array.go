package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/job"
)

// Job arrays are a module (internal/metaqueue/arrays): it counts the
// executing members of arrays with a limit and holds members back at the
// cap. The core tells it where attempts start and stop, asks it at
// dispatch (feasibility.go) and puts back on their heaps the members it
// gives back.

// runStarted counts job id as executing in its array.
func (s *Store) runStarted(id int64) {
	s.repl.Changed()
	s.arrays.Enter(id)
}

// ArrayCounts counts the members of the arrays beginning at firsts by
// state (arrays.Counter), from the counts the core keeps as states change:
// a listing costs the arrays and the attempts running, not the members.
func (s *Store) ArrayCounts(ctx context.Context, firsts []int64) ([]map[string]int, error) {
	var out []map[string]int
	err := s.do(ctx, func() error {
		out = s.arrays.Counts(firsts, s.running.Unstarted(s.executingIn))
		return nil
	})
	return out, err
}

// arrayJobs answers the arrays module's questions about jobs.
type arrayJobs Store

// Queued says whether job id is Queued in a known queue.
func (a *arrayJobs) Queued(id int64) bool {
	j, ok := a.g.Node(id)
	return ok && j.State == job.Queued && a.queueIDs[j.Queue] != nil
}

// saveArray records the array of a bulk commit's ids first..last.
func (s *Store) saveArray(first, last int64, spec string, limit int) error {
	return storeErr(s.arrays.Save(context.Background(), s.w, first, last, spec, limit))
}
