package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"iter"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/progress"
	"github.com/mq-hpc/mq/job"
)

// Progress watches are package progress; the core feeds them the graph's
// changes (applyChanges) and recounts them after a reload.

// Progress is the progress streams (progress.Streams): the counts by
// state of the selected jobs until none is left to end.
func (s *Store) Progress() progress.Streams { return progress.NewStreams(progressCore{s}, s.rdb) }

// rewatch recounts every watch after the state was reloaded.
func (s *Store) rewatch() {
	for _, err := range s.watches.Recount(progressCore{s}) {
		s.log.Warn("progress watch dropped after a reload", "err", err)
	}
}

// progressCore is the core as the progress watches see it.
type progressCore struct{ s *Store }

var (
	_ progress.Core  = progressCore{}
	_ progress.State = progressCore{}
)

// Do runs fn on the core; a storage failure while counting fails the batch.
func (c progressCore) Do(ctx context.Context, fn func(progress.State, progress.Set) error) error {
	return c.s.do(ctx, func() error {
		err := fn(c, c.s.watches)
		if se, ok := errors.AsType[*progress.StorageError](err); ok {
			return fatalError{se.Err}
		}
		return err
	})
}

func (c progressCore) Node(id int64) (dag.Node, bool)           { return c.s.g.Node(id) }
func (c progressCore) Lookup(name string) (dag.TargetID, bool)  { return c.s.g.Lookup(name) }
func (c progressCore) TargetName(t dag.TargetID) string         { return c.s.g.Name(t) }
func (c progressCore) NextID() int64                            { return c.s.nextID }
func (c progressCore) EachSpent(f func(int32, string, float64)) { c.s.ledger.EachSpent(f) }
func (c progressCore) Queue(name string) (int32, bool)          { return c.s.queueID(name) }
func (c progressCore) Unstarted() iter.Seq[int64]               { return c.s.running.Unstarted(c.s.executingIn) }
func (c progressCore) ArrayCounts(a, b int64) ([128]int, bool)  { return c.s.arrays.Span(a, b) }
func (c progressCore) Targets() progress.Targets                { return &c.s.states }

func (c progressCore) EachCount(f func(int32, *[128]int)) {
	for q, n := range c.s.counts {
		f(q, n)
	}
}

func (c progressCore) EndState(id int64) (job.State, error) {
	end, err := c.s.jobEnd(id)
	if err != nil {
		return 0, err
	}
	return job.State(end.State[0]), nil
}

func (c progressCore) Query(query string, args ...any) (*sql.Rows, error) {
	return c.s.w.QueryContext(context.Background(), query, args...)
}
