package metaqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
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
//     planPatience and the job has been ready for less than that plus the
//     wait the plan itself predicts for it (from its prerequisites' end
//     to its start, queued behind the site's other planned jobs): the
//     site is alive and will take it;
//   - past that (the site slow, or no placeholder of it asking), the
//     queue's own policy hands the job to whoever asks: a deviation, shown
//     by mqstat -j as the planned site beside the one it ran at.

// planPatience is how long a planned job waits for its site.
const planPatience = 30 * time.Second

type planEntry struct {
	site string
	seq  int64
	// wait is how long the plan has the job wait for its site once ready
	// (its predicted start less its predicted ready time).
	wait time.Duration
}

// planState is the writer's memory of the plans of live jobs.
type planState struct {
	job      map[int64]planEntry
	bySite   map[string][]int64 // planned live jobs per site, in plan order (ended ones dropped lazily)
	readyAt  map[int64]time.Time
	lastSeen map[string]time.Time // site -> when a placeholder there last asked for work or heartbeated
	fileSite map[string]string    // path -> the site the plan keeps it at
}

func (ps *planState) reset() {
	*ps = planState{job: map[int64]planEntry{}, bySite: map[string][]int64{}, readyAt: map[int64]time.Time{},
		lastSeen: map[string]time.Time{}, fileSite: map[string]string{}}
}

func (ps *planState) add(id int64, e planEntry) {
	if old, ok := ps.job[id]; ok && old.site == e.site && old.seq == e.seq {
		ps.job[id] = e
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
	rows, err := s.w.QueryContext(ctx, `SELECT p.job_id, p.site, p.seq, coalesce(p.start_s - p.ready_s, 0) FROM job_plans p JOIN jobs j ON j.id = p.job_id
		WHERE j.state NOT IN ('D', 'F', 'X')`)
	if err != nil {
		return err
	}
	defer rows.Close()
	now := s.now()
	for rows.Next() {
		var id int64
		var e planEntry
		var wait float64
		if err := rows.Scan(&id, &e.site, &e.seq, &wait); err != nil {
			return err
		}
		e.wait = planWait(wait)
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
	frows, err := s.w.QueryContext(ctx, "SELECT path, site FROM plan_files")
	if err != nil {
		return err
	}
	defer frows.Close()
	for frows.Next() {
		var path, site string
		if err := frows.Scan(&path, &site); err != nil {
			return err
		}
		s.plans.fileSite[path] = site
	}
	return frows.Err()
}

// planKeep copies a file job id wrote at place p to the site the plan
// keeps it at, when that is another place and staging is on: a plan that
// put the file elsewhere (AEH-ETAA), or a producer that ran elsewhere than
// planned, still has the file where the plan's consumers run. The copy is
// the stager's, on behalf of the producer (accounted to it; its failure
// fails nobody, the producer having ended): consumers that run before it
// lands stage the file as usual.
func (s *Store) planKeep(path string, p Place, id int64) error {
	site, ok := s.plans.fileSite[path]
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
		if k >= planScan || examined >= policy.Window {
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
// has not waited for it much longer than the plan said it would. (With
// planPatience alone, a job the plan queued at its site for more than
// planPatience behind the site's other jobs went to whichever other site
// asked first: a deviation the plan had not asked for, as one HEFT job of
// the sites suite's replay did.)
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
	return now.Sub(s.plans.readyAt[id]) < planPatience+e.wait
}

// PlanEstimate gives a planned job's runtime at each site, from its
// command and its declared estimate (0: none).
type PlanEstimate func(id int64, command string, declared float64) map[string]float64

// PlanJobs is the planning problem's jobs for target: its jobs and those
// of every target it needs, directly or not, that have not ended; each
// with the runtimes est gives it, its declared files (an input no job of
// the problem writes is placed at the sites holding a replica), and
// prerequisites as jobs. Read from the database, not the writer's memory:
// a plan is made rarely and may take long.
func (s *Store) PlanJobs(ctx context.Context, target string, est PlanEstimate) ([]policy.PlanJob, error) {
	var root int64
	err := s.rdb.QueryRowContext(ctx, "SELECT id FROM targets WHERE name = ?", target).Scan(&root)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "target %q has no jobs", target)
	}
	if err != nil {
		return nil, err
	}
	jobs, err := s.planGraph(ctx, target, root, est)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "target %q and what it needs have no jobs left to run", target)
	}
	if err := s.planFiles(ctx, jobs); err != nil {
		return nil, err
	}
	return jobs, nil
}

