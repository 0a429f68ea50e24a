package main

import (
	"math/rand/v2"
	"testing"

	"github.com/mq-hpc/mq/internal/plan"
	"github.com/mq-hpc/mq/internal/policy"
)

// Decoding wfideal's cp list the way plan.SearchList does gives
// taskDAG.schedule's makespan under policy.CP, so wfsearch's cp= is
// wfideal's.
func TestCPListDecodesAsSchedule(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		n := 2 + rng.IntN(40)
		p := rng.Float64() * 0.3
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
		slots := 1 + rng.IntN(5)
		b, _ := policy.BLevels(d.runtime, d.prereqs)
		_, got := plan.DecodeList(d.runtime, d.prereqs, slots, d.cpList())
		if want := d.schedule(slots, policy.CP{}, b); got != want {
			t.Fatalf("trial %d: cp list decodes to %v, schedule with cp gives %v", trial, got, want)
		}
	}
}
