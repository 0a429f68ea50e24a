package packing

import (
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
)

// TestNeed: placeholders of a shape that jobs need at least, per resource
// the larger of sum over amount and jobs over half of it, the largest of
// the resources; jobs the shape cannot hold are not counted.
func TestNeed(t *testing.T) {
	t.Parallel()
	gpus := func(n int) []string {
		var ids []string
		for i := range n {
			ids = append(ids, string(rune('0'+i)))
		}
		return ids
	}
	many := func(n int, r resource.Request) []resource.Request {
		out := make([]resource.Request, n)
		for i := range out {
			out[i] = r
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		shape resource.Capacity
		jobs  []resource.Request
		held  int
		whole int
		asks  bool
	}{
		{"no work", resource.Capacity{CPUs: 16}, nil, 0, 0, false},
		{"slots: jobs over cores", resource.Capacity{CPUs: 16}, many(33, resource.Request{}), 33, 3, false},
		{"one-core shape: a job each", resource.Capacity{CPUs: 1}, many(5, resource.Request{}), 5, 5, false},
		{"8-core jobs, 16 cores: two each", resource.Capacity{CPUs: 16}, many(100, resource.Request{CPUs: 8}), 100, 50, true},
		{"9-core jobs, 16 cores: one each (wide)", resource.Capacity{CPUs: 16}, many(10, resource.Request{CPUs: 9}), 10, 10, true},
		{"mixed cores sum", resource.Capacity{CPUs: 16}, []resource.Request{{CPUs: 8}, {CPUs: 4}, {CPUs: 2}, {}, {}, {CPUs: 4}}, 6, 2, true},
		{"memory decides", resource.Capacity{CPUs: 16, Mem: 64 * gib}, many(10, resource.Request{Mem: 32 * gib}), 10, 5, true},
		{"memory over half: one each", resource.Capacity{CPUs: 16, Mem: 64 * gib}, many(3, resource.Request{Mem: 40 * gib}), 3, 3, true},
		{"memory not declared: not counted", resource.Capacity{CPUs: 16}, many(10, resource.Request{Mem: 32 * gib}), 10, 1, false},
		{"wide on different resources share", resource.Capacity{CPUs: 16, Mem: 64 * gib}, []resource.Request{{CPUs: 9, Mem: gib}, {CPUs: 1, Mem: 40 * gib}}, 2, 1, true},
		{"GPUs decide", resource.Capacity{CPUs: 16, GPUIDs: gpus(4)}, many(5, resource.Request{GPUs: 1}), 5, 2, true},
		{"GPU jobs on a shape without GPUs: none held", resource.Capacity{CPUs: 16}, many(5, resource.Request{GPUs: 1}), 0, 0, false},
		{"4-core jobs, 2 cores: none held", resource.Capacity{CPUs: 2}, many(7, resource.Request{CPUs: 4}), 0, 0, false},
		{"only what the shape holds counts", resource.Capacity{CPUs: 2}, []resource.Request{{CPUs: 4}, {CPUs: 2}, {}}, 2, 2, true},
		{"named amounts", resource.Capacity{CPUs: 16, Named: map[string]int{"lic": 2}}, many(3, resource.Request{Named: map[string]int{"lic": 1}}), 3, 2, true},
		{"named not declared: none held", resource.Capacity{CPUs: 16}, many(3, resource.Request{Named: map[string]int{"lic": 1}}), 0, 0, false},
		{"no shape: jobs count, nothing measured", resource.Capacity{}, many(4, resource.Request{CPUs: 8}), 4, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n Need
			held := 0
			for _, r := range tc.jobs {
				if n.Add(tc.shape, r) {
					held++
				}
			}
			if held != tc.held || n.Jobs != tc.held {
				t.Errorf("held %d (Jobs %d), want %d", held, n.Jobs, tc.held)
			}
			if got := n.Whole(); got != tc.whole {
				t.Errorf("Whole = %d (%g), want %d", got, n.Placeholders(), tc.whole)
			}
			if n.Asks != tc.asks {
				t.Errorf("Asks = %v, want %v", n.Asks, tc.asks)
			}
		})
	}
}

// TestNeedSlots: k jobs that ask for nothing count as k one-core jobs,
// whether added one by one or at once.
func TestNeedSlots(t *testing.T) {
	t.Parallel()
	for _, shape := range []resource.Capacity{{CPUs: 1}, {CPUs: 3}, {CPUs: 16, Mem: gib}, {}} {
		for _, k := range []int{0, 1, 2, 3, 7, 48, 1000} {
			var one, all Need
			for range k {
				one.Add(shape, resource.Request{})
			}
			all.AddSlots(shape, k)
			if one.Jobs != all.Jobs || one.Whole() != all.Whole() || all.Asks {
				t.Errorf("shape %v, %d jobs: one by one %+v, at once %+v", shape, k, one, all)
			}
			if shape.CPUs > 0 && all.Whole() != (k+shape.CPUs-1)/shape.CPUs {
				t.Errorf("shape %v, %d jobs: Whole %d, want jobs over cores", shape, k, all.Whole())
			}
		}
	}
}

