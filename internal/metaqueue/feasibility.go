package metaqueue

import (
	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/metaqueue/plans"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
)

// The dispatch decision itself (which ready job a placeholder gets, the
// chain of feasibility checks, held and aside) is package dispatch's,
// shared with the simulator. Here is the store's side of it: the pick
// (the queues' turns, a planned job first, a choosing queue's own) and how
// the store answers each check for a placeholder asking now.

// pick removes the next job to run from the ready heaps: queues take turns;
// within a queue its policy orders jobs, skipping any whose estimate (or the
// queue's ceiling) exceeds the placeholder's remaining walltime. A dc queue
// asks policy.DC (pickDC), unless skipDC; waited reports that DC told the
// placeholder to wait for a job of some queue.
func (s *Store) pick(p *parkedNext, skipDC bool) (q *queue, id int64, waited bool, err error) {
	if q, id, err := s.pickPlanned(p); err != nil || id != 0 {
		return q, id, false, err
	}
	n := len(s.qlist)
	for k := 0; k < n; k++ {
		q := s.qlist[(s.rr+k)%n]
		var ok bool
		if q.isDC() {
			if skipDC {
				continue
			}
			var w bool
			id, ok, w, err = s.pickDC(q, p)
			if err != nil {
				return nil, 0, false, err
			}
			waited = waited || w
		} else {
			id, ok, err = s.pickFrom(q, p)
			if err != nil {
				return nil, 0, false, err
			}
		}
		if ok {
			s.rr = (s.rr + k + 1) % n
			return q, id, waited, nil
		}
	}
	return nil, 0, waited, nil
}

// pickPlanned takes the first ready job planned for p's site (p.site,
// read by dispatch) that fits and has its inputs there (plans.PickAt).
func (s *Store) pickPlanned(p *parkedNext) (*queue, int64, error) {
	if !s.plans.Active() {
		return nil, 0, nil
	}
	a := s.asking(nil, p)
	a.planned = true // each job's own queue (plans.Asking)
	id, err := s.plans.PickAt(p.site, s.now(), a)
	if id == 0 || err != nil {
		return nil, 0, err
	}
	j, _ := s.g.Node(id)
	return s.queueIDs[j.Queue], id, nil
}

// pickFrom takes the first ready job of an ordered queue that the
// ordered chain lets go to the placeholder (dispatch.First): with staging,
// one whose inputs are at the placeholder's place (a job whose inputs are
// being brought waits aside, so the placeholder gets other ready work
// meanwhile).
func (s *Store) pickFrom(q *queue, p *parkedNext) (int64, bool, error) {
	a := s.asking(q, p)
	r, ok, err := dispatch.First(a, q.ready, dispatch.Ordered&^a.idle(), &s.data.scratch)
	return r.ID, ok, err
}

// asking is the store's view of the world for the placeholder of p
// picking from queue q (a dispatch.World), or, planned, from the jobs
// planned for its site (plans.Asking): j is the ready job Current last
// accepted, the one the checks are then asked about, and a planned
// pick's q is that job's queue.
type asking struct {
	s       *Store
	q       *queue
	p       *parkedNext
	j       dag.Node
	planned bool
}

var _ plans.Asking = (*asking)(nil)

// asking returns the store's view of the world for the placeholder of p
// picking from q (planned, once set: from its site's planned jobs): the
// store's one, reused (the core picks for one placeholder at a time), as
// an interface value would otherwise be allocated for every pick.
func (s *Store) asking(q *queue, p *parkedNext) *asking {
	a := &s.data.ask
	*a = asking{s: s, q: q, p: p}
	return a
}

// Current says whether heap entry r is still a Queued job at its priority
// and estimate (mqalter re-enters it; an estimate of 0 ranks as learned).
func (a *asking) Current(r policy.Ready) bool {
	j, ok := a.s.g.Node(r.ID)
	if a.j = j; a.planned {
		a.q = a.s.queueIDs[j.Queue]
	}
	return ok && j.State == job.Queued && (a.planned || r.Priority == a.s.prio.Of(r.ID) && (j.Est == 0 || r.Est == j.Est))
}

// Allows answers check c for ready job r, one line each. A planned job
// whose array is at its limit is passed without being held: its queue's
// own pick holds it.
func (a *asking) Allows(c dispatch.Check, r policy.Ready) (bool, error) {
	s := a.s
	switch c {
	case dispatch.HeldByArray:
		if a.planned {
			return !s.arrays.Full(r.ID), nil
		}
		return !s.arrays.Capped(r.ID), nil
	case dispatch.ParkedInfeasible:
		return !s.ledger.Park(a.q.id, r), nil
	case dispatch.FitsWalltime:
		return a.q != nil && dispatch.Fits(a.j.Est, a.q.Ceiling, a.p.req.WalltimeLeft), nil
	case dispatch.FitsResources:
		return s.packFits(r.ID, a.p), nil
	case dispatch.KeptForPlan:
		return !s.plans.Active() || !s.plans.Keep(r.ID, a.p.site, s.now()), nil
	case dispatch.WithinBudget:
		return s.affordable(r.ID, a.q, a.j, a.p.site), nil
	case dispatch.InputsHere:
		return s.dataReady(r.ID, a.p)
	}
	panic("metaqueue: unanswered feasibility check " + c.String())
}

// idle is the checks that cannot refuse any job of this unplanned pick,
// which it then does not ask of each job it examines.
func (a *asking) idle() dispatch.Chain {
	s, ph := a.s, a.p.req.Placeholder
	return dispatch.Skip([...]bool{dispatch.HeldByArray: !s.arrays.Limits(), dispatch.ParkedInfeasible: !s.ledger.Parks(),
		dispatch.FitsWalltime: a.p.req.WalltimeLeft <= 0, dispatch.FitsResources: s.pack == nil || s.pack.AdmitsAll(ph),
		dispatch.KeptForPlan: !s.plans.Active(), dispatch.WithinBudget: s.ledger.Unbounded(a.q.account()),
		dispatch.InputsHere: s.opt.Stager == nil || !s.data.AnyFiles()})
}

// Priority is job id's priority, for a planned pick's order.
func (a *asking) Priority(id int64) int16 { return a.s.prio.Of(id) }
