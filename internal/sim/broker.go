package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mq-hpc/mq/internal/dbc"
)

// Seed 002 (Buyya et al. 2005, section 5): a broker runs a bag of jobs
// over priced resources under a deadline and a budget, re-planning with
// dbc.Schedule at every job end.

// TableI is the seed's Table I (the GridSim model of the World-Wide Grid
// testbed): PEs, MIPS per PE (SPEC CINT2000) and price in G$ per PE time
// unit. docs/policies/dbc.md says how each value was read from the garbled
// extraction; every row's MIPS/price matches the table's MIPS per G$ column.
func TableI() []dbc.Resource {
	return []dbc.Resource{
		{Name: "R0", PEs: 4, MIPS: 515, Price: 8},  // Compaq AlphaServer, grendel.vpac.org
		{Name: "R1", PEs: 4, MIPS: 377, Price: 4},  // Sun Ultra, hpc420.hpcc.jp
		{Name: "R2", PEs: 4, MIPS: 377, Price: 3},  // Sun Ultra, hpc420-1.hpcc.jp
		{Name: "R3", PEs: 2, MIPS: 377, Price: 3},  // Sun Ultra, hpc420-2.hpcc.jp
		{Name: "R4", PEs: 2, MIPS: 380, Price: 1},  // Intel Pentium/VC820, barbera.cnuce.cnr.it
		{Name: "R5", PEs: 6, MIPS: 410, Price: 5},  // SGI Origin 3200, onyx1.zib.de
		{Name: "R6", PEs: 16, MIPS: 410, Price: 5}, // SGI Origin 3200, Onyx3.zib.de
		{Name: "R7", PEs: 16, MIPS: 410, Price: 4}, // SGI Origin 3200, mat.ruk.cuni.cz (space-shared)
		{Name: "R8", PEs: 2, MIPS: 380, Price: 1},  // Intel Pentium/VC820, marge.csm.port.ac.uk
		{Name: "R9", PEs: 4, MIPS: 410, Price: 6},  // SGI Origin 3200, green.cfs.ac.uk (4 accessible)
		{Name: "R10", PEs: 8, MIPS: 377, Price: 3}, // Sun Ultra, pitcairn.mcs.anl.gov
	}
}

// BrokerConfig is one experiment of a deadline-and-budget broker: a bag
// of jobs over priced resources (seed 002's section 5).
type BrokerConfig struct {
	Strategy  dbc.Strategy
	Resources []dbc.Resource // nil: TableI
	Jobs      int            // 0: 200
	MinMI     float64        // 0: 10,000
	Spread    float64        // jobs are MinMI*(1+U(0,Spread)); 0: 0.1
	Deadline  float64        // time units from the start
	Budget    float64        // G$
	Seed      uint64         // draws the job lengths, the same for every strategy
}

// BrokerResult is what one experiment did.
type BrokerResult struct {
	Strategy         dbc.Strategy
	Deadline, Budget float64
	Seed             uint64
	Completed        int
	Time             float64 // when the last job ended (0: none ran)
	Spent            float64 // G$ of the jobs that ran
	PerResource      []int   // jobs completed, in Resources' order
	Names            []string
	Events           int // scheduling events (plans made)
}

type econRun struct {
	id    int
	mi    float64
	start float64
	end   float64
	cost  float64
}

