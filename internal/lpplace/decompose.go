package lpplace

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// Decomposition by site (Dantzig-Wolfe), for problems of many sites,
// where the whole LP (about 3 rows per stage and site) is out of reach of
// gonum's dense simplex, which factorises its basis at every pivot.
//
// Why it gives the same optimum. The rows split into each site's own
// (its placeholders against its slots, its links, what stays local, the
// branch's bounds on its counts: rows over one site's variables only)
// and the few coupling rows (every stage's flow equals x, extra capacity,
// copies over sites: rows over x or several sites' variables). A site's
// own rows bound a polytope P_s: it is bounded, since r <= cap*n, the
// site's n sum to at most Max and l <= r. So a point z_s satisfies them
// iff it is a convex combination of P_s's vertices (Minkowski), and the
// LP equals the master LP over x and, per site, weights on its vertices
// summing to 1, with the coupling rows on top. Column generation solves
// the master over a few vertices at a time: each round, every site's LP
// is solved at the master's duals, and a vertex whose reduced cost is
// negative joins the master. When none is, the master's duals are
// feasible for the master over every vertex, which proves the restricted
// master's optimum optimal for the whole (LP duality). The duals come
// from the master's optimal basis (B^T y = c_B). The restricted master
// starts with artificial columns for the coupling rows at a cost M far
// above any gain, so it is always feasible; artificials left at the end
// mean the LP is infeasible.
//
// The master has a row per coupling row and per site (K + S + a few, not
// about 3KS), and each site's LP about 3K variables: dense simplices of
// those sizes take milliseconds. A round that cannot be certified (a
// basis that will not factorise) returns an error, and relax solves the
// problem whole.
const (
	decomposeSites = 6   // fewer sites: the whole LP is small enough
	decomposeRows  = 150 // fewer rows: likewise
	dwMaxRounds    = 500
	// An LP the decomposition cannot certify is solved whole only up to
	// this many rows (minutes); beyond, its branch is left unsearched
	// (the plan is then not Optimal) or, at the root, the plan fails.
	decomposeFallbackRows = 600
	dwBigM                = 1e4
	dwBatch               = 8    // columns a round adds at most
	lpEps                 = 1e-9 // the perturbation that keeps gonum's simplex from cycling
)

var errUncertified = errors.New("lpplace: decomposition: optimum not certified")

type dwCol struct {
	site int       // -1: x (or another variable of no site)
	z    []float64 // the site's variables, in vars[site] order; x: one value
	cost float64
	a    []float64 // coefficients in the coupling rows
}

// solveBySite solves the LP over rows, with lower bounds lo, by
// decomposition by site: the same optimum and point as lpSolve on the
// whole, or errUncertified when it cannot prove one.
func (f *formulation) solveBySite(rows []row, lo []float64) (float64, []float64, error) {
	d, err := newSiteMaster(f, rows, lo)
	if err != nil {
		return 0, nil, err
	}
	if err := d.firstColumns(); err != nil {
		return 0, nil, err
	}
	w := make([]float64, f.nvar)
	for range dwMaxRounds {
		// A basis whose duals do not price every column at >= 0 was
		// not told apart from a degenerate neighbour: perturbed more.
		var lam, y []float64
		for _, eps := range []float64{10 * lpEps, 1e3 * lpEps, 1e4 * lpEps} {
			if lam, y, err = d.solve(eps); !errors.Is(err, errUncertified) {
				break
			}
		}
		if err != nil {
			return 0, nil, err
		}
		d.reducedCosts(y, w)
		added, err := d.price(w, y)
		if err != nil {
			return 0, nil, err
		}
		if added == 0 {
			return d.solution(lam)
		}
	}
	return 0, nil, fmt.Errorf("%w: %d rounds", errUncertified, dwMaxRounds)
}

// siteMaster is the restricted master LP of a decomposition by site and
// what it takes to price new columns for it: the rows split into each
// site's own and the coupling ones, and the columns found so far.
type siteMaster struct {
	f        *formulation
	lo       []float64
	vars     [][]int // each site's variables
	local    []int   // a variable's index in its site's vars
	free     []int   // variables of no site: x
	own      [][]row // each site's own rows, over its local indexes
	coupling []row
	terms    [][]dwTerm // each site's coefficients in the coupling rows
	active   []int      // sites with variables: a convexity row each
	conv     []int      // a site's convexity row, -1: none
	m        int        // the master's rows
	rng      *rand.Rand
	cols     []dwCol
	b        []float64 // the master's right-hand side
	// The master's fixed columns after the vertices: a slack per
	// coupling inequality (the first nslack), two artificials per
	// coupling row.
	fix    []dwFixed
	nslack int
	// prev is the last certified basis (a vertex's index in cols, or
	// -1-i for fix[i]): new columns join at 0, so it is still feasible
	// for the same perturbation and the next solve starts from it.
	prev    []int
	prevEps float64
	shift   map[float64][]float64 // the right-hand side's perturbation per eps
	next    int                   // the site pricing starts at, in active
}

