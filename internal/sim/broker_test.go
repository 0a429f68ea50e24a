package sim

import (
	"context"
	"testing"

	"github.com/mq-hpc/mq/internal/dbc"
)

// TestEconSeedClaims checks seed 002's claims over its whole sweep (8
// deadlines x 18 budgets x 2 strategies; well under a second).
func TestEconSeedClaims(t *testing.T) {
	s := BrokerSweep{Strategies: []dbc.Strategy{dbc.Cost, dbc.CostTime}, Deadlines: SeedDeadlines(), Budgets: SeedBudgets(), Base: BrokerConfig{Seed: 1}}
	rs, err := s.Run(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 8*18*2 {
		t.Fatalf("%d results", len(rs))
	}
	// One job's runtime on the cheapest resources: how far apart two
	// strategies that both fill resources up to the deadline may end.
	const slack = 11000.0 / 380
	for i := 0; i < len(rs); i += 2 {
		cost, ct := rs[i], rs[i+1]
		if cost.Strategy != dbc.Cost || ct.Strategy != dbc.CostTime {
			t.Fatalf("sweep order: %v %v", cost.Strategy, ct.Strategy)
		}
		for _, r := range []BrokerResult{cost, ct} {
			if r.Spent > r.Budget || r.Time > r.Deadline {
				t.Errorf("%v d=%g b=%g: spent %.1f by %.1f, beyond the budget or the deadline", r.Strategy, r.Deadline, r.Budget, r.Spent, r.Time)
			}
		}
		// "The number of Gridlets processed and the budget-spending
		// pattern is similar for both": within 1% of the jobs.
		if d := ct.Completed - cost.Completed; d < -2 || d > 2 {
			t.Errorf("d=%g b=%g: cost-time completed %d, cost %d", ct.Deadline, ct.Budget, ct.Completed, cost.Completed)
		}
		if ct.Time > cost.Time+slack {
			t.Errorf("d=%g b=%g: cost-time ended at %.1f, after cost's %.1f", ct.Deadline, ct.Budget, ct.Time, cost.Time)
		}
		// From deadline 1,600 on, clearly earlier at the same spend
		// (Figures 7 and 8).
		if ct.Deadline >= 1600 {
			if ct.Time > 0.9*cost.Time {
				t.Errorf("d=%g b=%g: cost-time %.1f not clearly before cost %.1f", ct.Deadline, ct.Budget, ct.Time, cost.Time)
			}
			if ct.Completed == cost.Completed && (ct.Spent > cost.Spent*1.0001 || ct.Spent < cost.Spent*0.9999) {
				t.Errorf("d=%g b=%g: cost-time spent %.1f, cost %.1f", ct.Deadline, ct.Budget, ct.Spent, cost.Spent)
			}
		}
		// Deadline 3,100 with a budget for every job (Figure 5(c), (d)):
		// cost uses only the cheapest resource, R4; cost-time splits
		// the jobs across R4 and R8, which cost the same.
		if ct.Deadline == 3100 && cost.Completed == 200 {
			for k, name := range cost.Names {
				if (name == "R4") != (cost.PerResource[k] == 200) {
					t.Errorf("b=%g: cost ran %d jobs on %s", cost.Budget, cost.PerResource[k], name)
				}
				split := name == "R4" || name == "R8"
				if split != (ct.PerResource[k] > 0) || split && (ct.PerResource[k] < 90 || ct.PerResource[k] > 110) {
					t.Errorf("b=%g: cost-time ran %d jobs on %s", ct.Budget, ct.PerResource[k], name)
				}
			}
		}
	}
}

func TestEconBadConfig(t *testing.T) {
	for _, cfg := range []BrokerConfig{
		{Strategy: dbc.Cost, Deadline: 0, Budget: 1},
		{Strategy: dbc.Cost, Deadline: 10, Budget: -1},
		{Strategy: 0, Deadline: 10, Budget: 1},
		{Strategy: dbc.Cost, Deadline: 10, Budget: 1, Jobs: -1},
	} {
		if _, err := RunBroker(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// With no budget nothing runs and the jobs are not lost from the count.
func TestEconNoBudget(t *testing.T) {
	r, err := RunBroker(BrokerConfig{Strategy: dbc.CostTime, Deadline: 1000, Budget: 0, Jobs: 5})
	if err != nil || r.Completed != 0 || r.Spent != 0 || r.Events != 1 {
		t.Errorf("%+v %v", r, err)
	}
}