// planGraph reads the jobs not ended of target (root) and of every target
// it needs, directly or not, breadth first, with their prerequisites as
// jobs.
func (s *Store) planGraph(ctx context.Context, target string, root int64, est PlanEstimate) ([]policy.PlanJob, error) {
	var jobs []policy.PlanJob
	byTarget := map[int64][]int64{}
	seen := map[int64]bool{root: true}
	queue := []int64{root}
	jobPre := map[int64][]int64{} // job -> prerequisite targets
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		rows, err := s.rdb.QueryContext(ctx, "SELECT id, state, coalesce(est, 0), command FROM jobs WHERE target_id = ? ORDER BY id", t)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var st, command string
			var e float64
			if err := rows.Scan(&id, &st, &e, &command); err != nil {
				rows.Close()
				return nil, err
			}
			if st == "" || job.State(st[0]).Terminal() {
				continue
			}
			jobs = append(jobs, policy.PlanJob{ID: id, Est: est(id, command, max(e, 0))})
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
	for i := range jobs {
		for _, pt := range jobPre[jobs[i].ID] {
			jobs[i].Prereqs = append(jobs[i].Prereqs, byTarget[pt]...)
		}
	}
	return jobs, nil
}

// planFiles gives jobs their declared files; an input no job of the
// problem writes is placed at the sites holding a replica.
func (s *Store) planFiles(ctx context.Context, jobs []policy.PlanJob) error {
	idx := make(map[int64]int, len(jobs))
	for i, j := range jobs {
		idx[j.ID] = i
	}
	written := map[string]bool{}
	frows, err := s.rdb.QueryContext(ctx, "SELECT job_id, kind, path, coalesce(size, 0) FROM job_files ORDER BY job_id, kind, seq")
	if err != nil {
		return err
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
			return err
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
		return err
	}
	for _, d := range decls {
		if d.kind == "o" {
			jobs[d.job].Outputs = append(jobs[d.job].Outputs, d.f)
			continue
		}
		if !written[d.f.Path] {
			at, err := s.replicaSites(ctx, d.f.Path)
			if err != nil {
				return err
			}
			d.f.At = at
		}
		jobs[d.job].Inputs = append(jobs[d.job].Inputs, d.f)
	}
	return nil
}

