package bystate

import (
	"math/rand/v2"
	"testing"
)

// TestSpansRandom: jobs given to a few queues in id order, in runs and
// alone, leave each queue at most maxRuns runs, in id order and apart,
// that hold every job of it; a queue with few jobs keeps them exactly.
func TestSpansRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := range 50 {
		var s Spans
		jobs := map[int32][]int64{}
		id := int64(1)
		for range 500 {
			q := int32(r.IntN(4))
			for range 1 + r.IntN(20)*r.IntN(2) {
				s.Add(q, id)
				jobs[q] = append(jobs[q], id)
				id++
			}
			id += int64(r.IntN(3)) // purged, or never given
		}
		s.Add(1<<20, id) // past maxQueue: its runs are not kept
		if _, ok := s.Of(1 << 20); ok {
			t.Fatalf("round %d: runs of a queue past maxQueue said known", round)
		}
		for q := range int32(5) {
			runs, ok := s.Of(q)
			if !ok || len(runs) > maxRuns {
				t.Fatalf("round %d: queue %d: %d runs, known %v", round, q, len(runs), ok)
			}
			for i, run := range runs {
				if run.First > run.Last || (i > 0 && run.First <= runs[i-1].Last+1) {
					t.Fatalf("round %d: queue %d: runs %v not in order and apart", round, q, runs)
				}
			}
			i := 0
			for _, id := range jobs[q] {
				for i < len(runs) && runs[i].Last < id {
					i++
				}
				if i == len(runs) || id < runs[i].First {
					t.Fatalf("round %d: queue %d: job %d outside its runs %v", round, q, id, runs)
				}
			}
		}
	}
	var s Spans
	for _, id := range []int64{3, 4, 5, 9, 20} {
		s.Add(2, id)
	}
	if runs, _ := s.Of(2); len(runs) != 3 || runs[0] != (Run{3, 5}) || runs[1] != (Run{9, 9}) || runs[2] != (Run{20, 20}) {
		t.Errorf("runs %v, want 3-5, 9, 20", runs)
	}
}

// TestSpansDisordered: a job below its queue's last run (which the core
// never gives) makes every queue's runs unknown rather than wrong.
func TestSpansDisordered(t *testing.T) {
	var s Spans
	s.Add(1, 100)
	s.Add(2, 101)
	s.Add(1, 50)
	for q := range int32(3) {
		if runs, ok := s.Of(q); ok {
			t.Errorf("queue %d: runs %v said known after a job out of order", q, runs)
		}
	}
}
