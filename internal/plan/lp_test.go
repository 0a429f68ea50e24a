package plan

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/policy"
)

// BLAST then Parse: 6 BLAST jobs twice as fast at a as at b, each with a
// Parse job after it. The LP gives the BLAST stage most of a's slots and
// so most of its jobs; every Parse job comes after its BLAST job.
func TestLPStages(t *testing.T) {
	p := policy.Problem{Sites: []policy.PlanSite{{Name: "a", Slots: 2}, {Name: "b", Slots: 2}}}
	for i := range 6 {
		out := fmt.Sprintf("hits%d", i)
		p.Jobs = append(p.Jobs,
			policy.PlanJob{ID: int64(i), Est: map[string]float64{"a": 10, "b": 20}, Outputs: []policy.PlanFile{{Path: out, Size: 1000}}},
			policy.PlanJob{ID: int64(100 + i), Est: map[string]float64{"a": 1, "b": 1}, Inputs: []policy.PlanFile{{Path: out}}})
	}
	pl, err := LP{}.Plan(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for i := range 6 {
		at[pl.Site[int64(i)]]++
	}
	if at["a"] <= at["b"] {
		t.Errorf("BLAST jobs at a %d, at b %d: want most at the faster a", at["a"], at["b"])
	}
	pos := map[int64]int{}
	for i, id := range pl.Order {
		pos[id] = i
	}
	for i := range 6 {
		if pos[int64(100+i)] < pos[int64(i)] {
			t.Errorf("parse %d ordered before its blast", i)
		}
	}
	if ms, mv, err := Evaluate(p, pl); err != nil || ms != pl.Makespan || mv != pl.Moved {
		t.Errorf("Evaluate %v %v %v; plan %v %v", ms, mv, err, pl.Makespan, pl.Moved)
	}
}

// Jobs that take no time (a trace's tasks of runtime 0, a whole depth of
// them) are planned: the LP refused them as "a stage has no site it can
// run at".
func TestLPZeroRuntimes(t *testing.T) {
	p := policy.Problem{Sites: []policy.PlanSite{{Name: "a", Slots: 2}, {Name: "b", Slots: 1}}}
	p.Jobs = []policy.PlanJob{
		{ID: 1, Est: map[string]float64{"a": 0, "b": 0}, Outputs: []policy.PlanFile{{Path: "x", Size: 10}}},
		{ID: 2, Est: map[string]float64{"a": 0, "b": 0}, Inputs: []policy.PlanFile{{Path: "x"}}},
		{ID: 3, Est: map[string]float64{"a": 0, "b": 0}, Inputs: []policy.PlanFile{{Path: "x"}}},
	}
	pl, err := LP{}.Plan(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Order) != 3 || pl.Site[1] == "" || pl.Site[2] == "" || pl.Site[3] == "" {
		t.Errorf("plan %+v", pl)
	}
}

func TestShares(t *testing.T) {
	for _, tc := range []struct {
		n    int
		flow []float64
		want []int
	}{
		{6, []float64{0.2, 0.1}, []int{4, 2}},
		{5, []float64{1, 1, 1}, []int{2, 2, 1}},
		{3, []float64{0, 0}, []int{0, 0}},
	} {
		if got := shares(tc.n, tc.flow); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("shares(%d, %v) = %v, want %v", tc.n, tc.flow, got, tc.want)
		}
	}
}

// A chain deeper than MaxLPCells allows over its sites is refused in one
// line, not planned for hours.
func TestLPTooLarge(t *testing.T) {
	p := policy.Problem{Sites: []policy.PlanSite{{Name: "a", Slots: 1}, {Name: "b", Slots: 1}}}
	for i := range MaxLPCells/2 + 1 {
		j := policy.PlanJob{ID: int64(i), Est: map[string]float64{"a": 1, "b": 1}}
		if i > 0 {
			j.Prereqs = []int64{int64(i - 1)}
		}
		p.Jobs = append(p.Jobs, j)
	}
	if _, err := (LP{}).Plan(context.Background(), p); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("err %v", err)
	}
}