// RuntimeSamples calls add for each of the last limit jobs that ended
// well (Done, from their current attempt) with its command, the site its
// placeholder ran at and its elapsed seconds: the accounting per-site
// runtime estimates are learned from.
func (s *Store) RuntimeSamples(ctx context.Context, limit int, add func(command, site string, elapsed float64)) error {
	rows, err := s.rdb.QueryContext(ctx, `SELECT j.command, p.site, j.finished - j.started FROM jobs j
		JOIN placeholders p ON p.id = j.placeholder_id
		WHERE j.state = 'D' AND j.started IS NOT NULL AND j.finished >= j.started
		ORDER BY j.id DESC LIMIT ?`, limit)
	if err != nil {
		return fmt.Errorf("runtime samples: %w", err)
	}
	for rows.Next() {
		var command, site string
		var us int64
		if err := rows.Scan(&command, &site, &us); err != nil {
			rows.Close()
			return err
		}
		add(command, site, float64(us)/1e6)
	}
	return closeRows(rows)
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

// PlanRecord is what is kept of a plan beside each job's site and place
// in the order (cls plan show): its target, planner, the sites' slots it
// assumed and its predicted timeline (plan.Timeline; jobs it lacks have
// none).
type PlanRecord struct {
	Target   string
	Planner  string
	Sites    []policy.PlanSite
	Timeline []plan.Scheduled
}

// SetPlan records a plan made by planner, without a timeline.
func (s *Store) SetPlan(ctx context.Context, planner string, pl policy.Plan) (int, error) {
	return s.RecordPlan(ctx, PlanRecord{Planner: planner}, pl)
}

// RecordPlan records a plan: each job's planned site, place in the order
// and predicted slot, start and end, and the plan itself. Jobs that ended
// meanwhile keep no plan; a job planned before is planned again, and a
// plan left without jobs is dropped.
func (s *Store) RecordPlan(ctx context.Context, rec PlanRecord, pl policy.Plan) (int, error) {
	if rec.Planner == "" {
		return 0, protocol.Errorf(protocol.CodeBadRequest, "a plan needs its planner's name")
	}
	times := make(map[int64]plan.Scheduled, len(rec.Timeline))
	for _, j := range rec.Timeline {
		times[j.ID] = j
	}
	n := 0
	err := s.do(ctx, func() error {
		if err := s.begin(); err != nil {
			return err
		}
		res, err := s.w.ExecContext(context.Background(), "INSERT INTO plans (target, planner, made, makespan_s, moved_bytes) VALUES (?, ?, ?, ?, ?)",
			rec.Target, rec.Planner, s.now().UnixMicro(), finite(pl.Makespan), pl.Moved)
		if err != nil {
			return fatalError{err}
		}
		planID, err := res.LastInsertId()
		if err != nil {
			return fatalError{err}
		}
		for _, site := range rec.Sites {
			if _, err := s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO plan_sites (plan_id, site, slots) VALUES (?, ?, ?)",
				planID, site.Name, max(site.Slots, 1)); err != nil {
				return fatalError{err}
			}
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
			var start, end, ready, slot any // NULL: no timeline
			e := planEntry{site: site, seq: int64(seq)}
			if t, ok := times[id]; ok {
				start, end, ready, slot = finite(t.Start), finite(t.End), finite(t.Ready), t.Slot
				e.wait = planWait(finite(t.Start) - finite(t.Ready))
			}
			if _, err := s.w.ExecContext(context.Background(), `INSERT OR REPLACE INTO job_plans (job_id, site, seq, planner, plan_id, start_s, end_s, ready_s, slot)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, site, seq, rec.Planner, planID, start, end, ready, slot); err != nil {
				return fatalError{err}
			}
			s.plans.add(id, e)
			if j.State == job.Queued {
				s.plans.readyAt[id] = s.now()
			}
			n++
		}
		for _, q := range []string{
			"DELETE FROM plans WHERE id NOT IN (SELECT plan_id FROM job_plans WHERE plan_id IS NOT NULL)",
			"DELETE FROM plan_sites WHERE plan_id NOT IN (SELECT id FROM plans)",
		} {
			if _, err := s.w.ExecContext(context.Background(), q); err != nil {
				return fatalError{err}
			}
		}
		for _, path := range slices.Sorted(maps.Keys(pl.FileSite)) {
			site := pl.FileSite[path]
			if site == "" {
				continue
			}
			if _, err := s.w.ExecContext(context.Background(), "INSERT OR REPLACE INTO plan_files (path, site) VALUES (?, ?)", path, site); err != nil {
				return fatalError{err}
			}
			s.plans.fileSite[path] = site
		}
		for site := range s.plans.bySite {
			s.plans.sortSite(site)
		}
		return nil
	})
	return n, err
}

// planWait is a predicted wait in seconds as a duration, at least 0 and
// at most a day (a plan predicting more is not one to hold jobs for).
func planWait(v float64) time.Duration {
	return time.Duration(min(max(v, 0), 86400) * float64(time.Second))
}

// finite keeps a predicted time storable: SQLite has no infinity.
func finite(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return v
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
		for _, table := range []string{"plan_files", "plans", "plan_sites"} {
			if _, err := s.w.ExecContext(context.Background(), "DELETE FROM "+table); err != nil {
				return fatalError{err}
			}
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
// With each plan recorded with its timeline, it gives per site the jobs
// in predicted start order (at most limit of them; 0: the default), busy
// time and utilisation; jobs of plans made before timelines were stored
// are counted as Untimed.
func (s *Store) PlanShow(ctx context.Context, limit int) (protocol.PlanShowReply, error) {
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
	if err := closeRows(rows); err != nil {
		return out, err
	}
	// Rows from before migration 17 belong to no plan.
	if err := s.rdb.QueryRowContext(ctx, "SELECT count(*) FROM job_plans WHERE plan_id IS NULL").Scan(&out.Untimed); err != nil {
		return out, fmt.Errorf("plans without timelines: %w", err)
	}
	if limit <= 0 {
		limit = protocol.DefaultPlanShowLimit
	}
	limit = min(limit, protocol.MaxPlanShowLimit)
	if err := s.rdb.QueryRowContext(ctx, "SELECT max(count(*) - ?, 0) FROM plans", protocol.MaxPlansShown).Scan(&out.Older); err != nil {
		return out, fmt.Errorf("plans: %w", err)
	}
	prows, err := s.rdb.QueryContext(ctx, `SELECT * FROM (SELECT id, target, planner, made, makespan_s, moved_bytes
		FROM plans ORDER BY id DESC LIMIT ?) ORDER BY id`, protocol.MaxPlansShown)
	if err != nil {
		return out, fmt.Errorf("plans: %w", err)
	}
	for prows.Next() {
		var p protocol.PlanShown
		var made int64
		if err := prows.Scan(&p.ID, &p.Target, &p.Planner, &made, &p.MakespanS, &p.MovedBytes); err != nil {
			prows.Close()
			return out, err
		}
		p.Made = time.UnixMicro(made).UTC().Format(time.RFC3339)
		out.Plans = append(out.Plans, p)
	}
	if err := closeRows(prows); err != nil {
		return out, err
	}
	budget := protocol.PlanShowBytes
	for _, ps := range out.Sites {
		budget -= planSiteBytes + len(ps.Planner) + len(ps.Site)
	}
	for i := range out.Plans {
		if err := s.planTimeline(ctx, &out.Plans[i], limit, &budget); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Encoded sizes, generously, of a reply's parts with their names apart:
// what PlanShow counts against protocol.PlanShowBytes.
const (
	planSiteBytes = 160
	planSlotBytes = 128
)

// planTimeline fills in a plan's sites: its jobs' predicted timeline
// (plan.BySite over the stored starts and ends), and per site how many
// have ended and where they ran.
func (s *Store) planTimeline(ctx context.Context, p *protocol.PlanShown, limit int, budget *int) error {
	var sites []policy.PlanSite
	rows, err := s.rdb.QueryContext(ctx, "SELECT site, slots FROM plan_sites WHERE plan_id = ? ORDER BY site", p.ID)
	if err != nil {
		return fmt.Errorf("plan %d sites: %w", p.ID, err)
	}
	for rows.Next() {
		var ps policy.PlanSite
		if err := rows.Scan(&ps.Name, &ps.Slots); err != nil {
			rows.Close()
			return err
		}
		sites = append(sites, ps)
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	type about struct{ target, state, ranAt string }
	info := map[int64]about{}
	type counts struct{ ended, here, elsewhere int }
	count := map[string]*counts{}
	var tl []plan.Scheduled
	rows, err = s.rdb.QueryContext(ctx, `SELECT p.job_id, p.site, coalesce(p.slot, 0), coalesce(p.start_s, 0), coalesce(p.end_s, 0),
		t.name, j.state, coalesce(ph.site, '')
		FROM job_plans p JOIN jobs j ON j.id = p.job_id JOIN targets t ON t.id = j.target_id
		LEFT JOIN placeholders ph ON ph.id = j.placeholder_id
		WHERE p.plan_id = ? ORDER BY p.seq`, p.ID)
	if err != nil {
		return fmt.Errorf("plan %d jobs: %w", p.ID, err)
	}
	for rows.Next() {
		var j plan.Scheduled
		var a about
		if err := rows.Scan(&j.ID, &j.Site, &j.Slot, &j.Start, &j.End, &a.target, &a.state, &a.ranAt); err != nil {
			rows.Close()
			return err
		}
		tl = append(tl, j)
		info[j.ID] = a
		c := count[j.Site]
		if c == nil {
			c = &counts{}
			count[j.Site] = c
		}
		if a.state != "" && job.State(a.state[0]).Terminal() {
			c.ended++
		}
		switch {
		case a.ranAt == j.Site:
			c.here++
		case a.ranAt != "":
			c.elsewhere++
		}
	}
	if err := closeRows(rows); err != nil {
		return err
	}
	p.Jobs = len(tl)
	for _, st := range plan.BySite(sites, tl, p.MakespanS, limit) {
		ps := protocol.PlanSiteTimeline{Site: st.Site, Slots: st.Slots, Jobs: st.Jobs, BusyS: st.Busy, Util: st.Util,
			More: st.More, Timeline: []protocol.PlanSlot{}}
		if c := count[st.Site]; c != nil {
			ps.Ended, ps.RanHere, ps.RanElse = c.ended, c.here, c.elsewhere
		}
		*budget -= planSiteBytes + len(st.Site)
		for k, j := range st.First {
			a := info[j.ID]
			if *budget -= planSlotBytes + len(a.target) + len(a.ranAt); *budget < 0 {
				ps.More += len(st.First) - k // the reply is full: counted, not listed
				break
			}
			ps.Timeline = append(ps.Timeline, protocol.PlanSlot{ID: j.ID, Target: a.target, Slot: j.Slot, StartS: j.Start, EndS: j.End, State: a.state, RanAt: a.ranAt})
		}
		p.Sites = append(p.Sites, ps)
	}
	return nil
}

// SiteLink is the link of a site by name: measured from real transfers
// when it has been, else configured, else the default.
func (s *Store) SiteLink(site string) Link { return s.linkOf(site) }
