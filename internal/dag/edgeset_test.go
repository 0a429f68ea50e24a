package dag

import (
	"fmt"
	"slices"
	"testing"
)

// edgeSpec is what EdgeSet.Add takes of a job.
type edgeSpec struct {
	Target            string
	Prereqs, AfterAny []string
}

// TestEdgeSet: prerequisites come back once each, in the order first
// named, after-ok and after-any alike, for short lists and for lists past
// edgeScanLimit; targets without prerequisites are not listed.
func TestEdgeSet(t *testing.T) {
	t.Parallel()
	var many []string
	for i := range 3 * edgeScanLimit {
		many = append(many, fmt.Sprintf("p%d", i))
	}
	tests := []struct {
		name  string
		specs []edgeSpec
		want  map[string][]string
	}{
		{"none", []edgeSpec{{Target: "a"}}, map[string][]string{}},
		{"pipeline", []edgeSpec{{Target: "a"}, {Target: "b", Prereqs: []string{"a"}}, {Target: "c", Prereqs: []string{"b"}, AfterAny: []string{"a"}}},
			map[string][]string{"b": {"a"}, "c": {"b", "a"}}},
		{"repeats", []edgeSpec{{Target: "b", Prereqs: []string{"a", "x"}}, {Target: "b", Prereqs: []string{"x", "y"}, AfterAny: []string{"a"}}},
			map[string][]string{"b": {"a", "x", "y"}}},
		{"long", []edgeSpec{{Target: "m", Prereqs: many[:edgeScanLimit]}, {Target: "m", Prereqs: many}, {Target: "m", AfterAny: many[edgeScanLimit-2:]}},
			map[string][]string{"m": many}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := NewEdgeSet()
			for i := range tt.specs {
				e.Add(tt.specs[i].Target, tt.specs[i].Prereqs, tt.specs[i].AfterAny)
			}
			got := map[string][]string{}
			e.EachTarget(func(n string) bool {
				got[n] = e.Prereqs(n)
				return true
			})
			if len(got) != len(tt.want) {
				t.Fatalf("targets %v, want %v", got, tt.want)
			}
			for n, w := range tt.want {
				if !slices.Equal(got[n], w) {
					t.Errorf("%s: %v, want %v", n, got[n], w)
				}
			}
			if p := e.Prereqs("nobody"); p != nil {
				t.Errorf("an unknown target's prerequisites %v", p)
			}
		})
	}
}
