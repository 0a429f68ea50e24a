package metaqueue

import (
	"context"
	"maps"
	"time"

	"github.com/mq-hpc/mq/dag"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/protocol"
)

// Economics (seed 002, docs/seed002.md): what attempts cost, what each
// queue has spent and reserved, and the caps the deadline-and-budget
// planner (econ.Provisioner, followed by the site manager) puts on how
// many of a queue's jobs each site runs at once.
//
// A queue is costed when it has a deadline or a budget; any attempt at a
// priced site is charged. Spending is committed with the attempt's end, in
// the same transaction (table charges), so it survives a crash exactly.
type econState struct {
	price map[string]float64 // stored site -> per core-hour
	spent map[int32]map[string]float64
	// reserved is what a queue's executing attempts may cost: each
	// reserves its site's price times its bound (the queue's ceiling, which
	// kills a job that runs longer, else its expected runtime), released
	// when it ends and the real cost is charged.
	reserved map[int32]float64
	// priced counts a queue's executing attempts at priced sites.
	priced map[int32]int
	// ran is each queue's succeeded attempts' runtimes per site: the
	// planner's measured rates.
	ran map[int32]map[string]*runtimes
	// caps and execAt: a queue's jobs each site may run at once, as the
	// planner last said (a site absent: no cap), and runs now.
	caps         map[int32]map[string]int
	execAt       map[int32]map[string]int
	unfinishable map[int32]int
}

func (e *econState) reset() {
	*e = econState{price: map[string]float64{}, spent: map[int32]map[string]float64{}, reserved: map[int32]float64{},
		priced: map[int32]int{}, ran: map[int32]map[string]*runtimes{}, caps: map[int32]map[string]int{},
		execAt: map[int32]map[string]int{}, unfinishable: map[int32]int{}}
}

// costed says whether a queue's attempts are charged wherever they run.
func (q *queue) costed() bool { return q.Budget > 0 || q.Deadline > 0 }

func (e *econState) spentBy(q int32) float64 {
	t := 0.0
	for _, v := range e.spent[q] {
		t += v
	}
	return t
}

// loadEcon reads the stored sites' prices and what every queue spent.
func (s *Store) loadEcon(ctx context.Context) error {
	s.econ.reset()
	if err := s.eachSiteSpec(ctx, func(name string, spec protocol.SiteSpec) {
		if spec.Price > 0 {
			s.econ.price[name] = spec.Price
		}
	}); err != nil {
		return err
	}
	rows, err := s.w.QueryContext(ctx, `SELECT queue_id, site, sum(cost), coalesce(sum(CASE WHEN ok THEN seconds END), 0), sum(ok)
		FROM charges GROUP BY queue_id, site`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var q int32
		var site string
		var cost, secs float64
		var n int
		if err := rows.Scan(&q, &site, &cost, &secs, &n); err != nil {
			rows.Close()
			return err
		}
		s.addSpent(q, site, cost)
		if n > 0 {
			s.ranAt(q, site).secs += secs
			s.ranAt(q, site).n += n
		}
	}
	return closeRows(rows)
}

func (s *Store) addSpent(q int32, site string, cost float64) {
	m := s.econ.spent[q]
	if m == nil {
		m = map[string]float64{}
		s.econ.spent[q] = m
	}
	m[site] += cost
}

func (s *Store) ranAt(q int32, site string) *runtimes {
	m := s.econ.ran[q]
	if m == nil {
		m = map[string]*runtimes{}
		s.econ.ran[q] = m
	}
	r := m[site]
	if r == nil {
		r = &runtimes{}
		m[site] = r
	}
	return r
}

// econCosting says whether any queue is costed or any site priced: only
// then does dispatch need the asking placeholder's site.
func (s *Store) econCosting() bool {
	if len(s.econ.price) > 0 {
		return true
	}
	for _, q := range s.qlist {
		if q.costed() {
			return true
		}
	}
	return false
}

// siteName is placeholder ph's site.
func (s *Store) siteName(ph int64) (string, error) {
	at, err := s.phSite(ph)
	if err != nil {
		return "", err
	}
	return s.data.places[at].site, nil
}

