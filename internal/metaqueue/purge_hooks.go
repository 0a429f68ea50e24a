package metaqueue

import (
	"context"
	"errors"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/purge"
)

// Purges are package purge; the core resolves names, runs each batch in
// one durable call and takes the jobs gone off its counts.

// Purger removes ended jobs with every row the metaqueue keeps of them
// and their output files (purge.Run). A purged job still counts toward its
// target (targets.purged_done, purged_bad), and its id is never given
// again (meta next_job_id).
func (s *Store) Purger() purge.Purger { return purge.NewPurger(purgeCore{s}, s.rdb, s.opt.OutputDir) }

// loadPurged adds what purges removed to the graph's counts and keeps ids
// past every id given, when loading.
func (s *Store) loadPurged(ctx context.Context) error {
	l, err := purge.Load(ctx, s.w)
	if err != nil {
		return err
	}
	l.AddTo(s.g)
	s.nextID = max(s.nextID, l.NextID)
	return nil
}

// purgeCore is the core as a purge sees it.
type purgeCore struct{ s *Store }

var (
	_ purge.Core  = purgeCore{}
	_ purge.State = purgeCore{}
	_ purge.Names = purgeCore{}
	_ purge.Batch = purgeCore{}
)

// Do runs fn on the core.
func (c purgeCore) Do(ctx context.Context, fn func(purge.Names) error) error {
	return c.s.do(ctx, func() error { return fn(c) })
}

// Write runs fn on the core (durable: fsync'd as a user's change).
func (c purgeCore) Write(ctx context.Context, durable bool, fn func(purge.Batch) error) error {
	do := c.s.do
	if durable {
		do = c.s.doSlow // a batch of up to thousands of jobs
	}
	return do(ctx, func() error {
		err := fn(c)
		if se, ok := errors.AsType[*purge.StorageError](err); ok {
			return fatalError{se.Err}
		}
		return err
	})
}

func (c purgeCore) DB() purge.Execer { return c.s.w }
func (c purgeCore) Begin() error     { return c.s.begin() }
func (c purgeCore) NextID() int64    { return c.s.nextID }
func (c purgeCore) Forget(e purge.Ended) {
	c.s.countsFor(e.Queue)[e.State]--
	c.s.arrays.Count(e.ID, e.State, 0)
	c.s.states.Move(e.ID, dag.TargetID(e.Target), e.Queue, e.State, 0)
}

func (c purgeCore) Live(id int64) bool            { _, ok := c.s.g.Node(id); return ok }
func (c purgeCore) Waited(t dag.TargetID) bool    { return c.s.g.Waited(t) }
func (c purgeCore) LiveIn(first, last int64) bool { return c.s.g.LiveIn(first, last) }
func (c purgeCore) BundleLive(bundle int64) bool  { return len(c.s.bundles.Members(bundle)) > 0 }

func (c purgeCore) Now() time.Time                          { return c.s.now() }
func (c purgeCore) Each(fn func(int64, dag.Node))           { c.s.g.Each(fn) }
func (c purgeCore) Lookup(name string) (dag.TargetID, bool) { return c.s.g.Lookup(name) }
func (c purgeCore) Queue(name string) (int64, bool) {
	id, ok := c.s.queueID(name)
	return int64(id), ok
}