// RunBroker simulates one experiment: dedicated resources (a job of L MI
// runs L/MIPS time units on one PE and costs that times the price), a
// scheduling event at the start and whenever jobs end, the dispatcher
// starting at most one job per PE (the seed's default policy), and the
// broker measuring each resource's MI per PE time unit from ended jobs.
func RunBroker(cfg BrokerConfig) (BrokerResult, error) {
	rs := cfg.Resources
	if rs == nil {
		rs = TableI()
	}
	n, minMI, spread := cfg.Jobs, cfg.MinMI, cfg.Spread
	if n == 0 {
		n = 200
	}
	if minMI == 0 {
		minMI = 10000
	}
	if spread == 0 {
		spread = 0.1
	}
	switch {
	case n < 0 || minMI < 0 || spread < 0:
		return BrokerResult{}, fmt.Errorf("econ: negative jobs, length or spread")
	case cfg.Deadline <= 0 || cfg.Budget < 0 || math.IsNaN(cfg.Deadline) || math.IsNaN(cfg.Budget):
		return BrokerResult{}, fmt.Errorf("econ: deadline %g and budget %g: want a positive deadline and a budget >= 0", cfg.Deadline, cfg.Budget)
	}
	if _, err := dbc.ParseStrategy(cfg.Strategy.String()); err != nil {
		return BrokerResult{}, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed002))
	pending := make([]dbc.Job, n)
	for i := range pending {
		pending[i] = dbc.Job{ID: i, MI: minMI * (1 + spread*rng.Float64())}
	}
	res := BrokerResult{Strategy: cfg.Strategy, Deadline: cfg.Deadline, Budget: cfg.Budget, Seed: cfg.Seed,
		PerResource: make([]int, len(rs)), Names: make([]string, len(rs))}
	for i, r := range rs {
		res.Names[i] = r.Name
	}
	running := make([][]econRun, len(rs))
	doneMI := make([]float64, len(rs))
	doneTime := make([]float64, len(rs))
	now, committed := 0.0, 0.0
	for {
		// A scheduling event: plan every job not yet dispatched.
		view := make([]dbc.Resource, len(rs))
		for i, r := range rs {
			view[i] = r
			view[i].Busy = nil
			if doneTime[i] > 0 {
				view[i].Rate = doneMI[i] / doneTime[i]
			}
			for _, j := range running[i] {
				view[i].Busy = append(view[i].Busy, j.start+j.mi/view[i].Speed())
			}
		}
		plan := dbc.Schedule(cfg.Strategy, dbc.Event{Now: now, Deadline: cfg.Deadline, Budget: cfg.Budget - res.Spent - committed}, view, pending)
		res.Events++
		byID := make(map[int]dbc.Job, len(pending))
		for _, j := range pending {
			byID[j.ID] = j
		}
		// Dispatch: one job per free PE, in the plan's order.
		for i, ids := range plan.Assigned {
			for _, id := range ids {
				if len(running[i]) >= rs[i].PEs {
					break
				}
				j := byID[id]
				run := j.MI / rs[i].MIPS
				r := econRun{id: id, mi: j.MI, start: now, end: now + run, cost: run * rs[i].Price}
				running[i] = append(running[i], r)
				committed += r.cost
				delete(byID, id)
			}
		}
		kept := pending[:0]
		for _, j := range pending {
			if _, ok := byID[j.ID]; ok {
				kept = append(kept, j)
			}
		}
		pending = kept
		// The next event: the earliest end.
		next := math.Inf(1)
		for _, rj := range running {
			for _, j := range rj {
				next = math.Min(next, j.end)
			}
		}
		if math.IsInf(next, 1) {
			return res, nil // nothing runs: the rest cannot be done
		}
		now = next
		for i := range running {
			kept := running[i][:0]
			for _, j := range running[i] {
				if j.end > now {
					kept = append(kept, j)
					continue
				}
				committed -= j.cost
				res.Spent += j.cost
				res.Completed++
				res.PerResource[i]++
				res.Time = now
				doneMI[i] += j.mi
				doneTime[i] += j.end - j.start
			}
			running[i] = kept
		}
		if len(pending) == 0 && allIdle(running) {
			return res, nil
		}
	}
}

func allIdle(running [][]econRun) bool {
	for _, r := range running {
		if len(r) > 0 {
			return false
		}
	}
	return true
}

// BrokerSweep runs every strategy at every deadline and budget.
type BrokerSweep struct {
	Strategies []dbc.Strategy
	Deadlines  []float64
	Budgets    []float64
	Base       BrokerConfig // Jobs, Seed, Resources...
}

// SeedDeadlines and SeedBudgets are the seed's sweep: deadlines 100 to
// 3,600 in steps of 500, budgets 5,000 to 22,000 in steps of 1,000.
func SeedDeadlines() []float64 { return steps(100, 3600, 500) }
func SeedBudgets() []float64   { return steps(5000, 22000, 1000) }

func steps(from, to, step float64) []float64 {
	var v []float64
	for x := from; x <= to; x += step {
		v = append(v, x)
	}
	return v
}

// Run runs the sweep on workers goroutines (0: GOMAXPROCS); results come
// in sweep order (deadline, budget, strategy; the last varies fastest).
func (s BrokerSweep) Run(ctx context.Context, workers int) ([]BrokerResult, error) {
	n := len(s.Strategies) * len(s.Deadlines) * len(s.Budgets)
	return runIndexed(ctx, n, workers, func(i int) (BrokerResult, error) {
		cfg := s.Base
		cfg.Strategy = s.Strategies[i%len(s.Strategies)]
		j := i / len(s.Strategies)
		cfg.Budget = s.Budgets[j%len(s.Budgets)]
		cfg.Deadline = s.Deadlines[j/len(s.Budgets)]
		return RunBroker(cfg)
	})
}
