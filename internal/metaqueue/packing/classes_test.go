package packing

import (
	"testing"

	"github.com/mq-hpc/mq/internal/resource"
)

// TestHoldsClass: placeholders of one shape share a class; a class holds
// the jobs an empty placeholder of its shape could run; a placeholder
// without a pool (or gone) is class 0, a slot.
func TestHoldsClass(t *testing.T) {
	p := New()
	for ph, c := range map[int64]resource.Capacity{1: {CPUs: 4, Mem: 8 * gib}, 2: {CPUs: 1}, 3: {CPUs: 4, Mem: 8 * gib}} {
		if err := p.Placeholder(ph, c); err != nil {
			t.Fatal(err)
		}
	}
	big, small := p.Class(1), p.Class(2)
	if big == 0 || small == 0 || big == small || p.Class(3) != big {
		t.Fatalf("classes %d, %d, %d: want the two 4-core placeholders alike and the 1-core one apart, none 0", big, small, p.Class(3))
	}
	p.Job(10, resource.Request{CPUs: 2}, resource.Category{})
	p.Job(11, resource.Request{Mem: 16 * gib}, resource.Category{})
	p.Job(12, resource.Request{CPUs: 2, AutoMem: true}, resource.Category{Target: "t"})
	tests := []struct {
		class int32
		job   int64
		want  bool
	}{
		{big, 10, true}, {small, 10, false},
		{big, 11, false}, {small, 11, true}, // memory not known there: not counted
		{big, 12, true}, {small, 12, false},
		{big, 99, true}, {small, 99, true}, {0, 99, true}, // a job that asks for nothing
		{0, 10, false}, // a slot holds no job that asks
	}
	for _, tc := range tests {
		if got := p.HoldsClass(tc.class, tc.job); got != tc.want {
			t.Errorf("HoldsClass(%d, job %d) = %v, want %v", tc.class, tc.job, got, tc.want)
		}
	}
	p.PlaceholderGone(2)
	if p.Class(2) != 0 {
		t.Error("a placeholder gone keeps its class")
	}
}
