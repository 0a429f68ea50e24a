package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/protocol"
)

// Plans (cls plan make): a planner chose a site for some jobs ahead of
// running them. The CLS follows the plan where it can and binds late
// where it cannot:
//
//   - a placeholder at a job's planned site gets the site's planned ready
//     jobs first, in the plan's order, from any queue;
//   - a placeholder elsewhere skips a planned job while a placeholder at
//     the planned site has asked for work or heartbeated within
//     planPatience and the job has been ready for less than that: the
//     site is alive and will take it;
//   - past that (the site slow, or no placeholder of it asking), the
//     queue's own policy hands the job to whoever asks: a deviation, shown
//     by mqstat -j as the planned site beside the one it ran at.

// planPatience is how long a planned job waits for its site.
const planPatience = 30 * time.Second

type planEntry struct {
	site string
	seq  int64
}

// planState is the writer's memory of the plans of live jobs.
type planState struct {
	job      map[int64]planEntry
	bySite   map[string][]int64 // planned live jobs per site, in plan order (ended ones dropped lazily)
	readyAt  map[int64]time.Time
	lastSeen map[string]time.Time // site -> when a placeholder there last asked for work or heartbeated
}

func (ps *planState) reset() {
	*ps = planState{job: map[int64]planEntry{}, bySite: map[string][]int64{}, readyAt: map[int64]time.Time{}, lastSeen: map[string]time.Time{}}
}

func (ps *planState) add(id int64, e planEntry) {
	if old, ok := ps.job[id]; ok && old.site == e.site && old.seq == e.seq {
		return
	}
	ps.job[id] = e
	ps.bySite[e.site] = append(ps.bySite[e.site], id)
}

// sortSite restores plan order after adds.
func (ps *planState) sortSite(site string) {
	ids := ps.bySite[site]
	// Drop entries whose plan moved to another site or was replaced.
	kept := ids[:0]
	seen := map[int64]bool{}
	for _, id := range ids {
		if e, ok := ps.job[id]; ok && e.site == site && !seen[id] {
			seen[id] = true
			kept = append(kept, id)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return ps.job[kept[i]].seq < ps.job[kept[j]].seq })
	ps.bySite[site] = kept
}

