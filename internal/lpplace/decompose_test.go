package lpplace

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// randomProblem is a pipeline of random stages over random sites, with
// pinned readers, copies limits, slow links and measured times mixed in.
func randomProblem(rng *rand.Rand, sites, stages int) Problem {
	var p Problem
	for s := range sites {
		p.Sites = append(p.Sites, Site{Name: fmt.Sprintf("s%d", s), Speed: 0.5 + 2*rng.Float64(), Max: 1 + rng.IntN(8),
			NIC: []float64{0, 12.5e6, 1e6}[rng.IntN(3)], Link: []float64{0, 1e6, 1e5, 2e4}[rng.IntN(4)]})
	}
	p.Stages = append(p.Stages, Stage{Name: "read", Work: 0.05 + rng.Float64(), Out: 1e5 * rng.Float64(), Sites: []string{"s0"}, MaxCopies: 1})
	for k := 1; k < stages; k++ {
		st := Stage{Name: fmt.Sprintf("k%d", k), Work: 0.1 + 3*rng.Float64(), Out: 1e5 * rng.Float64()}
		if rng.IntN(4) == 0 {
			st.MaxCopies = 1 + rng.IntN(4)
		}
		if rng.IntN(4) == 0 {
			st.Times = make([]float64, sites)
			for s := range st.Times {
				st.Times[s] = 0.1 + 5*rng.Float64()
			}
		}
		p.Stages = append(p.Stages, st)
	}
	if rng.IntN(3) == 0 {
		p.MinUtil = 0.5 * rng.Float64()
	}
	if rng.IntN(3) == 0 {
		p.Extra = 0.3 * rng.Float64()
	}
	return p
}

// The decomposition by site finds the same optimum as the whole LP, at
// the root and under branch bounds, on random problems small enough for
// the whole LP.
func TestDecomposeMatchesWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 18))
	for i := range 40 {
		p := randomProblem(rng, 2+rng.IntN(11), 1+rng.IntN(4))
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		f, err := formulate(&p)
		if err != nil {
			t.Fatal(err)
		}
		lo := make([]float64, f.nvar)
		b := bounds{lo: map[int]float64{}, hi: map[int]float64{}}
		// Some branch bounds: a count held at least 1, another at most 0.
		if i%2 == 1 && len(f.ints) > 1 {
			b.lo[f.ints[0]] = 1
			lo[f.ints[0]] = 1
			b.hi[f.ints[len(f.ints)-1]] = 0
		}
		rows := f.rows
		for _, v := range f.ints {
			if x, ok := b.hi[v]; ok {
				rows = append(rows[:len(rows):len(rows)], row{coef: map[int]float64{v: 1}, rhs: x, sign: -1})
			}
		}
		want, _, werr := lpSolve(f.nvar, f.obj, rows, lo, nil)
		got, x, gerr := f.solveBySite(rows, lo)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("problem %d: whole %v, by site %v", i, werr, gerr)
		}
		if werr != nil {
			continue
		}
		if math.Abs(got-want) > 1e-6*max(1, math.Abs(want)) {
			t.Errorf("problem %d: by site %.9g, whole %.9g", i, got, want)
		}
		// x satisfies every row.
		for _, r := range rows {
			lhs := 0.0
			for v, c := range r.coef {
				lhs += c * x[v]
			}
			if (r.sign <= 0 && lhs > r.rhs+1e-6) || (r.sign >= 0 && lhs < r.rhs-1e-6) {
				t.Errorf("problem %d: row %v %d %g: %g", i, r.coef, r.sign, r.rhs, lhs)
			}
		}
	}
}

// Plans by site and whole agree in rate and placeholders.
func TestDecomposePlan(t *testing.T) {
	for _, size := range [][2]int{{6, 3}, {8, 4}} {
		p := benchProblem(size[0], size[1])
		p.Relaxed = true
		whole, err := p.Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		f, err := formulate(&p)
		if err != nil {
			t.Fatal(err)
		}
		f.decompose = true
		bySite, err := f.solve(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(whole.Rate-bySite.Rate) > 1e-6*whole.Rate || f.fallbacks > 0 {
			t.Errorf("%v: rate %g by site (%d fallbacks), %g whole", size, bySite.Rate, f.fallbacks, whole.Rate)
		}
	}
}
