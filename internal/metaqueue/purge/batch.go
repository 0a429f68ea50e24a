package purge

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// Plan is one batch's decision: which candidates go and how many stay.
type Plan struct {
	Go     []Row // in id order; a dry run's are the jobs that would go
	Kept   int64
	arrays []array // the batch's arrays, by first job
}

type array struct {
	id, first, last int64
	live            int8 // 0 unknown, 1 no live member, 2 some
}

// PlanBatch decides which of rows may go, on the core's writer: not a job
// rerun since the snapshot (st.Live), nor one whose target a waiting, held
// or executing job names, nor a member of an array or bundle that still
// has live members (an array's listing and a bundle's dispatch need their
// ended members).
func PlanBatch(ctx context.Context, ex Execer, st State, sc Scope, rows []Row) (Plan, error) {
	var p Plan
	if len(rows) == 0 {
		return p, nil
	}
	var err error
	if p.arrays, err = arraysIn(ctx, ex, rows[0].ID, rows[len(rows)-1].ID); err != nil {
		return p, err
	}
	for _, r := range rows {
		if st.Live(r.ID) {
			continue
		}
		if t := dag.TargetID(r.Target); sc.Named[t] || st.Waited(t) || p.keep(st, r) {
			p.Kept++
			continue
		}
		p.Go = append(p.Go, r)
	}
	return p, nil
}

// arraysIn reads the arrays ids first..last may belong to.
func arraysIn(ctx context.Context, ex Execer, first, last int64) ([]array, error) {
	res, err := ex.QueryContext(ctx, queries.Get("ArraysIn"), first, last)
	if err != nil {
		return nil, err
	}
	var out []array
	for res.Next() {
		var a array
		if err := res.Scan(&a.id, &a.first, &a.last); err != nil {
			res.Close()
			return nil, err
		}
		out = append(out, a)
	}
	if err := closeRows(res); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b array) int { return cmp.Compare(a.first, b.first) })
	return out, nil
}

// keep says whether r's array or bundle still has live members.
func (p *Plan) keep(st State, r Row) bool {
	if r.Bundle != 0 && st.BundleLive(r.Bundle) {
		return true
	}
	i, _ := slices.BinarySearchFunc(p.arrays, r.ID, func(a array, id int64) int { return cmp.Compare(a.first, id+1) })
	if i == 0 {
		return false
	}
	a := &p.arrays[i-1] // the last array beginning at or before r.ID
	if r.ID > a.last {
		return false
	}
	if a.live == 0 {
		a.live = 1
		if st.LiveIn(a.first, a.last) {
			a.live = 2
		}
	}
	return a.live == 2
}

// Ended is a deleted job's id, queue, target and state: the core takes it
// off its counts by queue, by array and by target.
type Ended struct {
	ID     int64
	Queue  int32
	Target int32
	State  job.State
}

// Deleted is what a batch's Delete removed.
type Deleted struct {
	Gone  []Row
	Ended []Ended
}

// Delete removes p.Go's jobs still ended before sc.Cutoff with every row
// the metaqueue keeps of them, set-form, inside the core's open write
// transaction; adds them to their targets' purged counts, drops arrays
// left empty, and records nextID so that purging the newest jobs frees no
// id (ids are given from memory at max(id)+1 when loading).
func Delete(ctx context.Context, ex Execer, p Plan, sc Scope, nextID int64) (Deleted, error) {
	var d Deleted
	if len(p.Go) == 0 {
		return d, nil
	}
	byID := make(map[int64]Row, len(p.Go))
	for _, r := range p.Go {
		byID[r.ID] = r
	}
	idList, err := json.Marshal(ids(p.Go))
	if err != nil {
		return d, err
	}
	res, err := ex.QueryContext(ctx, queries.Get("DeleteJobs"), string(idList), sc.Cutoff)
	if err != nil {
		return d, err
	}
	type counts struct{ done, bad int64 }
	byTarget := map[int32]*counts{}
	for res.Next() {
		var id int64
		var st string
		var q int32
		if err := res.Scan(&id, &st, &q); err != nil {
			res.Close()
			return d, err
		}
		r := byID[id]
		c := byTarget[r.Target]
		if c == nil {
			c = &counts{}
			byTarget[r.Target] = c
		}
		if job.State(st[0]) == job.Done {
			c.done++
		} else {
			c.bad++
		}
		d.Ended = append(d.Ended, Ended{ID: id, Queue: q, Target: r.Target, State: job.State(st[0])})
		d.Gone = append(d.Gone, r)
	}
	if err := closeRows(res); err != nil {
		return d, err
	}
	if len(d.Gone) < len(p.Go) { // some went back to live since: list only those gone
		if idList, err = json.Marshal(ids(d.Gone)); err != nil {
			return d, err
		}
	}
	for _, q := range otherRows {
		if _, err := ex.ExecContext(ctx, queries.Get(q), string(idList)); err != nil {
			return d, err
		}
	}
	for t, c := range byTarget {
		if _, err := ex.ExecContext(ctx, queries.Get("AddPurged"), t, c.done, c.bad); err != nil {
			return d, err
		}
	}
	for _, a := range p.arrays {
		if _, err := ex.ExecContext(ctx, queries.Get("DropEmptyArray"), a.id); err != nil {
			return d, err
		}
	}
	_, err = ex.ExecContext(ctx, queries.Get("SetNextID"), nextID)
	return d, err
}

// otherRows name the statements that remove the purged jobs' other rows,
// each given the batch's ids as a JSON array.
var otherRows = [...]string{"DeleteAttempts", "DeletePrereqs", "DeleteEnv", "DeleteResources",
	"DeletePriority", "DeleteOutputLost", "DeleteFiles", "DeletePlan", "DeleteNoReplicate",
	"DeleteCopies", "DeleteApart", "DeleteExtents"}

func ids(rows []Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// RemoveOutput removes (or, dry, measures) the output files the CLS keeps
// of the jobs gone, every attempt's stdout and stderr under its output
// area dir: local placeholders' own and its copies of remote ones. A
// user's -o/-e files are elsewhere and never touched. It returns the
// bytes. The core calls it after the batch's commit: a crash before
// leaves files no job names; they are harmless.
func RemoveOutput(dir string, gone []Row, dry bool) int64 {
	if dir == "" {
		return 0
	}
	var bytes int64
	dirs := map[string]bool{}
	for _, r := range gone {
		for a := 1; a <= r.Attempts; a++ {
			out, errPath := job.OutputPaths(dir, r.ID, a)
			for _, p := range [...]string{out, errPath} {
				fi, err := os.Lstat(p)
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
				if dry {
					bytes += fi.Size()
					continue
				}
				if os.Remove(p) == nil {
					bytes += fi.Size()
					dirs[filepath.Dir(p)] = true
				}
			}
		}
	}
	for d := range dirs {
		os.Remove(d) // only if empty: other jobs of the shard may remain
	}
	return bytes
}
