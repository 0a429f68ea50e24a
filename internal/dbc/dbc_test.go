package dbc

import (
	"slices"
	"testing"
)

// two equal cheap resources, one dear fast one.
func testResources() []Resource {
	return []Resource{
		{Name: "cheapA", PEs: 1, MIPS: 10, Price: 1},
		{Name: "cheapB", PEs: 1, MIPS: 10, Price: 1},
		{Name: "dear", PEs: 2, MIPS: 20, Price: 4},
	}
}

func jobs(n int, mi float64) []Job {
	js := make([]Job, n)
	for i := range js {
		js[i] = Job{ID: i, MI: mi}
	}
	return js
}

func TestSchedule(t *testing.T) {
	// Each job is 10 time units on a cheap PE (cost 10) and 5 on a dear
	// PE (cost 20).
	tests := []struct {
		name       string
		s          Strategy
		ev         Event
		rs         []Resource
		n          int
		want       []int // jobs per resource
		unassigned int
		cost       float64
		finish     float64
	}{
		{"cost fills the first cheapest", Cost, Event{Deadline: 40, Budget: 1e9}, testResources(), 4, []int{4, 0, 0}, 0, 40, 40},
		{"cost spills to the next cheapest", Cost, Event{Deadline: 30, Budget: 1e9}, testResources(), 4, []int{3, 1, 0}, 0, 40, 30},
		{"costtime splits equal costs", CostTime, Event{Deadline: 40, Budget: 1e9}, testResources(), 4, []int{2, 2, 0}, 0, 40, 20},
		{"costtime spills to the dearer group", CostTime, Event{Deadline: 10, Budget: 1e9}, testResources(), 4, []int{1, 1, 2}, 0, 60, 10},
		{"time falls back to the cheapest under a short budget", Time, Event{Deadline: 40, Budget: 30}, testResources(), 4, []int{2, 1, 0}, 1, 30, 20},
		{"time takes the fastest", Time, Event{Deadline: 40, Budget: 1e9}, testResources(), 4, []int{1, 1, 2}, 0, 60, 10},
		{"budget caps cost", Cost, Event{Deadline: 40, Budget: 25}, testResources(), 4, []int{2, 0, 0}, 2, 20, 20},
		{"budget caps costtime", CostTime, Event{Deadline: 10, Budget: 35}, testResources(), 4, []int{1, 1, 0}, 2, 20, 10},
		{"infeasible deadline", CostTime, Event{Deadline: 4, Budget: 1e9}, testResources(), 3, []int{0, 0, 0}, 3, 0, 0},
		{"busy PEs delay", CostTime, Event{Now: 5, Deadline: 25, Budget: 1e9},
			[]Resource{{Name: "a", PEs: 1, MIPS: 10, Price: 1, Busy: []float64{15}}, {Name: "b", PEs: 1, MIPS: 10, Price: 1}}, 3, []int{1, 2, 0}, 0, 30, 25},
		{"measured rate overrides MIPS", CostTime, Event{Deadline: 10, Budget: 1e9},
			[]Resource{{Name: "slow", PEs: 1, MIPS: 10, Rate: 5, Price: 1}, {Name: "b", PEs: 1, MIPS: 10, Price: 1}}, 2, []int{0, 1, 0}, 1, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Schedule(tt.s, tt.ev, tt.rs, jobs(tt.n, 100))
			var got []int
			for _, a := range p.Assigned {
				got = append(got, len(a))
			}
			for len(got) < len(tt.want) {
				got = append(got, 0)
			}
			if !slices.Equal(got, tt.want) || len(p.Unassigned) != tt.unassigned || p.Cost != tt.cost || p.Finish != tt.finish {
				t.Errorf("got %v unassigned %v cost %v finish %v; want %v %d %v %v", got, p.Unassigned, p.Cost, p.Finish, tt.want, tt.unassigned, tt.cost, tt.finish)
			}
			if p.Cost > tt.ev.Budget {
				t.Errorf("cost %v over budget %v", p.Cost, tt.ev.Budget)
			}
		})
	}
}

func TestTimeSharesBudget(t *testing.T) {
	// 4 jobs, budget 60: each job may cost 15 at this event, so none runs
	// on the dear PEs (20) though they would end it sooner.
	p := Schedule(Time, Event{Deadline: 20, Budget: 60}, testResources(), jobs(4, 100))
	want := [][]int{{0, 2}, {1, 3}, nil}
	for i := range want {
		if !slices.Equal(p.Assigned[i], want[i]) {
			t.Fatalf("got %v, want %v", p.Assigned, want)
		}
	}
	if p.Cost != 40 {
		t.Errorf("cost %v, want 40", p.Cost)
	}
	// With 80, 20 a job: the dear PEs end the first two jobs first; the
	// next two end as soon on a cheap PE, which costs less.
	if p := Schedule(Time, Event{Deadline: 20, Budget: 80}, testResources(), jobs(4, 100)); !slices.Equal(p.Assigned[2], []int{0, 1}) {
		t.Errorf("budget 80: got %v", p.Assigned)
	}
}

func TestParseStrategy(t *testing.T) {
	for _, s := range Strategies() {
		if got, err := ParseStrategy(s.String()); err != nil || got != s {
			t.Errorf("%v: %v %v", s, got, err)
		}
	}
	if _, err := ParseStrategy("cheap"); err == nil {
		t.Error("an unknown strategy parsed")
	}
}

func TestMeasuredTieKeepsOrder(t *testing.T) {
	// A measured rate a rounding error below the nominal one must not
	// move cost optimisation off the first of two equal resources.
	rs := testResources()
	rs[0].Rate = 10 * (1 - 1e-12)
	p := Schedule(Cost, Event{Deadline: 41, Budget: 1e9}, rs, jobs(4, 100))
	if len(p.Assigned[0]) != 4 {
		t.Errorf("got %v, want all four on cheapA", p.Assigned)
	}
}