// dwTerm is one coefficient of a site's variable in a coupling row.
type dwTerm struct {
	at  int // local index
	row int
	c   float64
}

// dwFixed is a master column that is not a vertex: a slack or an
// artificial.
type dwFixed struct {
	row  int
	coef float64
	cost float64
}

// newSiteMaster splits the variables and rows of the LP by site and sets
// up the master's rows and fixed columns.
func newSiteMaster(f *formulation, rows []row, lo []float64) (*siteMaster, error) {
	S := len(f.p.Sites)
	d := &siteMaster{f: f, lo: lo, vars: make([][]int, S), local: make([]int, f.nvar), shift: map[float64][]float64{}}
	for v, s := range f.owner {
		if s < 0 {
			d.free = append(d.free, v)
			continue
		}
		d.local[v] = len(d.vars[s])
		d.vars[s] = append(d.vars[s], v)
	}
	for _, v := range d.free {
		if lo[v] != 0 {
			return nil, errUncertified
		}
	}
	d.splitRows(rows)
	C := len(d.coupling)
	d.conv = make([]int, S)
	for s := range S {
		d.conv[s] = -1
		if len(d.vars[s]) > 0 {
			d.conv[s] = C + len(d.active)
			d.active = append(d.active, s)
		}
	}
	d.m = C + len(d.active)
	d.rng = rand.New(rand.NewPCG(1, uint64(d.m)))
	d.b = make([]float64, d.m)
	for i, r := range d.coupling {
		d.b[i] = r.rhs
	}
	for _, s := range d.active {
		d.b[d.conv[s]] = 1
	}
	for i, r := range d.coupling {
		if r.sign != 0 {
			d.fix = append(d.fix, dwFixed{i, float64(-r.sign), 0})
		}
	}
	d.nslack = len(d.fix)
	for i := range d.coupling {
		d.fix = append(d.fix, dwFixed{i, 1, dwBigM}, dwFixed{i, -1, dwBigM})
	}
	return d, nil
}

// splitRows sorts rows into each site's own (over one site's variables,
// rewritten over their local indexes) and the coupling rows, and lists
// each site's coefficients in the coupling rows.
func (d *siteMaster) splitRows(rows []row) {
	f := d.f
	d.own = make([][]row, len(f.p.Sites))
	for _, r := range rows {
		s := -2
		for v := range r.coef {
			if o := f.owner[v]; o < 0 || (s != -2 && o != s) {
				s = -1
				break
			} else {
				s = o
			}
		}
		switch {
		case s >= 0:
			lr := row{coef: make(map[int]float64, len(r.coef)), rhs: r.rhs, sign: r.sign}
			for v, c := range r.coef {
				lr.coef[d.local[v]] = c
			}
			d.own[s] = append(d.own[s], lr)
		case s == -1:
			d.coupling = append(d.coupling, r)
		}
	}
	d.terms = make([][]dwTerm, len(f.p.Sites))
	for i, r := range d.coupling {
		for v, c := range r.coef {
			if s := f.owner[v]; s >= 0 {
				d.terms[s] = append(d.terms[s], dwTerm{d.local[v], i, c})
			}
		}
	}
	for s := range d.terms { // map order is random; a run repeats
		slices.SortFunc(d.terms[s], func(a, b dwTerm) int { return a.row*f.nvar + a.at - (b.row*f.nvar + b.at) })
	}
}

// siteCol is the master column of point z of site s.
func (d *siteMaster) siteCol(s int, z []float64) dwCol {
	col := dwCol{site: s, z: z, a: make([]float64, len(d.coupling))}
	for i, v := range d.vars[s] {
		col.cost += d.f.obj[v] * z[i]
	}
	for _, t := range d.terms[s] {
		col.a[t.row] += t.c * z[t.at]
	}
	return col
}

// siteLP minimises w (per variable of the problem) over P_s.
func (d *siteMaster) siteLP(s int, w []float64) (float64, []float64, error) {
	wl := make([]float64, len(d.vars[s]))
	ll := make([]float64, len(d.vars[s]))
	for i, v := range d.vars[s] {
		wl[i], ll[i] = w[v], d.lo[v]
	}
	return lpSolve(len(d.vars[s]), wl, d.own[s], ll, d.rng)
}

