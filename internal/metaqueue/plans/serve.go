package plans

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/policy"
)

// Core runs a change of the plans on the core's goroutine, which owns
// them.
type Core interface {
	// Write runs write in a batch with the transaction open, over the
	// live jobs' graph (read-only) at now; an error write returns is a
	// storage failure.
	Write(ctx context.Context, write func(ctx context.Context, db DB, g *dag.Graph, now time.Time) error) error
}

// Writer records and clears plans (cls plan make, cls plan clear), each
// change one batch on the core (Store.Plans).
type Writer struct {
	p    *Plans
	core Core
}

// NewWriter is p's changes, run on core.
func NewWriter(p *Plans, core Core) Writer { return Writer{p: p, core: core} }

// Set records a plan made by planner, without a timeline.
func (w Writer) Set(ctx context.Context, planner string, pl policy.Plan) (int, error) {
	return w.Record(ctx, Record{Planner: planner}, pl)
}

// Record records a plan: each job's planned site, place in the order and
// predicted slot, start and end, and the plan itself (Plans.Record). A
// plan that cannot be recorded changes nothing.
func (w Writer) Record(ctx context.Context, rec Record, pl policy.Plan) (n int, err error) {
	if err := Check(rec, pl); err != nil {
		return 0, err
	}
	return n, w.core.Write(ctx, func(ctx context.Context, db DB, g *dag.Graph, now time.Time) (err error) {
		n, err = w.p.Record(ctx, db, g, rec, pl, now)
		return err
	})
}

// Clear forgets every plan: jobs bind late again.
func (w Writer) Clear(ctx context.Context) (n int, err error) {
	return n, w.core.Write(ctx, func(ctx context.Context, db DB, _ *dag.Graph, _ time.Time) (err error) {
		n, err = w.p.Clear(ctx, db)
		return err
	})
}
