package metaqueue

import (
	"context"

	"github.com/mq-hpc/mq/internal/metaqueue/packing"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/job"
)

// maxExamined bounds how many ready entries SiteDemand looks at, so a huge
// backlog of jobs too long for a site never stalls the core.
const maxExamined = 100_000

// SiteDemand says how much work a site's placeholders could do: ready jobs
// a placeholder with walltime seconds left could take (as dispatch would
// judge: estimate, else the queue's ceiling; walltime 0 takes anything),
// counted up to limit; and jobs the given placeholders are running. It
// reads memory only. It counts jobs, whatever they ask: SiteNeed measures
// them against the site's placeholder shape.
func (s *Store) SiteDemand(ctx context.Context, walltime float64, placeholders []int64, limit int) (ready, executing int, err error) {
	r, e, err := s.SiteNeed(ctx, resource.Capacity{}, walltime, placeholders, limit)
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
func (s *Store) SiteNeed(ctx context.Context, shape resource.Capacity, walltime float64, placeholders []int64, limit int) (ready, executing packing.Need, err error) {
	err = s.do(ctx, func() error {
		if len(placeholders) > 0 {
			mine := make(map[int64]bool, len(placeholders))
			for _, id := range placeholders {
				mine[id] = true
			}
			for id, ru := range s.running {
				if mine[ru.placeholder] {
					s.pack.AddRunning(&executing, shape, packing.Run{Job: id, Attempt: ru.attempt})
				}
			}
			for id, cs := range s.copyRuns {
				for _, c := range cs {
					if mine[c.placeholder] {
						s.pack.AddRunning(&executing, shape, packing.Run{Job: id, Attempt: c.attempt})
					}
				}
			}
		}
		// Requests are looked at one by one only when some job asks for
		// more than a slot and the site has a shape to hold them against.
		each := shape.CPUs >= 1 && s.pack.AnyAsks()
		for _, q := range s.qlist {
			if ready.Jobs >= limit {
				break
			}
			n := s.countsFor(q.id)[job.Queued]
			if n == 0 {
				continue
			}
			if walltime <= 0 && !each {
				ready.AddSlots(shape, min(n, limit-ready.Jobs))
				continue
			}
			examined, fit := 0, 0
			q.ready.Each(func(r policy.Ready) bool {
				examined++
				j, ok := s.g.Node(r.ID)
				if ok && j.State == job.Queued && (walltime <= 0 || fits(j.Est, q, walltime)) {
					if !each {
						ready.AddSlots(shape, 1)
						fit++
					} else if s.pack.AddReady(&ready, shape, r.ID) {
						fit++
					}
				}
				// A cp queue may hold a job twice (re-ranked): count at
				// most the queue's ready jobs.
				return ready.Jobs < limit && examined < maxExamined && fit < n
			})
		}
		return nil
	})
	return ready, executing, err
}