// firstColumns gives the master a column per free variable and, as first
// vertices, the cheapest point of each site and the one with the most
// flow.
func (d *siteMaster) firstColumns() error {
	f := d.f
	for _, v := range d.free {
		col := dwCol{site: -1, z: []float64{1}, cost: f.obj[v], a: make([]float64, len(d.coupling))}
		for i, r := range d.coupling {
			col.a[i] = r.coef[v]
		}
		d.cols = append(d.cols, col)
	}
	most := make([]float64, f.nvar)
	for k := range f.p.Stages {
		for s := range f.p.Sites {
			if v := f.r[k][s]; v >= 0 {
				most[v] = -1
			}
		}
	}
	for _, s := range d.active {
		for _, w := range [][]float64{f.obj, most} {
			_, z, err := d.siteLP(s, w)
			if err != nil {
				return err // errInfeasible: the site's own rows cannot be met
			}
			d.cols = append(d.cols, d.siteCol(s, z))
		}
	}
	return nil
}

// solve solves the restricted master, its right-hand side perturbed by
// about eps (and then with the duals of the basis it ends on). Only
// perturbed ones are solved: on the exact one, degenerate, gonum's
// pivoting can cycle.
func (d *siteMaster) solve(eps float64) (lam, y []float64, err error) {
	perturb := eps > 0
	A, c := d.matrix()
	rhs := slices.Clone(d.b)
	if perturb {
		// A generic right-hand side makes the optimal basis
		// nondegenerate: its columns are exactly the positive ones.
		// (The sites' weights are scaled back to sum to 1.)
		if d.shift[eps] == nil {
			d.shift[eps] = make([]float64, d.m)
			for i := range d.m {
				d.shift[eps][i] = eps * (1 + d.rng.Float64())
			}
		}
		for i := range rhs {
			rhs[i] += d.shift[eps][i]
		}
	}
	err = errors.New("no warm basis")
	if d.prev != nil && d.prevEps == eps {
		warm := make([]int, d.m)
		for i, j := range d.prev {
			if j < 0 {
				j = len(d.cols) - 1 - j
			}
			warm[i] = j
		}
		_, lam, err = lp.Simplex(c, A, rhs, 1e-10, warm)
	}
	if err != nil {
		_, lam, err = lp.Simplex(c, A, rhs, 1e-10, d.firstBasis(rhs))
	}
	if err != nil {
		_, lam, err = lp.Simplex(c, A, rhs, 1e-10, nil)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: master: %v", errUncertified, err)
	}
	if !perturb {
		return lam, nil, nil
	}
	y, chosen, err := d.duals(A, c, lam)
	if err != nil {
		return nil, nil, err
	}
	d.prev, d.prevEps = chosen, eps
	return lam, y, nil
}

// matrix is the master's constraint matrix and costs: the vertex
// columns, then the fixed ones.
func (d *siteMaster) matrix() (*mat.Dense, []float64) {
	n := len(d.cols) + len(d.fix)
	A := mat.NewDense(d.m, n, nil)
	c := make([]float64, n)
	for j, col := range d.cols {
		c[j] = col.cost
		for i, a := range col.a {
			A.Set(i, j, a)
		}
		if col.site >= 0 {
			A.Set(d.conv[col.site], j, 1)
		}
	}
	for j, fx := range d.fix {
		A.Set(fx.row, len(d.cols)+j, fx.coef)
		c[len(d.cols)+j] = fx.cost
	}
	return A, c
}

// firstBasis is a feasible basis of the master with right-hand side rhs:
// each site's first vertex, an artificial for what is left of each
// coupling row.
func (d *siteMaster) firstBasis(rhs []float64) []int {
	C := len(d.coupling)
	basis := make([]int, d.m)
	left := slices.Clone(rhs[:C])
	for _, s := range d.active {
		for j, col := range d.cols {
			if col.site == s {
				basis[d.conv[s]] = j
				for i, a := range col.a {
					left[i] -= a
				}
				break
			}
		}
	}
	for i := range C {
		j := len(d.cols) + d.nslack + 2*i
		if left[i] < 0 {
			j++
		}
		basis[i] = j
	}
	return basis
}

// duals are the duals of the optimal basis of the perturbed master whose
// solution is lam (B^T y = c_B), and that basis in prev's form. They must
// price every column at >= 0, else the basis was not the optimal one.
func (d *siteMaster) duals(A *mat.Dense, c, lam []float64) (y []float64, chosen []int, err error) {
	B, cb, chosen := d.basisOf(A, c, lam)
	if B == nil {
		return nil, nil, fmt.Errorf("%w: no basis", errUncertified)
	}
	var yv mat.VecDense
	if err := yv.SolveVec(B.T(), mat.NewVecDense(d.m, cb)); err != nil {
		return nil, nil, fmt.Errorf("%w: duals: %v", errUncertified, err)
	}
	y = yv.RawVector().Data
	for j := range c {
		r := c[j]
		for i := range d.m {
			r -= y[i] * A.At(i, j)
		}
		if r < -1e-7 {
			return nil, nil, fmt.Errorf("%w: dual infeasible by %g", errUncertified, r)
		}
	}
	return y, chosen, nil
}

