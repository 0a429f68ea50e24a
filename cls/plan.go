package cls

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/mq-hpc/mq/metaqueue"
	"github.com/mq-hpc/mq/plan"
	"github.com/mq-hpc/mq/policy"
	"github.com/mq-hpc/mq/protocol"
	"github.com/mq-hpc/mq/server"
)

// maxPlanTime bounds how long a plan.make may search.
const maxPlanTime = 10 * time.Minute

// plans serves the plan.* ops: planning a target's DAG over the sites the
// CLS has now, and the store following it.
type plans struct {
	store *metaqueue.Store
	sites *sites
	log   *slog.Logger
}

func (c *plans) install(srv *server.Server) {
	server.Route(srv, protocol.OpPlanMake, c.make)
	server.Route(srv, protocol.OpPlanShow, func(ctx context.Context, _ protocol.Empty) (protocol.PlanShowReply, error) {
		return c.store.PlanShow(ctx)
	})
	server.Route(srv, protocol.OpPlanClear, func(ctx context.Context, _ protocol.Empty) (protocol.PlanClearReply, error) {
		n, err := c.store.ClearPlans(ctx)
		return protocol.PlanClearReply{Cleared: n}, err
	})
}

// make plans req.Target's DAG: the sites are the CLS's (each with
// its most placeholders times their slots), links the measured or
// configured ones, runtimes the jobs' declared estimates (req.EstS for
// those without).
func (c *plans) make(ctx context.Context, req protocol.PlanMake) (protocol.PlanSummary, error) {
	var sum protocol.PlanSummary
	info, err := plan.Lookup(req.Planner)
	if err != nil {
		return sum, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
	}
	if req.Target == "" {
		return sum, protocol.Errorf(protocol.CodeBadRequest, "plan.make needs a target")
	}
	for name, v := range map[string]float64{"time_limit_s": req.TimeLimitS, "est_s": req.EstS} {
		if err := protocol.CheckSeconds(name, v); err != nil {
			return sum, protocol.Errorf(protocol.CodeBadRequest, "%v", err)
		}
	}
	limit := time.Duration(req.TimeLimitS * float64(time.Second))
	if limit <= 0 || limit > maxPlanTime {
		limit = min(max(limit, 0), maxPlanTime)
		if limit == 0 {
			limit = 30 * time.Second
		}
	}
	est := req.EstS
	if est <= 0 {
		est = 60
	}
	var sites []policy.PlanSite
	var names []string
	for _, si := range c.sites.mgr.List() {
		if si.State == "removing" {
			continue
		}
		slots := max(si.Max, 1) * max(si.Slots, 1)
		sites = append(sites, policy.PlanSite{Name: si.Name, Slots: slots})
		names = append(names, si.Name)
	}
	if len(sites) == 0 {
		return sum, protocol.Errorf(protocol.CodeBadState, "no sites to plan over: add one (cls site add) or serve with --local N")
	}
	jobs, err := c.store.PlanJobs(ctx, req.Target, names, est)
	if err != nil {
		return sum, err
	}
	p := policy.Problem{
		Jobs: jobs, Sites: sites, Seed: 1,
		// A copy between two sites goes as slowly as the slower link.
		Bandwidth: func(a, b string) float64 {
			return math.Min(c.store.SiteLink(a).Bandwidth, c.store.SiteLink(b).Bandwidth)
		},
		Latency: func(a, b string) float64 {
			return math.Max(c.store.SiteLink(a).Latency, c.store.SiteLink(b).Latency)
		},
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, limit+time.Minute)
	defer cancel()
	pl, err := info.New(limit).Plan(pctx, p)
	if err != nil {
		return sum, fmt.Errorf("planning %s with %s: %w", req.Target, info.Name, err)
	}
	n, err := c.store.SetPlan(ctx, info.Name, pl)
	if err != nil {
		return sum, err
	}
	sum = protocol.PlanSummary{Target: req.Target, Planner: info.Name, Jobs: n, MakespanS: pl.Makespan,
		MovedBytes: pl.Moved, PlanningS: time.Since(start).Seconds()}
	count := map[string]int{}
	for _, s := range pl.Site {
		count[s]++
	}
	for _, s := range names {
		sum.Sites = append(sum.Sites, protocol.PlanSite{Site: s, Jobs: count[s]})
	}
	c.log.Info("plan made", "target", req.Target, "planner", info.Name, "jobs", n, "makespan_s", pl.Makespan, "moved_bytes", pl.Moved)
	return sum, nil
}
