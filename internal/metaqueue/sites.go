package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The sites' specs are the placeholders module's (placeholders.AddSite,
// ...); the core runs each change in a durable batch and tells the other
// features what it means: the catalog and DC (node-local storage), the
// ledger (prices), packing (the placeholders' shape).

// siteChange runs change, the module's write, in a durable batch, and
// then apply.
func (s *Store) siteChange(ctx context.Context, change func() error, apply func()) error {
	return s.doDurable(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		if err := change(); err != nil {
			return placeholdersErr(err)
		}
		apply()
		return nil
	})
}

// AddSite stores a new site.
func (s *Store) AddSite(ctx context.Context, spec protocol.SiteSpec) error {
	return s.siteChange(ctx, func() error {
		return placeholders.AddSite(context.Background(), s.w, spec, s.now())
	}, func() {
		if s.cat.AddSite(spec.Name, spec) {
			s.data.SetNodeLocal(spec.Name, spec.NodeLocal, true)
			s.data.Bump()
		}
		s.ledger.SetPrice(spec.Name, spec.Price)
		s.pack.Site(spec)
	})
}

// UpdateSite stores a site's changed settings.
func (s *Store) UpdateSite(ctx context.Context, spec protocol.SiteSpec) error {
	return s.siteChange(ctx, func() error {
		return placeholders.UpdateSite(context.Background(), s.w, spec)
	}, func() {
		s.ledger.SetPrice(spec.Name, spec.Price)
		s.pack.Site(spec)
	})
}

// RemoveSite deletes a site.
func (s *Store) RemoveSite(ctx context.Context, name string) error {
	return s.siteChange(ctx, func() error {
		if err := placeholders.RemoveSite(context.Background(), s.w, name); err != nil {
			return err
		}
		return s.cat.RemoveSite(context.Background(), s.w, name)
	}, func() {
		s.reg.Retire(name)
		s.data.SetNodeLocal(name, false, false)
		s.ledger.RemoveSite(name)
		s.pack.SiteGone(name)
	})
}

// Sites lists the stored sites by name: a read, which needs no write
// lock (another process may hold it).
func (s *Store) Sites(ctx context.Context) ([]protocol.SiteSpec, error) {
	var out []protocol.SiteSpec
	err := s.do(ctx, func() error {
		var err error
		out, err = placeholders.Sites(context.Background(), s.w)
		return placeholdersErr(err)
	})
	return out, err
}

// SiteDemand says how much work a site's placeholders could do: ready jobs
// a placeholder with walltime seconds left could take (as dispatch would
// judge: estimate, else the queue's ceiling; walltime 0 takes anything),
// counted up to limit; and jobs the given placeholders are running. It
// reads memory only. It counts jobs, whatever they ask: SiteNeed measures
// them against the site's placeholder shape.
func (s *Store) SiteDemand(ctx context.Context, walltime float64, phs []int64, limit int) (ready, executing int, err error) {
	r, e, err := s.SiteNeed(ctx, resource.Capacity{}, walltime, phs, limit)
	return r.Jobs, e.Jobs, err
}

// SiteNeed is SiteDemand measured against shape, what each of the site's
// placeholders is asked to hold (wire.SiteCapacity): the ready jobs a
// placeholder of that shape could take, walltime and requests alike (one
// it could never hold is not counted), up to limit of them, with the
// placeholders' worth of cores, memory, GPUs and named amounts they need
// (packing.Need); and the same of the attempts the given placeholders
// run, by what each was granted. A shape of no cores counts jobs as
// slots, as SiteDemand does.
func (s *Store) SiteNeed(ctx context.Context, shape resource.Capacity, walltime float64, phs []int64, limit int) (ready, executing packing.Need, err error) {
	err = s.do(ctx, func() error {
		for id, ru := range placeholders.RunningOn(phs, s.running, s.copyRuns) {
			s.pack.AddRunning(&executing, shape, packing.Run{Job: id, Attempt: ru.Attempt})
		}
		d := packing.Demand{Shape: shape, Walltime: walltime, Limit: limit}
		for _, q := range s.qlist {
			if ready.Jobs >= limit {
				break
			}
			s.pack.CountReady(&ready, d, s.g, packing.ReadyQueue{Queued: s.countsFor(q.id)[job.Queued], Heap: q.ready, Ceiling: q.Ceiling})
		}
		return nil
	})
	return ready, executing, err
}
