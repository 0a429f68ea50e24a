package lpplace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// The linear program, in these variables (rates as shares of an upper
// bound U on the pipeline's rate, so they are near 1 and the simplex is
// well scaled; bytes in MB):
//
//	x          the pipeline's rate
//	r[k,s]     items per second stage k processes at site s
//	n[k,s]     placeholders stage k holds at site s (integer)
//	l[k,s]     items per second of stage k's output consumed at s itself
//
// maximise x - W_X*sum n - W_C*sum(cross MB/s), subject to
//
//	sum_s r[k,s] = x                      every item passes every stage
//	r[k,s] <= cap[k,s]*n[k,s]             placeholders not overloaded (10, 11)
//	r[k,s] >= W_MIN*min(cap[k,s],U)*n[k,s] nor underused (13, 14)
//	sum_s cap*n[k,s] >= (1+W_F)*x         extra capacity (11)
//	sum_k n[k,s] <= Max[s]                one stage per placeholder
//	sum_s n[k,s] <= MaxCopies[k]
//	l[k,s] <= r[k,s], l[k,s] <= r[k+1,s]  what stays local
//	sum_k Out[k]*(r[k,s]-l[k,s] + r[k+1,s]-l[k,s]) <= Link[s]   (12)
type formulation struct {
	p     *Problem
	u     float64 // items per second that x = 1 stands for
	nvar  int
	x     int
	r, n  [][]int // [stage][site] variable, -1: not allowed
	l     [][]int // [edge][site]
	cap   [][]float64
	rows  []row
	obj   []float64 // minimised
	ints  []int     // the n variables
	nodes int
	// nodeCost is W_X as used.
	nodeCost float64
	// owner is the site each variable belongs to (-1: x).
	owner []int
	// decompose solves relaxations by site (decompose.go); fallbacks
	// counts those it could not certify and solved whole.
	decompose    bool
	fallbacks    int
	lastFallback error
}

type row struct {
	coef map[int]float64
	rhs  float64
	sign int8 // -1: <=, 0: =, 1: >=
}

func formulate(p *Problem) (*formulation, error) {
	K, S := len(p.Stages), len(p.Sites)
	f := &formulation{p: p}
	f.x = f.newVar()
	f.r, f.n, f.cap = grid(K, S), grid(K, S), make([][]float64, K)
	if err := f.capacities(); err != nil {
		return nil, err
	}
	f.newVars()
	f.obj = make([]float64, f.nvar)
	nodeCost, crossCost := p.NodeCost, p.CrossCost
	if nodeCost == 0 {
		nodeCost = DefaultNodeCost
	}
	if crossCost == 0 {
		crossCost = DefaultCrossCost
	}
	crossCost = max(crossCost, 0)
	f.nodeCost = nodeCost
	f.obj[f.x] = -1
	f.stageRows(nodeCost)
	f.siteRows(crossCost)
	for len(f.owner) < f.nvar {
		f.owner = append(f.owner, -1)
	}
	f.decompose = len(p.Sites) >= decomposeSites && len(f.rows) >= decomposeRows
	return f, nil
}

// capacities sets each stage's capacity per placeholder at each site and
// the unit u of the flow x: the most items per second the stage that can
// take the fewest can take.
func (f *formulation) capacities() error {
	p, S := f.p, len(f.p.Sites)
	f.u = math.Inf(1)
	for k, st := range p.Stages {
		f.cap[k] = make([]float64, S)
		total := 0.0
		for s, si := range p.Sites {
			c := p.Capacity(k, s)
			if c <= 0 {
				continue
			}
			if math.IsInf(c, 1) {
				return fmt.Errorf("lpplace: stage %s takes no time at %s: give it work", st.Name, si.Name)
			}
			f.cap[k][s] = c
			total += c * float64(si.Max)
		}
		if st.MaxCopies > 0 {
			best := 0.0
			for s := range p.Sites {
				best = max(best, f.cap[k][s])
			}
			total = min(total, best*float64(st.MaxCopies))
		}
		if total == 0 {
			return fmt.Errorf("%w: %s", ErrNoCapacity, st.Name)
		}
		f.u = min(f.u, total)
	}
	return nil
}

