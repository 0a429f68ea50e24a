package plan

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
)

// Any list decodes to a schedule that keeps the precedences, runs at most
// slots tasks at once, and never leaves a slot idle while a task is
// ready (what the CLS following a plan's order does); the list SearchList
// returns (in start order) decodes to the schedule it reports.
func TestListSchedules(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		n := 2 + rng.IntN(40)
		p := rng.Float64() * 0.3
		rt, pre := make([]float64, n), make([][]int32, n)
		for i := range n {
			rt[i] = float64(rng.IntN(10))
			for j := range i {
				if rng.Float64() < p {
					pre[i] = append(pre[i], int32(j))
				}
			}
		}
		slots := 1 + rng.IntN(5)
		list := make([]int32, n)
		for i := range list {
			list[i] = int32(i)
		}
		rng.Shuffle(n, func(i, j int) { list[i], list[j] = list[j], list[i] })
		start, ms := DecodeList(rt, pre, slots, list)
		var events []float64
		for i := range n {
			if start[i]+rt[i] > ms {
				t.Fatalf("trial %d: task %d ends at %v after the makespan %v", trial, i, start[i]+rt[i], ms)
			}
			for _, q := range pre[i] {
				if start[i] < start[q]+rt[q] {
					t.Fatalf("trial %d: task %d starts at %v before its prerequisite %d ends at %v", trial, i, start[i], q, start[q]+rt[q])
				}
			}
			events = append(events, start[i], start[i]+rt[i])
		}
		for _, at := range events {
			running, waiting := 0, false
			for i := range n {
				if start[i] <= at && at < start[i]+rt[i] {
					running++
				}
				if start[i] > at && !slices.ContainsFunc(pre[i], func(q int32) bool { return start[q]+rt[q] > at }) {
					waiting = true
				}
			}
			if running > slots || (running < slots && waiting) {
				t.Fatalf("trial %d at %v: %d running on %d slots, a ready task waiting: %v", trial, at, running, slots, waiting)
			}
		}
		r, err := SearchList(context.Background(), rt, pre, slots, 1, 2000, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Makespan > r.First {
			t.Fatalf("trial %d: searched %v, worse than the first list's %v", trial, r.Makespan, r.First)
		}
		if st, got := DecodeList(rt, pre, slots, r.List); got != r.Makespan || !slices.Equal(st, r.Start) {
			t.Fatalf("trial %d: the best list decodes to %v, the search says %v", trial, got, r.Makespan)
		}
	}
}

// graham is Graham's worst case for longest-first on 8 slots: two
// independent tasks each of 15..9 s and three of 8 s. Longest first
// takes 31 s; the optimum is work/slots, 24 s (15+9, 14+10, ... and
// 8+8+8), and a list schedule reaches it.
func graham() []float64 {
	var rt []float64
	for p := 15.0; p >= 9; p-- {
		rt = append(rt, p, p)
	}
	return append(rt, 8, 8, 8)
}

func TestSearchListBeatsLongestFirst(t *testing.T) {
	t.Parallel()
	rt := graham()
	pre := make([][]int32, len(rt))
	r, err := SearchList(context.Background(), rt, pre, 8, 1, 100_000, 5*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.First != 31 || r.Makespan != 24 {
		t.Fatalf("longest first %v, searched %v; want 31 and 24", r.First, r.Makespan)
	}
	again, _ := SearchList(context.Background(), rt, pre, 8, 1, 100_000, 5*time.Minute, nil)
	if !slices.Equal(again.List, r.List) {
		t.Fatalf("seed 1 gave two lists: %v and %v", r.List, again.List)
	}
}

// A forward-backward pass alone fixes a list that starts a chain's short
// head late: on 2 slots, 1 s tasks before a chain 1 s -> 10 s.
func TestForwardBackward(t *testing.T) {
	t.Parallel()
	rt := []float64{1, 1, 1, 1, 1, 10}
	pre := [][]int32{nil, nil, nil, nil, nil, {4}}
	r, err := SearchList(context.Background(), rt, pre, 2, 1, 0, time.Minute, []int32{0, 1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	if r.First != 13 || r.Justified != 11 {
		t.Fatalf("first %v, after forward-backward %v; want 13 and 11", r.First, r.Justified)
	}
}

// The planner on one site of 8 slots plans Graham's case at its optimum,
// and the plan's order, followed the CLS's way, gives it.
func TestListSearchPlan(t *testing.T) {
	t.Parallel()
	p := policy.Problem{Sites: []policy.PlanSite{{Name: "local", Slots: 8}}, Seed: 1}
	for i, r := range graham() {
		p.Jobs = append(p.Jobs, policy.PlanJob{ID: int64(10 + i), Est: map[string]float64{"local": r}})
	}
	pl, err := ListSearch{Evals: 100_000, TimeLimit: 5 * time.Minute}.Plan(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Makespan != 24 || len(pl.Order) != len(p.Jobs) {
		t.Fatalf("planned %v s over %d jobs; want 24 s over %d", pl.Makespan, len(pl.Order), len(p.Jobs))
	}
	list := make([]int32, len(pl.Order))
	for k, id := range pl.Order {
		list[k] = int32(id - 10)
	}
	if _, ms := DecodeList(graham(), make([][]int32, len(list)), 8, list); ms != 24 {
		t.Fatalf("the plan's order decodes to %v, want 24", ms)
	}
	if h, err := (HEFT{}).Plan(context.Background(), p); err != nil || h.Makespan != 31 {
		t.Fatalf("HEFT planned %v (%v); want longest first's 31", h.Makespan, err)
	}
}
