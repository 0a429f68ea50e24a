package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/purge"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Purges are package purge; the core resolves names, runs each batch in
// one durable call and takes the jobs gone off its counts.

// Purge removes ended jobs older than req.EndedBefore, with every row the
// metaqueue keeps of them and their output files in the CLS's output
// area (purge.Run). A purged job still counts toward its target
// (targets.purged_done, purged_bad), and its id is never given again
// (meta next_job_id).
func (s *Store) Purge(ctx context.Context, req protocol.Purge) (protocol.PurgeReply, error) {
	return purge.Run(ctx, req, purgeCore{s}, s.rdb, s.opt.OutputDir)
}

// loadPurged adds what purges removed to the graph's counts and keeps ids
// past every id given, when loading.
func (s *Store) loadPurged(ctx context.Context) error {
	l, err := purge.Load(ctx, s.w)
	if err != nil {
		return err
	}
	for _, p := range l.Targets {
		if p.Done > 0 {
			s.g.LoadCounts(p.Target, job.Done, p.Done)
		}
		if p.Bad > 0 {
			s.g.LoadCounts(p.Target, job.Failed, p.Bad)
		}
	}
	s.nextID = max(s.nextID, l.NextID)
	return nil
}

// purgeCore is the core as a purge sees it.
type purgeCore struct{ s *Store }

var (
	_ purge.Core  = purgeCore{}
	_ purge.State = purgeCore{}
)

func (c purgeCore) Resolve(ctx context.Context, req protocol.Purge, sc *purge.Scope) error {
	s := c.s
	return s.do(ctx, func() error {
		sc.Cutoff = purge.Cutoff(s.now(), req.EndedBefore)
		sc.Named = map[dag.TargetID]bool{}
		s.g.Each(func(_ int64, j dag.Node) {
			if j.State == job.Held || j.State == job.Executing {
				for _, p := range j.Prereqs {
					sc.Named[p] = true
				}
			}
		})
		if req.Target != "" {
			t, ok := s.g.Lookup(req.Target)
			if !ok {
				return protocol.Errorf(protocol.CodeNotFound, "target %s does not exist", req.Target)
			}
			sc.Target = int64(t)
		}
		if req.Queue != "" {
			q := s.queues[req.Queue]
			if q == nil {
				return protocol.Errorf(protocol.CodeNotFound, "queue %s does not exist", req.Queue)
			}
			sc.Queue = int64(q.id)
		}
		return nil
	})
}

// Batch plans and deletes one batch in one durable call (dry: only plans).
func (c purgeCore) Batch(ctx context.Context, sc purge.Scope, rows []purge.Row, dry bool) (gone []purge.Row, kept int64, err error) {
	s := c.s
	fn := func() error {
		p, err := purge.PlanBatch(context.Background(), s.w, c, sc, rows)
		if err != nil {
			return fatalError{err}
		}
		gone, kept = p.Go, p.Kept // afresh if tried again
		if dry || len(p.Go) == 0 {
			return nil
		}
		if err := s.begin(); err != nil {
			return err
		}
		d, err := purge.Delete(context.Background(), s.w, p, sc, s.nextID)
		if err != nil {
			return fatalError{err}
		}
		for _, e := range d.Ended {
			s.countsFor(e.Queue)[e.State]--
		}
		gone = d.Gone
		return nil
	}
	if dry {
		err = s.do(ctx, fn)
	} else {
		err = s.doDurable(ctx, fn)
	}
	return gone, kept, err
}

func (c purgeCore) Live(id int64) bool            { _, ok := c.s.g.Node(id); return ok }
func (c purgeCore) Waited(t dag.TargetID) bool    { return c.s.g.Waited(t) }
func (c purgeCore) LiveIn(first, last int64) bool { return c.s.g.LiveIn(first, last) }
func (c purgeCore) BundleLive(bundle int64) bool  { return len(c.s.bundles.Members(bundle)) > 0 }
