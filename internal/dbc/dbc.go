// Package dbc is deadline-and-budget-constrained (DBC) scheduling: cost,
// time and cost-time optimisation of independent jobs over priced
// resources, as seed 002 defines it (Buyya, Murshed, Abramson, Venugopal
// 2005).
//
// A broker calls Schedule at every scheduling event (a job ends, or a
// period passes) with every job not yet dispatched: the plan is remade
// each time from the resources' measured job consumption rates, which is
// the seed's step 4(d) taken to its limit (every undispatched job returns
// to the unassigned list). Schedule is a pure function; the dispatcher
// (the caller) starts at most one job per free processing element.
package dbc

import (
	"fmt"
	"math"
	"slices"
)

// Strategy is a DBC optimisation strategy.
type Strategy int

const (
	// Cost fills the cheapest resource (by price per unit of work) with
	// as many jobs as it can finish by the deadline, then the next
	// cheapest, and so on, within the budget.
	Cost Strategy = iota + 1
	// Time gives each job the resource that finishes it earliest among
	// those whose cost fits the budget left per unassigned job.
	Time
	// CostTime is the seed's Figure 2: resources sorted by cost and
	// grouped by equal cost, Time within a group, the cheapest group
	// first, never exceeding the budget or the deadline.
	CostTime
)

// Strategies lists every strategy, in help order.
func Strategies() []Strategy { return []Strategy{Cost, CostTime, Time} }

