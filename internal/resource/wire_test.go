package resource

import (
	"slices"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// A grant goes over the wire and is taken again, with the same ids, by
// a pool of the capacity that was registered.
func TestWireRoundTrip(t *testing.T) {
	c := Capacity{CPUs: 4, CoreIDs: []int{2, 3, 4, 5}, Mem: 8 * GiB, GPUIDs: []string{"0", "1"}, Named: map[string]int{"lic": 2}}
	reg := c.Wire()
	if err := protocol.CheckCapacity("capacity", *reg); err != nil {
		t.Fatal(err)
	}
	cls, _ := NewPool(CapacityOf(reg, 0))
	g, ok := cls.Take(Request{CPUs: 2, Mem: GiB, GPUs: 1, Named: map[string]int{"lic": 1}})
	if !ok {
		t.Fatal("does not fit")
	}
	w := g.Wire()
	if err := protocol.CheckCapacity("grant", *w); err != nil {
		t.Fatal(err)
	}
	agent, _ := NewPool(c)
	got, err := agent.TakeExact(RequestOf(w), w.CoreIDs, w.GPUIDs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Cores(), g.Cores()) || !slices.Equal(got.GPUs(), g.GPUs()) || got.Mem != g.Mem {
		t.Errorf("agent took %v %v %d; the CLS granted %v %v %d", got.Cores(), got.GPUs(), got.Mem, g.Cores(), g.GPUs(), g.Mem)
	}
	if c := CapacityOf(nil, 3); c.CPUs != 3 || c.Mem != 0 {
		t.Errorf("no capacity registered, 3 slots: %v", c)
	}
	if r := RequestOf(nil); r.Cores() != 1 {
		t.Errorf("no grant: %v", r)
	}
}