// TestNeedPlusScale: the work of two sets adds per resource (a core-heavy
// set and a memory-heavy one share placeholders), and a share of it
// scales every resource.
func TestNeedPlusScale(t *testing.T) {
	t.Parallel()
	shape := resource.Capacity{CPUs: 16, Mem: 64 * gib, Named: map[string]int{"lic": 4}}
	var cores, mem Need
	for range 4 {
		cores.Add(shape, resource.Request{CPUs: 8, Mem: gib})
		mem.Add(shape, resource.Request{Mem: 30 * gib, Named: map[string]int{"lic": 1}})
	}
	if cores.Whole() != 2 || mem.Whole() != 2 {
		t.Fatalf("alone: %d and %d, want 2 and 2", cores.Whole(), mem.Whole())
	}
	both := cores.Plus(mem)
	if both.Whole() != 3 || both.Jobs != 8 || !both.Asks { // memory: 4 GiB + 120 GiB over 64
		t.Errorf("together: %d placeholders, %d jobs; want 3, 8", both.Whole(), both.Jobs)
	}
	if got := both.Named["lic"].Sum; got != 1 {
		t.Errorf("licences: %g placeholders' worth, want 1", got)
	}
	half := both.Scale(0.5)
	if half.Whole() != 2 || half.Jobs != 4 {
		t.Errorf("half: %d placeholders, %d jobs; want 2, 4", half.Whole(), half.Jobs)
	}
	if got := both.Scale(0); got.Whole() != 0 || got.Jobs != 0 {
		t.Errorf("none: %+v", got)
	}
	if got := both.Scale(2); got.Whole() != both.Whole() {
		t.Errorf("a share over 1 is all: %d, want %d", got.Whole(), both.Whole())
	}
	var none Need
	if got := none.Plus(none); got.Whole() != 0 || got.Asks || got.Named != nil {
		t.Errorf("no work plus no work: %+v", got)
	}
}

// TestCeil forgives float error in sums of fractions.
func TestCeil(t *testing.T) {
	t.Parallel()
	third := 0.0
	for range 3 {
		third += 1.0 / 3
	}
	for _, tc := range []struct {
		x    float64
		want int
	}{{0, 0}, {-1, 0}, {1e-12, 0}, {0.1, 1}, {1, 1}, {third, 1}, {1.0000001, 2}, {49.99999999999, 50}, {50.5, 51}} {
		if got := Ceil(tc.x); got != tc.want {
			t.Errorf("Ceil(%v) = %d, want %d", tc.x, got, tc.want)
		}
	}
}

// TestPackingDemand: the module counts a ready job by its request, auto
// sizes resolved as a placeholder of the shape would (the whole of it
// before anything is learned), and a running attempt by its grant.
func TestPackingDemand(t *testing.T) {
	t.Parallel()
	p := New()
	if p.AnyAsks() {
		t.Fatal("an empty module has jobs that ask")
	}
	shape := resource.Capacity{CPUs: 8, Mem: 32 * gib}
	p.Job(1, resource.Request{CPUs: 4}, resource.Category{})
	p.Job(2, resource.Request{AutoCPUs: true}, resource.Category{Queue: "q", Target: "t"})
	p.Job(3, resource.Request{}, resource.Category{})
	if !p.AnyAsks() {
		t.Fatal("AnyAsks false with a 4-core job known")
	}
	var ready Need
	for _, id := range []int64{1, 2, 3, 4} {
		if !p.AddReady(&ready, shape, id) {
			t.Errorf("job %d not held by %v", id, shape)
		}
	}
	// 4 + 8 (auto: the whole placeholder) + 1 + 1 cores over 8; the
	// auto job takes more than half: 2 at least.
	if ready.Whole() != 2 || ready.Cores.Wide != 1 || ready.Jobs != 4 {
		t.Errorf("ready: %+v (whole %d), want 2 placeholders, one wide job", ready, ready.Whole())
	}
	if p.AddReady(&ready, resource.Capacity{CPUs: 2}, 1) {
		t.Error("a 4-core job held by a 2-core shape")
	}

	if err := p.Placeholder(10, resource.Capacity{CPUs: 8, Mem: 32 * gib}); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	for _, id := range []int64{1, 3} {
		if !p.Fits(id, 10, now) {
			t.Fatalf("job %d does not fit", id)
		}
		p.Start(Run{id, 1}, 10)
	}
	var running Need
	p.AddRunning(&running, shape, Run{1, 1})
	p.AddRunning(&running, shape, Run{3, 1})
	p.AddRunning(&running, shape, Run{99, 1}) // no grant: a slot
	if running.Jobs != 3 || running.Cores.Sum != 6.0/8 || !running.Asks {
		t.Errorf("running: %+v, want 3 jobs of 6 cores over 8", running)
	}
	// A grant bigger than the site asked for (the placeholder registered
	// more) counts as the whole shape, not as nothing.
	var small Need
	p.AddRunning(&small, resource.Capacity{CPUs: 2}, Run{1, 1})
	if small.Jobs != 1 || small.Whole() != 1 {
		t.Errorf("a grant over the shape: %+v", small)
	}
}
