package plan

import (
	"context"
	"math"

	"github.com/mq-hpc/mq/internal/heap"
	"github.com/mq-hpc/mq/internal/policy"
)

// partial is a schedule being built job by job, as the list heuristics
// (HEFT, MinMin) build one: every file is kept where its job runs.
type partial struct {
	m     *model
	ft    []float64
	slots [][]float64
	alloc []int32 // jobs, then files (filled in at the end)
	order []int32
}

func newPartial(m *model) *partial {
	ps := &partial{m: m, ft: make([]float64, len(m.ids)), slots: make([][]float64, len(m.sites)),
		alloc: make([]int32, len(m.ids)+len(m.fileSize))}
	for s, site := range m.sites {
		ps.slots[s] = make([]float64, site.Slots)
	}
	return ps
}

// eft is when job t would end if placed at site s now (its prerequisites
// placed already).
func (ps *partial) eft(t int32, s int) float64 {
	m := ps.m
	ready := 0.0
	for _, p := range m.pred[t] {
		ready = max(ready, ps.ft[p])
	}
	d := m.exec[t][s] + m.staticCost[t][s]
	for _, f := range m.ins[t] {
		d += m.transfer(m.fileSize[f], int(ps.alloc[m.fileProd[f]]), s)
	}
	return max(ready, kthFree(ps.slots[s], m.width[t])) + d
}

// best is the site where t would end first, and when.
func (ps *partial) best(t int32) (int, float64) {
	bs, be := 0, math.Inf(1)
	for s := range ps.m.sites {
		if e := ps.eft(t, s); e < be {
			bs, be = s, e
		}
	}
	return bs, be
}

func (ps *partial) place(t int32, s int) {
	end := ps.eft(t, s)
	ps.ft[t] = end
	setFirst(ps.slots[s], ps.m.width[t], end)
	ps.alloc[t] = int32(s)
	ps.order = append(ps.order, t)
}

func (ps *partial) schedule() schedule {
	ps.m.filesAtProducers(ps.alloc)
	return schedule{alloc: ps.alloc, order: ps.order}
}

// HEFT is Heterogeneous Earliest Finish Time (Topcuoglu et al.): jobs in
// decreasing upward rank (mean runtime plus the longest path of mean
// runtimes and mean transfer times to an exit), each placed at the site
// where it would end first. Files stay where their jobs run. Slots are
// filled in order (no insertion into idle gaps), the same model Evaluate
// scores.
type HEFT struct{}

// Plan implements policy.Planner.
func (HEFT) Plan(ctx context.Context, p policy.Problem) (policy.Plan, error) {
	m, err := compile(p)
	if err != nil {
		return policy.Plan{}, err
	}
	sc := heft(m)
	return m.toPlan(sc, newEval(m)), ctx.Err()
}

// upwardRanks is HEFT's priority of each job.
func (m *model) upwardRanks() []float64 {
	ns := len(m.sites)
	var meanBW, meanLat float64
	pairs := 0
	for a := range ns {
		for b := range ns {
			if a != b {
				meanBW += 1 / m.bw[a][b] // mean seconds per byte
				meanLat += m.lat[a][b]
				pairs++
			}
		}
	}
	if pairs > 0 {
		meanBW /= float64(pairs)
		meanLat /= float64(pairs)
	}
	n := len(m.ids)
	w := make([]float64, n)
	for i := range n {
		var sum float64
		k := 0
		for s := range ns {
			if !math.IsInf(m.exec[i][s], 1) {
				sum += m.exec[i][s] + m.staticCost[i][s]
				k++
			}
		}
		w[i] = sum / float64(k)
	}
	// Bytes each job passes to each successor.
	comm := func(i, j int32) float64 {
		if pairs == 0 {
			return 0
		}
		var bytes int64
		for _, f := range m.ins[j] {
			if m.fileProd[f] == i {
				bytes += m.fileSize[f]
			}
		}
		if bytes == 0 {
			return 0
		}
		// Mean over site pairs, weighted by the chance (ns-1)/ns that
		// two jobs land apart.
		return (float64(bytes)*meanBW + meanLat) * float64(ns-1) / float64(ns)
	}
	rank := make([]float64, n)
	for k := n - 1; k >= 0; k-- {
		i := m.topo[k]
		r := 0.0
		for _, j := range m.succ[i] {
			r = max(r, comm(i, j)+rank[j])
		}
		rank[i] = w[i] + r
	}
	return rank
}

// heft builds HEFT's schedule: among the jobs whose prerequisites are
// placed, the highest rank next (so the order is always valid).
func heft(m *model) schedule {
	rank := m.upwardRanks()
	pos := make([]int32, len(m.ids))
	for k, t := range m.topo {
		pos[t] = int32(k)
	}
	ps := newPartial(m)
	waiting := make([]int, len(m.ids))
	var entries []int32
	for i := range m.ids {
		waiting[i] = len(m.pred[i])
		if waiting[i] == 0 {
			entries = append(entries, int32(i))
		}
	}
	q := heap.From(func(a, b int32) bool {
		if rank[a] != rank[b] {
			return rank[a] > rank[b]
		}
		return pos[a] < pos[b]
	}, entries)
	for q.Len() > 0 {
		t, _ := q.Pop()
		s, _ := ps.best(t)
		ps.place(t, s)
		for _, j := range m.succ[t] {
			if waiting[j]--; waiting[j] == 0 {
				q.Push(j)
			}
		}
	}
	return ps.schedule()
}

// MinMin (Blythe et al. for workflows): of the jobs whose prerequisites
// are placed, the one that can end first goes next, at the site where it
// ends first. Files stay where their jobs run.
type MinMin struct{}

// Plan implements policy.Planner.
func (MinMin) Plan(ctx context.Context, p policy.Problem) (policy.Plan, error) {
	m, err := compile(p)
	if err != nil {
		return policy.Plan{}, err
	}
	sc, err := minmin(ctx, m)
	if err != nil {
		return policy.Plan{}, err
	}
	return m.toPlan(sc, newEval(m)), nil
}

// minmin builds MinMin's schedule. Each ready job's best site and end are
// cached: placing a job at site s only delays site s, so only jobs whose
// best was s are looked at again (a job's end elsewhere cannot change).
func minmin(ctx context.Context, m *model) (schedule, error) {
	ps := newPartial(m)
	n := len(m.ids)
	waiting := make([]int, n)
	bestSite := make([]int, n)
	bestEnd := make([]float64, n)
	var ready []int32
	add := func(t int32) {
		bestSite[t], bestEnd[t] = ps.best(t)
		ready = append(ready, t)
	}
	for i := range n {
		waiting[i] = len(m.pred[i])
		if waiting[i] == 0 {
			add(int32(i))
		}
	}
	for len(ready) > 0 {
		if len(ps.order)%256 == 0 && ctx.Err() != nil {
			return schedule{}, ctx.Err()
		}
		k := 0
		for i := 1; i < len(ready); i++ {
			if bestEnd[ready[i]] < bestEnd[ready[k]] || (bestEnd[ready[i]] == bestEnd[ready[k]] && ready[i] < ready[k]) {
				k = i
			}
		}
		t := ready[k]
		ready[k] = ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		s := bestSite[t]
		ps.place(t, s)
		for _, r := range ready {
			if bestSite[r] == s {
				bestSite[r], bestEnd[r] = ps.best(r)
			}
		}
		for _, j := range m.succ[t] {
			if waiting[j]--; waiting[j] == 0 {
				add(j)
			}
		}
	}
	return ps.schedule(), nil
}
