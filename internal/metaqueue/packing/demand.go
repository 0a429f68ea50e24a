package packing

import (
	"math"

	"github.com/mq-hpc/mq/internal/dag"
	"github.com/mq-hpc/mq/internal/dispatch"
	"github.com/mq-hpc/mq/internal/policy"
	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/job"
)

// Provisioning's side of packing: how many placeholders of a site's shape
// (what `cls site add --cpus/--mem/--gpus/--resource` asks each to hold)
// some jobs need. The count is a packing lower bound, per resource the
// larger of the jobs' sum over the shape's amount and the jobs that each
// take more than half of it (no two of those share a placeholder), and
// the largest over the resources. It is what a site asks for: never more
// than the work needs however it is packed, and, for jobs of one core,
// exactly the jobs over the cores, as before resources.

// Amount is one resource's need in placeholders of a shape.
type Amount struct {
	// Sum is the jobs' amounts over the shape's.
	Sum float64
	// Wide is how many jobs take more than half of the shape's amount.
	Wide float64
}

func (a Amount) bound() float64 { return max(a.Sum, a.Wide) }

func (a Amount) plus(b Amount) Amount { return Amount{a.Sum + b.Sum, a.Wide + b.Wide} }

func (a Amount) scale(f float64) Amount { return Amount{a.Sum * f, a.Wide * f} }

// add counts a job that takes n of a shape holding of.
func (a *Amount) add(n, of float64) {
	if n <= 0 || of <= 0 {
		return
	}
	a.Sum += n / of
	if 2*n > of {
		a.Wide++
	}
}

// Need is some jobs measured against one placeholder shape. The zero Need
// is no work.
type Need struct {
	// Jobs is how many jobs were counted: only those the shape holds.
	Jobs int
	// Asks: some counted job takes more than one core, or memory, GPUs or
	// named amounts the shape declares. Work that does not is slots, and
	// is provisioned as slots (jobs over cores).
	Asks             bool
	Cores, Mem, GPUs Amount
	Named            map[string]Amount
}

// Add counts a job of request r against shape and reports whether the
// shape holds it; one it does not hold is not counted (a placeholder of
// that shape could run none of it). A shape of no cores is a site that
// declared none: every job counts, as one slot. Auto sizes must be
// resolved first (Packing.AddReady does).
func (n *Need) Add(shape resource.Capacity, r resource.Request) bool {
	if shape.CPUs < 1 {
		n.Jobs++
		return true
	}
	if !shape.Holds(r) {
		return false
	}
	n.Jobs++
	n.Cores.add(float64(r.Cores()), float64(shape.CPUs))
	asks := r.Cores() > 1
	if shape.Mem > 0 && r.Mem > 0 {
		n.Mem.add(float64(r.Mem), float64(shape.Mem))
		asks = true
	}
	if r.GPUs > 0 {
		n.GPUs.add(float64(r.GPUs), float64(len(shape.GPUIDs)))
		asks = true
	}
	for name, v := range r.Named {
		if v <= 0 {
			continue
		}
		if n.Named == nil {
			n.Named = map[string]Amount{}
		}
		a := n.Named[name]
		a.add(float64(v), float64(shape.Named[name]))
		n.Named[name] = a
		asks = true
	}
	n.Asks = n.Asks || asks
	return true
}

// AddSlots counts k jobs that ask for nothing (one core each) against
// shape, without looking at them one by one.
func (n *Need) AddSlots(shape resource.Capacity, k int) {
	if k <= 0 {
		return
	}
	n.Jobs += k
	if shape.CPUs >= 1 {
		n.Cores.Sum += float64(k) / float64(shape.CPUs)
		if shape.CPUs == 1 {
			n.Cores.Wide += float64(k)
		}
	}
}

// Plus is the work of n and m together (m measured against the same
// shape).
func (n Need) Plus(m Need) Need {
	out := Need{Jobs: n.Jobs + m.Jobs, Asks: n.Asks || m.Asks,
		Cores: n.Cores.plus(m.Cores), Mem: n.Mem.plus(m.Mem), GPUs: n.GPUs.plus(m.GPUs)}
	for _, src := range []map[string]Amount{n.Named, m.Named} {
		for name, a := range src {
			if out.Named == nil {
				out.Named = map[string]Amount{}
			}
			out.Named[name] = out.Named[name].plus(a)
		}
	}
	return out
}

// Scale is f of n's work (0 <= f <= 1): the share left when other sites
// take the rest. Jobs is rounded up.
func (n Need) Scale(f float64) Need {
	f = min(max(f, 0), 1)
	out := Need{Jobs: int(math.Ceil(float64(n.Jobs)*f - eps)), Asks: n.Asks,
		Cores: n.Cores.scale(f), Mem: n.Mem.scale(f), GPUs: n.GPUs.scale(f)}
	for name, a := range n.Named {
		if out.Named == nil {
			out.Named = map[string]Amount{}
		}
		out.Named[name] = a.scale(f)
	}
	return out
}