// newVars makes the variables: per stage and site where the stage can
// run, its rate r and its placeholders n; per edge and site, the rate l
// that stays local.
func (f *formulation) newVars() {
	p, K, S := f.p, len(f.p.Stages), len(f.p.Sites)
	for k := range p.Stages {
		for s := range p.Sites {
			if f.cap[k][s] > 0 {
				f.r[k][s], f.n[k][s] = f.newSiteVar(s), f.newSiteVar(s)
				f.ints = append(f.ints, f.n[k][s])
			}
		}
	}
	f.l = grid(max(K-1, 0), S)
	for k := 0; k+1 < K; k++ {
		for s := range p.Sites {
			if f.r[k][s] >= 0 && f.r[k+1][s] >= 0 && p.Stages[k].Out > 0 {
				f.l[k][s] = f.newSiteVar(s)
			}
		}
	}
}

// stageRows adds the rows of each stage (its rate against its
// placeholders, utilisation, its flow equal to x, extra capacity,
// copies) and the placeholders' cost.
func (f *formulation) stageRows(nodeCost float64) {
	p := f.p
	for k := range p.Stages {
		eq := row{coef: map[int]float64{f.x: -1}}
		extra := row{coef: map[int]float64{f.x: -(1 + p.Extra)}, sign: 1}
		copies := row{coef: map[int]float64{}, rhs: float64(p.Stages[k].MaxCopies), sign: -1}
		for s := range p.Sites {
			r, n := f.r[k][s], f.n[k][s]
			if r < 0 {
				continue
			}
			c := f.cap[k][s] / f.u
			eq.coef[r] = 1
			extra.coef[n] = c
			copies.coef[n] = 1
			f.obj[n] = nodeCost
			f.rows = append(f.rows, row{coef: map[int]float64{r: 1, n: -c}, sign: -1})
			if p.MinUtil > 0 {
				// The seed's F_min: busy W_MIN of what the placeholder
				// could do or of all the pipeline could feed it, the less.
				f.rows = append(f.rows, row{coef: map[int]float64{r: 1, n: -p.MinUtil * min(c, 1)}, sign: 1})
			}
		}
		f.rows = append(f.rows, eq)
		if p.Extra > 0 && k > 0 { // (11) is per edge: not the first stage
			f.rows = append(f.rows, extra)
		}
		if p.Stages[k].MaxCopies > 0 {
			f.rows = append(f.rows, copies)
		}
	}
}

// siteRows adds the rows of each site (its slots, its link, what stays
// local) and the cost of crossing sites.
func (f *formulation) siteRows(crossCost float64) {
	p, K := f.p, len(f.p.Stages)
	for s, si := range p.Sites {
		slots := row{coef: map[int]float64{}, rhs: float64(si.Max), sign: -1}
		link := row{coef: map[int]float64{}, rhs: si.Link / 1e6, sign: -1}
		for k := range p.Stages {
			if n := f.n[k][s]; n >= 0 {
				slots.coef[n] = 1
			}
			if k+1 == K {
				continue
			}
			mb := p.Stages[k].Out * f.u / 1e6 // MB/s per unit of a rate
			if mb == 0 {
				continue
			}
			rp, rc, l := f.r[k][s], f.r[k+1][s], f.l[k][s]
			// Out of s: what stage k makes here and is not consumed here;
			// into s: what stage k+1 consumes here and was not made here.
			if rp >= 0 {
				link.coef[rp] += mb
				f.obj[rp] += crossCost * mb
			}
			if rc >= 0 {
				link.coef[rc] += mb
			}
			if l >= 0 {
				link.coef[l] -= 2 * mb
				f.obj[l] -= crossCost * mb
				f.rows = append(f.rows,
					row{coef: map[int]float64{l: 1, rp: -1}, sign: -1},
					row{coef: map[int]float64{l: 1, rc: -1}, sign: -1})
			}
		}
		if len(slots.coef) > 0 {
			f.rows = append(f.rows, slots)
		}
		// Every rate is at most x <= 1: a link that carries the most
		// the site could ever send and receive cannot bind, and its
		// row, with coefficients maybe far below 1, would only make the
		// simplex's bases ill-conditioned.
		most := 0.0
		for _, c := range link.coef {
			most += max(c, 0)
		}
		if si.Link > 0 && most > link.rhs {
			f.rows = append(f.rows, link)
		}
	}
}