func (s Strategy) String() string {
	switch s {
	case Cost:
		return "cost"
	case Time:
		return "time"
	case CostTime:
		return "costtime"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy returns the strategy named by String.
func ParseStrategy(name string) (Strategy, error) {
	for _, s := range Strategies() {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown strategy %q (known: cost, costtime, time)", name)
}

// Resource is one priced resource as the broker sees it at an event.
type Resource struct {
	Name  string
	PEs   int     // processing elements: jobs it runs at once
	MIPS  float64 // nominal speed of one PE, MI per time unit
	Rate  float64 // measured MI per time unit of one PE; 0: use MIPS
	Price float64 // per PE per time unit
	// Busy holds, for each PE running a job now, when that job is
	// predicted to end (absolute time); len(Busy) <= PEs.
	Busy []float64
}

// Speed is the resource's measured MI per PE time unit, or its nominal
// one (MIPS) before any job has ended there.
func (r Resource) Speed() float64 {
	if r.Rate > 0 {
		return r.Rate
	}
	return r.MIPS
}

// CostPerMI is what one MI costs at the resource: how the seed compares
// resources whose PEs differ in speed (step 2, section 5.1's G$/MI).
func (r Resource) CostPerMI() float64 { return r.Price / r.Speed() }

// Job is one job not yet dispatched.
type Job struct {
	ID int
	MI float64 // length, million instructions
}

// Event is the state of the experiment at a scheduling event.
type Event struct {
	Now      float64
	Deadline float64 // absolute
	// Budget is the money left to commit: the budget less what ended
	// jobs cost and what running jobs will cost.
	Budget float64
}

// Plan is Schedule's answer.
type Plan struct {
	// Assigned lists, per resource (the index into Schedule's
	// resources), the jobs to dispatch there in order.
	Assigned [][]int
	// Unassigned are the jobs no resource can finish within the
	// deadline and the budget: reported early, as the seed's broker does.
	Unassigned []int
	Cost       float64 // predicted cost of the assigned jobs
	Finish     float64 // predicted end of the last assigned job; Now if none
}

// sameCost is the relative difference under which two resources' costs
// per MI (or powers) count as equal (R4 and R8 of the seed's Table I are exactly
// equal; measured rates need a little slack).
const sameCost = 1e-6

// Schedule plans jobs over resources at event ev with strategy s. It
// never plans beyond ev.Budget or a job predicted to end after
// ev.Deadline. Jobs are taken in the order given.
func Schedule(s Strategy, ev Event, rs []Resource, jobs []Job) Plan {
	p := &planner{ev: ev, plan: Plan{Assigned: make([][]int, len(rs)), Finish: ev.Now}, budget: ev.Budget}
	for _, r := range rs {
		p.free = append(p.free, peFree(r, ev.Now))
	}
	p.rs = rs
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	// Step 4(b): by increasing cost; equal costs most powerful first.
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := rs[a].CostPerMI(), rs[b].CostPerMI()
		if !equalCost(ca, cb) {
			if ca < cb {
				return -1
			}
			return 1
		}
		// Powers within sameCost of each other tie (a measured rate a
		// hair off another's must not reorder equals), and ties keep
		// the resources' order.
		pa, pb := float64(rs[a].PEs)*rs[a].Speed(), float64(rs[b].PEs)*rs[b].Speed()
		switch {
		case equalCost(pa, pb):
			return 0
		case pa > pb:
			return -1
		}
		return 1
	})
	left := slices.Clone(jobs)
	switch s {
	case Cost:
		for _, i := range order {
			left = p.fill(i, left)
		}
	case Time:
		left = p.fastest(order, left, true)
	case CostTime:
		// Step 4(c): groups of equal cost; 4(e): time optimisation in each.
		for g := 0; g < len(order) && len(left) > 0; {
			e := g + 1
			for e < len(order) && equalCost(rs[order[g]].CostPerMI(), rs[order[e]].CostPerMI()) {
				e++
			}
			left = p.fastest(order[g:e], left, false)
			g = e
		}
	default:
		panic(fmt.Sprintf("dbc: unknown strategy %d", int(s)))
	}
	for _, j := range left {
		p.plan.Unassigned = append(p.plan.Unassigned, j.ID)
	}
	return p.plan
}

func equalCost(a, b float64) bool {
	return math.Abs(a-b) <= sameCost*math.Max(math.Abs(a), math.Abs(b))
}

// peFree returns when each PE of r is next free, never before now.
func peFree(r Resource, now float64) []float64 {
	f := make([]float64, max(r.PEs, 0))
	for i := range f {
		f[i] = now
		if i < len(r.Busy) {
			f[i] = math.Max(now, r.Busy[i])
		}
	}
	return f
}

type planner struct {
	ev     Event
	rs     []Resource
	free   [][]float64 // per resource, when each PE is free in the plan so far
	budget float64
	plan   Plan
}

// try predicts job j at resource i: the PE it would run on, when it
// would end and what it would cost; ok is false if the resource has no PE.
func (p *planner) try(i int, j Job) (pe int, end, cost float64, ok bool) {
	f := p.free[i]
	if len(f) == 0 || p.rs[i].Speed() <= 0 {
		return 0, 0, 0, false
	}
	pe = 0
	for k := range f {
		if f[k] < f[pe] {
			pe = k
		}
	}
	run := j.MI / p.rs[i].Speed()
	return pe, f[pe] + run, run * p.rs[i].Price, true
}

func (p *planner) fits(end, cost, budget float64) bool {
	return end <= p.ev.Deadline && cost <= budget
}

func (p *planner) assign(i, pe int, j Job, end, cost float64) {
	p.free[i][pe] = end
	p.budget -= cost
	p.plan.Cost += cost
	p.plan.Finish = math.Max(p.plan.Finish, end)
	p.plan.Assigned[i] = append(p.plan.Assigned[i], j.ID)
}

// fill gives resource i every job it can finish within the deadline and
// the budget (cost optimisation's step) and returns the rest.
func (p *planner) fill(i int, jobs []Job) []Job {
	var rest []Job
	for _, j := range jobs {
		if pe, end, cost, ok := p.try(i, j); ok && p.fits(end, cost, p.budget) {
			p.assign(i, pe, j, end, cost)
			continue
		}
		rest = append(rest, j)
	}
	return rest
}

// fastest gives each job the resource among group that ends it
// earliest, if that is within the deadline and the budget, and returns
// the jobs left. With share (time optimisation), a job may cost at most
// the budget left per unassigned job at this event, so that fast dear
// resources do not spend what the later jobs need; the share grows as
// cheap jobs end under it. A job no resource runs within its share gets
// the cheapest that fits the budget left. Without share (cost-time, whose groups come
// cheapest first), a job may spend all the budget left.
func (p *planner) fastest(group []int, jobs []Job, share bool) []Job {
	var rest []Job
	perJob := math.Inf(1)
	if share && len(jobs) > 0 {
		perJob = p.budget / float64(len(jobs))
	}
	for _, j := range jobs {
		budget := math.Min(p.budget, perJob)
		best, bestPE := -1, 0
		var bestEnd, bestCost float64
		for _, i := range group {
			pe, end, cost, ok := p.try(i, j)
			if !ok || !p.fits(end, cost, budget) {
				continue
			}
			if best < 0 || end < bestEnd || (end == bestEnd && cost < bestCost) {
				best, bestPE, bestEnd, bestCost = i, pe, end, cost
			}
		}
		if best < 0 && share {
			// No resource within the share: the cheapest that ends the
			// job within the deadline and the whole budget left, so a
			// budget short of the share still buys what it can.
			for _, i := range group {
				pe, end, cost, ok := p.try(i, j)
				if ok && p.fits(end, cost, p.budget) && (best < 0 || cost < bestCost || cost == bestCost && end < bestEnd) {
					best, bestPE, bestEnd, bestCost = i, pe, end, cost
				}
			}
		}
		if best < 0 {
			rest = append(rest, j)
			continue
		}
		p.assign(best, bestPE, j, bestEnd, bestCost)
	}
	return rest
}
