package resource

import "github.com/mq-hpc/mq/protocol"

// The protocol carries capacities and grants as protocol.Capacity, a
// plain type of the public API; these convert, for the CLS and the agent
// alike.

// CapacityOf is what a placeholder registered as its capacity: c, or,
// when it sent none (an agent from before resources), slots cores.
func CapacityOf(c *protocol.Capacity, slots int) Capacity {
	if c == nil {
		return Capacity{CPUs: max(slots, 1)}
	}
	return Capacity{CPUs: c.CPUs, CoreIDs: c.CoreIDs, Mem: c.Mem, GPUIDs: c.GPUIDs, Named: c.Named}
}

// Wire is c as the protocol carries it.
func (c Capacity) Wire() *protocol.Capacity {
	return &protocol.Capacity{CPUs: c.CPUs, CoreIDs: c.CoreIDs, Mem: c.Mem, GPUs: len(c.GPUIDs), GPUIDs: c.GPUIDs, Named: c.Named}
}

// Wire is g as an assignment carries it (Assignment.Grant): its amounts,
// and the ids of its cores (when the pool knows them) and GPUs.
func (g Grant) Wire() *protocol.Capacity {
	gpus := g.GPUs()
	return &protocol.Capacity{CPUs: g.CPUs, CoreIDs: g.Cores(), Mem: g.Mem, GPUs: len(gpus), GPUIDs: gpus, Named: g.Named}
}

// RequestOf is what a grant takes of a pool (nil: one core, as before
// resources).
func RequestOf(g *protocol.Capacity) Request {
	if g == nil {
		return Request{}
	}
	return Request{CPUs: g.CPUs, Mem: g.Mem, GPUs: g.GPUs, Named: g.Named}
}