// expectAt is how long job j of queue q is expected to run at site: the
// queue's mean there, else the job's declared or learned (per target)
// runtime, else the queue's mean anywhere, else its ceiling; 0: unknown.
func (s *Store) expectAt(q *queue, j dag.Node, site string) float64 {
	if r := s.econ.ran[q.id][site]; r != nil && r.n > 0 {
		return r.secs / float64(r.n)
	}
	if e := s.data.expect.Estimate(s.g.Name(j.Target), float64(j.Est)); e > 0 {
		return e
	}
	var all runtimes
	for _, r := range s.econ.ran[q.id] {
		all.secs += r.secs
		all.n += r.n
	}
	if all.n > 0 {
		return all.secs / float64(all.n)
	}
	return q.Ceiling
}

// reserveFor is what an attempt of j at site reserves of q's budget: the
// site's price times the queue's ceiling (a job is killed past it), else
// times its expected runtime; unknown (0) when neither is known.
func (s *Store) reserveFor(q *queue, j dag.Node, site string) float64 {
	price := s.econ.price[site]
	bound := q.Ceiling
	if bound <= 0 {
		bound = s.expectAt(q, j, site)
	}
	return price * bound / 3600
}

// affordable says whether a placeholder at site may start job j of q now:
// the planner's cap for the site is not reached, and the budget left
// (less what running attempts reserve) covers what it would reserve. A
// job whose cost cannot be foreseen (no runtime known anywhere) starts
// at a priced site only while no other of its queue runs at one, so its
// runtime is measured before more are risked.
func (s *Store) affordable(q *queue, j dag.Node, site string) bool {
	if !q.costed() {
		return true
	}
	if caps, ok := s.econ.caps[q.id]; ok {
		if c, ok := caps[site]; ok && s.econ.execAt[q.id][site] >= c {
			return false
		}
	}
	if q.Budget <= 0 || s.econ.price[site] == 0 {
		return true
	}
	need := s.reserveFor(q, j, site)
	if need == 0 {
		return s.econ.priced[q.id] == 0 && s.econ.spentBy(q.id) < q.Budget
	}
	return s.econ.spentBy(q.id)+s.econ.reserved[q.id]+need <= q.Budget*(1+1e-9)
}

// econStart records that ru (job j of q) started at site.
func (s *Store) econStart(q *queue, j dag.Node, ru *run, site string) {
	if !q.costed() && s.econ.price[site] == 0 {
		return
	}
	ru.site, ru.queue, ru.costed = site, q.id, true
	if q.costed() {
		m := s.econ.execAt[q.id]
		if m == nil {
			m = map[string]int{}
			s.econ.execAt[q.id] = m
		}
		m[site]++
		if s.econ.price[site] > 0 {
			ru.reserve = s.reserveFor(q, j, site)
			s.econ.reserved[q.id] += ru.reserve
			s.econ.priced[q.id]++
		}
	}
}

// econStop releases what ru reserved.
func (s *Store) econStop(ru *run) {
	if !ru.costed {
		return
	}
	if m := s.econ.execAt[ru.queue]; m[ru.site] > 0 {
		m[ru.site]--
	}
	if s.econ.price[ru.site] > 0 || ru.reserve > 0 {
		s.econ.reserved[ru.queue] = max(s.econ.reserved[ru.queue]-ru.reserve, 0)
		if s.econ.priced[ru.queue] > 0 {
			s.econ.priced[ru.queue]--
		}
	}
	ru.costed = false
}

