package policy

import (
	"context"
	"math"
	"time"

	"github.com/mq-hpc/mq/lpsched"
)

// LP is seed 001's LPSched (package lpsched) as a Provisioner: the queues
// a site manager plans are the stages of a pipeline (BLAST, then Parse),
// in the order it lists them, and the LP chooses how many job slots each
// stage holds at each site from the jobs' measured seconds per job there,
// the sites' slots, and the seed's minimum utilisation. A stage with r
// times as many jobs left as the first does r jobs per item. Each site
// holds the placeholders its stages' slots need, and the site manager caps
// each site's share of a queue's jobs at the slots the plan gives that
// queue's stage there: the placeholders are bound to the stages, as
// Trellis's were to queues, by what dispatch lets them take. Registered as
// lp. A stage's jobs still waiting on the one before count toward it (they
// are the items to come); a stage's Out is what one item sends the next,
// priced on the sites' Links, so a slow link keeps a stage at the site of
// the stage that feeds it (docs/seed001.md).
type LP struct {
	MinUtil float64 // W_MIN
	// MaxNodes bounds the branch and bound over whole slot counts; 0: 200.
	MaxNodes int
	// TimeLimit bounds one plan; 0: 2 s. The best plan found by then is
	// followed.
	TimeLimit time.Duration
}

// StageProvisioner plans several queues together, as the stages of one
// pipeline: placeholders per site, and each queue's slots per site (the
// site manager's caps on where the queue's jobs may run).
type StageProvisioner interface {
	ProvisionStages(now time.Time, stages []Demand) (want map[string]int, slots []map[string]int)
}

var (
	_ Provisioner      = LP{}
	_ StageProvisioner = LP{}
)

// Provision plans one queue: a pipeline of one stage.
func (p LP) Provision(now time.Time, d Demand) map[string]int {
	want, _ := p.ProvisionStages(now, []Demand{d})
	return want
}

// ProvisionStages plans the queues as stages of one pipeline (each Demand
// one queue, every Demand with the same Sites in the same order). A site
// where a stage's seconds per job are not measured is planned at the
// stage's Est; a stage with neither holds a slot at each site to measure
// one (as DBC does). A stage with no jobs left holds only its busy slots.
// Each site's want is within its min and max.
func (p LP) ProvisionStages(now time.Time, stages []Demand) (map[string]int, []map[string]int) {
	want, slots, _ := p.PlanStages(now, stages)
	return want, slots
}

// PlanStages is ProvisionStages with the pipeline's predicted rate, in
// jobs of its first planned stage per second (0: nothing planned), for
// those who show the plan.
func (p LP) PlanStages(now time.Time, stages []Demand) (map[string]int, []map[string]int, float64) {
	want := map[string]int{}
	slots := make([]map[string]int, len(stages))
	rate := 0.0
	if len(stages) == 0 {
		return want, slots, rate
	}
	sites := stages[0].Sites
	for k := range slots {
		slots[k] = map[string]int{}
	}
	var prob lpsched.Problem
	prob.MinUtil = p.MinUtil
	for _, s := range sites {
		link := 0.0
		if s.Link > 0 && !math.IsInf(s.Link, 0) {
			link = s.Link
		}
		prob.Sites = append(prob.Sites, lpsched.Site{Name: s.Name, Speed: 1, Max: max(s.Max, 0) * max(s.Slots, 1), Link: link})
	}
	var planned []int // prob.Stages[i] is stages[planned[i]]
	first := 0.0
	for k, d := range stages {
		left := max(d.Ready, 0) + max(d.Waiting, 0) + max(d.Running, 0)
		if d.Ready+max(d.Waiting, 0) <= 0 || len(d.Sites) != len(sites) {
			for _, s := range d.Sites {
				slots[k][s.Name] = max(s.Busy, 0)
			}
			continue
		}
		st := lpsched.Stage{Name: "stage", Times: make([]float64, len(sites)), MaxCopies: left}
		known := false
		for i, s := range d.Sites {
			secs := 0.0
			switch {
			case s.Rate > 0:
				secs = float64(max(s.Slots, 1)) / s.Rate
			case d.Est > 0:
				secs = d.Est
			}
			if secs > 0 && !math.IsInf(secs, 0) && !math.IsNaN(secs) {
				st.Times[i] = secs
				known = true
			}
		}
		if !known {
			// Nothing to plan from: a slot at each site measures it.
			for _, s := range d.Sites {
				slots[k][s.Name] = max(1, s.Busy)
			}
			continue
		}
		if first == 0 {
			first = float64(left)
		}
		per := float64(left) / first // jobs per item
		for i := range st.Times {
			st.Times[i] *= per
		}
		if d.Out > 0 && !math.IsInf(d.Out, 0) {
			st.Out = d.Out * per
		}
		prob.Stages = append(prob.Stages, st)
		planned = append(planned, k)
	}
	if len(prob.Stages) > 0 {
		limit := p.TimeLimit
		if limit <= 0 {
			limit = 2 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		prob.MaxNodes = p.MaxNodes
		if prob.MaxNodes == 0 {
			prob.MaxNodes = 200
		}
		if pl, err := prob.Plan(ctx); err == nil {
			rate = pl.Rate // an item is one job of the first stage planned
			for i, k := range planned {
				for s, site := range sites {
					slots[k][site.Name] = max(pl.Count[i][s], stages[k].Sites[s].Busy)
				}
			}
		} else {
			// No plan (no capacity, or no time to find one): each
			// stage keeps what it runs.
			for _, k := range planned {
				for _, s := range stages[k].Sites {
					slots[k][s.Name] = max(s.Busy, 0)
				}
			}
		}
	}
	for _, s := range sites {
		n := 0
		for k := range stages {
			n += slots[k][s.Name]
		}
		per := max(s.Slots, 1)
		want[s.Name] = clamp((n+per-1)/per, s.Min, s.Max)
	}
	return want, slots, rate
}
