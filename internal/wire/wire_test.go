package wire

import (
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// A grant goes over the wire and is taken again, with the same ids, by
// a pool of the capacity that was registered.
func TestWireRoundTrip(t *testing.T) {
	c := resource.Capacity{CPUs: 4, CoreIDs: []int{2, 3, 4, 5}, Mem: 8 * resource.GiB, GPUIDs: []string{"0", "1"}, Named: map[string]int{"lic": 2}}
	reg := Capacity(c)
	if err := protocol.CheckCapacity("capacity", *reg); err != nil {
		t.Fatal(err)
	}
	cls, _ := resource.NewPool(CapacityOf(reg, 0))
	g, ok := cls.Take(resource.Request{CPUs: 2, Mem: resource.GiB, GPUs: 1, Named: map[string]int{"lic": 1}})
	if !ok {
		t.Fatal("does not fit")
	}
	w := Grant(g)
	if err := protocol.CheckCapacity("grant", *w); err != nil {
		t.Fatal(err)
	}
	agent, _ := resource.NewPool(c)
	got, err := agent.TakeExact(RequestOfGrant(w), w.CoreIDs, w.GPUIDs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Cores(), g.Cores()) || !slices.Equal(got.GPUs(), g.GPUs()) || got.Mem != g.Mem {
		t.Errorf("agent took %v %v %d; the CLS granted %v %v %d", got.Cores(), got.GPUs(), got.Mem, g.Cores(), g.GPUs(), g.Mem)
	}
	if c := CapacityOf(nil, 3); c.CPUs != 3 || c.Mem != 0 {
		t.Errorf("no capacity registered, 3 slots: %v", c)
	}
	if r := RequestOfGrant(nil); r.Cores() != 1 {
		t.Errorf("no grant: %v", r)
	}
}

// A placeholder's agent takes work for its batch walltime less a margin
// to report and exit: 5%, between 30 s and 5 min, never under half.
func TestAgentWalltime(t *testing.T) {
	for _, tc := range []struct{ batch, want time.Duration }{
		{time.Hour, time.Hour - 3*time.Minute},
		{10 * time.Minute, 9*time.Minute + 30*time.Second},
		{24 * time.Hour, 24*time.Hour - 5*time.Minute},
		{time.Minute, 30 * time.Second},
	} {
		if got := AgentWalltime(tc.batch); got != tc.want {
			t.Errorf("AgentWalltime(%v) = %v, want %v", tc.batch, got, tc.want)
		}
	}
}
