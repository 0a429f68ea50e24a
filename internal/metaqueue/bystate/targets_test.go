package bystate

import (
	"math/rand/v2"
	"testing"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/job"
)

// TestTargetsMove: a target of one job, one that gains a second, loses
// its jobs to a purge and gains one again, and an unknown one.
func TestTargetsMove(t *testing.T) {
	var s Sets
	s.Move(1, 1, 1, 0, job.Queued)         // target 1: one job
	s.Move(1, 1, 1, job.Queued, job.Held)  // held
	s.Move(2, 2, 1, 0, job.Waiting)        // target 2: one job, then two
	s.Move(3, 2, 1, 0, job.Queued)         // its second
	s.Move(2, 2, 1, job.Waiting, job.Done) // its first moves on
	s.Move(4, 5, 1, 0, job.Failed)         // target 5: one ended job, purged
	s.Move(4, 5, 1, job.Failed, 0)
	s.Move(6, 7, 1, 0, job.Done) // target 7: two jobs, both purged, then one
	s.Move(7, 7, 1, 0, job.Done)
	s.Move(6, 7, 1, job.Done, 0)
	s.Move(7, 7, 1, job.Done, 0)
	s.Move(8, 7, 1, 0, job.Executing)
	for _, tc := range []struct {
		t    dag.TargetID
		want map[job.State]int
	}{
		{1, map[job.State]int{job.Held: 1}},
		{2, map[job.State]int{job.Done: 1, job.Queued: 1}},
		{3, nil},
		{5, nil},
		{7, map[job.State]int{job.Executing: 1}},
		{0, nil},
		{-1, nil},
		{1 << 20, nil},
	} {
		var want [128]int
		for st, n := range tc.want {
			want[st] = n
		}
		if got := s.Target(tc.t); got != want {
			t.Errorf("Target(%d) = %v, want %v", tc.t, nonZero(got), tc.want)
		}
		if got, ok := s.TargetIn(tc.t, 1); got != want || !ok {
			t.Errorf("TargetIn(%d, 1) = %v, %v, want %v", tc.t, nonZero(got), ok, tc.want)
		}
		if got, ok := s.TargetIn(tc.t, 2); got != ([128]int{}) || !ok {
			t.Errorf("TargetIn(%d, 2) = %v, %v, want none", tc.t, nonZero(got), ok)
		}
	}
	s.Reset()
	if got := s.Target(1); got != ([128]int{}) {
		t.Errorf("after Reset: %v", nonZero(got))
	}
}

// TestTargetsRandom: random moves of jobs among a few targets and queues,
// new jobs and purged ones among them, keep the counts a recount of the
// jobs gives, by target and by target and queue. With more queues than a
// one-job target's byte names (maxSlots), a target whose only job was in
// one of the others says its counts by queue are not known, never wrong.
func TestTargetsRandom(t *testing.T) {
	stored := []job.State{job.Waiting, job.Queued, job.Held, job.Executing, job.Done, job.Failed, job.Blocked, job.Deleted}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		queues := 3
		if round%2 == 1 {
			queues = maxSlots + 5
		}
		var ts Targets
		type jb struct {
			t  dag.TargetID
			q  int32
			st job.State
		}
		jobs := map[int64]jb{}
		next := int64(1)
		for range 2000 {
			switch k := r.IntN(10); {
			case k < 3 || len(jobs) == 0: // a new job
				j := jb{dag.TargetID(1 + r.IntN(8)), int32(r.IntN(queues)), stored[r.IntN(len(stored))]}
				if r.IntN(4) > 0 { // most targets' jobs are in one queue
					j.q = int32(j.t) % int32(queues)
				}
				jobs[next] = j
				ts.Move(j.t, j.q, 0, j.st)
				next++
			default: // one moves, or is purged
				id := 1 + r.Int64N(next-1)
				j, ok := jobs[id]
				if !ok {
					continue
				}
				to := stored[r.IntN(len(stored))]
				if k == 9 {
					to = 0
				}
				ts.Move(j.t, j.q, j.st, to)
				if to == 0 {
					delete(jobs, id)
				} else {
					jobs[id] = jb{j.t, j.q, to}
				}
			}
		}
		want := map[dag.TargetID][128]int{}
		wantIn := map[[2]int32][128]int{}
		for _, j := range jobs {
			c := want[j.t]
			c[j.st]++
			want[j.t] = c
			c = wantIn[[2]int32{int32(j.t), j.q}]
			c[j.st]++
			wantIn[[2]int32{int32(j.t), j.q}] = c
		}
		for tg := dag.TargetID(1); tg <= 8; tg++ {
			if got := ts.Of(tg); got != want[tg] {
				t.Fatalf("round %d: target %d: %v, want %v", round, tg, nonZero(got), nonZero(want[tg]))
			}
			for q := range int32(queues) {
				got, ok := ts.In(tg, q)
				if !ok && queues <= maxSlots {
					t.Fatalf("round %d: target %d queue %d: not known with %d queues", round, tg, q, queues)
				}
				if w := wantIn[[2]int32{int32(tg), q}]; ok && got != w {
					t.Fatalf("round %d: target %d queue %d: %v, want %v", round, tg, q, nonZero(got), nonZero(w))
				}
			}
		}
	}
}

func nonZero(c [128]int) map[string]int {
	m := map[string]int{}
	for st, n := range c {
		if n != 0 {
			m[string(rune(st))] = n
		}
	}
	return m
}

// BenchmarkTargetMove is what keeping the targets' counts adds to a change
// of a job's state: one in a target of a million jobs, one in a target of
// its own (a million such targets).
func BenchmarkTargetMove(b *testing.B) {
	var big, solo Targets
	const n = 1 << 20
	for id := range n {
		big.Move(1, 1, 0, job.Queued)
		solo.Move(dag.TargetID(id+1), 1, 0, job.Queued)
	}
	b.Run("big", func(b *testing.B) {
		for b.Loop() {
			big.Move(1, 1, job.Queued, job.Executing)
			big.Move(1, 1, job.Executing, job.Queued)
		}
	})
	b.Run("solo", func(b *testing.B) {
		t := dag.TargetID(0)
		for b.Loop() {
			t = t%n + 1
			solo.Move(t, 1, job.Queued, job.Executing)
			solo.Move(t, 1, job.Executing, job.Queued)
		}
	})
}
