package metaqueue

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestEdgeSet: prerequisites come back once each, in the order first
// named, after-ok and after-any alike, for short lists and for lists past
// scanLimit; targets without prerequisites are not listed.
func TestEdgeSet(t *testing.T) {
	t.Parallel()
	var many []string
	for i := range 3 * scanLimit {
		many = append(many, fmt.Sprintf("p%d", i))
	}
	tests := []struct {
		name  string
		specs []protocol.JobSpec
		want  map[string][]string
	}{
		{"none", []protocol.JobSpec{{Target: "a"}}, map[string][]string{}},
		{"pipeline", []protocol.JobSpec{{Target: "a"}, {Target: "b", Prereqs: []string{"a"}}, {Target: "c", Prereqs: []string{"b"}, AfterAny: []string{"a"}}},
			map[string][]string{"b": {"a"}, "c": {"b", "a"}}},
		{"repeats", []protocol.JobSpec{{Target: "b", Prereqs: []string{"a", "x"}}, {Target: "b", Prereqs: []string{"x", "y"}, AfterAny: []string{"a"}}},
			map[string][]string{"b": {"a", "x", "y"}}},
		{"long", []protocol.JobSpec{{Target: "m", Prereqs: many[:scanLimit]}, {Target: "m", Prereqs: many}, {Target: "m", AfterAny: many[scanLimit-2:]}},
			map[string][]string{"m": many}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEdgeSet()
			for i := range tt.specs {
				e.add(&tt.specs[i])
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
