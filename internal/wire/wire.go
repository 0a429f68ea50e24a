// Package wire converts between package resource's types and the plain
// types the protocol carries (protocol.Capacity for what a placeholder
// holds, has free or was granted; protocol.Resources for what a job asks),
// for the CLS and the agent alike. It is apart from resource so that the
// protocol, which uses resource's parsing, and resource do not import
// each other.
package wire

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/protocol"
)

// CapacityOf is what a placeholder registered as its capacity: c, or,
// when it sent none (an agent from before resources), slots cores.
func CapacityOf(c *protocol.Capacity, slots int) resource.Capacity {
	if c == nil {
		return resource.Capacity{CPUs: max(slots, 1)}
	}
	return resource.Capacity{CPUs: c.CPUs, CoreIDs: c.CoreIDs, Mem: c.Mem, GPUIDs: c.GPUIDs, Named: c.Named}
}

// Capacity is c as the protocol carries it.
func Capacity(c resource.Capacity) *protocol.Capacity {
	return &protocol.Capacity{CPUs: c.CPUs, CoreIDs: c.CoreIDs, Mem: c.Mem, GPUs: len(c.GPUIDs), GPUIDs: c.GPUIDs, Named: c.Named}
}

// Grant is g as an assignment carries it (Assignment.Grant): its amounts,
// and the ids of its cores (when the pool knows them) and GPUs.
func Grant(g resource.Grant) *protocol.Capacity {
	gpus := g.GPUs()
	return &protocol.Capacity{CPUs: g.CPUs, CoreIDs: g.Cores(), Mem: g.Mem, GPUs: len(gpus), GPUIDs: gpus, Named: g.Named}
}

// RequestOfGrant is what a grant takes of a pool (nil: one core, as
// before resources).
func RequestOfGrant(g *protocol.Capacity) resource.Request {
	if g == nil {
		return resource.Request{}
	}
	return resource.Request{CPUs: g.CPUs, Mem: g.Mem, GPUs: g.GPUs, Named: g.Named}
}

// Request is what a job asks, as resource's fit rule takes it.
func Request(r protocol.Resources) resource.Request {
	return resource.Request{CPUs: r.CPUs, Mem: r.Mem, GPUs: r.GPUs, Named: r.Named, AutoCPUs: r.CPUsAuto, AutoMem: r.MemAuto}
}

// Resources is r as the protocol carries a job's request.
func Resources(r resource.Request) protocol.Resources {
	return protocol.Resources{CPUs: r.CPUs, Mem: r.Mem, GPUs: r.GPUs, Named: r.Named, CPUsAuto: r.AutoCPUs, MemAuto: r.AutoMem}
}

// SiteResources parses a site's named amounts as SiteSpec.Resources keeps
// them ("NAME=N,NAME=N"), with one-line errors.
func SiteResources(s string) (map[string]int, error) {
	if s == "" {
		return nil, nil
	}
	var r resource.Request
	for _, kv := range strings.Split(s, ",") {
		if err := r.AddNamed(kv); err != nil {
			return nil, fmt.Errorf("--resource: %v", err)
		}
		name, _, _ := strings.Cut(kv, "=")
		if len(name) > protocol.MaxNamedBytes {
			return nil, fmt.Errorf("--resource %s: a name has at most %d characters", protocol.Printable(name), protocol.MaxNamedBytes)
		}
	}
	if len(r.Named) > protocol.MaxNamed {
		return nil, fmt.Errorf("--resource: %d names; at most %d", len(r.Named), protocol.MaxNamed)
	}
	return r.Named, nil
}

// AgentWalltime is how long a placeholder's agent may take work for a batch
// walltime: a margin (5%, between 30 s and 5 min) is left to report and exit.
func AgentWalltime(wall time.Duration) time.Duration {
	margin := min(max(wall/20, 30*time.Second), 5*time.Minute)
	return max(wall-margin, wall/2)
}

// SiteWalltime is, in seconds, the longest a job can run on a placeholder
// of site s: the agent's share of the site's batch walltime.
func SiteWalltime(s protocol.SiteSpec) float64 {
	return AgentWalltime(protocol.Duration(s.Walltime)).Seconds()
}

// SiteCapacity is what a site's placeholders are asked to hold: its
// spec's cores, memory, GPUs (ids 0..n-1, as a batch system numbers a
// job's) and named amounts. The CLS packs by it before a placeholder of
// the site has said what it holds.
func SiteCapacity(s protocol.SiteSpec) resource.Capacity {
	named, _ := SiteResources(s.Resources) // checked when the site was added
	c := resource.Capacity{CPUs: s.Slots, Mem: s.Mem, Named: named}
	for i := range s.GPUs {
		c.GPUIDs = append(c.GPUIDs, strconv.Itoa(i))
	}
	return c
}
