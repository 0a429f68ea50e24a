package plan

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/mq-hpc/mq/internal/policy"
)

// AEHETAA is the seed's hybrid evolutionary algorithm for task scheduling
// and data-file allocation (Teylo, AEH-ETAA, chapter 5): a chromosome is
// an allocation vector (a site for each job and for each file a job
// writes) and an execution order; fitness is the makespan (Evaluate).
//
// As the seed describes: a population of 50, 40% of it MinMin's plan and
// 40% HEFT's with 5..90% of their allocation genes changed at random, 20%
// random (heights by Eq. 5.2); one-point crossover on both structures
// (Algorithm 3), 10% gene mutation on the allocation vector, 5% elitism
// and tournament selection (Algorithm 2); with probability 50% an
// iteration runs the three first-improvement local searches (swap two
// genes' sites, swap two jobs of equal height, move one gene to another
// site; Algorithms 4-6) on the best 15%; a new best is path-relinked
// (Algorithm 7) with an elite set of at most half the population whose
// members differ in at least a quarter of the genes. It stops after
// Stall iterations without a better plan.
//
// Where the seed is silent or its cost would not scale, this differs, and
// says so: each local search examines at most SearchBudget neighbours,
// drawn in random order (the seed tries every pair, O(n^2) evaluations of
// O(n) each); offspring per generation equal the population; tournaments
// are of two; and TimeLimit bounds the whole search. Sites have no
// storage capacity in mq's model, so the seed's move-files repair never
// applies. Given the same Seed and a search that ends by Stall rather
// than TimeLimit, the plan is the same on every run.
type AEHETAA struct {
	Population   int           // 0: 50
	Stall        int           // iterations without improvement to stop after; 0: 100
	MaxIter      int           // 0: no bound beyond Stall and TimeLimit
	TimeLimit    time.Duration // 0: 30 s
	SearchBudget int           // neighbours per local search; 0: 2*(jobs+files), at least 64
	Seed         uint64        // 0: the Problem's Seed
	// Stats, when set, is filled with how the search went.
	Stats *AEHStats
}

// AEHStats says how an AEH-ETAA search went.
type AEHStats struct {
	Iterations  int
	Evaluations int     // schedules scored
	Seeded      float64 // the best makespan of the initial population
	Stopped     string  // "stall", "time" or "iterations"
}

type chromosome struct {
	alloc   []int32
	order   []int32
	fitness float64
	moved   int64
}

func (c *chromosome) clone() *chromosome {
	return &chromosome{alloc: slices.Clone(c.alloc), order: slices.Clone(c.order), fitness: c.fitness, moved: c.moved}
}

// Plan implements policy.Planner.
func (a AEHETAA) Plan(ctx context.Context, p policy.Problem) (policy.Plan, error) {
	m, err := compile(p)
	if err != nil {
		return policy.Plan{}, err
	}
	seed := a.Seed
	if seed == 0 {
		seed = uint64(p.Seed)
	}
	best, err := a.search(ctx, m, seed)
	if err != nil {
		return policy.Plan{}, err
	}
	return m.toPlan(schedule{alloc: best.alloc, order: best.order}, newEval(m)), nil
}

// ga is one search's state.
type ga struct {
	m        *model
	ev       *eval
	rng      *rand.Rand
	runnable [][]int32 // sites each job can run at
	genes    int
	budget   int
	evals    int
	deadline time.Time
	over     bool // past the deadline: every loop ends
}

// late says whether the search is past its time limit, looking at the
// clock every 32 evaluations: a local search or path relinking at 10,000
// jobs takes far longer than one evaluation, so the limit is kept within
// them, not just between iterations.
func (g *ga) late() bool {
	if !g.over && g.evals%32 == 0 {
		g.over = time.Now().After(g.deadline)
	}
	return g.over
}

func (g *ga) score(c *chromosome) {
	c.fitness, c.moved = g.ev.run(schedule{alloc: c.alloc, order: c.order})
	g.evals++
}

// better: lower makespan, then fewer bytes moved.
func better(a, b *chromosome) bool {
	return a.fitness < b.fitness || (a.fitness == b.fitness && a.moved < b.moved)
}

// randomSite is a site gene i may take: a job's, one it can run at.
func (g *ga) randomSite(i int) int32 {
	if i < len(g.m.ids) {
		r := g.runnable[i]
		return r[g.rng.IntN(len(r))]
	}
	return int32(g.rng.IntN(len(g.m.sites)))
}

