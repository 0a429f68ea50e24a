package plan

import (
	"math"
	"testing"
)

func TestCommandClass(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]string{
		"/opt/bin/mProjectPP -X in.fits out.fits": "mProjectPP",
		"OMP_NUM_THREADS=4 map -t 4 ref.bfa":      "map",
		"env A=1 nice ./sim --steps 10":           "sim",
		"sh -c 'pileup all.idx > out'":            "pileup",
		`bash -c "x; y"`:                          "x;",
		"":                                        "",
		"A=1":                                     "",
	} {
		if got := CommandClass(cmd); got != want {
			t.Errorf("CommandClass(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// TestEstimator: a class's runs at a site give its runtime there; its
// runs elsewhere are scaled by the sites' speeds, learned from classes
// that ran at both (here site b is twice as fast as a: speeds 2^-0.5 and
// 2^0.5, a site nothing ran at 1) or given; jobs of
// an unseen class fall back to their declared estimate, then the
// default, over the site's speed.
func TestEstimator(t *testing.T) {
	t.Parallel()
	var r Runtimes
	for _, v := range []float64{9, 11} {
		r.Add("sim", "a", v) // mean 10 at a
	}
	r.Add("sim", "b", 5)
	r.Add("post", "a", 4)
	r.Add("bad", "a", math.NaN()) // ignored
	r.Add("", "a", 1)             // ignored
	e := &Estimator{Learned: &r, Default: 60}
	for _, tc := range []struct {
		class    string
		declared float64
		site     string
		want     float64
		src      Source
	}{
		{"sim", 0, "a", 10, FromSite},
		{"sim", 99, "b", 5, FromSite},
		{"post", 0, "b", 2, FromClass},                  // twice as fast as at a
		{"sim", 0, "c", math.Sqrt(50), FromClass},       // at speed 1: (10/√2 + 5√2)/2
		{"new", 30, "b", 30 / math.Sqrt2, FromDeclared}, // declared over b's speed
		{"new", 0, "a", 60 * math.Sqrt2, FromDefault},
		{"bad", 0, "c", 60, FromDefault}, // a NaN sample is not kept
		{"new", 0, "c", 60, FromDefault},
	} {
		got, src := e.Est(tc.class, tc.declared, tc.site)
		if math.Abs(got-tc.want) > 1e-9 || src != tc.src {
			t.Errorf("Est(%s, %g, %s) = %g from %d; want %g from %d", tc.class, tc.declared, tc.site, got, src, tc.want, tc.src)
		}
	}
	// A given speed wins over the learned one; learned runs at the site
	// still win over both.
	e = &Estimator{Learned: &r, Default: 60, Speed: map[string]float64{"a": 1, "b": 4, "c": 0.5}}
	if got, _ := e.Est("post", 0, "b"); got != 1 {
		t.Errorf("post at b with speed 4 given: %g, want 1", got)
	}
	if got, _ := e.Est("new", 10, "c"); got != 20 {
		t.Errorf("declared 10 at c of speed 0.5: %g, want 20", got)
	}
	if got, _ := e.Est("sim", 0, "b"); got != 5 {
		t.Errorf("sim at b, measured 5: %g", got)
	}
	// Nothing learned: declared or default, at speed 1.
	e = &Estimator{Default: 7}
	if got, src := e.Est("sim", 0, "a"); got != 7 || src != FromDefault || e.SiteSpeed("a") != 1 {
		t.Errorf("no accounting: %g from %d", got, src)
	}
}
