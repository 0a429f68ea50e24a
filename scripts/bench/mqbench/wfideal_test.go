package main

import (
	"testing"

	"github.com/mq-hpc/mq/internal/policy"
)

// On 2 slots, four 1 s tasks listed before a chain of three 10 s tasks:
// FCFS runs the short ones first (2 + 30 s), cp starts the chain at once
// (30 s).
func TestScheduleCPBeatsFCFS(t *testing.T) {
	d := &taskDAG{
		runtime: []float64{1, 1, 1, 1, 10, 10, 10},
		prereqs: [][]int32{nil, nil, nil, nil, nil, {4}, {5}},
		users:   [][]int32{nil, nil, nil, nil, {5}, {6}, nil},
	}
	fcfs := d.schedule(2, policy.FCFS{}, nil)
	b, ok := policy.BLevels(d.runtime, d.prereqs)
	if !ok {
		t.Fatal("cycle")
	}
	cp := d.schedule(2, policy.CP{}, b)
	if fcfs != 32 || cp != 30 {
		t.Fatalf("makespan fcfs %v, cp %v; want 32 and 30", fcfs, cp)
	}
}

// A 10 s split, 80 one-second tasks, a 10 s merge, on 8 slots: the critical
// path is 21 s and work/slots 12.5 s, but the 80 tasks must all run in the
// second after the split for 21 s to hold; the best schedule takes 30 s,
// which the Fernández-Bussell bound finds.
func TestFBBoundForkJoin(t *testing.T) {
	const mid = 80
	d := &taskDAG{runtime: []float64{10}, prereqs: [][]int32{nil}, users: [][]int32{nil}}
	merge := int32(mid + 1)
	var all []int32
	for i := 1; i <= mid; i++ {
		d.runtime = append(d.runtime, 1)
		d.prereqs = append(d.prereqs, []int32{0})
		d.users = append(d.users, []int32{merge})
		d.users[0] = append(d.users[0], int32(i))
		all = append(all, int32(i))
	}
	d.runtime = append(d.runtime, 10)
	d.prereqs = append(d.prereqs, all)
	d.users = append(d.users, nil)
	if got := d.fbBound(8); got != 30 {
		t.Fatalf("fbBound = %v, want 30", got)
	}
	if got := d.schedule(8, policy.FCFS{}, nil); got != 30 {
		t.Fatalf("schedule = %v, want 30", got)
	}
	// A chain is its own bound, and so is work spread evenly.
	chain := &taskDAG{runtime: []float64{3, 4}, prereqs: [][]int32{nil, {0}}, users: [][]int32{{1}, nil}}
	if got := chain.fbBound(4); got != 7 {
		t.Fatalf("chain: fbBound = %v, want 7", got)
	}
	flat := &taskDAG{runtime: []float64{2, 2, 2, 2}, prereqs: make([][]int32, 4), users: make([][]int32, 4)}
	if got := flat.fbBound(2); got != 4 {
		t.Fatalf("flat: fbBound = %v, want 4", got)
	}
}

// Nine tasks of 5 s on eight slots: two run back to back (10 s), which
// the preemptive Fernández-Bussell bound (45/8 s) does not see.
func TestPairBound(t *testing.T) {
	d := &taskDAG{runtime: make([]float64, 9), prereqs: make([][]int32, 9), users: make([][]int32, 9)}
	for i := range d.runtime {
		d.runtime[i] = 5
	}
	if got := d.pairBound(8); got != 10 {
		t.Fatalf("pairBound = %v, want 10", got)
	}
	if got := d.fbBound(8); got != 5.625 {
		t.Fatalf("fbBound = %v, want 5.625", got)
	}
	if got := d.schedule(8, policy.FCFS{}, nil); got != 10 {
		t.Fatalf("schedule = %v, want 10", got)
	}
	// With a 1 s head before one of them and no more tasks than slots,
	// nothing need share a slot.
	if got := (&taskDAG{runtime: []float64{1, 5}, prereqs: [][]int32{nil, {0}}, users: [][]int32{{1}, nil}}).pairBound(2); got != 0 {
		t.Fatalf("two tasks on two slots: pairBound = %v, want 0", got)
	}
}
