package bystate

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/job"
)

func TestSetsMoveAndIDs(t *testing.T) {
	var s Sets
	for id := int64(1); id <= 1000; id++ {
		s.Move(id, 0, job.Queued)
	}
	for _, id := range []int64{63, 64, 65, 127, 128, 999} {
		s.Move(id, job.Queued, job.Failed)
	}
	s.Move(500, job.Queued, job.Executing)
	s.Move(500, job.Executing, job.Done)
	s.Move(999, job.Failed, 0) // purged
	s.Move(5000, 0, job.Deleted)
	s.Move(7, job.Held, job.Done) // not held: only enters D
	for _, tc := range []struct {
		states []job.State
		after  int64
		limit  int
		want   []int64
	}{
		{[]job.State{job.Failed}, 0, 0, []int64{63, 64, 65, 127, 128}},
		{[]job.State{job.Failed}, 63, 0, []int64{64, 65, 127, 128}},
		{[]job.State{job.Failed}, 64, 2, []int64{65, 127}},
		{[]job.State{job.Failed}, 128, 0, nil},
		{[]job.State{job.Failed, job.Done}, 100, 0, []int64{127, 128, 500}},
		{[]job.State{job.Failed, job.Done, job.Deleted}, 128, 0, []int64{500, 5000}},
		{[]job.State{job.Done}, -5, 0, []int64{7, 500}},
		{[]job.State{job.Executing, job.Blocked}, 0, 0, nil},
	} {
		if got := s.IDs(nil, tc.states, tc.after, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("IDs(%q, after %d, limit %d) = %v, want %v", tc.states, tc.after, tc.limit, got, tc.want)
		}
	}
	in, all := s.Count([]job.State{job.Failed, job.Done})
	if in != 7 || all != 1001 { // 5 F, 2 D; and 993 Q (7 among them: it was not held), 1 X
		t.Errorf("Count(F, D) = %d, %d; want 7, 1001", in, all)
	}
	s.Reset()
	if got := s.IDs(nil, []job.State{job.Queued}, 0, 0); len(got) != 0 {
		t.Errorf("after Reset: %v", got)
	}
}
