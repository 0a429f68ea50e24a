package lpplace

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Small instances whose optimum is worked out by hand in each comment.
func TestPlanHandChecked(t *testing.T) {
	reader := func(site string, work, out float64) Stage {
		return Stage{Name: "read", Work: work, Out: out, Sites: []string{site}, MaxCopies: 1}
	}
	tests := []struct {
		name  string
		p     Problem
		rate  float64
		count [][]int
		cross float64
	}{{
		// 3 placeholders of speed 2 at 1 s of work each: 6 items/s.
		name: "one stage fills its site",
		p:    Problem{Stages: []Stage{{Name: "a", Work: 1}}, Sites: []Site{{Name: "A", Speed: 2, Max: 3}}},
		rate: 6, count: [][]int{{3}},
	}, {
		// The reader (1 item/s) bounds the rate; 3 s of work per item
		// needs 3 placeholders to keep up, not all 5 left.
		name: "reader bounds the rate, no more placeholders than needed",
		p: Problem{Stages: []Stage{reader("A", 1, 0), {Name: "w", Work: 3}},
			Sites: []Site{{Name: "A", Speed: 1, Max: 6}}},
		rate: 1, count: [][]int{{1}, {3}},
	}, {
		// 2.2 s of work per item: 2.2 placeholders, held as 3.
		name: "counts are whole placeholders",
		p: Problem{Stages: []Stage{reader("R", 1, 0), {Name: "w", Work: 2.2, Sites: []string{"W"}}},
			Sites: []Site{{Name: "R", Speed: 1, Max: 1}, {Name: "W", Speed: 1, Max: 5}}},
		rate: 1, count: [][]int{{1, 0}, {0, 3}},
	}, {
		// The same with W_MIN 0.85: 3 placeholders would need 1.16
		// items/s to be 85% busy, so 2 are held and the rate drops to
		// 2/2.2 = 0.909 (the reader is then 91% busy). The relaxation
		// alone says 1 item/s on 2.2 placeholders.
		name: "minimum utilisation trades rate for placeholders",
		p: Problem{Stages: []Stage{reader("R", 1, 0), {Name: "w", Work: 2.2, Sites: []string{"W"}}},
			Sites:   []Site{{Name: "R", Speed: 1, Max: 1}, {Name: "W", Speed: 1, Max: 5}},
			MinUtil: 0.85},
		rate: 2 / 2.2, count: [][]int{{1, 0}, {0, 2}},
	}, {
		// A's one placeholder reads; the work must go to B, and 1 MB
		// per item over 1 MB/s links bounds the rate to 1 item/s.
		name: "a shared link bounds the rate",
		p: Problem{Stages: []Stage{reader("A", 0.1, 1e6), {Name: "w", Work: 1}},
			Sites: []Site{{Name: "A", Speed: 1, Max: 1, Link: 1e6}, {Name: "B", Speed: 1, Max: 10, Link: 1e6}}},
		rate: 1, count: [][]int{{1, 0}, {0, 1}}, cross: 1e6,
	}, {
		// The same over a 0.5 MB/s link: 0.5 items/s, one placeholder
		// half busy.
		name: "a slower link",
		p: Problem{Stages: []Stage{reader("A", 0.1, 1e6), {Name: "w", Work: 1}},
			Sites: []Site{{Name: "A", Speed: 1, Max: 1, Link: 1e6}, {Name: "B", Speed: 1, Max: 10, Link: 0.5e6}}},
		rate: 0.5, count: [][]int{{1, 0}, {0, 1}}, cross: 0.5e6,
	}, {
		// B is twice as fast (2 placeholders would do what 4 at A do),
		// but its link carries 0.2 items/s, which keeps one of B's
		// placeholders (0.5 items/s) 40% busy, under W_MIN 0.7: B is
		// declined and A's 4 do the work.
		name: "declines a slow link",
		p: Problem{Stages: []Stage{reader("A", 1, 1e5), {Name: "w", Work: 4}},
			Sites:   []Site{{Name: "A", Speed: 1, Max: 5, Link: 2e4}, {Name: "B", Speed: 2, Max: 100, Link: 2e4}},
			MinUtil: 0.7},
		rate: 1, count: [][]int{{1, 0}, {4, 0}},
	}, {
		// The fast site's placeholders do 3 s of work in 1.5 s: 2 of
		// them keep up with the reader where 3 slow ones would.
		name: "prefers the faster site",
		p: Problem{Stages: []Stage{reader("S", 1, 0), {Name: "w", Work: 3}},
			Sites: []Site{{Name: "S", Speed: 1, Max: 10}, {Name: "F", Speed: 2, Max: 10}}},
		rate: 1, count: [][]int{{1, 0}, {0, 2}},
	}, {
		// W_F 0.5 (per edge, so not the reader): 3 placeholders carry 1
		// item/s, 4.5 are asked for: 5.
		name: "extra capacity",
		p: Problem{Stages: []Stage{reader("A", 1, 0), {Name: "w", Work: 3}},
			Sites: []Site{{Name: "A", Speed: 1, Max: 10}}, Extra: 0.5},
		rate: 1, count: [][]int{{1}, {5}},
	}, {
		// A placeholder's NIC (1 MB/s) adds 1 s of staging per 1 MB
		// item to 1 s of work: 2 placeholders per item/s.
		name: "staging in takes placeholder time",
		p: Problem{Stages: []Stage{reader("A", 1, 1e6), {Name: "w", Work: 1}},
			Sites: []Site{{Name: "A", Speed: 1, Max: 10, NIC: 1e6}}},
		rate: 1, count: [][]int{{1}, {2}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, err := tt.p.Plan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(pl.Rate-tt.rate) > 1e-6*max(1, tt.rate) {
				t.Errorf("rate %g, want %g (%s)", pl.Rate, tt.rate, pl.String(&tt.p))
			}
			if !reflect.DeepEqual(pl.Count, tt.count) {
				t.Errorf("counts %v, want %v (%s)", pl.Count, tt.count, pl.String(&tt.p))
			}
			if math.Abs(pl.Cross-tt.cross) > 1e-3 {
				t.Errorf("cross %g B/s, want %g", pl.Cross, tt.cross)
			}
			if !pl.Optimal {
				t.Errorf("not proved optimal in %d nodes", pl.Nodes)
			}
			checkPlan(t, &tt.p, pl)
		})
	}
}