// basisOf picks the basis of the master's solution lam: the positive
// columns, largest first, completed by slacks and then any column that
// is independent. It returns the basis matrix, its costs and its
// columns in prev's form, or a nil matrix if no m columns are
// independent.
func (d *siteMaster) basisOf(A *mat.Dense, c, lam []float64) (*mat.Dense, []float64, []int) {
	m, ncols := d.m, len(d.cols)
	order := make([]int, len(c))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(p, q int) int {
		pos := func(j int) int {
			switch {
			case lam[j] > 1e-13:
				return 0
			case j >= ncols && j < ncols+d.nslack:
				return 1
			}
			return 2
		}
		if d := pos(p) - pos(q); d != 0 {
			return d
		}
		switch {
		case lam[p] > lam[q]:
			return -1
		case lam[p] < lam[q]:
			return 1
		}
		return 0
	})
	var q [][]float64 // orthonormal span of the chosen columns
	B := mat.NewDense(m, m, nil)
	cb := make([]float64, m)
	chosen := make([]int, 0, m)
	k := 0
	for _, j := range order {
		if k == m {
			break
		}
		v := mat.Col(nil, j, A)
		w := slices.Clone(v)
		for _, e := range q {
			dot := 0.0
			for i := range w {
				dot += w[i] * e[i]
			}
			for i := range w {
				w[i] -= dot * e[i]
			}
		}
		norm := 0.0
		for _, x := range w {
			norm += x * x
		}
		norm = math.Sqrt(norm)
		if norm < 1e-9*max(1, mat.Norm(mat.NewVecDense(m, v), 2)) {
			continue
		}
		for i := range w {
			w[i] /= norm
		}
		q = append(q, w)
		B.SetCol(k, v)
		cb[k] = c[j]
		k++
		if j >= ncols {
			chosen = append(chosen, ncols-1-j)
		} else {
			chosen = append(chosen, j)
		}
	}
	if k < m {
		return nil, nil, nil
	}
	return B, cb, chosen
}

// reducedCosts sets w to each variable's cost less what the coupling
// rows' duals y charge for it.
func (d *siteMaster) reducedCosts(y, w []float64) {
	copy(w, d.f.obj)
	for i, r := range d.coupling {
		for v, c := range r.coef {
			w[v] -= y[i] * c
		}
	}
}

// price adds the master columns the sites' LPs at reduced costs w find,
// by partial pricing: the sites in turn from where the last round
// stopped, until a batch of columns is found. A round that prices every
// site and finds none (added 0) is the certificate of optimality.
func (d *siteMaster) price(w, y []float64) (added int, err error) {
	for range d.active {
		s := d.active[d.next%len(d.active)]
		d.next++
		val, z, err := d.siteLP(s, w)
		if err != nil {
			return 0, fmt.Errorf("%w: site %s: %v", errUncertified, d.f.p.Sites[s].Name, err)
		}
		if val-y[d.conv[s]] < -1e-9 {
			d.cols = append(d.cols, d.siteCol(s, z))
			if added++; added == dwBatch {
				break
			}
		}
	}
	return added, nil
}

// solution is the point of the problem the master's optimum lam stands
// for, and its objective; errInfeasible if an artificial is left in it.
// The perturbed master's answer is off by its 1e-8 (rarely 1e-5) or so
// in the coupling rows; each site's weights are scaled to sum to 1, so
// its own rows hold as its vertices do.
func (d *siteMaster) solution(lam []float64) (float64, []float64, error) {
	f := d.f
	for j := range d.fix[d.nslack:] {
		if lam[len(d.cols)+d.nslack+j] > 1e-6 {
			return 0, nil, errInfeasible
		}
	}
	sum := make([]float64, len(f.p.Sites))
	for j, col := range d.cols {
		if col.site >= 0 {
			sum[col.site] += lam[j]
		}
	}
	x := make([]float64, f.nvar)
	fi := 0
	for j, col := range d.cols {
		if col.site < 0 {
			x[d.free[fi]] = lam[j]
			fi++
			continue
		}
		for i, v := range d.vars[col.site] {
			x[v] += lam[j] / sum[col.site] * col.z[i]
		}
	}
	opt := 0.0
	for v := range x {
		opt += f.obj[v] * x[v]
	}
	return opt, x, nil
}
