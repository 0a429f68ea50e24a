package lpsched

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

var errUncertified = errors.New("lpsched: decomposition: optimum not certified")

type dwCol struct {
	site int       // -1: x (or another variable of no site)
	z    []float64 // the site's variables, in vars[site] order; x: one value
	cost float64
	a    []float64 // coefficients in the coupling rows
}

func (f *formulation) solveBySite(rows []row, lo []float64) (float64, []float64, error) {
	S := len(f.p.Sites)
	vars := make([][]int, S) // each site's variables
	local := make([]int, f.nvar)
	var free []int // variables of no site: x
	for v, s := range f.owner {
		if s < 0 {
			free = append(free, v)
			continue
		}
		local[v] = len(vars[s])
		vars[s] = append(vars[s], v)
	}
	for _, v := range free {
		if lo[v] != 0 {
			return 0, nil, errUncertified
		}
	}
	own := make([][]row, S)
	var coupling []row
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
				lr.coef[local[v]] = c
			}
			own[s] = append(own[s], lr)
		case s == -1:
			coupling = append(coupling, r)
		}
	}
	C := len(coupling)
	// A site point's coefficients in the coupling rows.
	type term struct {
		at  int // local index
		row int
		c   float64
	}
	terms := make([][]term, S)
	for i, r := range coupling {
		for v, c := range r.coef {
			if s := f.owner[v]; s >= 0 {
				terms[s] = append(terms[s], term{local[v], i, c})
			}
		}
	}
	for s := range terms { // map order is random; a run repeats
		slices.SortFunc(terms[s], func(a, b term) int { return a.row*f.nvar + a.at - (b.row*f.nvar + b.at) })
	}
	var active []int // sites with variables: a convexity row each
	conv := make([]int, S)
	for s := range S {
		conv[s] = -1
		if len(vars[s]) > 0 {
			conv[s] = C + len(active)
			active = append(active, s)
		}
	}
	m := C + len(active)
	rng := rand.New(rand.NewPCG(1, uint64(m)))
	siteCol := func(s int, z []float64) dwCol {
		col := dwCol{site: s, z: z, a: make([]float64, C)}
		for i, v := range vars[s] {
			col.cost += f.obj[v] * z[i]
		}
		for _, t := range terms[s] {
			col.a[t.row] += t.c * z[t.at]
		}
		return col
	}
	// siteLP minimises w (per variable of the problem) over P_s.
	siteLP := func(s int, w []float64) (float64, []float64, error) {
		wl := make([]float64, len(vars[s]))
		ll := make([]float64, len(vars[s]))
		for i, v := range vars[s] {
			wl[i], ll[i] = w[v], lo[v]
		}
		return lpSolve(len(vars[s]), wl, own[s], ll, rng)
	}
	var cols []dwCol
	for _, v := range free {
		col := dwCol{site: -1, z: []float64{1}, cost: f.obj[v], a: make([]float64, C)}
		for i, r := range coupling {
			col.a[i] = r.coef[v]
		}
		cols = append(cols, col)
	}
	// First vertices: the cheapest point of each site, and the one with
	// the most flow.
	most := make([]float64, f.nvar)
	for k := range f.p.Stages {
		for s := range f.p.Sites {
			if v := f.r[k][s]; v >= 0 {
				most[v] = -1
			}
		}
	}
	for _, s := range active {
		for _, w := range [][]float64{f.obj, most} {
			_, z, err := siteLP(s, w)
			if err != nil {
				return 0, nil, err // errInfeasible: the site's own rows cannot be met
			}
			cols = append(cols, siteCol(s, z))
		}
	}
	b := make([]float64, m)
	for i, r := range coupling {
		b[i] = r.rhs
	}
	for _, s := range active {
		b[conv[s]] = 1
	}
	// The master's fixed columns after the vertices: a slack per
	// coupling inequality, two artificials per coupling row.
	type fixed struct {
		row  int
		coef float64
		cost float64
	}
	var fix []fixed
	for i, r := range coupling {
		if r.sign != 0 {
			fix = append(fix, fixed{i, float64(-r.sign), 0})
		}
	}
	nslack := len(fix)
	for i := range coupling {
		fix = append(fix, fixed{i, 1, dwBigM}, fixed{i, -1, dwBigM})
	}
	// solve solves the restricted master, its right-hand side perturbed
	// by about eps (and then with the duals of the basis it ends on).
	// Only perturbed ones are solved: on the exact one, degenerate,
	// gonum's pivoting can cycle.
	// prev is the last certified basis (a vertex's index in cols, or
	// -1-i for fix[i]): new columns join at 0, so it is still feasible
	// for the same perturbation and the next solve starts from it.
	var prev []int
	var prevEps float64
	shift := map[float64][]float64{}
	solve := func(eps float64) (lam, y []float64, err error) {
		perturb := eps > 0
		n := len(cols) + len(fix)
		A := mat.NewDense(m, n, nil)
		c := make([]float64, n)
		for j, col := range cols {
			c[j] = col.cost
			for i, a := range col.a {
				A.Set(i, j, a)
			}
			if col.site >= 0 {
				A.Set(conv[col.site], j, 1)
			}
		}
		for j, fx := range fix {
			A.Set(fx.row, len(cols)+j, fx.coef)
			c[len(cols)+j] = fx.cost
		}
		rhs := slices.Clone(b)
		if perturb {
			// A generic right-hand side makes the optimal basis
			// nondegenerate: its columns are exactly the positive ones.
			// (The sites' weights are scaled back to sum to 1.)
			if shift[eps] == nil {
				shift[eps] = make([]float64, m)
				for i := range m {
					shift[eps][i] = eps * (1 + rng.Float64())
				}
			}
			for i := range rhs {
				rhs[i] += shift[eps][i]
			}
		}
		// A feasible first basis: each site's first vertex, an
		// artificial for what is left of each coupling row.
		basis := make([]int, m)
		left := slices.Clone(rhs[:C])
		for _, s := range active {
			for j, col := range cols {
				if col.site == s {
					basis[conv[s]] = j
					for i, a := range col.a {
						left[i] -= a
					}
					break
				}
			}
		}
		for i := range C {
			j := len(cols) + nslack + 2*i
			if left[i] < 0 {
				j++
			}
			basis[i] = j
		}
		err = errors.New("no warm basis")
		if prev != nil && prevEps == eps {
			warm := make([]int, m)
			for i, j := range prev {
				if j < 0 {
					j = len(cols) - 1 - j
				}
				warm[i] = j
			}
			_, lam, err = lp.Simplex(c, A, rhs, 1e-10, warm)
		}
		if err != nil {
			_, lam, err = lp.Simplex(c, A, rhs, 1e-10, basis)
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
		// The basis: the positive columns, largest first, completed
		// by slacks and then any column that is independent.
		order := make([]int, n)
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(p, q int) int {
			pos := func(j int) int {
				switch {
				case lam[j] > 1e-13:
					return 0
				case j >= len(cols) && j < len(cols)+nslack:
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
				d := 0.0
				for i := range w {
					d += w[i] * e[i]
				}
				for i := range w {
					w[i] -= d * e[i]
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
			if j >= len(cols) {
				chosen = append(chosen, len(cols)-1-j)
			} else {
				chosen = append(chosen, j)
			}
		}
		if k < m {
			return nil, nil, fmt.Errorf("%w: no basis", errUncertified)
		}
		var yv mat.VecDense
		if err := yv.SolveVec(B.T(), mat.NewVecDense(m, cb)); err != nil {
			return nil, nil, fmt.Errorf("%w: duals: %v", errUncertified, err)
		}
		y = yv.RawVector().Data
		// The duals must price every column of the master at >= 0:
		// else the basis was not the optimal one.
		for j := range n {
			d := c[j]
			for i := range m {
				d -= y[i] * A.At(i, j)
			}
			if d < -1e-7 {
				return nil, nil, fmt.Errorf("%w: dual infeasible by %g", errUncertified, d)
			}
		}
		prev, prevEps = chosen, eps
		return lam, y, nil
	}
	w := make([]float64, f.nvar)
	next := 0
	for range dwMaxRounds {
		// A basis whose duals do not price every column at >= 0 was
		// not told apart from a degenerate neighbour: perturbed more.
		var lam, y []float64
		var err error
		for _, eps := range []float64{10 * lpEps, 1e3 * lpEps, 1e4 * lpEps} {
			if lam, y, err = solve(eps); !errors.Is(err, errUncertified) {
				break
			}
		}
		if err != nil {
			return 0, nil, err
		}
		for v := range w {
			w[v] = f.obj[v]
		}
		for i, r := range coupling {
			for v, c := range r.coef {
				w[v] -= y[i] * c
			}
		}
		// Partial pricing: the sites in turn from where the last round
		// stopped, until a batch of columns is found; a round that
		// prices every site and finds none is the certificate.
		added := 0
		for range active {
			s := active[next%len(active)]
			next++
			val, z, err := siteLP(s, w)
			if err != nil {
				return 0, nil, fmt.Errorf("%w: site %s: %v", errUncertified, f.p.Sites[s].Name, err)
			}
			if val-y[conv[s]] < -1e-9 {
				cols = append(cols, siteCol(s, z))
				if added++; added == dwBatch {
					break
				}
			}
		}
		if added == 0 {
			// The perturbed master's answer: off by its 1e-8 (rarely
			// 1e-5) or so in the coupling rows; each site's weights
			// are scaled to sum to 1, so its own rows hold as its
			// vertices do.
			for j := range fix[nslack:] {
				if lam[len(cols)+nslack+j] > 1e-6 {
					return 0, nil, errInfeasible
				}
			}
			sum := make([]float64, S)
			for j, col := range cols {
				if col.site >= 0 {
					sum[col.site] += lam[j]
				}
			}
			x := make([]float64, f.nvar)
			fi := 0
			for j, col := range cols {
				if col.site < 0 {
					x[free[fi]] = lam[j]
					fi++
					continue
				}
				for i, v := range vars[col.site] {
					x[v] += lam[j] / sum[col.site] * col.z[i]
				}
			}
			opt := 0.0
			for v := range x {
				opt += f.obj[v] * x[v]
			}
			return opt, x, nil
		}
	}
	return 0, nil, fmt.Errorf("%w: %d rounds", errUncertified, dwMaxRounds)
}
