package metaqueue

import (
	"cmp"
	"context"
	"slices"

	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of plans (internal/metaqueue/plans): what it tells the
// plans module when jobs, placeholders and files move, and what it does
// with the module's answers. The module decides which planned job waits
// for its site; the core resolves sites, checks that a job fits, and asks
// the catalog and the stager for files.

// PlanRecord is what is kept of a plan beside each job's site and place
// in the order (cls plan show).
type PlanRecord = plans.Record

// PlanEstimate gives a planned job's runtime at each site, from its
// command and its declared estimate (0: none).
type PlanEstimate = plans.Estimate

// MaxPlanJobs bounds a planning problem.
const MaxPlanJobs = plans.MaxJobs

// planKeep copies a file job id wrote at place p to the site the plan
// keeps it at, when that is another place and staging is on: a plan that
// put the file elsewhere (AEH-ETAA), or a producer that ran elsewhere than
// planned, still has the file where the plan's consumers run. The copy is
// the stager's, on behalf of the producer (accounted to it; its failure
// fails nobody, the producer having ended): consumers that run before it
// lands stage the file as usual.
func (s *Store) planKeep(path string, p Place, id int64) error {
	site, ok := s.plans.FileSite(path)
	if !ok || s.opt.Stager == nil || site == p.Site {
		return nil
	}
	to := Place{Site: site}
	if s.isShared(site) {
		to = shared
	}
	if !s.cat.Known(path) || s.cat.Present(path, to) {
		return nil
	}
	return s.requestStage(path, to, id)
}

// planEnded forgets an ended job's plan (its row stays for mqstat -j).
func (s *Store) planEnded(id int64) { s.plans.Ended(id) }

// planAlive notes that a placeholder is alive at its site (a heartbeat).
func (s *Store) planAlive(ph int64) error {
	at, err := s.phSite(ph)
	if err != nil {
		return err
	}
	s.plans.Seen(s.data.SiteAt(at).Site, s.now())
	return nil
}

// pickPlanned takes the first ready job planned for p's site that fits
// and has its inputs there (plans.Plans.At bounds how far it looks).
func (s *Store) pickPlanned(p *parkedNext) (*queue, int64, error) {
	if !s.plans.Active() {
		return nil, 0, nil
	}
	at, err := s.phSite(p.req.Placeholder)
	if err != nil {
		return nil, 0, err
	}
	p.site = s.data.SiteAt(at).Site
	s.plans.Seen(p.site, s.now())
	examined := 0
	type cand struct {
		q  *queue
		id int64
	}
	var cands []cand
	for id := range s.plans.At(p.site) {
		if examined >= policy.Window {
			break
		}
		j, ok := s.g.Node(id)
		if !ok || j.State != job.Queued {
			continue
		}
		if s.arrays.Full(id) {
			continue // its array is at its cap; the queue's pick holds it
		}
		examined++
		q := s.queueIDs[j.Queue]
		if q == nil || !fits(j.Est, q, p.req.WalltimeLeft) || !s.affordable(q, j, p.site) {
			continue
		}
		cands = append(cands, cand{q, id})
	}
	// A job's priority comes before the plan's order (stable: among equal
	// priorities, the plan's).
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(s.prio[b.id], s.prio[a.id]) })
	for _, c := range cands {
		here, err := s.dataReady(c.id, p)
		if err != nil {
			return nil, 0, err
		}
		if here {
			return c.q, c.id, nil
		}
	}
	return nil, 0, nil
}

// PlanJobs is the planning problem's jobs for target (plans.Problem).
func (s *Store) PlanJobs(ctx context.Context, target string, est PlanEstimate) ([]policy.PlanJob, error) {
	return plans.Problem(ctx, s.rdb, target, est)
}

// RuntimeSamples calls add for each of the last limit jobs that ended
// well with its command, site and elapsed seconds (plans.RuntimeSamples).
func (s *Store) RuntimeSamples(ctx context.Context, limit int, add func(command, site string, elapsed float64)) error {
	return plans.RuntimeSamples(ctx, s.rdb, limit, add)
}

// SetPlan records a plan made by planner, without a timeline.
func (s *Store) SetPlan(ctx context.Context, planner string, pl policy.Plan) (int, error) {
	return s.RecordPlan(ctx, PlanRecord{Planner: planner}, pl)
}

// RecordPlan records a plan: each job's planned site, place in the order
// and predicted slot, start and end, and the plan itself (plans.Record).
// A plan that cannot be recorded changes nothing.
func (s *Store) RecordPlan(ctx context.Context, rec PlanRecord, pl policy.Plan) (int, error) {
	if err := plans.Check(rec, pl); err != nil {
		return 0, err
	}
	n := 0
	err := s.do(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		var err error
		if n, err = s.plans.Record(context.Background(), s.w, s.g, rec, pl, s.now()); err != nil {
			return fatalError{err}
		}
		return nil
	})
	return n, err
}

// ClearPlans forgets every plan: jobs bind late again.
func (s *Store) ClearPlans(ctx context.Context) (int, error) {
	n := 0
	err := s.do(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		var err error
		if n, err = s.plans.Clear(context.Background(), s.w); err != nil {
			return fatalError{err}
		}
		return nil
	})
	return n, err
}

// PlanShow is what cls plan show shows (plans.Show).
func (s *Store) PlanShow(ctx context.Context, limit int) (protocol.PlanShowReply, error) {
	return plans.Show(ctx, s.rdb, limit)
}

// SiteLink is the link of a site by name: measured from real transfers
// when it has been, else configured, else the default.
func (s *Store) SiteLink(site string) Link { return s.linkOf(site) }
