package plans

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Estimate gives a planned job's runtime at each site, from its command
// and its declared estimate (0: none).
type Estimate func(id int64, command string, declared float64) map[string]float64

// MaxJobs bounds a planning problem.
const MaxJobs = 100_000

// Problem is the planning problem's jobs for target: its jobs and those
// of every target it needs, directly or not, that have not ended; each
// with the runtimes est gives it, its declared files (an input no job of
// the problem writes is placed at the sites holding a replica), and
// prerequisites as jobs. Read from the database (the read pool), not the
// writer's memory: a plan is made rarely and may take long.
func Problem(ctx context.Context, db DB, target string, est Estimate) ([]policy.PlanJob, error) {
	var root int64
	err := db.QueryRowContext(ctx, queries.Get("TargetID"), target).Scan(&root)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, protocol.Errorf(protocol.CodeNotFound, "target %q has no jobs", target)
	}
	if err != nil {
		return nil, err
	}
	jobs, err := problemGraph(ctx, db, target, root, est)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, protocol.Errorf(protocol.CodeBadRequest, "target %q and what it needs have no jobs left to run", target)
	}
	if err := problemFiles(ctx, db, jobs); err != nil {
		return nil, err
	}
	return jobs, nil
}

// problemGraph reads the jobs not ended of target (root) and of every
// target it needs, directly or not, breadth first, with their
// prerequisites as jobs.
func problemGraph(ctx context.Context, db DB, target string, root int64, est Estimate) ([]policy.PlanJob, error) {
	var jobs []policy.PlanJob
	byTarget := map[int64][]int64{}
	seen := map[int64]bool{root: true}
	queue := []int64{root}
	jobPre := map[int64][]int64{} // job -> prerequisite targets
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		rows, err := db.QueryContext(ctx, queries.Get("TargetJobs"), t)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var st, command, res string
			var e float64
			if err := rows.Scan(&id, &st, &e, &command, &res); err != nil {
				rows.Close()
				return nil, err
			}
			if st == "" || job.State(st[0]).Terminal() {
				continue
			}
			jobs = append(jobs, policy.PlanJob{ID: id, Est: est(id, command, max(e, 0)), Slots: cores(res)})
			byTarget[t] = append(byTarget[t], id)
		}
		if err := closeRows(rows); err != nil {
			return nil, err
		}
		// After-any rows (kind 1) come too: a planned job starts after
		// them as after an after-ok prerequisite.
		prow, err := db.QueryContext(ctx, queries.Get("TargetPrereqs"), t)
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
		if len(jobs) > MaxJobs {
			return nil, protocol.Errorf(protocol.CodeBadRequest, "target %q needs more than %d jobs: too many to plan", target, MaxJobs)
		}
	}
	for i := range jobs {
		for _, pt := range jobPre[jobs[i].ID] {
			jobs[i].Prereqs = append(jobs[i].Prereqs, byTarget[pt]...)
		}
	}
	return jobs, nil
}

// cores is the cores a stored request (protocol.Resources in JSON, ""
// for a job that asks for nothing) asks for: the slots the job holds in
// the planners' model. A learned size (cpus auto) is not known until the
// job is dispatched, so it plans as one, as does a request that does not
// read.
func cores(stored string) int {
	if stored == "" {
		return 1
	}
	var r protocol.Resources
	if err := json.Unmarshal([]byte(stored), &r); err != nil || r.CPUs < 1 {
		return 1
	}
	return r.CPUs
}

// problemFiles gives jobs their declared files; an input no job of the
// problem writes is placed at the sites holding a replica.
func problemFiles(ctx context.Context, db DB, jobs []policy.PlanJob) error {
	idx := make(map[int64]int, len(jobs))
	for i, j := range jobs {
		idx[j.ID] = i
	}
	written := map[string]bool{}
	frows, err := db.QueryContext(ctx, queries.Get("JobFiles"))
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
			at, err := replicaSites(ctx, db, d.f.Path)
			if err != nil {
				return err
			}
			d.f.At = at
		}
		jobs[d.job].Inputs = append(jobs[d.job].Inputs, d.f)
	}
	return nil
}

// replicaSites is where the catalog has path.
func replicaSites(ctx context.Context, db DB, path string) ([]string, error) {
	rows, err := db.QueryContext(ctx, queries.Get("ReplicaSites"), path, path)
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

// RuntimeSamples calls add for each of the last limit jobs that ended
// well (Done, from their current attempt) with its command, the site its
// placeholder ran at and its elapsed seconds: the accounting per-site
// runtime estimates are learned from.
func RuntimeSamples(ctx context.Context, db DB, limit int, add func(command, site string, elapsed float64)) error {
	rows, err := db.QueryContext(ctx, queries.Get("RuntimeSamples"), limit)
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
