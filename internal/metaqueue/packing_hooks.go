package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of resources per job (internal/metaqueue/packing): the
// calls at its hooks (a job submitted or rerun, load, a placeholder
// registered, the fitsResources check, a claim, an attempt's end or stop)
// and what packing reads of the core's jobs (packJobs).

// Resources says that the store keeps and honours jobs' resource
// requests, and warns of jobs none can ever hold (packing.Keeper).
func (s *Store) Resources() packing.Keeper { return packing.NewKeeper(s.pack, packJobs{s}) }

// keepRequest stores the request of new job id (spec js of queue q), its
// queue's defaults applied, when it asks for anything.
func (s *Store) keepRequest(id int64, q *queue, js *protocol.JobSpec) error {
	c := resource.Category{Queue: q.Name, Target: js.Target}
	return storeErr(s.pack.Keep(context.Background(), s.stmts.insResources, id, js.Resources.WithDefaults(q.Defaults), c))
}

// loadRequests loads packing's state (packing.Load) with each stored
// site's capacity.
func (s *Store) loadRequests(ctx context.Context) error {
	var sites []protocol.SiteSpec
	err := placeholders.EachSite(ctx, s.w, func(_ string, spec protocol.SiteSpec) { sites = append(sites, spec) })
	if err != nil {
		return err
	}
	return s.pack.Load(ctx, s.w, packJobs{s}, sites)
}

// phCapacity makes what placeholder ph registered its pool
// (packing.Register); a capacity refused leaves it running one-core jobs.
func (s *Store) phCapacity(ph int64, r protocol.Register) {
	s.pack.Registered(ph, r.Walltime, s.reg.Known)
	if err := s.pack.Register(ph, r.Capacity, r.Slots, packJobs{s}); err != nil {
		s.log.Warn("placeholder's capacity refused; it runs one-core jobs as slots", "placeholder", ph, "err", err)
	}
}

// packFits is the fitsResources check: job id fits what p's placeholder
// has free now (the decision dispatch began with packing.Begin).
func (s *Store) packFits(id int64, p *parkedNext) bool {
	return s.pack == nil || s.pack.FitsNow(id, p.req.Placeholder) // nil: a bare store, the chains' own tests
}

// packStart takes claimed job id's grant from placeholder ph's pool.
func (s *Store) packStart(id, ph int64) *protocol.Capacity { return s.packStartAttempt(id, 0, ph) }

// packStartAttempt takes attempt attempt of claimed job id's grant from
// placeholder ph's pool, as its assignment carries it (packing.Grant).
func (s *Store) packStartAttempt(id int64, attempt int, ph int64) *protocol.Capacity {
	g, ok := s.pack.Grant(packing.Run{Job: id, Attempt: attempt}, ph)
	if !ok {
		// Fits said it fits: the pool changed in between, which the core
		// alone does. The job runs as before, in one core.
		s.log.Warn("a claimed job's grant does not fit its placeholder", "job", id, "placeholder", ph)
	}
	return g
}

// category is job id's queue and target names (ok false: not in memory).
func (s *Store) category(id int64) (resource.Category, bool) {
	j, ok := s.g.Node(id)
	if !ok {
		return resource.Category{}, false
	}
	c := resource.Category{Target: s.g.Name(j.Target)}
	if q := s.queueIDs[j.Queue]; q != nil {
		c.Queue = q.Name
	}
	return c, true
}

// packJobs is what packing reads of the core's jobs (packing.Jobs).
type packJobs struct{ s *Store }

func (p packJobs) Do(ctx context.Context, fn func() error) error { return p.s.do(ctx, fn) }

func (p packJobs) Category(id int64) (resource.Category, bool) { return p.s.category(id) }

// Need is how long job id is expected to take (bundleJobs.Need).
func (p packJobs) Need(id int64) float64 { return (*bundleJobs)(p.s).Need(id) }

func (p packJobs) Running() []packing.Held {
	hs := make([]packing.Held, 0, len(p.s.running))
	for id, ru := range p.s.running {
		hs = append(hs, packing.Held{Run: packing.Run{Job: id, Attempt: ru.Attempt}, Placeholder: ru.Placeholder})
	}
	return hs
}