// heightOrder is an execution order from the seed's Eq. 5.2: each job a
// random height between its level and its successors' lowest height
// minus one, jobs sorted by height.
func (g *ga) heightOrder() []int32 {
	m := g.m
	h := make([]int32, len(m.ids))
	for k := len(m.topo) - 1; k >= 0; k-- {
		t := m.topo[k]
		if len(m.succ[t]) == 0 {
			h[t] = m.level[t]
			continue
		}
		hi := int32(math.MaxInt32)
		for _, s := range m.succ[t] {
			hi = min(hi, h[s]-1)
		}
		h[t] = m.level[t] + int32(g.rng.IntN(int(hi-m.level[t])+1))
	}
	order := slices.Clone(m.topo)
	g.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	sort.SliceStable(order, func(i, j int) bool { return h[order[i]] < h[order[j]] })
	return order
}

func (a AEHETAA) search(ctx context.Context, m *model, seed uint64) (*chromosome, error) {
	pop := cmpOr(a.Population, 50)
	stall := cmpOr(a.Stall, 100)
	limit := a.TimeLimit
	if limit <= 0 {
		limit = 30 * time.Second
	}
	deadline := time.Now().Add(limit)
	n := len(m.ids)
	g := &ga{m: m, ev: newEval(m), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), genes: n + len(m.fileSize), deadline: deadline}
	g.budget = a.SearchBudget
	if g.budget <= 0 {
		g.budget = max(64, 2*g.genes)
	}
	g.runnable = make([][]int32, n)
	for i := range n {
		for s := range m.sites {
			if !math.IsInf(m.exec[i][s], 1) {
				g.runnable[i] = append(g.runnable[i], int32(s))
			}
		}
	}
	mm, err := minmin(ctx, m)
	if err != nil {
		return nil, err
	}
	seeds := []schedule{mm, heft(m)}
	var P []*chromosome
	for k := range pop {
		c := &chromosome{}
		switch {
		case k < pop*8/10:
			base := seeds[0]
			if k >= pop*4/10 {
				base = seeds[1]
			}
			c.alloc, c.order = slices.Clone(base.alloc), slices.Clone(base.order)
			if k != 0 && k != pop*4/10 { // keep each heuristic's own plan once
				lambda := 0.05 + 0.85*g.rng.Float64()
				for i := range c.alloc {
					if g.rng.Float64() < lambda {
						c.alloc[i] = g.randomSite(i)
					}
				}
			}
		default:
			c.alloc = make([]int32, g.genes)
			for i := range c.alloc {
				c.alloc[i] = g.randomSite(i)
			}
			c.order = g.heightOrder()
		}
		g.score(c)
		P = append(P, c)
	}
	best := bestOf(P).clone()
	st := AEHStats{Seeded: best.fitness, Stopped: "stall"}
	defer func() {
		if a.Stats != nil {
			st.Evaluations = g.evals
			*a.Stats = st
		}
	}()
	var elite []*chromosome
	alpha := max(1, g.genes/4)
	beta := max(1, pop/2)
	for it, idle := 0, 0; idle < stall; it++ {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if a.MaxIter > 0 && it >= a.MaxIter {
			st.Stopped = "iterations"
			break
		}
		if g.over || time.Now().After(deadline) {
			st.Stopped = "time"
			break
		}
		st.Iterations++
		improved := false
		if g.rng.Float64() < 0.5 {
			sort.Slice(P, func(i, j int) bool { return better(P[i], P[j]) })
			for k := range max(1, pop*15/100) {
				P[k] = g.localSearch(P[k])
			}
			if cur := bestOf(P); better(cur, best) {
				best = cur.clone()
				improved = true
				if len(elite) > 0 {
					best = g.pathRelink(best, elite)
				}
				far := true
				for _, e := range elite {
					if distance(best, e) < alpha {
						far = false
						break
					}
				}
				if far {
					elite = append(elite, best.clone())
					if len(elite) > beta {
						elite = elite[1:] // FIFO
					}
				}
			}
		}
		P = g.nextGeneration(P, pop)
		if cur := bestOf(P); better(cur, best) {
			best = cur.clone()
			improved = true
		}
		if improved {
			idle = 0
		} else {
			idle++
		}
	}
	return best, nil
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func bestOf(P []*chromosome) *chromosome {
	b := P[0]
	for _, c := range P[1:] {
		if better(c, b) {
			b = c
		}
	}
	return b
}

// tournament picks the better of two at random.
func (g *ga) tournament(P []*chromosome) int {
	i, j := g.rng.IntN(len(P)), g.rng.IntN(len(P))
	if better(P[j], P[i]) {
		return j
	}
	return i
}