func grid(a, b int) [][]int {
	g := make([][]int, a)
	for i := range g {
		g[i] = make([]int, b)
		for j := range g[i] {
			g[i][j] = -1
		}
	}
	return g
}

func (f *formulation) newVar() int { f.nvar++; return f.nvar - 1 }

// newSiteVar is a variable of site s.
func (f *formulation) newSiteVar(s int) int {
	v := f.newVar()
	for len(f.owner) < f.nvar {
		f.owner = append(f.owner, -1)
	}
	f.owner[v] = s
	return v
}

// bounds are the branch and bound's limits on the n variables.
type bounds struct{ lo, hi map[int]float64 }

func (b bounds) with(v int, lo, hi float64) bounds {
	nb := bounds{lo: map[int]float64{}, hi: map[int]float64{}}
	for k, x := range b.lo {
		nb.lo[k] = x
	}
	for k, x := range b.hi {
		nb.hi[k] = x
	}
	if !math.IsNaN(lo) {
		nb.lo[v] = lo
	}
	if !math.IsNaN(hi) {
		nb.hi[v] = hi
	}
	return nb
}

var errInfeasible = errors.New("infeasible")

// relax solves the linear relaxation within b: the objective and the
// variables. A large problem is solved by decomposition by site
// (decompose.go); a small one whole, by lpSolve.
func (f *formulation) relax(b bounds) (opt float64, x []float64, err error) {
	f.nodes++
	// gonum panics on shapes it does not expect; a planner that takes
	// peers' numbers must not.
	defer func() {
		if r := recover(); r != nil {
			opt, x, err = 0, nil, fmt.Errorf("lpplace: simplex: %v", r)
		}
	}()
	lo := make([]float64, f.nvar)
	for v, x := range b.lo {
		lo[v] = x
	}
	rows := f.rows
	for _, v := range f.ints { // in order, so a run repeats
		if x, ok := b.hi[v]; ok {
			rows = append(rows[:len(rows):len(rows)], row{coef: map[int]float64{v: 1}, rhs: x, sign: -1})
		}
	}
	if f.decompose {
		opt, x, err = f.solveBySite(rows, lo)
		if err == nil || errors.Is(err, errInfeasible) || len(rows) > decomposeFallbackRows {
			return opt, x, err
		}
		// The decomposition did not prove its answer (numbers it could
		// not certify): the whole problem, slowly but surely.
		f.fallbacks++
		f.lastFallback = err
	}
	return lpSolve(f.nvar, f.obj, rows, lo, nil)
}