// charge records what an attempt of job id that ran from started to
// finished cost, in the batch's transaction. Called before stopRun.
func (s *Store) charge(id int64, q *queue, ru *run, started, finished time.Time, ok bool) error {
	site := ru.site
	if site == "" {
		var err error
		if site, err = s.siteName(ru.placeholder); err != nil {
			return err
		}
	}
	price := s.econ.price[site]
	if price == 0 && !q.costed() {
		return nil
	}
	secs := max(finished.Sub(started).Seconds(), 0)
	cost := price * secs / 3600
	if _, err := s.w.ExecContext(context.Background(), `INSERT OR REPLACE INTO charges (job_id, attempt, queue_id, site, seconds, price, cost, ok)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, ru.attempt, q.id, site, secs, price, cost, ok); err != nil {
		return fatalError{err}
	}
	s.addSpent(q.id, site, cost)
	if ok {
		r := s.ranAt(q.id, site)
		r.secs += secs
		r.n++
	}
	return nil
}

// setPrice is what a stored site's price became (0: free or gone).
func (s *Store) setPrice(site string, price float64) {
	if price > 0 {
		s.econ.price[site] = price
	} else {
		delete(s.econ.price, site)
	}
}

// EconQueues returns what the deadline-and-budget planner needs of every
// queue with a deadline or a budget.
func (s *Store) EconQueues(ctx context.Context) ([]policy.EconQueue, error) {
	var out []policy.EconQueue
	err := s.do(ctx, func() error {
		for _, q := range s.qlist {
			if !q.costed() {
				continue
			}
			c := s.countsFor(q.id)
			e := policy.EconQueue{Queue: q.Name, Ready: c[job.Queued], Running: c[job.Executing], PerJob: map[string]float64{},
				Busy: maps.Clone(s.econ.execAt[q.id])}
			if q.Deadline > 0 {
				e.Deadline = time.Unix(0, int64(q.Deadline*1e9))
			}
			if q.Budget > 0 {
				e.Budget = max(q.Budget-s.econ.spentBy(q.id)-s.econ.reserved[q.id]-s.lastJobSlack(q), 0)
				e.Budgeted = true
			}
			var all runtimes
			for site, r := range s.econ.ran[q.id] {
				if r.n > 0 {
					e.PerJob[site] = r.secs / float64(r.n)
					all.secs += r.secs
					all.n += r.n
				}
			}
			if all.n > 0 {
				e.Est = all.secs / float64(all.n)
			} else if r, ok := q.ready.Peek(); ok {
				if j, ok := s.g.Node(r.ID); ok {
					e.Est = s.data.expect.Estimate(s.g.Name(j.Target), float64(j.Est))
				}
			}
			if e.Est == 0 {
				e.Est = q.Ceiling
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// lastJobSlack is what dispatch asks of the budget beyond a job's
// expected cost: it reserves the queue's ceiling, so the last job to
// start needs price x ceiling left, not price x its runtime. The planner
// prices jobs at their expected cost, so it is given the budget less this
// (at the priced site where it is least), or it would plan jobs dispatch
// will not start.
func (s *Store) lastJobSlack(q *queue) float64 {
	if q.Ceiling <= 0 {
		return 0
	}
	r, ok := q.ready.Peek()
	if !ok {
		return 0 // nothing to plan
	}
	j, ok := s.g.Node(r.ID)
	if !ok {
		return 0
	}
	slack := -1.0
	for site, price := range s.econ.price {
		v := price * max(q.Ceiling-s.expectAt(q, j, site), 0) / 3600
		if slack < 0 || v < slack {
			slack = v
		}
	}
	return max(slack, 0)
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
		if caps == nil {
			delete(s.econ.caps, q.id)
		} else {
			s.econ.caps[q.id] = caps
		}
		s.econ.unfinishable[q.id] = unfinishable
		return nil
	})
}

// econInfo fills a queue's spending for listings.
func (s *Store) econInfo(q *queue) protocol.QueueInfo {
	info := q.QueueInfo
	if m := s.econ.spent[q.id]; len(m) > 0 {
		info.SpentBySite = make(map[string]float64, len(m))
		for site, v := range m {
			info.SpentBySite[site] = v
			info.Spent += v
		}
	}
	info.Reserved = s.econ.reserved[q.id]
	info.Unfinishable = s.econ.unfinishable[q.id]
	return info
}

// runtimes adds up attempts' seconds.
type runtimes struct {
	secs float64
	n    int
}
