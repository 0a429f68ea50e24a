// Package lpplace is the LP placement planner: it places a pipeline's
// placeholders, deciding by linear programming how many each stage should
// hold at each site, from the stages' measured work and data volumes, the
// sites' speeds and sizes, and their network bandwidth. It is seed 001's
// LPSched (do Nascimento et al., "Scheduling data flow applications using
// linear programming") as a pure planner, with the seed's knobs (a cost
// per placeholder W_X, a cost per cross-site byte W_C, a minimum
// utilisation W_MIN, extra capacity W_F).
//
// The seed's hosts are mq's placeholders and its clusters mq's sites: a
// site holds up to Max placeholders of equal speed, one stage per
// placeholder (the seed's one filter per host). The seed's per host-pair
// flow variables become per-site ones (how much of each stage's output is
// consumed at the site that made it), which is exact when a site's
// cross-site traffic is limited by one shared link, the seed's shared WAN
// model, and keeps the problem small.
//
// The linear programs are solved by gonum's simplex; placeholder counts
// are integers, found by a depth-first branch and bound over those
// relaxations (the seed hands its mixed-integer problem to CPLEX).
package lpplace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Stage is one stage of the pipeline: jobs of one kind, each item of the
// stream passing through every stage in order.
type Stage struct {
	Name string
	// Work is the seconds one item takes on a placeholder of speed 1
	// (the seed's T[f]*P[f] per unit of its trial run).
	Work float64
	// Out is the bytes per item sent to the next stage (V[f]).
	Out float64
	// Sites, if set, are the only sites the stage may run at (a reader
	// pinned to where its data is).
	Sites []string
	// MaxCopies, if > 0, bounds the stage's placeholders (a reader of
	// data held on one host: 1).
	MaxCopies int
	// Times, if set, are the seconds one item takes at each site (in
	// Problem.Sites order; 0 or +Inf: it cannot run there), measured
	// rather than Work/Speed.
	Times []float64
}

// Site is a group of placeholders of one speed behind one shared link.
type Site struct {
	Name  string
	Speed float64 // work per second of one placeholder (P[h])
	Max   int     // placeholders the site may hold
	// NIC is the bytes per second one placeholder receives its input at
	// (BW[c], the switch port); 0: unbounded. A placeholder stages its
	// input in before it computes, so an item takes In/NIC + Work/Speed.
	NIC float64
	// Link is the bytes per second of the site's shared link to the
	// other sites, in and out together; 0: unbounded.
	Link float64
}

// Problem is what Plan plans over.
type Problem struct {
	Stages []Stage
	Sites  []Site
	// NodeCost is W_X: the share of the best rate one placeholder must
	// add to be worth holding. 0: DefaultNodeCost.
	NodeCost float64
	// CrossCost is W_C: the share of the best rate one MB/s over a site
	// link must add to be worth sending. 0: DefaultCrossCost; negative:
	// none.
	CrossCost float64
	// MinUtil is W_MIN in [0, 1): every placeholder a stage holds at a
	// site is busy at least this share of the time, or carries at least
	// this share of the most the pipeline could carry, the less.
	MinUtil float64
	// Extra is W_F >= 0: each stage after the first holds this share of
	// capacity beyond the rate (the seed's equation 11 is per edge).
	Extra float64
	// Relaxed plans without whole placeholders: one linear program, its
	// counts rounded up in the plan. For placeholders that take turns at
	// the stages (mq's pull any job of the queue) rather than each
	// holding one, as the seed's filters do.
	Relaxed bool
	// MaxNodes bounds the branch and bound (linear programs solved); 0:
	// DefaultMaxNodes. The plan says whether the bound was proved.
	MaxNodes int
}

// Defaults of the knobs.
const (
	DefaultNodeCost  = 0.01
	DefaultCrossCost = 1e-4
	DefaultMaxNodes  = 1000
)

// Plan is the planner's answer.
type Plan struct {
	Rate  float64     // items per second through the pipeline
	Count [][]int     // placeholders per stage per site (in Problem order)
	Flow  [][]float64 // items per second per stage per site
	// Cross is the bytes per second over site links (counted once, at
	// the sending site).
	Cross        float64
	Placeholders int
	Nodes        int // linear programs solved
	// Optimal is true when the branch and bound finished within MaxNodes:
	// no plan is better by half a placeholder's cost (W_X/2) or more.
	Optimal bool
}

