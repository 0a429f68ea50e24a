package plan

import (
	"reflect"
	"testing"

	"github.com/mq-hpc/mq/internal/policy"
)

// timelineProblem: x has 2 slots, y 1; links 10 B/s. Job 1 writes f1
// (20 B), read by 2 and 3; 2 writes f2 (10 B); 4 needs 2 and 3 and reads
// f2.
func timelineProblem() policy.Problem {
	return policy.Problem{
		Sites:     []policy.PlanSite{{Name: "x", Slots: 2}, {Name: "y", Slots: 1}},
		Bandwidth: func(a, b string) float64 { return 10 },
		Jobs: []policy.PlanJob{
			{ID: 1, Est: map[string]float64{"x": 2, "y": 4}, Outputs: []policy.PlanFile{{Path: "f1", Size: 20}}},
			{ID: 2, Est: same(3, "x", "y"), Inputs: []policy.PlanFile{{Path: "f1"}}, Outputs: []policy.PlanFile{{Path: "f2", Size: 10}}},
			{ID: 3, Est: same(1, "x", "y"), Inputs: []policy.PlanFile{{Path: "f1"}}},
			{ID: 4, Prereqs: []int64{2, 3}, Est: same(2, "x", "y"), Inputs: []policy.PlanFile{{Path: "f2"}}},
		},
	}
}

// TestTimeline checks the predicted timeline of small plans by hand.
func TestTimeline(t *testing.T) {
	t.Parallel()
	order := []int64{1, 2, 3, 4}
	for _, tc := range []struct {
		name     string
		site     map[int64]string
		limit    int
		makespan float64
		jobs     []Scheduled // in the plan's order: id, site, slot, slots, start, end, ready
		sites    []SiteTimeline
	}{{
		// 1 at x 0-2 (slot 0); 2 at y reads f1 from x (2 s) and runs 3 s:
		// 2-7; 3 at x on the free slot 1: 2-3; 4 at x waits for 2 (7),
		// reads f2 from y (1 s), runs 2 s: 7-10 on slot 0, free since 2.
		name: "split", site: map[int64]string{1: "x", 2: "y", 3: "x", 4: "x"}, limit: 2, makespan: 10,
		jobs: []Scheduled{{1, "x", 0, 1, 0, 2, 0}, {2, "y", 0, 1, 2, 7, 2}, {3, "x", 1, 1, 2, 3, 2}, {4, "x", 0, 1, 7, 10, 7}},
		sites: []SiteTimeline{
			{Site: "x", Slots: 2, Jobs: 3, Busy: 6, Util: 0.3, First: []Scheduled{{1, "x", 0, 1, 0, 2, 0}, {3, "x", 1, 1, 2, 3, 2}}, More: 1},
			{Site: "y", Slots: 1, Jobs: 1, Busy: 5, Util: 0.5, First: []Scheduled{{2, "y", 0, 1, 2, 7, 2}}},
		},
	}, {
		// Everything at y, one slot: back to back, nothing moved.
		name: "all at y", site: map[int64]string{1: "y", 2: "y", 3: "y", 4: "y"}, makespan: 10,
		jobs: []Scheduled{{1, "y", 0, 1, 0, 4, 0}, {2, "y", 0, 1, 4, 7, 4}, {3, "y", 0, 1, 7, 8, 4}, {4, "y", 0, 1, 8, 10, 8}},
		sites: []SiteTimeline{
			{Site: "x", Slots: 2},
			{Site: "y", Slots: 1, Jobs: 4, Busy: 10, Util: 1, First: []Scheduled{{1, "y", 0, 1, 0, 4, 0}, {2, "y", 0, 1, 4, 7, 4}, {3, "y", 0, 1, 7, 8, 4}, {4, "y", 0, 1, 8, 10, 8}}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := timelineProblem()
			pl := policy.Plan{Site: tc.site, Order: order}
			got, err := Timeline(p, pl)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.jobs) {
				t.Fatalf("timeline %v\nwant %v", got, tc.jobs)
			}
			ms, _, err := Evaluate(p, pl)
			if err != nil || ms != tc.makespan {
				t.Fatalf("Evaluate = %v, %v; want %v", ms, err, tc.makespan)
			}
			if by := BySite(p.Sites, got, ms, tc.limit); !reflect.DeepEqual(by, tc.sites) {
				t.Fatalf("by site %+v\nwant %+v", by, tc.sites)
			}
		})
	}
	if _, err := Timeline(timelineProblem(), policy.Plan{Site: map[int64]string{1: "x", 2: "x", 3: "x", 4: "x"}, Order: []int64{2, 1, 3, 4}}); err == nil {
		t.Fatal("an order that starts a job before its prerequisite gave a timeline")
	}
}

// checkTimeline: the timeline ends at the plan's makespan, keeps every
// job after its prerequisites at its planned site, and never runs two
// jobs on one slot at once.
func checkTimeline(t *testing.T, what string, p policy.Problem, pl policy.Plan, m *model) {
	t.Helper()
	tl, err := Timeline(p, pl)
	if err != nil {
		t.Fatalf("%s: timeline: %v", what, err)
	}
	end := map[int64]float64{}
	last, busy := 0.0, map[[2]any]float64{}
	for _, j := range tl {
		if j.Site != pl.Site[j.ID] || j.End < j.Start {
			t.Fatalf("%s: job %+v; planned at %s", what, j, pl.Site[j.ID])
		}
		k := [2]any{j.Site, j.Slot}
		if j.Start < busy[k]-1e-9 {
			t.Fatalf("%s: job %+v starts on a slot busy until %v", what, j, busy[k])
		}
		busy[k] = j.End
		end[j.ID] = j.End
		last = max(last, j.End)
	}
	for i, id := range m.ids {
		var start float64
		for _, j := range tl {
			if j.ID == id {
				start = j.Start
			}
		}
		for _, q := range m.pred[i] {
			if e, ok := end[m.ids[q]]; !ok || start < e-1e-9 {
				t.Fatalf("%s: job %d starts at %v before its prerequisite %d ends (%v)", what, id, start, m.ids[q], e)
			}
		}
	}
	if last != pl.Makespan {
		t.Fatalf("%s: the timeline ends at %v, the plan's makespan is %v", what, last, pl.Makespan)
	}
}