// nextGeneration is Algorithm 2.
func (g *ga) nextGeneration(P []*chromosome, pop int) []*chromosome {
	all := slices.Clone(P)
	for range pop {
		if g.late() {
			break
		}
		c := g.crossover(P[g.tournament(P)], P[g.tournament(P)])
		for i := range c.alloc {
			if g.rng.Float64() < 0.10 {
				c.alloc[i] = g.randomSite(i)
			}
		}
		g.score(c)
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return better(all[i], all[j]) })
	elite := max(1, pop*5/100)
	next := slices.Clone(all[:elite])
	rest := all[elite:]
	for len(next) < pop && len(rest) > 0 {
		k := g.tournament(rest)
		next = append(next, rest[k])
		rest = slices.Delete(rest, k, k+1)
	}
	return next
}

// crossover is Algorithm 3: one cut in the allocation vector, one in the
// order; the order's tail keeps p2's order of the jobs not yet taken, so
// a valid prefix and a valid order give a valid child.
func (g *ga) crossover(p1, p2 *chromosome) *chromosome {
	c := &chromosome{alloc: make([]int32, len(p1.alloc)), order: make([]int32, 0, len(p1.order))}
	cut1 := g.rng.IntN(len(p1.alloc) + 1)
	copy(c.alloc, p1.alloc[:cut1])
	copy(c.alloc[cut1:], p2.alloc[cut1:])
	cut2 := g.rng.IntN(len(p1.order) + 1)
	taken := make([]bool, len(g.m.ids))
	for _, t := range p1.order[:cut2] {
		c.order = append(c.order, t)
		taken[t] = true
	}
	for _, t := range p2.order {
		if !taken[t] {
			c.order = append(c.order, t)
		}
	}
	return c
}

// localSearch runs the three searches in the seed's order, each to its
// first improvement or its budget.
func (g *ga) localSearch(c *chromosome) *chromosome {
	c = g.swapSites(c)
	c = g.swapPositions(c)
	return g.moveGene(c)
}

// swapSites is Algorithm 4 (troca-mv), over random pairs.
func (g *ga) swapSites(c *chromosome) *chromosome {
	n := len(g.m.ids)
	try := c.clone()
	for k := 0; k < g.budget && !g.late(); k++ {
		i, j := g.rng.IntN(g.genes), g.rng.IntN(g.genes)
		if try.alloc[i] == try.alloc[j] || (i < n) != (j < n) {
			continue // a job's site and a file's site are different genes
		}
		try.alloc[i], try.alloc[j] = try.alloc[j], try.alloc[i]
		g.score(try)
		if better(try, c) {
			return try
		}
		try.alloc[i], try.alloc[j] = try.alloc[j], try.alloc[i]
	}
	return c
}

// swapPositions is Algorithm 5 (troca-posição): two jobs of the same
// level swap places in the order.
func (g *ga) swapPositions(c *chromosome) *chromosome {
	try := c.clone()
	for k := 0; k < g.budget && !g.late(); k++ {
		i, j := g.rng.IntN(len(try.order)), g.rng.IntN(len(try.order))
		if i == j || g.m.level[try.order[i]] != g.m.level[try.order[j]] {
			continue
		}
		try.order[i], try.order[j] = try.order[j], try.order[i]
		g.score(try)
		if better(try, c) {
			return try
		}
		try.order[i], try.order[j] = try.order[j], try.order[i]
	}
	return c
}

// moveGene is Algorithm 6 (move-elemento): a job or file to another site.
func (g *ga) moveGene(c *chromosome) *chromosome {
	try := c.clone()
	for k := 0; k < g.budget && !g.late(); k++ {
		i := g.rng.IntN(g.genes)
		was := try.alloc[i]
		to := g.randomSite(i)
		if to == was {
			continue
		}
		try.alloc[i] = to
		g.score(try)
		if better(try, c) {
			return try
		}
		try.alloc[i] = was
	}
	return c
}

// pathRelink is Algorithm 7: walk each elite member's allocation towards
// the new best's, one differing gene at a time, keeping the best seen.
func (g *ga) pathRelink(dest *chromosome, elite []*chromosome) *chromosome {
	best := dest
	for _, e := range elite {
		o := e.clone()
		for i := range o.alloc {
			if g.late() {
				return best
			}
			if o.alloc[i] != dest.alloc[i] {
				o.alloc[i] = dest.alloc[i]
				g.score(o)
				if better(o, best) {
					best = o.clone()
				}
			}
		}
	}
	return best
}

// distance is the seed's: genes placed differently, plus positions of the
// order that differ (a bound on the moves to make one order the other).
func distance(a, b *chromosome) int {
	d := 0
	for i := range a.alloc {
		if a.alloc[i] != b.alloc[i] {
			d++
		}
	}
	for i := range a.order {
		if a.order[i] != b.order[i] {
			d++
		}
	}
	return d
}
