package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/policy"
)

// randomDAG is n tasks of 0-9 s, each needing each earlier task with
// probability p.
func randomDAG(rng *rand.Rand, n int, p float64) *taskDAG {
	d := &taskDAG{runtime: make([]float64, n), prereqs: make([][]int32, n), users: make([][]int32, n)}
	for i := range n {
		d.runtime[i] = float64(rng.IntN(10))
		for j := range i {
			if rng.Float64() < p {
				d.prereqs[i] = append(d.prereqs[i], int32(j))
				d.users[j] = append(d.users[j], int32(i))
			}
		}
	}
	return d
}

// Decoding cp's list is taskDAG.schedule under policy.CP, and any list
// decodes to a schedule that keeps the precedences, runs at most slots
// tasks at once, and never leaves a slot idle while a task is ready (what
// a live CLS following the list by priorities can do).
func TestListSchedule(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		d := randomDAG(rng, 2+rng.IntN(40), rng.Float64()*0.3)
		slots := 1 + rng.IntN(5)
		s := newListSched(d, slots)
		b, _ := policy.BLevels(d.runtime, d.prereqs)
		if got, want := s.makespan(d.cpList()), d.schedule(slots, policy.CP{}, b); got != want {
			t.Fatalf("trial %d: cp list decodes to %v, schedule with cp gives %v", trial, got, want)
		}
		list := d.cpList()
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		ms := s.makespan(list)
		var events []float64
		for i := range d.runtime {
			if s.finish[i] > ms {
				t.Fatalf("trial %d: task %d ends at %v after the makespan %v", trial, i, s.finish[i], ms)
			}
			for _, p := range d.prereqs[i] {
				if s.start[i] < s.finish[p] {
					t.Fatalf("trial %d: task %d starts at %v before its prerequisite %d ends at %v", trial, i, s.start[i], p, s.finish[p])
				}
			}
			events = append(events, s.start[i], s.finish[i])
		}
		// At every instant: running tasks <= slots, and if fewer run, no
		// task is ready (its prerequisites done) and not yet started.
		for _, at := range events {
			running, waiting := 0, false
			for i := range d.runtime {
				if s.start[i] <= at && at < s.finish[i] {
					running++
				}
				if s.start[i] > at && !slices.ContainsFunc(d.prereqs[i], func(p int32) bool { return s.finish[p] > at }) {
					waiting = true
				}
			}
			if running > slots || (running < slots && waiting) {
				t.Fatalf("trial %d at %v: %d running on %d slots, a task ready and waiting: %v", trial, at, running, slots, waiting)
			}
		}
	}
}

// Graham's worst case for longest-first on 8 slots: two tasks each of
// 15..9 s and three of 8 s. cp's list (longest first) takes 31 s; the
// optimum is work/slots, 24 s (15+9, 14+10, ... and 8+8+8), and a list
// schedule reaches it, so the search must.
func TestSearchBeatsLongestFirst(t *testing.T) {
	var rt []float64
	for p := 15.0; p >= 9; p-- {
		rt = append(rt, p, p)
	}
	rt = append(rt, 8, 8, 8)
	d := &taskDAG{runtime: rt, prereqs: make([][]int32, len(rt)), users: make([][]int32, len(rt))}
	r := d.search(8, 1, 100_000, time.Minute)
	if r.cp != 31 || r.makespan != 24 {
		t.Fatalf("cp %v, searched %v; want 31 and 24", r.cp, r.makespan)
	}
	if got := newListSched(d, 8).makespan(r.list); got != 24 {
		t.Fatalf("the best list decodes to %v, want 24", got)
	}
	// The same seed and budget give the same list.
	if again := d.search(8, 1, 100_000, time.Minute); !slices.Equal(again.list, r.list) {
		t.Fatalf("seed 1 gave two lists: %v and %v", r.list, again.list)
	}
}

// A forward-backward pass alone fixes a list that starts a chain's short
// head late: on 2 slots, 1 s tasks before a chain 1 s -> 10 s.
func TestFBIStartsChainFirst(t *testing.T) {
	d := &taskDAG{
		runtime: []float64{1, 1, 1, 1, 1, 10},
		prereqs: [][]int32{nil, nil, nil, nil, nil, {4}},
		users:   [][]int32{nil, nil, nil, nil, {5}, nil},
	}
	fw, bw := newListSched(d, 2), newListSched(d.reversed(), 2)
	list := []int32{0, 1, 2, 3, 4, 5}
	ms := fw.makespan(list)
	_, got, _ := fbi(fw, bw, list, ms)
	if ms != 13 || got != 11 {
		t.Fatalf("fifo %v, after forward-backward %v; want 13 and 11", ms, got)
	}
}
