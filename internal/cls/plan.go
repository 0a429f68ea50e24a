package cls

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue"
	mqplans "github.com/mq-hpc/mq/internal/metaqueue/plans" // beside this file's plans, the ops
	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/protocol"
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
	server.Route(srv, protocol.OpPlanShow, func(ctx context.Context, req protocol.PlanShow) (protocol.PlanShowReply, error) {
		if req.Limit < 0 || req.Limit > protocol.MaxPlanShowLimit {
			return protocol.PlanShowReply{}, protocol.Errorf(protocol.CodeBadRequest, "limit %d: want 0 (the default, %d) to %d", req.Limit, protocol.DefaultPlanShowLimit, protocol.MaxPlanShowLimit)
		}
		reply, err := mqplans.Show(ctx, c.store.ReadDB(), req.Limit)
		if err != nil || c.sites == nil || c.sites.mgr == nil {
			return reply, err
		}
		for _, p := range c.sites.mgr.ProvisionShown() {
			if n := len(p.Queues); n > protocol.MaxProvisionQueuesShown {
				p.Queues, p.More = p.Queues[:protocol.MaxProvisionQueuesShown], n-protocol.MaxProvisionQueuesShown
			}
			reply.Provision = append(reply.Provision, p)
		}
		return reply, nil
	})
	server.Route(srv, protocol.OpPlanClear, func(ctx context.Context, _ protocol.Empty) (protocol.PlanClearReply, error) {
		n, err := c.store.Plans().Clear(ctx)
		return protocol.PlanClearReply{Cleared: n}, err
	})
}

var sourceNames = map[plan.Source]string{plan.FromSite: "site", plan.FromClass: "class", plan.FromDeclared: "declared", plan.FromDefault: "default"}

// runtimeSamples bounds how many ended jobs runtimes are learned from.
const runtimeSamples = 100_000

// make plans req.Target's DAG: the sites are the CLS's (each with
// its most placeholders times their slots), links the measured or
// configured ones, runtimes per site learned from the accounting of jobs
// of the same command class, else the jobs' declared estimates (req.EstS
// for those without) over the sites' speeds (plan.Estimator).
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
	if len(req.SiteSpeed) > protocol.MaxSiteSpeeds {
		return sum, protocol.Errorf(protocol.CodeBadRequest, "more than %d site speeds", protocol.MaxSiteSpeeds)
	}
	for site, v := range req.SiteSpeed {
		if !(v > 0) || v > 1e6 {
			return sum, protocol.Errorf(protocol.CodeBadRequest, "site %s: speed %g; want above 0, at most 1e6", protocol.Quote(protocol.ClipText(site, 64)), v)
		}
	}
	est := &plan.Estimator{Speed: req.SiteSpeed, Default: req.EstS}
	if est.Default <= 0 {
		est.Default = 60
	}
	if !req.NoLearn {
		est.Learned = &plan.Runtimes{}
		if err := mqplans.RuntimeSamples(ctx, c.store.ReadDB(), runtimeSamples, func(command, site string, elapsed float64) {
			est.Learned.Add(plan.CommandClass(command), site, elapsed)
		}); err != nil {
			return sum, err
		}
	}
	var sites []policy.PlanSite
	var names []string
	for _, si := range c.sites.mgr.List() {
		slots := max(si.Max, 1) * max(si.Slots, 1)
		sites = append(sites, policy.PlanSite{Name: si.Name, Slots: slots})
		names = append(names, si.Name)
	}
	if len(sites) == 0 {
		return sum, protocol.Errorf(protocol.CodeBadState, "no sites to plan over: add one (cls site add) or serve with --local N")
	}
	srcOf := map[int64][]plan.Source{} // per job, per site (in names' order)
	jobs, err := mqplans.Problem(ctx, c.store.ReadDB(), req.Target, func(id int64, command string, declared float64) map[string]float64 {
		class := plan.CommandClass(command)
		out := make(map[string]float64, len(names))
		srcs := make([]plan.Source, len(names))
		for i, site := range names {
			out[site], srcs[i] = est.Est(class, declared, site)
		}
		srcOf[id] = srcs
		return out
	})
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
	tl, err := plan.Timeline(p, pl)
	if err != nil {
		return sum, fmt.Errorf("the timeline of %s's plan: %w", info.Name, err)
	}
	n, err := c.store.Plans().Record(ctx, mqplans.Record{Target: req.Target, Planner: info.Name, Sites: sites, Timeline: tl}, pl)
	if err != nil {
		return sum, err
	}
	sum = protocol.PlanSummary{Target: req.Target, Planner: info.Name, Jobs: n, MakespanS: pl.Makespan,
		MovedBytes: pl.Moved, PlanningS: time.Since(start).Seconds()}
	count := map[string]int{}
	at := make(map[string]int, len(names))
	for i, s := range names {
		at[s] = i
	}
	sum.Estimates = map[string]int{}
	for id, s := range pl.Site {
		count[s]++
		if srcs := srcOf[id]; srcs != nil {
			sum.Estimates[sourceNames[srcs[at[s]]]]++
		}
	}
	for _, s := range names {
		sum.Sites = append(sum.Sites, protocol.PlanSite{Site: s, Jobs: count[s], Speed: est.SiteSpeed(s)})
	}
	c.log.Info("plan made", "target", req.Target, "planner", info.Name, "jobs", n, "makespan_s", pl.Makespan, "moved_bytes", pl.Moved)
	return sum, nil
}
