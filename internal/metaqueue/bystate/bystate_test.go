package bystate

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/job"
)

func TestSetsMoveAndIDs(t *testing.T) {
	var s Sets
	for id := int64(1); id <= 1000; id++ {
		s.Move(id, 1, 1, 0, job.Queued)
	}
	for _, id := range []int64{63, 64, 65, 127, 128, 999} {
		s.Move(id, 1, 1, job.Queued, job.Failed)
	}
	s.Move(500, 1, 1, job.Queued, job.Executing)
	s.Move(500, 1, 1, job.Executing, job.Done)
	s.Move(999, 1, 1, job.Failed, 0) // purged
	s.Move(5000, 1, 1, 0, job.Deleted)
	s.Move(7, 1, 1, job.Held, job.Done) // not held: only enters D
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

// BenchmarkMove is what a change of a job's state adds to the core: a job
// of a million moved from Q to E to D, and a page of a state with one job
// in 1,000 over the million ids.
func BenchmarkMove(b *testing.B) {
	var s Sets
	const n = 1 << 20
	for id := int64(1); id <= n; id++ {
		s.Move(id, 1, 1, 0, job.Queued)
		if id%1000 == 0 {
			s.Move(id, 1, 1, job.Queued, job.Failed)
		}
	}
	b.Run("move", func(b *testing.B) {
		id := int64(0)
		for b.Loop() {
			id = id%n + 1
			s.Move(id, 1, 1, job.Queued, job.Executing)
			s.Move(id, 1, 1, job.Executing, job.Queued)
		}
	})
	b.Run("page", func(b *testing.B) {
		for b.Loop() {
			if ids, _, _ := s.Page([]job.State{job.Failed}, 0, 1000); len(ids) != 1000 {
				b.Fatal(len(ids))
			}
		}
	})
}

func TestSetsSpan(t *testing.T) {
	var s Sets
	for id := int64(1); id <= 300; id++ {
		st := job.Queued
		switch {
		case id%7 == 0:
			st = job.Failed
		case id%5 == 0:
			st = job.Done
		}
		s.Move(id, 1, 1, 0, st)
	}
	for _, tc := range [][2]int64{{1, 300}, {1, 1}, {63, 64}, {64, 127}, {65, 200}, {0, 1000}, {250, 240}, {301, 400}} {
		var want [128]int
		for id := max(tc[0], 1); id <= min(tc[1], 300); id++ {
			switch {
			case id%7 == 0:
				want[job.Failed]++
			case id%5 == 0:
				want[job.Done]++
			default:
				want[job.Queued]++
			}
		}
		if got := s.Span(tc[0], tc[1]); got != want {
			t.Errorf("Span(%d, %d): Q %d D %d F %d, want %d %d %d", tc[0], tc[1], got[job.Queued], got[job.Done], got[job.Failed],
				want[job.Queued], want[job.Done], want[job.Failed])
		}
	}
}
