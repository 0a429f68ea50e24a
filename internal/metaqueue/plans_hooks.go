package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// The core's side of plans (internal/metaqueue/plans): what it tells the
// plans module when jobs, placeholders and files move, and what it does
// with the module's answers. The module decides which planned job waits
// for its site; the core resolves sites, checks that a job fits, and asks
// the catalog and the stager for files.

// PlanRecord is what is kept of a plan beside each job's site and place
// in the order (cls plan show).
type PlanRecord = plans.Record

// planAlive notes that a placeholder is alive at its site (a heartbeat).
func (s *Store) planAlive(ph int64) error {
	site, err := s.siteName(ph)
	if err == nil {
		s.plans.Seen(site, s.now())
	}
	return err
}

// pickPlanned takes the first ready job planned for p's site that fits
// and has its inputs there (plans.PickAt).
func (s *Store) pickPlanned(p *parkedNext) (*queue, int64, error) {
	if !s.plans.Active() {
		return nil, 0, nil
	}
	site, err := s.siteName(p.req.Placeholder)
	if err != nil {
		return nil, 0, err
	}
	p.site = site
	id, err := s.plans.PickAt(site, s.now(), &planAsking{s: s, p: p})
	if id == 0 || err != nil {
		return nil, 0, err
	}
	j, _ := s.g.Node(id)
	return s.queueIDs[j.Queue], id, nil
}

// planAsking is the store's view of the world for a planned pick
// (plans.PickAt, a dispatch.World over the chain plans.Planned): q and j
// are the queue and node of the job Current last looked at.
type planAsking struct {
	s *Store
	p *parkedNext
	q *queue
	j dag.Node
}

func (a *planAsking) Current(r policy.Ready) bool {
	j, ok := a.s.g.Node(r.ID)
	a.j, a.q = j, a.s.queueIDs[j.Queue]
	return ok && j.State == job.Queued
}

// Allows answers the checks of plans.Planned and InputsHere. A job whose
// array is at its limit is passed without being held: its queue's own
// pick holds it.
func (a *planAsking) Allows(c dispatch.Check, r policy.Ready) (bool, error) {
	switch c {
	case dispatch.HeldByArray:
		return !a.s.arrays.Full(r.ID), nil
	case dispatch.FitsWalltime:
		return a.q != nil && fits(a.j.Est, a.q, a.p.req.WalltimeLeft), nil
	case dispatch.FitsResources:
		return a.s.packFits(r.ID, a.p), nil
	case dispatch.WithinBudget:
		return a.s.affordable(r.ID, a.q, a.j, a.p.site), nil
	case dispatch.InputsHere:
		return a.s.dataReady(r.ID, a.p)
	}
	panic("metaqueue: a planned pick asked " + c.String())
}

func (a *planAsking) Priority(id int64) int16 { return a.s.prio.Of(id) }

// Plans records and clears plans, each change one batch on the core
// (plans.Writer).
func (s *Store) Plans() plans.Writer { return plans.NewWriter(&s.plans, plansCore{s}) }

// plansCore runs a change of the plans on the core (plans.Core).
type plansCore struct{ s *Store }

func (c plansCore) Write(ctx context.Context, write func(context.Context, plans.DB, *dag.Graph, time.Time) error) error {
	s := c.s
	return s.do(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		if err := write(context.Background(), s.w, s.g, s.now()); err != nil {
			return fatalError{err}
		}
		return nil
	})
}

// SiteLink is the link of a site by name: measured from real transfers
// when it has been, else configured, else the default.
func (s *Store) SiteLink(site string) Link { return s.linkOf(site) }