// ErrNoCapacity is returned when some stage can run nowhere.
var ErrNoCapacity = errors.New("lpplace: a stage has no site it can run at")

// Capacity is the items per second one placeholder of site s processes of
// stage k: it stages the previous stage's output in, then computes.
func (p *Problem) Capacity(k, s int) float64 {
	st, si := p.Stages[k], p.Sites[s]
	if !p.allowed(k, s) {
		return 0
	}
	t := st.Work / si.Speed
	if st.Times != nil {
		t = st.Times[s]
	}
	if k > 0 && si.NIC > 0 {
		t += p.Stages[k-1].Out / si.NIC
	}
	if t <= 0 {
		return math.Inf(1)
	}
	return 1 / t
}

func (p *Problem) allowed(k, s int) bool {
	st, si := p.Stages[k], p.Sites[s]
	if si.Max <= 0 || si.Speed <= 0 && st.Times == nil {
		return false
	}
	if st.Times != nil && !(st.Times[s] > 0 && !math.IsInf(st.Times[s], 1)) {
		return false
	}
	if len(st.Sites) == 0 {
		return true
	}
	for _, n := range st.Sites {
		if n == si.Name {
			return true
		}
	}
	return false
}

// Validate reports the first bad field, in one line.
func (p *Problem) Validate() error {
	if len(p.Stages) == 0 || len(p.Sites) == 0 {
		return errors.New("lpplace: need at least one stage and one site")
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	names := map[string]bool{}
	for _, s := range p.Sites {
		switch {
		case s.Name == "" || names[s.Name]:
			return fmt.Errorf("lpplace: site name %q empty or repeated", s.Name)
		case !finite(s.Speed) || !finite(s.NIC) || !finite(s.Link) || s.Max < 0:
			return fmt.Errorf("lpplace: site %s: speed, max, nic and link must be finite and >= 0", s.Name)
		}
		names[s.Name] = true
	}
	for _, st := range p.Stages {
		if !finite(st.Work) || !finite(st.Out) || st.MaxCopies < 0 {
			return fmt.Errorf("lpplace: stage %s: work, out and max copies must be finite and >= 0", st.Name)
		}
		if st.Times != nil && len(st.Times) != len(p.Sites) {
			return fmt.Errorf("lpplace: stage %s: %d times for %d sites", st.Name, len(st.Times), len(p.Sites))
		}
		for _, t := range st.Times {
			if math.IsNaN(t) || t < 0 {
				return fmt.Errorf("lpplace: stage %s: time %g must be >= 0", st.Name, t)
			}
		}
		for _, n := range st.Sites {
			if !names[n] {
				return fmt.Errorf("lpplace: stage %s: unknown site %q", st.Name, n)
			}
		}
	}
	for name, v := range map[string]float64{"node cost": p.NodeCost, "extra": p.Extra} {
		if !finite(v) {
			return fmt.Errorf("lpplace: %s %g must be finite and >= 0", name, v)
		}
	}
	if math.IsNaN(p.CrossCost) || math.IsInf(p.CrossCost, 0) {
		return fmt.Errorf("lpplace: cross cost %g must be finite", p.CrossCost)
	}
	if !(p.MinUtil >= 0 && p.MinUtil < 1) {
		return fmt.Errorf("lpplace: min utilisation %g must be in [0, 1)", p.MinUtil)
	}
	if p.MaxNodes < 0 {
		return fmt.Errorf("lpplace: max nodes %d must be >= 0", p.MaxNodes)
	}
	return nil
}

// String is the plan as "stage: site x n, ...; rate r/s" for logs.
func (pl Plan) String(p *Problem) string {
	var b strings.Builder
	for k, st := range p.Stages {
		if k > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s:", st.Name)
		for s, n := range pl.Count[k] {
			if n > 0 {
				fmt.Fprintf(&b, " %s x%d", p.Sites[s].Name, n)
			}
		}
	}
	fmt.Fprintf(&b, "; %.4g items/s on %d placeholders", pl.Rate, pl.Placeholders)
	return b.String()
}

// Plan solves the problem. ctx bounds the branch and bound; on cancel the
// best plan found so far is returned with Optimal false, or ctx's error if
// there is none.
func (p *Problem) Plan(ctx context.Context) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	f, err := formulate(p)
	if err != nil {
		return Plan{}, err
	}
	return f.solve(ctx)
}