// lpSolve minimises obj.x over rows with x >= lo by gonum's simplex. The
// rows become standard form (a slack column per inequality, every
// variable >= 0). A lower bound shifts its variable (x = lo + x'), so
// when every row then reads "<= a non-negative number" the slack columns
// are a feasible starting basis and the simplex skips its first phase.
//
// With rng set, every row is loosened by a random 1e-9 or so: the
// polytope is then not degenerate, on which gonum's pivoting rule can
// cycle for ever, and the answer is off by no more than that.
func lpSolve(nvar int, obj []float64, in []row, lo []float64, rng *rand.Rand) (opt float64, x []float64, err error) {
	type le struct {
		coef map[int]float64
		rhs  float64
	}
	var rows []le
	add := func(coef map[int]float64, rhs float64, neg bool) {
		if rng != nil {
			d := lpEps * (1 + rng.Float64()) * (1 + math.Abs(rhs))
			if neg {
				d = -d
			}
			rhs += d
		}
		if neg {
			c := make(map[int]float64, len(coef))
			for v, x := range coef {
				c[v] = -x
			}
			coef, rhs = c, -rhs
		}
		for v, x := range coef {
			rhs -= x * lo[v]
		}
		rows = append(rows, le{coef, rhs})
	}
	for _, r := range in {
		switch r.sign {
		case -1:
			add(r.coef, r.rhs, false)
		case 1:
			add(r.coef, r.rhs, true)
		default:
			add(r.coef, r.rhs, false)
			add(r.coef, r.rhs, true)
		}
	}
	warm := true
	for i := range rows {
		switch {
		case rows[i].rhs < -1e-12:
			warm = false
		case rows[i].rhs < 0:
			rows[i].rhs = 0 // rounding from the shift
		}
	}
	cols := nvar + len(rows)
	A := mat.NewDense(len(rows), cols, nil)
	rhs := make([]float64, len(rows))
	basis := make([]int, len(rows))
	for i, r := range rows {
		for v, c := range r.coef {
			A.Set(i, v, c)
		}
		// A row reading "<= negative" is flipped to ">= positive": its
		// slack then has -1 and cannot start the basis.
		sign := 1.0
		if r.rhs < 0 {
			sign = -1
		}
		if sign < 0 {
			for v, c := range r.coef {
				A.Set(i, v, -c)
			}
		}
		A.Set(i, nvar+i, sign)
		rhs[i] = max(sign*r.rhs, 0)
		basis[i] = nvar + i
	}
	c := make([]float64, cols)
	copy(c, obj)
	if !warm {
		basis = nil
	}
	opt, x, err = lp.Simplex(c, A, rhs, 1e-10, basis)
	if err != nil && basis != nil && !errors.Is(err, lp.ErrInfeasible) {
		// A degenerate start can stall the pivoting rule: let the
		// simplex find its own starting basis instead.
		opt, x, err = lp.Simplex(c, A, rhs, 1e-10, nil)
	}
	switch {
	case errors.Is(err, lp.ErrInfeasible):
		return 0, nil, errInfeasible
	case err != nil:
		return 0, nil, fmt.Errorf("lpplace: simplex: %w", err)
	}
	x = x[:nvar]
	for v := range x {
		x[v] += lo[v]
		opt += obj[v] * lo[v]
	}
	return opt, x, nil
}

const intTol = 1e-6

// solve runs a depth-first branch and bound over the n variables, the
// ceiling branch first (it keeps the rate, so a good plan is found early).
func (f *formulation) solve(ctx context.Context) (Plan, error) {
	p := f.p
	limit := p.MaxNodes
	if limit == 0 {
		limit = DefaultMaxNodes
	}
	best, bestObj := []float64(nil), math.Inf(1)
	root := bounds{lo: map[int]float64{}, hi: map[int]float64{}}
	stack := []bounds{root}
	complete := true
	// A plan within half a placeholder's cost of the bound is as good as
	// any: what is left between them is rounding, and ties between
	// sites would otherwise be searched one by one.
	gap := f.nodeCost / 2
	rounded := false
	for len(stack) > 0 {
		if f.nodes >= limit || ctx.Err() != nil {
			complete = false
			break
		}
		b := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		obj, x, err := f.relax(b)
		if errors.Is(err, errInfeasible) {
			continue
		}
		if errors.Is(err, errUncertified) && (best != nil || len(stack) > 0) {
			complete = false // a branch not searched
			continue
		}
		if err != nil {
			return Plan{}, err
		}
		if obj >= bestObj-gap {
			continue
		}
		if p.Relaxed {
			best, bestObj = x, obj
			break
		}
		if !rounded {
			// Every count rounded up from the root's relaxation, the
			// rates re-solved: usually feasible, and a good first plan.
			rounded = true
			tries := [][]float64{f.roundUp(x, intTol), f.roundDown(x)}
			if f.decompose {
				// The decomposition's optimum is a blend of each site's
				// vertices, its counts more often a little over a
				// whole: rounded to the nearest too.
				tries = append(tries, f.roundUp(x, 0.5))
			}
			for _, counts := range tries {
				fix := root
				for i, v := range f.ints {
					fix = fix.with(v, counts[i], counts[i])
				}
				if o, xr, err := f.relax(fix); err == nil && o < bestObj {
					best, bestObj = xr, o
				} else if err != nil && !errors.Is(err, errInfeasible) && !errors.Is(err, errUncertified) {
					return Plan{}, err
				}
			}
			if obj >= bestObj-gap {
				continue
			}
		}
		branch, frac := -1, 0.0
		for _, v := range f.ints {
			d := x[v] - math.Floor(x[v])
			if d > intTol && d < 1-intTol {
				if m := min(d, 1-d); m > frac {
					branch, frac = v, m
				}
			}
		}
		if branch < 0 {
			best, bestObj = x, obj
			continue
		}
		stack = append(stack,
			b.with(branch, math.NaN(), math.Floor(x[branch])),
			b.with(branch, math.Ceil(x[branch]), math.NaN()))
	}
	if best == nil {
		if err := ctx.Err(); err != nil {
			return Plan{}, fmt.Errorf("lpplace: no plan found before: %w", err)
		}
		return Plan{}, fmt.Errorf("lpplace: no integer plan within %d linear programs", limit)
	}
	pl := f.plan(best, complete)
	if pl.Rate <= 1e-9*f.u {
		return Plan{}, fmt.Errorf("lpplace: no plan carries any items (is the minimum utilisation %g too high?)", p.MinUtil)
	}
	return pl, nil
}

