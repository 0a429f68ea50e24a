package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/ledger"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of the ledger (internal/metaqueue/ledger): the facts it
// hands the ledger at each hook (queue settings, sites, runtime
// estimates, the clock) and what it does with the answers.

// loadLedger reads the stored sites' prices and what every queue spent.
func (s *Store) loadLedger(ctx context.Context) error {
	if err := s.eachSiteSpec(ctx, func(name string, spec protocol.SiteSpec) {
		s.ledger.SetPrice(name, spec.Price)
	}); err != nil {
		return err
	}
	return s.ledger.Load(ctx, s.w)
}

// flushMeasures writes what the batch's job ends measured, in its
// transaction (before it commits).
func (s *Store) flushMeasures() error {
	if !s.ledger.Dirty() {
		return nil
	}
	if err := s.begin(); err != nil {
		return err
	}
	if err := s.ledger.Flush(context.Background(), s.w); err != nil {
		return fatalError{err}
	}
	return nil
}

// econCosting says whether any queue is costed or any site priced or any
// queue capped: only then does dispatch need the asking placeholder's
// site.
func (s *Store) econCosting() bool {
	if s.ledger.Costing() {
		return true
	}
	for _, q := range s.qlist {
		if q.costed() {
			return true
		}
	}
	return false
}

// econStart records that ru (attempt of job id, j, of q) started at site.
// Dispatch reserves before the attempt's number is known (ru.attempt 0):
// it tells the ledger the number once claimed (ledger.Numbered).
func (s *Store) econStart(id int64, q *queue, j dag.Node, ru *run, site string) {
	s.ledger.Start(protocol.JobRef{ID: id, Attempt: ru.attempt}, q.account(), j, site, s.guess)
}

// econStop releases what attempt ru of job id reserved.
func (s *Store) econStop(id int64, ru *run) {
	s.ledger.Stop(protocol.JobRef{ID: id, Attempt: ru.attempt})
}

// charge records what attempt ru of job id that ran from started to
// finished cost, in the batch's transaction. Called before stopRun.
func (s *Store) charge(id int64, q *queue, ru *run, started, finished time.Time, ok bool) error {
	ref := protocol.JobRef{ID: id, Attempt: ru.attempt}
	site := s.ledger.SiteOf(ref)
	if site == "" {
		var err error
		if site, err = s.siteName(ru.placeholder); err != nil {
			return err
		}
	}
	if err := s.ledger.Charge(context.Background(), s.w, ref, q.account(), site, started, finished, ok); err != nil {
		return fatalError{err}
	}
	return nil
}

// econDying keeps killed copy ru's reservation until its placeholder
// reports it stopped (econDied), or a lease from now.
func (s *Store) econDying(ref protocol.JobRef, ru *run) {
	now := s.now()
	s.ledger.Dying(ref, ru.placeholder, ru.started, now, now.Add(s.opt.Lease))
}

// econDied releases a killed copy's reservation.
func (s *Store) econDied(ref protocol.JobRef) { s.ledger.Died(ref) }

// extendCharge charges a killed copy up to when its placeholder says it
// ended (ledger.ExtendCharge).
func (s *Store) extendCharge(id int64, attempt int, finished time.Time) error {
	err := s.ledger.ExtendCharge(context.Background(), s.w, protocol.JobRef{ID: id, Attempt: attempt}, finished, s.now(), s.opt.Lease)
	if err != nil {
		return fatalError{err}
	}
	return nil
}

// noteWrote counts bytes a Done job of queue q wrote.
func (s *Store) noteWrote(q int32, bytes float64) { s.ledger.Wrote(q, bytes) }

// econInfo fills a queue's spending for listings.
func (s *Store) econInfo(q *queue) protocol.QueueInfo {
	info := q.QueueInfo
	s.ledger.Fill(&info, q.id)
	return info
}

// affordable says whether a placeholder at site may start an attempt of
// job j of q now (ledger.Affordable).
func (s *Store) affordable(q *queue, j dag.Node, site string) bool {
	return s.ledger.Affordable(q.account(), j, site, s.now, s.guess)
}

// checkInfeasible runs the ledger's periodic check (ledger.Check) when it
// is due, and puts the jobs it no longer finds infeasible back on their
// queues' heaps if still queued.
func (s *Store) checkInfeasible(now time.Time) {
	if !s.ledger.Due(now) {
		return
	}
	t0 := time.Now() // the check's own time paces it
	defer func() { s.ledger.Took(time.Since(t0)) }()
	qs := make([]ledger.QueueCounts, len(s.qlist))
	for i, q := range s.qlist {
		c := s.countsFor(q.id)
		qs[i] = ledger.QueueCounts{Queue: q.account(), Counts: ledger.Counts{Queued: c[job.Queued], Waiting: c[job.Waiting], Executing: c[job.Executing]}}
	}
	back := s.ledger.Check(ledger.View{Graph: s.g, Queues: qs, Started: s.firstStarted, Estimate: s.guess}, now)
	for _, p := range back {
		q := s.queueIDs[p.Queue]
		if j, ok := s.g.Node(p.Ready.ID); ok && j.State == job.Queued && q != nil {
			q.ready.Push(p.Ready)
		}
	}
}

