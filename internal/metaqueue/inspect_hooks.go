package metaqueue

import (
	"context"
	"database/sql"

	"github.com/mq-hpc/mq/internal/metaqueue/arrays"
	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/metaqueue/copies"
	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/protocol"
)

// The read side (mqstat, mqstat -j, the dashboard) is package inspect: it
// reads through the read pool and asks the core, through inspectSources,
// for what the other features keep.

// ReadDB is the read-only pool on the WAL snapshot that the read side
// uses: the modules' listings (arrays.List but its counts, catalog.Files,
// catalog.Holding, copies.Waste, plans.Show, plans.Problem,
// plans.RuntimeSamples) read through it and never wait for the core.
func (s *Store) ReadDB() *sql.DB { return s.rdb }

// Inspect is the read side of the store (package inspect: mqstat's
// listings and pages, mqstat -j's detail): it reads a consistent snapshot
// through the read pool and never waits for the writer.
func (s *Store) Inspect() *inspect.Reader { return s.read }

// RunningByPlaceholder counts executing jobs per placeholder, and lists
// them in id order, from memory (its cost is that of the jobs executing now).
func (s *Store) RunningByPlaceholder(ctx context.Context) (per map[int64]int, jobs []int64, err error) {
	err = s.do(ctx, func() error { per, jobs = runs.Running(s.running, s.copyRuns); return nil })
	return per, jobs, err
}

// inspectSources answers a job's detail from the core and its modules.
type inspectSources struct{ s *Store }

var _ inspect.Sources = inspectSources{}

func (a inspectSources) Array(ctx context.Context, id int64) (*protocol.ArrayInfo, error) {
	as, err := arrays.List(ctx, a.s.rdb, a.s, protocol.ArrayQuery{Job: id})
	if err != nil || len(as) != 1 {
		return nil, err
	}
	return &as[0], nil
}

func (a inspectSources) RunningCopies(ctx context.Context, id int64) ([]protocol.AttemptInfo, error) {
	return copies.Attempted(ctx, a.s.rdb, id, inspect.TimeFormat)
}

func (a inspectSources) Plan(ctx context.Context, id int64) (*protocol.JobPlan, error) {
	return plans.JobPlan(ctx, a.s.rdb, id)
}

func (a inspectSources) Replicas(ctx context.Context, path string) ([]protocol.Replica, error) {
	return catalog.Replicas(ctx, a.s.rdb, path)
}

func (a inspectSources) CostMarks(ctx context.Context, id int64) (infeasible, overBudget string, err error) {
	err = a.s.do(ctx, func() error {
		infeasible = a.s.ledger.Infeasible(id)
		if j, ok := a.s.g.Node(id); ok {
			overBudget = a.s.ledger.OverBudget(j.Queue)
		}
		return nil
	})
	return infeasible, overBudget, err
}

func (a inspectSources) Fit(ctx context.Context, id int64) (why string, grant *protocol.Capacity, err error) {
	err = a.s.do(ctx, func() error { why, grant = a.s.pack.Fit(id, a.s.running.Attempt(id), packJobs{a.s}); return nil })
	return why, grant, err
}

func (a inspectSources) States(ctx context.Context, fn func(inspect.StateSets) error) error {
	if a.s.committedSummary.Load() != nil {
		return inspect.ErrBusy // a slow batch: seconds
	}
	return a.s.do(ctx, func() error { return fn(&a.s.states) })
}

func (a inspectSources) Graph(ctx context.Context, fn func(inspect.Graph) error) error {
	return a.s.do(ctx, func() error { return fn(a.s.g) })
}