// Placeholders is the lower bound in placeholders of the shape, not
// rounded: the largest over the resources of each one's bound.
func (n Need) Placeholders() float64 {
	b := max(n.Cores.bound(), n.Mem.bound(), n.GPUs.bound())
	for _, a := range n.Named {
		b = max(b, a.bound())
	}
	return b
}

// Whole is Placeholders rounded up: how many placeholders to ask for.
func (n Need) Whole() int { return Ceil(n.Placeholders()) }

// eps absorbs the rounding of sums of fractions (3 x 1/3).
const eps = 1e-9

// Ceil rounds a count of placeholders up, forgiving float error.
func Ceil(x float64) int {
	if x <= eps {
		return 0
	}
	return int(math.Ceil(x - eps))
}

// AnyAsks reports whether some job known asks for more than one core:
// when none does, the ready jobs are slots and need not be looked at one
// by one.
func (p *Packing) AnyAsks() bool { return len(p.reqs) > 0 }

// AddReady counts ready job id against shape (n.Add), its auto sizes
// resolved as a placeholder of that shape would resolve them.
func (p *Packing) AddReady(n *Need, shape resource.Capacity, id int64) bool {
	r := p.reqs[id]
	if r.AutoCPUs || r.AutoMem {
		r = p.learn.Resolve(p.cats[id], r, resource.Request{CPUs: max(shape.CPUs, 1), Mem: shape.Mem})
	}
	return n.Add(shape, r)
}

// maxExamined bounds how many ready entries CountReady looks at in a
// queue, so a huge backlog of jobs too long for a site never stalls the
// core.
const maxExamined = 100_000

// A Demand is what a site asks of the ready jobs (Packing.CountReady):
// those a placeholder of Shape with Walltime seconds left could take
// (walltime 0 takes any), up to Limit of them. A shape of no cores
// counts jobs as slots.
type Demand struct {
	Shape    resource.Capacity
	Walltime float64
	Limit    int
}

// ReadyQueue is one queue's ready jobs as the core keeps them.
type ReadyQueue struct {
	Queued int          // its Queued jobs
	Heap   *policy.Heap // its ready entries (a cp queue may hold a job twice, re-ranked)
	// Ceiling is what a job without an estimate is expected to take
	// (dispatch judges a walltime so too).
	Ceiling float64
}

// CountReady adds to n, up to d.Limit jobs in all, q's ready jobs that a
// placeholder of d's shape and walltime could take; g says which entries
// are live Queued jobs and their estimates. Requests are looked at one by
// one only when some job asks for more than a slot and the shape has
// cores to hold them against; jobs without a walltime to fit are then
// counted by q.Queued alone.
func (p *Packing) CountReady(n *Need, d Demand, g *dag.Graph, q ReadyQueue) {
	if n.Jobs >= d.Limit || q.Queued == 0 {
		return
	}
	each := d.Shape.CPUs >= 1 && p.AnyAsks()
	if d.Walltime <= 0 && !each {
		n.AddSlots(d.Shape, min(q.Queued, d.Limit-n.Jobs))
		return
	}
	examined, fit := 0, 0
	q.Heap.Each(func(r policy.Ready) bool {
		examined++
		j, ok := g.Node(r.ID)
		if ok && j.State == job.Queued && dispatch.Fits(j.Est, q.Ceiling, d.Walltime) {
			if !each {
				n.AddSlots(d.Shape, 1)
				fit++
			} else if p.AddReady(n, d.Shape, r.ID) {
				fit++
			}
		}
		// A job held twice is counted at most once: no more than the
		// queue's Queued jobs.
		return n.Jobs < d.Limit && examined < maxExamined && fit < q.Queued
	})
}

// AddRunning counts attempt ru against shape by what it took (its grant's
// request; a slot when it has none). A running job its site's shape would
// not hold (a placeholder registered bigger than asked) counts as the
// whole of what the shape holds of it.
func (p *Packing) AddRunning(n *Need, shape resource.Capacity, ru Run) {
	r := p.grants[ru].req
	if n.Add(shape, r) {
		return
	}
	n.Add(shape, clip(r, shape))
}

// clip is r bounded by what shape holds.
func clip(r resource.Request, shape resource.Capacity) resource.Request {
	out := resource.Request{CPUs: min(r.Cores(), shape.CPUs), Mem: r.Mem, GPUs: min(r.GPUs, len(shape.GPUIDs))}
	if shape.Mem > 0 {
		out.Mem = min(out.Mem, shape.Mem)
	}
	for name, v := range r.Named {
		if c := min(v, shape.Named[name]); c > 0 {
			if out.Named == nil {
				out.Named = map[string]int{}
			}
			out.Named[name] = c
		}
	}
	return out
}