// checkPlan checks a plan against the problem's constraints directly.
func checkPlan(t *testing.T, p *Problem, pl Plan) {
	t.Helper()
	used := make([]int, len(p.Sites))
	for k, st := range p.Stages {
		sum, copies := 0.0, 0
		for s := range p.Sites {
			n, r := pl.Count[k][s], pl.Flow[k][s]
			used[s] += n
			copies += n
			sum += r
			if c := p.Capacity(k, s); r > c*float64(n)*(1+1e-6)+1e-9 || r < p.MinUtil*c*float64(n)*(1-1e-6)-1e-9 {
				t.Errorf("stage %s at %s: %g items/s on %d placeholders of %g", st.Name, p.Sites[s].Name, r, n, c)
			}
		}
		if math.Abs(sum-pl.Rate) > 1e-6*max(1, pl.Rate) {
			t.Errorf("stage %s: %g items/s, pipeline %g", st.Name, sum, pl.Rate)
		}
		if st.MaxCopies > 0 && copies > st.MaxCopies {
			t.Errorf("stage %s: %d copies", st.Name, copies)
		}
	}
	for s, si := range p.Sites {
		if used[s] > si.Max {
			t.Errorf("site %s: %d placeholders of %d", si.Name, used[s], si.Max)
		}
	}
}

func TestPlanBadInput(t *testing.T) {
	ok := func() Problem {
		return Problem{Stages: []Stage{{Name: "a", Work: 1}}, Sites: []Site{{Name: "A", Speed: 1, Max: 1}}}
	}
	tests := []struct {
		name string
		edit func(*Problem)
		want string
	}{
		{"no stages", func(p *Problem) { p.Stages = nil }, "at least one stage"},
		{"repeated site", func(p *Problem) { p.Sites = append(p.Sites, p.Sites[0]) }, "repeated"},
		{"nan speed", func(p *Problem) { p.Sites[0].Speed = math.NaN() }, "finite"},
		{"negative work", func(p *Problem) { p.Stages[0].Work = -1 }, "finite"},
		{"unknown site", func(p *Problem) { p.Stages[0].Sites = []string{"Z"} }, "unknown site"},
		{"min util 1", func(p *Problem) { p.MinUtil = 1 }, "[0, 1)"},
		{"inf cross cost", func(p *Problem) { p.CrossCost = math.Inf(1) }, "cross cost"},
		{"no capacity", func(p *Problem) { p.Sites[0].Max = 0 }, "no site it can run at"},
		{"no work", func(p *Problem) { p.Stages[0].Work = 0 }, "give it work"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok()
			tt.edit(&p)
			_, err := p.Plan(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
		})
	}
	p := ok()
	p.Sites[0].Max = 0
	if _, err := p.Plan(context.Background()); !errors.Is(err, ErrNoCapacity) {
		t.Errorf("err %v is not ErrNoCapacity", err)
	}
}

// A cancelled context stops the search with an error when nothing was
// found.
func TestPlanCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := Problem{Stages: []Stage{{Name: "a", Work: 1}}, Sites: []Site{{Name: "A", Speed: 1, Max: 1}}}
	if _, err := p.Plan(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}

// The blast trace's pipeline as plan.LP builds it (measured seconds per
// site, a few hundred bytes per item, 10 MB/s links): link rows whose
// coefficients are 1e-9 made the simplex's bases singular. A link that
// cannot bind is left out, and the plan is found.
func TestPlanIllScaledLinks(t *testing.T) {
	p := Problem{Relaxed: true}
	for _, n := range []string{"s1", "s2", "s3", "s4"} {
		p.Sites = append(p.Sites, Site{Name: n, Speed: 1, Max: 4, Link: 1e7})
	}
	p.Stages = []Stage{
		{Name: "split", Work: 1, Out: 240, Times: []float64{0.054, 0.199, 0.147, 0.163}},
		{Name: "blast", Work: 1, Out: 554, Times: []float64{382.8, 21157, 20790, 20903}},
		{Name: "merge", Work: 1, Times: []float64{0.044, 0.132, 0.089, 0.102}},
	}
	pl, err := p.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Blast bounds the rate: 4 slots at s1 do 4/382.8 items/s, the
	// others 4/21157 or so each; nearly all of it at s1.
	if pl.Rate < 4/382.8 || pl.Flow[1][0] < 0.9*pl.Rate {
		t.Errorf("rate %g, blast flows %v", pl.Rate, pl.Flow[1])
	}
}