// roundDown is every count of the relaxation x rounded down: within
// every site's and stage's limits.
func (f *formulation) roundDown(x []float64) []float64 {
	out := make([]float64, len(f.ints))
	for i, v := range f.ints {
		out[i] = math.Floor(x[v] + intTol)
	}
	return out
}

// roundUp is every count of x rounded up (less tol), then, where a site
// or a stage is over its limit, the counts with the least fraction taken
// back down.
func (f *formulation) roundUp(x []float64, tol float64) []float64 {
	p := f.p
	out := make([]float64, len(f.ints))
	idx := map[int]int{}
	for i, v := range f.ints {
		out[i] = math.Ceil(x[v] - tol)
		idx[v] = i
	}
	// fit lowers the counts of vars, least fraction first, to at most
	// limit in all.
	fit := func(vars []int, limit float64) {
		for {
			sum, pick, least := 0.0, -1, 2.0
			for _, v := range vars {
				i := idx[v]
				sum += out[i]
				if fr := x[v] - math.Floor(x[v]+intTol); out[i] > math.Floor(x[v]+intTol) && fr < least {
					pick, least = i, fr
				}
			}
			if sum <= limit || pick < 0 {
				return
			}
			out[pick]--
		}
	}
	for s, si := range p.Sites {
		var vars []int
		for k := range p.Stages {
			if v := f.n[k][s]; v >= 0 {
				vars = append(vars, v)
			}
		}
		fit(vars, float64(si.Max))
	}
	for k, st := range p.Stages {
		if st.MaxCopies > 0 {
			var vars []int
			for s := range p.Sites {
				if v := f.n[k][s]; v >= 0 {
					vars = append(vars, v)
				}
			}
			fit(vars, float64(st.MaxCopies))
		}
	}
	return out
}

func (f *formulation) plan(x []float64, optimal bool) Plan {
	p := f.p
	K, S := len(p.Stages), len(p.Sites)
	pl := Plan{Rate: x[f.x] * f.u, Count: make([][]int, K), Flow: make([][]float64, K), Nodes: f.nodes, Optimal: optimal}
	for k := range p.Stages {
		pl.Count[k] = make([]int, S)
		pl.Flow[k] = make([]float64, S)
		for s := range p.Sites {
			if f.r[k][s] < 0 {
				continue
			}
			pl.Flow[k][s] = x[f.r[k][s]] * f.u
			pl.Count[k][s] = int(math.Ceil(x[f.n[k][s]] - intTol))
			pl.Placeholders += pl.Count[k][s]
			if k+1 < K {
				local := 0.0
				if l := f.l[k][s]; l >= 0 {
					local = x[l] * f.u
				}
				pl.Cross += max(pl.Flow[k][s]-local, 0) * p.Stages[k].Out
			}
		}
	}
	return pl
}
