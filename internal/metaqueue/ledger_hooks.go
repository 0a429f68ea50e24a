package metaqueue

import (
	"context"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/metaqueue/ledger"
	"github.com/mq-hpc/mq/internal/metaqueue/placeholders"
	"github.com/mq-hpc/mq/internal/runs"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// The core's side of the ledger (internal/metaqueue/ledger): the calls at
// its hooks, each with the facts it needs (queue settings as values, the
// clock, runtime estimates), and what the ledger reads of the core
// (ledgerCore, ledgerQueues).

// loadLedger reads the stored sites' prices and what every queue spent.
func (s *Store) loadLedger(ctx context.Context) error {
	if err := placeholders.EachSite(ctx, s.w, func(name string, spec protocol.SiteSpec) {
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
	return storeErr(s.ledger.Flush(context.Background(), s.w))
}

// econCosting says whether any queue is costed or any site priced or any
// queue capped: only then does dispatch need the asking placeholder's site.
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
func (s *Store) econStart(id int64, q *queue, j dag.Node, ru *run, site string) {
	s.ledger.Start(protocol.JobRef{ID: id, Attempt: ru.Attempt}, q.account(), j, site, s.guess, s.jobCores(id))
}

// econInfo fills a queue's spending for listings.
func (s *Store) econInfo(q *queue) protocol.QueueInfo {
	info := q.QueueInfo
	s.ledger.Fill(&info, q.id)
	return info
}

// affordable says whether a placeholder at site may start an attempt of
// job id (j) of q now (ledger.Affordable).
func (s *Store) affordable(id int64, q *queue, j dag.Node, site string) bool {
	a, cores := q.account(), 1
	if a.Costed() { // only a budget prices cores: no lookup on the common path
		cores = s.jobCores(id)
	}
	return s.ledger.Affordable(a, j, site, s.now, s.guess, cores)
}

// jobCores is how many cores job id asks for (at least 1; an auto size
// counts 1 until learned): what the ledger prices, per core-hour.
func (s *Store) jobCores(id int64) int {
	return s.pack.Request(id).Cores()
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
	v := ledger.View{Graph: s.g, Queues: s.ledgerQueues(), Started: ledger.StartedFrom(ledgerCore{s}.Running), Estimate: s.guess}
	for _, p := range s.ledger.Check(v, now) {
		q := s.queueIDs[p.Queue]
		if j, ok := s.g.Node(p.Ready.ID); ok && j.State == job.Queued && q != nil {
			q.ready.Push(p.Ready)
		}
	}
}

// Planners answer the provisioning planners: what they read of the
// queues and the caps they set, each on the core (ledger.Planners).
func (s *Store) Planners() ledger.Planners { return ledger.NewPlanners(&s.ledger, ledgerCore{s}) }

// ledgerQueues is every queue as the ledger reads it.
func (s *Store) ledgerQueues() []ledger.QueueCounts {
	qs := make([]ledger.QueueCounts, len(s.qlist))
	for i, q := range s.qlist {
		c := s.countsFor(q.id)
		qs[i] = ledger.QueueCounts{Queue: q.account(), Counts: ledger.Counts{Queued: c[job.Queued], Waiting: c[job.Waiting], Executing: c[job.Executing]}, Declared: q.est.Mean()}
		if r, ok := q.ready.Peek(); ok {
			if j, ok := s.g.Node(r.ID); ok {
				qs[i].Head = &j
			}
		}
	}
	return qs
}

// ledgerCore is what the ledger reads of the core (ledger.Core).
type ledgerCore struct{ s *Store }

var _ ledger.PlanCore = ledgerCore{}

func (c ledgerCore) SiteOf(ph int64) (string, error) { return c.s.siteName(ph) }

func (c ledgerCore) Do(ctx context.Context, fn func() error) error { return c.s.do(ctx, fn) }
func (c ledgerCore) Queues() []ledger.QueueCounts                  { return c.s.ledgerQueues() }
func (c ledgerCore) Graph() *dag.Graph                             { return c.s.g }
func (c ledgerCore) NextID() int64                                 { return c.s.nextID }
func (c ledgerCore) Now() time.Time                                { return c.s.now() }
func (c ledgerCore) Estimate(j dag.Node) float64                   { return c.s.guess(j) }
func (c ledgerCore) Bandwidth(site string) float64                 { return c.s.linkOf(site).Bandwidth }

func (c ledgerCore) QueueID(name string) (int32, bool) { return c.s.queueID(name) }

func (c ledgerCore) Running() []ledger.Running {
	var rs []ledger.Running
	for id, ru := range runs.All(c.s.running, c.s.copyRuns) {
		if j, ok := c.s.g.Node(id); ok {
			rs = append(rs, ledger.Running{Ref: protocol.JobRef{ID: id, Attempt: ru.Attempt}, Queue: j.Queue, Placeholder: ru.Placeholder, Started: ru.Started})
		}
	}
	return rs
}
