package policy

import (
	"math"
	"slices"
	"testing"
)

// stageTimes takes a site's measured rate over the stage's estimate and
// leaves 0 where neither gives a usable time.
func TestStageTimes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		d     Demand
		want  []float64
		known bool
	}{
		{"nothing known", Demand{Sites: []SiteView{{Name: "a"}, {Name: "b"}}}, []float64{0, 0}, false},
		{"estimate everywhere", Demand{Est: 4, Sites: []SiteView{{Name: "a"}, {Name: "b"}}}, []float64{4, 4}, true},
		{"rate beats estimate", Demand{Est: 4, Sites: []SiteView{{Name: "a", Rate: 0.5}, {Name: "b"}}}, []float64{2, 4}, true},
		{"rate per slot", Demand{Sites: []SiteView{{Name: "a", Rate: 2, Slots: 4}, {Name: "b"}}}, []float64{2, 0}, true},
		{"infinite estimate", Demand{Est: math.Inf(1), Sites: []SiteView{{Name: "a"}}}, []float64{0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := stageTimes(tc.d)
			if !slices.Equal(got, tc.want) || known != tc.known {
				t.Fatalf("stageTimes = %v, %v; want %v, %v", got, known, tc.want, tc.known)
			}
		})
	}
}

// Stages with nothing ready or waiting keep the slots their running jobs
// hold, stages with no time known get one slot per site to measure, and
// a stage's output crosses links only to the stage planned next to it.
func TestStagesProblem(t *testing.T) {
	sites := func(est float64, busy int) Demand {
		return Demand{Ready: 10, Est: est, FeedsNext: true, Out: 1e6,
			Sites: []SiteView{{Name: "a", Max: 2, Busy: busy}, {Name: "b", Max: 3, Link: math.Inf(1)}}}
	}
	idle := sites(1, 2)
	idle.Ready = 0
	unknown := sites(0, 0)
	stages := []Demand{sites(1, 0), sites(2, 0), idle, unknown, sites(3, 0)}
	slots := make([]map[string]int, len(stages))
	for k := range slots {
		slots[k] = map[string]int{}
	}
	prob, planned := stagesProblem(stages, slots)
	if want := []int{0, 1, 4}; !slices.Equal(planned, want) {
		t.Fatalf("planned %v, want %v", planned, want)
	}
	if len(prob.Sites) != 2 || prob.Sites[1].Link != 0 || prob.Sites[0].Max != 2 {
		t.Fatalf("sites %+v: want a at 2 slots, b with an unbounded link as 0", prob.Sites)
	}
	if prob.Stages[0].Out == 0 || prob.Stages[1].Out != 0 || prob.Stages[2].Out != 0 {
		t.Fatalf("outputs %v, %v, %v: only the first stage feeds one planned next to it",
			prob.Stages[0].Out, prob.Stages[1].Out, prob.Stages[2].Out)
	}
	if slots[2]["a"] != 2 || slots[2]["b"] != 0 {
		t.Fatalf("idle stage holds %v, want its running jobs' slots", slots[2])
	}
	if slots[3]["a"] != 1 || slots[3]["b"] != 1 {
		t.Fatalf("unmeasured stage holds %v, want one slot per site", slots[3])
	}
}