// firstStarted is when running job id's earliest running attempt (itself
// or a copy) started; zero: none.
func (s *Store) firstStarted(id int64) time.Time {
	var first time.Time
	if ru := s.running[id]; ru != nil {
		first = ru.started
	}
	for _, c := range s.copyRuns[id] {
		if first.IsZero() || c.started.Before(first) {
			first = c.started
		}
	}
	return first
}

// EconQueues returns what the deadline-and-budget planner needs of every
// queue with a deadline or a budget.
func (s *Store) EconQueues(ctx context.Context) ([]policy.EconQueue, error) {
	var out []policy.EconQueue
	err := s.do(ctx, func() error {
		for _, q := range s.qlist {
			if q.costed() {
				out = append(out, s.econQueue(q))
			}
		}
		return nil
	})
	return out, err
}

// StageQueues is what LP provisioning plans: every queue with jobs not
// ended, as the stages of one pipeline in the order its jobs feed each
// other (ledger.StageOrder), and each named site's link in bytes per
// second (measured by staging, else configured).
func (s *Store) StageQueues(ctx context.Context, sites []string) ([]policy.EconQueue, map[string]float64, error) {
	var out []policy.EconQueue
	links := make(map[string]float64, len(sites))
	err := s.do(ctx, func() error {
		var ids []int32
		for _, q := range s.stageOrder() {
			c := s.countsFor(q.id)
			if c[job.Queued]+c[job.Waiting]+c[job.Executing] > 0 {
				out = append(out, s.econQueue(q))
				ids = append(ids, q.id)
			}
		}
		for i := 1; i < len(ids); i++ {
			out[i-1].FeedsNext = s.ledger.Feeds(ids[i-1], ids[i])
		}
		for _, name := range sites {
			links[name] = s.linkOf(name).Bandwidth
		}
		return nil
	})
	return out, links, err
}

// stageOrder is the queues in the order their jobs feed each other
// (ledger.StageOrder).
func (s *Store) stageOrder() []*queue {
	ids := make([]int32, len(s.qlist))
	for i, q := range s.qlist {
		ids[i] = q.id
	}
	order := s.ledger.StageOrder(s.g, ids, s.nextID, s.now())
	out := make([]*queue, len(order))
	for i, id := range order {
		out[i] = s.queueIDs[id]
	}
	return out
}

// econQueue is queue q as provisioning sees it.
func (s *Store) econQueue(q *queue) policy.EconQueue {
	c := s.countsFor(q.id)
	var head *dag.Node
	if r, ok := q.ready.Peek(); ok {
		if j, ok := s.g.Node(r.ID); ok {
			head = &j
		}
	}
	declared := 0.0
	if q.estN > 0 {
		declared = q.estSum / float64(q.estN)
	}
	return s.ledger.Provision(q.account(), ledger.Counts{Queued: c[job.Queued], Waiting: c[job.Waiting], Executing: c[job.Executing]},
		head, declared, s.guess)
}

// SetEconPlan sets how many of a queue's jobs each site may run at once
// (nil: no caps) and how many of its ready jobs the planner found cannot
// end within its deadline and budget.
func (s *Store) SetEconPlan(ctx context.Context, queue string, caps map[string]int, unfinishable int) error {
	return s.do(ctx, func() error {
		q, ok := s.queues[queue]
		if !ok {
			return protocol.Errorf(protocol.CodeNotFound, "no queue %s", queue)
		}
		if caps != nil && !s.ledger.Capped(q.id) {
			if err := s.countRunning(q); err != nil {
				return err
			}
		}
		s.ledger.SetPlan(q.id, caps, unfinishable)
		return nil
	})
}

// countRunning counts the attempts of queue q running now that the
// ledger does not count yet (the queue is capped for the first time:
// they started while nothing held it, or before a restart), so its caps
// hold from the first plan on.
func (s *Store) countRunning(q *queue) error {
	add := func(id int64, ru *run) error {
		ref := protocol.JobRef{ID: id, Attempt: ru.attempt}
		if s.ledger.Counted(ref) {
			return nil
		}
		if j, ok := s.g.Node(id); !ok || j.Queue != q.id {
			return nil
		}
		site := s.ledger.SiteOf(ref)
		if site == "" {
			var err error
			if site, err = s.siteName(ru.placeholder); err != nil {
				return err
			}
		}
		s.ledger.Count(ref, q.id, site)
		return nil
	}
	for id, ru := range s.running {
		if err := add(id, ru); err != nil {
			return err
		}
	}
	for id, cs := range s.copyRuns {
		for _, ru := range cs {
			if err := add(id, ru); err != nil {
				return err
			}
		}
	}
	return nil
}
