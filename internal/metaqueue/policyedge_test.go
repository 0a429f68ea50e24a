package metaqueue

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// drain hands out every ready job to ph one at a time, reporting each
// done, and returns the targets in order.
func (e *env) drain(ph int64) []string {
	e.t.Helper()
	var order []string
	for range 100 {
		as := e.next(ph, 1)
		if len(as) == 0 {
			break
		}
		order = append(order, as[0].Target)
		e.report(ph, ok(as[0]))
	}
	return order
}

// TestPolicyOrdersEdges: the ordered policies with no estimates order as
// FCFS, ties go oldest first, unknown runtimes last under sjf; and a
// queue switched between every policy (DC included) with jobs queued
// hands each ready job out once, in the new policy's order at once.
func TestPolicyOrdersEdges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		pols  []string // set before submitting, then each after one job
		specs []protocol.JobSpec
		want  []string
	}{
		{"sjf all unknown is fcfs", []string{"sjf"}, []protocol.JobSpec{qspec("a", 0), qspec("b", 0), qspec("c", 0)}, []string{"a", "b", "c"}},
		{"cp all unknown independent is fcfs", []string{"cp"}, []protocol.JobSpec{qspec("a", 0), qspec("b", 0), qspec("c", 0)}, []string{"a", "b", "c"}},
		{"sjf ties oldest", []string{"sjf"}, []protocol.JobSpec{qspec("a", 5), qspec("b", 2), qspec("c", 5), qspec("d", 2)}, []string{"b", "d", "a", "c"}},
		{"sjf unknown last", []string{"sjf"}, []protocol.JobSpec{qspec("a", 0), qspec("b", 9), qspec("c", 0), qspec("d", 1)}, []string{"d", "b", "a", "c"}},
		// fcfs: a; sjf: b (1 s); dc: c (the oldest, no data); fcfs: d;
		// cp: g (4 s, the largest b-level); dc: e (oldest); sjf: f (2 s).
		{"switches", []string{"fcfs", "sjf", "dc", "fcfs", "cp", "dc", "sjf"},
			[]protocol.JobSpec{qspec("a", 9), qspec("b", 1), qspec("c", 5), qspec("d", 0), qspec("e", 3), qspec("f", 2), qspec("g", 4)},
			[]string{"a", "b", "c", "d", "g", "e", "f"}},
		// The bag-of-tasks choosers with no files, switched in and out:
		// every job once.
		{"bag switches", []string{"sa", "wqr", "xsufferage", "dc", "sa", "fcfs", "xsufferage", "wqr"},
			[]protocol.JobSpec{qspec("a", 9), qspec("b", 1), qspec("c", 5), qspec("d", 0), qspec("e", 3), qspec("f", 2), qspec("g", 4), qspec("h", 0), qspec("i", 1)}, nil},
		{"xsufferage no files", []string{"xsufferage"}, []protocol.JobSpec{qspec("a", 0), qspec("b", 2), qspec("c", 0)}, nil},
		{"sa no files", []string{"sa"}, []protocol.JobSpec{qspec("a", 0), qspec("b", 2), qspec("c", 0)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.setPolicy("q", tc.pols[0])
			ids := e.submit(tc.specs...)
			ph := e.register("s")
			var order []string
			for _, p := range tc.pols[1:] {
				as := e.next(ph, 1)
				if len(as) == 0 {
					t.Fatalf("nothing after switching")
				}
				order = append(order, as[0].Target)
				e.report(ph, ok(as[0]))
				e.setPolicy("q", p)
				e.check()
			}
			order = append(order, e.drain(ph)...)
			if len(order) != len(ids) {
				t.Fatalf("ran %d of %d jobs: %v", len(order), len(ids), order)
			}
			if tc.want != nil && !slices.Equal(order, tc.want) {
				t.Fatalf("order %v, want %v", order, tc.want)
			}
			e.check()
		})
	}
}
