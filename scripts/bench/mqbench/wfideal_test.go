package main

import (
	"testing"

	"github.com/mq-hpc/mq/policy"
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