// loadPlans reads the plans of live jobs at start.
func (s *Store) loadPlans(ctx context.Context) error {
	s.plans.reset()
	rows, err := s.w.QueryContext(ctx, `SELECT p.job_id, p.site, p.seq FROM job_plans p JOIN jobs j ON j.id = p.job_id
		WHERE j.state NOT IN ('D', 'F', 'X')`)
	if err != nil {
		return err
	}
	defer rows.Close()
	now := s.now()
	for rows.Next() {
		var id int64
		var e planEntry
		if err := rows.Scan(&id, &e.site, &e.seq); err != nil {
			return err
		}
		s.plans.add(id, e)
		if s.g.State(id) == job.Queued {
			s.plans.readyAt[id] = now
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for site := range s.plans.bySite {
		s.plans.sortSite(site)
	}
	return nil
}

// planReady notes when a planned job became ready (applyChanges).
func (s *Store) planReady(id int64) {
	if _, ok := s.plans.job[id]; ok {
		s.plans.readyAt[id] = s.now()
	}
}

// planEnded forgets an ended job's plan (its row stays for mqstat -j).
func (s *Store) planEnded(id int64) {
	if len(s.plans.job) == 0 {
		return
	}
	delete(s.plans.job, id)
	delete(s.plans.readyAt, id)
}

// planSite is the site name of p's placeholder, noting that it asked.
func (s *Store) planSite(p *parkedNext) (string, error) {
	at, err := s.phSite(p.req.Placeholder)
	if err != nil {
		return "", err
	}
	site := s.data.places[at].site
	s.plans.lastSeen[site] = s.now()
	p.site = site
	return site, nil
}

// planAlive notes that a placeholder is alive at its site (a heartbeat):
// a site whose placeholders are all busy still takes its planned jobs
// when they free up.
func (s *Store) planAlive(ph int64) error {
	at, err := s.phSite(ph)
	if err != nil {
		return err
	}
	s.plans.lastSeen[s.data.places[at].site] = s.now()
	return nil
}

// pickPlanned takes the first ready job planned for p's site that fits
// and has its inputs there. It looks at most planScan entries of the
// site's plan: ended ones are dropped from its front as they go, and a
// planned job further on is still bound by the queue's own pick, which
// never leaves a job to another site than its planned one.
func (s *Store) pickPlanned(p *parkedNext) (*queue, int64, error) {
	if len(s.plans.job) == 0 {
		return nil, 0, nil
	}
	site, err := s.planSite(p)
	if err != nil {
		return nil, 0, err
	}
	ids := s.plans.bySite[site]
	for len(ids) > 0 {
		if e, ok := s.plans.job[ids[0]]; ok && e.site == site {
			break
		}
		ids = ids[1:]
	}
	s.plans.bySite[site] = ids
	examined := 0
	for k, id := range ids {
		if k >= planScan || examined >= window {
			break
		}
		if e, ok := s.plans.job[id]; !ok || e.site != site {
			continue // ended, or planned again elsewhere
		}
		j, ok := s.g.Node(id)
		if !ok || j.State != job.Queued {
			continue
		}
		if ar := s.arrays.of(id); ar != nil && ar.running >= ar.limit {
			continue // its array is at its cap; the queue's pick holds it
		}
		examined++
		q := s.queueIDs[j.Queue]
		if q == nil || !fits(j.Est, q, p.req.WalltimeLeft) || !s.affordable(q, j, p.site) {
			continue
		}
		here, err := s.dataReady(id, p)
		if err != nil {
			return nil, 0, err
		}
		if here {
			return q, id, nil
		}
	}
	return nil, 0, nil
}

// planScan bounds how many entries of a site's plan one pick looks at.
const planScan = 1024

// keepForPlan says whether a placeholder at site should leave job id to
// the site its plan names: that site was seen alive lately and the job
// has not waited for it long.
func (s *Store) keepForPlan(id int64, site string) bool {
	e, ok := s.plans.job[id]
	if !ok || e.site == site {
		return false
	}
	now := s.now()
	seen, ok := s.plans.lastSeen[e.site]
	if !ok || now.Sub(seen) > planPatience {
		return false
	}
	return now.Sub(s.plans.readyAt[id]) < planPatience
}

// PlanJobs is the planning problem's jobs for target: its jobs and those
// of every target it needs, directly or not, that have not ended; each
// with the same runtime at every site in sites (its declared estimate,
// else est seconds), its declared files (an input no job of the problem
// writes is placed at the sites holding a replica), and prerequisites as
// jobs. Read from the database, not the writer's memory: a plan is made
// rarely and may take long.
func (s *Store) PlanJobs(ctx context.Context, target string, sites []string, est float64) ([]policy.PlanJob, error) {
	var root int64
	err := s.rdb.QueryRowContext(ctx, "SELECT id FROM targets WHERE name = ?", target).Scan(&root)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "target %q has no jobs", target)
	}
	if err != nil {
		return nil, err
	}
	var jobs []policy.PlanJob
	byTarget := map[int64][]int64{}
	seen := map[int64]bool{root: true}
	queue := []int64{root}
	jobPre := map[int64][]int64{} // job -> prerequisite targets
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		rows, err := s.rdb.QueryContext(ctx, "SELECT id, state, coalesce(est, 0) FROM jobs WHERE target_id = ? ORDER BY id", t)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var st string
			var e float64
			if err := rows.Scan(&id, &st, &e); err != nil {
				rows.Close()
				return nil, err
			}
			if st == "" || job.State(st[0]).Terminal() {
				continue
			}
			if e <= 0 {
				e = est
			}
			pj := policy.PlanJob{ID: id, Est: make(map[string]float64, len(sites))}
			for _, site := range sites {
				pj.Est[site] = e
			}
			jobs = append(jobs, pj)
			byTarget[t] = append(byTarget[t], id)
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
		prow, err := s.rdb.QueryContext(ctx, `SELECT jp.job_id, jp.target_id FROM job_prereqs jp JOIN jobs j ON j.id = jp.job_id
			WHERE j.target_id = ?`, t)
		if err != nil {
			return nil, err
		}
		for prow.Next() {
			var id, pt int64
			if err := prow.Scan(&id, &pt); err != nil {
				prow.Close()
				return nil, err
			}
			jobPre[id] = append(jobPre[id], pt)
			if !seen[pt] {
				seen[pt] = true
				queue = append(queue, pt)
			}
		}
		if err := closeRows(prow); err != nil {
			return nil, err
		}
		if len(jobs) > MaxPlanJobs {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "target %q needs more than %d jobs: too many to plan", target, MaxPlanJobs)
		}
	}
	if len(jobs) == 0 {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "target %q and what it needs have no jobs left to run", target)
	}
	idx := make(map[int64]int, len(jobs))
	for i, j := range jobs {
		idx[j.ID] = i
	}
	for i := range jobs {
		for _, pt := range jobPre[jobs[i].ID] {
			jobs[i].Prereqs = append(jobs[i].Prereqs, byTarget[pt]...)
		}
	}
	// Files.
	written := map[string]bool{}
	frows, err := s.rdb.QueryContext(ctx, "SELECT job_id, kind, path, coalesce(size, 0) FROM job_files ORDER BY job_id, kind, seq")
	if err != nil {
		return nil, err
	}
	type decl struct {
		job  int
		kind string
		f    policy.PlanFile
	}
	var decls []decl
	for frows.Next() {
		var id, size int64
		var d decl
		if err := frows.Scan(&id, &d.kind, &d.f.Path, &size); err != nil {
			frows.Close()
			return nil, err
		}
		i, ok := idx[id]
		if !ok {
			continue
		}
		d.job, d.f.Size = i, max(size, 0)
		if d.kind == "o" {
			if written[d.f.Path] {
				continue // a second writer: the first keeps it
			}
			written[d.f.Path] = true
		}
		decls = append(decls, d)
	}
	if err := closeRows(frows); err != nil {
		return nil, err
	}
	for _, d := range decls {
		if d.kind == "o" {
			jobs[d.job].Outputs = append(jobs[d.job].Outputs, d.f)
			continue
		}
		if !written[d.f.Path] {
			at, err := s.replicaSites(ctx, d.f.Path)
			if err != nil {
				return nil, err
			}
			d.f.At = at
		}
		jobs[d.job].Inputs = append(jobs[d.job].Inputs, d.f)
	}
	return jobs, nil
}

