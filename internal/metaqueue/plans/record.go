package plans

import (
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Load reads the plans of live jobs at start (or after a failed commit):
// a planned job that is Queued in g counts as ready since the latest of
// its stored ready time (jobs.ready, or its submission), its last
// attempt's end (a requeue) and its plan's making, as Ready and Record
// count it in memory; never since after now.
func (p *Plans) Load(ctx context.Context, db DB, g *dag.Graph, now time.Time) error {
	p.Reset()
	rows, err := db.QueryContext(ctx, queries.Get("LoadLive"))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var e entry
		var wait float64
		var ready int64
		if err := rows.Scan(&id, &e.site, &e.seq, &wait, &ready); err != nil {
			return err
		}
		e.wait = waitOf(wait)
		p.add(id, e)
		if g.State(id) == job.Queued {
			p.readyAt[id] = time.UnixMicro(min(ready, now.UnixMicro()))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	p.sortAll()
	frows, err := db.QueryContext(ctx, queries.Get("LoadFiles"))
	if err != nil {
		return err
	}
	defer frows.Close()
	for frows.Next() {
		var path, site string
		if err := frows.Scan(&path, &site); err != nil {
			return err
		}
		p.fileSite[path] = site
	}
	return frows.Err()
}

// Record is what is kept of a plan beside each job's site and place in
// the order (cls plan show): its target, planner, the sites' slots it
// assumed and its predicted timeline (plan.Timeline; jobs it lacks have
// none).
type Record struct {
	Target   string
	Planner  string
	Sites    []policy.PlanSite
	Timeline []plan.Scheduled
}

// Check says why rec and pl cannot be recorded (a *protocol.Error), before
// anything is written.
func Check(rec Record, pl policy.Plan) error {
	if rec.Planner == "" {
		return protocol.Errorf(protocol.CodeBadRequest, "a plan needs its planner's name")
	}
	for _, id := range pl.Order {
		if pl.Site[id] == "" {
			return protocol.Errorf(protocol.CodeBadRequest, "the plan orders job %d but places it nowhere", id)
		}
	}
	return nil
}

// Record writes a plan checked by Check, in db's open transaction: each
// job's planned site, place in the order and predicted slot, start and
// end, and the plan itself. Jobs that ended meanwhile (in g) keep no plan;
// a job planned before is planned again, and a plan left without jobs is
// dropped. It returns how many jobs the plan now holds; an error is the
// storage's.
func (p *Plans) Record(ctx context.Context, db DB, g *dag.Graph, rec Record, pl policy.Plan, now time.Time) (int, error) {
	times := make(map[int64]plan.Scheduled, len(rec.Timeline))
	for _, j := range rec.Timeline {
		times[j.ID] = j
	}
	res, err := db.ExecContext(ctx, queries.Get("InsertPlan"), rec.Target, rec.Planner, now.UnixMicro(), finite(pl.Makespan), pl.Moved)
	if err != nil {
		return 0, err
	}
	planID, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	for _, site := range rec.Sites {
		if _, err := db.ExecContext(ctx, queries.Get("InsertSite"), planID, site.Name, max(site.Slots, 1)); err != nil {
			return 0, err
		}
	}
	n := 0
	for seq, id := range pl.Order {
		site := pl.Site[id]
		j, ok := g.Node(id)
		if !ok || j.State.Terminal() {
			continue
		}
		var start, end, ready, slot any // NULL: no timeline
		e := entry{site: site, seq: int64(seq)}
		if t, ok := times[id]; ok {
			start, end, ready, slot = finite(t.Start), finite(t.End), finite(t.Ready), t.Slot
			e.wait = waitOf(finite(t.Start) - finite(t.Ready))
		}
		if _, err := db.ExecContext(ctx, queries.Get("InsertJob"), id, site, seq, rec.Planner, planID, start, end, ready, slot); err != nil {
			return 0, err
		}
		p.add(id, e)
		delete(p.readyAt, id) // a held one's patience counts from its release
		if j.State == job.Queued {
			p.readyAt[id] = now
		}
		n++
	}
	for _, q := range []string{"DropEmptyPlans", "DropOrphanSites"} {
		if _, err := db.ExecContext(ctx, queries.Get(q)); err != nil {
			return 0, err
		}
	}
	for _, path := range slices.Sorted(maps.Keys(pl.FileSite)) {
		site := pl.FileSite[path]
		if site == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, queries.Get("InsertFile"), path, site); err != nil {
			return 0, err
		}
		p.fileSite[path] = site
	}
	p.sortAll()
	return n, nil
}

// Clear forgets every plan, in db's open transaction: jobs bind late
// again. It returns how many jobs had one.
func (p *Plans) Clear(ctx context.Context, db DB) (int, error) {
	res, err := db.ExecContext(ctx, queries.Get("ClearJobs"))
	if err != nil {
		return 0, err
	}
	for _, q := range []string{"ClearFiles", "ClearPlans", "ClearSites"} {
		if _, err := db.ExecContext(ctx, queries.Get(q)); err != nil {
			return 0, err
		}
	}
	k, _ := res.RowsAffected()
	p.Reset()
	return int(k), nil
}

// finite keeps a predicted time storable: SQLite has no infinity.
func finite(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return v
}
