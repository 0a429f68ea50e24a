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

// TestTargetsWide: a target's counts past a byte's range (its narrow
// counts go wide), past a uint16's, a million jobs, in several queues at
// once, purged to zero and counted again, and a job moved out of a state
// it was not counted in: after every step, Of and In are the counts the
// steps make.
func TestTargetsWide(t *testing.T) {
	Q, E, D, F, H := job.Queued, job.Executing, job.Done, job.Failed, job.Held
	type step struct {
		q        int32
		from, to job.State
		n        int // jobs moved
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a byte's worth, then one more", []step{{1, 0, Q, 255}, {1, Q, E, 255}, {1, 0, Q, 255}, {1, 0, Q, 1}, {1, E, D, 255}, {1, Q, 0, 256}, {1, D, 0, 255}, {1, 0, Q, 1}}},
		{"down to zero and past a byte again", []step{{1, 0, Q, 200}, {1, Q, 0, 200}, {1, 0, F, 300}, {1, F, Q, 300}, {1, Q, 0, 299}}},
		{"past a uint16", []step{{1, 0, Q, 70_000}, {1, Q, E, 70_000}, {1, E, D, 69_999}, {1, D, 0, 69_999}}},
		{"a million jobs", []step{{1, 0, Q, 1 << 20}, {1, Q, E, 3}, {1, Q, D, 1<<20 - 3}, {1, D, 0, 1<<20 - 3}, {1, E, 0, 3}}},
		{"several queues, the first narrow", []step{{1, 0, Q, 5}, {2, 0, Q, 5}, {2, Q, E, 5}, {1, Q, F, 5}, {3, 0, H, 1}, {1, F, 0, 5}, {2, E, 0, 5}, {3, H, 0, 1}, {2, 0, Q, 1}}},
		{"several queues, the first wide", []step{{1, 0, Q, 2}, {2, 0, Q, 300}, {1, 0, Q, 300}, {3, 0, Q, 1}, {1, Q, D, 302}, {2, Q, D, 300}, {2, D, 0, 300}, {1, D, 0, 302}, {1, 0, Q, 1}, {3, Q, 0, 1}}},
		{"a second job in another queue", []step{{1, 0, Q, 1}, {1, Q, E, 1}, {2, 0, Q, 1}, {1, E, 0, 1}, {2, Q, D, 1}, {1, 0, Q, 256}}},
		{"out of a state it was not in", []step{{1, 0, Q, 2}, {1, H, D, 1}, {1, 0, Q, 300}, {1, H, D, 1}, {2, 0, Q, 1}, {2, H, D, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts Targets
			want := map[int32]*[128]int{1: {}, 2: {}, 3: {}}
			for i, s := range tc.steps {
				for range s.n {
					ts.Move(1, s.q, s.from, s.to)
				}
				w := want[s.q]
				w[s.from] -= s.n
				w[s.to] += s.n
				w[0] = 0
				var all [128]int
				for q, w := range want {
					for st, n := range w {
						all[st] += n
					}
					if got, ok := ts.In(1, q); got != *w || !ok {
						t.Fatalf("step %d %v: In(1, %d) = %v, %v, want %v", i, s, q, nonZero(got), ok, nonZero(*w))
					}
				}
				if got := ts.Of(1); got != all {
					t.Fatalf("step %d %v: Of(1) = %v, want %v", i, s, nonZero(got), nonZero(all))
				}
			}
		})
	}
}

// TestTargetsRandom: random moves of jobs among a few targets and queues,
// new jobs and purged ones among them, keep the counts a recount of the
// jobs gives, by target and by target and queue, every 500 moves. With
// more queues than a one-job target's byte names (maxSlots), a target
// whose only job was in one of the others says its counts by queue are
// not known, never wrong. A round in three has two targets of three
// states and ten thousand moves: a target's counts in a state go past a
// byte and back.
func TestTargetsRandom(t *testing.T) {
	stored := []job.State{job.Waiting, job.Queued, job.Held, job.Executing, job.Done, job.Failed, job.Blocked, job.Deleted}
	r := rand.New(rand.NewPCG(1, 2))
	wide := 0 // rounds whose counts went past a byte
	for round := range 60 {
		queues := 3
		if round%2 == 1 {
			queues = maxSlots + 5
		}
		targets, states, moves := 8, stored, 2000
		if round%3 == 2 {
			targets, states, moves = 2, stored[:3], 10_000
		}
		var ts Targets
		type jb struct {
			t  dag.TargetID
			q  int32
			st job.State
		}
		jobs := map[int64]jb{}
		next := int64(1)
		check := func(move int) {
			t.Helper()
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
			for tg := dag.TargetID(1); tg <= dag.TargetID(targets); tg++ {
				if got := ts.Of(tg); got != want[tg] {
					t.Fatalf("round %d move %d: target %d: %v, want %v", round, move, tg, nonZero(got), nonZero(want[tg]))
				}
				for q := range int32(queues) {
					got, ok := ts.In(tg, q)
					if !ok && queues <= maxSlots {
						t.Fatalf("round %d move %d: target %d queue %d: not known with %d queues", round, move, tg, q, queues)
					}
					if w := wantIn[[2]int32{int32(tg), q}]; ok && got != w {
						t.Fatalf("round %d move %d: target %d queue %d: %v, want %v", round, move, tg, q, nonZero(got), nonZero(w))
					}
				}
			}
		}
		for move := range moves {
			switch k := r.IntN(10); {
			case k < 3 || len(jobs) == 0: // a new job
				j := jb{dag.TargetID(1 + r.IntN(targets)), int32(r.IntN(queues)), states[r.IntN(len(states))]}
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
				to := states[r.IntN(len(states))]
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
			if (move+1)%500 == 0 {
				check(move + 1)
			}
		}
		if len(ts.wide) > 0 {
			wide++
		}
	}
	if wide == 0 {
		t.Errorf("no round's counts went past a byte")
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
// its own (a million such targets), one in a target of ten (100,000 such).
func BenchmarkTargetMove(b *testing.B) {
	var big, solo, ten Targets
	const n = 1 << 20
	for id := range n {
		big.Move(1, 1, 0, job.Queued)
		solo.Move(dag.TargetID(id+1), 1, 0, job.Queued)
		ten.Move(dag.TargetID(id/10+1), 1, 0, job.Queued)
	}
	b.Run("ten", func(b *testing.B) {
		t := dag.TargetID(0)
		for b.Loop() {
			t = t%(n/10) + 1
			ten.Move(t, 1, job.Queued, job.Executing)
			ten.Move(t, 1, job.Executing, job.Queued)
		}
	})
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
