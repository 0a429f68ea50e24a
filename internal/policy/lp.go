package policy

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/mq-hpc/mq/internal/lpplace"
)

// LP is seed 001's LPSched (package lpplace) as a Provisioner: the queues
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
// the stage that feeds it (docs/policies/lp.md).
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
	want, slots, _, _ := p.PlanStages(now, stages)
	return want, slots
}

// PlanStages is ProvisionStages with the pipeline's predicted rate, in
// jobs of its first planned stage per second (0: nothing planned), for
// those who show the plan, and why no LP plan was found, if none was: the
// planned stages are then uncapped (nil slots) and the sites hold what
// their work needs, first sites first.
func (p LP) PlanStages(now time.Time, stages []Demand) (map[string]int, []map[string]int, float64, error) {
	want := map[string]int{}
	slots := make([]map[string]int, len(stages))
	rate := 0.0
	if len(stages) == 0 {
		return want, slots, rate, nil
	}
	sites := stages[0].Sites
	for k := range slots {
		slots[k] = map[string]int{}
	}
	prob, planned := stagesProblem(stages, slots)
	prob.MinUtil = p.MinUtil
	var failed error
	if len(prob.Stages) > 0 {
		pl, err := p.solve(&prob, len(sites))
		if err == nil {
			rate = pl.Rate // an item is one job of the first stage planned
			for i, k := range planned {
				for s, site := range sites {
					slots[k][site.Name] = max(pl.Count[i][s], stages[k].Sites[s].Busy)
				}
			}
		} else {
			failed = fmt.Errorf("lp: %w", err)
			uncapped(stages, planned, slots, want)
		}
	}
	for _, s := range sites {
		n := 0
		for k := range stages {
			n += slots[k][s.Name]
		}
		per := max(s.Slots, 1)
		want[s.Name] = clamp(max((n+per-1)/per, want[s.Name]), s.Min, s.Max)
	}
	return want, slots, rate, failed
}

// stagesProblem is the pipeline problem of the stages that have work and
// known times, with the sites of the first stage, and the index in
// stages of each of its stages. Stages left out get their slots here:
// what they hold, or one at each site to measure them.
func stagesProblem(stages []Demand, slots []map[string]int) (lpplace.Problem, []int) {
	var prob lpplace.Problem
	sites := stages[0].Sites
	for _, s := range sites {
		link := 0.0
		if s.Link > 0 && !math.IsInf(s.Link, 0) {
			link = s.Link
		}
		prob.Sites = append(prob.Sites, lpplace.Site{Name: s.Name, Speed: 1, Max: max(s.Max, 0) * max(s.Slots, 1), Link: link})
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
		times, known := stageTimes(d)
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
		st := lpplace.Stage{Name: "stage", Times: times, MaxCopies: left}
		per := float64(left) / first // jobs per item
		for i := range st.Times {
			st.Times[i] *= per
		}
		if d.FeedsNext && d.Out > 0 && !math.IsInf(d.Out, 0) {
			st.Out = d.Out * per
		}
		prob.Stages = append(prob.Stages, st)
		planned = append(planned, k)
	}
	// A stage's output crosses links only to the stage it feeds: none when
	// the next one planned is another (unrelated, or one between them had
	// nothing to plan).
	for i, k := range planned {
		if i+1 == len(planned) || planned[i+1] != k+1 {
			prob.Stages[i].Out = 0
		}
	}
	return prob, planned
}

// stageTimes is the seconds a job of stage d takes at each of its sites,
// measured or estimated (0: unknown), and whether any is known.
func stageTimes(d Demand) (times []float64, known bool) {
	times = make([]float64, len(d.Sites))
	for i, s := range d.Sites {
		secs := 0.0
		switch {
		case s.Rate > 0:
			secs = float64(max(s.Slots, 1)) / s.Rate
		case d.Est > 0:
			secs = d.Est
		}
		if secs > 0 && !math.IsInf(secs, 0) && !math.IsNaN(secs) {
			times[i] = secs
			known = true
		}
	}
	return times, known
}

// solve plans prob, over nsites sites, within the time limit: with whole
// counts where the LPs are small enough, else (or if that fails) relaxed.
func (p LP) solve(prob *lpplace.Problem, nsites int) (lpplace.Plan, error) {
	limit := p.TimeLimit
	if limit <= 0 {
		limit = 2 * time.Second
	}
	prob.MaxNodes = p.MaxNodes
	if prob.MaxNodes == 0 {
		prob.MaxNodes = 200
	}
	// Whole counts by branch and bound only where the LPs are small:
	// gonum's dense simplex cannot be interrupted, and one LP of
	// many sites and stages outlasts any limit.
	prob.Relaxed = nsites*len(prob.Stages) > MaxLPWholeCells
	pl, err := planWithin(prob, limit)
	if err != nil && !prob.Relaxed {
		prob.Relaxed = true // no whole plan in time: the relaxation's, rounded up
		pl, err = planWithin(prob, limit)
	}
	return pl, err
}

// uncapped is what to want when there is no plan at all: the planned
// stages run uncapped (their slots nil), and the sites hold what their
// work needs, the first sites first (the seed's Total), rather than
// nothing.
func uncapped(stages []Demand, planned []int, slots []map[string]int, want map[string]int) {
	left := 0
	for _, k := range planned {
		slots[k] = nil
		d := stages[k]
		left += max(d.Ready, 0) + max(d.Waiting, 0) + max(d.Running, 0)
	}
	for _, s := range stages[0].Sites {
		per := max(s.Slots, 1)
		take := min(left, max(s.Max, 0)*per)
		left -= take
		want[s.Name] = (take + per - 1) / per
	}
}

// MaxLPWholeCells bounds sites x stages planned with whole counts; larger
// problems are planned relaxed (counts rounded up).
const MaxLPWholeCells = 64

// planWithin plans prob within limit.
func planWithin(prob *lpplace.Problem, limit time.Duration) (lpplace.Plan, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	return prob.Plan(ctx)
}