// MaxPlanJobs bounds a planning problem.
const MaxPlanJobs = 100_000

func (s *Store) replicaSites(ctx context.Context, path string) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT DISTINCT site FROM replicas WHERE path = ? UNION SELECT site FROM files WHERE path = ? AND site <> ''", path, path)
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		var site string
		if err := rows.Scan(&site); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, site)
	}
	return out, closeRows(rows)
}

// SetPlan records a plan: each job's planned site and place in the order.
// Jobs that ended meanwhile keep no plan; a job planned before is planned
// again.
func (s *Store) SetPlan(ctx context.Context, planner string, pl policy.Plan) (int, error) {
	if planner == "" {
		return 0, protocol.Errorf(protocol.CodeBadRequest, "a plan needs its planner's name")
	}
	n := 0
	err := s.do(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		for seq, id := range pl.Order {
			site, ok := pl.Site[id]
			if !ok || site == "" {
				return protocol.Errorf(protocol.CodeBadRequest, "the plan orders job %d but places it nowhere", id)
			}
			j, ok := s.g.Node(id)
			if !ok || j.State.Terminal() {
				continue
			}
			if _, err := s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO job_plans (job_id, site, seq, planner) VALUES (?, ?, ?, ?)",
				id, site, seq, planner); err != nil {
				return fatalError{err}
			}
			s.plans.add(id, planEntry{site: site, seq: int64(seq)})
			if j.State == job.Queued {
				s.plans.readyAt[id] = s.now()
			}
			n++
		}
		for site := range s.plans.bySite {
			s.plans.sortSite(site)
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
		res, err := s.w.ExecContext(context.Background(), "DELETE FROM job_plans")
		if err != nil {
			return fatalError{err}
		}
		k, _ := res.RowsAffected()
		n = int(k)
		s.plans.reset()
		return nil
	})
	return n, err
}

// jobPlan adds a job's plan to its detail.
func (s *Store) jobPlan(ctx context.Context, d *protocol.JobDetail) error {
	var p protocol.JobPlan
	err := s.rdb.QueryRowContext(ctx, "SELECT site, seq, planner FROM job_plans WHERE job_id = ?", d.ID).Scan(&p.Site, &p.Seq, &p.Planner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("job plan: %w", err)
	}
	d.Plan = &p
	return nil
}

// PlanShow counts the planned jobs per planner and site, and how many
// ran (or run) at their planned site or elsewhere, by their latest attempt.
func (s *Store) PlanShow(ctx context.Context) (protocol.PlanShowReply, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT p.planner, p.site, count(*),
		sum(CASE WHEN j.state IN ('D', 'F', 'X') THEN 1 ELSE 0 END),
		sum(CASE WHEN ph.site = p.site THEN 1 ELSE 0 END),
		sum(CASE WHEN ph.site IS NOT NULL AND ph.site <> p.site THEN 1 ELSE 0 END)
		FROM job_plans p JOIN jobs j ON j.id = p.job_id
		LEFT JOIN placeholders ph ON ph.id = j.placeholder_id
		GROUP BY p.planner, p.site ORDER BY p.planner, p.site`)
	if err != nil {
		return protocol.PlanShowReply{}, err
	}
	var out protocol.PlanShowReply
	for rows.Next() {
		var ps protocol.PlanSite
		if err := rows.Scan(&ps.Planner, &ps.Site, &ps.Jobs, &ps.Ended, &ps.RanHere, &ps.RanElse); err != nil {
			rows.Close()
			return out, err
		}
		out.Sites = append(out.Sites, ps)
	}
	return out, closeRows(rows)
}

// SiteLink is the link of a site by name: measured from real transfers
// when it has been, else configured, else the default.
func (s *Store) SiteLink(site string) Link { return s.linkOf(site) }
