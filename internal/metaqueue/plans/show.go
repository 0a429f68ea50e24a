package plans

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// JobPlan is job id's plan as mqstat -j shows it, nil if it has none.
func JobPlan(ctx context.Context, db DB, id int64) (*protocol.JobPlan, error) {
	var p protocol.JobPlan
	err := db.QueryRowContext(ctx, queries.Get("JobPlan"), id).Scan(&p.Site, &p.Seq, &p.Planner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job plan: %w", err)
	}
	return &p, nil
}

// Show counts the planned jobs per planner and site, and how many ran (or
// run) at their planned site or elsewhere, by their latest attempt. With
// each plan recorded with its timeline, it gives per site the jobs in
// predicted start order (at most limit of them; 0: the default), busy time
// and utilisation; jobs of plans made before timelines were stored are
// counted as Untimed.
func Show(ctx context.Context, db DB, limit int) (protocol.PlanShowReply, error) {
	rows, err := db.QueryContext(ctx, queries.Get("ShowSites"))
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
	if err := db.QueryRowContext(ctx, queries.Get("ShowUntimed")).Scan(&out.Untimed); err != nil {
		return out, fmt.Errorf("plans without timelines: %w", err)
	}
	if limit <= 0 {
		limit = protocol.DefaultPlanShowLimit
	}
	limit = min(limit, protocol.MaxPlanShowLimit)
	if err := db.QueryRowContext(ctx, queries.Get("ShowOlder"), protocol.MaxPlansShown).Scan(&out.Older); err != nil {
		return out, fmt.Errorf("plans: %w", err)
	}
	prows, err := db.QueryContext(ctx, queries.Get("ShowPlans"), protocol.MaxPlansShown)
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
		budget -= siteBytes + len(ps.Planner) + len(ps.Site)
	}
	for i := range out.Plans {
		if err := timeline(ctx, db, &out.Plans[i], limit, &budget); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Encoded sizes, generously, of a reply's parts with their names apart:
// what Show counts against protocol.PlanShowBytes.
const (
	siteBytes = 160
	slotBytes = 128
)

// timeline fills in a plan's sites: its jobs' predicted timeline
// (plan.BySite over the stored starts and ends), and per site how many
// have ended and where they ran.
func timeline(ctx context.Context, db DB, p *protocol.PlanShown, limit int, budget *int) error {
	sites, err := planSites(ctx, db, p.ID)
	if err != nil {
		return err
	}
	type about struct{ target, state, ranAt string }
	info := map[int64]about{}
	type counts struct{ ended, here, elsewhere int }
	count := map[string]*counts{}
	var tl []plan.Scheduled
	rows, err := db.QueryContext(ctx, queries.Get("PlanJobs"), p.ID)
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
		*budget -= siteBytes + len(st.Site)
		for k, j := range st.First {
			a := info[j.ID]
			if *budget -= slotBytes + len(a.target) + len(a.ranAt); *budget < 0 {
				ps.More += len(st.First) - k // the reply is full: counted, not listed
				break
			}
			ps.Timeline = append(ps.Timeline, protocol.PlanSlot{ID: j.ID, Target: a.target, Slot: j.Slot, StartS: j.Start, EndS: j.End, State: a.state, RanAt: a.ranAt})
		}
		p.Sites = append(p.Sites, ps)
	}
	return nil
}

// planSites is the sites plan id assumed, with their slots.
func planSites(ctx context.Context, db DB, id int64) ([]policy.PlanSite, error) {
	rows, err := db.QueryContext(ctx, queries.Get("PlanSites"), id)
	if err != nil {
		return nil, fmt.Errorf("plan %d sites: %w", id, err)
	}
	var sites []policy.PlanSite
	for rows.Next() {
		var ps policy.PlanSite
		if err := rows.Scan(&ps.Name, &ps.Slots); err != nil {
			rows.Close()
			return nil, err
		}
		sites = append(sites, ps)
	}
	return sites, closeRows(rows)
}
