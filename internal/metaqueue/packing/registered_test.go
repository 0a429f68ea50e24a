package packing

import (
	"testing"

	"github.com/mq-hpc/mq/internal/resource"
)

// TestRegisteredForgetsGone: placeholders registering in a loop, each
// gone soon after, leave packing holding a bounded number of them; a live
// one keeps its pool, and the walltime of those gone still counts.
func TestRegisteredForgetsGone(t *testing.T) {
	t.Parallel()
	p := New()
	live := map[int64]bool{1: true}
	isLive := func(ph int64) bool { return live[ph] }
	p.Registered(1, 3600, isLive)
	if err := p.Placeholder(1, resource.Capacity{CPUs: 4}); err != nil {
		t.Fatal(err)
	}
	const flood = 20_000
	for ph := int64(2); ph < 2+flood; ph++ {
		live[ph] = true
		walltime := 600.0
		if ph == 2 {
			walltime = 7200
		}
		p.Registered(ph, walltime, isLive)
		if err := p.Placeholder(ph, resource.Capacity{CPUs: 8}); err != nil {
			t.Fatal(err)
		}
		delete(live, ph) // swept
	}
	if n := p.heldPlaceholders(); n > 2*minGonePrune {
		t.Errorf("packing holds %d placeholders after %d registered and gone, want at most %d", n, flood, 2*minGonePrune)
	}
	if !p.Has(1) {
		t.Errorf("a live placeholder's pool was forgotten")
	}
	if w, _ := p.longest(); w != 7200 {
		t.Errorf("longest walltime %v, want the 7200 s of a placeholder gone", w)
	}
}
